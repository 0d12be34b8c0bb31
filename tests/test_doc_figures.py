"""The figures README.md and docs/ quote are what their commands print (issue 41, "truthful
output"). Each test runs a command a doc shows (in process, through `clusteremu.cli.main`,
with `--json` where the doc quotes a summary) and looks for the doc's figures, formatted as
the doc writes them, in the doc's own text: when a command's output drifts, the doc's
figure no longer matches and the test names it. Figures of expensive commands (Ray sweeps,
tuning, synthesis, the benchmarks) are not rerun here; the docs say they are an example
of one seed or one machine. The faults-rack paragraph is guarded in
tests/clusteremu/test_truthful_docs.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clusteremu.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    return ROOT.joinpath(name).read_text(encoding="utf-8")


def _flat(name: str) -> str:
    """The doc with every run of whitespace (line breaks included) made one space."""
    return " ".join(_doc(name).split())


def _row(name: str, start: str) -> str:
    """The one table row of the doc that starts with `start`."""
    rows = [line for line in _doc(name).splitlines() if line.startswith(start)]
    assert len(rows) == 1, (name, start, rows)
    return rows[0]


def _json(capsys: pytest.CaptureFixture[str], args: list[str]) -> object:
    assert main(args) == 0, args
    return json.loads(capsys.readouterr().out)


def _signed_percent(x: float, digits: int) -> str:
    """As the docs write a relative change: +0.34%, −0.25% (a true minus sign)."""
    return f"{x:+.{digits}%}".replace("-", "−")


def _text_block_after(name: str, marker: str) -> list[str]:
    """The lines of the first ```text block after `marker` in the doc."""
    text = _doc(name)
    rest = text[text.index(marker) :]
    rest = rest[rest.index("```text\n") + len("```text\n") :]
    return rest[: rest.index("```")].rstrip("\n").splitlines()


def test_readme_mm_c_mean_response_is_what_run_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # exact mode on Ray equals the single-process run by construction (tests/actors)
    readme = _flat("README.md")
    assert "clusteremu run mm-c --ray --shards 2" in readme
    summary = _json(capsys, ["run", "mm-c", "--json"])
    assert isinstance(summary, dict)
    mean = f"{summary['mean_response_time_s']:.4f} s"
    assert f"(mm-c: mean response {mean}, as without `--ray`)" in readme, mean
    assert f"above the exact {mean}" in readme, mean


def test_faults_mm2_table_is_what_run_prints(capsys: pytest.CaptureFixture[str]) -> None:
    doc = "docs/faults.md"
    assert "clusteremu run faults-mm2 --json" in _doc(doc)
    chain_mean = 2.1182  # the chain's exact mean response (row "chain")
    for restart, row_start, mean_digits, rate_digits in (
        ("redraw", "| `redraw` |", 2, 5),
        ("same", "| `same` |", 0, 4),
    ):
        summary = _json(capsys, ["run", "faults-mm2", "--set", f"restart_work={restart}", "--json"])
        assert isinstance(summary, dict)
        row = _row(doc, row_start)
        mean = summary["mean_response_time_s"]
        rate = summary["failure_kills"] / summary["measured_time_s"]
        figures = [
            f"{mean:.4f} s ({_signed_percent(mean / chain_mean - 1, mean_digits)})",
            # the kill rate; its change in the row is against the chain's unrounded rate
            f"| {rate:.{rate_digits}f} (",
            f"{summary['node_failures']:,}",
            f"{summary['availability']:.4f}",
        ]
        for figure in figures:
            assert figure in row, (restart, figure, row)


def test_faults_edge_comparison_is_what_compare_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = "docs/faults.md"
    text = _doc(doc)
    base = ["compare", "faults-edge", "--policy", "placer=first-fit", "--policy", "placer=scoring"]
    assert " ".join(base[:6]) in text
    assert " ".join(base) + " --set 'events=[]'" in text
    outage = _json(capsys, [*base, "--json"])
    calm = _json(capsys, [*base, "--set", "events=[]", "--json"])
    assert isinstance(outage, list) and isinstance(calm, list)
    rows = (("placer=first-fit", "| first-fit |"), ("placer=scoring", "| scoring "))
    for policy, row_start in rows:
        (o,) = [r["summary"] for r in outage if r["policy"] == policy]
        (c,) = [r["summary"] for r in calm if r["policy"] == policy]
        row = [cell.strip() for cell in _row(doc, row_start).strip("|").split("|")]
        assert row[1] == f"{c['mean_response_time_s']:.3f} s", (policy, row)
        assert row[2].startswith(f"{o['mean_response_time_s']:.3f} s"), (policy, row)
        assert row[3] == str(o["failure_kills"]), (policy, row)
        assert row[4] == f"{c['score']:.3f} → {o['score']:.3f}", (policy, row)
    (o_ff,) = [r["summary"] for r in outage if r["policy"] == "placer=first-fit"]
    (o_sc,) = [r["summary"] for r in outage if r["policy"] == "placer=scoring"]
    (c_ff,) = [r["summary"] for r in calm if r["policy"] == "placer=first-fit"]
    (c_sc,) = [r["summary"] for r in calm if r["policy"] == "placer=scoring"]
    rise = round(100 * (o_sc["mean_response_time_s"] / c_sc["mean_response_time_s"] - 1))
    assert f"(+{rise}%)" in _row(doc, "| scoring ")
    prose = " ".join(text.split())
    assert f"{o_sc['failure_kills']} kills against {o_ff['failure_kills']}" in prose
    assert f"rises by {rise}% over the run" in prose
    ff = f"({c_ff['mean_response_time_s']:.3f} to {o_ff['mean_response_time_s']:.3f} s)"
    assert ff in prose, ff


