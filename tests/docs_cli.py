"""`clusteremu` as the docs test (`tests/test_docs.py`) runs it.

The commands in README.md and docs/*.md are run exactly as written, except that the
`clusteremu` they find on `PATH` (and `.venv/bin/clusteremu`) is this wrapper. With
`CLUSTEREMU_DOCS_SMALL=1` it shrinks what a command computes, never what it means, and
says on stderr what it changed:

* `stop`: the run length (`stop.jobs`, or `stop.time_s`) is brought down to `SMALL_JOBS`
  jobs (`SMALL_TIME_S` seconds) and the warm-up scaled by the same factor, whether the
  length comes from the scenario or from the command's own `--set` (so a command whose
  warm-up exceeds its jobs still fails, as it would at full size);
* `--replications N` and `--seeds A-B` keep at most `MAX_REPLICATIONS` / `MAX_SEEDS`
  (`gpu-frag` too);
* `learn` runs at most `MAX_ITERATIONS` epochs;
* a provisioner's hyper-parameter search (`provision train --trials`, a scenario's
  `scheduler.provisioner.params.trials`) runs at most `MAX_TRIALS` trials;
* `tune` tunes at most `MAX_EXPERIMENTS` experiments with a budget of at most `MAX_BUDGET`
  evaluations each and judges them on at most `MAX_SEEDS` fresh seeds (`--test-seeds`;
  with `--scenario FILE`, the run length
  is cut as above); `train-rl` trains `MAX_RL_STEPS` steps of small networks on the
  ``tiny`` domain, on one environment;
* `--realtime X` paces `REALTIME_SPEEDUP` times faster;
* `synthesize` plans at most `MAX_BATCHES` example sets (`--batches`).

Without the variable it is the real `clusteremu`, unchanged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml

SMALL_ENV = "CLUSTEREMU_DOCS_SMALL"
SMALL_JOBS = 1000
SMALL_TIME_S = 100.0
MAX_REPLICATIONS = 2
MAX_SEEDS = 2
MAX_ITERATIONS = 5
MAX_EXPERIMENTS = 1
MAX_RL_STEPS = 120
MAX_TRIALS = 5
MAX_BUDGET = 4
REALTIME_SPEEDUP = 100.0
MAX_BATCHES = 20
SCENARIO_COMMANDS = {"run", "compare", "sweep", "learn", "bound"}


def _option_values(argv: list[str], name: str) -> list[str]:
    values = []
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(name + "="):
            values.append(arg.split("=", 1)[1])
    return values


def _replace_option(argv: list[str], name: str, value: str) -> list[str]:
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == name and i + 1 < len(out):
            out[i + 1] = value
        elif arg.startswith(name + "="):
            out[i] = f"{name}={value}"
    return out


def _scenario(scenario: str) -> dict[str, Any]:
    from clusteremu.scenarios.loader import resolve_path

    try:
        data = yaml.safe_load(resolve_path(scenario).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _scenario_stop(scenario: str) -> dict[str, Any]:
    stop = _scenario(scenario).get("stop")
    return stop if isinstance(stop, dict) else {}


def _scenario_trials(scenario: str) -> int | None:
    """The hyper-parameter search trials of the scenario's provisioner, if it has some."""
    scheduler = _scenario(scenario).get("scheduler")
    provisioner = scheduler.get("provisioner") if isinstance(scheduler, dict) else None
    params = provisioner.get("params") if isinstance(provisioner, dict) else None
    trials = params.get("trials") if isinstance(params, dict) else None
    return trials if isinstance(trials, int) else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _positionals(argv: list[str]) -> list[str]:
    """Positional arguments, skipping every option's value (all options but the flags
    below take one)."""
    flags = {"-v", "--verbose", "--json", "--ray", "-h", "--help", "--version", "--quiet"}
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg not in flags and "=" not in arg
        else:
            out.append(arg)
    return out


def shrink(argv: list[str]) -> tuple[list[str], list[str]]:
    """The small version of a `clusteremu` command line, and what was changed."""
    positionals = _positionals(argv)
    if positionals and positionals[0] in ("tune", "train-rl"):
        return _shrink_tuning(argv, positionals[0])
    if positionals[:2] == ["provision", "train"]:  # profiles, then searches hyper-parameters
        trials = [int(v) for v in _option_values(argv, "--trials") if v.isdigit()]
        if trials and max(trials) > MAX_TRIALS:
            return _replace_option(argv, "--trials", str(MAX_TRIALS)), [f"--trials {MAX_TRIALS}"]
        return argv, []
    if positionals and positionals[0] == "synthesize":  # plans each example set exactly
        batches = [int(v) for v in _option_values(argv, "--batches") if v.isdigit()]
        if batches and max(batches) > MAX_BATCHES:
            return _replace_option(argv, "--batches", str(MAX_BATCHES)), [
                f"--batches {MAX_BATCHES}"
            ]
        return argv, []
    if positionals and positionals[0] == "gpu-frag":  # replays the trace per policy and seed
        return _shrink_options(list(argv), [], "gpu-frag")
    if len(positionals) < 2 or positionals[0] not in SCENARIO_COMMANDS:
        return argv, []
    command, scenario = positionals[0], positionals[1]
    out, notes = _shrink_stop(argv, scenario)
    trials = _scenario_trials(scenario)
    if trials is not None and trials > MAX_TRIALS:
        out += ["--set", f"scheduler.provisioner.params.trials={MAX_TRIALS}"]
        notes.append(f"scheduler.provisioner.params.trials={MAX_TRIALS}")

    return _shrink_options(out, notes, command)


