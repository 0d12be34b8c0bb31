"""An independent reference simulator of EASY backfilling on one parallel machine, and a
generator of random SWF logs to feed it and clusteremu alike.

Plain Python, no clusteremu import: it is written from the semantics alone, as a check on
the engine's `easy-backfill`, `fcfs` and `sjf` placers.

The machine has P processors (the SWF header's ``; MaxProcs: P``). A job has a submit time,
a run time (> 0), a processor count (>= 1) and an estimate: its requested time, or its run
time where the requested time is unknown (-1) or shorter than the run. A job always runs for
its logged run time (it completes at start + run, which may be before start + estimate). A
job wider than the machine never starts: `parse_swf` drops it and counts it.

The simulation is event driven: at each instant every completion and every arrival of that
instant is applied first, then the queue is scheduled once (one pass).

One EASY pass at instant t (``policy="easy"``):

1. The queue in FCFS order (submit time, then job number). While the head fits
   (free >= its processors) it starts, and the next job becomes the head.
2. The head does not fit: its reservation (the *shadow time*) is the earliest estimated end
   (start + estimate) of the running jobs at which the processors free now plus those of
   every running job estimated to end by then reach the head's processors. The *extra*
   processors are those free at the shadow time minus the head's processors, where "free at
   the shadow time" counts every running job whose estimated end is <= the shadow time, ties
   at the shadow time included (not only the jobs accumulated until the head fitted).
3. The rest of the queue, in FCFS order: a job that fits now (processors <= free) starts if
   it ends by its estimate no later than the shadow time (``t + estimate <= shadow``:
   ending exactly at the shadow time counts as before it) or uses only extra processors
   (``processors <= extra``). When it starts, free -= processors; and only if it did not
   satisfy ``t + estimate <= shadow``, extra -= processors. A job that satisfies both
   conditions counts as ending before the shadow and takes nothing from extra (its
   processors are back by the shadow time).

One reservation per pass: the shadow time and the extra processors are computed once, when
the head is found not to fit, and are only updated by the bookkeeping of step 3. (Recomputing
them after each backfill would give the same numbers: a job ending by the shadow time returns
its processors by then, and one that does not is exactly what step 3 takes from extra.)

``policy="fcfs"``: step 1 only (strict FCFS: the first job that does not fit blocks the
rest). ``policy="sjf"``: the queue ordered by estimate, then submit time, then job number,
scheduled strictly in that order (the first job that does not fit blocks the rest).

A job's wait is start - submit.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from dataclasses import dataclass, field

Number = int | float

POLICIES = ("easy", "fcfs", "sjf")
#: How a job started: at the head of the queue, backfilled ending by the shadow time, or
#: backfilled on the extra processors (not ending by the shadow time).
HEAD, BACKFILL_SHORT, BACKFILL_EXTRA = "head", "backfill-short", "backfill-extra"


@dataclass(frozen=True)
class Job:
    """One SWF job (`requested` is the SWF requested time, -1 where unknown)."""

    number: int
    submit: Number
    run: Number
    procs: int
    requested: Number = -1

    @property
    def estimate(self) -> Number:
        """The requested time, or the run time where unknown (< 0) or shorter than the run."""
        if self.requested < 0 or self.requested < self.run:
            return self.run
        return self.requested


@dataclass(frozen=True)
class Started:
    """Where and how a job ran. `at_shadow`: a backfilled job whose estimated end is exactly
    the shadow time. `reservation`: the shadow time computed in the first pass that found
    the job at the head of the queue, not fitting (None: it never waited at the head)."""

    number: int
    submit: Number
    start: Number
    end: Number
    how: str
    at_shadow: bool = False
    reservation: Number | None = None

    @property
    def wait(self) -> Number:
        return self.start - self.submit


@dataclass
class SwfLog:
    """A parsed SWF log: the machine, the kept jobs (file order) and what was dropped."""

    max_procs: int
    jobs: list[Job]
    rows_read: int
    dropped: Counter[str] = field(default_factory=Counter)
    dropped_numbers: list[int] = field(default_factory=list)


def _number(text: str) -> Number:
    value = float(text)
    return int(value) if value.is_integer() else value


def parse_swf(text: str) -> SwfLog:
    """Parse SWF text. Processors: field 5 (allocated), or field 8 (requested) where field 5
    is not positive. A job wider than MaxProcs is dropped (reason ``"wider_than_machine"``)."""
    max_procs: int | None = None
    rows: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            key, _, value = stripped[1:].partition(":")
            if key.strip().lower() == "maxprocs":
                max_procs = int(value.strip())
            continue
        fields = stripped.split()
        if len(fields) != 18:
            raise ValueError(f"SWF line with {len(fields)} fields, not 18: {line!r}")
        rows.append(fields)
    if max_procs is None or max_procs < 1:
        raise ValueError("SWF header has no positive '; MaxProcs:'")
    log = SwfLog(max_procs=max_procs, jobs=[], rows_read=len(rows))
    for fields in rows:
        procs = int(_number(fields[4]))
        if procs <= 0:
            procs = int(_number(fields[7]))
        job = Job(
            number=int(fields[0]),
            submit=_number(fields[1]),
            run=_number(fields[3]),
            procs=procs,
            requested=_number(fields[8]),
        )
        if job.run <= 0 or job.procs < 1:
            raise ValueError(f"job {job.number}: run time and processors must be positive")
        if job.procs > max_procs:
            log.dropped["wider_than_machine"] += 1
            log.dropped_numbers.append(job.number)
            continue
        log.jobs.append(job)
    return log


def simulate(jobs: list[Job], procs: int, policy: str = "easy") -> dict[int, Started]:
    """Run `jobs` on a machine of `procs` processors; returns each job's start, by number."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: one of {POLICIES}")
    numbers = [job.number for job in jobs]
    if len(set(numbers)) != len(numbers):
        raise ValueError("job numbers must be unique")
    for job in jobs:
        if job.procs > procs:
            raise ValueError(f"job {job.number} is wider than the machine ({job.procs} > {procs})")

    arrivals = sorted(jobs, key=lambda j: (j.submit, j.number))
    queue: list[Job] = []  # FCFS order (sorted by estimate first for sjf, in each pass)
    completions: list[tuple[Number, int]] = []  # heap of (end, number)
    running: dict[int, tuple[Number, int]] = {}  # number -> (estimated end, procs)
    reservation: dict[int, Number] = {}
    out: dict[int, Started] = {}
    free = procs
    nxt = 0

    def start(job: Job, t: Number, how: str, at_shadow: bool = False) -> None:
        nonlocal free
        free -= job.procs
        end = t + job.run
        heapq.heappush(completions, (end, job.number))
        running[job.number] = (t + job.estimate, job.procs)
        out[job.number] = Started(
            job.number, job.submit, t, end, how, at_shadow, reservation.get(job.number)
        )

    while nxt < len(arrivals) or completions:
        t = min(
            arrivals[nxt].submit if nxt < len(arrivals) else math.inf,
            completions[0][0] if completions else math.inf,
        )
        # Every completion and arrival at t, then one scheduling pass.
        while completions and completions[0][0] == t:
            _, number = heapq.heappop(completions)
            free += running.pop(number)[1]
        while nxt < len(arrivals) and arrivals[nxt].submit == t:
            queue.append(arrivals[nxt])
            nxt += 1
        if policy == "sjf":
            queue.sort(key=lambda j: (j.estimate, j.submit, j.number))

        # 1. Start heads while they fit.
        started = 0
        while started < len(queue) and queue[started].procs <= free:
            start(queue[started], t, HEAD)
            started += 1
        del queue[:started]
        if not queue or policy != "easy":
            continue

        # 2. The head's reservation: shadow time and extra processors.
        head = queue[0]
        ends = sorted(running.values())
        available = free
        shadow: Number | None = None
        for est_end, width in ends:
            if shadow is not None and est_end > shadow:
                break
            available += width  # ties at the shadow time are all counted
            if shadow is None and available >= head.procs:
                shadow = est_end
        assert shadow is not None, "a head that fits the machine always has a shadow time"
        extra = available - head.procs
        reservation.setdefault(head.number, shadow)

        # 3. Backfill the rest of the queue in FCFS order.
        rest: list[Job] = [head]
        for job in queue[1:]:
            if free > 0 and job.procs <= free:
                short = t + job.estimate <= shadow
                if short or job.procs <= extra:
                    start(
                        job,
                        t,
                        BACKFILL_SHORT if short else BACKFILL_EXTRA,
                        at_shadow=t + job.estimate == shadow,
                    )
                    if not short:
                        extra -= job.procs
                    continue
            rest.append(job)
        queue[:] = rest
    return out


