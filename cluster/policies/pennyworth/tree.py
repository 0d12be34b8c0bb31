"""The RAD-tree: a decision tree that builds a plan one decision at a time (the Pennyworth
paper).

A `RadTree` is a fitted scikit-learn `DecisionTreeClassifier` (entropy, cost-complexity
pruning: the equivalent of the paper's J48) reduced to plain arrays, so it exports to JSON
(no pickle: a tree is an artefact users share) and applies without scikit-learn. At every
vertex of the allocation graph (`features.Walker`) it ranks the decisions by the class
frequencies of the leaf the features reach and takes the most probable legal and feasible
one (`Walker.feasible`: no add that gives up a loss-free completion, no rent while a job
left still fits on the open VM); when the leaf ranks none,
`features.fallback` picks among the feasible decisions (or, when none is, the leaf's most
probable legal one, else any legal one).

Tasks and VM types are matched by name. A task the tree never saw is mapped to the known
task whose execution-time distributions are nearest (Wasserstein-1 distance between their
quantiles, averaged over the VM types both run on); several batch tasks may share one
tree task, and an *add* of that tree task adds the cheapest of them.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import readback
from clusteremu.cluster.policies.pennyworth.chunks import CHUNK_JOBS, choose, chunked_plan
from clusteremu.cluster.policies.pennyworth.features import (
    RULES_SAFETY_Z,
    SENTINEL,
    Features,
    Vertex,
    Walker,
    action_names,
    fallback,
    feature_names,
    feature_width,
    rules_plan,
)
from clusteremu.cluster.policies.pennyworth.plan import Plan
from clusteremu.cluster.policies.pennyworth.problem import PROFILE_LEVELS, Problem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FORMAT = "clusteremu.rad-tree"
#: Draws of the run times the tail guard prices each candidate plan on (a batch of 32
#: jobs: about 3 ms a plan, 12 ms a guarded batch against 0.5 ms for the tree alone).
GUARD_DRAWS = 1024
#: 2: the add_loss, avg_budget_s, late_budget and feasible_adds features.
VERSION = 2
#: Most nodes a tree file may hold (a bound on what a loaded file may allocate).
MAX_NODES = 1_000_000
#: Largest tree file read (bytes): MAX_NODES nodes take about 60 MiB.
MAX_TREE_BYTES = 256 * 2**20
#: Most tasks and VM types a tree may name.
MAX_NAMES = 10_000
#: Deepest tree read (synthesize fits trees at most 24 deep).
MAX_DEPTH = 200
#: Largest training count of a node (decisions seen).
MAX_COUNT = 1e15
#: Largest execution-time quantile of a profile (seconds: about 30 years).
MAX_PROFILE_S = 1e9


class TreeFileError(ValueError):
    """A tree file that cannot be used: names the file and what is wrong."""


@dataclass(frozen=True)
class RadTree:
    """Nodes in scikit-learn's order: `feature[i]` < 0 marks a leaf; an inner node sends
    x[feature] <= threshold left. `counts[i]`: training decisions per class at node i;
    `classes[c]`: the decision label of class c (see `features`). `profiles[task][type]`:
    the task's execution-time quantiles on that VM type (seconds, `PROFILE_LEVELS`)."""

    task_names: tuple[str, ...]
    type_names: tuple[str, ...]
    feature: IntArray
    threshold: FloatArray
    left: IntArray
    right: IntArray
    counts: FloatArray
    classes: IntArray
    profiles: dict[str, dict[str, list[float]]]
    info: dict[str, Any]

    # -- building ----------------------------------------------------------------------

    @classmethod
    def fit(
        cls,
        x: FloatArray,
        y: IntArray,
        task_names: Sequence[str],
        type_names: Sequence[str],
        profiles: Mapping[str, Mapping[str, Sequence[float]]],
        max_depth: int | None = None,
        min_samples_leaf: int = 1,
        ccp_alpha: float = 0.0,
        seed: int = 0,
    ) -> RadTree:
        """Fit a tree on examples (features, decisions) of one task and type set."""
        from sklearn.tree import DecisionTreeClassifier

        model = DecisionTreeClassifier(
            criterion="entropy",
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            ccp_alpha=ccp_alpha,
            random_state=seed,
        )
        model.fit(x, y)
        t = model.tree_
        # value holds class fractions (scikit-learn >= 1.4) or counts: make them counts.
        value = np.asarray(t.value[:, 0, :], dtype=np.float64)
        sums = value.sum(axis=1, keepdims=True)
        weight = np.asarray(t.weighted_n_node_samples, dtype=np.float64)[:, None]
        counts = np.rint(value / np.where(sums > 0, sums, 1.0) * weight)
        return cls(
            tuple(task_names),
            tuple(type_names),
            np.asarray(t.feature, dtype=np.int64),
            np.asarray(t.threshold, dtype=np.float64),
            np.asarray(t.children_left, dtype=np.int64),
            np.asarray(t.children_right, dtype=np.int64),
            counts,
            np.asarray(model.classes_, dtype=np.int64),
            {k: {kk: [float(q) for q in vv] for kk, vv in v.items()} for k, v in profiles.items()},
            {
                "max_depth": max_depth,
                "min_samples_leaf": min_samples_leaf,
                "ccp_alpha": ccp_alpha,
                "examples": int(len(y)),
            },
        )

    @property
    def depth(self) -> int:
        depth = [0] * len(self.feature)
        for i in range(len(self.feature)):
            if self.feature[i] >= 0:
                depth[self.left[i]] = depth[self.right[i]] = depth[i] + 1
        return max(depth) if depth else 0

    @property
    def safety_z(self) -> float:
        """The safety padding (standard deviations of the run times) the tree was selected
        with; the placer plans with it (0 for trees written before it existed)."""
        value = self.info.get("safety_z", 0.0)
        return float(value) if isinstance(value, int | float) and value >= 0 else 0.0

    @property
    def slack(self) -> float:
        """The share of the SLO's bound the tree plans to keep free (`Problem.with_slack`),
        selected on validation; the placer plans with it (0 for trees written before it
        existed)."""
        value = self.info.get("slack", 0.0)
        return float(value) if isinstance(value, int | float) and 0 <= value < 1 else 0.0

    @property
    def leaves(self) -> int:
        return int((self.feature < 0).sum())

    # -- deciding ----------------------------------------------------------------------

    def leaf(self, x: Features) -> int:
        i = 0
        feature, threshold, left, right = self._lists
        while feature[i] >= 0:
            i = left[i] if x[feature[i]] <= threshold[i] else right[i]
        return i

    def ranked(self, x: Features) -> list[int]:
        """Decision labels of the leaf `x` reaches, most frequent first (ties: label)."""
        return self._ranked[self.leaf(x)]

    @property
    def _lists(self) -> tuple[list[int], list[float], list[int], list[int]]:
        cached = self.__dict__.get("_lists_cache")
        if cached is None:
            cached = (
                self.feature.tolist(),
                self.threshold.tolist(),
                self.left.tolist(),
                self.right.tolist(),
            )
            object.__setattr__(self, "_lists_cache", cached)
        return cached

    @property
    def _ranked(self) -> list[list[int]]:
        cached = self.__dict__.get("_ranked_cache")
        if cached is None:
            classes = self.classes.tolist()
            cached = []
            for row in self.counts:
                order = sorted(
                    (c for c in range(len(classes)) if row[c] > 0),
                    key=lambda c: (-row[c], classes[c]),
                )
                cached.append([classes[c] for c in order])
            object.__setattr__(self, "_ranked_cache", cached)
        return cached

    def plan(
        self,
        problem: Problem,
        chunk_jobs: int = CHUNK_JOBS,
        chosen: list[str] | None = None,
        guard: bool = False,
    ) -> Plan:
        """The plan this tree builds for `problem` (tasks and types matched by name, an
        unknown task mapped to its nearest known one). A batch of more than `chunk_jobs`
        jobs (0: no limit) gets the plan of least expected cost of the tree's of the whole
        batch, of its chunks of about that many jobs (two cuttings) and its rules' of the
        whole batch (`chunks.chunked_plan`: past the sizes it learned on, a tree's
        decisions no longer fit). `guard`: a batch of at most `chunk_jobs` jobs gets the
        plan of least expected cost under the spread (GUARD_DRAWS draws) of the tree's and
        its feasibility rules' (`guarded_candidates`; ties: the tree's); the tree's own
        decisions are what `guard=False` returns. `chosen`: a list the name of
        the plan taken is appended to (`chunks.chunked_plan`, or a key of
        `guarded_candidates`)."""
        # The walk allocates many small objects and frees them at once (no cycles): the
        # cyclic collector's passes over a large process would cost a quarter of the time.
        enabled = gc.isenabled()
        gc.disable()
        try:
            if guard and (chunk_jobs <= 0 or problem.jobs <= chunk_jobs):
                plans = self.guarded_candidates(problem)
                name = choose(problem, plans, GUARD_DRAWS)
                if chosen is not None:
                    chosen.append(name)
                return plans[name]
            return chunked_plan(self._plan, problem, chunk_jobs, rules_plan, chosen)
        finally:
            if enabled:
                gc.enable()

    def guarded_candidates(self, problem: Problem) -> dict[str, Plan]:
        """The plans the tail guard chooses from, by name: the tree's (``planner``), its
        feasibility rules' with the problem's margins (``rules``) and with the rules' own
        default margins (``rules-default``: `RULES_SAFETY_Z` standard deviations of
        padding, no slack, what `pennyworth-rules` plans with alone). A tree's plan may
        use a percentile SLO's allowance of late jobs or pack a job up to its tightened
        bound, which one long run time makes dear; a margin selected over many batches
        may be too wide or too narrow for this one. (No candidate plans without any
        margin: its lateness is rare enough that GUARD_DRAWS draws can miss it.)"""
        return {
            "planner": self._plan(problem),
            "rules": rules_plan(problem),
            "rules-default": rules_plan(problem.with_slack(0.0).with_safety(RULES_SAFETY_Z)),
        }

    def _plan(self, problem: Problem) -> Plan:
        mapping = TaskMapping(self, problem)
        walker = Walker(problem)
        v = Vertex.start(problem)
        getters = walker.getters
        feature, threshold, left, right = self._lists
        ranked_at = self._ranked
        while not v.done:
            if mapping.identity:
                # `leaf`, inlined: the tree's path, each feature computed once when read.
                seen: dict[int, float] = {}
                i = 0
                while (f := feature[i]) >= 0:
                    value = seen.get(f)
                    if value is None:
                        value = seen[f] = getters[f](v)
                    i = left[i] if value <= threshold[i] else right[i]
                labels = ranked_at[i]
            else:
                labels = self.ranked(mapping.features(walker, v))
            action = None
            first_legal = None
            for label in labels:
                a = mapping.to_problem(walker, v, label)
                if a is None:
                    continue
                if walker.feasible(v, a):
                    action = a
                    break
                if first_legal is None:
                    first_legal = a
            if action is None:
                legal = walker.legal(v)
                if not legal:
                    raise ValueError("no legal decision: a job left cannot run on any VM type")
                feasible = [a for a in legal if walker.feasible(v, a)]
                if feasible:
                    action = fallback(walker, v, feasible)
                elif first_legal is not None:
                    action = first_legal
                else:
                    action = fallback(walker, v, legal)
            walker.step(v, action)
        return v.plan()

    # -- reading -----------------------------------------------------------------------

    def explain(self, decimals: int = 4) -> str:
        """The tree as nested if/else rules on named features."""
        names = feature_names(self.task_names, self.type_names)
        actions = action_names(self.task_names, self.type_names)
        lines: list[str] = []

        def walk(i: int, indent: str) -> None:
            if self.feature[i] < 0:
                ranked = self._ranked[i]
                total = float(self.counts[i].sum())
                best = ranked[0] if ranked else -1
                share = self.counts[i][list(self.classes).index(best)] / total if total else 0.0
                label = actions[best] if best >= 0 else "(fallback)"
                lines.append(f"{indent}-> {label}  ({share:.0%} of {int(total)} examples)")
                return
            name, thr = names[self.feature[i]], round(float(self.threshold[i]), decimals)
            lines.append(f"{indent}if {name} <= {thr}:")
            walk(int(self.left[i]), indent + "    ")
            lines.append(f"{indent}else:  # {name} > {thr}")
            walk(int(self.right[i]), indent + "    ")

        walk(0, "")
        return "\n".join(lines)

    def importance(self) -> list[tuple[str, int, float]]:
        """(feature name, splits on it, share of the tree's total entropy decrease) for
        every feature the tree splits on, most important first (by share, then splits)."""
        names = feature_names(self.task_names, self.type_names)
        n = self.counts.sum(axis=1)
        p = self.counts / np.where(n > 0, n, 1.0)[:, None]
        entropy = -np.sum(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0), axis=1)
        splits: dict[int, int] = {}
        gain: dict[int, float] = {}
        for i in np.flatnonzero(self.feature >= 0):
            f, lo, hi = int(self.feature[i]), int(self.left[i]), int(self.right[i])
            drop = n[i] * entropy[i] - n[lo] * entropy[lo] - n[hi] * entropy[hi]
            splits[f] = splits.get(f, 0) + 1
            gain[f] = gain.get(f, 0.0) + max(float(drop), 0.0)
        total = sum(gain.values())
        rows = [(names[f], splits[f], gain[f] / total if total > 0 else 0.0) for f in splits]
        return sorted(rows, key=lambda r: (-r[2], -r[1], r[0]))

    def summary(self, depth: int = 3, top: int = 8, decimals: int = 4) -> str:
        """A readable digest of the tree: its size, the `top` features that matter most
        (`importance`) and the decisions near the root, to `depth` levels; a branch cut
        there shows how many decisions it holds and its most frequent one. `explain()` is
        the full set of rules."""
        names = feature_names(self.task_names, self.type_names)
        actions = action_names(self.task_names, self.type_names)
        head = (
            f"RAD-tree: {int(self.feature.size):,} nodes, {self.leaves:,} leaves, depth "
            f"{self.depth}; {len(self.task_names)} tasks, {len(self.type_names)} VM types"
        )
        if isinstance(self.info.get("examples"), int):
            head += f"; fitted on {self.info['examples']:,} examples"
        lines = [head]
        ranked = self.importance()
        if ranked:
            lines.append(
                f"features that matter most ({min(top, len(ranked))} of the {len(ranked)} it "
                "splits on; share of the entropy decrease, splits):"
            )
            width = max(len(r[0]) for r in ranked[:top])
            lines += [
                f"  {f:<{width}}  {g:6.1%}  {s:>5} split{'' if s == 1 else 's'}"
                for f, s, g in ranked[:top]
            ]

        def majority(i: int) -> str:
            ranked_i = self._ranked[i]
            total = float(self.counts[i].sum())
            if not ranked_i:
                return "(fallback)"
            best = ranked_i[0]
            share = self.counts[i][list(self.classes).index(best)] / total if total else 0.0
            return f"{actions[best]}  ({share:.0%} of {int(total)} examples)"

        def size(i: int) -> int:
            stack, count = [i], 0
            while stack:
                j = stack.pop()
                count += 1
                if self.feature[j] >= 0:
                    stack += [int(self.left[j]), int(self.right[j])]
            return count

        lines.append(f"decisions near the root (to depth {depth}; --explain-full prints all):")

        def walk(i: int, level: int, indent: str) -> None:
            if self.feature[i] < 0:
                lines.append(f"{indent}-> {majority(i)}")
                return
            if level >= depth:
                inner = (size(i) - 1) // 2
                lines.append(f"{indent}... {inner:,} more decisions; most often -> {majority(i)}")
                return
            name, thr = names[self.feature[i]], round(float(self.threshold[i]), decimals)
            lines.append(f"{indent}if {name} <= {thr}:")
            walk(int(self.left[i]), level + 1, indent + "    ")
            lines.append(f"{indent}else:  # {name} > {thr}")
            walk(int(self.right[i]), level + 1, indent + "    ")

        walk(0, 0, "  ")
        return "\n".join(lines)

    # -- files -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        body = {
            "tasks": list(self.task_names),
            "types": list(self.type_names),
            "features": feature_names(self.task_names, self.type_names),
            "actions": action_names(self.task_names, self.type_names),
            "classes": self.classes.tolist(),
            "nodes": {
                "feature": self.feature.tolist(),
                "threshold": [float(v) for v in self.threshold],
                "left": self.left.tolist(),
                "right": self.right.tolist(),
                "counts": self.counts.tolist(),
            },
            "profiles": self.profiles,
            "info": self.info,
        }
        return {
            "format": FORMAT,
            "version": VERSION,
            "sha256": _digest(body),
            "tree": body,
        }

    def save(self, path: str | Path) -> None:
        text = json.dumps(self.to_dict(), separators=(",", ":"))  # explain() is the readable form
        Path(path).write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> RadTree:
        """Read a tree file: a regular file of at most MAX_TREE_BYTES, nested at most
        `readback.MAX_JSON_DEPTH` deep, then checked field by field (`from_dict`)."""
        p = Path(path)
        try:
            data = readback.load_json(p, "a RAD-tree JSON file", limit=MAX_TREE_BYTES)
        except readback.ReadBackError as exc:
            if exc.kind == "json":
                raise TreeFileError(f"{p}: not a JSON tree file ({exc.problem})") from None
            if exc.kind == "read":
                problem = exc.problem.removeprefix("cannot be read ")
                raise TreeFileError(f"{p}: cannot read the tree file: {problem}") from None
            raise TreeFileError(str(exc)) from None
        return cls.from_dict(data, str(p))

    @classmethod
    def from_dict(cls, data: Any, where: str = "tree") -> RadTree:
        def bad(field: str, expected: str) -> TreeFileError:
            return TreeFileError(f"{where}: {field}: expected {expected}")

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise bad("format", f"{FORMAT!r} (a file written by clusteremu synthesize)")
        if data.get("version") != VERSION:
            raise bad("version", str(VERSION))
        body = data.get("tree")
        if not isinstance(body, dict):
            raise bad("tree", "a mapping")
        if data.get("sha256") != _digest(body):
            raise bad("sha256", "the digest of the tree (the file was changed or truncated)")
        tasks = _names(body.get("tasks"), "tree.tasks", bad)
        types = _names(body.get("types"), "tree.types", bad)
        nodes = body.get("nodes")
        if not isinstance(nodes, dict):
            raise bad("tree.nodes", "a mapping of node arrays")
        if not isinstance(nodes.get("feature"), list) or not 0 < len(nodes["feature"]) <= MAX_NODES:
            raise bad("tree.nodes", f"1 to {MAX_NODES:,} nodes (feature: a list)")
        feature = _array(nodes.get("feature"), "tree.nodes.feature", np.int64, bad)
        threshold = _array(nodes.get("threshold"), "tree.nodes.threshold", np.float64, bad)
        left = _array(nodes.get("left"), "tree.nodes.left", np.int64, bad)
        right = _array(nodes.get("right"), "tree.nodes.right", np.int64, bad)
        classes = _array(body.get("classes"), "tree.classes", np.int64, bad)
        counts = _array(nodes.get("counts"), "tree.nodes.counts", np.float64, bad, ndim=2)
        profiles = _profiles(body.get("profiles"), tasks, types, bad)
        info = body.get("info", {})
        if not isinstance(info, dict):
            raise bad("tree.info", "a mapping")
        n = feature.size
        if not 0 < n <= MAX_NODES:
            raise bad("tree.nodes", f"1 to {MAX_NODES} nodes, got {n}")
        width = feature_width(len(tasks), len(types))
        n_actions = len(types) + len(tasks)
        for name, arr in (("threshold", threshold), ("left", left), ("right", right)):
            if arr.shape != (n,):
                raise bad(f"tree.nodes.{name}", f"{n} entries")
        if counts.shape != (n, classes.size):
            raise bad("tree.nodes.counts", f"{n} rows of {classes.size} counts")
        if classes.size and (classes.min() < 0 or classes.max() >= n_actions):
            raise bad("tree.classes", f"decision labels 0..{n_actions - 1}")
        inner = feature >= 0
        idx = np.arange(n)
        if (feature[inner] >= width).any():
            raise bad("tree.nodes.feature", f"feature indices below {width}")
        if ((left[inner] <= idx[inner]) | (left[inner] >= n)).any() or (
            (right[inner] <= idx[inner]) | (right[inner] >= n)
        ).any():
            raise bad("tree.nodes.left/right", "children after their parent, inside the tree")
        if not np.isfinite(threshold[inner]).all() or not np.isfinite(counts).all():
            raise bad("tree.nodes", "finite thresholds and counts")
        if (counts < 0).any() or (counts > MAX_COUNT).any():
            raise bad("tree.nodes.counts", f"training counts from 0 to {MAX_COUNT:g}")
        if np.unique(classes).size != classes.size:
            raise bad("tree.classes", "each decision label once")
        children = np.concatenate([left[inner], right[inner]])
        if np.unique(children).size != children.size or children.size != n - 1:
            raise bad("tree.nodes.left/right", "a tree: every node but the root has one parent")
        depth = np.zeros(n, dtype=np.int64)
        for i in np.flatnonzero(inner):  # parents come before their children
            depth[left[i]] = depth[right[i]] = depth[i] + 1
        if depth.max() > MAX_DEPTH:
            raise bad("tree.nodes", f"a tree at most {MAX_DEPTH} levels deep, got {depth.max()}")
        return cls(tasks, types, feature, threshold, left, right, counts, classes, profiles, info)


