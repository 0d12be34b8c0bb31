"""Hostile plug-ins (issue 41, "hostile input to the newer features"): a compiled function
with a wrong signature, one numba cannot type or that writes to its read-only view, an
undecorated one, a module that raises on import or in a constructor, a name already taken,
an unimportable `CLUSTEREMU_PLUGINS` entry. Each is refused before any work with exit
status 2 and one `error:` line naming the plug-in; `validate` refuses what `run` would crash
on. `--plugin` also takes a file's path.

The plug-ins are written to a temporary folder; the registry and the compiled table are
put back as they were after each test, so the broken policies never reach other tests.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusteremu.cli import main
from clusteremu.cluster.policies import compiled_table, registry
from tests.clusteremu.badinput import refused

SHORT = ["--set", "stop.jobs=200", "--set", "stop.warmup_jobs=0"]

HEADER = """
from clusteremu.cluster.policies.compiled_table import compiled_placer, fits
from clusteremu.cluster.policies.fifo import FcfsPlacer
from clusteremu.cluster.policies.registry import register
"""


def placer_class(name: str, function: str) -> str:
    return f"""

@register("placer", "{name}")
class Plugged(FcfsPlacer):
    compiled = {function}

    def choose(self, fits, count, free_cpu):
        return int(fits.nonzero()[0][0])
"""


WRONG_SIGNATURE = (
    HEADER
    + """
@compiled_placer
def place_two(job, view):
    return -1
"""
    + placer_class("h41-wrong-signature", "place_two")
)
WRITES_VIEW = (
    HEADER
    + """
@compiled_placer
def place_writes(job, now_s, view):
    view.free_cpu[0] = 1.0
    return -1
"""
    + placer_class("h41-writes-view", "place_writes")
)
UNTYPABLE = (
    HEADER
    + """
@compiled_placer
def place_untypable(job, now_s, view):
    return view.no_such_field[0]
"""
    + placer_class("h41-untypable", "place_untypable")
)
UNDECORATED = (
    HEADER
    + """
def place_plain(job, now_s, view):
    return -1
"""
    + placer_class("h41-undecorated", "place_plain")
)
GOOD = (
    HEADER
    + """
@compiled_placer
def place_last(job, now_s, view):
    for k in range(view.free_cpu.shape[0] - 1, -1, -1):
        if fits(view, job, k):
            return k
    return -1
"""
    + placer_class("h41-last-fit", "place_last")
)
CONSTRUCTOR_RAISES = (
    HEADER
    + """
@register("placer", "h41-constructor")
class Raises(FcfsPlacer):
    def __init__(self):
        raise RuntimeError("boom in the constructor")
"""
)
TAKES_A_BUILT_IN_NAME = (
    HEADER
    + """
@register("placer", "first-fit")
class Impostor(FcfsPlacer):
    pass
"""
)
RAISES_ON_IMPORT = "raise ValueError('half-written plug-in')\n"


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Put the registry, the compiled table and the imported modules back afterwards."""
    registry.load()
    tables = {kind: dict(table) for kind, table in registry._REGISTRY.items()}
    compiled = {kind: list(fns) for kind, fns in compiled_table.TABLE.items()}
    modules = set(sys.modules)
    monkeypatch.delenv(registry.PLUGINS_ENV, raising=False)
    yield
    for kind, table in tables.items():
        registry._REGISTRY[kind].clear()
        registry._REGISTRY[kind].update(table)
    for kind, fns in compiled.items():
        compiled_table.TABLE[kind][:] = fns
    for name in set(sys.modules) - modules:
        if name.startswith("h41_"):
            del sys.modules[name]


def plugin(folder: Path, module: str, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write plug-in `module` into `folder` and put the folder on sys.path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return path


def test_a_wrong_signature_is_refused_by_validate_run_compare_and_run_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin(tmp_path, "h41_wrong_sig", WRONG_SIGNATURE, monkeypatch)
    import clusteremu.actors.launch

    def no_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr(clusteremu.actors.launch, "run_on_ray", no_ray)
    name = ["--set", "scheduler.placer.name=h41-wrong-signature", "--plugin", "h41_wrong_sig"]
    expect = "--plugin h41_wrong_sig: placer 'h41-wrong-signature': place_two does not compile"
    for argv in (
        ["validate", "mm-c", *name],
        ["run", "mm-c", *SHORT, *name],
        ["run", "mm-c", *SHORT, "--ray", *name],
        ["compare", "mm-c", *SHORT, "--policy", "placer=h41-wrong-signature", *name[2:]],
    ):
        line = refused(argv, "plugins", "wrong signature", expect)
        assert "Signature mismatch: 3 argument types given" in line


@pytest.mark.parametrize(
    ("text", "policy", "expect"),
    [
        (WRITES_VIEW, "h41-writes-view", "Cannot modify readonly array"),
        (UNTYPABLE, "h41-untypable", "no_such_field"),
    ],
)
def test_a_function_numba_cannot_compile_is_refused_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, policy: str, expect: str
) -> None:
    module = "h41_" + policy.split("-", 1)[1].replace("-", "_")
    plugin(tmp_path, module, text, monkeypatch)
    argv = ["validate", "mm-c", "--set", f"scheduler.placer.name={policy}", "--plugin", module]
    line = refused(argv, "plugins", "numba typing", f"--plugin {module}: placer '{policy}'")
    assert expect in line
    assert f"{module}.py, line " in line  # where in the plug-in
    assert "During: Pass" not in line and "nopython" not in line  # not numba's dump