# --- random SWF logs ---------------------------------------------------------------------

#: Run times users and systems like (many ties between completions and arrivals).
ROUND_TIMES = (1, 2, 5, 10, 15, 20, 30, 60, 90, 100, 120, 180, 300, 600, 900, 1200, 1800, 3600)


def _run_time(rng: random.Random, max_run: int) -> int:
    if rng.random() < 0.5:
        return rng.choice([r for r in ROUND_TIMES if r <= max_run] or [1])
    return max(1, min(max_run, round(math.exp(rng.uniform(0.0, math.log(max_run))))))


def _procs(rng: random.Random, procs: int, wide_fraction: float) -> int:
    if rng.random() < wide_fraction:
        return rng.randint(procs + 1, 2 * procs)
    draw = rng.random()
    if draw < 0.35:
        return 1
    if draw < 0.7:
        return rng.choice([2**k for k in range(procs.bit_length()) if 2**k <= procs])
    return rng.randint(1, procs)


def _requested(rng: random.Random, run: int, unknown: float, short: float) -> int:
    draw = rng.random()
    if draw < unknown:
        return -1
    if draw < unknown + short and run >= 2:
        return rng.randint(1, run - 1)
    kind = rng.random()
    if kind < 0.2:
        return run  # exact
    if kind < 0.6:
        return math.ceil(run * rng.uniform(1.0, 3.0))
    # rounded up to a round value, as users ask for
    return next((r for r in ROUND_TIMES if r >= run), math.ceil(run / 3600) * 3600)


