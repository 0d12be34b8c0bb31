"""`compare --grid` and `bound`: a small version of the WHAM paper's Section 7 reproduction, the
figures, the JSON contract of `clusteremu bound`, and bad input (exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusteremu.cli import main
from clusteremu.cluster.compare import compare_grid, grid_table_text, short_label, total_cores
from clusteremu.scenarios.loader import load_scenario

BOUND = 0.499890  # the C* of our Appendix H reconstruction (docs/wham.md)
POLICIES = ["wham", "fw-cam", "equi", "greedy"]


@pytest.fixture(scope="module")
def small_sweep() -> list[dict]:
    """Appendix H at n = 16 and 64, 60,000 jobs x 4 replications per point and policy."""

    def load(value: str):  # type: ignore[no-untyped-def]
        return load_scenario(
            "appendix-h",
            [
                f"cluster.pools.0.cores={value}",
                "stop.jobs=60000",
                "stop.warmup_jobs=6000",
                "replications=4",
            ],
        )

    return compare_grid(load, ["16", "64"], [{"allocator": p} for p in POLICIES])


def _cost(records: list[dict], n: float, policy: str) -> float:
    return next(
        r["normalised_holding_cost"] for r in records if r["cores"] == n and r["policy"] == policy
    )


def test_small_reproduction_ordering(small_sweep: list[dict]) -> None:
    for n in (16.0, 64.0):
        bound = next(r["lower_bound"] for r in small_sweep if r["cores"] == n)
        assert bound == pytest.approx(BOUND, rel=1e-5)
        wham = _cost(small_sweep, n, "wham")
        # Common random numbers: every policy sees the same jobs, so the ordering is sharp.
        assert bound < wham < _cost(small_sweep, n, "equi") < _cost(small_sweep, n, "greedy")
        assert wham - bound < _cost(small_sweep, n, "fw-cam") - bound
    # WHAM converges: closer to the bound at 64 cores than at 16, within 5% at 64.
    assert _cost(small_sweep, 64.0, "wham") < _cost(small_sweep, 16.0, "wham")
    assert _cost(small_sweep, 64.0, "wham") < 1.05 * BOUND
    assert all(r["ci95"] > 0 for r in small_sweep)


def test_grid_table_lists_every_policy(small_sweep: list[dict]) -> None:
    text = grid_table_text(small_sweep)
    for p in POLICIES:
        assert p in text
    assert "0.49989" in text and "±" in text


def test_labels() -> None:
    assert short_label({"allocator": "wham"}) == "wham"
    assert (
        short_label({"allocator": "wham", "placer": "first-fit"})
        == "allocator=wham,placer=first-fit"
    )
    assert total_cores(load_scenario("appendix-h", ["cluster.pools.0.cores=32"])) == 32.0


def test_cli_grid_writes_both_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "compare",
            "appendix-h",
            "--grid",
            "cluster.pools.0.cores=4,8",
            "--policy",
            "allocator=wham",
            "--policy",
            "allocator=fw-cam",
            "--policy",
            "allocator=equi",
            "--set",
            "stop.jobs=3000",
            "--set",
            "stop.warmup_jobs=300",
            "--replications",
            "2",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    assert status == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["grid"], r["policy"]) for r in rows} == {
        (v, p) for v in ("4", "8") for p in ("wham", "fw-cam", "equi")
    }
    for name in ("convergence.png", "heuristics.png", "compare-grid.json"):
        assert (tmp_path / name).stat().st_size > 1000
    assert (tmp_path / "convergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_compare_without_grid_still_works(tmp_path: Path) -> None:
    assert (
        main(
            [
                "compare",
                "appendix-h",
                "--policy",
                "allocator=wham",
                "--set",
                "stop.jobs=2000",
                "--set",
                "stop.warmup_jobs=200",
                "--out",
                str(tmp_path),
                "--json",
            ]
        )
        == 0
    )
    assert (tmp_path / "compare.png").exists()


def test_cli_bound_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bound", "appendix-h", "--set", "cluster.pools.0.cores=1024", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"lower_bound", "widths"}
    assert out["lower_bound"] == pytest.approx(BOUND, rel=1e-5)
    assert out["widths"] == pytest.approx(
        {"class1": 2.62239, "class2": 3.93358, "class3": 2.29015}, rel=1e-5
    )


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("workload.classes.0.arrival.rate_per_s_per_core=3", "unstable load"),
        ("workload.classes.0.holding_cost=0", "holding_cost"),
        ("workload.classes.1.holding_cost=-1", "holding_cost"),
        ("workload.classes.0.speedup.exponent=1.5", "speedup.exponent"),
        (
            "workload.classes.2.speedup={kind: table, points: [[1, 1], [2, 1.5], [4, 1.2]]}",
            "speedup",
        ),
        ("workload.classes.2.speedup={kind: table, points: [[1, 1], [2, 3]]}", "super-linear"),
    ],
)
def test_bad_input_exits_2(override: str, field: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (
        ["bound", "appendix-h", "--set", override],
        [
            "run",
            "appendix-h",
            "--set",
            override,
            "--set",
            "stop.jobs=100",
            "--set",
            "stop.warmup_jobs=10",
        ],
    ):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert field in err and err.startswith("error:")


def test_bad_grid_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "compare",
                "appendix-h",
                "--grid",
                "cluster.pools.0.cores",
                "--policy",
                "allocator=wham",
            ]
        )
        == 2
    )
    assert "--grid" in capsys.readouterr().err
