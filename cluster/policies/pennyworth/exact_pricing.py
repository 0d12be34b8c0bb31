"""The exact planner's column pool and pricing (`exact.py`, method 3).

A column is a VM: a type and the job set it runs (`_Columns`, the pool of one variant,
with each VM's money $, SLO loss $, sum of responses s and late count). Pricing finds
the VMs of a type whose profit (minus reduced cost, $) under the master LP's multipliers
(`_NodeLP`) passes a threshold: `_search`, a compiled, resumable depth-first search
over the type's jobs in run order (`_TypeItems`), pruned by `exact_bounds`' bounds, and
`_Pricing.run_search`, its driver, which keeps a node's pair constraints (`_Node`,
`_Pairs`) and serves both column generation (an improving chain) and the enumeration of
every VM within a gap. `_Pricing` holds one variant's state shared by the master
problems (`exact_master`) and the search (`exact_search`). Also the search's
bookkeeping and signals: `_Stats`, `_Stop` (the time limit), `_TooMany` (a column cap).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from numba import njit

from clusteremu.cluster.policies.pennyworth.exact_bounds import _extension_bound
from clusteremu.cluster.policies.pennyworth.exact_model import (
    FloatArray,
    IntArray,
    JobProblem,
    _jobs_of,
    _min_tardiness,
    _Variant,
    _vm_terms,
)

#: Lateness price ($/s) that keeps the percentile's on-time columns on time.
_FORBID_PER_S = 1e12


@njit(cache=True)
def _search(
    e: FloatArray,
    w: FloatArray,
    c: FloatArray,
    due: FloatArray,
    gbit: IntArray,
    rorder: IntArray,
    mode: int,
    delay: float,
    startup: float,
    fixed: float,
    pen: float,
    mu: float,
    nu: float,
    theta: float,
    strict: bool,
    nested: bool,
    dynamic: bool,
    allowed: IntArray,
    conflict: IntArray,
    need: IntArray,
    below: IntArray,
    thr: FloatArray,
    st_next: IntArray,
    st_item: IntArray,
    st_f: FloatArray,
    st_mask: IntArray,
    st_req: IntArray,
    depth: IntArray,
    out_mask: IntArray,
    out_f: FloatArray,
    n_out: IntArray,
    budget: int,
) -> int:
    """Depth-first search over the job sets of one VM type (resumable).

    Items (the jobs the type can run) are in run order (shortest first; rtpt: earliest
    due date first), so an item added to a set runs last: its response time is delay +
    the set's run time + its own. The profit of a set S is sum_S w - fixed - its SLO
    terms (`fixed`: the start-up cost less the duals of the VM-count rows; `startup`:
    the start-up money written out): pen x its lateness (max, rtpt), mu x the sum of its
    response times (avg), nu x the jobs later than `theta` (percentile; `strict`: at or
    after it). Branching on job pairs: an item with `allowed` 0 is never taken, no set
    holds an item and a job of its `conflict` mask, and a set is written only when it
    holds every job of its items' `need` masks (`below[i]`: the jobs of items 0..i, so a
    set missing a needed job before its last item is dropped with its subtree). Every set
    whose profit is >= thr[0] is written to `out_*` (`dynamic`: thr[0] then rises to it,
    so the last one written is the most profitable). Subtrees whose bound (profit of
    the set's SLO terms so far + `_extension_bound`) is below thr[0] are skipped.

    State between calls: `depth[0]` (-1 when done), the per-depth arrays. Returns the
    nodes visited; it stops early after `budget` nodes or when `out_*` is full.
    Per-depth floats st_f[d]: 0 load, 1 sum w, 2 money, 3 lateness (s, max/rtpt: the
    order's total), 4 max lateness (rtpt), 5 exact least lateness (rtpt; -1 unknown),
    6 sum of responses, 7 late count. out_f[row]: 0 money, 1 lateness (s), 2 sum of
    responses, 3 late count, 4 profit.
    """
    m = e.size
    cap_out = out_mask.size
    rem = np.empty(m)
    items = np.empty(m, dtype=np.int64)
    sub_e = np.empty(m)
    sub_d = np.empty(m)
    nodes = 0
    d = depth[0]
    while d >= 0:
        if nodes >= budget or n_out[0] >= cap_out:
            break
        i = st_next[d]
        if i >= m:
            d -= 1
            continue
        st_next[d] = i + 1
        nodes += 1
        if allowed[i] == 0 or st_mask[d] & conflict[i]:
            continue
        req = st_req[d] | need[i]
        if req & below[i] & ~(st_mask[d] | gbit[i]):
            continue  # a job it needs was passed over: no superset has it
        load = st_f[d, 0] + e[i]
        comp = delay + load
        sw = st_f[d, 1] + w[i]
        money = st_f[d, 2] + c[i]
        late_s = st_f[d, 3]
        lmax = st_f[d, 4]
        tex = st_f[d, 5]
        sc = st_f[d, 6]
        late = st_f[d, 7]
        if mode <= 1:
            over = comp - due[i]
            if over > 0.0:
                late_s += over
            if over > lmax:
                lmax = over
        elif mode == 2:
            sc += comp
        else:
            if comp > theta or (strict and comp >= theta):
                late += 1.0
        # a lower bound on this set's SLO terms, valid for every superset
        q = 0
        lb_s = 0.0
        if mode == 0:
            slo_lb = pen * late_s
        elif mode == 1:
            if late_s <= 0.0:
                slo_lb = 0.0
                tex = 0.0
            else:
                # least total lateness >= the EDD's max lateness, the parent's least, and
                # sum_i (i-th least completion (shortest first) - i-th least due date)+
                for t in range(1, d + 1):
                    items[q] = st_item[t]
                    q += 1
                items[q] = i
                q += 1
                for t in range(q):
                    sub_e[t] = e[items[t]]
                    sub_d[t] = due[items[t]]  # ascending: items are in EDD order
                srt = np.sort(sub_e[:q])
                acc = 0.0
                matched = 0.0
                for t in range(q):
                    acc += srt[t]
                    over = delay + acc - sub_d[t]
                    if over > 0.0:
                        matched += over
                lb = lmax if lmax > 0.0 else 0.0
                if tex > lb:
                    lb = tex
                if matched > lb:
                    lb = matched
                tex = -1.0
                lb_s = lb
                slo_lb = pen * lb
        elif mode == 2:
            slo_lb = mu * sc
        else:
            slo_lb = nu * late
        base = sw - fixed - slo_lb
        ext = _extension_bound(
            i + 1, load, e, w, due, rorder, mode, delay, pen, mu, nu, theta, nested, rem, lb_s
        )
        if base + ext < thr[0]:
            continue
        # the exact SLO terms of this set
        if mode == 1 and late_s > 0.0:
            if late_s <= lb_s + 1e-9:
                tex = late_s  # the EDD order meets the lower bound: it is optimal
            else:
                if q > 20:
                    return -1  # too many late jobs on one VM to order exactly
                best_t, _ = _min_tardiness(sub_e[:q], sub_d[:q], delay)
                tex = best_t
            if tex > lb_s:
                lb_s = tex
                ext = _extension_bound(
                    i + 1,
                    load,
                    e,
                    w,
                    due,
                    rorder,
                    mode,
                    delay,
                    pen,
                    mu,
                    nu,
                    theta,
                    nested,
                    rem,
                    lb_s,
                )
            base = sw - fixed - pen * lb_s
            exact = sw - fixed - pen * tex
            lat_exact = tex
        elif mode <= 1:
            exact = base
            lat_exact = late_s
        else:
            exact = base
            lat_exact = 0.0
        mask = st_mask[d] | gbit[i]
        if exact >= thr[0] and (req & ~mask) == 0:
            row = n_out[0]
            out_mask[row] = mask
            out_f[row, 0] = startup + money
            out_f[row, 1] = lat_exact
            out_f[row, 2] = sc
            out_f[row, 3] = late
            out_f[row, 4] = exact
            n_out[0] = row + 1
            if dynamic and exact > thr[0]:
                thr[0] = exact
        if base + ext < thr[0]:
            continue
        d += 1
        st_next[d] = i + 1
        st_item[d] = i
        st_mask[d] = mask
        st_req[d] = req
        st_f[d, 0] = load
        st_f[d, 1] = sw
        st_f[d, 2] = money
        st_f[d, 3] = late_s
        st_f[d, 4] = lmax
        st_f[d, 5] = tex
        st_f[d, 6] = sc
        st_f[d, 7] = late
    depth[0] = d
    return nodes


@dataclass
class _Stats:
    nodes: int = 0
    lp: int = 0
    enumerated: int = 0


class _Stop(Exception):
    """The time limit stopped the search (args: the bound proven so far at the node)."""


class _Columns:
    """The VMs (columns) of one variant: type, job mask, money, SLO loss ($: max/rtpt),
    sum of responses (s), late count."""

    def __init__(self, jp: JobProblem, v: _Variant) -> None:
        self.jp, self.v = jp, v
        self.k: list[int] = []
        self.mask: list[int] = []
        self.f: list[tuple[float, float, float, float]] = []
        self.index: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self.k)

    def add(self, k: int, mask: int, f: tuple[float, float, float, float]) -> bool:
        key = (k, mask)
        if key in self.index:
            return False
        self.index[key] = len(self.k)
        self.k.append(k)
        self.mask.append(mask)
        self.f.append(f)
        return True

    def add_set(self, k: int, jobs: Sequence[int]) -> None:
        """Add the VM (type k, `jobs`); percentile: its on-time part (shortest first, the
        jobs done by `on_time_s`), its late jobs being separate variables."""
        if self.v.mode == 3:
            e = self.jp.runtime_s[:, k]
            delay = float(self.jp.counted_delay_s()[k])
            load = 0.0
            prefix = []
            for j in sorted(jobs, key=lambda j: (e[j], j)):
                load += float(e[j])
                if delay + load > self.v.on_time_s:
                    break
                prefix.append(j)
            jobs = prefix
            if not jobs:
                return
        mask = 0
        for j in jobs:
            mask |= 1 << j
        if (k, mask) not in self.index:
            self.add(k, mask, _vm_terms(self.jp, self.v, k, jobs))

    def objective(self) -> FloatArray:
        """Each column's cost in the variant's objective ($)."""
        f = np.array(self.f, dtype=np.float64).reshape(-1, 4)
        return f[:, 0] + f[:, 1]


@dataclass
class _TypeItems:
    """One type's items: the jobs it can run, in run order."""

    jobs: IntArray
    e: FloatArray
    c: FloatArray
    due: FloatArray
    gbit: IntArray


def _type_items(jp: JobProblem, k: int) -> _TypeItems:
    e_all = jp.runtime_s[:, k]
    due_all = jp.due_s()[:, k]
    jobs = [j for j in range(jp.jobs) if math.isfinite(e_all[j])]
    if jp.slo.kind == "rtpt":
        jobs.sort(key=lambda j: (due_all[j], e_all[j], j))
    else:
        jobs.sort(key=lambda j: (e_all[j], j))
    idx = np.array(jobs, dtype=np.int64)
    e = e_all[idx].astype(np.float64)
    return _TypeItems(
        idx,
        e,
        float(jp.price_per_s[k]) * e,
        due_all[idx].astype(np.float64),
        np.array([1 << int(j) for j in jobs], dtype=np.int64),
    )


@dataclass
class _NodeLP:
    """The master LP of one node: its duals as multipliers and their dual value ($).
    `y[j]` covering duals (>= 0), `mu` (avg) / `nu` (percentile) the linking row's,
    `fixed[k]` each type's start-up cost less its VM-count duals ($), `counts[i]` the
    LP's VM count of type i (i = types: all), `pen_lo[i]` the dual of its lower count
    row ($ per VM over it)."""

    y: FloatArray
    mu: float
    nu: float
    fixed: FloatArray
    dual: float
    counts: FloatArray
    pen_lo: FloatArray
    #: the pool's columns in the LP (indices) and their values
    columns: IntArray
    x: FloatArray
    #: percentile: the LP's late variables and late-only VMs, and the least the plan's
    #: late variables can add to the bound through reduced costs < 0 ($, <= 0)
    z: FloatArray = field(default_factory=lambda: np.zeros(0))
    yv: FloatArray = field(default_factory=lambda: np.zeros(0))
    extra_neg: float = 0.0


@dataclass
class _Node:
    """A box on the VM counts: lo[i] <= count of type i <= hi[i] (i = types: all VMs),
    and job pairs that share a VM (`together`) or do not (`apart`)."""

    lo: tuple[int, ...]
    hi: tuple[float, ...]
    together: tuple[tuple[int, int], ...] = ()
    apart: tuple[tuple[int, int], ...] = ()
    #: (job, type, on it or not)
    placed: tuple[tuple[int, int, bool], ...] = ()
    #: percentile: bounds on late variables ("z", index into late_vars, lo, hi) and on
    #: late-only VMs ("y", type, lo, hi)
    fixed: tuple[tuple[str, int, float, float], ...] = ()


class _TooMany(Exception):
    """An enumeration passed its column cap (or a leaf's MIP its time): branch."""


@dataclass(frozen=True)
class _Pairs:
    """A node's pair constraints as job masks: `group[j]` the jobs that share j's VM (j
    included), `conflict[j]` the jobs that may not; `feasible` False when they
    contradict each other."""

    group: IntArray
    conflict: IntArray
    feasible: bool
    #: per type: the jobs that may not run on it
    forbid: tuple[int, ...] = ()

    @staticmethod
    def of(n: int, node: _Node, kinds: int = 0) -> _Pairs:
        parent = list(range(n))

        def root(j: int) -> int:
            while parent[j] != j:
                parent[j] = parent[parent[j]]
                j = parent[j]
            return j

        for a, b in node.together:
            parent[root(a)] = root(b)
        group = np.zeros(n, dtype=np.int64)
        for j in range(n):
            group[root(j)] |= np.int64(1) << j
        group = np.array([group[root(j)] for j in range(n)], dtype=np.int64)
        conflict = np.zeros(n, dtype=np.int64)
        feasible = True
        for a, b in node.apart:
            if group[a] == group[b]:
                feasible = False
            for j in _jobs_of(int(group[a])):
                conflict[j] |= group[b]
            for j in _jobs_of(int(group[b])):
                conflict[j] |= group[a]
        forbid = [0] * kinds
        for j, k, on in node.placed:
            for kk in range(kinds):
                if (kk != k) == on:  # on k: no other type; not on k: not k
                    forbid[kk] |= int(group[j])
        return _Pairs(group, conflict, feasible, tuple(forbid))

    def valid(self, masks: IntArray, ks: IntArray) -> npt.NDArray[np.bool_]:
        """Which columns (job masks, types) keep every constraint."""
        ok = np.ones(masks.size, dtype=bool)
        for k, bad in enumerate(self.forbid):
            if bad:
                ok &= ~((ks == k) & ((masks & bad) != 0))
        for g in np.unique(self.group):
            if g & (g - 1):  # a group of two or more jobs: all of it or none
                part = masks & g
                ok &= (part == 0) | (part == g)
        for j in np.flatnonzero(self.conflict):
            ok &= ~(((masks >> j) & 1).astype(bool) & ((masks & self.conflict[j]) != 0))
        return ok


class _Pricing:
    """One variant's column pool and its pricing: the state that the master problems
    (`exact_master._Master`) and the search (`exact_search._Solver`) share, and the
    compiled search over each type's job sets (`run_search`)."""

    def __init__(self, jp: JobProblem, v: _Variant, deadline: float, stats: _Stats) -> None:
        self.jp, self.v, self.deadline, self.stats = jp, v, deadline, stats
        self.n = jp.jobs
        self.kinds = len(jp.type_names)
        self.items = [_type_items(jp, k) for k in range(self.kinds)]
        self.delay = jp.counted_delay_s()
        self.pen = float(jp.slo.penalty_per_s)
        self.cols = _Columns(jp, v)
        self.big_m = 1.0
        # percentile: columns are on-time VMs (the max kernel with theta as deadline and
        # any lateness forbidden); the late jobs are variables z[j, k] (late on a VM of
        # type k, paying its run money), with y[k] VMs of type k holding late jobs only
        self.late_mode = v.mode == 3
        self.kmode = 0 if self.late_mode else v.mode
        self.kpen = _FORBID_PER_S if self.late_mode else self.pen
        self.late_vars: list[tuple[int, int]] = []
        if self.late_mode:
            for it in self.items:
                it.due = np.full(it.e.size, v.on_time_s)
            self.late_vars = [
                (j, k)
                for j in range(self.n)
                for k in range(self.kinds)
                if math.isfinite(jp.runtime_s[j, k])
            ]

    # -- the search kernel ---------------------------------------------------------

    def _weights(self, k: int, y: FloatArray, mu: float, nu: float) -> tuple[FloatArray, IntArray]:
        it = self.items[k]
        w = y[it.jobs] - it.c
        if self.kmode == 3:
            key = np.clip(w, 0.0, nu) / it.e
        elif self.kmode == 2:
            key = w - mu * it.e
        else:
            key = w / it.e
        rorder = np.argsort(-key, kind="stable").astype(np.int64)
        return w, rorder

    def run_search(
        self,
        k: int,
        lp: _NodeLP,
        threshold: float,
        dynamic: bool,
        pairs: _Pairs | None = None,
        max_total: int = 1 << 62,
        capacity: int = 4096,
    ) -> tuple[IntArray, FloatArray, float]:
        """Every set of type k with profit (minus reduced cost, $) >= threshold
        (dynamic: an improving chain) that keeps `pairs`. Returns (masks, rows of
        out_f, the highest profit written or -inf); _TooMany past `max_total` sets."""
        it = self.items[k]
        m = it.e.size
        if m == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 5)), -math.inf
        if pairs is None:
            pairs = _Pairs.of(self.n, _Node((), ()), self.kinds)
        group = pairs.group[it.jobs]
        runnable = np.bitwise_or.reduce(it.gbit)
        if pairs.forbid:
            runnable &= ~np.int64(pairs.forbid[k])
        allowed = ((group & ~runnable) == 0).astype(np.int64)
        need = group & ~it.gbit
        conflict = pairs.conflict[it.jobs]
        below = np.bitwise_or.accumulate(it.gbit)
        w, rorder = self._weights(k, lp.y, lp.mu, lp.nu)
        if np.any(need != 0) or not allowed.all():
            # Every set written holds whole groups, so each member may carry its group's
            # mean weight: the sums of written sets stay exact, and the bounds see that a
            # job comes with its partners. An item never taken lifts no bound.
            for g in np.unique(group[need != 0]):
                members = np.flatnonzero(group == g)
                w[members] = w[members].mean()
            w = np.where(allowed == 1, w, -1e30)
            key = w - lp.mu * it.e if self.kmode == 2 else w / it.e
            if self.kmode == 3:
                key = np.clip(w, 0.0, lp.nu) / it.e
            rorder = np.argsort(-key, kind="stable").astype(np.int64)
        nested = True
        if self.kmode == 1:
            nested = bool(np.all(w / it.e <= self.pen))
        thr = np.array([threshold])
        st_next = np.zeros(m + 1, dtype=np.int64)
        st_item = np.zeros(m + 1, dtype=np.int64)
        st_f = np.zeros((m + 1, 8))
        st_mask = np.zeros(m + 1, dtype=np.int64)
        st_req = np.zeros(m + 1, dtype=np.int64)
        depth = np.zeros(1, dtype=np.int64)
        masks: list[IntArray] = []
        rows: list[FloatArray] = []
        best = -math.inf
        total = 0
        while depth[0] >= 0:
            out_mask = np.zeros(capacity, dtype=np.int64)
            out_f = np.zeros((capacity, 5))
            n_out = np.zeros(1, dtype=np.int64)
            visited = _search(
                it.e,
                w,
                it.c,
                it.due,
                it.gbit,
                rorder,
                self.kmode,
                float(self.delay[k]),
                float(self.jp.startup_usd[k]),
                float(lp.fixed[k]),
                self.kpen,
                lp.mu,
                lp.nu,
                self.v.theta,
                self.v.strict,
                nested,
                dynamic,
                allowed,
                conflict,
                need,
                below,
                thr,
                st_next,
                st_item,
                st_f,
                st_mask,
                st_req,
                depth,
                out_mask,
                out_f,
                n_out,
                2_000_000,
            )
            if visited < 0:
                raise ValueError(
                    "rtpt: more than 20 late jobs on one VM; too many to order exactly"
                )
            self.stats.nodes += visited
            got = int(n_out[0])
            if got:
                masks.append(out_mask[:got].copy())
                rows.append(out_f[:got].copy())
                best = max(best, float(out_f[:got, 4].max()))
                total += got
                if total > max_total:
                    raise _TooMany
                if not dynamic and total > 1000 and capacity < 1 << 20:
                    capacity *= 4
            if time.perf_counter() > self.deadline:
                raise _Stop
        if not masks:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 5)), best
        return np.concatenate(masks), np.vstack(rows), best

    def _terms(self, row: FloatArray) -> tuple[float, float, float, float]:
        money = float(row[0])
        loss = self.pen * float(row[1]) if self.v.mode <= 1 else 0.0
        return money, loss, float(row[2]), float(row[3])
