"""The RAD-tree: fitted on A* plans it reproduces them; its plans place every job once by
legal decisions; its JSON file round-trips exactly and a damaged one is refused with the
file and field named; tasks it never saw are mapped to the nearest known ones; an
infeasible decision it ranks first is replaced by a feasible one."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.astar import Solution, solve
from clusteremu.cluster.policies.pennyworth.features import (
    Vertex,
    Walker,
    action_names,
    decisions,
    examples_of_plan,
    feature_names,
    feature_width,
    lone_types,
)
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem, problem_from_spec
from clusteremu.cluster.policies.pennyworth.tree import (
    FORMAT,
    VERSION,
    RadTree,
    TaskMapping,
    TreeFileError,
    _digest,
    wasserstein,
)
from clusteremu.cluster.slo import Slo
from clusteremu.scenarios.loader import load_scenario
from clusteremu.tuners.pennyworth import with_counts

SHIPPED = Path(__file__).resolve().parents[4] / "scenarios"

KINDS = ["max", "rtpt", "avg", "percentile"]
#: Training batches per SLO kind, of 2 to 6 jobs (A* takes well under a second for all).
TRAIN_BATCHES = 30


# -- problems and trees ------------------------------------------------------------------


@dataclass
class Trained:
    tree: RadTree
    problems: list[Problem]
    solutions: list[Solution]


@functools.cache
def base_problem(kind: str) -> Problem:
    """The shipped pennyworth-<kind> scenario's tasks, VM types and SLO (no jobs)."""
    spec = load_scenario(f"pennyworth-{kind}")
    assert spec.slo is not None and spec.slo.kind == kind
    return with_counts(problem_from_spec(spec, spec.slo), [0] * len(spec.classes))


