"""The exact planner's branch-and-price (`exact.py`, method 3): `_Solver`, one variant's
search.

Nodes bound the VM counts per type and in all (a box) and pair jobs on one VM or apart
or a job to a type; each node's bound is its master LP (`exact_master`) by column
generation (`_Solver._generate`; at the root: `root_bound`, $). A node with fractional
counts branches on them; otherwise every VM within the gap is enumerated
(`exact_pricing`) and the best partition among them found by the compiled exact-cover
search (`_cover_search`, with a bin-packing bound) or the set-partitioning MIP; too many
VMs for that: the node branches on the most fractional job pair.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Sequence

import numpy as np
from numba import njit

from clusteremu.cluster.policies.pennyworth.exact_master import _Infeasible, _Master
from clusteremu.cluster.policies.pennyworth.exact_model import (
    FloatArray,
    IntArray,
    JobPlan,
    _jobs_of,
    _variant_value,
    ordered,
)
from clusteremu.cluster.policies.pennyworth.exact_pricing import (
    _Node,
    _NodeLP,
    _Pairs,
    _Stop,
    _TooMany,
)

#: A leaf is solved by enumeration and the MIP when it takes at most this many columns
#: and this long in the MIP (s); else its node branches on job pairs.
_LEAF_COLUMNS = 20_000
_LEAF_MIP_S = 10.0


@njit(cache=True)
def _cover_search(
    masks: IntArray,
    rc: FloatArray,
    ks: IntArray,
    cost: FloatArray,
    link: FloatArray,
    starts: IntArray,
    cols: IntArray,
    job_order: IntArray,
    lo: IntArray,
    hi: IntArray,
    pen_lo: FloatArray,
    link_mode: int,
    link_rhs: float,
    link_price: float,
    dual: float,
    best_value: float,
    stop_value: float,
    node_limit: int,
    quantum: float,
    colf: FloatArray,
    need0: float,
    step: float,
    best_cols: IntArray,
) -> tuple[float, int, int, bool]:
    """Depth-first exact cover over columns: the partition of the jobs of least value
    inside a count box, below `best_value` ($).

    A partition's value is sum cost (+ avg: link_price x (sum link - link_rhs)+;
    percentile: infeasible when sum link > link_rhs) and at least dual + sum rc + the
    lower count rows' slack terms pen_lo x (count - lo) (index K: all VMs), which
    prunes. The next job to cover is the first uncovered in `job_order`; its
    columns (`cols[starts[j]:starts[j+1]]`, by reduced cost rounded down to `quantum`,
    ties in any order) are tried in turn. Stops at
    a partition of value <= `stop_value` (the node's bound: optimal) or after
    `node_limit` nodes. Returns (best value, columns in `best_cols`, nodes, exhausted).

    Bin-packing bound: `colf[c]` is the share of a VM its jobs need at least (each job
    f_j = min over types of its run time / the type's largest VM load; `need0`: sum over
    all jobs), so the jobs left need ceil(their share) more VMs; each VM over the lower
    total count adds at least `step` to the bound (its dual + the least reduced cost).
    """
    n = job_order.size
    kinds = lo.size - 1
    full = 0
    for j in range(n):
        full |= 1 << job_order[j]
    chosen = np.zeros(n + 1, dtype=np.int64)
    pos = np.zeros(n + 1, dtype=np.int64)
    job_at = np.zeros(n + 1, dtype=np.int64)
    cov = np.zeros(n + 2, dtype=np.int64)
    rcs = np.zeros(n + 2)
    share = np.zeros(n + 2)
    share[0] = need0
    cnt = np.zeros(kinds + 1, dtype=np.int64)
    n_best = -1
    nodes = 0
    d = 0
    cov[0] = 0
    rcs[0] = 0.0
    job_at[0] = job_order[0]
    pos[0] = starts[job_order[0]]
    exhausted = True
    while d >= 0:
        if nodes >= node_limit:
            exhausted = False
            break
        j = job_at[d]
        end = starts[j + 1]
        placed = False
        while pos[d] < end:
            c = cols[pos[d]]
            pos[d] += 1
            nodes += 1
            if masks[c] & cov[d]:
                continue
            r = rcs[d] + rc[c]
            if dual + r >= best_value:
                if dual + r - quantum >= best_value:
                    pos[d] = end  # by reduced cost: none after it fits either
                    break
                continue
            k = ks[c]
            if cnt[k] + 1 > hi[k] or cnt[kinds] + 1 > hi[kinds]:
                continue
            add = 0.0
            if cnt[k] + 1 > lo[k]:
                add += pen_lo[k]
            if cnt[kinds] + 1 > lo[kinds]:
                add += pen_lo[kinds]
            if dual + r + add >= best_value:
                continue
            new_cov = cov[d] | masks[c]
            # VMs still owed to the lower counts need a job each
            left = 0
            rest = full & ~new_cov
            tmp = rest
            while tmp:
                tmp &= tmp - 1
                left += 1
            owed = 0
            for kk in range(kinds):
                need = lo[kk] - cnt[kk] - (1 if kk == k else 0)
                if need > 0:
                    owed += need
            need_all = lo[kinds] - cnt[kinds] - 1
            if need_all > owed:
                owed = need_all
            if owed > left:
                continue
            if rest != 0 and step > 0.0:
                more = math.ceil(share[d] - colf[c] - 1e-9)
                total_now = cnt[kinds] + 1
                base_count = lo[kinds] if lo[kinds] > total_now else total_now
                # VMs up to the lower count may still add reduced costs down to
                # step - pen_lo (<= 0): budget them back
                owed_low = lo[kinds] - total_now if lo[kinds] > total_now else 0
                room = best_value - dual - r - add + owed_low * (pen_lo[kinds] - step)
                allowed = base_count + math.floor(room / step + 1e-9)
                if total_now + more > allowed:
                    continue
            chosen[d] = c
            cnt[k] += 1
            cnt[kinds] += 1
            cov[d + 1] = new_cov
            rcs[d + 1] = r + add
            share[d + 1] = share[d] - colf[c]
            if rest == 0:
                # a partition: its value
                value = 0.0
                total = 0.0
                for t in range(d + 1):
                    value += cost[chosen[t]]
                    total += link[chosen[t]]
                ok = True
                if link_mode == 2:
                    if total > link_rhs:
                        value += link_price * (total - link_rhs)
                elif link_mode == 3 and total > link_rhs + 0.5:
                    ok = False
                if ok and value < best_value:
                    best_value = value
                    n_best = d + 1
                    for t in range(d + 1):
                        best_cols[t] = chosen[t]
                    if value <= stop_value:
                        return best_value, n_best, nodes, True
                cnt[k] -= 1
                cnt[kinds] -= 1
                continue
            # descend: the next uncovered job in order
            nxt = 0
            while (rest >> job_order[nxt]) & 1 == 0:
                nxt += 1
            job_at[d + 1] = job_order[nxt]
            pos[d + 1] = starts[job_order[nxt]]
            d += 1
            placed = True
            break
        if placed:
            continue
        # backtrack
        d -= 1
        if d >= 0:
            c = chosen[d]
            cnt[ks[c]] -= 1
            cnt[kinds] -= 1
    return best_value, n_best, nodes, exhausted


class _Solver(_Master):
    """Branch-and-price on VM counts, then enumeration and the MIP, for one variant.

    Each node of the search bounds the number of VMs per type and in all (a box); its
    bound is the master LP with those count rows, solved by column generation. A node
    whose LP counts are fractional branches on the most fractional count (total first);
    one whose counts are integral enumerates every VM with reduced cost within the gap
    and solves the MIP over them inside its box."""

    # -- the solve -----------------------------------------------------------------

    def _generate(
        self, node: _Node, best_val: float, tol: float
    ) -> tuple[_NodeLP, float, float, bool]:
        """Column generation at `node` until no column has a negative reduced cost, or
        its bound reaches `best_val`: (its last LP, the highest profit priced, the
        node's proven bound $, converged)."""
        eps = 1e-12
        lower = -math.inf
        # a plan in the box has at most this many VMs (the Lagrangian bound's factor)
        most = min(self.n, node.hi[self.kinds])
        pairs = _Pairs.of(self.n, node, self.kinds)
        while True:
            lp = self.master_lp(node)
            max_profit = 0.0
            added = 0
            for k in range(self.kinds):
                masks, rows, best = self.run_search(k, lp, eps, dynamic=True, pairs=pairs)
                max_profit = max(max_profit, best)
                for r in np.argsort(-rows[:, 4])[:8] if len(masks) else []:
                    if self.cols.add(k, int(masks[r]), self._terms(rows[r])):
                        added += 1
            # any plan in the box costs >= dual + its VMs' reduced costs (+ its late
            # variables', percentile)
            lower = max(lower, lp.dual + lp.extra_neg - most * max_profit)
            if added == 0 or lower >= best_val - tol:
                return lp, max_profit, lower, added == 0
            if time.perf_counter() > self.deadline:
                raise _Stop(lower)

    def _integral(self, lp: _NodeLP) -> bool:
        """Whether the LP's solution is a plan (0/1 columns covering each job once); if
        so it is considered as the incumbent."""
        x = lp.x
        values = np.concatenate([x, lp.z, lp.yv])
        if np.any(np.abs(values - np.round(values)) > 1e-9):
            return False
        chosen = lp.columns[x > 0.5]
        masks = np.array(self.cols.mask, dtype=np.int64)[chosen]
        late = [self.late_vars[t] for t in np.flatnonzero(lp.z > 0.5)]
        for j, _ in late:
            masks = np.append(masks, np.int64(1) << j)
        full = (1 << self.n) - 1
        if int(np.bitwise_or.reduce(masks)) != full if masks.size else True:
            return False
        if sum(bin(int(m)).count("1") for m in masks) != self.n:
            return False
        ks = np.array(self.cols.k, dtype=np.int64)[chosen]
        vms = [(int(k), _jobs_of(int(m))) for k, m in zip(ks, masks[: chosen.size], strict=True)]
        self.consider(self._late_plan(vms, late) if late else vms)
        return True

    def _split(self, node: _Node, lp: _NodeLP) -> list[_Node] | None:
        """Two children that split the LP's solution: the job pair whose share of a VM
        is the most fractional (together / apart, Ryan and Foster), else the job whose
        type is (on it / not); None when the solution is integral in both."""
        for name, values in (("z", lp.z), ("y", lp.yv)):
            frac = np.abs(values - np.round(values))
            if values.size and frac.max() > 1e-6:
                t = int(np.argmax(frac))
                v = float(values[t])
                return [
                    dataclasses.replace(
                        node, fixed=node.fixed + ((name, t, math.ceil(v), math.inf),)
                    ),
                    dataclasses.replace(node, fixed=node.fixed + ((name, t, 0.0, math.floor(v)),)),
                ]
        sel = lp.x > 1e-9
        cols = lp.columns[sel]
        x = lp.x[sel]
        masks = np.array(self.cols.mask, dtype=np.int64)[cols]
        ks = np.array(self.cols.k, dtype=np.int64)[cols]
        bits = ((masks[None, :] >> np.arange(self.n, dtype=np.int64)[:, None]) & 1).astype(
            np.float64
        )
        share = (bits * x[None, :]) @ bits.T
        upper = np.triu(np.ones_like(share, dtype=bool), 1)
        frac = upper & (share > 1e-6) & (share < 1 - 1e-6)
        if frac.any():
            score = np.where(frac, np.abs(share - 0.5), np.inf)
            a, b = np.unravel_index(int(np.argmin(score)), score.shape)
            pair = ((int(a), int(b)),)
            return [
                dataclasses.replace(node, together=node.together + pair),
                dataclasses.replace(node, apart=node.apart + pair),
            ]
        on = np.stack([(bits * (x * (ks == k))[None, :]).sum(axis=1) for k in range(self.kinds)])
        frac_on = (on > 1e-6) & (on < 1 - 1e-6)
        if frac_on.any():
            score = np.where(frac_on, np.abs(on - 0.5), np.inf)
            k, j = np.unravel_index(int(np.argmin(score)), score.shape)
            return [
                dataclasses.replace(node, placed=node.placed + ((int(j), int(k), True),)),
                dataclasses.replace(node, placed=node.placed + ((int(j), int(k), False),)),
            ]
        return None

    def consider(self, vms: list[tuple[int, list[int]]] | None) -> float:
        """Make `vms` the incumbent if it is better; its variant value ($)."""
        if vms is None:
            return math.inf
        plan = ordered(self.jp, vms)
        val = _variant_value(self.jp, self.v, plan)
        if val < self.best_val:
            self.best_plan, self.best_val = plan, val
        return val

    def _cover(
        self,
        node: _Node,
        lp: _NodeLP,
        masks: IntArray,
        ks: IntArray,
        f: FloatArray,
        rc: FloatArray,
        node_lb: float,
        tol: float,
    ) -> tuple[list[tuple[int, list[int]]] | None, float, bool]:
        """The least-value partition of the jobs among these columns inside the box, by
        `_cover_search`: (VMs or None, bound $, solved: the search was exhaustive or met
        the node's bound). Not for percentile (its late variables are not columns)."""
        if self.late_mode:
            return None, -math.inf, False
        n = self.n
        quantum = 1e-9
        # run time of each column: its jobs' run times on its type
        bits = ((masks[None, :] >> np.arange(n, dtype=np.int64)[:, None]) & 1).astype(bool)
        runtime = np.where(np.isfinite(self.jp.runtime_s), self.jp.runtime_s, 0.0)
        load = np.einsum("jc,jc->c", bits, runtime[:, ks])
        # each job's least share of a VM: run time / the type's largest VM load
        cap = np.array([load[ks == k].max() if np.any(ks == k) else 0.0 for k in range(self.kinds)])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(
                np.isfinite(self.jp.runtime_s) & (cap[None, :] > 0),
                self.jp.runtime_s / cap[None, :],
                np.inf,
            )
        f_job = ratio.min(axis=1)
        f_job = np.where(np.isfinite(f_job), f_job, 0.0) * (1.0 - 1e-12)
        colf = bits.T.astype(np.float64) @ f_job
        need0 = float(f_job.sum())
        step = float(lp.pen_lo[self.kinds] + min(0.0, float(rc.min())))
        big = np.iinfo(np.int64).max // 4
        lo = np.array(node.lo, dtype=np.int64)
        hi = np.array([big if math.isinf(h) else int(h) for h in node.hi], dtype=np.int64)
        link, rhs, price = self._link(f)
        mode = self.v.mode if link is not None else 0
        cost = f[:, 0] + f[:, 1]
        link_arr = np.zeros(len(masks)) if link is None else np.ascontiguousarray(link)
        best_cols = np.zeros(n + 1, dtype=np.int64)
        rng = np.random.default_rng(0)
        rounded = np.floor(rc / quantum)
        value, count, nodes, exhausted = self.best_val, -1, 0, False
        # Restarts (a heavy-tailed search): by reduced cost with the fullest VMs first
        # among near-ties; by fullest VM alone (no early break: any order is exact);
        # shuffled; the last one, by reduced cost, runs longest.
        # (a node is one column looked at: a few nanoseconds)
        attempts = [
            (quantum, 1.0, 10_000_000),
            (math.inf, 1.0, 20_000_000),
            (math.inf, 0.3, 10_000_000),
            (math.inf, 0.3, 10_000_000),
            (quantum, 1.0, 300_000_000),
        ]
        for q, spread, limit in attempts:
            tie = -load if spread == 1.0 else -load * rng.uniform(1 - spread, 1 + spread, load.size)
            key = rounded if math.isfinite(q) else np.zeros(load.size)
            order = np.lexsort((tie, key))
            bits_o = bits[:, order]
            jobs, pos = np.nonzero(bits_o)  # by job, then by (reduced cost, tie)
            cols = order[pos].astype(np.int64)
            starts = np.searchsorted(jobs, np.arange(n + 1)).astype(np.int64)
            job_order = np.argsort(np.diff(starts), kind="stable").astype(np.int64)
            found_value, found, used, exhausted = _cover_search(
                masks,
                rc,
                ks,
                cost,
                link_arr,
                starts,
                cols,
                job_order,
                lo,
                hi,
                lp.pen_lo,
                mode,
                rhs,
                price,
                lp.dual,
                value,
                node_lb + tol,
                limit,
                q,
                colf,
                need0,
                step,
                best_cols,
            )
            nodes += used
            if found > 0:
                value, count = found_value, found
                kept = best_cols[:count].copy()
            if exhausted or (count > 0 and value <= node_lb + tol):
                break
            if time.perf_counter() > self.deadline:
                break
        if count > 0:
            best_cols[:count] = kept
        self.stats.nodes += nodes
        vms = None
        if count > 0:
            vms = [(int(ks[c]), _jobs_of(int(masks[c]))) for c in best_cols[:count]]
        if count > 0 and value <= node_lb + tol:
            return vms, value, True
        if exhausted:
            return vms, min(value, self.best_val), True
        return vms, -math.inf, False

    def _leaf(
        self,
        node: _Node,
        lp: _NodeLP,
        max_profit: float,
        node_lb: float,
        tol: float,
        max_columns: int,
        mip_limit_s: float,
    ) -> tuple[float, bool]:
        """The cheapest plan in the node below the incumbent (made the incumbent): (the
        node's bound $, solved). _TooMany when it would take more than `max_columns`
        columns or its MIP more than `mip_limit_s` seconds: branch instead.

        A plan of value V has every VM's reduced cost <= V - dual + (N - 1) x the highest
        profit priced, so with E(g) the VMs of reduced cost <= g, the MIP over E(g) is
        exact once its optimum is at most dual + g - (N - 1) x that profit: the full gap
        (the incumbent's) when its columns are few, else a small one."""
        slack = (self.n - 1) * max(max_profit, 0.0) - lp.extra_neg
        pairs = _Pairs.of(self.n, node, self.kinds)
        full = self.best_val - lp.dual + slack + tol
        # the full gap when its columns are few; else from a small gap up, while they are
        try:
            return self._leaf_round(
                node, lp, node_lb, tol, pairs, full, full, max_columns, mip_limit_s
            )[:2]
        except _TooMany:
            pass
        # too many: a small gap may still hold the node's optimum (degenerate duals)
        g = max(0.05 * (self.best_val - lp.dual), 1e-9) + slack + tol
        full = self.best_val - lp.dual + slack + tol
        if g < full:
            bound, solved, exact = self._leaf_round(
                node, lp, node_lb, tol, pairs, g, full, max_columns, mip_limit_s
            )
            if solved and (exact or bound <= lp.dual + g - slack):
                return bound, True
            if not solved:
                return min(bound, lp.dual + g - slack), False
        raise _TooMany

    def _leaf_round(
        self,
        node: _Node,
        lp: _NodeLP,
        node_lb: float,
        tol: float,
        pairs: _Pairs,
        g: float,
        full: float,
        max_columns: int,
        mip_limit_s: float,
    ) -> tuple[float, bool, bool]:
        """Enumerate the VMs of reduced cost <= g and find the best partition among them
        (exact cover search, then the MIP): (bound over them $, solved, exact for the
        node: g is the full gap or the plan meets the node's bound)."""
        all_masks: list[IntArray] = []
        all_k: list[IntArray] = []
        all_f: list[FloatArray] = []
        all_rows: list[FloatArray] = []
        size = 0
        for k in range(self.kinds):
            masks, rows, _ = self.run_search(
                k, lp, -g, dynamic=False, pairs=pairs, max_total=max_columns - size
            )
            size += len(masks)
            if len(masks):
                all_rows.append(rows)
                all_masks.append(masks)
                all_k.append(np.full(len(masks), k, dtype=np.int64))
                loss = self.pen * rows[:, 1] if self.v.mode <= 1 else np.zeros(len(rows))
                all_f.append(np.column_stack([rows[:, 0], loss, rows[:, 2], rows[:, 3]]))
        self.stats.enumerated = max(self.stats.enumerated, size)
        if not all_masks:  # no plan among them below the incumbent
            return self.best_val, True, g >= full
        masks_e = np.concatenate(all_masks)
        ks_e = np.concatenate(all_k)
        f_e = np.vstack(all_f)
        rc_e = -np.concatenate([r[:, 4] for r in all_rows])
        vms, bound, solved = self._cover(node, lp, masks_e, ks_e, f_e, rc_e, node_lb, tol)
        if not solved:
            budget = self.deadline - time.perf_counter()
            if budget <= 0:
                raise _Stop(-math.inf)
            self.consider(vms)
            vms, bound, solved = self.mip(masks_e, ks_e, f_e, min(budget, mip_limit_s), node)
            if not solved and budget > mip_limit_s:
                self.consider(vms)
                raise _TooMany
        val = self.consider(vms)
        if solved and vms is not None and val > bound + tol:
            return -math.inf, False, False  # the columns and the plan disagree: no proof
        if solved and vms is not None and val <= node_lb + tol:
            return val, True, True  # meets the node's bound: optimal in the node
        if not solved:
            return bound, False, False
        return min(bound, self.best_val), True, g >= full

    def root_bound(self) -> float:
        """The LP bound of the variant (column generation at the root, $)."""
        for k in range(self.kinds):
            for j in self.items[k].jobs:
                self.cols.add_set(k, [int(j)])
        self.big_m = 1.0
        inf = math.inf
        root = _Node(tuple([0] * (self.kinds + 1)), tuple([inf] * (self.kinds + 1)))
        return self._generate(root, inf, 0.0)[2]

    def solve(
        self, incumbents: Sequence[JobPlan], cutoff: float
    ) -> tuple[JobPlan | None, float, float, bool]:
        """(best plan or None, its variant value, proven lower bound on the variant's
        optimum, proven). A plan is returned only when its value is below `cutoff`;
        without one, the bound says no plan is below min(cutoff, bound)."""
        self.best_plan: JobPlan | None = None
        self.best_val = cutoff
        for k in range(self.kinds):
            for j in self.items[k].jobs:
                self.cols.add_set(k, [int(j)])
        for plan in incumbents:
            val = _variant_value(self.jp, self.v, plan)
            if val < self.best_val:
                self.best_plan, self.best_val = plan, val
            for k, js in plan.vms:
                self.cols.add_set(k, js)
        if not math.isfinite(self.best_val):
            raise ValueError("exact: no incumbent plan and no cutoff")
        tol = 1e-9 * max(1.0, abs(self.best_val))
        # An artificial VM over an upper count (any cost keeps the LP a relaxation):
        # twice the incumbent, above the LP's marginal value of a VM, yet on the scale
        # of real costs so that the duals keep the pricing bounds tight.
        self.big_m = 2.0 * abs(self.best_val) + 1e-6
        inf = math.inf
        root = _Node(tuple([0] * (self.kinds + 1)), tuple([inf] * (self.kinds + 1)))
        heap: list[tuple[float, int, _Node]] = [(-inf, 0, root)]
        seq = 1
        first = True
        while heap:
            bound, _, node = heapq.heappop(heap)
            if bound >= self.best_val - tol:
                heap.clear()
                break
            if any(lo > hi for lo, hi in zip(node.lo, node.hi, strict=True)):
                continue  # an empty box
            if not _Pairs.of(self.n, node, self.kinds).feasible:
                continue  # contradicting pairs
            try:
                lp, max_profit, node_lb, converged = self._generate(node, self.best_val, tol)
                node_lb = max(node_lb, bound)
                if first:
                    first = False
                    # the MIP over the generated columns: a strong incumbent
                    f = np.array(self.cols.f, dtype=np.float64)
                    budget = max(0.0, self.deadline - time.perf_counter())
                    vms, _, _ = self.mip(self.cols.mask, self.cols.k, f, min(budget, 3.0))
                    self.consider(vms)
                if node_lb >= self.best_val - tol or not converged:
                    continue
                # branch on a fractional count strictly inside the box (with the
                # artificial in use the count can exceed its upper bound: no branch)
                frac = np.abs(lp.counts - np.round(lp.counts))
                order = [self.kinds] + list(np.argsort(-frac[: self.kinds]))
                branch = next(
                    (
                        int(i)
                        for i in order
                        if frac[i] > 1e-6
                        and node.lo[i] <= math.floor(lp.counts[i])
                        and math.ceil(lp.counts[i]) <= node.hi[i]
                    ),
                    None,
                )
                if branch is not None:
                    value = float(lp.counts[branch])
                    down_hi = list(node.hi)
                    down_hi[branch] = math.floor(value)
                    up_lo = list(node.lo)
                    up_lo[branch] = math.ceil(value)
                    # more VMs first: it is where the incumbents are
                    children = [
                        dataclasses.replace(node, lo=tuple(up_lo)),
                        dataclasses.replace(node, hi=tuple(down_hi)),
                    ]
                    for child in children:
                        heapq.heappush(heap, (node_lb, seq, child))
                        seq += 1
                    continue
                if self._integral(lp):  # the LP's optimum is a plan: the node is solved
                    continue
                try:
                    leaf_bound, solved = self._leaf(
                        node, lp, max_profit, node_lb, tol, _LEAF_COLUMNS, _LEAF_MIP_S
                    )
                    too_many = False
                except _TooMany:
                    solved, too_many, leaf_bound = False, True, node_lb
                if solved:
                    continue
                split = self._split(node, lp) if too_many else None
                if split is None and too_many:  # nothing left to branch on: all of it
                    leaf_bound, solved = self._leaf(
                        node, lp, max_profit, node_lb, tol, 1 << 62, math.inf
                    )
                    if solved:
                        continue
                if split is None:
                    rest = min((b for b, _, _ in heap), default=inf)
                    here = max(node_lb, leaf_bound)
                    return self.best_plan, self.best_val, min(here, rest, self.best_val), False
                for child in split:
                    heapq.heappush(heap, (node_lb, seq, child))
                    seq += 1
            except _Infeasible:
                continue
            except _Stop as stop:
                here = max(bound, stop.args[0] if stop.args else -inf)
                rest = min((b for b, _, _ in heap), default=inf)
                return self.best_plan, self.best_val, min(here, rest, self.best_val), False
        return self.best_plan, self.best_val, self.best_val, True
