"""The `clusteremu` command line: run, compare, validate, list (and the sub-commands of
`clusteremu.commands`).

Exit status: 0 on success, 2 on bad input (scenario file, override, option or output
folder; one paragraph on stderr naming the file, the field and what was expected, before
any work starts), 3 when a policy returns an illegal decision, 130 / 143 when interrupted
by SIGINT / SIGTERM (results are written whole or not at all). With `--json` the summary is
the only thing on stdout (progress and warnings stay on stderr).
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from importlib import import_module
from pathlib import Path
from typing import Any, NoReturn

from clusteremu.cluster import summary_metrics
from clusteremu.cluster.engine.compaction import CompactionRefused
from clusteremu.cluster.errors import UsageError
from clusteremu.cluster.io import (
    OutputError,
    check_output_folder,
    number_text,
    output_folder,
    to_json,
    write_fault,
    write_json,
    write_parquet,
)
from clusteremu.cluster.model import SimulationSpec, replays_table
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import PolicyError
from clusteremu.cluster.policies.points import PairError
from clusteremu.cluster.readback import ReadBackError
from clusteremu.cluster.runner import ScenarioResult, run_spec, with_policies
from clusteremu.parser import EXIT_BAD_INPUT, command_parser
from clusteremu.plugins import load_plugins
from clusteremu.progress import Progress, compile_note, progress
from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import ScenarioError, shorten
from clusteremu.scenarios.limits import MemoryNeedError
from clusteremu.scenarios.loader import (
    check_policies,
    load_scenario,
    resolve_path,
    shipped_scenarios,
)

# EXIT_BAD_INPUT (2) comes from clusteremu.parser, whose usage errors exit with it.
EXIT_POLICY_ERROR = 3
#: The longest error message printed (characters); longer ones are cut.
MAX_MESSAGE_CHARS = 2000
#: Summary keys `compare --metric` can chart (numbers in every run's summary) ...
SUMMARY_METRICS = summary_metrics.names(chart="core")
#: ... and the keys the world model, usage model, SLO, faults and the scenario's selected
#: metrics add (`clusteremu.cluster.summary_metrics`: any placer reports them when the
#: scenario has them).
POLICY_METRICS = summary_metrics.names(chart="family")

log = logging.getLogger("clusteremu")


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like SIGINT (Ctrl-C): clean up, write nothing half, exit 143."""


def require_extra(module: str, extra: str, feature: str) -> None:
    """Raise UsageError naming the extra to install when `module` cannot be imported."""
    try:
        import_module(module)
    except ImportError as exc:
        missing = exc.name or module
        if missing != module and not missing.startswith(f"{module}."):
            raise  # the extra is there but something inside it is broken: a real bug
        raise UsageError(
            f"{feature} needs the `{extra}` extra ({module} is not installed): "
            f"pip install 'clusteremu[{extra}]'"
        ) from None


def check_out(args: argparse.Namespace, command: str, files: Sequence[str] | None = None) -> None:
    """Check `--out` before any work (see clusteremu.cluster.io.check_output_folder)."""
    if getattr(args, "out", None):
        try:
            check_output_folder(args.out, command, files)
        except OutputError as exc:
            raise UsageError(str(exc)) from None


@contextmanager
def progress_bar(enabled: bool, label: str, *, compiles: bool = False) -> Iterator[Progress]:
    """Progress on stderr, called with the fraction done: a bar on a terminal, else a line
    every few seconds (the one convention of `clusteremu.progress`). The commands here
    show it under `--json` too (stdout keeps only the JSON). `compiles`: the work runs the
    event loop, so first say when numba will compile it (`compile_note`)."""
    with progress(label, enabled) as shown:
        note = compile_note() if enabled and compiles else ""
        if note:
            shown.say(note)
        yield shown


def _load(args: argparse.Namespace, streamed: bool = False) -> SimulationSpec:
    overrides = list(args.set or [])
    if getattr(args, "seed", None) is not None:
        overrides.append(f"seed={args.seed}")
    if getattr(args, "replications", None) is not None:
        overrides.append(f"replications={args.replications}")
    return load_scenario(args.scenario, overrides, streamed=streamed)


