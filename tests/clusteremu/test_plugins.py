"""`--plugin MODULE`: a policy module from outside the checkout, as in
docs/adding_a_policy.md; and policy errors keep their exit codes across Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clusteremu.cli import EXIT_BAD_INPUT, EXIT_POLICY_ERROR, main

#: A placer that takes the *last* node that fits (so the test can see it was used).
PLUGIN = '''
import numpy as np

from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.registry import register


@register("placer", "{name}")
class LastFit(Placer):
    """FCFS; each job goes to the last node with a free core."""

    def place(self, view: PlacementView) -> list[Placement]:
        free = np.array(view.free_cpu, dtype=float)
        slots = np.array(view.free_slots, dtype=float)
        out = []
        for i, job in enumerate(view.queue.tolist()):
            fits = np.flatnonzero(
                view.active & (free >= view.request_cpu[i]) & (slots >= 1)
            )
            if fits.size == 0:
                break
            k = int(fits[-1])
            free[k] -= view.request_cpu[i]
            slots[k] -= 1
            out.append(Placement(job, k))
        return out
'''

SHORT = ["--set", "stop.jobs=400", "--set", "stop.warmup_jobs=0"]


def write_plugin(folder: Path, module: str, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(PLUGIN.format(name=name), encoding="utf-8")
    return folder


def test_run_with_a_plugin_from_outside_the_checkout(tmp_path: Path) -> None:
    """A fresh process, in a folder outside the repository, with only the plug-in's folder
    on PYTHONPATH: `clusteremu run mm-c --plugin ...` uses the plug-in's placer."""
    folder = write_plugin(tmp_path / "elsewhere", "my_policies", "last-fit")
    env = dict(os.environ, PYTHONPATH=str(folder))
    cmd = [sys.executable, "-m", "clusteremu", "run", "mm-c", "--json", *SHORT]
    cmd += ["--set", "scheduler.placer.name=last-fit", "--plugin", "my_policies"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["jobs_completed"] == 400
    # Without the option the scenario names an unknown placer: bad input.
    cmd.remove("--plugin")
    cmd.remove("my_policies")
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == EXIT_BAD_INPUT
    assert "last-fit" in done.stderr


def test_compare_and_validate_take_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path / "p", "compare_plugin", "last-2")))
    out = tmp_path / "cmp"
    argv = ["compare", "mm-c", *SHORT, "--policy", "placer=first-fit", "--policy"]
    argv += ["placer=last-2", "--plugin", "compare_plugin", "--json", "--out", str(out)]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in rows] == ["placer=first-fit", "placer=last-2"]
    assert rows[0]["summary"]["jobs_completed"] == rows[1]["summary"]["jobs_completed"] == 400
    set_placer = ["--set", "scheduler.placer.name=last-2"]
    assert main(["validate", "mm-c", *set_placer, "--plugin", "compare_plugin"]) == 0
    assert "placer last-2" in capsys.readouterr().out


def test_plugins_that_cannot_be_imported_are_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "mm-c", "--plugin", "no_such_plugin_module"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--plugin no_such_plugin_module: no module named" in err and "PYTHONPATH" in err
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('half-written')\n")
    (tmp_path / "needs_dep.py").write_text("import not_installed_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["validate", "mm-c", "--plugin", "broken_plugin"]) == EXIT_BAD_INPUT
    assert "RuntimeError: half-written" in capsys.readouterr().err
    assert main(["validate", "mm-c", "--plugin", "needs_dep"]) == EXIT_BAD_INPUT
    assert "needs 'not_installed_dependency_xyz'" in capsys.readouterr().err


def test_plugins_are_imported_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "first_plugin.py").write_text("import sys\nsys.loaded_order = ['first']\n")
    (tmp_path / "second_plugin.py").write_text("import sys\nsys.loaded_order.append('second')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["validate", "mm-c", "--plugin", "first_plugin", "--plugin", "second_plugin"]
    assert main(argv) == 0
    assert sys.loaded_order == ["first", "second"]  # type: ignore[attr-defined]


# --- exit codes across Ray ---------------------------------------------------------------


def one_class_mdp_scenario(folder: Path) -> Path:  # also used by test_errors_across_ray
    """A valid scenario whose `mdp` allocator fails at set-up (it needs two classes): a
    PolicyError raised where the engine is built, inside a Ray worker for a sweep."""
    path = folder / "one-class-mdp.yaml"
    path.write_text(
        textwrap.dedent(
            """
            name: one-class-mdp
            seed: 1
            stop: {jobs: 200}
            cluster:
              pools: [{name: cores, cores: 4}]
            workload:
              classes:
                - name: a
                  arrival: {kind: poisson, rate_per_s: 1.0}
                  size: {kind: exponential, mean_s: 1.0}
                  pool: cores
            scheduler:
              allocator: {name: mdp, params: {policy: equi, truncation: 5}}
            """
        ),
        encoding="utf-8",
    )
    return path


def test_a_policy_error_at_set_up_exits_3_locally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(one_class_mdp_scenario(tmp_path))]) == EXIT_POLICY_ERROR
    assert "policy 'mdp'" in capsys.readouterr().err


def test_an_unknown_policy_error_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where it can still arise after the loader's check (a Ray worker without the plug-in),
    `UnknownPolicyError` exits 2 with its message, not a traceback."""
    from clusteremu import cli
    from clusteremu.cluster.policies.registry import UnknownPolicyError

    def fail(args: object) -> int:
        raise UnknownPolicyError("placer", "last-fit", ["first-fit", "random-fit"])

    monkeypatch.setattr(cli, "cmd_validate", fail)
    assert main(["validate", "mm-c"]) == EXIT_BAD_INPUT
    assert "unknown placer 'last-fit'; registered placers: first-fit" in capsys.readouterr().err


def test_errors_from_ray_tasks_are_reported_by_their_cause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Ray task error (it carries `cause`) is reported by what the task raised."""
    from clusteremu import cli
    from clusteremu.cluster.policies.base import PolicyError

    class TaskError(PolicyError):
        def __init__(self, cause: BaseException) -> None:
            self.cause = cause
            Exception.__init__(self, "ray::Worker.run() traceback ...\n" + str(cause))

    cli._say(TaskError(PolicyError("p", 1.0, "bad")))
    assert capsys.readouterr().err == "error: policy 'p' at t=1 s: bad.\n"


def test_plugins_reach_worker_processes_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--plugin` names its modules in CLUSTEREMU_PLUGINS; a process started from the
    command (as local Ray workers are) finds the plug-in's policies with no option."""
    from clusteremu.plugins import load_plugins

    folder = write_plugin(tmp_path / "elsewhere", "worker_policies", "worker-last-fit")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.delenv("CLUSTEREMU_PLUGINS", raising=False)
    load_plugins(["worker_policies"])
    assert os.environ["CLUSTEREMU_PLUGINS"] == "worker_policies"
    probe = (
        "from clusteremu.cluster.policies import registry; "
        "print(registry.create('placer', 'worker-last-fit').name)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "worker-last-fit"
