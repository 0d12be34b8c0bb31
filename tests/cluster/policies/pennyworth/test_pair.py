"""Pennyworth's planners as an explicit placer + scaler pair (issue 27, "One house")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import PolicyRef
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import Placer, Release, Rent, Scaler, ScaleView
from clusteremu.cluster.policies.pennyworth.placers import (
    FixedPoolPlacer,
    PennyworthPlacer,
    PennyworthRulesPlacer,
    PlanPlacer,
)
from clusteremu.cluster.policies.points import PairError, scheduler_points
from clusteremu.cluster.runner import with_policies
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario, read_yaml, spec_from_dict

SHIPPED = Path(__file__).resolve().parents[4] / "scenarios"

#: Per-job results of replication 0 of shipped scenarios, recorded before the pair was made
#: explicit (the engine then made a placer that is a `Scaler` the scaler): the node of each
#: job, its end time (s, to 1 ms) and the run's total_usd, in job order.
BEFORE = {
    ("pennyworth-max", None): (
        0.05190083627721426,
        "t2.small-2 t2.small-3 t2.small-4 t2.small-2 t2.small-2 t2.small-2 t2.large-0 "
        "t2.large-0 t2.large-0 t2.small-5 t2.small-5 t2.small-5 t2.large-0 t2.large-0 "
        "t2.large-0 t2.small-3 t2.small-3 t2.small-5 t2.large-0 t2.large-0 t2.large-0 "
        "t2.small-4 t2.small-6 t2.small-6 t2.medium-1 t2.medium-1 t2.medium-1 t2.small-8 "
        "t2.small-6 t2.small-7 t2.small-7 t2.small-7",
        [448.185, 366.922, 441.664, 544.422, 637.507, 723.386, 173.06, 229.837, 278.327,
         334.348, 476.664, 660.776, 341.176, 406.093, 466.547, 472.555, 576.9, 202.819,
         534.03, 593.421, 654.216, 619.478, 326.059, 546.968, 270.799, 402.229, 541.987,
         437.945, 721.358, 286.342, 485.594, 664.312],
    ),
    ("pennyworth-avg", "pennyworth-rules"): (
        0.04920645180655622,
        "t2.small-4 t2.small-4 t2.small-4 t2.small-0 t2.small-0 t2.small-0 t2.small-2 "
        "t2.small-2 t2.small-2 t2.small-0 t2.small-0 t2.small-0 t2.large-5 t2.large-5 "
        "t2.large-5 t2.small-0 t2.small-0 t2.small-0 t2.small-3 t2.small-3 t2.small-3 "
        "t2.small-1 t2.small-2 t2.small-2 t2.large-5 t2.large-5 t2.large-5 t2.large-5 "
        "t2.small-1 t2.small-1 t2.small-1 t2.small-1",
        [448.185, 695.107, 1016.771, 216.237, 309.322, 395.201, 788.15, 1046.225, 1266.637,
         819.528, 961.843, 1145.956, 182.849, 247.766, 308.22, 500.835, 605.179, 687.998,
         401.18, 648.642, 901.955, 1016.515, 326.059, 546.968, 381.944, 446.199, 514.525,
         584.473, 294.39, 460.732, 659.984, 838.701],
    ),
}  # fmt: skip


@pytest.mark.parametrize(("scenario", "placer"), list(BEFORE))
def test_per_job_results_are_those_recorded_before_the_pair(
    scenario: str, placer: str | None
) -> None:
    spec = load_scenario(scenario)
    if placer is not None:
        spec = with_policies(spec, placer=placer)
    run = Engine(spec).run()
    total, nodes, ends = BEFORE[(scenario, placer)]
    table = run.jobs.to_pandas()
    assert [str(n) for n in table["node"]] == nodes.split()
    assert table["end_s"].to_numpy() == pytest.approx(ends, abs=1e-3)
    assert run.summary["total_usd"] == pytest.approx(total, rel=1e-12)


# -- the pair from a scenario -------------------------------------------------------------


def _data(scheduler: dict[str, Any]) -> dict[str, Any]:
    """The shipped pennyworth-max scenario with another scheduler block."""
    data = read_yaml(SHIPPED / "pennyworth-max.yaml")
    data["scheduler"] = scheduler
    return data


@pytest.fixture
def renter(monkeypatch: pytest.MonkeyPatch) -> str:
    """A registered scaler that rents (a Python scaler), for this test only."""

    class Renter(Scaler):
        def scale(self, view: ScaleView) -> list[Rent | Release]:
            return []

    registry.names("scaler")  # the built-in policies first
    monkeypatch.setitem(registry._REGISTRY["scaler"], "test-renter", Renter)
    monkeypatch.setattr(Renter, "name", "test-renter")
    return "test-renter"


def test_a_scenario_naming_a_planner_as_placer_gets_it_as_scaler_too() -> None:
    """The loader fills the scaler with the planner (name and params): the spec names the
    pair at both points, the points list says so, and the engine has one object at both."""
    spec = load_scenario("pennyworth-max")
    placer, scaler = spec.scheduler.placer, spec.scheduler.scaler
    assert placer.name == "pennyworth" and "tree" in placer.params
    assert scaler == placer
    points = {p.kind: p for p in scheduler_points(spec.scheduler)}
    assert points["placer"].primary and not points["scaler"].primary
    assert points["placer"].points == points["scaler"].points == ("placer", "scaler")
    assert points["placer"].rents and points["scaler"].rents
    assert not points["allocator"].rents and not points["provisioner"].rents
    engine = Engine(spec)
    assert isinstance(engine.placer, PennyworthPlacer) and engine.scaler is engine.placer
    assert engine.policies["scaler"] is engine.policies["placer"]


@pytest.mark.parametrize(
    "scaler",
    [
        None,
        {"name": "static"},
        {"name": "pennyworth-rules"},
        {"name": "pennyworth-rules", "slack": 0.1},
    ],
)
def test_the_scaler_left_out_static_or_the_planner_itself_is_the_pair(
    scaler: dict[str, Any] | None,
) -> None:
    block: dict[str, Any] = {"placer": {"name": "pennyworth-rules", "slack": 0.1}}
    if scaler is not None:
        block["scaler"] = scaler
    spec = spec_from_dict(_data(block), "test")
    want = PolicyRef("pennyworth-rules", {"slack": 0.1})
    assert spec.scheduler.placer == spec.scheduler.scaler == want


@pytest.mark.parametrize(
    ("scaler", "got"),
    [
        ({"name": "test-renter"}, "got 'test-renter'"),
        ({"name": "pennyworth"}, "got 'pennyworth'"),
        ({"name": "pennyworth-rules", "slack": 0.2}, "got 'pennyworth-rules' with other params"),
    ],
)
def test_another_scaler_beside_a_planner_is_refused_naming_the_field(
    renter: str, scaler: dict[str, Any], got: str
) -> None:
    data = _data({"placer": {"name": "pennyworth-rules", "slack": 0.1}, "scaler": scaler})
    with pytest.raises(ScenarioError) as info:
        spec_from_dict(data, "test")
    (field, problem), *_ = info.value.problems
    assert field == "scheduler.scaler"
    assert "placer 'pennyworth-rules' is the run's scaler too" in problem
    assert got in problem, problem


def test_a_planner_named_as_the_scaler_alone_is_refused_naming_the_field() -> None:
    data = _data({"placer": {"name": "first-fit"}, "scaler": {"name": "pennyworth-rules"}})
    with pytest.raises(ScenarioError) as info:
        spec_from_dict(data, "test")
    (field, problem), *_ = info.value.problems
    assert field == "scheduler.scaler"
    assert "name it as scheduler.placer" in problem, problem


def test_with_policies_replaces_the_pair_at_both_points(renter: str) -> None:
    spec = load_scenario("pennyworth-max")
    rules = with_policies(spec, placer="pennyworth-rules:slack=0.1")
    assert rules.scheduler.placer == rules.scheduler.scaler
    assert rules.scheduler.scaler == PolicyRef("pennyworth-rules", {"slack": 0.1})
    first = with_policies(spec, placer="first-fit")
    assert first.scheduler.scaler == PolicyRef("static")
    again = with_policies(spec, placer="pennyworth:slack=0.1")
    assert again.scheduler.scaler == again.scheduler.placer
    assert again.scheduler.scaler.params["slack"] == 0.1 and "tree" in again.scheduler.scaler.params
    with pytest.raises(PairError, match=r"scheduler\.scaler: placer 'pennyworth' is the run"):
        with_policies(spec, scaler=renter)


def test_the_cli_refuses_a_scaler_that_is_not_the_planners(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusteremu.cli import main

    assert main(["run", "pennyworth-max", "--policy", "scaler=pennyworth-rules"]) == 2
    err = capsys.readouterr().err
    assert "scheduler.scaler: placer 'pennyworth' is the run's scaler too" in err, err


# -- windowed mode ------------------------------------------------------------------------


def test_windowed_mode_refuses_the_pair_at_either_point(renter: str) -> None:
    """Every point is checked alike: a planner is refused as the placer (the point it is
    named at), also in a spec built without the loader (the same pairing), and a renting
    scaler as the scaler."""
    from clusteremu.actors.coordinator import check_windowed

    spec = load_scenario("pennyworth-avg")
    message = r"placer 'pennyworth' rents and releases nodes \(it is the run's scaler too\)"
    with pytest.raises(ValueError, match=message):
        check_windowed(spec)
    unpaired = replace(spec, scheduler=replace(spec.scheduler, scaler=PolicyRef("static")))
    with pytest.raises(ValueError, match=message):
        check_windowed(unpaired)
    renting = replace(
        load_scenario("mm-c"),
        scheduler=replace(load_scenario("mm-c").scheduler, scaler=PolicyRef(renter)),
    )
    with pytest.raises(ValueError, match=r"^scaler 'test-renter' rents and releases nodes,"):
        check_windowed(renting)
    check_windowed(load_scenario("mm-c"))  # first-fit and static: windowed is fine


def test_a_windowed_ray_run_of_a_planner_is_refused_before_ray_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusteremu.actors.coordinator import Coordinator
    from clusteremu.actors.options import RayRunOptions
    from clusteremu.cli import main

    spec = load_scenario("pennyworth-max")
    with pytest.raises(ValueError, match="placer 'pennyworth' rents and releases nodes"):
        Coordinator(spec, 0, RayRunOptions(window_s=10.0), "test")
    assert main(["run", "pennyworth-max", "--ray", "--window", "10"]) == 2
    err = capsys.readouterr().err
    assert "--window: placer 'pennyworth' rents and releases nodes" in err, err


# -- the engine's Python API --------------------------------------------------------------


def test_an_engine_takes_a_planner_object_at_both_points() -> None:
    """`Engine(spec, placer=p, scaler=p)` runs the planner object (the scenario's own pair
    replaced at both points): per-job results as the scenario naming it."""
    spec = load_scenario("pennyworth-avg")
    planner = PennyworthRulesPlacer()
    engine = Engine(spec, placer=planner, scaler=planner)
    assert engine.placer is planner and engine.scaler is planner
    given = engine.run().jobs
    named = Engine(with_policies(spec, placer="pennyworth-rules")).run().jobs
    assert given.equals(named)
    total, nodes, _ = BEFORE[("pennyworth-avg", "pennyworth-rules")]
    assert [str(n) for n in given.column("node").to_pylist()] == nodes.split()


def test_an_engine_given_half_a_pair_says_to_pass_the_other_half() -> None:
    spec = load_scenario("mm-c")
    planner = FixedPoolPlacer()
    with pytest.raises(PairError, match=r"^scaler=: placer 'fixed-pool' \(FixedPoolPlacer\)"):
        Engine(spec, placer=planner)
    with pytest.raises(PairError, match=r"pass it as each \(Engine\(spec, placer=policy, sc"):
        Engine(spec, scaler=planner)
    with pytest.raises(PairError, match=r"^scaler=: "):
        Engine(spec, placer=planner, scaler=FixedPoolPlacer())
    pw = load_scenario("pennyworth-max")
    with pytest.raises(PairError, match=r"scenario's placer 'pennyworth' is the scaler too"):
        Engine(pw, scaler=registry.create("scaler", "static"))  # type: ignore[arg-type]
    # Another placer object replaces the scenario's pair at both points: static scaler.
    engine = Engine(pw, placer=registry.create("placer", "first-fit"))  # type: ignore[arg-type]
    assert engine.scaler.name == "static"


def test_a_pair_registers_through_its_first_point_and_each_protocol() -> None:
    class Backwards(PlanPlacer):
        provides = ("scaler", "placer")

    with pytest.raises(ValueError, match="register it as a scaler"):
        registry.register("placer", "test-backwards")(Backwards)

    class NoScaler(Placer):
        provides = ("placer", "scaler")

    with pytest.raises(TypeError, match="provides scaler but is not a scaler class"):
        registry.register("placer", "test-no-scaler")(NoScaler)
    assert "test-no-scaler" not in registry.names("placer")
    assert "pennyworth" in registry.names("scaler")


def test_a_sweep_refuses_a_scaler_that_is_not_the_planners() -> None:
    """Sweeps check a `--policy` variant's points as the loader does, before Ray starts."""
    from clusteremu.tuners.sweep import SweepError, plan_sweep

    with pytest.raises(SweepError, match=r"scheduler\.scaler: placer 'pennyworth' is the run"):
        plan_sweep("pennyworth-max", [], policies=["scaler=pennyworth-rules"])
    plan = plan_sweep("pennyworth-max", [], policies=["placer=vm-per-job"])
    spec = plan.spec(plan.cells[0])
    assert spec.scheduler.placer == spec.scheduler.scaler == PolicyRef("vm-per-job")


