"""Plug-in modules named on the command line: `clusteremu run SCENARIO --plugin MODULE`.

A plug-in is any importable module (on `PYTHONPATH`, or installed) whose import registers
policies with `@register(kind, name)` (see `docs/adding_a_policy.md`). `--plugin` may be
repeated; the modules are imported in order before the scenario is loaded, so its
`scheduler` block and `--policy` may name their policies. A module that cannot be
imported is bad input (exit status 2), reported with the module's name and the reason.

Installed packages can instead declare an entry point in the `clusteremu.policies` group,
which the registry loads by itself (no option needed).

The loaded modules are also named in the `CLUSTEREMU_PLUGINS` environment variable
(`cluster.policies.registry.PLUGINS_ENV`), which the registry imports in every process that
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
from importlib import import_module
from types import ModuleType

log = logging.getLogger(__name__)

__all__ = ["add_plugin_option", "load_plugins"]


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable `--plugin MODULE` option to a sub-command's parser."""
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first so the policies it registers can be named "
        "(repeatable; the module must be importable, e.g. on PYTHONPATH)",
    )


def load_plugins(modules: Sequence[str]) -> list[ModuleType]:
    """Import each plug-in module in order; return them.

    Raises `clusteremu.cli.UsageError` (exit status 2) naming the module when it cannot be
    found or fails while being imported (a syntax error, a policy name registered twice).
    """
    from cluster.errors import UsageError

    loaded = []
    for name in modules:
        try:
            loaded.append(import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.split(".")[0] != exc.name.split(".")[0]:
                raise UsageError(
                    f"--plugin {name}: the module failed to import: it needs {exc.name!r}, "
                    "which is not installed"
                ) from None
            raise UsageError(
                f"--plugin {name}: no module named {name!r}; put the folder that holds "
                f"{name.split('.')[0]}.py (or the package) on PYTHONPATH, or install it"
            ) from None
        except SystemExit as exc:  # sys.exit() or exit() while being imported
            raise UsageError(
                f"--plugin {name}: the module called sys.exit({exc.code!r}) while being "
                "imported; a plug-in module must only register policies"
            ) from None
        except Exception as exc:  # whatever the plug-in's own code raises on import
            raise UsageError(
                f"--plugin {name}: the module failed to import: {type(exc).__name__}: {exc}"
            ) from None
        log.info("loaded plug-in %s", name)
    if modules:
        from cluster.policies.registry import PLUGINS_ENV

        known = [m for m in os.environ.get(PLUGINS_ENV, "").split(",") if m]
        os.environ[PLUGINS_ENV] = ",".join(dict.fromkeys([*known, *modules]))
    return loaded
