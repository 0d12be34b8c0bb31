"""The `clusteremu` argument parser: every command's options, and help that shows them.

`command_parser` builds the parser of the `clusteremu` command: the options of `run`,
`compare`, `validate` and `list` (whose functions `clusteremu.cli` passes in), then the
sub-commands of `clusteremu.commands`. Its usage errors are one line with exit status 2
(`Parser`), and each option's help shows its default (`HelpFormatter`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

from clusteremu.plugins import add_plugin_option

#: Exit status of bad input: a usage error here, and what `clusteremu.cli.main` returns for
#: the rest (scenario file, override, option or output folder).
EXIT_BAD_INPUT = 2

#: A command's function: the parsed arguments in, the exit status out.
Command = Callable[[argparse.Namespace], int]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help with each option's default shown (when it has a meaningful one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "%(default)" not in text
            and "default" not in text
            and default not in (None, False, [], argparse.SUPPRESS)
        ):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (exit status 2) and whose help
    shows defaults; sub-command parsers are made of the same class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {message} (see `{self.prog} --help`)\n")


def _version() -> str:
    try:
        return version("clusteremu")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def command_parser(commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    """The `clusteremu` parser: `run`, `compare`, `validate` and `list` call
    `commands[name]` (`clusteremu.cli`'s `cmd_*` functions), and every module of
    `clusteremu.commands.COMMAND_MODULES` adds its own sub-command; the description lists
    them all."""
    parser = Parser(prog="clusteremu")  # the description is set below, from the commands
    parser.add_argument("--version", action="version", version=f"clusteremu {_version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=Parser,
        help=argparse.SUPPRESS,  # the description lists the commands
    )

    def scenario_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
        p.add_argument(
            "--set",
            action="append",
            metavar="PATH=VALUE",
            help="override a field, e.g. workload.classes.0.arrival.rate_per_s=9 (repeatable)",
        )
        p.add_argument("--seed", type=int, help="override the scenario seed (default: its seed)")
        p.add_argument(
            "--replications",
            type=int,
            help="override the number of replications (default: the scenario's)",
        )
        add_plugin_option(p)

    run = sub.add_parser("run", help="run a scenario and print its summary")
    scenario_args(run)
    run.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="KIND=NAME[,KIND=NAME]",
        help="run with this policy instead of the scenario's, as in compare: sets "
        "scheduler.KIND.name, e.g. placer=random-fit or placer=first-fit:key=value "
        "(repeatable, each kind once); another policy than the scenario's gets only the "
        "parameters given, the scenario's own keeps its parameters (given keys override)",
    )
    run.add_argument(
        "--out", metavar="DIR", help="write DIR/jobs.parquet and DIR/summary.json together"
    )
    run.add_argument("--json", action="store_true", help="print only the summary, as JSON")
    run.add_argument(
        "--stream",
        action="store_true",
        help="hold only the jobs still in the system and write jobs.parquet as the run goes, "
        "rows in the order jobs leave (automatic past 1,048,576 jobs where the scenario "
        "allows it: compiled policies, no SLO, world, usage or score metric)",
    )
    ray = run.add_argument_group("Ray (needs the `ray` extra; these options need --ray)")
    ray.add_argument("--ray", action="store_true", help="run on Ray actors")
    ray.add_argument(
        "--address", help="Ray cluster to join, HOST:PORT or 'auto' (default: a private one)"
    )
    ray.add_argument("--shards", type=int, help="node shard actors (default: 1)")
    ray.add_argument(
        "--window", type=float, help="windowed mode: window, seconds (default: 0, exact mode)"
    )
    ray.add_argument(
        "--realtime",
        type=float,
        help="pace to wall clock times X (default: 0, as fast as possible)",
    )
    ray.add_argument("--dashboard-host", help="Ray dashboard bind address (default: 127.0.0.1)")
    ray.add_argument(
        "--shard-resources",
        action="append",
        metavar="NAME=AMOUNT[,NAME=AMOUNT]",
        help="Ray custom resources node shard i requires (the i-th flag, cycled), to pin "
        "shards to machines started with `ray start --resources`",
    )
    ray.add_argument("--shard-cpus", type=float, help="CPUs each shard actor reserves (default: 0)")
    run.set_defaults(func=commands["run"])

    cmp_ = sub.add_parser("compare", help="run several policies on the same seeds")
    scenario_args(cmp_)
    cmp_.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="KIND=NAME[,KIND=NAME]",
        help="a policy variant, e.g. placer=random-fit or placer=first-fit:key=value "
        "(repeat for each); another policy than the scenario's gets only the parameters "
        "given, the scenario's own keeps its parameters (given keys override)",
    )
    cmp_.add_argument(
        "--metric",
        default="mean_response_time_s",
        help="summary key to chart and tabulate",
    )
    cmp_.add_argument(
        "--grid",
        metavar="PATH=V1,V2,...",
        help="sweep one field, e.g. cluster.pools.0.cores=4,8,16: every policy at every value; "
        "writes convergence.png and heuristics.png (normalised holding cost against the "
        "number of cores, with the mean-field lower bound)",
    )
    cmp_.add_argument(
        "--out",
        metavar="DIR",
        help="folder for compare.png and compare.json (default: write no files)",
    )
    cmp_.add_argument("--json", action="store_true", help="print only the rows, as JSON")
    cmp_.set_defaults(func=commands["compare"])

    val = sub.add_parser(
        "validate", help="check a scenario file (and build its policies) without running it"
    )
    scenario_args(val)
    val.set_defaults(func=commands["validate"])

    lst = sub.add_parser("list", help="list shipped scenarios and registered policies")
    lst.set_defaults(func=commands["list"])

    from clusteremu.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        import_module(module).add_parser(sub)
    _describe(sub)
    lines = [f"  {name:<10} {text}" for name, text in _helps(sub).items()]
    parser.description = (
        "clusteremu: a cluster emulator for scheduling and provisioning policies.\n\n"
        "commands:\n" + "\n".join(lines) + "\n\n"
        "`clusteremu COMMAND --help` describes each. Exit status: 0 done, 2 bad input, "
        "3 a policy's illegal decision, 130/143 interrupted."
    )
    return parser


def _describe(sub: Any) -> None:
    """Give every sub-command (and the verbs under one, `provision train`) that has no
    `description=` its one-line help as one, so `clusteremu COMMAND --help` opens with
    what the command does."""
    for action in sub._choices_actions:
        command = sub.choices[action.dest]
        if not command.description:
            command.description = action.help
        for inner in command._actions:
            if isinstance(inner, argparse._SubParsersAction):
                _describe(inner)


def _helps(sub: Any) -> dict[str, str]:
    """Each sub-command's one-line help, in the order they were added."""
    return {a.dest: a.help or "" for a in sub._choices_actions}