def _load_run(args: argparse.Namespace) -> tuple[SimulationSpec, MemoryNeedError | None]:
    """`run`'s scenario, and, for one that only a run streaming its results can hold (in
    this process: `clusteremu.cluster.runner`), the error any other run gets."""
    try:
        return _load(args), None
    except MemoryNeedError as exc:
        if getattr(args, "ray", False):
            raise
        return _load(args, streamed=True), exc


def _check_streaming(spec: SimulationSpec, stream: bool, plain: MemoryNeedError | None) -> None:
    """Before the run: a run that must stream its results (`--stream`, or one that only
    then fits in memory: `plain`) can (its policies: `stream_refusal`)."""
    if not stream and plain is None:
        return
    from clusteremu.cluster.engine.streaming import stream_refusal

    why = stream_refusal(spec)
    if why is None:
        return
    if plain is not None:
        raise limits.cannot_stream(plain, why)
    raise UsageError(f"--stream: {spec.name} cannot stream its results: {why}")


def _headline(summary: dict[str, Any], trace: bool = False) -> str:
    def fmt(key: str) -> str:
        value = summary.get(key)
        ci = summary.get("ci95", {}).get(key)
        text = number_text(value)  # NaN (no meaning for this run, e.g. a batch): n/a
        return text + (f" ± {ci:.3g}" if isinstance(ci, float) and ci == ci else "")

    # The headline's groups (`clusteremu.cluster.summary_metrics`): the base always, then
    # what the scenario's features add, then the jobs a run left unserved, always (a run
    # that did not finish never looks complete).
    shown = {
        "base": True,
        "slo": "slo_loss_usd" in summary,  # a scenario with an SLO: its loss, eq. 1's total
        "faults": "node_failures" in summary,  # node failures or a timeline
        "trace": trace,  # a replayed trace (docs/traces.md): the HPC metrics
        "unserved": True,
    }
    keys = [
        key
        for group in summary_metrics.HEADLINE_GROUPS
        if shown[group]
        for key in summary_metrics.headline(group)
        if key in summary or group == "base"
    ]
    return "\n".join(f"  {k:<24} {fmt(k)}" for k in keys)


#: Options of `run` that only mean something with `--ray` (dest, flag).
RAY_ONLY_OPTIONS = (
    ("address", "--address"),
    ("shards", "--shards"),
    ("window", "--window"),
    ("realtime", "--realtime"),
    ("dashboard_host", "--dashboard-host"),
    ("shard_resources", "--shard-resources"),
    ("shard_cpus", "--shard-cpus"),
)


#: `run` warns when the failed and unfinished jobs are at least this share of the jobs
#: (completed + failed + unfinished).
UNSERVED_WARN_SHARE = 0.01


def unserved_warning(summary: dict[str, Any]) -> str:
    """The warning line for a run whose failed plus unfinished jobs are at least
    `UNSERVED_WARN_SHARE` (1%) of completed + failed + unfinished ("" below that)."""
    failed = int(summary.get("jobs_failed") or 0)
    unfinished = int(summary.get("jobs_unfinished") or 0)
    total = int(summary.get("jobs_completed") or 0) + failed + unfinished
    if not total or (failed + unfinished) / total < UNSERVED_WARN_SHARE:
        return ""
    never = summary.get("unscheduled") or 0
    of_which = f", {never:,} of them never started" if never else ""
    return (
        f"warning: {failed + unfinished:,} of {total:,} jobs "
        f"({(failed + unfinished) / total:.1%}) did not complete ({failed:,} failed, "
        f"{unfinished:,} still in the system at the end{of_which}); the response times cover "
        f"only the completed jobs (warned from {UNSERVED_WARN_SHARE:.0%} of completed + failed "
        "+ unfinished)"
    )


def _warn_if_unserved(summary: dict[str, Any]) -> None:
    """On stderr: a warning when no measured job completed, else `unserved_warning`'s."""
    if summary.get("jobs_completed") != 0:
        line = unserved_warning(summary)
        if line:
            print(line, file=sys.stderr)
    else:
        failed = summary.get("jobs_failed", 0)
        never = summary.get("unscheduled", 0)
        unfinished = f"{summary.get('jobs_unfinished', 0)} unfinished" + (
            f", of which {never} never started" if never else ""
        )
        print(
            f"warning: no measured job completed ({failed} failed, {unfinished}); "
            "check stop.*, the warm-up, the arrivals and whether any node can take the jobs",
            file=sys.stderr,
        )


