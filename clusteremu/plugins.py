"""Plug-in modules named on the command line: `clusteremu run SCENARIO --plugin MODULE`.

A plug-in is any importable module (on `PYTHONPATH`, or installed), or a Python file given
by its path (`--plugin ./my_placer.py`), whose import registers policies with
`@register(kind, name)` (see `docs/adding_a_policy.md`). `--plugin` may be repeated; the
modules are imported in order before the scenario is loaded, so its `scheduler` block and
`--policy` may name their policies. Their compiled functions are compiled then, for their
extension point's signature. A module that cannot be imported, raises while being imported
(a name already taken), or registers a compiled function that does not compile is bad input
(exit status 2), reported with the plug-in's name and the reason.

Installed packages can instead declare an entry point in the `clusteremu.policies` group,
which the registry loads by itself (no option needed).

The loaded modules are also named in the `CLUSTEREMU_PLUGINS` environment variable
(`clusteremu.cluster.policies.registry.PLUGINS_ENV`), which the registry imports in every process
that
looks a policy up: the Ray workers of `run --ray` and `sweep` on a local Ray inherit it
(and `PYTHONPATH`) from the command, so they know the plug-in's policies too. On a remote
cluster the module must be importable on the workers (installed, or shipped with a Ray
runtime environment).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from clusteremu.cluster.errors import UsageError

log = logging.getLogger(__name__)

__all__ = ["add_plugin_option", "load_plugins"]


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable `--plugin MODULE|FILE.py` option to a sub-command's parser."""
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE|FILE.py",
        help="import MODULE (importable, e.g. on PYTHONPATH) or the Python file FILE.py first, "
        "so the policies it registers can be named (repeatable)",
    )


def load_plugins(modules: Sequence[str]) -> list[ModuleType]:
    """Import each plug-in (a module name or a .py file path) in order; return them.

    The built-in policies and those of the plug-ins already named in `CLUSTEREMU_PLUGINS`
    are registered first (so a plug-in cannot take a built-in's name unnoticed). Raises
    `UsageError` (exit status 2) naming the plug-in or the environment's entry when it
    cannot be found, fails while being imported (a syntax error, a policy name registered
    twice, an exception of its own), or registers a policy whose compiled function does not
    compile for its extension point (`clusteremu.cluster.policies.registry.import_plugin`).
    """
    from clusteremu.cluster.policies import registry

    for name in modules:
        if "," in name:
            raise UsageError(f"--plugin {name}: expected one module or file, got a comma")
    if not modules and not registry.env_plugins():
        return []
    registry.load()
    for entry in registry.env_plugins():  # named before this process (or before this call)
        registry.import_plugin(entry, f"{registry.PLUGINS_ENV} entry {entry!r}")
    loaded = []
    for name in modules:
        loaded.append(registry.import_plugin(name, f"--plugin {name}"))
        log.info("loaded plug-in %s", name)
    if modules:
        # Worker processes import them by the same entries: a file by its absolute path.
        named = [str(Path(m).expanduser().resolve()) if registry.is_path(m) else m for m in modules]
        known = registry.env_plugins()
        os.environ[registry.PLUGINS_ENV] = ",".join(dict.fromkeys([*known, *named]))
    return loaded
