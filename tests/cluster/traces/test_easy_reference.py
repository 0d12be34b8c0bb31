"""The EASY reference simulator itself, on small cases worked out by hand, and against a
second, time-stepped implementation of the same semantics on small random logs."""

from __future__ import annotations

import random

import pytest

from tests.cluster.traces.easy_reference import (
    BACKFILL_EXTRA,
    BACKFILL_SHORT,
    CRAFTED_JOBS,
    CRAFTED_PROCS,
    HEAD,
    Job,
    crafted_swf,
    parse_swf,
    random_swf,
    simulate,
    swf_text,
)


def _starts(result: dict) -> dict[int, int]:  # type: ignore[type-arg]
    return {number: s.start for number, s in sorted(result.items())}


def test_estimate_rules() -> None:
    assert Job(1, 0, 10, 1, 20).estimate == 20  # requested longer than the run
    assert Job(1, 0, 10, 1, 10).estimate == 10  # equal
    assert Job(1, 0, 10, 1, 4).estimate == 10  # requested shorter: the run
    assert Job(1, 0, 10, 1, -1).estimate == 10  # unknown: the run


def test_parse_swf_drops_wide_jobs() -> None:
    log = parse_swf(crafted_swf())
    assert log.max_procs == 8
    assert log.rows_read == 25
    assert log.dropped == {"wider_than_machine": 1}  # job 16 asks for 9 > 8 processors
    assert log.dropped_numbers == [16]
    assert [j.number for j in log.jobs] == [n for n in range(1, 26) if n != 16]
    assert log.jobs[1] == Job(2, 0, 5, 7, -1)


# Expected EASY starts of the crafted log (P = 8), phase by phase. "free" is the idle
# processors, "shadow"/"extra" the head's reservation in that pass.
#
# A  t=0: J1 (6p) starts, free 2. Head J2 (7p, req -1: est 5) does not fit; J1 estimated
#    to end 0+10=10: 2+6=8 >= 7, shadow 10, extra 8-7=1. J3 (2p, est 10): 2<=2 fits,
#    0+10=10 <= 10 (exactly at the shadow: counts as before) -> starts 0, free 0.
#    t=10: J1 and J3 end, free 8: J2 starts 10.             starts J1 0, J2 10, J3 0
# B  t=100: J4 (4p, run 20, est 50) starts, free 4; J5 (6p) waits (shadow 150).
#    t=120: J4 ends AND J6 (3p, est 5) arrives; both applied first: free 8, J5 starts
#    (free 2); J6 3p > 2 is the head (shadow 130 = J5's 120+10). t=130: J5 ends, J6 starts.
#    (Had the arrival been scheduled before the completion, J6 would have backfilled at
#    120 ending 125 <= 150 and J5 would have waited to 125.)   J4 100, J5 120, J6 130
# C  t=200: J7 (4p, run 30, req 10 -> est 30) starts, free 4, estimated end 230. Head J8
#    (8p): shadow 230, extra 0. J9 (4p, est 25): 200+25=225 <= 230 -> starts 200 (with est
#    10 for J7 the shadow would be 210 and J9 would wait). t=225: J9 ends, free 4, J8 still
#    waits. t=230: J7 ends, J8 starts.                           J7 200, J8 230, J9 200
# D  t=300: J10 (5p, est 20) starts, free 3. Head J11 (8p): shadow 320, extra 0. J12 (3p,
#    req -1: est 20): 300+20=320 <= 320 -> starts 300. t=320: J10 and J12 end, J11 starts.
#                                                               J10 300, J11 320, J12 300
# E  t=400: J13 (5p, req -1: est 20) starts, free 3. Head J14 (8p): shadow 420, extra 0.
#    J15 (3p, req 25): 425 > 420 and 3 > 0 -> waits. t=420: J13 ends, J14 starts (free 0),
#    J15 is the head. t=425: J14 ends, J15 starts.               J13 400, J14 420, J15 425
# F  J16 (9p) dropped; J17 (1p) starts 500.                    J17 500
# G  t=600: J18 (4p, est 100) starts, free 4. Head J19 (6p): 4+4=8 >= 6 at 700, shadow
#    700, extra 2. J20 (2p, est 50): 650 <= 700 (and 2 <= 2): ends before, starts, free 2,
#    extra stays 2. J21 (2p, est 200): 800 > 700 but 2 <= extra 2 -> starts, free 0,
#    extra 0. t=650: J20 ends (free 2). t=700: J18 ends, free 6: J19 starts.
#                                                      J18 600, J19 700, J20 600, J21 600
# H  t=1000: J22, J23 (3p each, est 50) start, free 2. Head J24 (4p): at 1050, 2+3=5 >= 4:
#    shadow 1050; free at 1050 counts both jobs ending then: 2+3+3=8, extra 8-4=4 (not
#    5-4=1). J25 (2p, est 100): 1100 > 1050 but 2 <= 4 -> starts 1000. t=1050: J22, J23
#    end, free 6: J24 starts.                       J22 1000, J23 1000, J24 1050, J25 1000
EASY_CRAFTED = {
    1: 0, 2: 10, 3: 0,
    4: 100, 5: 120, 6: 130,
    7: 200, 8: 230, 9: 200,
    10: 300, 11: 320, 12: 300,
    13: 400, 14: 420, 15: 425,
    17: 500,
    18: 600, 19: 700, 20: 600, 21: 600,
    22: 1000, 23: 1000, 24: 1050, 25: 1000,
}  # fmt: skip