def test_an_undecorated_function_is_bad_input_not_an_illegal_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin(tmp_path, "h41_undecorated", UNDECORATED, monkeypatch)
    name = ["--set", "scheduler.placer.name=h41-undecorated", "--plugin", "h41_undecorated"]
    for command in ("validate", "run"):
        line = refused([command, "mm-c", *SHORT, *name], "plugins", "undecorated")
        assert "place_plain is not a registered compiled placer" in line
        assert "@compiled_placer" in line


def test_modules_that_raise_on_import_or_in_a_constructor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin(tmp_path, "h41_import_raises", RAISES_ON_IMPORT, monkeypatch)
    plugin(tmp_path, "h41_constructor", CONSTRUCTOR_RAISES, monkeypatch)
    refused(
        ["run", "mm-c", "--plugin", "h41_import_raises"],
        "plugins",
        "raises on import",
        "--plugin h41_import_raises: the module failed to import: ValueError: half-written",
    )
    monkeypatch.setenv(registry.PLUGINS_ENV, "h41_import_raises")
    refused(
        ["validate", "mm-c"],
        "plugins",
        "raises on import (environment)",
        "CLUSTEREMU_PLUGINS entry 'h41_import_raises': the module failed to import",
    )
    monkeypatch.delenv(registry.PLUGINS_ENV)
    name = ["--set", "scheduler.placer.name=h41-constructor", "--plugin", "h41_constructor"]
    for command in ("validate", "run"):
        line = refused([command, "mm-c", *SHORT, *name], "plugins", "constructor raises")
        assert "placer 'h41-constructor'" in line
        assert "RuntimeError: boom in the constructor" in line


def test_a_name_already_taken_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin(tmp_path, "h41_impostor", TAKES_A_BUILT_IN_NAME, monkeypatch)
    line = refused(["run", "mm-c", "--plugin", "h41_impostor"], "plugins", "name taken")
    assert "--plugin h41_impostor" in line
    assert (
        "placer 'first-fit' is already registered by clusteremu.cluster.policies.fifo.FirstFit"
        in line
    )
    assert (
        registry._REGISTRY["placer"]["first-fit"].__module__ == "clusteremu.cluster.policies.fifo"
    )
    monkeypatch.setenv(registry.PLUGINS_ENV, "h41_impostor")
    refused(["validate", "mm-c"], "plugins", "name taken (environment)", "entry 'h41_impostor'")


def test_an_environment_entry_that_cannot_be_imported_is_bad_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(registry.PLUGINS_ENV, "h41_not_anywhere")
    refused(
        ["validate", "mm-c"],
        "plugins",
        "environment entry missing",
        "CLUSTEREMU_PLUGINS entry 'h41_not_anywhere': no module named 'h41_not_anywhere'",
    )
    # A process whose registry loads first (a Ray worker) says the same, every lookup.
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(registry, "_load_error", None)
    for _ in range(2):
        with pytest.raises(registry.UsageError, match="entry 'h41_not_anywhere'"):
            registry.names("placer")


def test_plugin_takes_a_file_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "not-on-the-path"
    folder.mkdir()
    (folder / "h41_by_path.py").write_text(textwrap.dedent(GOOD), encoding="utf-8")
    monkeypatch.chdir(folder)
    argv = ["run", "mm-c", *SHORT, "--json", "--plugin", "./h41_by_path.py"]
    assert main([*argv, "--set", "scheduler.placer.name=h41-last-fit"]) == 0
    assert '"jobs_completed": 200' in capsys.readouterr().out
    # Worker processes find it by its absolute path.
    assert str(folder.resolve() / "h41_by_path.py") in registry.env_plugins()
    refused(
        ["validate", "mm-c", "--plugin", "./no_such_file.py"],
        "plugins",
        "missing file",
        "--plugin ./no_such_file.py: expected a Python file (.py) or a module name",
    )
    (folder / "h41-dashed.py").write_text("\n")
    refused(
        ["validate", "mm-c", "--plugin", "h41-dashed.py"],
        "plugins",
        "file name",
        "must be a Python module name",
    )
    (folder / "h41_wrong_by_path.py").write_text(textwrap.dedent(WRONG_SIGNATURE))
    refused(
        ["validate", "mm-c", "--plugin", str(folder / "h41_wrong_by_path.py")],
        "plugins",
        "wrong signature (file)",
        "place_two does not compile",
    )


def test_a_plugin_that_leaves_a_thread_running_does_not_keep_the_command_alive(
    tmp_path: Path,
) -> None:
    """A plug-in that starts a never-ending (non-daemon) thread: the command still exits
    with its status, naming the thread on stderr, instead of waiting for it for ever. (The
    timeout is a safety net for a regression, far above the second or so the run takes.)"""
    import subprocess

    plugin = tmp_path / "thready.py"
    plugin.write_text(
        "import threading, time\n"
        "def forever():\n"
        "    while True:\n"
        "        time.sleep(1)\n"
        "threading.Thread(target=forever, name='thready-loop').start()\n"
    )
    cmd = [sys.executable, "-m", "clusteremu", "run", "mm-c", "--plugin", str(plugin), *SHORT]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "thread(s) still running at exit, not waited for: thready-loop" in done.stderr
    assert "jobs_completed" in done.stdout


def test_a_sigterm_while_the_command_shuts_down_exits_143(tmp_path: Path) -> None:
    """A SIGTERM after the command returned, while Python shuts down (here sent by an exit
    handler a plug-in registered, the moment a late signal lands): exit status 143, as
    during the command, not a death by the signal (-15)."""
    import subprocess

    plugin = tmp_path / "late_term.py"
    plugin.write_text(
        "import atexit, os, signal\natexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
    )
    cmd = [sys.executable, "-m", "clusteremu", "run", "mm-c", "--plugin", str(plugin), *SHORT]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert "jobs_completed" in done.stdout
    assert "Traceback" not in done.stderr
