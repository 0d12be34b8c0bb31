"""Sub-commands contributed by policy families and the Ray layer.

Each module listed in `COMMAND_MODULES` defines `add_parser(sub)`, which adds one
sub-command to the `clusteremu` parser with `set_defaults(func=...)`; the function takes
the parsed arguments and returns an exit status. Raise `ScenarioError` or
`clusteremu.cli.UsageError` for bad input (exit status 2).
"""

from __future__ import annotations

#: Modules that add sub-commands (one line each; keep sorted).
COMMAND_MODULES: tuple[str, ...] = (
    "clusteremu.commands.bound",
    "clusteremu.commands.dashboard",
    "clusteremu.commands.gpu_frag",
    "clusteremu.commands.import_trace",
    "clusteremu.commands.learn",
    "clusteremu.commands.provision",
    "clusteremu.commands.solve",
    "clusteremu.commands.sweep",
    "clusteremu.commands.synthesize",
    "clusteremu.commands.tune",
)