def test_crafted_log_easy() -> None:
    log = parse_swf(crafted_swf())
    result = simulate(log.jobs, log.max_procs)
    assert _starts(result) == EASY_CRAFTED
    # how each backfilled job started, and the boundary cases hit
    backfilled = {n: s.how for n, s in result.items() if s.how != HEAD}
    assert backfilled == {
        3: BACKFILL_SHORT,
        9: BACKFILL_SHORT,
        12: BACKFILL_SHORT,
        20: BACKFILL_SHORT,
        21: BACKFILL_EXTRA,
        25: BACKFILL_EXTRA,
    }
    assert {n for n, s in result.items() if s.at_shadow} == {3, 12}
    # reservations of the heads that waited: J2 10, J5 150 (at t=100), J6 130, J8 230,
    # J11 320, J14 420, J15 425 (at t=420: J14 ends 420+5), J19 700, J24 1050
    assert {n: s.reservation for n, s in result.items() if s.reservation is not None} == {
        2: 10, 5: 150, 6: 130, 8: 230, 11: 320, 14: 420, 15: 425, 19: 700, 24: 1050,
    }  # fmt: skip
    # completions at start + run: J4 ends at 120 though its estimate says 150
    assert result[4].end == 120 and result[7].end == 230


# Strict FCFS on the same log: the first job that does not fit blocks the rest.
# A  J1 0 (free 2); J2 blocks J3. t=10: J2 starts (free 1), J3 2p waits. t=15: J3.
# B  as EASY (no backfill there): J4 100, J5 120, J6 130.
# C  J7 200; J8 blocks J9. t=230: J8 starts (free 0), t=240: J9.
# D  J10 300; J11 blocks J12. t=320: J11 (free 0), t=325: J12.
# E  as EASY: J13 400, J14 420, J15 425.   F  J17 500.
# G  J18 600; J19 blocks. t=700: free 8, J19 (free 2), J20 2p (free 0); t=710: J19 ends,
#    J21 starts 710.
# H  J22, J23 1000 (free 2); J24 blocks. t=1050: free 8, J24 (free 4), J25 (free 2) 1050.
FCFS_CRAFTED = {
    1: 0, 2: 10, 3: 15,
    4: 100, 5: 120, 6: 130,
    7: 200, 8: 230, 9: 240,
    10: 300, 11: 320, 12: 325,
    13: 400, 14: 420, 15: 425,
    17: 500,
    18: 600, 19: 700, 20: 700, 21: 710,
    22: 1000, 23: 1000, 24: 1050, 25: 1050,
}  # fmt: skip


def test_crafted_log_fcfs() -> None:
    log = parse_swf(crafted_swf())
    assert _starts(simulate(log.jobs, log.max_procs, "fcfs")) == FCFS_CRAFTED