def _names(value: Any, field: str, bad: Callable[[str, str], TreeFileError]) -> tuple[str, ...]:
    """A list of distinct, non-empty names (tasks or VM types)."""
    if (
        not isinstance(value, list)
        or not 0 < len(value) <= MAX_NAMES
        or not all(isinstance(v, str) and v for v in value)
    ):
        raise bad(field, f"a list of 1 to {MAX_NAMES:,} non-empty names")
    if len(set(value)) != len(value):
        raise bad(field, "distinct names")
    return tuple(value)


def _array(
    value: Any,
    field: str,
    dtype: type,
    bad: Callable[[str, str], TreeFileError],
    ndim: int = 1,
) -> Any:
    """A numeric array of `ndim` dimensions from a JSON list (strict: no bools or strings)."""
    kind = "whole numbers" if dtype is np.int64 else "numbers"
    if not isinstance(value, list):
        raise bad(field, f"a list of {kind}")
    rows = value if ndim == 2 else [value]
    if not all(isinstance(r, list) for r in rows) or len({len(r) for r in rows}) > 1:
        raise bad(field, f"a {ndim}-dimensional array of {kind}")
    allowed = (int,) if dtype is np.int64 else (int, float)
    if any(isinstance(v, bool) or not isinstance(v, allowed) for r in rows for v in r):
        raise bad(field, kind)
    try:
        return np.asarray(value, dtype=dtype)
    except (OverflowError, ValueError):
        raise bad(field, f"{kind} within 64 bits") from None