def random_swf(
    rng: random.Random,
    n_jobs: int,
    procs: int,
    *,
    load: float = 0.9,
    max_run: int = 1800,
    tie_fraction: float = 0.3,
    wide_fraction: float = 0.01,
    unknown_fraction: float = 0.1,
    short_fraction: float = 0.1,
    start: int = 0,
) -> str:
    """A random SWF log of `n_jobs` jobs on a machine of `procs` processors.

    Integer times with many ties: a `tie_fraction` of jobs arrive at the same second as the
    previous one, run times are often round values (completions meet arrivals). Interarrival
    gaps are sized so the offered load (processor-seconds asked per processor-second) is
    about `load`: queues form and backfilling happens. A `wide_fraction` of jobs ask for
    more than `procs` processors; requested times are -1 (`unknown_fraction`), shorter than
    the run (`short_fraction`) or at least the run time.
    """
    sizes = [(_run_time(rng, max_run), _procs(rng, procs, wide_fraction)) for _ in range(n_jobs)]
    work = sum(run * min(width, procs) for run, width in sizes)
    mean_gap = work / (procs * load * max(n_jobs, 1)) / max(1e-9, 1.0 - tie_fraction)
    lines = [
        "; Version: 2.2",
        "; Computer: random test log (tests/cluster/traces/easy_reference.py)",
        f"; MaxJobs: {n_jobs}",
        f"; MaxRecords: {n_jobs}",
        f"; MaxProcs: {procs}",
    ]
    submit = start
    for number, (run, width) in enumerate(sizes, start=1):
        if number > 1 and rng.random() >= tie_fraction:
            submit += max(1, round(rng.expovariate(1.0 / mean_gap))) if mean_gap > 0 else 1
        requested = _requested(rng, run, unknown_fraction, short_fraction)
        user = rng.randint(1, 20)
        fields = [number, submit, -1, run, width, -1, -1, width, requested, -1, 1, user,
                  1 + user % 4, -1, -1, -1, -1, -1]  # fmt: skip
        lines.append(" ".join(str(f) for f in fields))
    return "\n".join(lines) + "\n"


def swf_text(procs: int, jobs: list[tuple[int, int, int, int, int]]) -> str:
    """SWF text of hand-written jobs: (number, submit, run, processors, requested time)."""
    lines = [f"; MaxProcs: {procs}"]
    for number, submit, run, width, requested in jobs:
        fields = [number, submit, -1, run, width, -1, -1, width, requested, -1, 1, 1, 1,
                  -1, -1, -1, -1, -1]  # fmt: skip
        lines.append(" ".join(str(f) for f in fields))
    return "\n".join(lines) + "\n"


#: A log on 8 processors crafted to hit each boundary of the semantics (job, submit, run,
#: processors, requested time). Its expected starts are worked out by hand in
#: test_easy_reference.py::test_crafted_log.
CRAFTED_PROCS = 8
CRAFTED_JOBS: list[tuple[int, int, int, int, int]] = [
    # A: a backfill ending exactly at the shadow time (extra too small), head with req -1
    (1, 0, 10, 6, 10),
    (2, 0, 5, 7, -1),
    (3, 0, 10, 2, 10),
    # B: a completion and an arrival at the same instant (t=120), a run shorter than its
    #    estimate
    (4, 100, 20, 4, 50),
    (5, 100, 10, 6, 10),
    (6, 120, 5, 3, 5),
    # C: requested time shorter than the run (the estimate is the run)
    (7, 200, 30, 4, 10),
    (8, 200, 10, 8, 10),
    (9, 200, 25, 4, 25),
    # D: a backfill job with requested time -1 (estimate = run), ending at the shadow time
    (10, 300, 20, 5, 20),
    (11, 300, 5, 8, 5),
    (12, 300, 20, 3, -1),
    # E: a running job with requested time -1 sets the shadow; a job past it waits
    (13, 400, 20, 5, -1),
    (14, 400, 5, 8, 5),
    (15, 400, 15, 3, 25),
    # F: a job wider than the machine (dropped) and a job at the same second
    (16, 500, 10, 9, 10),
    (17, 500, 1, 1, 1),
    # G: a backfill job both ending before the shadow and fitting extra takes no extra
    (18, 600, 100, 4, 100),
    (19, 600, 10, 6, 10),
    (20, 600, 50, 2, 50),
    (21, 600, 200, 2, 200),
    # H: two running jobs estimated to end at the shadow time: both count in extra
    (22, 1000, 50, 3, 50),
    (23, 1000, 50, 3, 50),
    (24, 1000, 10, 4, 10),
    (25, 1000, 100, 2, 100),
]


def crafted_swf() -> str:
    return swf_text(CRAFTED_PROCS, CRAFTED_JOBS)
