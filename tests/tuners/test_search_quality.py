"""The model-based tuners search better than random search at equal budget.

A synthetic objective with a known optimum stands in for an emulator run (no engine): a
linear function of the eight weights, f(w) = c . w / sum|c|, whose coefficients c (drawn
per problem, signs random) put the optimum at a corner of [0, 1]^8 with value
sum(max(c, 0)) / sum|c|; every evaluation adds Gaussian noise (sd 0.01). A tuner returns
the weights of its best noisy score; its regret is the optimum minus f at those weights
(noise-free). Over many problems, the same problem and noise for every tuner (paired), TPE
and BO must have a lower regret than random search with a 95% paired Student-t interval
(`clusteremu.tuners.protocol.paired_interval`) that excludes 0. Replacing either by random search
makes the test fail (the differences are then all 0, or centred on 0 for another seed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from clusteremu.tuners.protocol import paired_interval
from clusteremu.tuners.strategies import make_strategy

STATIC = np.zeros(10, dtype=np.float32)
#: Standard deviation of the evaluation noise (the objective spans [-1, 1]).
NOISE = 0.01


def problem(index: int) -> tuple[Callable[[tuple[float, ...]], float], float]:
    """Problem `index`: the noise-free objective and its known optimum value."""
    rng = np.random.default_rng([index, 99])
    c: npt.NDArray[np.float64] = rng.uniform(0.5, 1.0, 8) * rng.choice([-1.0, 1.0], 8)
    scale = float(np.abs(c).sum())

    def f(w: tuple[float, ...]) -> float:
        return float(np.dot(c, w)) / scale

    return f, float(np.clip(c, 0.0, None).sum()) / scale


def regret(tuner: str, index: int, budget: int) -> float:
    """Optimum minus the objective at the weights `tuner` returns on problem `index`."""
    f, optimum = problem(index)
    noise = np.random.default_rng([index, 7])
    strategy = make_strategy(tuner, budget, index, STATIC)
    best, chosen = -np.inf, None
    for _ in range(strategy.evaluations()):
        w = strategy.ask()
        score = f(w) + NOISE * float(noise.standard_normal())
        strategy.tell(w, score)
        if score > best:
            best, chosen = score, w
    assert chosen is not None
    return optimum - f(chosen)


@pytest.mark.parametrize(("tuner", "budget", "problems"), [("tpe", 12, 20), ("bo", 5, 12)])
def test_model_based_tuners_beat_random_search_at_equal_budget(
    tuner: str, budget: int, problems: int
) -> None:
    tuned = np.array([regret(tuner, i, budget) for i in range(problems)])
    random = np.array([regret("random", i, budget) for i in range(problems)])
    assert (tuned >= -1e-12).all() and (random >= -1e-12).all()  # the optimum is known
    gain = paired_interval(random, tuned)  # regret of random minus regret of the tuner
    assert gain.low > 0.0, (
        f"{tuner} at budget {budget} is not better than random search over {problems} "
        f"problems: regret random - {tuner} = {gain.estimate:.4f}, 95% interval "
        f"{gain.describe()}"
    )