def _profiles(
    value: Any,
    tasks: tuple[str, ...],
    types: tuple[str, ...],
    bad: Callable[[str, str], TreeFileError],
) -> dict[str, dict[str, list[float]]]:
    """Each task's execution-time quantiles per VM type: tasks and types named by the tree,
    PROFILE_LEVELS.size finite, non-negative, sorted seconds each."""
    if not isinstance(value, dict):
        raise bad("tree.profiles", "a mapping of task -> VM type -> quantiles")
    out: dict[str, dict[str, list[float]]] = {}
    size = PROFILE_LEVELS.size
    for task, per_type in value.items():
        if task not in tasks:
            raise bad(
                f"tree.profiles.{task[:60]}", f"a task of tree.tasks ({', '.join(tasks)[:200]})"
            )
        if not isinstance(per_type, dict):
            raise bad(f"tree.profiles.{task}", "a mapping of VM type -> quantiles")
        out[task] = {}
        for kind, qs in per_type.items():
            where = f"tree.profiles.{task}.{kind[:60]}"
            if kind not in types:
                raise bad(where, f"a VM type of tree.types ({', '.join(types)[:200]})")
            ok = isinstance(qs, list) and len(qs) == size
            ok = ok and all(readback.number_problem(q, 0, MAX_PROFILE_S) is None for q in qs)
            if not ok:
                raise bad(where, f"{size} finite quantiles from 0 to {MAX_PROFILE_S:g} s")
            if any(b < a for a, b in zip(qs, qs[1:], strict=False)):
                raise bad(where, "quantiles in increasing order")
            out[task][kind] = [float(q) for q in qs]
    return out