def random_batches(base: Problem, seed: int, n: int, lo: int, hi: int) -> list[Problem]:
    """`n` batches of `lo` to `hi` jobs drawn uniformly over the tasks."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        jobs = rng.integers(0, len(base.task_names), int(rng.integers(lo, hi + 1)))
        out.append(with_counts(base, np.bincount(jobs, minlength=len(base.task_names)).tolist()))
    return out


@functools.cache
def trained(kind: str) -> Trained:
    """A fully grown tree (no depth limit, one example a leaf, no pruning) fitted on the
    A* plans of `TRAIN_BATCHES` random batches of the shipped scenario of `kind`."""
    base = base_problem(kind)
    problems = random_batches(base, 100 + KINDS.index(kind), TRAIN_BATCHES, 2, 6)
    solutions = [solve(p) for p in problems]
    xs, ys = zip(
        *(examples_of_plan(p, s.plan) for p, s in zip(problems, solutions, strict=True)),
        strict=True,
    )
    tree = RadTree.fit(
        np.vstack(xs), np.concatenate(ys), base.task_names, base.type_names, base.profiles or {}
    )
    return Trained(tree, problems, solutions)


def assert_valid(problem: Problem, plan: Plan) -> None:
    """Every job once, by legal decisions only (so no VM is left empty)."""
    walker = Walker(problem)
    v = Vertex.start(problem)
    for action in decisions(plan, walker.n_types):
        assert walker.is_legal(v, action), (plan, action)
        walker.step(v, action)
    assert v.done
    placed = np.bincount([t for _, ts in plan.vms for t in ts], minlength=len(problem.counts))
    assert placed.tolist() == list(problem.counts)
    assert all(tasks for _, tasks in plan.vms)


def single_leaf(base: Problem, labels: list[int]) -> RadTree:
    """A tree of one leaf that ranks decision `labels` (most frequent first)."""
    return RadTree(
        base.task_names,
        base.type_names,
        np.array([-2], dtype=np.int64),
        np.array([-2.0]),
        np.array([-1], dtype=np.int64),
        np.array([-1], dtype=np.int64),
        np.array([[float(len(labels) - i) for i in range(len(labels))]]),
        np.array(labels, dtype=np.int64),
        base.profiles or {},
        {},
    )


# -- fitted trees ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_tree_reproduces_the_optimal_plans_it_was_fitted_on(kind: str) -> None:
    """A fully grown tree sends each training row to a leaf of its own label unless two
    rows have equal features and different labels (the features do not see, for example,
    the response times on VMs already closed, nor which of two equally cheap decisions A*
    took), or where A* closes a VM that a job left still fits on (an infeasible rent, see
    `features`: the tree adds the job instead, on a path of its own). Observed: 30 of 30
    batches optimal for every kind. The bound, 90% (27 of 30), leaves room for a few
    conflicts that cost something (another scikit-learn's tie-breaking between equal
    splits)."""
    got = trained(kind)
    optimal = 0
    for problem, found in zip(got.problems, got.solutions, strict=True):
        plan = got.tree.plan(problem)
        assert_valid(problem, plan)
        cost = plan_cost(problem, plan)[0]
        assert cost >= found.cost * (1 - 1e-9) - 1e-12  # never below the optimum
        optimal += cost <= found.cost * (1 + 1e-9) + 1e-12
    assert optimal >= 0.9 * len(got.problems), optimal


@pytest.mark.parametrize("kind", KINDS)
def test_plans_of_unseen_batches_place_every_job_once_legally(kind: str) -> None:
    got = trained(kind)
    for problem in random_batches(base_problem(kind), 200, 40, 1, 25):
        assert_valid(problem, got.tree.plan(problem))


def test_a_3000_job_batch_is_planned() -> None:
    base = base_problem("max")
    rng = np.random.default_rng(3000)
    counts = np.bincount(
        rng.integers(0, len(base.task_names), 3000), minlength=len(base.task_names)
    ).tolist()
    problem = with_counts(base, counts)
    plan = trained("max").tree.plan(problem)
    assert sum(len(ts) for _, ts in plan.vms) == 3000
    assert_valid(problem, plan)


# -- files -------------------------------------------------------------------------------


def assert_same(a: RadTree, b: RadTree) -> None:
    for name in ("feature", "threshold", "left", "right", "counts", "classes"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert (a.task_names, a.type_names) == (b.task_names, b.type_names)
    assert (a.profiles, a.info) == (b.profiles, b.info)


@pytest.mark.parametrize("kind", ["max", "percentile"])
def test_a_tree_round_trips_through_json(kind: str, tmp_path: Path) -> None:
    tree = trained(kind).tree
    path = tmp_path / "tree.json"
    tree.save(path)
    loaded = RadTree.load(path)
    via_dict = RadTree.from_dict(tree.to_dict())
    via_text = RadTree.from_dict(json.loads(json.dumps(tree.to_dict())))
    for other in (loaded, via_dict, via_text):
        assert_same(tree, other)
        assert other.to_dict() == tree.to_dict()
        assert other.explain() == tree.explain()
    data = json.loads(path.read_text())
    assert (data["format"], data["version"], data["sha256"]) == (
        FORMAT,
        VERSION,
        _digest(data["tree"]),
    )
    assert data["tree"]["features"] == feature_names(tree.task_names, tree.type_names)
    for problem in random_batches(base_problem(kind), 300, 50, 1, 12):
        plan = tree.plan(problem)
        assert loaded.plan(problem) == plan and via_dict.plan(problem) == plan


#: A change made to a tree file's data (or to its body, or to its nodes).
Edit = Callable[[dict[str, Any]], object]


def retamper(edit: Edit) -> Edit:
    """An edit of the tree body after which the digest is recomputed: only the checks of
    the structure can catch it."""

    def apply(data: dict[str, Any]) -> None:
        edit(data["tree"])
        data["sha256"] = _digest(data["tree"])

    return apply


def nodes(edit: Edit) -> Edit:
    """An edit of the body's node arrays."""
    return lambda body: edit(body["nodes"])


def first_inner(n: dict[str, Any]) -> int:
    return next(i for i, f in enumerate(n["feature"]) if f >= 0)


def delete_last_node(n: dict[str, Any]) -> None:
    for name in ("feature", "threshold", "left", "right", "counts"):
        del n[name][-1]


def set_first_inner(name: str, value: Callable[[dict[str, Any]], Any]) -> Edit:
    """Set node array `name` at the first inner node to `value(nodes)`."""

    def edit(n: dict[str, Any]) -> None:
        n[name][first_inner(n)] = value(n)

    return edit


def shift_threshold(data: dict[str, Any]) -> None:
    data["tree"]["nodes"]["threshold"][0] += 1.0


def set_top(key: str, value: Any) -> Edit:
    return lambda data: data.__setitem__(key, value)