@pytest.mark.parametrize("example", ["mdp-example-3", "mdp-example-4"])
def test_mdp_learning_rows_are_what_learn_prints(
    example: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # examples 1 and 2 (1a, 400 iterations) take 10-30 s each: checked by hand, not here
    out = tmp_path / "learn"
    printed = _json(capsys, ["learn", example, "--json", "--out", str(out)])
    assert isinstance(printed, dict)
    summary = json.loads(out.joinpath("summary.json").read_text(encoding="utf-8"))
    assert printed["theta"] == summary["theta"]
    theta = summary["theta"]
    true = summary["true_theta"]
    cells = [
        example,
        summary["algorithm"],
        str(summary["iterations"]),
        f"{summary['departures']:,}",
        f"({theta['class1']:.3f}, {theta['class2']:.3f})",
        f"({true['class1']:g}, {true['class2']:g})",
        f"{printed['mean_jobs_in_system']:.5f}",
        f"{summary['mean_jobs_optimal']:.5f}",
        f"{summary['gap_percent']:+.3f} %",
    ]
    row = _row("docs/mdp.md", f"| {example} |")
    assert row == "| " + " | ".join(cells) + " |", (row, cells)


def test_swf_worked_example_is_what_the_commands_print(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = "docs/traces.md"
    text = _doc(doc)
    section = text[text.index("## A worked example: an SWF log") :]
    writer = section[section.index("```python\n") + len("```python\n") :]
    writer = writer[: writer.index("```")]
    monkeypatch.chdir(tmp_path)
    exec(compile(writer, "docs/traces.md (example.swf)", "exec"), {})  # noqa: S102

    # `--stats` printed ...: the whole block, line for line
    assert main(["import", "swf", "example.swf", "--stats"]) == 0
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    assert _text_block_after(doc, "`--stats` printed") == printed

    assert main(["import", "swf", "example.swf", "--out", "runs/example"]) == 0
    capsys.readouterr()

    # the replay under EASY backfilling: every line the doc shows (it elides some: "...")
    run = ["run", "runs/example/scenario.yaml", "--out", "runs/example-run"]
    assert main(run) == 0
    printed = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    shown = _text_block_after(doc, "and the replay under EASY backfilling")
    for line in shown:
        if line.strip() != "...":
            assert " ".join(line.split()) in printed, (line, printed)

    # the three queue policies: the compare table's figures
    compare = ["compare", "runs/example/scenario.yaml", "--policy", "placer=fcfs", "--policy"]
    compare += ["placer=sjf", "--policy", "placer=easy-backfill", "--metric"]
    compare += ["mean_bounded_slowdown", "--json"]
    rows = _json(capsys, compare)
    assert isinstance(rows, list)
    table = _text_block_after(doc, "The three queue policies every SWF study compares")
    assert len(table) == 1 + len(rows)
    for result, line in zip(rows, table[1:], strict=True):
        s = result["summary"]
        expected = [result["policy"], f"{s['mean_bounded_slowdown']:.6g}", "n/a"]
        expected.append(str(s["jobs_completed"]))
        assert line.split() == expected, (line, expected)


def test_engine_memory_figures_are_the_layout(capsys: pytest.CaptureFixture[str]) -> None:
    from cluster.state import layout_bytes

    b = layout_bytes(fit_index_rows=100_000)
    text = _flat("docs/engine.md")
    assert f"A job costs {b['per_job']} B of state from the layout" in text
    assert f"`jobs_f` {b['job_jobs_f']} (24 rows" in text
    assert f"`jobs_i` {b['job_jobs_i']}, two heap entries {b['job_heap']}" in text
    scratch = b["job_queue"] + b["job_members"] + b["job_alloc_out"]
    assert f"its queue entry and scratch entries {scratch}" in text
    assert f"and {b['job_decisions'] + b['job_wait']} for the Python placers'" in text
    assert (
        f"A node row costs {b['per_node']} B (`nodes_f` {b['node_nodes_f']}, `nodes_i` "
        f"{b['node_nodes_i']}, {b['node_gpu_free']} per GPU" in text
    )
    per_node = round(b["fit_index"] / 100_000)
    assert re.search(rf"{per_node} B per node at 100,000 nodes \(L = 131,072\)", text)


def test_gpu_share_fgd_row_is_what_compare_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # the doc's command compares seven placers (about 35 s); each placer's runs are its
    # own (common random numbers), so fgd alone prints fgd's row of the same table
    doc = "docs/gpu-frag.md"
    assert "clusteremu compare gpu-share --policy placer=fgd --policy" in _doc(doc)
    rows = _json(
        capsys, ["compare", "gpu-share", "--policy", "placer=fgd", "--replications", "5", "--json"]
    )
    assert isinstance(rows, list)
    (summary,) = [r["summary"] for r in rows]
    mean = summary["mean_response_time_s"]
    ci = summary["ci95"]["mean_response_time_s"]
    table = _doc(doc)[_doc(doc).index("On five replications of 20,000 jobs") :]
    (row,) = [line for line in table.splitlines() if line.startswith("| `fgd` |")][:1]
    assert row == f"| `fgd` | {mean:.2f} | {ci:.2f} |", row


def test_hetero_placement_kernel_counts_in_cluster_md(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the doc's windowed Ray run (not rerun here: Ray) "completes ... as the kernel does"
    summary = _json(capsys, ["run", "hetero-placement", "--json"])
    assert isinstance(summary, dict)
    claim = (
        f"completes {summary['jobs_completed']:,} jobs with {summary['jobs_unfinished']} "
        "unfinished, as the kernel does"
    )
    assert claim in _flat("docs/cluster.md"), claim