def _digest(body: Mapping[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def task_profiles(
    task_names: Sequence[str],
    type_names: Sequence[str],
    quantile: Any,
) -> dict[str, dict[str, list[float]]]:
    """Each task's execution-time quantiles per VM type: `quantile(task, type, levels)`
    returns them (seconds) or None where the task has no run time on the type."""
    out: dict[str, dict[str, list[float]]] = {}
    for t in task_names:
        out[t] = {}
        for k in type_names:
            q = quantile(t, k, PROFILE_LEVELS)
            if q is not None:
                out[t][k] = [float(v) for v in q]
    return out


def wasserstein(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]]) -> float:
    """Mean Wasserstein-1 distance (s) between two tasks' execution-time quantiles over the
    VM types both run on (inf when they share none)."""
    shared = [k for k in a if k in b]
    if not shared:
        return math.inf
    return float(np.mean([np.mean(np.abs(np.sort(a[k]) - np.sort(b[k]))) for k in shared]))


class TaskMapping:
    """Problem tasks and types onto the tree's, by name; unknown tasks by distance."""

    def __init__(self, tree: RadTree, problem: Problem) -> None:
        self.tree = tree
        known = {t: i for i, t in enumerate(tree.task_names)}
        self.task_to_tree: list[int] = []
        for t, name in enumerate(problem.task_names):
            if name in known:
                self.task_to_tree.append(known[name])
                continue
            profile = {
                problem.type_names[k]: list(problem.runtime_s[t, k] * np.ones(PROFILE_LEVELS.size))
                for k in range(len(problem.type_names))
                if np.isfinite(problem.runtime_s[t, k])
            }
            if problem.profiles is not None and name in problem.profiles:
                profile = dict(problem.profiles[name])
            dist = [wasserstein(profile, tree.profiles.get(tn, {})) for tn in tree.task_names]
            self.task_to_tree.append(int(np.argmin(dist)))
        tree_types = {k: i for i, k in enumerate(tree.type_names)}
        self.type_to_tree = [tree_types.get(k, -1) for k in problem.type_names]
        self.tree_type_to_problem = {
            self.type_to_tree[k]: k
            for k in range(len(problem.type_names))
            if self.type_to_tree[k] >= 0
        }
        self.identity = self.task_to_tree == list(range(len(tree.task_names))) and (
            self.type_to_tree == list(range(len(tree.type_names)))
        )

    def features(self, walker: Walker, v: Vertex) -> Features:
        """The tree's features at `v`: the problem's own (computed as the tree reads them)
        when tasks and types match, else mapped onto the tree's tasks and types (shares
        and fractions summed, the least add cost and loss, any task left)."""
        if self.identity:
            return walker.view(v)
        x = walker.features(v)
        tree = self.tree
        T, K = len(tree.task_names), len(tree.type_names)
        pt, pk = walker.n_tasks, walker.n_types
        out = np.zeros(feature_width(T, K))
        out[0] = x[0]
        for k in range(pk):
            if self.type_to_tree[k] >= 0:
                out[1 + self.type_to_tree[k]] = x[1 + k]
        least = {1: np.full(T, math.inf), 2: np.full(T, math.inf)}
        for t in range(pt):
            j = self.task_to_tree[t]
            out[1 + K + j] += x[1 + pk + t]
            for g in (1, 2):  # add_cost, add_loss: the least over the tasks mapped to j
                value = x[1 + pk + g * pt + t]
                if value != SENTINEL:
                    least[g][j] = min(least[g][j], value)
            out[1 + K + 3 * T + j] = max(out[1 + K + 3 * T + j], x[1 + pk + 3 * pt + t])
            out[1 + K + 4 * T + j] += x[1 + pk + 4 * pt + t]
        for g in (1, 2):
            out[1 + K + g * T : 1 + K + (g + 1) * T] = np.where(
                np.isfinite(least[g]), least[g], SENTINEL
            )
        out[1 + K + 5 * T :] = x[1 + pk + 5 * pt :]  # the batch-wide features
        return out

    def to_problem(self, walker: Walker, v: Vertex, label: int) -> int | None:
        """The problem's decision for a tree decision label, if legal."""
        K = len(self.tree.type_names)
        if self.identity:
            return label if walker.is_legal(v, label) else None
        if label < K:
            k = self.tree_type_to_problem.get(label)
            return k if k is not None and walker.is_legal(v, k) else None
        j = label - K
        options = [
            walker.n_types + t
            for t in range(walker.n_tasks)
            if self.task_to_tree[t] == j and walker.is_legal(v, walker.n_types + t)
        ]
        if not options:
            return None
        return min(options, key=lambda a: walker.add_cost(v, a - walker.n_types))
