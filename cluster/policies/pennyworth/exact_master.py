"""The exact planner's master problems (`exact.py`, method 3), over one variant's
column pool (`exact_pricing`).

`_Master.master_lp`: a node's master LP (covering rows, the avg/percentile linking row,
the VM-count rows of its box; HiGHS), its duals clipped to valid multipliers and their
dual value ($). `_Master.mip`: set partitioning over given columns inside a box (HiGHS,
gap 0; `exact_highs._milp`). For `percentile` both take the late jobs as variables
z[j, k] and late-only VMs y[k] besides the on-time columns (`_master_late`,
`_mip_late`). Money is scaled by `_SCALE` inside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog

from clusteremu.cluster.policies.pennyworth.exact_highs import _SCALE, _milp
from clusteremu.cluster.policies.pennyworth.exact_model import FloatArray, IntArray, _jobs_of
from clusteremu.cluster.policies.pennyworth.exact_pricing import (
    _Node,
    _NodeLP,
    _Pairs,
    _Pricing,
)


class _Infeasible(Exception):
    """A node's constraints admit no plan."""


class _Master(_Pricing):
    """The master problems of one variant over its column pool: a node's master LP (its
    duals as the pricing's multipliers) and the set-partitioning MIP, each with the
    percentile variant's late variables."""

    # -- the master problems -------------------------------------------------------

    def _matrix(self, masks: Sequence[int] | IntArray) -> sparse.csc_matrix:
        """Job x column incidence of the masks."""
        m = np.asarray(masks, dtype=np.int64)
        bits = (m[None, :] >> np.arange(self.n, dtype=np.int64)[:, None]) & 1
        rows, cols = np.nonzero(bits)
        return sparse.csc_matrix((np.ones(rows.size), (rows, cols)), shape=(self.n, m.size))

    def _link(self, f: FloatArray) -> tuple[FloatArray | None, float, float]:
        """The linking row (coefficients per column), its right-hand side and the cost
        of a unit of slack (avg: penalty / N per second; 0: no slack)."""
        if self.v.mode == 2:
            return f[:, 2], self.n * self.jp.slo.target_s, self.pen / self.n
        if self.v.mode == 3:
            return f[:, 3], float(self.v.allowed), 0.0
        return None, 0.0, 0.0

    def master_lp(self, node: _Node) -> _NodeLP:
        """The master LP of `node` (covering rows, the linking row, the count rows; an
        artificial column with cost `big_m` per VM over each upper count), its duals
        clipped to valid multipliers and their dual value ($)."""
        self.stats.lp += 1
        if self.late_mode:
            return self._master_late(node)
        pairs = _Pairs.of(self.n, node, self.kinds)
        # each group of jobs that share a VM is a column (on every type that runs it)
        for g in np.unique(pairs.group):
            members = _jobs_of(int(g))
            for k in range(self.kinds):
                if pairs.forbid[k] & int(g):
                    continue
                if all(math.isfinite(self.jp.runtime_s[j, k]) for j in members):
                    self.cols.add_set(k, members)
        all_masks = np.array(self.cols.mask, dtype=np.int64)
        keep = np.flatnonzero(pairs.valid(all_masks, np.array(self.cols.k, dtype=np.int64)))
        f = np.array(self.cols.f, dtype=np.float64)[keep]
        ks = np.array(self.cols.k, dtype=np.int64)[keep]
        ncol = keep.size
        a = self._matrix(all_masks[keep])
        link, rhs, slack_cost = self._link(f)
        extra = 1 if (link is not None and slack_cost > 0) else 0
        count_rows: list[tuple[int, float, int]] = []  # (count index, rhs, sign)
        for i in range(self.kinds + 1):
            if node.lo[i] > 0:
                count_rows.append((i, float(node.lo[i]), -1))
            if math.isfinite(node.hi[i]):
                count_rows.append((i, float(node.hi[i]), 1))
        n_art = sum(1 for _, _, sign in count_rows if sign > 0)
        nvar = ncol + extra + n_art
        c = np.zeros(nvar)
        c[:ncol] = (f[:, 0] + f[:, 1]) * _SCALE
        if extra:
            c[ncol] = slack_cost * _SCALE
        c[ncol + extra :] = self.big_m * _SCALE
        blocks = [sparse.hstack([-a, sparse.csc_matrix((self.n, nvar - ncol))])]
        b = [-np.ones(self.n)]
        if link is not None:
            row = np.zeros((1, nvar))
            row[0, :ncol] = link
            if extra:
                row[0, ncol] = -1.0
            blocks.append(sparse.csc_matrix(row))
            b.append(np.array([rhs]))
        art = ncol + extra
        for i, value, sign in count_rows:
            row = np.zeros((1, nvar))
            row[0, :ncol] = sign * (ks == i if i < self.kinds else np.ones(ncol))
            if sign > 0:
                row[0, art] = -1.0
                art += 1
            blocks.append(sparse.csc_matrix(row))
            b.append(np.array([sign * value]))
        res = linprog(
            c,
            A_ub=sparse.vstack(blocks).tocsc(),
            b_ub=np.concatenate(b),
            bounds=(0, None),
            method="highs",
        )
        if res.status == 2:
            raise _Infeasible
        if res.status != 0:
            raise RuntimeError(f"exact: the master LP failed ({res.message})")
        lam = np.minimum(np.asarray(res.ineqlin.marginals) / _SCALE, 0.0)
        # Shaved by 1e-11 $ each (any multipliers >= 0 are valid; the dual value drops
        # by at most N x 1e-11 $): at a degenerate LP the profit weights y - c are 0 up
        # to the LP's noise, which the pricing bound would sum instead of pruning.
        y = np.maximum(-lam[: self.n] - 1e-11, 0.0)
        at = self.n
        mu = nu = 0.0
        dual = float(y.sum())
        if link is not None:
            if self.v.mode == 2:
                mu = float(min(-lam[at], slack_cost))
            else:
                nu = float(-lam[at])
            dual -= (mu + nu) * rhs
            at += 1
        fixed = np.array(self.jp.startup_usd, dtype=np.float64)
        pen_lo = np.zeros(self.kinds + 1)
        for t, (i, value, sign) in enumerate(count_rows):
            lam_i = float(lam[at + t])  # <= 0
            dual += sign * value * lam_i
            if sign < 0:
                pen_lo[i] = -lam_i
            # a column of type i has coefficient `sign` in this row: its reduced cost
            # (c - A'lam) loses sign x lam_i
            if i < self.kinds:
                fixed[i] -= sign * lam_i
            else:
                fixed -= sign * lam_i
        x = np.asarray(res.x[:ncol])
        counts = np.array(
            [x[ks == k].sum() for k in range(self.kinds)] + [x.sum()], dtype=np.float64
        )
        return _NodeLP(y, mu, nu, fixed, dual, counts, pen_lo, keep, x)

    def mip(
        self,
        masks: Sequence[int] | IntArray,
        ks: Sequence[int] | IntArray,
        f: FloatArray,
        time_limit: float,
        node: _Node | None = None,
    ) -> tuple[list[tuple[int, list[int]]] | None, float, bool]:
        """Set partitioning over the given columns inside `node`'s box: (VMs or None,
        dual bound $, solved). Besides a 0/1 variable per column it has an integer count
        of VMs per type and in all: branching on them closes the gap of bin-packing-like
        batches far faster than branching on columns."""
        if self.late_mode:
            return self._mip_late(masks, ks, f, time_limit, node)
        ncol = len(masks)
        if ncol == 0:
            return None, math.inf, True
        ks = np.asarray(ks, dtype=np.int64)
        a = self._matrix(masks)
        link, rhs, slack_cost = self._link(f)
        extra = 1 if (link is not None and slack_cost > 0) else 0
        kinds = self.kinds
        # variables: columns | slack (avg) | count per type | total count
        nvar = ncol + extra + kinds + 1
        cost = np.zeros(nvar)
        cost[:ncol] = (f[:, 0] + f[:, 1]) * _SCALE
        if extra:
            cost[ncol] = slack_cost * _SCALE
        integrality = np.ones(nvar)
        lb = np.zeros(nvar)
        ub = np.ones(nvar)
        if extra:
            integrality[ncol] = 0
            ub[ncol] = np.inf
        ub[ncol + extra :] = np.inf
        if node is not None:
            lb[ncol + extra :] = node.lo
            ub[ncol + extra :] = node.hi
        rows = [sparse.hstack([a, sparse.csc_matrix((self.n, nvar - ncol))]).tocsc()]
        lo = [np.ones(self.n)]
        hi = [np.ones(self.n)]
        count = sparse.lil_matrix((kinds + 1, nvar))
        for k in range(kinds):
            count[k, np.flatnonzero(ks == k)] = 1.0
            count[k, ncol + extra + k] = -1.0
            count[kinds, ncol + extra + k] = 1.0
        count[kinds, nvar - 1] = -1.0
        rows.append(count.tocsc())
        lo.append(np.zeros(kinds + 1))
        hi.append(np.zeros(kinds + 1))
        if link is not None:
            row = np.zeros((1, nvar))
            row[0, :ncol] = link
            if extra:
                row[0, ncol] = -1.0
            rows.append(sparse.csc_matrix(row))
            lo.append(np.array([-np.inf]))
            hi.append(np.array([rhs]))
        res = _milp(
            time_limit,
            cost,
            integrality=integrality,
            bounds=Bounds(lb, ub),
            constraints=[
                LinearConstraint(
                    sparse.vstack(rows).tocsc(), np.concatenate(lo), np.concatenate(hi)
                )
            ],
            options={"mip_rel_gap": 0.0, "disp": False},
        )
        if res is None:  # stopped by the time limit before HiGHS returned
            return None, -math.inf, False
        self.stats.nodes += int(getattr(res, "mip_node_count", 0) or 0)
        bound = getattr(res, "mip_dual_bound", None)
        bound = -math.inf if bound is None or not np.isfinite(bound) else float(bound) / _SCALE
        if res.status == 2:  # infeasible: no plan among these columns
            return None, math.inf, True
        solved = res.status == 0
        if res.x is None:
            return None, bound, solved
        chosen = np.flatnonzero(res.x[:ncol] > 0.5)
        vms = [(int(ks[c]), _jobs_of(int(masks[c]))) for c in chosen]
        if solved:
            bound = max(bound, float(res.fun) / _SCALE)
        return vms, bound, solved

    # -- percentile: on-time columns and late variables ------------------------------

    def _late_bounds(self, node: _Node | None) -> tuple[FloatArray, FloatArray]:
        """Bounds of the late variables z then the late-only VM counts y."""
        nz = len(self.late_vars)
        lo = np.zeros(nz + self.kinds)
        hi = np.concatenate([np.ones(nz), np.full(self.kinds, float(self.n))])
        for name, index, a, b in node.fixed if node is not None else ():
            at = index if name == "z" else nz + index
            lo[at], hi[at] = max(lo[at], a), min(hi[at], b)
        return lo, hi

    def _late_rows(
        self, a_x: sparse.csc_matrix, ks: IntArray, nvar: int
    ) -> tuple[sparse.csc_matrix, sparse.csc_matrix, sparse.csc_matrix]:
        """Rows over [x (columns of types ks) | z | y | ...]: each job's coverage, the late
        count, and per late variable z[j, k] - (VMs of type k) <= 0."""
        nz = len(self.late_vars)
        n_x = a_x.shape[1]
        zj = np.array([j for j, _ in self.late_vars], dtype=np.int64)
        zk = np.array([k for _, k in self.late_vars], dtype=np.int64)
        cover = sparse.hstack(
            [
                a_x,
                sparse.csc_matrix((np.ones(nz), (zj, np.arange(nz))), shape=(self.n, nz)),
                sparse.csc_matrix((self.n, nvar - n_x - nz)),
            ]
        ).tocsc()
        late = sparse.csc_matrix(
            (np.ones(nz), (np.zeros(nz, dtype=np.int64), n_x + np.arange(nz))), shape=(1, nvar)
        )
        # exist: for row t, -1 on every column of type zk[t], +1 on z_t, -1 on y_zk[t]
        rows, cols, vals = [], [], []
        for k in range(self.kinds):
            ts = np.flatnonzero(zk == k)
            cs = np.flatnonzero(ks == k)
            if ts.size and cs.size:
                rr, cc = np.meshgrid(ts, cs, indexing="ij")
                rows.append(rr.ravel())
                cols.append(cc.ravel())
                vals.append(-np.ones(rr.size))
        rows.append(np.arange(nz))
        cols.append(n_x + np.arange(nz))
        vals.append(np.ones(nz))
        rows.append(np.arange(nz))
        cols.append(n_x + nz + zk)
        vals.append(-np.ones(nz))
        exist = sparse.csc_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(nz, nvar),
        )
        return cover, late, exist

    def _master_late(self, node: _Node) -> _NodeLP:
        """The percentile master LP: on-time columns x, late variables z, late-only VMs
        y; rows: coverage >= 1, late count <= allowed, z[j, k] <= VMs of type k, counts
        (of x and y); duals as `master_lp`'s."""
        pairs = _Pairs.of(self.n, node, self.kinds)
        all_masks = np.array(self.cols.mask, dtype=np.int64)
        all_k = np.array(self.cols.k, dtype=np.int64)
        keep = np.flatnonzero(pairs.valid(all_masks, all_k))
        f = np.array(self.cols.f, dtype=np.float64)[keep]
        ks = all_k[keep]
        n_x = keep.size
        nz = len(self.late_vars)
        count_rows: list[tuple[int, float, int]] = []
        for i in range(self.kinds + 1):
            if node.lo[i] > 0:
                count_rows.append((i, float(node.lo[i]), -1))
            if math.isfinite(node.hi[i]):
                count_rows.append((i, float(node.hi[i]), 1))
        n_art = sum(1 for _, _, sign in count_rows if sign > 0)
        nvar = n_x + nz + self.kinds + n_art
        c = np.zeros(nvar)
        c[:n_x] = (f[:, 0] + f[:, 1]) * _SCALE
        zc = np.array([self.jp.price_per_s[k] * self.jp.runtime_s[j, k] for j, k in self.late_vars])
        c[n_x : n_x + nz] = zc * _SCALE
        c[n_x + nz : n_x + nz + self.kinds] = self.jp.startup_usd * _SCALE
        c[n_x + nz + self.kinds :] = self.big_m * _SCALE
        cover, late, exist = self._late_rows(self._matrix(all_masks[keep]), ks, nvar)
        blocks = [-cover, late, exist]
        b = [-np.ones(self.n), np.array([float(self.v.allowed)]), np.zeros(nz)]
        art = n_x + nz + self.kinds
        for i, value, sign in count_rows:
            row = np.zeros((1, nvar))
            row[0, :n_x] = sign * (ks == i if i < self.kinds else np.ones(n_x))
            ycols = n_x + nz + (np.array([i]) if i < self.kinds else np.arange(self.kinds))
            row[0, ycols] = sign
            if sign > 0:
                row[0, art] = -1.0
                art += 1
            blocks.append(sparse.csc_matrix(row))
            b.append(np.array([sign * value]))
        a_ub = sparse.vstack(blocks).tocsc()
        b_ub = np.concatenate(b)
        zlo, zhi = self._late_bounds(node)
        bounds = (
            [(0.0, None)] * n_x
            + list(zip(zlo, np.where(np.isfinite(zhi), zhi, None), strict=True))
            + [(0.0, None)] * n_art
        )
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.status == 2:
            raise _Infeasible
        if res.status != 0:
            raise RuntimeError(f"exact: the master LP failed ({res.message})")
        lam = np.minimum(np.asarray(res.ineqlin.marginals) / _SCALE, 0.0)
        y = np.maximum(-lam[: self.n] - 1e-11, 0.0)  # shaved: see master_lp
        lam[: self.n] = -y
        nu = float(-lam[self.n])
        pi = -lam[self.n + 1 : self.n + 1 + nz]
        dual = float(y.sum()) - nu * float(self.v.allowed)
        fixed = np.array(self.jp.startup_usd, dtype=np.float64)
        for k in range(self.kinds):
            fixed[k] -= float(pi[[t for t, (_, kk) in enumerate(self.late_vars) if kk == k]].sum())
        pen_lo = np.zeros(self.kinds + 1)
        at = self.n + 1 + nz
        for t, (i, value, sign) in enumerate(count_rows):
            lam_i = float(lam[at + t])
            dual += sign * value * lam_i
            if sign < 0:
                pen_lo[i] = -lam_i
            if i < self.kinds:
                fixed[i] -= sign * lam_i
            else:
                fixed -= sign * lam_i
        # reduced costs of z and y under these multipliers: what a plan's late variables
        # can take off the bound (z <= 1, y <= the count's upper bound)
        rc = c / _SCALE - a_ub.T @ lam
        rc_z = rc[n_x : n_x + nz]
        rc_y = rc[n_x + nz : n_x + nz + self.kinds]
        y_hi = np.array(
            [
                min(float(self.n), node.hi[k], node.hi[self.kinds], zhi[nz + k])
                for k in range(self.kinds)
            ]
        )
        extra_neg = float(np.minimum(rc_z, 0.0) @ np.minimum(zhi[:nz], 1.0))
        extra_neg += float(np.minimum(rc_y, 0.0) @ y_hi)
        x = np.asarray(res.x[:n_x])
        zv = np.asarray(res.x[n_x : n_x + nz])
        yv = np.asarray(res.x[n_x + nz : n_x + nz + self.kinds])
        counts = np.array(
            [x[ks == k].sum() + yv[k] for k in range(self.kinds)] + [x.sum() + yv.sum()],
            dtype=np.float64,
        )
        return _NodeLP(y, 0.0, nu, fixed, dual, counts, pen_lo, keep, x, zv, yv, extra_neg)

    def _late_plan(
        self, vms: list[tuple[int, list[int]]], late: list[tuple[int, int]]
    ) -> list[tuple[int, list[int]]]:
        """On-time VMs plus late jobs (job, type): each late job after the jobs of a VM of
        its type, or on a VM of late jobs of that type when there is none."""
        out = [(k, list(js)) for k, js in vms]
        for j, k in late:
            host = next((vm for vm in out if vm[0] == k), None)
            if host is None:
                out.append((k, [j]))
            else:
                host[1].append(j)
        return out

    def _mip_late(
        self,
        masks: Sequence[int] | IntArray,
        ks: Sequence[int] | IntArray,
        f: FloatArray,
        time_limit: float,
        node: _Node | None,
    ) -> tuple[list[tuple[int, list[int]]] | None, float, bool]:
        """`mip` for percentile: on-time columns, late variables and late-only VMs."""
        masks = np.asarray(masks, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        n_x = masks.size
        nz = len(self.late_vars)
        kinds = self.kinds
        nvar = n_x + nz + kinds + kinds + 1
        cost = np.zeros(nvar)
        cost[:n_x] = (f[:, 0] + f[:, 1]) * _SCALE
        cost[n_x : n_x + nz] = (
            np.array([self.jp.price_per_s[k] * self.jp.runtime_s[j, k] for j, k in self.late_vars])
            * _SCALE
        )
        cost[n_x + nz : n_x + nz + kinds] = self.jp.startup_usd * _SCALE
        cover, late, exist = self._late_rows(self._matrix(masks), ks, nvar)
        count = sparse.lil_matrix((kinds + 1, nvar))
        for k in range(kinds):
            count[k, np.flatnonzero(ks == k)] = 1.0
            count[k, n_x + nz + k] = 1.0
            count[k, n_x + nz + kinds + k] = -1.0
            count[kinds, n_x + nz + kinds + k] = 1.0
        count[kinds, nvar - 1] = -1.0
        matrix = sparse.vstack([cover, late, exist, count.tocsc()]).tocsc()
        row_lo = np.concatenate(
            [np.ones(self.n), [-np.inf], np.full(nz, -np.inf), np.zeros(kinds + 1)]
        )
        row_hi = np.concatenate(
            [np.ones(self.n), [float(self.v.allowed)], np.zeros(nz), np.zeros(kinds + 1)]
        )
        lb = np.zeros(nvar)
        ub = np.ones(nvar)
        zlo, zhi = self._late_bounds(node)
        lb[n_x : n_x + nz + kinds] = zlo
        ub[n_x : n_x + nz + kinds] = zhi
        ub[n_x + nz + kinds :] = np.inf
        if node is not None:
            lb[n_x + nz + kinds :] = node.lo
            ub[n_x + nz + kinds :] = node.hi
        res = _milp(
            time_limit,
            cost,
            integrality=np.ones(nvar),
            bounds=Bounds(lb, ub),
            constraints=[LinearConstraint(matrix, row_lo, row_hi)],
            options={"mip_rel_gap": 0.0, "disp": False},
        )
        if res is None:
            return None, -math.inf, False
        self.stats.nodes += int(getattr(res, "mip_node_count", 0) or 0)
        bound = getattr(res, "mip_dual_bound", None)
        bound = -math.inf if bound is None or not np.isfinite(bound) else float(bound) / _SCALE
        if res.status == 2:
            return None, math.inf, True
        solved = res.status == 0
        if res.x is None:
            return None, bound, solved
        chosen = np.flatnonzero(res.x[:n_x] > 0.5)
        vms = [(int(ks[c]), _jobs_of(int(masks[c]))) for c in chosen]
        late_list = [self.late_vars[t] for t in np.flatnonzero(res.x[n_x : n_x + nz] > 0.5)]
        if solved:
            bound = max(bound, float(res.fun) / _SCALE)
        return self._late_plan(vms, late_list), bound, solved
