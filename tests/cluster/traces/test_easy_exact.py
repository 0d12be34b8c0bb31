"""clusteremu's `easy-backfill`, `fcfs` and `sjf` placers against the independent reference
(tests/cluster/traces/easy_reference.py), job by job, on SWF logs imported with
`clusteremu import swf` and run with `clusteremu run --policy placer=...`.

Every job's wait (start - arrival) must equal the reference's (times are integers; 1e-6
absolute is allowed). The logs: random ones (P in {8, 64, 128}, many ties, requested times
-1 and shorter than the run, a few jobs wider than the machine) and a crafted one that hits
each boundary of the semantics (see easy_reference.CRAFTED_JOBS and the hand-worked starts
in test_easy_reference.py).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import main
from tests.cluster.traces.easy_reference import (
    BACKFILL_EXTRA,
    BACKFILL_SHORT,
    SwfLog,
    crafted_swf,
    parse_swf,
    random_swf,
    simulate,
)

pytestmark = pytest.mark.timeout(300)

TOLERANCE = 1e-6
#: name -> the SWF text (random logs: seed, processors, jobs).
LOGS = {
    "crafted": crafted_swf,
    "random-p8": lambda: random_swf(random.Random(8), 2000, 8),
    "random-p64": lambda: random_swf(random.Random(64), 1000, 64),
    "random-p128": lambda: random_swf(random.Random(128), 600, 128),
}


@dataclass
class Imported:
    log: SwfLog
    dir: Path
    report: dict  # type: ignore[type-arg]
    trace_ids: list[str]
    arrival_s: list[float]


def _clusteremu(*args: str | Path) -> None:
    """`clusteremu ARGS` as a user types it, in this process (the command line's own
    entry: parsing, checks, import or run, output files)."""
    assert main([str(a) for a in args]) == 0, f"clusteremu {' '.join(map(str, args))} failed"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """name -> the log imported once per module (each import is one command)."""
    root = tmp_path_factory.mktemp("easy-exact")
    cache: dict[str, Imported] = {}

    def get(name: str) -> Imported:
        if name not in cache:
            text = LOGS[name]()
            swf = root / f"{name}.swf"
            swf.write_text(text)
            out = root / name
            _clusteremu("import", "swf", swf, "--out", out)
            jobs = pq.read_table(out / "jobs.parquet").to_pydict()
            cache[name] = Imported(
                log=parse_swf(text),
                dir=out,
                report=json.loads((out / "import-report.json").read_text()),
                trace_ids=[str(t) for t in jobs["trace_id"]],
                arrival_s=list(jobs["arrival_s"]),
            )
        return cache[name]

    return get


def _check_import(imp: Imported) -> None:
    log, report = imp.log, imp.report
    kept = [j.number for j in sorted(log.jobs, key=lambda j: (j.submit, j.number))]
    assert report["rows_read"] == log.rows_read
    assert report["rows_kept"] == len(log.jobs)
    assert sum(report["dropped"].values()) == sum(log.dropped.values()) > 0, report["dropped"]
    assert imp.trace_ids == [str(n) for n in kept]
    # arrival_s may be shifted (s from the trace's first arrival), never scaled
    submits = {j.number: j.submit for j in log.jobs}
    shifts = {submits[int(t)] - a for t, a in zip(imp.trace_ids, imp.arrival_s, strict=True)}
    assert max(shifts) - min(shifts) <= TOLERANCE, "arrival_s is not the SWF submit time"


def _compare(imp: Imported, policy: str, placer: str, run_dir: Path) -> None:
    """Run the engine and compare every job's wait with the reference's."""
    _clusteremu("run", imp.dir / "scenario.yaml", "--policy", f"placer={placer}", "--out", run_dir)
    table = pq.read_table(run_dir / "jobs.parquet").to_pydict()
    expected = simulate(imp.log.jobs, imp.log.max_procs, policy)
    runs = {j.number: j.run for j in imp.log.jobs}
    assert sorted(table["job"]) == list(range(len(imp.trace_ids))), "one row per imported job"

    rows = sorted(
        zip(table["job"], table["arrival_s"], table["start_s"], table["end_s"], strict=True),
        key=lambda r: (imp.arrival_s[r[0]], r[0]),
    )
    wrong = []
    for job, arrival, start, end in rows:
        number = int(imp.trace_ids[job])
        ref = expected[number]
        start = math.nan if start is None else start  # never started
        end = math.nan if end is None else end
        wait_ok = abs(start - arrival - ref.wait) <= TOLERANCE
        if not (wait_ok and abs(end - start - runs[number]) <= TOLERANCE):
            wrong.append((job, number, arrival, start, end, ref))
    if wrong:
        job, number, arrival, start, end, ref = wrong[0]
        pytest.fail(
            f"{placer}: {len(wrong)} of {len(rows)} jobs differ from the reference; the first "
            f"(in arrival order): SWF job {number} (row {job}): engine wait "
            f"{start - arrival} (arrival {arrival}, start {start}, end {end}), "
            f"reference wait {ref.wait} (submit {ref.submit}, start "
            f"{ref.start}, end {ref.end}, {ref.how}"
            f"{', ends exactly at the shadow time' if ref.at_shadow else ''}"
            f"{f', reservation {ref.reservation}' if ref.reservation is not None else ''})"
        )


@pytest.mark.parametrize("name", list(LOGS))
def test_easy_backfill_exact(name: str, imported, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imp = imported(name)
    _check_import(imp)
    expected = simulate(imp.log.jobs, imp.log.max_procs, "easy")
    # the log exercises what it is meant to: both kinds of backfill
    assert {BACKFILL_SHORT, BACKFILL_EXTRA} <= {s.how for s in expected.values()}
    if name == "crafted":
        assert sum(s.at_shadow for s in expected.values()) == 2
    _compare(imp, "easy", "easy-backfill", tmp_path / "run")


def test_fcfs_is_easy_without_backfilling(imported, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _compare(imported("random-p64"), "fcfs", "fcfs", tmp_path / "run")


def test_sjf_exact(imported, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _compare(imported("random-p128"), "sjf", "sjf", tmp_path / "run")
