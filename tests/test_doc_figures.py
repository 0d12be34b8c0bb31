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
    from clusteremu.cluster.state import layout_bytes

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


def test_mdp_changepoint_figures_are_what_learn_prints(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 500 epochs of Algorithm 1a (about 12 s); docs/mdp-changepoint.png is this run's plot
    import pandas as pd

    out = tmp_path / "learn"
    _json(capsys, ["learn", "mdp-changepoint", "--json", "--out", str(out)])
    summary = json.loads(out.joinpath("summary.json").read_text(encoding="utf-8"))
    rows = pd.read_parquet(out / "estimates.parquet")
    epochs = [
        int(rows.loc[rows["time_s"] >= t, "iteration"].iloc[0]) for t in summary["change_times_s"]
    ]
    listed = ", ".join(map(str, epochs[:-1])) + f" and {epochs[-1]}"
    text = _flat("docs/mdp.md")
    assert f"they fall in epochs {listed} against the paper's" in text, listed
    assert f"the changes fall in epochs {listed} (paper:" in text, listed
    assert set(summary["tracking_delays_epochs"]) == {1}, summary["tracking_delays_epochs"]
    assert "one epoch after the epoch that contains it" in text
    gap = f"final gap {summary['gap_percent']:+.3f} %"
    assert gap in text, gap


def test_pennyworth_family_and_shipped_trees(capsys: pytest.CaptureFixture[str]) -> None:
    from clusteremu.cluster.policies.pennyworth.problem import runtime_sd, safe_response_s
    from clusteremu.cluster.policies.pennyworth.tree import RadTree
    from clusteremu.scenarios.loader import load_scenario

    doc = "docs/pennyworth.md"
    text = _flat(doc)
    specs = {
        slo: load_scenario(f"pennyworth-{slo}") for slo in ("max", "rtpt", "avg", "percentile")
    }
    spec = specs["max"]
    types = [t for t in spec.node_types if t.rentable]
    (delay,) = {t.startup_delay_s for t in types}
    family = (
        " / ".join(t.name for t in types)
        + " at "
        + " / ".join(f"${t.price_per_hour:g}" for t in types)
        + " per hour with start-up costs "
        + " / ".join(f"${t.startup_cost:g}" for t in types)
        + f" and {delay:g} s start-up delay"
    )
    assert family in text, family
    small = [c.runtime_by_node_type["t2.small"].mean for c in spec.classes]
    jobs = sum(c.arrival.count for c in spec.classes)
    batch = (
        f"a batch of {jobs} jobs over {len(spec.classes)} TPC-H-like tasks (q1 … q{len(small)}) "
        f"with mean run times from {min(small):g} s to {max(small) / 60:g} min on t2.small"
    )
    assert batch in text, batch
    sigmas = {d.sigma for c in spec.classes for d in c.runtime_by_node_type.values()}
    assert sigmas == {0.1} and "(σ = 0.1)" in text
    m, r, a, p = (specs[s].slo for s in ("max", "rtpt", "avg", "percentile"))
    slos = (
        f"max {m.deadline_s / 60:g} min with {100 * m.penalty_per_s:g}¢ per second late; "
        f"rtpt {r.factor:g}× the task's mean on {r.reference_type} (one bound per task, "
        f"whatever type runs the job), {100 * r.penalty_per_s:g}¢/s; avg {a.target_s / 60:g} "
        f"min, {100 * a.penalty_per_s:g}¢ per second of mean over; percentile "
        f"{p.percentile:g}% within {p.target_s / 60:g} min, {100 * p.penalty_per_s:g}¢/s."
    )
    assert slos in text, slos
    assert f"with slack 0.12 leaves every VM about {0.12 * m.deadline_s:.0f} s to spare" in text
    # safety padding: the third of three 4-min jobs (q3 on t2.small) at z = 3
    (q3,) = [c.runtime_by_node_type["t2.small"] for c in spec.classes if c.name == "q3"]
    assert q3.mean == pytest.approx(240.0)
    sd = runtime_sd(q3)
    pad = safe_response_s(0.0, 3 * sd**2, 3.0)
    padding = f"(a 4-min job's standard deviation is about {sd:.0f} s), a VM of three jobs of 4 min"
    assert padding in text, padding
    assert f"keeps about {pad / 60:.1f} min free at z = 3 (3 × √3 × {sd:.0f} s" in text, pad

    # the shipped trees: their size as `synthesize --tree` prints it, the slack they plan with
    for slo in specs:
        path = f"scenarios/policies/pennyworth-{slo}.json"
        explain = _json(capsys, ["synthesize", "--tree", path, "--json"])
        assert isinstance(explain, dict)
        nodes = re.match(r"RAD-tree: ([\d,]+) nodes", explain["explain"])
        assert nodes, explain["explain"][:80]
        tree = RadTree.load(ROOT / path)
        rows = [
            line
            for line in _doc(doc).splitlines()
            if line.startswith(f"| {slo} | ") and " nodes, " in line
        ]
        assert len(rows) == 1, rows
        assert rows[0].startswith(f"| {slo} | {nodes.group(1)} nodes, {tree.slack:.3f} |"), rows[0]
        used = tree.info["batches_used"]
        if used != 400:
            assert f"(the {slo} tree from {used} of them:" in text, (slo, used)


def _pct(x: float, digits: int) -> str:
    """As docs/provisioner.md writes a share: 0 %, 100 %, 28.3 % (a space before the sign)."""
    return "0 %" if x == 0 else "100 %" if x == 1 else f"{100 * x:.{digits}f} %"


def test_provisioner_rows_without_a_trained_model_are_what_compare_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # static, grouped and vpa need no `provision train` (20-30 s, checked by hand): the
    # predictive, smallest-bin and oracle rows are left to that
    doc = "docs/provisioner.md"
    text = _flat(doc)
    assert "clusteremu provision compare ml-workflow --model runs/sizing/sizing.json" in text
    compare = ["provision", "compare", "ml-workflow", "--json", "--provisioners"]
    result = _json(capsys, [*compare, "static,grouped,vpa"])
    assert isinstance(result, dict)
    rows = {r["provisioner"]: r for r in result["rows"]}
    for name, r in rows.items():
        cells = [
            name,
            f"{r['reserved_memory_gb_h']:,.0f}",
            _pct(r["memory_saving"], 1),
            f"{r['reserved_cpu_core_h']:,.0f}",
            _pct(r["cpu_saving"], 1),
            f"{r['requested_memory_gb_per_run']:,.0f}",
            _pct(r["u_rate"], 2),
            _pct(r["accuracy"], 1),
            f"{r['oom_kills']:,}",
            f"{r['retries']:,}",
            f"{r['wasted_core_s']:,.0f}",
            f"{r['mean_run_makespan_s']:,.0f}",
            f"{r['failed_jobs']:,}",
        ]
        assert _row(doc, f"| {name} |") == "| " + " | ".join(cells) + " |", cells
    vpa, static = rows["vpa"], rows["static"]
    claim = f"under-estimates {100 * vpa['u_rate']:.1f} % of the instances"
    claim += f" and fails {vpa['failed_jobs']}"
    assert claim in text, claim
    assert f"(the static requests' {static['mean_run_makespan_s']:,.0f} s is" in text

    retry = ["--set", "scheduler.provisioner.params.retry_limit=10"]
    rows10 = _json(capsys, [*compare, "vpa", *retry])["rows"]  # type: ignore[index]
    (vpa10,) = [r for r in rows10 if r["provisioner"] == "vpa"]
    claim = (
        f"VPA still fails {vpa10['failed_jobs']} jobs ({vpa10['reserved_memory_gb_h']:,.0f} GB-h)"
    )
    assert claim in text, claim

    # the static rows of the sensitivity table
    sigma = "workload.usage.params.heavy_noise_sigma"
    caps = [
        "--set",
        "workload.usage.params.light_cap_gb=null",
        "--set",
        "workload.usage.params.moderate_cap_gb=null",
        "--set",
        "workload.usage.params.moderate_spike_gb=[4, 30]",
    ]
    for label, sets in (
        ("0.15 (shipped)", []),
        ("0.5", ["--set", f"{sigma}=0.5"]),
        ("1.0", ["--set", f"{sigma}=1.0"]),
        ("0.5, caps lifted", ["--set", f"{sigma}=0.5", *caps]),
    ):
        rows = _json(capsys, [*compare, "static", *sets])["rows"]  # type: ignore[index]
        (s,) = [r for r in rows if r["provisioner"] == "static"]
        row = [cell.strip() for cell in _row(doc, f"| {label} | static |").strip("|").split("|")]
        expected = [f"{s['reserved_memory_gb_h']:,.0f}", _pct(s["memory_saving"], 1)]
        assert row[2:4] == expected, (label, row, expected)
        expected = [f"{s['oom_kills']:,}", f"{s['wasted_core_s']:,.0f}"]
        expected += [f"{s['mean_run_makespan_s']:,.0f}", f"{s['failed_jobs']:,}"]
        assert row[5:] == expected, (label, row, expected)


def test_tuning_fixed_score_is_what_run_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # the tuning itself (Ray, about a minute) is not rerun; its first evaluation is one run
    # of the scenario under the Fixed weights (the scenario's own), on the scenario's seed
    from clusteremu.cluster.policies.scoring.scorers import FIXED_WEIGHTS

    doc = "docs/tuning.md"
    zero = sorted(name for name, w in FIXED_WEIGHTS.items() if w == 0)
    assert zero == ["LeastAllocated", "RequestedToCapacityRatio"], FIXED_WEIGHTS
    assert set(FIXED_WEIGHTS.values()) == {0.0, 1.0}
    summary = _json(capsys, ["run", "faas-hybrid-balanced", "--set", "stop.time_s=100", "--json"])
    assert isinstance(summary, dict)
    fixed = f"{summary['score']:.4f}"
    block = _text_block_after(doc, "--budget 6 --out runs/tune-mine")
    assert block[1].split()[:2] == ["faas-hybrid-balanced", fixed], (block[1], fixed)
    assert block[4].split()[:3] == ["tpe", block[1].split()[2], fixed], (block[4], fixed)


def _faas_score(capsys: pytest.CaptureFixture[str], args: list[str]) -> float:
    summary = _json(capsys, ["run", "faas-hybrid-balanced", *args, "--json"])
    assert isinstance(summary, dict)
    return float(summary["score"])


def test_scoring_weights_table_is_what_run_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # ten runs of 500 nodes for 100 simulated seconds (about 1 s each)
    from clusteremu.tuners.domains import WEIGHT_NAMES

    doc = "docs/scoring.md"
    text = _flat(doc)
    base = ["--set", "cluster.generator.nodes=500", "--set", "stop.time_s=100"]
    only = "LatencyAwareImageLocality"
    flow = ", ".join(f"{w}: {int(w == only)}" for w in WEIGHT_NAMES)
    assert "clusteremu run faas-hybrid-balanced " + " ".join(base) + " --json" in text
    assert f"--set 'scheduler.placer.params.weights={{{flow}}}'" in text, flow
    for label, weights in (
        ("Fixed", None),
        ("MostAllocated only", "MostAllocated"),
        ("LeastAllocated only", "LeastAllocated"),
        ("LocalityType only", "LocalityType"),
        (f"{only} only", only),
    ):
        cells = [label]
        for setup in ("hybrid_balanced", "edge_sbc"):
            args = [*base, "--set", f"cluster.generator.name={setup}"]
            if weights is not None:
                flow = ", ".join(f"{w}: {int(w == weights)}" for w in WEIGHT_NAMES)
                args += ["--set", f"scheduler.placer.params.weights={{{flow}}}"]
            cells.append(f"{_faas_score(capsys, args):.3f}")
        assert _row(doc, f"| {label} |") == "| " + " | ".join(cells) + " |", cells


def test_scoring_full_scenario_comparison_is_what_compare_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = "docs/scoring.md"
    text = _flat(doc)
    args = ["compare", "faas-hybrid-balanced", "--policy", "placer=first-fit"]
    args += ["--policy", "placer=scoring"]
    assert "`clusteremu " + " ".join(args) + "`" in text
    rows = _json(capsys, [*args, "--json"])
    assert isinstance(rows, list)
    for result, row_start in zip(
        rows, ("| first-fit |", "| scoring (Fixed weights) |"), strict=True
    ):
        s = result["summary"]
        cells = [
            row_start.strip("| "),
            f"{s['mean_response_time_s']:.3f}",
            f"{s['score']:.3f}",
            f"{s['mean_setup_s']:.3f}",
            f"{s['jobs_completed']:,}",
        ]
        assert _row(doc, row_start) == "| " + " | ".join(cells) + " |", cells
    s = rows[1]["summary"]  # the benchmark's full run is this run
    requests = s["jobs_completed"] + s["jobs_unfinished"] + s["jobs_failed"]
    assert f"Full run (600 simulated s, {requests:,} requests)" in text, requests
    assert s["jobs_failed"] == 0 and "no failed request" in text
    assert f"(score {s['score']:.3f} with the Fixed weights" in text


def test_scoring_skippy_agreement_table_is_what_the_tool_prints() -> None:
    # `python -m tests.cluster.policies.scoring.skippy_agreement --decisions 1000` (about 7 s)
    pytest.importorskip("skippy")
    from tests.cluster.policies.scoring import skippy_agreement as agreement

    doc = "docs/scoring.md"
    assert "skippy_agreement --decisions 1000" in _doc(doc)
    tallies = agreement.run(1000, seed=0)

    def scores(t: agreement.Tally) -> str:
        if t.same_node_scores == t.node_scores:
            return f"{t.same_node_scores}/{t.node_scores} (100%)"
        if t.same_node_scores == 0:
            return "0 (0%)"
        return f"{t.same_node_scores} ({100 * t.same_node_scores / t.node_scores:.1f}%)"

    expected = []
    for name, modes in tallies.items():
        label = f"{name} (1.13)" if name in agreement.K113_PRIORITIES else name
        c, d = modes["compat"], modes["default"]
        expected.append(
            f"| {label} | compat | {c.same_choice}/{c.decisions} | {c.among_best} | {scores(c)} |"
        )
        expected.append(f"| | default | {d.same_choice} | {d.among_best} | {scores(d)} |")
    table = _doc(doc).split("| configuration | mode | same choice |", 1)[1]
    shown = [line for line in table.split("\n\n", 1)[0].splitlines()[2:]]
    assert shown == expected


def test_scoring_balanced_resource_float_example() -> None:
    text = _flat("docs/scoring.md")
    cores, exact = 0.1 / 0.15, 536870912 / 805306368
    assert f"0.1 / 0.15 = {cores!r} against {exact!r}" in text
    assert f"truncates to {int((1 - abs(cores - exact)) * 10)} and" in text
    assert "A pod of 100m / 512 MiB on a node with 150m / 768 MiB free" in text
    assert (512 * 2**20, 768 * 2**20) == (536870912, 805306368)
