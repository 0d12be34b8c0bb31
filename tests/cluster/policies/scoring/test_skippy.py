"""The scoring framework against the real Skippy scheduler (``edgerun-skippy-core`` 0.1.1,
dev extra) on 1,000 random cluster states and pods per configuration
(`skippy_agreement.py`; ``python -m tests.cluster.policies.scoring.skippy_agreement`` prints
the table): in compatibility mode every per-node score and every choice is Skippy's; in the
default mode only the documented differences remain."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.policies.scoring import scorers as S
from clusteremu.cluster.policies.scoring.framework import Cycle, Framework, PodSpec, compile_pod
from tests.cluster.policies.scoring import skippy_agreement as A
from tests.cluster.policies.scoring.helpers import cluster, cycle, node

DECISIONS = 1000


@pytest.fixture(scope="module")
def tallies() -> dict[str, dict[str, A.Tally]]:
    return A.run(DECISIONS, seed=0)


def test_every_configuration_is_covered(tallies: dict[str, dict[str, A.Tally]]) -> None:
    assert set(tallies) == set(A.ALL) | {"Fixed weights", "random weights"}
    for modes in tallies.values():
        for t in modes.values():
            assert t.decisions == DECISIONS
            assert t.node_scores > 5 * DECISIONS


@pytest.mark.parametrize("name", [*A.ALL, "Fixed weights", "random weights"])
def test_compat_mode_is_skippy_exactly(name: str, tallies: dict[str, dict[str, A.Tally]]) -> None:
    t = tallies[name]["compat"]
    assert t.same_choice == t.decisions
    assert t.same_node_scores == t.node_scores


@pytest.mark.parametrize("name", [*A.ALL, "Fixed weights", "random weights"])
def test_default_mode_differs_only_as_documented(
    name: str, tallies: dict[str, dict[str, A.Tally]]
) -> None:
    t = tallies[name]["default"]
    assert t.violations == []


def test_default_balanced_resource_agrees_everywhere(
    tallies: dict[str, dict[str, A.Tally]],
) -> None:
    # The integer fix: with fractions of integer millicores and bytes, BalancedResource is
    # Skippy's on every node (30% of the nodes are drawn with free resources in exact
    # proportion to the request, the case float cores got wrong).
    t = tallies["BalancedResource"]["default"]
    assert t.same_node_scores == t.node_scores
    assert t.among_best == t.decisions


def test_balanced_resource_equal_fractions_score_100() -> None:
    # 100m / 512 MiB on 150m / 768 MiB free: 100/150 and 2^29 / (3 * 2^28) are both 2/3 as
    # integers; float cores give 0.1 / 0.15 = 0.6666666666666667 and would score 90.
    table, state, _ = cluster([node("a", 1, 1), node("b", 1, 1)])
    state.free[:, 0] = [0.15, 0.75, 0.0]
    state.free[:, 1] = [0.30, 1.0, 0.0]  # 1/3 vs 1/2: (1 - 1/6) * 10 = 8.33 -> 80
    pod = PodSpec("p", (0.1, 0.5, 0.0))
    for compat in (None, "skippy"):
        plugin = S.BalancedResource(compat=compat)
        assert plugin.score(cycle(table, state, pod)).tolist() == [100.0, 80.0]
        fw = Framework([], [plugin], [1.0], compat=compat)
        c = Cycle(table, state, compile_pod(pod, table, {}))
        fw.feasible(c)
        assert fw.total(c).tolist() == fw.total_numpy(c).tolist()  # compiled kernel too
    assert 0.1 / 0.15 != 512 / 768  # the float trap the integer units avoid


def test_compat_totals_are_skippys_sum_and_fused_equals_numpy() -> None:
    # Compat totals: sum of weight x score / 10 (Skippy's 0..10 scale), bit-identical between
    # the fused kernel and the numpy plugins on random worlds.
    rng = np.random.default_rng(7)
    weights = {n: float(rng.uniform(0, 1)) for n in A.ALL}
    fused = A.Config("w", weights).frameworks["compat"]
    for _ in range(50):
        world = A.random_world(rng)
        c = Cycle(world.table, world.state, world.pod)
        fused.feasible(c)
        assert fused.fused
        assert fused.total(c).tolist() == fused.total_numpy(c).tolist()
        scores = fused.scores(c)
        expect = np.zeros(c.nodes.size)
        for name, w in weights.items():
            assert np.all(scores[name] % 10 == 0)
            expect += w * (scores[name] / 10)
        assert fused.total(c).tolist() == expect.tolist()


def test_compat_ties_go_to_the_first_node_of_the_round_robin_search() -> None:
    table, state, _ = cluster([node(f"n{i}", 4, 8) for i in range(6)])
    pod = compile_pod(PodSpec("p"), table, {})
    fw = Framework([], [S.LeastAllocated(compat="skippy")], [1.0], compat="skippy")
    picks = [fw.select(Cycle(table, state, pod), np.random.default_rng(s)) for s in range(4)]
    # All tie; the search starts at 0 and, every node being feasible, ends at the last one, so
    # it starts at 0 again: Skippy keeps choosing node 0.
    assert picks == [0, 0, 0, 0]
    fw.next_start = 4
    assert fw.select(Cycle(table, state, pod), np.random.default_rng(0)) == 4
    state.free[0, 5] = 0.0  # node 5 infeasible: the search from 4 ends at 3, next starts at 4
    assert fw.select(Cycle(table, state, pod), np.random.default_rng(0)) == 4


def test_compat_switch_is_validated() -> None:
    with pytest.raises(ValueError, match="compat: expected 'skippy'"):
        S.LocalityType(compat="kubernetes")
    with pytest.raises(ValueError, match="compat: scorer 'LocalityType'"):
        Framework([], [S.LocalityType()], [1.0], compat="skippy")
    with pytest.raises(ValueError, match="cpu and memory only"):
        S.LeastAllocated({"cpu": 1, "gpu": 1}, compat="skippy")
    with pytest.raises(ValueError, match="cpu and memory only"):
        S.BalancedAllocation({"cpu": 1}, compat="skippy")
