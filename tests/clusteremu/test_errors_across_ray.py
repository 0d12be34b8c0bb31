"""Policy and scenario errors keep their exit codes across Ray: a bad policy inside a sweep
worker exits 3 naming the policy (not `UnserializableException`), bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusteremu.cli import EXIT_BAD_INPUT, EXIT_POLICY_ERROR, main
from tests.actors.conftest import ray_local  # noqa: F401
from tests.clusteremu.test_plugins import one_class_mdp_scenario


@pytest.mark.ray
@pytest.mark.usefixtures("ray_local")
class TestErrorsAcrossRay:
    def test_errors_raised_in_a_ray_task_arrive_as_themselves(self) -> None:
        import ray

        from clusteremu.cluster.policies.base import PolicyError
        from clusteremu.cluster.policies.registry import UnknownPolicyError
        from clusteremu.scenarios.errors import ScenarioError

        @ray.remote
        def fail(kind: str) -> None:
            if kind == "policy":
                raise PolicyError("p", 2.5, "bad decision", {"job": 1})
            if kind == "unknown":
                raise UnknownPolicyError("placer", "nope", ["first-fit"])
            raise ScenarioError("s.yaml", [("stop.jobs", "expected an integer")])

        for kind, cls in (
            ("policy", PolicyError),
            ("unknown", UnknownPolicyError),
            ("scenario", ScenarioError),
        ):
            with pytest.raises(cls) as info:
                ray.get(fail.remote(kind))
            assert "UnserializableException" not in type(info.value).__name__
        with pytest.raises(PolicyError) as policy:
            ray.get(fail.remote("policy"))
        assert (policy.value.policy, policy.value.time_s) == ("p", 2.5)

    def test_a_sweep_with_a_bad_policy_exits_3_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        scenario = one_class_mdp_scenario(tmp_path)
        argv = ["sweep", str(scenario), "--seeds", "1-2", "--workers", "1"]
        argv += ["--out", str(tmp_path / "sweep"), "--json"]
        assert main(argv) == EXIT_POLICY_ERROR
        err = capsys.readouterr().err
        assert err.startswith("error: policy 'mdp' at t=0 s: cannot build the policy table")
        assert "ray::" not in err  # the policy's own message, not Ray's traceback

    def test_a_sweep_with_a_bad_scenario_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["sweep", "mm-c", "--set", "stop.jobs=-1", "--out", str(tmp_path / "s")]
        assert main(argv) == EXIT_BAD_INPUT
        assert "stop.jobs" in capsys.readouterr().err

    def test_run_on_ray_with_a_bad_policy_exits_3_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        scenario = one_class_mdp_scenario(tmp_path)
        assert main(["run", str(scenario), "--ray", "--json"]) == EXIT_POLICY_ERROR
        err = capsys.readouterr().err
        assert "policy 'mdp'" in err and "UnserializableException" not in err