def _shrink_tuning(argv: list[str], command: str) -> tuple[list[str], list[str]]:
    out, notes = list(argv), []
    if command == "train-rl":
        for option, value in (
            ("--steps", str(MAX_RL_STEPS)),
            ("--net-arch", "32,32"),
            ("--domain", "tiny"),
            ("--envs", "1"),  # no worker processes to start
        ):
            out = _replace_option(out, option, value) if option in out else out + [option, value]
            notes.append(f"{option} {value}")
        return out, notes
    budgets = [int(v) for v in _option_values(out, "--budget") if v.isdigit()]
    if budgets and max(budgets) > MAX_BUDGET:
        out = _replace_option(out, "--budget", str(MAX_BUDGET))
        notes.append(f"--budget {MAX_BUDGET}")
    test_seeds = [int(v) for v in _option_values(out, "--test-seeds") if v.isdigit()]
    if not test_seeds or max(test_seeds) > MAX_SEEDS:  # the out-of-sample judging
        out = (
            _replace_option(out, "--test-seeds", str(MAX_SEEDS))
            if test_seeds
            else out + ["--test-seeds", str(MAX_SEEDS)]
        )
        notes.append(f"--test-seeds {MAX_SEEDS}")
    scenarios = _option_values(argv, "--scenario")
    if scenarios:
        shorter, more = _shrink_stop(out, scenarios[0])
        return shorter, notes + more
    experiments = [int(v) for v in _option_values(out, "--experiments") if v.isdigit()]
    if not experiments or max(experiments) > MAX_EXPERIMENTS:
        out = (
            _replace_option(out, "--experiments", str(MAX_EXPERIMENTS))
            if experiments
            else out + ["--experiments", str(MAX_EXPERIMENTS)]
        )
        notes.append(f"--experiments {MAX_EXPERIMENTS}")
    return out, notes


def _shrink_stop(argv: list[str], scenario: str) -> tuple[list[str], list[str]]:
    out, notes = list(argv), []
    stop = {k: v for k, v in _scenario_stop(scenario).items()}
    for override in _option_values(argv, "--set"):
        key, _, value = override.partition("=")
        if key.startswith("stop.") and _number(value) is not None:
            stop[key.removeprefix("stop.")] = _number(value)
    for length, warmup, small in (
        ("jobs", "warmup_jobs", SMALL_JOBS),
        ("time_s", "warmup_s", SMALL_TIME_S),
    ):
        total = stop.get(length)
        if isinstance(total, int | float) and total > small:
            factor = small / total
            scaled = {length: small}
            if isinstance(stop.get(warmup), int | float):
                scaled[warmup] = stop[warmup] * factor
            for key, value in scaled.items():
                text = str(int(value)) if length == "jobs" else f"{value:g}"
                out += ["--set", f"stop.{key}={text}"]
                notes.append(f"stop.{key}={text}")
            if length == "time_s":  # the timeline shrinks with the run (none past the stop)
                out, notes = _shrink_events(out, notes, scenario, factor)
    return out, notes


def _shrink_events(
    out: list[str], notes: list[str], scenario: str, factor: float
) -> tuple[list[str], list[str]]:
    events = _scenario(scenario).get("events")
    given = [o.partition("=")[0] for o in _option_values(out, "--set")]
    if not isinstance(events, list) or "events" in given:  # the command sets its own
        return out, notes
    for i, event in enumerate(events):
        at = event.get("at_s") if isinstance(event, dict) else None
        if isinstance(at, int | float):
            out += ["--set", f"events.{i}.at_s={at * factor:g}"]
    notes.append(f"events' at_s x {factor:g}")
    return out, notes


def _shrink_options(out: list[str], notes: list[str], command: str) -> tuple[list[str], list[str]]:
    for option, limit in (("--replications", MAX_REPLICATIONS),):
        for value in _option_values(out, option):
            if value.isdigit() and int(value) > limit:
                out = _replace_option(out, option, str(limit))
                notes.append(f"{option} {limit}")
    for value in _option_values(out, "--seeds"):
        first, dash, last = value.partition("-")
        if dash and first.isdigit() and last.isdigit() and int(last) - int(first) >= MAX_SEEDS:
            small_seeds = f"{first}-{int(first) + MAX_SEEDS - 1}"
            out = _replace_option(out, "--seeds", small_seeds)
            notes.append(f"--seeds {small_seeds}")
    for value in _option_values(out, "--realtime"):
        factor = _number(value)
        if factor and factor > 0:
            out = _replace_option(out, "--realtime", f"{factor * REALTIME_SPEEDUP:g}")
            notes.append(f"--realtime {factor * REALTIME_SPEEDUP:g}")
    if command == "learn":
        iterations = [int(v) for v in _option_values(out, "--iterations") if v.isdigit()]
        if not iterations:
            out += ["--iterations", str(MAX_ITERATIONS)]
        elif max(iterations) > MAX_ITERATIONS:
            out = _replace_option(out, "--iterations", str(MAX_ITERATIONS))
        notes.append(f"--iterations {MAX_ITERATIONS}")
    return out, notes


def main(argv: list[str] | None = None) -> int:
    from clusteremu.cli import main as clusteremu_main

    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(SMALL_ENV) == "1":
        args, notes = shrink(args)
        if notes:
            print(f"[{SMALL_ENV}] {', '.join(notes)}", file=sys.stderr)
    return clusteremu_main(args)


if __name__ == "__main__":
    # Run as a script, this file's folder (tests/) heads sys.path, and Ray hands the
    # driver's sys.path to its workers: there `import cluster` would find the test package
    # tests/cluster. Drop it; the repository root goes first.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    sys.exit(main())