@pytest.mark.parametrize("slo", ["max", "rtpt", "avg", "percentile"])
def test_policy_placer_replaces_the_shipped_planners_params(
    slo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--policy placer=X` with X not the scenario's planner starts from X's own defaults
    (the shipped scenarios' `tree:` is not X's parameter); the scenario's own planner keeps
    its tree and takes the given keys."""
    from clusteremu.cli import main

    spec = load_scenario(f"pennyworth-{slo}")
    for other in ("pennyworth-rules", "ffd-cheapest", "vm-per-job", "fixed-pool"):
        varied = with_policies(spec, placer=other)
        assert varied.scheduler.placer == varied.scheduler.scaler == PolicyRef(other, {})
    same = with_policies(spec, placer="pennyworth:slack=0.1").scheduler.placer
    assert same.params == {**spec.scheduler.placer.params, "slack": 0.1}
    assert main(["run", f"pennyworth-{slo}", "--policy", "placer=pennyworth-rules"]) == 0
    assert "pennyworth-rules" in capsys.readouterr().out


def test_a_policy_parameter_true_or_false_is_a_bool() -> None:
    """`--policy placer=pennyworth:guard=false` turns the tail guard off, as `guard: false`
    in a scenario would; the shipped tree's placer guards by default."""
    spec = load_scenario("pennyworth-max")
    assert spec.scheduler.placer.params.get("guard") is None
    off = with_policies(spec, placer="pennyworth:guard=false")
    on = with_policies(spec, placer="pennyworth:guard=TRUE")
    assert off.scheduler.placer.params["guard"] is False
    assert on.scheduler.placer.params["guard"] is True
    assert off.scheduler.placer.params["tree"] == spec.scheduler.placer.params["tree"]
