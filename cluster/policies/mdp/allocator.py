"""The `mdp` allocator: class shares from a policy table, EQUI within a class (the MDP
paper, section 2.2; table from the value iteration of its section 4).

At every event in its pool it counts x_j, the jobs of each class the policy covers, reads the
shares of the state (min(x_1, B), ..., min(x_m, B)) and gives each class-j job share_j k / x_j
cores. With two classes the table is the paper's a(x1, x2), class 1's share: class-1 jobs get
a k / x1 cores each and class-2 jobs (1 - a) k / x2. The engine does not block arrivals, so
states beyond the truncation B use the table's edge (with B chosen so that blocking is
negligible, these states are very rare).

Where the table comes from (scenario `scheduler.allocator.params`):

- `table`: an explicit (B + 1) x (B + 1) nested list a[x1][x2] (two classes), or shares of
  shape (B + 1,) * m + (m,);
- otherwise `policy: optimal` (default) solves the MDP for the scenario's parameters at
  setup, with `theta` (believed parallel fractions; default the scenario's own Amdahl
  parameters), `truncation` (B, default 20), `actions` (M, default 100) and `refine`;
- `policy: equi` uses share_j = x_j / sum(x) (every job the same share).

`classes` names the classes the policy covers, in order (default: all of the scenario's).
`learn` holds the settings of `clusteremu learn` and is ignored by ordinary runs. The learner
swaps tables between epochs with `set_table`. The estimator needs no recording: the state
path follows from the per-job arrival and end times and the table in force. The compiled
path (`compiled`) and the Python path agree.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Allocation, Allocator, PolicyError, PoolView
from clusteremu.cluster.policies.mdp.kernel import P_B, P_CLASSES, P_M, allocate_mdp, shares_offset
from clusteremu.cluster.policies.mdp.learn_config import LearnConfig
from clusteremu.cluster.policies.mdp.model import MdpModelError, check_theta, model_from_spec
from clusteremu.cluster.policies.registry import register

FloatArray = npt.NDArray[np.float64]

POLICIES = ("optimal", "equi")


def shares_of(table: npt.ArrayLike) -> FloatArray:
    """A two-class a-table (B+1, B+1) as shares (a, 1 - a); a shares array is checked."""
    arr = np.asarray(table, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[0] == arr.shape[1] and arr.shape[0] >= 2:
        if not np.all(np.isfinite(arr)) or np.any(arr < 0.0) or np.any(arr > 1.0):
            raise MdpModelError("table", "expected shares a(x1, x2) in [0, 1]")
        return np.stack([arr, 1.0 - arr], axis=-1)
    m = arr.ndim - 1
    if m < 2 or arr.shape[-1] != m or len(set(arr.shape[:-1])) != 1 or arr.shape[0] < 2:
        raise MdpModelError(
            "table",
            "expected a square (B+1) x (B+1) table a[x1][x2] or "
            f"shares of shape (B+1,)*m + (m,), got {arr.shape}",
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0.0) or np.any(arr.sum(-1) > 1 + 1e-9):
        raise MdpModelError("table", "expected non-negative shares summing to at most 1")
    return arr


@register("allocator", "mdp")
class MdpAllocator(Allocator):
    """Shares per class from a policy table (two classes: class 1's share a(x1, x2));
    EQUI within each class."""

    compiled = allocate_mdp

    def __init__(
        self,
        table: list[list[float]] | npt.ArrayLike | None = None,
        policy: str = "optimal",
        theta: list[float] | dict[str, float] | None = None,
        truncation: int = 20,
        actions: int = 100,
        refine: bool = False,
        classes: list[str] | None = None,
        learn: dict[str, Any] | None = None,
    ) -> None:
        """See the module docstring; bad values raise MdpModelError (a ValueError)."""
        if policy not in POLICIES:
            raise MdpModelError("policy", f"expected one of {POLICIES}, got {policy!r}")
        if isinstance(truncation, bool) or not isinstance(truncation, int) or truncation < 1:
            raise MdpModelError("truncation", f"expected an integer B >= 1, got {truncation!r}")
        if isinstance(actions, bool) or not isinstance(actions, int) or actions < 1:
            raise MdpModelError("actions", f"expected an integer M >= 1, got {actions!r}")
        if classes is not None and (len(classes) < 2 or len(set(classes)) != len(classes)):
            raise MdpModelError(
                "classes", f"expected two or more distinct class names, got {classes!r}"
            )
        if isinstance(theta, list | tuple):
            check_theta(tuple(float(t) for t in theta), len(theta))
        elif isinstance(theta, dict):
            for name, t in theta.items():
                check_theta((float(t),), 1, f"theta.{name}")
        elif theta is not None:
            raise MdpModelError(
                "theta", f"expected a list or a mapping class -> value, got {theta!r}"
            )
        self.policy, self.theta, self.truncation = policy, theta, truncation
        self.actions, self.refine, self.classes = actions, refine, classes
        self.learn = dict(learn or {})
        if self.learn:
            LearnConfig.from_dict(self.learn)  # validate early (scenario load)
        self._shares: FloatArray | None = None
        if table is not None:
            self._shares = shares_of(table)
            self.truncation = self._shares.shape[0] - 1
        self._params: FloatArray = np.zeros(0)
        self._slots: list[int] = []

    # -- set-up ---------------------------------------------------------------------------

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        """Resolve the classes and build the table; a scenario the policy cannot serve raises
        PolicyError (naming the field), which the CLI reports without a traceback."""
        try:
            self._setup(spec)
        except MdpModelError as exc:
            raise PolicyError(
                self.name,
                0.0,
                f"cannot build the policy table: {exc} (give params.table, or policy: equi)",
            ) from exc

    def _setup(self, spec: SimulationSpec) -> None:
        names = [c.name for c in spec.classes]
        wanted = self.classes if self.classes is not None else names
        for name in wanted:
            if name not in names:
                raise MdpModelError("classes", f"expected class names among {names}, got {name!r}")
        if len(wanted) < 2:
            raise MdpModelError("classes", f"expected at least two classes, got {len(wanted)}")
        self._slots = [names.index(n) for n in wanted]
        m = len(self._slots)
        if self._shares is None:
            self._shares = self.solve_shares(spec)
        elif self._shares.shape[-1] != m:
            raise MdpModelError(
                "table",
                f"the table covers {self._shares.shape[-1]} classes, the policy {m} ({wanted})",
            )
        self._params = self._build_params(self._shares)

    def believed_theta(self, spec: SimulationSpec) -> tuple[float, ...] | None:
        """The theta the table is solved for: params.theta, else the scenario's own."""
        if self.theta is None:
            return None
        names = [spec.classes[c].name for c in self._slots]
        if isinstance(self.theta, dict):
            missing = [n for n in names if n not in self.theta]
            if missing:
                raise MdpModelError("theta", f"expected a value for classes {missing}")
            return tuple(float(self.theta[n]) for n in names)
        if len(self.theta) != len(names):
            raise MdpModelError("theta", f"expected {len(names)} values, got {len(self.theta)}")
        return tuple(float(t) for t in self.theta)

    def solve_shares(self, spec: SimulationSpec) -> FloatArray:
        from clusteremu.cluster.policies.mdp.solver import equi_shares, solve

        if self.policy == "equi":
            return equi_shares(len(self._slots), self.truncation)
        sub = replace(spec, classes=tuple(spec.classes[c] for c in self._slots))
        model = model_from_spec(sub, self.truncation, self.believed_theta(spec))
        return solve(model, self.actions, refine=self.refine).shares

    def _build_params(self, shares: FloatArray) -> FloatArray:
        m = len(self._slots)
        params = np.zeros(shares_offset(m) + shares.size)
        params[P_B], params[P_M] = shares.shape[0] - 1, m
        params[P_CLASSES : P_CLASSES + m] = self._slots
        params[shares_offset(m) :] = shares.ravel()
        return params

    def kernel_params(self) -> FloatArray:
        """The parameter array itself (not a copy), so `set_table` reaches a running engine."""
        return self._params

    # -- learner interface ------------------------------------------------------------------

    @property
    def shares(self) -> FloatArray:
        """Shares per state and class, shape (B+1,)*m + (m,)."""
        if self._shares is None:
            raise RuntimeError("the mdp allocator has no table before setup()")
        return self._shares.copy()

    @property
    def table(self) -> FloatArray:
        """Two classes: the a-table a(x1, x2); more classes: the shares."""
        sh = self.shares
        return sh[..., 0].copy() if sh.shape[-1] == 2 else sh

    def set_table(self, table: npt.ArrayLike) -> None:
        """Replace the policy table in place (same B and classes); takes effect at the next
        decision."""
        sh = shares_of(table)
        if self._shares is None or sh.shape != self._shares.shape:
            expected = None if self._shares is None else self._shares.shape
            raise MdpModelError("table", f"expected shares of shape {expected}, got {sh.shape}")
        self._shares = sh.copy()
        self._params[shares_offset(sh.shape[-1]) :] = sh.ravel()

    # -- Python decision path ---------------------------------------------------------------

    def allocate(self, view: PoolView) -> Allocation:
        cls = view.class_index
        sh = self.shares if self._shares is None else self._shares
        b = sh.shape[0] - 1
        masks = [cls == c for c in self._slots]
        x = [int(mask.sum()) for mask in masks]
        row = sh[tuple(min(v, b) for v in x)]
        cores = np.zeros(cls.size)
        for j, mask in enumerate(masks):
            if x[j]:
                cores[mask] = row[j] * view.cores / x[j]
        return Allocation(cores)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "policy": self.policy,
            "truncation": self.truncation,
            "actions": self.actions,
        }
