"""Tuning strategies: Fixed first, seeded and reproducible proposals, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.tuners.domains import FIXED, WEIGHT_NAMES
from clusteremu.tuners.strategies import STRATEGIES, make_strategy

STATIC = np.zeros(10, dtype=np.float32)


def objective(w: tuple[float, ...]) -> float:
    """A smooth stand-in for a run's score, best at 0.3 everywhere."""
    return 1.0 - float(np.sum((np.asarray(w) - 0.3) ** 2)) / len(w)


def proposals(name: str, seed: int, budget: int = 6) -> list[tuple[float, ...]]:
    s = make_strategy(name, budget, seed, STATIC)
    out = []
    for _ in range(s.evaluations()):
        w = s.ask()
        s.tell(w, objective(w))
        out.append(w)
    return out


@pytest.mark.parametrize("name", ["random", "tpe", "bo"])
def test_searchers_start_at_fixed_and_are_seeded(name: str) -> None:
    a, b, c = proposals(name, 7), proposals(name, 7), proposals(name, 8)
    assert a[0] == FIXED and len(a) == 6
    assert a == b, "same seed and scores, same proposals"
    assert a[1:] != c[1:], "another seed proposes other weights"
    for w in a:
        assert len(w) == len(WEIGHT_NAMES) and all(0.0 <= x <= 1.0 for x in w)


def test_fixed_evaluates_once_and_takes_given_weights() -> None:
    assert proposals("fixed", 1) == [FIXED]
    s = make_strategy("fixed", 5, 0, STATIC, weights=[0.5] * 8)
    assert s.evaluations() == 1 and s.ask() == (0.5,) * 8
    with pytest.raises(ValueError, match="expected 8 weights"):
        make_strategy("fixed", 5, 0, STATIC, weights=[0.5] * 3)


def test_unknown_tuner_and_budget_below_one_are_refused() -> None:
    assert set(STRATEGIES) == {"fixed", "random", "tpe", "bo", "rl"}
    with pytest.raises(ValueError, match="unknown tuner 'grid'"):
        make_strategy("grid", 5, 0, STATIC)
    with pytest.raises(ValueError, match="at least 1 evaluation"):
        make_strategy("tpe", 0, 0, STATIC)
    with pytest.raises(ValueError, match="needs --model"):
        make_strategy("rl", 5, 0, STATIC)


def test_a_failed_evaluation_is_told_and_skipped() -> None:
    s = make_strategy("tpe", 4, 0, STATIC)
    w = s.ask()
    s.tell(w, float("nan"))
    assert len(s.ask()) == 8