def _check_ray_mode(spec: SimulationSpec, args: argparse.Namespace) -> None:
    """Refuse, before Ray starts, what the windowed and real-time modes do not model."""
    if not (args.window or args.realtime):
        return
    from clusteremu.actors.coordinator import check_windowed

    try:
        check_windowed(spec)
    except ValueError as exc:
        raise UsageError(f"--{'window' if args.window else 'realtime'}: {exc}") from None


def _warn_shards_in_exact_mode(args: argparse.Namespace) -> None:
    """`--shards N` without `--window`/`--realtime`: exact mode runs one engine actor and
    the shards are not used; say so (one line on stderr) rather than seem to shard."""
    if args.shards is not None and args.shards > 1 and not (args.window or args.realtime):
        print(
            f"warning: --shards {args.shards} has no effect in exact mode (one engine actor "
            "runs every node); add --window SECONDS for windowed mode (approximate)",
            file=sys.stderr,
        )


def ray_mode_note(summary: dict[str, Any]) -> str:
    """The line that labels a windowed or real-time Ray run's figures approximate, with
    its window and shards ("" for exact mode, kernel runs, and one node shard, whose
    windows give the kernel's results: docs/cluster.md)."""
    ray = summary.get("ray")
    if not isinstance(ray, dict) or ray.get("mode", "exact") == "exact":
        return ""
    if ray.get("shards", 1) <= 1:
        return ""
    window = ray.get("window_s", 0.0)
    return (
        f"approximate: {ray['mode']} mode, window {window:g} s, {ray.get('shards', 1)} "
        f"shard(s); each arrival was routed on the shards' state up to {window:g} s old, so "
        "the figures approximate exact mode's (run without --window for the kernel's)"
    )


def cmd_run(args: argparse.Namespace) -> int:
    given = [flag for dest, flag in RAY_ONLY_OPTIONS if getattr(args, dest, None) is not None]
    if given and not args.ray:
        raise UsageError(
            f"{', '.join(given)}: {'these options apply' if len(given) > 1 else 'applies'} "
            "only to Ray runs; add --ray (or drop them)"
        )
    if args.ray:
        require_extra("ray", "ray", "run --ray")
        if args.shards is not None:  # one actor (a process) per shard
            from clusteremu.scenarios.option_checks import workers

            workers(args.shards, "--shards", local=args.address is None)
    if args.ray and args.stream:
        raise UsageError("--stream: applies only to runs in this process; drop --ray or --stream")
    variant = _run_variant(args.policy)
    check_out(args, "run")
    spec, plain = _load_run(args)
    if variant:  # --policy: the scenario with those policies, built and checked first
        spec = check_variant(spec, ",".join(args.policy), variant)
    if not args.ray:
        _check_streaming(spec, args.stream, plain)
    if args.ray:
        from clusteremu.actors.coordinator import (
            reporting,  # the Ray extra; imported only when asked for
        )
        from clusteremu.actors.launch import run_on_ray

        _check_ray_mode(spec, args)
        _warn_shards_in_exact_mode(args)
        with progress_bar(True, spec.name, compiles=True) as update, reporting(update):
            result: ScenarioResult = run_on_ray(spec, args)
        if isinstance(result.summary.get("ray"), dict):  # summary.json and --json say it too
            result.summary["ray"]["approximate"] = bool(ray_mode_note(result.summary))
        if args.out:
            with output_folder(args.out, "run", label=spec.name) as stage:
                write_parquet(result.jobs, stage / "jobs.parquet")
                write_json(result.summary, stage / "summary.json")
    else:
        result = _run_here(spec, args)
    if args.json:
        print(to_json(result.summary))
    else:
        chosen = "".join(f", {k} {v}" for k, v in variant.items())  # what --policy set
        print(f"{spec.name}: {spec.replications} replication(s), seed {spec.seed}{chosen}")
        note = ray_mode_note(result.summary)
        if note:
            print(note)
        print(_headline(result.summary, replays_table(spec)))
        if args.out:
            print(f"wrote {Path(args.out) / 'jobs.parquet'} and {Path(args.out) / 'summary.json'}")
    _warn_if_unserved(result.summary)
    return 0


