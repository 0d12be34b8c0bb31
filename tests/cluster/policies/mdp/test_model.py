"""MdpModel validation and the Amdahl speed-up (the MDP paper, section 2)."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.policies.mdp.model import MdpModel, MdpModelError, amdahl, departure_rate


def test_amdahl_is_linear_below_one_core_and_amdahl_above() -> None:
    x = np.array([0.0, 0.5, 1.0, 2.0, 10.0])
    s = amdahl(x, 0.8)
    np.testing.assert_allclose(s[:3], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(s[3:], [1 / (0.2 + 0.4), 1 / (0.2 + 0.08)], rtol=1e-15)
    np.testing.assert_allclose(amdahl(x, 1.0), x)  # theta = 1: linear


def test_departure_rate_eq_3_1() -> None:
    # 3 jobs on 1.5 cores: 0.5 core each, no speed-up -> mu * K
    assert departure_rate(3, 1.5, 0.7, 2.0) == pytest.approx(3.0)
    # 2 jobs on 8 cores: 4 each -> mu * 2 * s(4)
    assert departure_rate(2, 8.0, 0.5, 1.5) == pytest.approx(1.5 * 2 / (0.5 + 0.125))
    assert departure_rate(0, 8.0, 0.5, 1.5) == 0.0


@pytest.mark.parametrize("theta", [(0.0, 0.5), (1.2, 0.5), (0.5, -0.1), (0.5, float("nan"))])
def test_theta_outside_0_1_is_rejected(theta: tuple[float, float]) -> None:
    with pytest.raises(MdpModelError, match=r"theta\[\d\].*\(0, 1\]"):
        MdpModel.two_class(10, 2.0, 0.5, 1.0, theta)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.2, 1.5])
def test_p_outside_0_1_is_rejected(p: float) -> None:
    with pytest.raises(MdpModelError, match=r"^p: expected a probability p in \(0, 1\)"):
        MdpModel.two_class(10, 2.0, p, 1.0, (0.5, 0.5))


def test_unstable_load_is_rejected_whatever_the_truncation() -> None:
    with pytest.raises(MdpModelError, match="unstable load .* = 1.2 >= 1.*truncation B = 5"):
        MdpModel.two_class(10, 12.0, 0.5, 1.0, (0.5, 0.5), truncation=5)


def test_truncation_must_be_a_positive_integer() -> None:
    with pytest.raises(MdpModelError, match="truncation"):
        MdpModel.two_class(10, 2.0, 0.5, 1.0, (0.5, 0.5), truncation=0)
