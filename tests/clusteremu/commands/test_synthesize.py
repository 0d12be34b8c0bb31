"""`clusteremu synthesize`: a shipped scenario to a loadable tree near the A* optimum, its
rules, a re-run that resumes the examples, and bad input refused (exit 2) before any work,
with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from cluster.policies.pennyworth.tree import RadTree
from clusteremu.cli import main
from scenarios.loader import resolve_path
from tests.actors.conftest import ray_local  # noqa: F401

#: Small sizes: 160 batches of 3 jobs (4 chunks) cover most of the 120 job mixes.
SMALL = ["--batches", "160", "--jobs", "3", "--workers", "2"]


def tree_of(folder: Path) -> RadTree:
    return RadTree.load(folder / "tree.json")


@pytest.mark.ray
def test_synthesize_writes_a_tree_near_the_optimum_and_resumes(
    ray_local: None,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                "synthesize",
                "pennyworth-max",
                "--out",
                str(out),
                *SMALL,
                "--trials",
                "3",
                "--explain",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "pennyworth-max (max SLO): 160 batches of 3 jobs" in text
    assert "held-out plan cost / A* optimum" in text
    assert "if " in text and "-> rent t2." in text and "-> add q" in text  # the rules
    report = json.loads((out / "report.json").read_text())
    assert report["validation"]["mean_ratio"] <= 1.10
    assert report["trials"] == 3 and len(report["search"]) == 3
    assert report["chunks"] == {"total": 4, "already_done": 0, "solved": 4}
    tree = tree_of(out)
    assert tree.task_names == tuple(report["tasks"]) and tree.info["scenario"] == "pennyworth-max"
    assert tree.feature.size == report["tree"]["nodes"]
    assert pq.read_table(out / "examples").num_rows == report["examples"]
    assert tree.explain() in text

    # The same command again resumes: every chunk is on disk; the report is the JSON printed.
    assert (
        main(["synthesize", "pennyworth-max", "--out", str(out), *SMALL, "--trials", "1", "--json"])
        == 0
    )
    again = json.loads(capsys.readouterr().out)
    assert again["chunks"] == {"total": 4, "already_done": 4, "solved": 0}
    assert again["examples"] == report["examples"]
    assert again == json.loads((out / "report.json").read_text())


def _without_slo(tmp_path: Path) -> Path:
    data = yaml.safe_load(resolve_path("pennyworth-max").read_text())
    del data["slo"], data["scheduler"]
    path = tmp_path / "no-slo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batches", "0"], "--batches: expected at least 1, got 0"),
        (["--jobs", "0"], "--jobs: expected at least 1, got 0"),
        (["--trials", "0"], "--trials: expected at least 1, got 0"),
        (["--workers", "0"], "--workers: expected at least 1, got 0"),
        (["--seed", "-1"], "--seed: expected a non-negative integer"),
        (["--batches", "many"], "invalid int value: 'many'"),
        (["--batches", "10000000000000"], "--batches 10000000000000 of --jobs 6"),
    ],
)
def test_bad_numbers_exit_2_and_write_nothing(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["synthesize", "pennyworth-max", "--out", str(tmp_path / "out"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_bad_scenario_or_out_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"

    def refused(scenario: str, folder: Path, message: str) -> None:
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        assert main(["synthesize", scenario, "--out", str(folder)]) == 2
        assert message in capsys.readouterr().err
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before

    refused("pennyworth-maz", out, "did you mean the shipped scenario pennyworth-max")
    refused(str(_without_slo(tmp_path)), out, "slo: synthesize needs an slo")
    (tmp_path / "file").write_text("x")
    refused("pennyworth-max", tmp_path / "file", "is a file; expected a folder")
    refused("pennyworth-max", tmp_path / "file" / "sub", "is a file, so no folder can be made")
    out.mkdir()
    (out / "examples").write_text("x")
    refused("pennyworth-max", out, "examples is a file; expected the examples folder")
    (out / "examples").unlink()
    (out / "examples").mkdir()
    (out / "examples" / "notes.txt").write_text("mine")
    refused("pennyworth-max", out, "holds files but no _examples.json")


def test_examples_of_another_seed_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cluster.io import write_json
    from tuners.pennyworth import MANIFEST, plan_examples, scenario_problem

    base = scenario_problem("pennyworth-max")
    folder = tmp_path / "out" / "examples"
    write_json(plan_examples("pennyworth-max", base, 10, 6, 0).manifest(), folder / MANIFEST)
    before = (folder / MANIFEST).read_bytes()
    argv = ["synthesize", "pennyworth-max", "--out", str(tmp_path / "out"), "--seed", "5"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds examples of another configuration: seed 0 (now 5)" in err
    assert "delete" in err and "to start clean" in err
    assert (folder / MANIFEST).read_bytes() == before and len(list(folder.iterdir())) == 1