#: (what is done to the file's data, the field the error names)
DAMAGE: dict[str, tuple[Edit, str]] = {
    "threshold changed": (shift_threshold, "sha256"),
    "node deleted": (lambda data: delete_last_node(data["tree"]["nodes"]), "sha256"),
    "format": (set_top("format", "other"), "format"),
    "version": (set_top("version", VERSION - 1), "version"),
    "tree not a mapping": (set_top("tree", [1, 2]), "tree"),
    "node deleted, digest recomputed": (retamper(nodes(delete_last_node)), "tree.nodes.left/right"),
    "left child past the end": (
        retamper(nodes(set_first_inner("left", lambda n: len(n["left"])))),
        "tree.nodes.left/right",
    ),
    "right child a loop": (
        retamper(nodes(set_first_inner("right", first_inner))),
        "tree.nodes.left/right",
    ),
    "inner node without a child": (
        retamper(nodes(set_first_inner("left", lambda n: -1))),
        "tree.nodes.left/right",
    ),
    "feature index past the end": (
        retamper(nodes(set_first_inner("feature", lambda n: 10_000))),
        "tree.nodes.feature",
    ),
    "threshold not finite": (
        retamper(nodes(set_first_inner("threshold", lambda n: math.nan))),
        "tree.nodes",
    ),
    "a threshold missing": (
        retamper(nodes(lambda n: n["threshold"].pop())),
        "tree.nodes.threshold",
    ),
    "counts of another width": (
        retamper(nodes(lambda n: [row.append(1.0) for row in n["counts"]])),
        "tree.nodes.counts",
    ),
    "decision label out of range": (
        retamper(lambda body: body["classes"].__setitem__(0, 99)),
        "tree.classes",
    ),
    "no nodes": (retamper(nodes(lambda n: n.update({k: [] for k in n}))), "tree.nodes"),
    "nodes missing": (retamper(lambda body: body.pop("nodes")), "tree.nodes"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_tree_file_is_refused(damage: str, tmp_path: Path) -> None:
    edit, field = DAMAGE[damage]
    path = tmp_path / "tree.json"
    data = trained("rtpt").tree.to_dict()
    edit(data)
    path.write_text(json.dumps(data))
    # NaN is not JSON: a file holding one is refused as it is parsed (issue 28)
    loaded = "not a JSON tree file (not valid JSON" if "NaN" in path.read_text() else field
    with pytest.raises(TreeFileError, match=f"^{re.escape(str(path))}: {re.escape(loaded)}"):
        RadTree.load(path)
    with pytest.raises(TreeFileError, match=f"^mine: {re.escape(field)}: "):
        RadTree.from_dict(json.loads(path.read_text()), "mine")


def test_a_tree_file_that_is_no_json_or_cannot_be_read_is_refused(tmp_path: Path) -> None:
    tree = trained("rtpt").tree
    path = tmp_path / "tree.json"
    tree.save(path)
    text = path.read_text()
    cases = {
        "cut.json": (text[: len(text) // 2], "not a JSON tree file"),
        "prose.json": ("a tree, honestly\n", "not a JSON tree file"),
        "empty.json": ("", "not a JSON tree file"),
        "list.json": ("[]", "format: expected"),
    }
    for name, (content, what) in cases.items():
        (tmp_path / name).write_text(content)
        with pytest.raises(TreeFileError, match=re.escape(f"{tmp_path / name}: {what}")):
            RadTree.load(tmp_path / name)
    (tmp_path / "latin1.json").write_bytes(b'{"format": "\xe9"}')
    (tmp_path / "folder.json").mkdir()
    for name in ("missing.json", "latin1.json", "folder.json"):
        with pytest.raises(TreeFileError, match=re.escape(f"{tmp_path / name}: cannot read")):
            RadTree.load(tmp_path / name)


# -- reading -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_explain_names_features_and_decisions(kind: str) -> None:
    tree = trained(kind).tree
    text = tree.explain()
    lines = text.splitlines()
    names = feature_names(tree.task_names, tree.type_names)
    actions = action_names(tree.task_names, tree.type_names)
    leaf_lines = [s.strip() for s in lines if s.strip().startswith("-> ")]
    assert len(leaf_lines) == tree.leaves > 1
    inner = [i for i in range(tree.feature.size) if tree.feature[i] >= 0]
    assert sum(s.strip().startswith("if ") for s in lines) == len(inner)
    assert sum(s.strip().startswith("else:") for s in lines) == len(inner)
    assert len(lines) == tree.leaves + 2 * len(inner)
    for i in inner:
        assert f"if {names[tree.feature[i]]} <= " in text
    for s in leaf_lines:
        label = s[3:].split("  (")[0]
        assert label in actions
    assert any(s.startswith("-> rent ") for s in leaf_lines)
    assert any(s.startswith("-> add ") for s in leaf_lines)
    assert max(len(s) - len(s.lstrip()) for s in lines) == 4 * tree.depth
    assert single_leaf(base_problem(kind), [1]).explain() == (
        f"-> rent {tree.type_names[1]}  (100% of 1 examples)"
    )


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_summary_ranks_features_and_cuts_the_rules_at_depth_3(kind: str) -> None:
    tree = trained(kind).tree
    names = feature_names(tree.task_names, tree.type_names)
    ranked = tree.importance()
    inner = tree.feature[tree.feature >= 0]
    assert sum(s for _, s, _ in ranked) == inner.size
    assert {f for f, _, _ in ranked} == {names[f] for f in inner}
    assert sum(g for _, _, g in ranked) == pytest.approx(1.0)
    assert [g for _, _, g in ranked] == sorted((g for _, _, g in ranked), reverse=True)
    lines = tree.summary(depth=2, top=3).splitlines()
    assert lines[0].startswith(f"RAD-tree: {tree.feature.size:,} nodes, {tree.leaves:,} leaves")
    assert [x.split()[0] for x in lines[2:5]] == [f for f, _, _ in ranked[:3]]
    rules = lines[lines.index(next(x for x in lines if x.startswith("decisions"))) + 1 :]
    assert rules[0] == f"  if {names[tree.feature[0]]} <= {round(float(tree.threshold[0]), 4)}:"
    assert max(len(x) - len(x.lstrip()) for x in rules) <= 2 + 4 * 2
    assert all(x.strip().startswith(("if ", "else:", "-> ", "... ")) for x in rules)
    assert len(rules) < len(tree.explain().splitlines())
    assert single_leaf(base_problem(kind), [1]).summary().splitlines()[-1] == (
        f"  -> rent {tree.type_names[1]}  (100% of 1 examples)"
    )


# -- unknown tasks -----------------------------------------------------------------------


def renamed(base: Problem, t: int, name: str, keep_profile: bool) -> Problem:
    names = list(base.task_names)
    old, names[t] = names[t], name
    profiles = None
    if keep_profile and base.profiles is not None:
        profiles = {(name if k == old else k): v for k, v in base.profiles.items()}
    return dataclasses.replace(base, task_names=tuple(names), profiles=profiles)


@pytest.mark.parametrize("keep_profile", [True, False])
def test_a_renamed_task_maps_to_the_original(keep_profile: bool) -> None:
    """Same run times under a new name: mapped to the task it was (by its quantiles, or,
    without them, by the constant profile of its mean run times)."""
    got = trained("max")
    base = base_problem("max")
    for t in range(len(base.task_names)):
        problem = renamed(base, t, "fresh", keep_profile)
        mapping = TaskMapping(got.tree, problem)
        assert mapping.task_to_tree == list(range(len(base.task_names)))
    for problem in random_batches(renamed(base, 2, "fresh", keep_profile), 5, 10, 1, 8):
        assert_valid(problem, got.tree.plan(problem))


@pytest.mark.parametrize("keep_profile", [True, False])
def test_a_task_with_run_times_close_to_another_maps_to_it(keep_profile: bool) -> None:
    """A new ninth task running 3% longer than q4 (quantiles scaled alike): q4 is nearest,
    and the batch's q4 and new jobs are all placed, adds of q4 taking either."""
    got = trained("max")
    base = base_problem("max")
    b = base.task_names.index("q4")
    assert base.profiles is not None
    profiles = {
        **base.profiles,
        "new": {k: [1.03 * q for q in v] for k, v in base.profiles["q4"].items()},
    }
    problem = dataclasses.replace(
        base,
        task_names=(*base.task_names, "new"),
        runtime_s=np.vstack([base.runtime_s, 1.03 * base.runtime_s[b]]),
        runtime_sd_s=None,
        counts=(*base.counts, 0),
        job_ids=(*base.job_ids, ()),
        profiles=profiles if keep_profile else None,
    )
    mapping = TaskMapping(got.tree, problem)
    assert mapping.task_to_tree == [*range(len(base.task_names)), b]
    near = wasserstein(profiles["new"], got.tree.profiles["q4"])
    assert near == pytest.approx(
        0.03 * float(np.mean([np.mean(v) for v in base.profiles["q4"].values()]))
    )
    assert all(
        wasserstein(profiles["new"], got.tree.profiles[t]) > near
        for t in base.task_names
        if t != "q4"
    )
    rng = np.random.default_rng(9)
    for _ in range(10):
        n = len(problem.task_names)
        counts = np.bincount(rng.integers(0, n, int(rng.integers(1, 9))), minlength=n).tolist()
        batch = with_counts(problem, counts)
        assert_valid(batch, got.tree.plan(batch))


def permuted(base: Problem, order: list[int]) -> Problem:
    """`base` with its tasks listed in `order` (names, run times, jobs and profiles kept)."""
    return dataclasses.replace(
        base,
        task_names=tuple(base.task_names[t] for t in order),
        runtime_s=base.runtime_s[order],
        runtime_sd_s=None if base.runtime_sd_s is None else base.runtime_sd_s[order],
        reference_mean_s=None if base.reference_mean_s is None else base.reference_mean_s[order],
        counts=tuple(base.counts[t] for t in order),
        job_ids=tuple(base.job_ids[t] for t in order),
    )


@pytest.mark.parametrize("kind", KINDS)
def test_plans_of_a_problem_with_tasks_in_another_order_are_valid(kind: str) -> None:
    got = trained(kind)
    order = [3, 0, 7, 5, 1, 9, 6, 2, 8, 4]
    for problem in random_batches(base_problem(kind), 7, 15, 1, 12):
        other = permuted(problem, order)
        mapping = TaskMapping(got.tree, other)
        assert mapping.task_to_tree == order and not mapping.identity
        plan = got.tree.plan(other)
        assert_valid(other, plan)


@pytest.mark.parametrize(
    "kind",
    [
        "max",
        "rtpt",
        "avg",
        "percentile",
    ],
)
def test_mapped_features_of_permuted_tasks_are_the_trees_own(kind: str) -> None:
    """The tree's view of a batch whose tasks are listed in another order is the feature
    vector of the same batch in the tree's order, at every vertex of its A* plan."""
    order = [3, 0, 7, 5, 1, 9, 6, 2, 8, 4]
    tree = single_leaf(base_problem(kind), [0])
    n_types = len(tree.type_names)
    for problem in random_batches(base_problem(kind), 8, 6, 2, 6):
        other = permuted(problem, order)
        mapping = TaskMapping(tree, other)
        walker, mine = Walker(problem), Walker(other)
        v, u = Vertex.start(problem), Vertex.start(other)
        for action in decisions(solve(other).plan, n_types):
            expected = walker.features(v)
            assert np.array_equal(np.asarray(mapping.features(mine, u)), expected), [
                name
                for name, a, b in zip(
                    feature_names(tree.task_names, tree.type_names),
                    np.asarray(mapping.features(mine, u)),
                    expected,
                    strict=True,
                )
                if a != b
            ]
            mine.step(u, action)
            walker.step(v, action if action < n_types else n_types + order[action - n_types])


# -- infeasible decisions ----------------------------------------------------------------


def test_an_infeasible_add_the_tree_ranks_first_is_replaced() -> None:
    """A one-leaf tree that always says 'add q9' (360 s on t2.small, here a 600 s
    deadline): a second q9 on a VM would end at 720 s, $1.20 of loss, where a new VM costs
    under a cent. The plan makes no job late."""
    base = base_problem("max")
    base = dataclasses.replace(base, slo=dataclasses.replace(base.slo, deadline_s=600.0))
    q21 = base.task_names.index("q9")
    n_types = len(base.type_names)
    tree = single_leaf(base, [n_types + q21])
    problem = with_counts(base, [3 if t == q21 else 0 for t in range(len(base.task_names))])
    walker = Walker(problem)
    v = Vertex.start(problem)
    walker.step(v, 0)
    walker.step(v, n_types + q21)
    assert walker.is_legal(v, n_types + q21) and not walker.feasible(v, n_types + q21)
    plan = tree.plan(problem)
    assert_valid(problem, plan)
    # (Three q9 fit on one t2.large, 79 s each there: the optimum's plan.)
    cost, loss = plan_cost(problem, plan)
    assert loss == 0.0
    # The rent is the fallback's (least price x run time per job: a t2.large, where a
    # t2.medium with its lower start-up cost is optimal): dearer, but nothing late.
    assert solve(problem).cost <= cost <= 1.25 * solve(problem).cost
    # With other tasks too: a job ends late only where that costs less than its own VM
    # of its lone type (where it would be on time); here that is at most a few seconds.
    lone = lone_types(base)
    slo = base.slo
    for batch in random_batches(base, 21, 10, 1, 10):
        plan = tree.plan(batch)
        assert_valid(batch, plan)
        for k, tasks in plan.vms:
            r = 0.0
            for t in tasks:
                e = float(base.runtime_s[t, k])
                r += e
                loss = slo.job_loss(r, e)
                kl = lone[t]
                e_lone = float(base.runtime_s[t, kl])
                assert slo.job_loss(e_lone, e_lone) == 0.0  # alone on its lone type: on time
                alone = float(base.startup_usd[kl] + base.price_per_s[kl] * e_lone)
                assert loss == 0.0 or float(base.price_per_s[k]) * e + loss <= alone, (plan, t)
        assert plan_cost(batch, plan)[1] < 0.01


def test_a_plan_completes_when_no_legal_decision_is_feasible() -> None:
    """A tree that always says 'rent slow': the open slow VM is empty (no rent is legal) and
    the job on it would end at 200 s, 50 s past the deadline ($0.50), where alone on a fast
    VM it ends at 100 s for $0.31: no legal decision is feasible. The plan adds the job
    to the slow VM anyway (the only legal decision)."""
    problem = Problem(
        ("a",),
        ("slow", "fast"),
        np.array([[200.0, 100.0]]),
        np.array([0.0001, 0.003]),
        np.array([0.01, 0.01]),
        np.array([0.0, 0.0]),
        (1,),
        ((0,),),
        Slo("max", 0.01, deadline_s=150.0),
    )
    tree = single_leaf(problem, [0])
    walker = Walker(problem)
    v = Vertex.start(problem)
    walker.step(v, 0)
    assert walker.legal(v) == [2] and not walker.feasible(v, 2)
    assert walker.add_loss(v, 0) == pytest.approx(0.5)
    plan = tree.plan(problem)
    assert plan == Plan(((0, (0,)),))
    assert_valid(problem, plan)


def test_a_tree_of_another_feature_width_is_refused() -> None:
    """`feature_width` of the tree's own tasks and types bounds the feature indices."""
    tree = trained("max").tree
    data = tree.to_dict()
    width = feature_width(len(tree.task_names), len(tree.type_names))
    data["tree"]["nodes"]["feature"][first_inner(data["tree"]["nodes"])] = width
    data["sha256"] = _digest(data["tree"])
    with pytest.raises(
        TreeFileError, match=f"tree.nodes.feature: expected feature indices below {width}"
    ):
        RadTree.from_dict(data)
    data["tree"]["nodes"]["feature"][first_inner(data["tree"]["nodes"])] = width - 1
    data["sha256"] = _digest(data["tree"])
    RadTree.from_dict(data)  # the last feature is a valid index


@pytest.mark.parametrize("kind", ["percentile", "rtpt"])
def test_the_tail_guard_keeps_the_cheapest_of_the_tree_and_its_rules(kind: str) -> None:
    """Guarded, a batch of at most the chunk size gets the plan of least expected cost of
    the tree's and its rules' (its margins and their own; ties: the tree's); unguarded, the
    tree's own. On the shipped tree over 30 batches of 32 jobs the guard keeps the tree's
    plan on some and another on others, and never a plan of more expected cost."""
    from clusteremu.cluster.policies.pennyworth.features import rules_plan
    from clusteremu.cluster.policies.pennyworth.spread import expected_cost
    from clusteremu.cluster.policies.pennyworth.tree import GUARD_DRAWS

    tree = RadTree.load(SHIPPED / "policies" / f"pennyworth-{kind}.json")
    spec = load_scenario(f"pennyworth-{kind}")
    assert spec.slo is not None
    base = problem_from_spec(spec, spec.slo)
    taken: list[str] = []
    for seed in range(30):
        tasks = np.random.default_rng(100 + seed).integers(0, len(base.task_names), 32)
        counts = np.bincount(tasks, minlength=len(base.task_names)).tolist()
        problem = with_counts(base, counts).with_slack(tree.slack).with_safety(tree.safety_z)
        own = tree._plan(problem)
        assert tree.plan(problem) == own  # unguarded: the tree's decisions
        plans = tree.guarded_candidates(problem)
        assert plans["planner"] == own and plans["rules"] == rules_plan(problem)
        guarded = tree.plan(problem, chosen=taken, guard=True)
        assert guarded == plans[taken[-1]]
        costs = {name: expected_cost(problem, plan, GUARD_DRAWS) for name, plan in plans.items()}
        assert costs[taken[-1]] == min(costs.values())
        if taken[-1] != "planner":
            assert costs[taken[-1]] < costs["planner"]
    assert "planner" in taken and set(taken) != {"planner"}, taken
