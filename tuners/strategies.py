"""Tuning strategies: who proposes the next weight vector of one tuning experiment.

A strategy is created per experiment (`make_strategy`), asked for weights (`ask`) and told the
score they got (`tell`), one evaluation at a time. Every strategy's first proposal is the
Learning to Score paper's Fixed weights; its proposals depend only on its seed and the
scores it was told, so a tuning is reproducible whatever the number of Ray workers.

=========  ======================================================================================
``fixed``  the Fixed weights only (one evaluation; the baseline)
``random`` Optuna's RandomSampler over [0, 1]^8
``tpe``    Optuna's TPESampler (the Fixed point and one random point start it, then TPE)
``bo``     Optuna's GPSampler: Bayesian optimisation with a Gaussian process (Matern 5/2 kernel,
           log expected improvement; the paper used a squared-exponential kernel with UCB 0.5;
           scikit-optimize is archived and Ray Tune dropped it). Needs torch (extra ``rl``).
``rl``     an agent trained by `clusteremu train-rl` (`clusteremu.tuners.rl`; RecurrentPPO or SAC),
           deterministic: the policy's mean action for the experiment's history; with
           ``untrained=True`` the same network before training (an ablation)
=========  ======================================================================================

Registering another: `register_strategy(name)` on a class with the `Strategy` interface.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.tuners.domains import FIXED, WEIGHT_NAMES

#: The registered strategies, by name.
STRATEGIES: dict[str, type[Strategy]] = {}


def register_strategy(name: str) -> Callable[[type[Strategy]], type[Strategy]]:
    """Class decorator: make a strategy available as ``--tuner name``."""

    def add(cls: type[Strategy]) -> type[Strategy]:
        cls.name = name
        STRATEGIES[name] = cls
        return cls

    return add


class Strategy:
    """Ask/tell interface of one experiment's search; the first ask is the Fixed weights.

    `static` is the experiment's coarse description (`clusteremu.tuners.domains.static_features`),
    which
    only the RL agent reads; `budget` counts every evaluation, the Fixed one included.
    """

    name = "base"

    def __init__(
        self, budget: int, seed: int, static: npt.NDArray[np.float32], **options: Any
    ) -> None:
        self.budget = int(budget)
        self.seed = int(seed)
        self.static = static
        self.tried: list[tuple[float, ...]] = []
        self.scores: list[float] = []

    def evaluations(self) -> int:
        """How many evaluations this strategy makes (the budget, or fewer)."""
        return self.budget

    def ask(self) -> tuple[float, ...]:
        """The next weight vector (one per `WEIGHT_NAMES`, each in [0, 1])."""
        if not self.tried:
            return FIXED
        return self.propose()

    def propose(self) -> tuple[float, ...]:
        raise NotImplementedError

    def tell(self, weights: Sequence[float], score: float) -> None:
        """Record the score of `weights` (NaN: the evaluation failed)."""
        self.tried.append(tuple(float(w) for w in weights))
        self.scores.append(float(score))


@register_strategy("fixed")
class FixedStrategy(Strategy):
    """The Fixed weights -- or the given `weights` -- evaluated once."""

    def __init__(
        self,
        budget: int,
        seed: int,
        static: npt.NDArray[np.float32],
        weights: Sequence[float] | None = None,
        **options: Any,
    ) -> None:
        from clusteremu.tuners.domains import check_weights

        super().__init__(budget, seed, static, **options)
        self.weights = FIXED if weights is None else check_weights(weights)

    def evaluations(self) -> int:
        return 1

    def ask(self) -> tuple[float, ...]:
        return self.weights


class OptunaStrategy(Strategy):
    """An Optuna study per experiment, asked and told one trial at a time."""

    def __init__(
        self, budget: int, seed: int, static: npt.NDArray[np.float32], **options: Any
    ) -> None:
        import optuna
        from optuna.distributions import FloatDistribution

        super().__init__(budget, seed, static, **options)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space: dict[str, Any] = {n: FloatDistribution(0.0, 1.0) for n in WEIGHT_NAMES}
        self.study = optuna.create_study(direction="maximize", sampler=self.sampler())
        self.study.enqueue_trial(dict(zip(WEIGHT_NAMES, FIXED, strict=True)))
        self._open: dict[tuple[float, ...], Any] = {}

    def sampler(self) -> Any:
        raise NotImplementedError

    def ask(self) -> tuple[float, ...]:
        trial = self.study.ask(self.space)
        weights = tuple(float(trial.params[n]) for n in WEIGHT_NAMES)
        self._open[weights] = trial
        return weights

    def tell(self, weights: Sequence[float], score: float) -> None:
        key = tuple(float(w) for w in weights)
        trial = self._open.pop(key)
        if math.isfinite(score):
            self.study.tell(trial, score)
        else:
            import optuna

            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        super().tell(weights, score)


@register_strategy("random")
class RandomStrategy(OptunaStrategy):
    """Uniform random weights (Optuna's RandomSampler)."""

    def sampler(self) -> Any:
        import optuna

        return optuna.samplers.RandomSampler(seed=self.seed)


@register_strategy("tpe")
class TpeStrategy(OptunaStrategy):
    """Tree-structured Parzen estimator; two start-up points (Fixed and one random)."""

    def sampler(self) -> Any:
        import optuna

        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=2)


@register_strategy("bo")
class BayesStrategy(OptunaStrategy):
    """Gaussian-process Bayesian optimisation (Optuna's GPSampler); two start-up points."""

    def sampler(self) -> Any:
        import optuna

        try:
            import torch  # noqa: F401  (GPSampler's dependency)
        except ImportError:
            raise ValueError(
                "--tuner bo: Optuna's GPSampler needs torch; "
                "install the extra: pip install -e '.[rl]'"
            ) from None
        torch.set_num_threads(1)
        return optuna.samplers.GPSampler(
            seed=self.seed, n_startup_trials=2, deterministic_objective=False
        )


@register_strategy("rl")
class RlStrategy(Strategy):
    """The trained agent's deterministic proposals (`clusteremu.tuners.rl`); `untrained`: the
    same network with 0 training steps (`clusteremu.tuners.rl.untrained_agent`)."""

    def __init__(
        self,
        budget: int,
        seed: int,
        static: npt.NDArray[np.float32],
        model: str | Path | None = None,
        untrained: bool = False,
        **options: Any,
    ) -> None:
        from clusteremu.tuners import rl

        super().__init__(budget, seed, static, **options)
        if model is None:
            raise ValueError("--tuner rl needs --model MODEL (a zip from `clusteremu train-rl`)")
        self.agent = rl.load_agent(model)
        if untrained:
            self.agent = rl.untrained_agent(self.agent)
        if self.agent.budget != budget:
            raise ValueError(
                f"--budget {budget}: the agent in {model} was trained for a budget of "
                f"{self.agent.budget}"
            )

    def propose(self) -> tuple[float, ...]:
        return self.agent.propose(self.static, self.tried, self.scores)


def make_strategy(
    name: str, budget: int, seed: int, static: npt.NDArray[np.float32], **options: Any
) -> Strategy:
    """A new strategy `name` for one experiment; ValueError for an unknown name or budget."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown tuner {name!r}; expected one of {', '.join(STRATEGIES)}")
    if isinstance(budget, bool) or int(budget) < 1:
        raise ValueError(f"budget: expected at least 1 evaluation, got {budget!r}")
    return STRATEGIES[name](int(budget), int(seed), static, **options)