def test_sjf_by_estimate_then_submit_then_number() -> None:
    # P = 4.  (number, submit, run, procs, requested)
    jobs = [
        Job(1, 0, 10, 2, 10),
        Job(2, 1, 20, 4, 20),
        Job(3, 1, 5, 2, 5),
        Job(4, 1, 5, 1, -1),  # estimate 5 (the run): ties J3, after it by number
        Job(5, 2, 3, 3, 8),  # estimate 8 (requested), though it runs 3
    ]
    # t=0: J1 starts, free 2. t=1: queue by estimate J3(5), J4(5), J2(20): J3 starts
    # (free 0), J4 blocks. t=2: J5 (est 8) queues: J4, J5, J2. t=6: J3 ends, free 2: J4
    # starts (free 1); J5 3p blocks. t=10: J1 ends, free 3: J5 starts (free 0); J2 blocks.
    # t=11: J4 ends (free 1). t=13: J5 ends, free 4: J2 starts.
    assert _starts(simulate(jobs, 4, "sjf")) == {1: 0, 2: 13, 3: 1, 4: 6, 5: 10}
    # waits: J2 13-1=12, J4 6-1=5, J5 10-2=8
    waits = {n: s.wait for n, s in simulate(jobs, 4, "sjf").items()}
    assert waits == {1: 0, 2: 12, 3: 0, 4: 5, 5: 8}


def test_easy_reservation_is_computed_once_per_pass() -> None:
    # P = 4. t=0: J1 (2p, est 10) and J2 (1p, est 4) start, free 1. Head J3 (3p): at 4,
    # 1+1=2 < 3; at 10, 2+2=4 >= 3: shadow 10, extra 4-3=1. J4 (1p, est 20): 20 > 10, 1 <= 1
    # extra -> starts (free 0, extra 0). J5 (1p, est 5) arrives at 0 too but free is 0.
    # t=4: J2 ends, free 1: new pass, shadow 10, free at 10: 1+2=3, extra 0. J5: 4+5=9 <= 10
    # -> starts 4. t=9: J5 ends, free 1. t=10: J1 ends, free 3: J3 starts.
    jobs = [
        Job(1, 0, 10, 2, 10),
        Job(2, 0, 4, 1, 4),
        Job(3, 0, 7, 3, 7),
        Job(4, 0, 20, 1, 20),
        Job(5, 0, 5, 1, 5),
    ]
    result = simulate(jobs, 4)
    assert _starts(result) == {1: 0, 2: 0, 3: 10, 4: 0, 5: 4}
    assert result[4].how == BACKFILL_EXTRA and result[5].how == BACKFILL_SHORT


def test_unknown_policy_and_wide_job_refused() -> None:
    with pytest.raises(ValueError, match="policy"):
        simulate([Job(1, 0, 1, 1)], 1, "lifo")
    with pytest.raises(ValueError, match="wider"):
        simulate([Job(1, 0, 1, 2)], 1)


# --- a second implementation: time-stepped, one second at a time ---------------------------


def stepped(jobs: list[Job], procs: int, policy: str) -> dict[int, int]:
    """The same semantics written the slow way: each integer second, drop the jobs that
    ended, queue the arrivals, then one pass with the shadow time found as the smallest
    estimated end at which enough processors are free."""
    waiting = sorted(jobs, key=lambda j: (j.submit, j.number))
    queue: list[Job] = []
    running: list[tuple[int, int, int]] = []  # (end, estimated end, procs)
    starts: dict[int, int] = {}
    t = min(j.submit for j in jobs)
    while len(starts) < len(jobs):
        running = [r for r in running if r[0] > t]
        queue += [j for j in waiting if j.submit == t]
        if policy == "sjf":
            queue.sort(key=lambda j: (j.estimate, j.submit, j.number))
        free = procs - sum(r[2] for r in running)
        chosen: list[Job] = []  # started in this pass, in order
        while queue and queue[0].procs <= free:
            chosen.append(queue.pop(0))
            free -= chosen[-1].procs
        if queue and policy == "easy":
            head = queue[0]
            ends = [(t + j.estimate, j.procs) for j in chosen] + [(r[1], r[2]) for r in running]
            free_at = {e: free + sum(p for e2, p in ends if e2 <= e) for e, _ in ends}
            shadow = min(e for e, f in free_at.items() if f >= head.procs)
            extra = free_at[shadow] - head.procs
            for job in list(queue[1:]):
                if job.procs > free:
                    continue
                ends_before = t + job.estimate <= shadow
                if ends_before or job.procs <= extra:
                    chosen.append(job)
                    queue.remove(job)
                    free -= job.procs
                    extra -= 0 if ends_before else job.procs
        for job in chosen:
            starts[job.number] = t
            running.append((t + job.run, t + job.estimate, job.procs))
        t += 1
    return starts


