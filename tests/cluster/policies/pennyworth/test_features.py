"""Decision features of the allocation graph's vertices: the lazily read `FeatureView`, the
counters a `Walker` keeps up to date, legality, add costs and feasibility, each against a
recomputation from scratch (the partial plan priced by `plan_cost`), on random small
batches of every SLO kind, with and without the start-up delay in the response times."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterator

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.astar import solve
from clusteremu.cluster.policies.pennyworth.features import (
    SENTINEL,
    FeatureView,
    Vertex,
    Walker,
    action_names,
    decisions,
    examples_of_plan,
    feature_names,
    feature_width,
    lone_response_s,
    lone_types,
)
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost, response_times
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.slo import Slo
from tests.cluster.policies.pennyworth.test_astar import random_problem

KINDS = ["max", "rtpt", "avg", "percentile"]
SEEDS = {"max": 31, "rtpt": 32, "avg": 33, "percentile": 34}

#: A partial plan as the tests build it: VMs in renting order, the last one open.
Vms = list[tuple[int, list[int]]]


# -- problems, walks and recomputations from scratch ------------------------------------


def with_startup(problem: Problem, count: bool) -> Problem:
    """`problem` with its SLO counting (or not) the start-up delay in response times."""
    return dataclasses.replace(
        problem, slo=dataclasses.replace(problem.slo, count_startup_delay=count)
    )


def problems(kind: str, startup: bool, n: int, salt: int = 0) -> list[Problem]:
    """`n` random batches of at most 7 jobs, one to three VM types (`test_astar`)."""
    rng = np.random.default_rng([SEEDS[kind], int(startup), salt])
    return [with_startup(random_problem(rng, kind, types=1 + i % 3), startup) for i in range(n)]


def random_walk(problem: Problem, rng: np.random.Generator) -> list[int]:
    """A complete random legal decision sequence (adds preferred, so VMs hold several jobs
    and some of them end late)."""
    walker = Walker(problem)
    v = Vertex.start(problem)
    out: list[int] = []
    while not v.done:
        legal = walker.legal(v)
        adds = [a for a in legal if a >= walker.n_types]
        pool = adds if adds and rng.random() < 0.75 else legal
        action = int(pool[int(rng.integers(len(pool)))])
        out.append(action)
        walker.step(v, action)
    return out


def path(problem: Problem, actions: list[int]) -> Iterator[tuple[Walker, Vertex, Vms]]:
    """Every vertex along `actions` (the final one included), with the partial plan that
    leads to it. The vertex is stepped once the consumer asks for the next one."""
    walker = Walker(problem)
    v = Vertex.start(problem)
    vms: Vms = []
    for action in actions:
        yield walker, v, vms
        walker.step(v, action)
        if action < walker.n_types:
            vms.append((action, []))
        else:
            vms[-1][1].append(action - walker.n_types)
    yield walker, v, vms


def as_plan(vms: Vms) -> Plan:
    return Plan(tuple((k, tuple(ts)) for k, ts in vms))


def left_of(problem: Problem, vms: Vms) -> list[int]:
    left = list(problem.counts)
    for _, tasks in vms:
        for t in tasks:
            left[t] -= 1
    return left


def delay_of(problem: Problem, k: int) -> float:
    return float(problem.startup_delay_s[k]) if problem.slo.count_startup_delay else 0.0


def wait_of(problem: Problem, vms: Vms) -> float:
    """When a job added to the open VM now starts (s); 0 before the first rent."""
    if not vms:
        return 0.0
    k, tasks = vms[-1]
    return delay_of(problem, k) + sum(float(problem.runtime_s[t, k]) for t in tasks)


def lone(problem: Problem, t: int) -> tuple[int, float, float, bool]:
    """Task t's lone type from its definition, recomputed: the type of least price x run
    time on which a job alone meets the SLO's bound (else the cheapest); with the job's
    response time alone there, what that costs (start-up + price x run time) and whether
    it is on time."""
    slo = problem.slo
    runs = [k for k in range(len(problem.type_names)) if math.isfinite(problem.runtime_s[t, k])]
    runs.sort(key=lambda k: (float(problem.price_per_s[k] * problem.runtime_s[t, k]), k))

    def on_time(k: int) -> bool:
        e = float(problem.runtime_s[t, k])
        r = e + delay_of(problem, k)
        return slo.job_loss(r, e) == 0.0 if slo.per_job else r <= slo.target_s

    ok = [k for k in runs if on_time(k)]
    k = (ok or runs)[0]
    e = float(problem.runtime_s[t, k])
    usd = float(problem.startup_usd[k]) + float(problem.price_per_s[k]) * e
    return k, e + delay_of(problem, k), usd, bool(ok)


def late_allowed(problem: Problem) -> int:
    """N - ceil(p/100 x N): how many jobs the percentile SLO lets end after its target."""
    n = problem.jobs
    return n - min(n, max(1, math.ceil(problem.slo.percentile / 100.0 * n - 1e-12)))


def delta(problem: Problem, vms: Vms, t: int) -> tuple[float, float]:
    """(total cost, SLO loss) of the partial plan with a job of t appended to the open VM,
    minus those of the partial plan. `plan_cost` prices the jobs placed so far only: for
    max / rtpt each job's own term, for avg the mean of those n response times, for
    percentile their ceil(p/100 x n)-th smallest, where n counts the jobs placed."""
    before = plan_cost(problem, as_plan(vms))
    after = plan_cost(problem, as_plan([*vms[:-1], (vms[-1][0], [*vms[-1][1], t])]))
    return after[0] - before[0], after[1] - before[1]


def scratch_features(problem: Problem, walker: Walker, v: Vertex, vms: Vms) -> list[float]:
    """The feature vector of the module doc, recomputed from the partial plan alone
    (`feasible_adds` counts `Walker.feasible`: that is checked against its definition in
    the feasibility tests)."""
    T, K = len(problem.task_names), len(problem.type_names)
    n = max(1, problem.jobs)
    left = left_of(problem, vms)
    k_open = vms[-1][0] if vms else -1
    on_open = vms[-1][1] if vms else []
    out = [wait_of(problem, vms)]
    out += [1.0 if k == k_open else 0.0 for k in range(K)]
    out += [on_open.count(t) / len(on_open) if on_open else 0.0 for t in range(T)]
    addable = [
        k_open >= 0 and left[t] > 0 and math.isfinite(problem.runtime_s[t, k_open])
        for t in range(T)
    ]
    deltas = [delta(problem, vms, t) if addable[t] else (SENTINEL, SENTINEL) for t in range(T)]
    out += [d[0] for d in deltas]
    out += [d[1] for d in deltas]
    out += [1.0 if left[t] else 0.0 for t in range(T)]
    out += [left[t] / n for t in range(T)]
    resp, _ = response_times(problem, as_plan(vms))
    slo = problem.slo
    jobs_left = sum(left)
    out.append(
        (slo.target_s * n - sum(resp)) / jobs_left if slo.kind == "avg" and jobs_left else 0.0
    )
    late = sum(1 for r in resp if r > slo.target_s)
    out.append(float(late_allowed(problem) - late) if slo.kind == "percentile" else 0.0)
    out.append(
        float(sum(1 for t in range(T) if addable[t] and walker.feasible(v, K + t)))
        if k_open >= 0
        else 0.0
    )
    return out


def close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# -- feature vectors ---------------------------------------------------------------------


def test_names_and_widths_agree() -> None:
    tasks, types = ("a", "b", "c"), ("s", "l")
    names = feature_names(tasks, types)
    assert len(names) == feature_width(3, 2) == 1 + 2 + 5 * 3 + 3 == len(set(names))
    assert names[:3] == ["wait_s", "open_type=s", "open_type=l"]
    assert names[-3:] == ["avg_budget_s", "late_budget", "feasible_adds"]
    assert action_names(tasks, types) == ["rent s", "rent l", "add a", "add b", "add c"]


@pytest.mark.parametrize("startup", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_views_equal_feature_vectors_and_a_recomputation_from_scratch(
    kind: str, startup: bool
) -> None:
    """At every vertex of the A* plan and of two random walks: each entry of the view
    (read in a random order, twice) equals `Walker.features`, which equals the vector
    recomputed from the partial plan."""
    rng = np.random.default_rng([SEEDS[kind], int(startup), 99])
    checked = 0
    for problem in problems(kind, startup, 20):
        walker = Walker(problem)
        width = feature_width(len(problem.task_names), len(problem.type_names))
        assert walker.width == width == len(feature_names(problem.task_names, problem.type_names))
        optimal = decisions(solve(problem).plan, walker.n_types)
        for actions in (optimal, random_walk(problem, rng), random_walk(problem, rng)):
            for w, v, vms in path(problem, actions):
                full = w.features(v)
                view = w.view(v)
                assert isinstance(view, FeatureView) and len(view) == width == full.size
                order = rng.permutation(width).tolist() * 2
                assert [view[i] for i in order] == [float(full[i]) for i in order]
                expected = scratch_features(problem, w, v, vms)
                got = full.tolist()
                assert all(close(a, b) for a, b in zip(got, expected, strict=True)), (
                    problem,
                    vms,
                    [
                        (name, a, b)
                        for name, a, b in zip(
                            feature_names(problem.task_names, problem.type_names),
                            got,
                            expected,
                            strict=True,
                        )
                        if not close(a, b)
                    ],
                )
                checked += 1
    assert checked > 200


@pytest.mark.parametrize("startup", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_incremental_counters_equal_a_recomputation(kind: str, startup: bool) -> None:
    rng = np.random.default_rng([SEEDS[kind], int(startup), 7])
    for problem in problems(kind, startup, 25, salt=1):
        slo = problem.slo
        lone_s = [lone(problem, t)[1] for t in range(len(problem.task_names))]
        assert lone_response_s(problem) == pytest.approx(lone_s, rel=1e-12)
        assert lone_types(problem) == [lone(problem, t)[0] for t in range(len(lone_s))]
        for _, v, vms in path(problem, random_walk(problem, rng)):
            left = left_of(problem, vms)
            resp, _ = response_times(problem, as_plan(vms))
            finite = np.isfinite(problem.runtime_s)
            assert v.left == left
            assert v.jobs_left == sum(left) and v.done == (sum(left) == 0)
            assert v.left_on_type == [
                sum(c for t, c in enumerate(left) if finite[t, k])
                for k in range(len(problem.type_names))
            ]
            assert v.open_type == (vms[-1][0] if vms else -1)
            on_open = vms[-1][1] if vms else []
            assert v.n_on_open == len(on_open)
            assert v.on_open == [on_open.count(t) for t in range(len(left))]
            assert v.wait_s == pytest.approx(wait_of(problem, vms), rel=1e-12, abs=1e-9)
            assert v.response_sum_s == pytest.approx(sum(resp), rel=1e-12, abs=1e-9)
            assert v.lone_sum_s == pytest.approx(
                sum(c * lone_s[t] for t, c in enumerate(left)), rel=1e-9, abs=1e-6
            )
            assert v.lone_late == sum(c for t, c in enumerate(left) if lone_s[t] > slo.target_s)
            if kind == "percentile":
                assert v.sorted_response_s == pytest.approx(sorted(resp), rel=1e-12)
                assert v.late == sum(1 for r in resp if r > slo.target_s)
            else:  # kept for the percentile SLO only
                assert v.sorted_response_s == [] and v.late == 0
            assert v.plan() == as_plan(vms)


def test_avg_margin_is_on_the_sum_of_the_response_times() -> None:
    """Avg with a safety margin: the response times stay the means (no job-by-job
    padding); `sum_var_s2` is the variance of their sum (a VM's job j counts once for every
    job from it on: sum over VMs and jobs of c_j^2 var_j), `lone_var_s2` that of the jobs
    left alone on their lone types; the loss and `avg_budget_s` read the sum padded by z
    standard deviations of it."""
    z = 2.0
    rng = np.random.default_rng([SEEDS["avg"], 11])
    for problem in problems("avg", False, 20, salt=11):
        sd = np.where(np.isfinite(problem.runtime_s), 0.1 * problem.runtime_s, np.inf)
        problem = dataclasses.replace(problem, runtime_sd_s=sd, safety_z=z)
        var = problem.runtime_var_s2()
        lone_k = lone_types(problem)
        slo = problem.slo
        for walker, v, vms in path(problem, random_walk(problem, rng)):
            left = left_of(problem, vms)
            want = sum(
                (len(tasks) - i) ** 2 * float(var[t, k])
                for k, tasks in vms
                for i, t in enumerate(tasks)
            )
            assert v.sum_var_s2 == pytest.approx(want, rel=1e-9, abs=1e-9)
            assert v.lone_var_s2 == pytest.approx(
                sum(c * float(var[t, lone_k[t]]) for t, c in enumerate(left)), abs=1e-6
            )
            resp, _ = response_times(dataclasses.replace(problem, safety_z=0.0), as_plan(vms))
            assert v.response_sum_s == pytest.approx(sum(resp), rel=1e-12, abs=1e-9)
            padded = sum(resp) + z * math.sqrt(want)
            if v.jobs_left:
                assert named(walker, v)["avg_budget_s"] == pytest.approx(
                    (slo.target_s * problem.jobs - padded) / v.jobs_left, rel=1e-9, abs=1e-6
                )
            for t in range(walker.n_tasks):
                if not walker.is_legal(v, walker.n_types + t):
                    continue
                after = copy.deepcopy(v)
                walker.step(after, walker.n_types + t)
                n = len(resp) + 1
                loss = slo.penalty_per_s * max(
                    0.0, (after.response_sum_s + z * math.sqrt(after.sum_var_s2)) / n - slo.target_s
                )
                loss -= (
                    slo.penalty_per_s * max(0.0, padded / max(1, n - 1) - slo.target_s)
                    if resp
                    else 0.0
                )
                assert walker.add_loss(v, t) == pytest.approx(loss, rel=1e-9, abs=1e-12)


# -- legality ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_legal_decisions(kind: str) -> None:
    """`legal` lists exactly the decisions `is_legal` allows; a rent needs no open VM or a
    job on it, and a job left it can run; an add needs an open VM that runs a job left of
    its task; stepping an illegal add raises and changes nothing."""
    rng = np.random.default_rng([SEEDS[kind], 5])
    no_runtime = 0
    for problem in problems(kind, False, 40, salt=2):
        walker = Walker(problem)
        K, T = walker.n_types, walker.n_tasks
        for _, v, vms in path(problem, random_walk(problem, rng)):
            left = left_of(problem, vms)
            legal = walker.legal(v)
            assert legal == [a for a in range(K + T) if walker.is_legal(v, a)]
            open_empty = bool(vms) and not vms[-1][1]
            for k in range(K):
                runs_some = any(
                    left[t] and math.isfinite(problem.runtime_s[t, k]) for t in range(T)
                )
                assert (k in legal) == (not open_empty and runs_some)
            for t in range(T):
                ok = bool(vms) and left[t] > 0 and math.isfinite(problem.runtime_s[t, vms[-1][0]])
                assert (K + t in legal) == ok
                if ok:
                    continue
                if vms and left[t] and not math.isfinite(problem.runtime_s[t, vms[-1][0]]):
                    no_runtime += 1
                before = copy.deepcopy(v)
                with pytest.raises(ValueError, match="not a legal decision"):
                    walker.step(v, K + t)
                assert v == before
                assert walker.add_cost(v, t) == walker.add_loss(v, t) == SENTINEL
            if not vms:
                assert all(a < K for a in legal)  # nothing to add to before the first rent
            if open_empty:
                assert all(a >= K for a in legal)  # no rent while the open VM is empty
                before = copy.deepcopy(v)
                with pytest.raises(ValueError, match="not a legal decision"):
                    walker.step(v, 0)
                assert v == before
    assert no_runtime > 0  # the case of a task with no run time on the open type was met


# -- add costs ---------------------------------------------------------------------------


@pytest.mark.parametrize("startup", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_add_cost_is_the_plan_cost_difference(kind: str, startup: bool) -> None:
    """For every legal add at every vertex of random walks: `add_cost` is the total cost of
    the partial plan with the job appended to the open VM minus that of the partial plan
    without it (see `delta`: the avg / percentile loss of the n jobs placed so far, as
    `Walker._batch_loss` computes it with n = N - jobs left), `add_loss` the loss part of it;
    `add_cost` = price x run time + `add_loss`; for max / rtpt the loss part is the job's
    own loss at its response time (wait + run time)."""
    rng = np.random.default_rng([SEEDS[kind], int(startup), 3])
    lossy = 0
    for problem in problems(kind, startup, 25, salt=3):
        slo = problem.slo
        for walker, v, vms in path(problem, random_walk(problem, rng)):
            for t in range(walker.n_tasks):
                if not walker.is_legal(v, walker.n_types + t):
                    continue
                k = v.open_type
                e = float(problem.runtime_s[t, k])
                cost, loss = delta(problem, vms, t)
                assert walker.add_cost(v, t) == pytest.approx(cost, rel=1e-9, abs=1e-12)
                assert walker.add_loss(v, t) == pytest.approx(loss, rel=1e-9, abs=1e-12)
                assert walker.add_cost(v, t) == pytest.approx(
                    float(problem.price_per_s[k]) * e + walker.add_loss(v, t), rel=1e-12
                )
                if slo.per_job:
                    own = slo.job_loss(wait_of(problem, vms) + e, e)
                    assert walker.add_loss(v, t) == pytest.approx(own, rel=1e-12, abs=1e-12)
                lossy += walker.add_loss(v, t) != 0.0
    assert lossy > 0


# -- feasibility -------------------------------------------------------------------------


def expected_feasible(problem: Problem, vms: Vms, t: int) -> bool | None:
    """Whether adding a job of t to the open VM is feasible by the module doc's definition
    (None: too close to the avg target to call, or an on-time per-job add: see
    `test_an_on_time_add_is_feasible`). Max / rtpt: a late add is infeasible exactly when
    the job alone on a new VM of its lone type is on time and costs less than the add (run
    time x price + loss). Avg: when the response times so far plus the lone ones of the
    jobs left fit target x N before the add, feasible when they still do after it and the
    jobs placed so far keep their mean within the target; when they do not, feasible when
    the job costs no more than alone on its lone type (start-up + price x run time there),
    its share of the loss it adds (penalty / N x its response time over its lone one)
    included. Percentile:
    infeasible when the jobs late so far plus those late even alone fit the N - ceil(p/100 x
    N) allowed before the add and no longer after it."""
    slo = problem.slo
    k = vms[-1][0]
    e = float(problem.runtime_s[t, k])
    r = wait_of(problem, vms) + e
    T = len(problem.task_names)
    lones = [lone(problem, s) for s in range(T)]
    if slo.per_job:
        loss = slo.job_loss(r, e)
        if loss == 0.0:
            return None
        k_lone, r_lone, usd, _ = lones[t]
        # Alone, the job still pays its own loss when it is late even there.
        usd += slo.job_loss(r_lone, float(problem.runtime_s[t, k_lone]))
        money = float(problem.price_per_s[k]) * e + loss
        if math.isclose(money, usd, rel_tol=1e-9):
            return None
        return money <= usd
    left = left_of(problem, vms)
    resp, _ = response_times(problem, as_plan(vms))
    if slo.kind == "avg":
        budget = slo.target_s * problem.jobs
        before = sum(resp) + sum(c * lones[s][1] for s, c in enumerate(left))
        if math.isclose(before, budget, rel_tol=1e-9):
            return None
        if before > budget:
            money = float(problem.price_per_s[k]) * e
            money += slo.penalty_per_s / problem.jobs * max(0.0, r - lones[t][1])
            if math.isclose(money, lones[t][2], rel_tol=1e-9):
                return None
            return money <= lones[t][2]
        after = before + r - lones[t][1]
        prefix, bound = sum(resp) + r, slo.target_s * (len(resp) + 1)
        if any(math.isclose(x, y, rel_tol=1e-9) for x, y in ((after, budget), (prefix, bound))):
            return None
        return after <= budget and prefix <= bound
    late = sum(1 for x in resp if x > slo.target_s)
    lone_late = sum(c for s, c in enumerate(left) if lones[s][1] > slo.target_s)
    before_late = late + lone_late
    after_late = before_late + (r > slo.target_s) - (lones[t][1] > slo.target_s)
    allowed = late_allowed(problem)
    return before_late > allowed or after_late <= allowed


@pytest.mark.parametrize("startup", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_feasibility_follows_its_definition(kind: str, startup: bool) -> None:
    """A rent is feasible exactly when no add of a job that costs no more on the open VM's
    type than on its lone type is; every legal add at every vertex of random
    walks and A* plans is feasible exactly as `expected_feasible` says; infeasible adds are
    met."""
    rng = np.random.default_rng([SEEDS[kind], int(startup), 4])
    seen = {True: 0, False: 0}
    for problem in problems(kind, startup, 30, salt=4):
        optimal = decisions(solve(problem).plan, len(problem.type_names))
        for actions in (optimal, random_walk(problem, rng), random_walk(problem, rng)):
            for walker, v, vms in path(problem, actions):
                legal = walker.legal(v)
                adds = [a for a in legal if a >= walker.n_types]
                # Adds of jobs that cost no more on the open VM's type than on their lone one.
                some_add = vms and any(
                    walker.feasible(v, a)
                    and problem.price_per_s[vms[-1][0]]
                    * problem.runtime_s[a - walker.n_types, vms[-1][0]]
                    <= (1 + 1e-9)
                    * problem.price_per_s[lone(problem, a - walker.n_types)[0]]
                    * problem.runtime_s[a - walker.n_types, lone(problem, a - walker.n_types)[0]]
                    for a in adds
                )
                for a in legal:
                    if a < walker.n_types and kind == "avg":
                        # Avg: a rent is feasible exactly when some job left can start on
                        # the new VM feasibly.
                        fresh = [*vms, (a, [])]
                        starts = [
                            expected_feasible(problem, fresh, t)
                            for t in range(walker.n_tasks)
                            if left_of(problem, vms)[t] and math.isfinite(problem.runtime_s[t, a])
                        ]
                        if None not in starts:
                            assert walker.feasible(v, a) == any(starts)
                        continue
                    if a < walker.n_types:
                        # A rent is feasible exactly when no add of a job that belongs on
                        # the open VM's type is (or no VM is open).
                        assert walker.feasible(v, a) == (not vms or not some_add)
                        continue
                    expected = expected_feasible(problem, vms, a - walker.n_types)
                    if expected is None:
                        continue
                    assert walker.feasible(v, a) == expected, (problem, vms, a)
                    seen[expected] += 1
    assert seen[False] > 0, seen
    # Without the start-up delay an rtpt job alone is always on time, and a late add's
    # loss ($0.01/s) outweighs any start-up cost ($0.004 at most) unless it is late by
    # under half a second: all the late rtpt adds met are infeasible.
    assert seen[True] > 0 or (kind, startup) == ("rtpt", False), seen


def one_task_max(
    startup_usd: float, deadline_s: float, delay_s: float = 0.0, count: bool = False
) -> Problem:
    """Two jobs of a 100 s task on one type at $0.01/s; max SLO, $0.01 per second late."""
    slo = Slo("max", 0.01, deadline_s=deadline_s, count_startup_delay=count)
    return Problem(
        ("a",),
        ("vm",),
        np.array([[100.0]]),
        np.array([0.01]),
        np.array([startup_usd]),
        np.array([delay_s]),
        (2,),
        ((0, 1),),
        slo,
    )


@pytest.mark.parametrize(
    ("startup_usd", "deadline_s", "delay_s", "count", "feasible"),
    [
        # The second job ends at 200 s, 50 s late: the add costs $1 + $0.50; alone on a new
        # VM the job is on time and costs the start-up + $1: infeasible iff start-up < 0.5.
        (0.2, 150.0, 0.0, False, False),
        (0.49, 150.0, 0.0, False, False),
        (0.5, 150.0, 0.0, False, True),  # equal: feasible
        (0.8, 150.0, 0.0, False, True),
        # A 90 s deadline: the job is late even alone (10 s, $0.10), but added it is 110 s
        # late ($1.10): a new VM costs less, so the add is infeasible (jobs bound to be late
        # must not pile up on one VM).
        (0.0, 90.0, 0.0, False, False),
        # ... unless the start-up costs more than the extra lateness.
        (1.1, 90.0, 0.0, False, True),
        # A 30 s start-up delay counted: 230 s, 80 s late ($0.80): infeasible iff < 0.8.
        (0.7, 150.0, 30.0, True, False),
        (0.9, 150.0, 30.0, True, True),
        # Not counted: 50 s late again.
        (0.7, 150.0, 30.0, False, True),
    ],
)
def test_a_late_max_add_is_infeasible_when_a_lone_vm_costs_less(
    startup_usd: float, deadline_s: float, delay_s: float, count: bool, feasible: bool
) -> None:
    problem = one_task_max(startup_usd, deadline_s, delay_s, count)
    walker = Walker(problem)
    v = Vertex.start(problem)
    walker.step(v, 0)
    assert walker.feasible(v, 1)  # the first job: on time (or late even alone)
    walker.step(v, 1)
    assert walker.add_loss(v, 0) == pytest.approx(
        0.01 * (delay_s * count + 200.0 - deadline_s), rel=1e-12
    )
    assert walker.feasible(v, 0) is not feasible  # a rent: feasible when no add is
    assert walker.feasible(v, 1) is feasible
    assert walker.view(v)[walker.width - 1] == float(feasible)  # feasible_adds


def test_the_lone_type_is_the_cheapest_on_which_a_job_alone_is_on_time() -> None:
    """Type 'slow' runs the task for $0.20 but 200 s alone misses the 150 s deadline;
    'fast' runs it in 100 s for $1: the lone type is 'fast'. A task that is late alone
    everywhere gets its cheapest type."""
    problem = Problem(
        ("a", "b"),
        ("slow", "fast"),
        np.array([[200.0, 100.0], [400.0, 300.0]]),
        np.array([0.001, 0.01]),
        np.array([0.1, 0.3]),
        np.array([0.0, 0.0]),
        (1, 1),
        ((0,), (1,)),
        Slo("max", 0.01, deadline_s=150.0),
    )
    assert lone_types(problem) == [1, 0]
    assert lone_response_s(problem) == [100.0, 400.0]
    walker = Walker(problem)
    assert walker.lone_ok == [True, False]
    assert walker.lone_usd == pytest.approx([0.3 + 1.0, 0.1 + 0.4])


def test_an_on_time_add_is_feasible() -> None:
    """The module doc: an add is infeasible only when it leaves no loss-free completion;
    an on-time add to a dear VM keeps the every-job-alone completion loss-free."""
    problem = Problem(
        ("a",),
        ("small", "big"),
        np.array([[100.0, 100.0]]),
        np.array([0.01, 0.04]),
        np.array([0.1, 0.1]),
        np.array([0.0, 0.0]),
        (1,),
        ((0,),),
        Slo("max", 1.0, deadline_s=1000.0),
    )
    walker = Walker(problem)
    v = Vertex.start(problem)
    walker.step(v, 1)  # rent 'big'
    assert walker.add_loss(v, 0) == 0.0  # on time: ends at 100 s, the deadline is 1000 s
    assert walker.feasible(v, 2)


def two_task_avg() -> Problem:
    """Tasks a (100 s, two jobs) and b (300 s, one job) on one type; avg target 190 s, so
    target x N = 570 s; each job alone: a 100 s, b 300 s (500 s for the batch)."""
    return Problem(
        ("a", "b"),
        ("vm",),
        np.array([[100.0], [300.0]]),
        np.array([0.01]),
        np.array([0.1]),
        np.array([0.0]),
        (2, 1),
        ((0, 1), (2,)),
        Slo("avg", 0.02, target_s=190.0),
    )


def named(walker: Walker, v: Vertex) -> dict[str, float]:
    names = feature_names(walker.p.task_names, walker.p.type_names)
    return dict(zip(names, walker.features(v).tolist(), strict=True))


def test_avg_budget_and_feasibility_by_hand() -> None:
    problem = two_task_avg()
    walker = Walker(problem)
    v = Vertex.start(problem)
    assert named(walker, v)["avg_budget_s"] == pytest.approx(570.0 / 3)
    assert named(walker, v)["feasible_adds"] == 0.0  # no VM open
    assert walker.feasible(v, 0)  # a first job can start on a new VM
    walker.step(v, 0)  # rent
    # a: 100 + (500 - 100) = 500 <= 570, and 100 <= 190 for the one job placed; b: 300 +
    # (500 - 300) = 500 <= 570, but its 300 s alone is over the 190 s target: it would
    # spend the budget of the jobs after it.
    assert walker.feasible(v, 1) and not walker.feasible(v, 2)
    assert named(walker, v)["feasible_adds"] == 1.0
    walker.step(v, 1)  # add a: ends at 100 s
    f = named(walker, v)
    assert f["avg_budget_s"] == pytest.approx((570.0 - 100.0) / 2)
    assert (f["late_budget"], f["wait_s"]) == (0.0, 100.0)
    # a again: 100 + 200 + (400 - 100) = 600 > 570; b: 100 + 400 + (400 - 300) = 600 > 570.
    assert not walker.feasible(v, 1) and not walker.feasible(v, 2)
    assert f["feasible_adds"] == 0.0
    assert walker.feasible(v, 0)  # a rent: a can start on the new VM
    after = copy.deepcopy(v)
    walker.step(after, 0)  # a new VM: a 100 + 100 + 300 = 500 and 200 <= 2 x 190; b 100 +
    # 300 + 100 = 500, but 400 > 2 x 190
    assert named(walker, after)["feasible_adds"] == 1.0
    walker.step(v, 2)  # add b anyway: ends at 400 s; 500 + a alone 100 = 600 > 570 already
    f = named(walker, v)
    assert f["avg_budget_s"] == pytest.approx(570.0 - 500.0)
    # The target is lost: a on this VM ends at 500 s, 400 s after alone, which adds
    # $0.02 / 3 x 400 to the loss, more than a VM of its own costs ($0.1 + $1): no pile-up.
    assert not walker.feasible(v, 1) and f["feasible_adds"] == 0.0
    assert walker.feasible(v, 0)


def test_late_budget_and_feasibility_by_hand() -> None:
    """Percentile 50 of N = 4 jobs, target 150 s: ceil(2) = 2 must be on time, so 2 may be
    late. Task a runs 100 s (three jobs), b 200 s (one job, late even alone)."""
    problem = Problem(
        ("a", "b"),
        ("vm",),
        np.array([[100.0], [200.0]]),
        np.array([0.01]),
        np.array([0.1]),
        np.array([0.0]),
        (3, 1),
        ((0, 1, 2), (3,)),
        Slo("percentile", 0.02, target_s=150.0, percentile=50.0),
    )
    walker = Walker(problem)
    v = Vertex.start(problem)
    assert (walker.late_allowed, v.lone_late) == (2, 1)
    assert named(walker, v)["late_budget"] == 2.0
    walker.step(v, 0)
    walker.step(v, 1)  # a at 100 s: on time
    assert named(walker, v)["late_budget"] == 2.0
    # a at 200 s: late, 1 late + b late alone = 2 <= 2: feasible; b at 300 s: b was late
    # anyway.
    assert walker.feasible(v, 1) and walker.feasible(v, 2)
    walker.step(v, 1)  # a at 200 s: late
    f = named(walker, v)
    assert (f["late_budget"], v.late) == (1.0, 1)
    # a at 300 s: 2 late + b = 3 > 2: infeasible; b at 400 s: 2 late, b no longer counted
    # as late alone: 2 <= 2, feasible.
    assert not walker.feasible(v, 1) and walker.feasible(v, 2)
    assert f["feasible_adds"] == 1.0 and f["avg_budget_s"] == 0.0
    # With p = 95, ceil(3.8) = 4 jobs must be on time: none may be late.
    strict = dataclasses.replace(problem, slo=dataclasses.replace(problem.slo, percentile=95.0))
    assert Walker(strict).late_allowed == 0


# -- examples ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_examples_of_a_plan_are_its_decisions(kind: str) -> None:
    for problem in problems(kind, kind in ("avg", "max"), 15, salt=6):
        plan = solve(problem).plan
        x, y = examples_of_plan(problem, plan)
        labels = decisions(plan, len(problem.type_names))
        assert x.shape == (
            len(labels),
            feature_width(len(problem.task_names), len(problem.type_names)),
        )
        assert y.dtype == np.int64 and y.tolist() == labels
        rows = [w.features(v) for w, v, _ in path(problem, labels)][:-1]
        assert np.array_equal(x, np.vstack(rows))
        short = Plan(plan.vms[:-1])
        with pytest.raises(ValueError, match="leaves jobs unassigned"):
            examples_of_plan(problem, short)
        k, tasks = plan.vms[-1]
        extra = Plan((*plan.vms[:-1], (k, (*tasks, tasks[0]))))
        with pytest.raises(ValueError, match="not a legal decision"):
            examples_of_plan(problem, extra)


def test_an_empty_batch_has_no_examples() -> None:
    problem = dataclasses.replace(one_task_max(0.1, 150.0), counts=(0,), job_ids=((),))
    x, y = examples_of_plan(problem, Plan(()))
    assert x.shape == (0, feature_width(1, 1)) and y.size == 0
