"""The `mdp` allocator: class shares from a policy table, EQUI within a class (seed 001,
section 2.2; table from the value iteration of section 4).

At every event in its pool it counts x1 and x2 (jobs of "class 1" and "class 2"), reads
a = a(min(x1, B), min(x2, B)) and gives each class-1 job a k / x1 cores and each class-2 job
(1 - a) k / x2. The engine does not block arrivals, so states beyond the truncation B use the
table's edge (with B chosen so that blocking is negligible, these states are very rare).

Where the table comes from (scenario `scheduler.allocator.params`):

- `table`: an explicit (B + 1) x (B + 1) nested list;
- otherwise `policy: optimal` (default) solves the MDP for the scenario's parameters at
  setup, with `theta` (believed parallel fractions; default the scenario's own Amdahl
  parameters), `truncation` (B, default 20), `actions` (M, default 100) and `refine`;
- `policy: equi` uses a = x1 / (x1 + x2) (every job the same share).

`learn` holds the settings of `clusteremu learn` and is ignored by ordinary runs. The learner
swaps tables between epochs with `set_table`. The estimator needs no recording: the state
path follows from the per-job arrival and end times and the table in force. The compiled
path (`kernel_code`) and the Python path agree.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from cluster.model import SimulationSpec
from cluster.policies.base import Allocation, Allocator, PoolView
from cluster.policies.compiled import ALLOC_MDP
from cluster.policies.mdp.kernel import HEADER, P_B, P_C1, P_C2
from cluster.policies.mdp.model import MdpModelError, check_theta, model_from_spec
from cluster.policies.registry import register

FloatArray = npt.NDArray[np.float64]

POLICIES = ("optimal", "equi")


@register("allocator", "mdp")
class MdpAllocator(Allocator):
    """Class-1 share a(x1, x2) of the pool from a table; EQUI within each class."""

    kernel_code: ClassVar[int] = ALLOC_MDP

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
        if classes is not None and (len(classes) != 2 or len(set(classes)) != 2):
            raise MdpModelError("classes", f"expected two distinct class names, got {classes!r}")
        if isinstance(theta, list | tuple):
            check_theta(tuple(float(t) for t in theta), len(theta))
        elif isinstance(theta, dict):
            for name, t in theta.items():
                check_theta((float(t),), 1, f"theta.{name}")
        elif theta is not None:
            raise MdpModelError("theta",
                                f"expected a list or a mapping class -> value, got {theta!r}")
        self.policy, self.theta, self.truncation = policy, theta, truncation
        self.actions, self.refine, self.classes = actions, refine, classes
        self.learn = dict(learn or {})
        if self.learn:
            from cluster.policies.mdp.learner import LearnConfig

            LearnConfig.from_dict(self.learn)  # validate early (scenario load)
        self._table: FloatArray | None = None
        if table is not None:
            arr = np.asarray(table, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
                raise MdpModelError("table",
                                    f"expected a square (B+1) x (B+1) table, got {arr.shape}")
            if not np.all(np.isfinite(arr)) or np.any(arr < 0.0) or np.any(arr > 1.0):
                raise MdpModelError("table", "expected shares in [0, 1]")
            self._table = arr
            self.truncation = arr.shape[0] - 1
        self._params: FloatArray = np.zeros(0)
        self._c1, self._c2 = 0, 1

    # -- set-up ---------------------------------------------------------------------------

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        names = [c.name for c in spec.classes]
        if self.classes is None:
            if len(names) != 2:
                raise MdpModelError("classes", f"the scenario has {len(names)} classes; name the "
                                    "two the table refers to with params.classes")
            self._c1, self._c2 = 0, 1
        else:
            for name in self.classes:
                if name not in names:
                    raise MdpModelError("classes",
                                        f"expected class names among {names}, got {name!r}")
            self._c1, self._c2 = names.index(self.classes[0]), names.index(self.classes[1])
        if self._table is None:
            self._table = self.solve_table(spec)
        self._params = self._build_params(self._table)

    def believed_theta(self, spec: SimulationSpec) -> tuple[float, float] | None:
        """The theta the table is solved for: params.theta, else the scenario's own."""
        if self.theta is None:
            return None
        if isinstance(self.theta, dict):
            names = [c.name for c in spec.classes]
            missing = [n for n in (names[self._c1], names[self._c2]) if n not in self.theta]
            if missing:
                raise MdpModelError("theta", f"expected a value for classes {missing}")
            return (float(self.theta[names[self._c1]]), float(self.theta[names[self._c2]]))
        return (float(self.theta[0]), float(self.theta[1]))

    def solve_table(self, spec: SimulationSpec) -> FloatArray:
        from cluster.policies.mdp.solver import equi_table, solve

        if self.policy == "equi":
            return equi_table(self.truncation)
        two = _two_class_spec(spec, self._c1, self._c2)
        model = model_from_spec(two, self.truncation, self.believed_theta(spec))
        return solve(model, self.actions, refine=self.refine).table

    def _build_params(self, table: FloatArray) -> FloatArray:
        b = table.shape[0] - 1
        params = np.zeros(HEADER + (b + 1) ** 2)
        params[P_B], params[P_C1], params[P_C2] = b, self._c1, self._c2
        params[HEADER: HEADER + (b + 1) ** 2] = table.ravel()
        return params

    def kernel_params(self) -> FloatArray:
        """The parameter array itself (not a copy), so `set_table` reaches a running engine."""
        return self._params

    # -- learner interface ------------------------------------------------------------------

    @property
    def table(self) -> FloatArray:
        if self._table is None:
            raise RuntimeError("the mdp allocator has no table before setup()")
        return self._table.copy()

    def set_table(self, table: npt.ArrayLike) -> None:
        """Replace the policy table in place (same B); takes effect at the next decision."""
        t = np.asarray(table, dtype=np.float64)
        b = int(self._params[P_B])
        if t.shape != (b + 1, b + 1):
            raise MdpModelError("table", f"expected shape {(b + 1, b + 1)}, got {t.shape}")
        self._table = t.copy()
        self._params[HEADER: HEADER + (b + 1) ** 2] = t.ravel()

    # -- Python decision path ---------------------------------------------------------------

    def allocate(self, view: PoolView) -> Allocation:
        cls = view.class_index
        in1, in2 = cls == self._c1, cls == self._c2
        x1, x2 = int(in1.sum()), int(in2.sum())
        b = int(self._params[P_B])
        a = float(self._params[HEADER + min(x1, b) * (b + 1) + min(x2, b)])
        cores = np.zeros(cls.size)
        if x1:
            cores[in1] = a * view.cores / x1
        if x2:
            cores[in2] = (1.0 - a) * view.cores / x2
        return Allocation(cores)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "policy": self.policy, "truncation": self.truncation,
                "actions": self.actions}


def _two_class_spec(spec: SimulationSpec, c1: int, c2: int) -> SimulationSpec:
    from dataclasses import replace

    if len(spec.classes) == 2 and (c1, c2) == (0, 1):
        return spec
    return replace(spec, classes=(spec.classes[c1], spec.classes[c2]))