@pytest.mark.parametrize("policy", ["easy", "fcfs", "sjf"])
@pytest.mark.parametrize("seed", range(6))
def test_against_time_stepped(seed: int, policy: str) -> None:
    rng = random.Random(seed)
    procs = rng.choice([4, 8, 16])
    log = parse_swf(random_swf(rng, 150, procs, load=1.1, max_run=60))
    got = _starts(simulate(log.jobs, log.max_procs, policy))
    assert got == stepped(log.jobs, log.max_procs, policy)
    assert _starts(simulate(parse_swf(crafted_swf()).jobs, CRAFTED_PROCS, policy)) == stepped(
        parse_swf(crafted_swf()).jobs, CRAFTED_PROCS, policy
    )


# --- properties on larger random logs, and the generator itself ----------------------------


@pytest.mark.parametrize("seed,procs", [(1, 8), (2, 64), (3, 128)])
def test_random_logs(seed: int, procs: int) -> None:
    text = random_swf(random.Random(seed), 1500, procs)
    rows = [line.split() for line in text.splitlines() if not line.startswith(";")]
    assert f"; MaxProcs: {procs}" in text.splitlines()
    assert all(len(r) == 18 for r in rows)
    submits = [int(r[1]) for r in rows]
    assert submits == sorted(submits)
    assert len(submits) - len(set(submits)) > 100  # many jobs share a second
    requested = [(int(r[8]), int(r[3])) for r in rows]
    assert sum(req == -1 for req, _ in requested) > 50
    assert sum(0 < req < run for req, run in requested) > 50
    log = parse_swf(text)
    assert 0 < sum(log.dropped.values()) < 60

    for policy in ("easy", "fcfs", "sjf"):
        result = simulate(log.jobs, log.max_procs, policy)
        assert set(result) == {j.number for j in log.jobs}
        jobs = {j.number: j for j in log.jobs}
        # capacity: sweep starts (+) and ends (-); ends first at one instant
        events = sorted(
            [(s.start, 1, jobs[n].procs) for n, s in result.items()]
            + [(s.end, 0, -jobs[n].procs) for n, s in result.items()]
        )
        busy = 0
        for _, _, delta in events:
            busy += delta
            assert busy <= procs
        assert all(s.start >= s.submit for s in result.values())
        assert all(s.end == s.start + jobs[n].run for n, s in result.items())
        if policy == "fcfs":
            order = sorted(log.jobs, key=lambda j: (j.submit, j.number))
            starts = [result[j.number].start for j in order]
            assert starts == sorted(starts)
        if policy == "easy":
            # queues form and backfilling happens, both kinds
            hows = {s.how for s in result.values()}
            assert {BACKFILL_SHORT, BACKFILL_EXTRA} <= hows
            # EASY never delays the head past its first reservation
            assert all(
                s.start <= s.reservation for s in result.values() if s.reservation is not None
            )
            assert sum(s.wait > 0 for s in result.values()) > len(result) // 4


def test_crafted_jobs_listed_once() -> None:
    assert len({n for n, *_ in CRAFTED_JOBS}) == len(CRAFTED_JOBS)
    assert swf_text(8, [(1, 0, 5, 2, -1)]).splitlines()[1].split()[:9] == [
        "1", "0", "-1", "5", "2", "-1", "-1", "2", "-1",
    ]  # fmt: skip