def _run_here(spec: SimulationSpec, args: argparse.Namespace) -> ScenarioResult:
    """`run` in this process: the per-job table written into the output's staging folder
    as the run goes (streamed past a million jobs), so that an interrupted run leaves
    `--out` as it was."""
    stream = True if args.stream else None
    with ExitStack() as stack:
        stage = None
        if args.out:
            stage = stack.enter_context(output_folder(args.out, "run", label=spec.name))
        with progress_bar(True, spec.name, compiles=True) as update:
            table = None if stage is None else stage / "jobs.parquet"
            try:
                result = run_spec(spec, update, out=table, stream=stream)
            except CompactionRefused as exc:  # seen by the engine alone (a trace's usage)
                raise UsageError(f"--stream: {exc}") from None
        if stage is not None:
            write_json(result.summary, stage / "summary.json")
    return result


def parse_policy(text: str) -> dict[str, str]:
    """`placer=random-fit,allocator=equi` -> {'placer': 'random-fit', 'allocator': 'equi'}.

    A name may carry parameters, `first-fit:key=value:key=value`; `check_variant` builds
    the policies to check them.
    """
    out: dict[str, str] = {}
    shown = shorten(text)
    for part in text.split(","):
        kind, sep, name = part.partition("=")
        kind, name = kind.strip(), name.strip()
        if not sep or kind not in registry.KINDS or not name:
            raise UsageError(
                f"--policy {shown}: expected kind=name with kind one of {', '.join(registry.KINDS)}"
            )
        if kind in out:
            raise UsageError(f"--policy {shown}: {kind} is given twice")
        if name.split(":")[0] not in registry.names(kind):
            close = difflib.get_close_matches(name.split(":")[0], registry.names(kind), n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise UsageError(
                f"--policy {shown}: unknown {kind} {shorten(name)}{hint}; registered: "
                f"{', '.join(registry.names(kind))}"
            )
        for item in name.split(":")[1:]:
            key, eq, _ = item.partition("=")
            if not eq or not key.strip():
                raise UsageError(
                    f"--policy {shown}: expected parameters as name:key=value:key=value, "
                    f"got {shorten(item)}"
                )
        out[kind] = name
    return out


def _run_variant(texts: Sequence[str]) -> dict[str, str]:
    """`run --policy` (repeatable): one variant, as compare's `--policy` parses it, with
    each kind at most once over all the options."""
    variant: dict[str, str] = {}
    for text in texts:
        for kind, name in parse_policy(text).items():
            if kind in variant:
                raise UsageError(f"--policy {shorten(text)}: {kind} is given twice")
            variant[kind] = name
    return variant


def check_variant(spec: SimulationSpec, text: str, variant: dict[str, str]) -> SimulationSpec:
    """`spec` with a `--policy` variant, its policies built and set up (UsageError if not)."""
    try:
        varied = with_policies(spec, **variant)
        check_policies(varied, spec.name)
    except PairError as exc:  # a scaler that is not the placer's pair
        raise UsageError(f"--policy {shorten(text)}: {exc}") from None
    except ScenarioError as exc:
        problems = "; ".join(f"{f}: {e}" if f else e for f, e in exc.problems)
        raise UsageError(f"--policy {shorten(text)}: {problems}") from None
    return varied


def check_metric(metric: str) -> None:
    """Refuse a `--metric` that no summary has (before any run), suggesting the nearest."""
    known = SUMMARY_METRICS + POLICY_METRICS
    if metric in known:
        return
    close = difflib.get_close_matches(metric, known, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UsageError(
        f"--metric {shorten(metric)}: not a summary key; {hint}expected one of {', '.join(known)}"
    )


def _variants(args: argparse.Namespace) -> list[tuple[str, dict[str, str]]]:
    variants = [(p, parse_policy(p)) for p in args.policy]
    if not variants:
        raise UsageError("compare needs at least one --policy kind=name")
    return variants


def cmd_compare(args: argparse.Namespace) -> int:
    if args.grid:
        return _compare_grid(args)
    check_metric(args.metric)
    variants = _variants(args)
    check_out(args, "compare")
    spec = _load(args)
    for text, variant in variants:
        check_variant(spec, text, variant)
    from clusteremu.cluster.compare import compare_policies, plot_comparison, table_text

    with progress_bar(True, f"compare {spec.name}", compiles=True) as update:
        rows = compare_policies(spec, [v for _, v in variants], update)
    written = ""
    if args.out:  # without --out nothing is written
        with output_folder(args.out, "compare", label=spec.name) as stage:
            plot_comparison(rows, spec, stage / "compare.png", metric=args.metric)
            write_json(rows, stage / "compare.json")
        out = Path(args.out)
        written = f"wrote {out / 'compare.png'} and {out / 'compare.json'}"
    if args.json:
        print(to_json(rows))
    else:
        print(table_text(rows, args.metric))
        if written:
            print(written)
    return 0


def _compare_grid(args: argparse.Namespace) -> int:
    """`compare --grid PATH=v1,v2,...`: every policy at every value (the mean-field
    convergence and heuristics figures)."""
    from clusteremu.cluster.compare import compare_grid, grid_table_text, plot_grid
    from clusteremu.scenarios.option_checks import grid

    path, grid_values = grid(args.grid)
    values = list(grid_values)
    variants = _variants(args)
    check_out(args, "compare --grid")
    base = list(args.set or [])
    if args.seed is not None:
        base.append(f"seed={args.seed}")
    if args.replications is not None:
        base.append(f"replications={args.replications}")
    specs = {v: load_scenario(args.scenario, [*base, f"{path}={v}"]) for v in values}
    first = next(iter(specs.values()))
    for text, variant in variants:
        check_variant(first, text, variant)
    name = first.name
    with progress_bar(True, f"compare {name} over {path}", compiles=True) as update:
        records = compare_grid(specs.__getitem__, values, [v for _, v in variants], update)
    written = ""
    if args.out:
        out = Path(args.out)
        with output_folder(out, "compare --grid", label=name) as stage:
            pngs = plot_grid(records, name, stage)
            write_json(records, stage / "compare-grid.json")
        shown = ", ".join(str(out / p.name) for p in pngs)
        written = f"wrote {shown} and {out / 'compare-grid.json'}"
    if args.json:
        print(to_json([{k: v for k, v in r.items() if k != "summary"} for r in records]))
    else:
        print(
            f"{name}: {path} over {', '.join(values)}; "
            f"{first.replications} replication(s) per point"
        )
        print(grid_table_text(records))
        if written:
            print(written)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    spec, plain = _load_run(args)  # what `run` accepts (streamed where it must be)
    _check_streaming(spec, False, plain)
    check_policies(spec, str(resolve_path(args.scenario)))  # what validate accepts, run does
    n_nodes, n_pools = len(spec.nodes), len(spec.pools)
    # the allocator shares a pool's cores: without pools it has nothing to do, so no word
    allocator = f", allocator {spec.scheduler.allocator.name}" if n_pools else ""
    print(
        f"{args.scenario}: valid ({len(spec.classes)} classes, {n_nodes} nodes, {n_pools} pools, "
        f"placer {spec.scheduler.placer.name}{allocator})"
    )
    return 0


def _description(path: Path) -> str:
    """A scenario file's `description:` (empty when it has none or cannot be read)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    text = data.get("description") if isinstance(data, dict) else None
    return " ".join(str(text).split()) if text else ""


def cmd_list(args: argparse.Namespace) -> int:
    from clusteremu.cluster.policies.gpu_share import SCORERS as GPU_PLACERS

    paths = shipped_scenarios()
    folder = paths[0].parent if paths else ""
    print(f"shipped scenarios (in {folder}; name one, e.g. `clusteremu run mm-c`):")
    for path in paths:
        print(f"  {path.stem:<24} {_description(path) or '(no description)'}")
    print("registered policies (a scenario's scheduler block, or --policy KIND=NAME):")
    for kind in registry.KINDS:
        print(f"  {kind + 's:':<14} {', '.join(registry.names(kind))}")
    print("GPU placers (clusteremu gpu-frag --policy NAME, on the Alibaba GPU trace):")
    print(f"  {'placers:':<14} {', '.join(GPU_PLACERS)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The `clusteremu` parser (`clusteremu.parser.command_parser`), its own commands
    calling this module's `cmd_*` functions."""
    return command_parser(
        {"run": cmd_run, "compare": cmd_compare, "validate": cmd_validate, "list": cmd_list}
    )


def _say(exc: BaseException) -> None:
    """Print an error as one paragraph on stderr (cut to MAX_MESSAGE_CHARS)."""
    cause = getattr(exc, "cause", None)  # an error raised in a Ray task: what the task raised
    text = " ".join(str(cause if isinstance(cause, BaseException) else exc).split("\n"))
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    print(f"error: {text}", file=sys.stderr)


#: Set when SIGTERM arrived during the command: code that catches the `Terminated` it
#: raises and raises a plain KeyboardInterrupt instead (Ray Tune's loop) loses its class.
_TERMINATED = threading.Event()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM raises `Terminated` (a KeyboardInterrupt) as Ctrl-C
    does, so the same clean-up runs; the previous handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        _TERMINATED.set()
        raise Terminated()

    _TERMINATED.clear()
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with sigterm_as_interrupt():
            from clusteremu.scenarios.option_checks import out_path

            out_path(getattr(args, "out", None))  # every command's --out: not empty
            load_plugins(getattr(args, "plugin", None) or [])
            return int(args.func(args))
    except (
        ScenarioError,
        UsageError,
        OutputError,
        ReadBackError,
        registry.UnknownPolicyError,
    ) as exc:
        _say(exc)
        return EXIT_BAD_INPUT
    except PolicyError as exc:
        _say(exc)
        return EXIT_POLICY_ERROR
    except MemoryError:
        _say(
            MemoryError(
                "out of memory; make the run smaller (stop.jobs or stop.time_s, replications, "
                "the number of nodes)"
            )
        )
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`clusteremu run ... | head`): exit quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:  # disk full, quota, read-only while writing --out: bad output
        fault = write_fault(exc, Path(args.out)) if getattr(args, "out", None) else None
        if fault is None:
            raise
        _say(fault)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated) or _TERMINATED.is_set()
        what = "terminated (SIGTERM)" if terminated else "interrupted"
        note = getattr(args, "interrupt_note", None) or (
            "no results were written; an --out folder keeps what it held"
        )
        print(f"{what}; {note}", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)


if __name__ == "__main__":
    raise SystemExit(main())


def console_main() -> NoReturn:
    """The `clusteremu` command (and `python -m clusteremu`): `main`, then exit with its
    status even when a plug-in left a thread running (the interpreter would wait for it
    for ever): such threads are named on stderr and not waited for.

    Outside a command's own clean-up (`sigterm_as_interrupt`: before it starts, and after
    it returned, while Python and Ray shut down) SIGTERM and SIGINT end the process at
    once with 128 + the signal (143, 130), as the command's clean-up would, rather than
    killing it by the signal or printing a traceback from an exit handler: nothing is half
    written then (outputs are written atomically before the command returns)."""
    signal.signal(signal.SIGTERM, _exit_before_the_command)
    code = main()
    signal.signal(signal.SIGTERM, _exit_by_signal)
    signal.signal(signal.SIGINT, _exit_by_signal)
    stray = [
        t.name
        for t in threading.enumerate()
        if t is not threading.main_thread() and t.is_alive() and not t.daemon
    ]
    if stray:
        print(
            f"warning: thread(s) still running at exit, not waited for: {', '.join(stray)} "
            "(started by a plug-in?)",
            file=sys.stderr,
        )
    if stray or code in INTERRUPTED:
        # After an interrupt, Ray's core worker can be stopped mid-call; tearing the
        # interpreter down over it once ended in a segmentation fault after the command had
        # printed its line (exit -11 instead of 130). What a normal exit runs (Ray's
        # shutdown, temporary files) runs here, then the process ends without finalising
        # the modules, with the command's own status.
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        import atexit

        with suppress(BaseException):
            atexit._run_exitfuncs()
        os._exit(code)
    raise SystemExit(code)


#: The statuses of an interrupted command: SIGINT (Ctrl-C) and SIGTERM.
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


def _exit_before_the_command(signum: int, frame: Any) -> None:
    """SIGTERM while the command starts up (before its own clean-up is in place): the
    interrupt's line, then exit 143; nothing was written yet."""
    print(
        "terminated (SIGTERM); no results were written; an --out folder keeps what it held",
        file=sys.stderr,
    )
    _exit_by_signal(signum, frame)


def _exit_by_signal(signum: int, frame: Any) -> None:
    """End the process now with status 128 + signum (what `console_main` installs)."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(128 + signum)
