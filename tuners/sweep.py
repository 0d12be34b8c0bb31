"""Parameter sweeps on Ray: a grid of scenario overrides x seeds x policies, one kernel
run per cell, one Parquet row per run, resumable.

Layout of a sweep folder::

    DIR/sweep.json                    what the sweep is (scenario, its hash, grid, seeds, policies)
    DIR/runs/cell-000012-<key>.parquet one row: the cell's parameters and its run's summary

Every row is written atomically by the driver when its run returns (`clusteremu.cluster.io`), named
by the cell's index and a hash of its parameters, so the folder is always a valid Parquet
dataset of finished runs. Re-running the same command after an interruption (Ctrl-C, a
killed worker, a killed driver) runs only the cells without a file. The runs are
independent kernel runs seeded by the cell's seed, so the content is identical whatever
the number of workers (common random numbers, DESIGN.md "Kernel").

A sweep is identified by its scenario's content (sha256), overrides, grid, seeds and
policies: `./x.yaml`, `/abs/x.yaml` and, for a shipped scenario, its name (`mm-c`) name the
same sweep. Every argument, every cell's scenario and every policy variant is checked by
`plan_sweep` (and the folder by `check_folder`) before Ray starts. A cell file that cannot
be read (cut short by a crash or a full disk) is not counted as done: it is removed and the
cell runs again.

Runs are fanned out to a pool of worker actors (`clusteremu/sweep-<name>/worker-<i>`),
each executing one cell at a time as a Ray actor task; a worker that dies takes only its
current cell with it (reported as missing; the next invocation runs it).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import ray

from clusteremu.cluster import readback
from clusteremu.cluster.io import write_json, write_parquet
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.points import PairError
from clusteremu.cluster.runner import run_spec, with_policies
from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import ScenarioError, shorten
from clusteremu.scenarios.loader import canonical_name, check_policies, load_scenario, resolve_path

log = logging.getLogger(__name__)

MANIFEST = "sweep.json"
RUNS = "runs"
#: Largest cell file and manifest read back (bytes): a cell is one row.
MAX_CELL_BYTES = 64 * 2**20
MAX_MANIFEST_BYTES = 64 * 2**20
_CELL_FILE = re.compile(r"^cell-(\d{6})-([0-9a-f]{12})\.parquet$")


class SweepError(ValueError):
    """A sweep option is malformed, or DIR holds a different sweep."""


@dataclass(frozen=True)
class GridAxis:
    """One `--grid path=v1,v2,...`: a scenario field path and the values it takes."""

    path: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Cell:
    """One run of the sweep: overrides (`path=value`), a seed and a policy variant."""

    index: int
    values: tuple[tuple[str, str], ...]
    seed: int
    policy: str

    @property
    def key(self) -> str:
        text = json.dumps([self.values, self.seed, self.policy], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def filename(self) -> str:
        return f"cell-{self.index:06d}-{self.key}.parquet"


@dataclass(frozen=True)
class SweepPlan:
    """Everything that identifies a sweep; `cells` in a fixed order."""

    scenario: str
    scenario_sha256: str
    base_overrides: tuple[str, ...]
    axes: tuple[GridAxis, ...]
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    cells: tuple[Cell, ...] = field(repr=False)

    def manifest(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "scenario_sha256": self.scenario_sha256,
            "overrides": list(self.base_overrides),
            "grid": [{"path": a.path, "values": list(a.values)} for a in self.axes],
            "seeds": list(self.seeds),
            "policies": list(self.policies),
            "cells": len(self.cells),
        }

    def spec(self, cell: Cell) -> SimulationSpec:
        """The scenario of one cell (validated by the loader)."""
        overrides = [
            *self.base_overrides,
            *(f"{p}={v}" for p, v in cell.values),
            f"seed={cell.seed}",
        ]
        spec = load_scenario(self.scenario, overrides)
        if cell.policy:
            spec = with_policies(spec, **_policy_kinds(cell.policy))
        return spec


def parse_grid(text: str) -> GridAxis:
    """`workload.classes.0.arrival.rate_per_s=6,7,8` -> GridAxis (checked as every command
    checks a grid axis: `clusteremu.scenarios.option_checks.grid`)."""
    from clusteremu.scenarios.option_checks import OptionError, grid

    try:
        path, values = grid(text, "--grid")
    except OptionError as exc:
        raise SweepError(str(exc)) from None
    return GridAxis(path, values)


def parse_seeds(text: str) -> tuple[int, ...]:
    """`1-20`, `3`, or `1,4,9` -> seeds (a range includes both ends), checked as every
    command checks a seed list (`clusteremu.scenarios.option_checks.seeds`: no empty item, no seed
    twice, non-negative, the count checked against memory before a range is expanded)."""
    from clusteremu.scenarios.option_checks import OptionError, seeds

    try:
        return seeds(text, "--seeds", limits.BYTES_PER_CELL, "seeds")
    except OptionError as exc:
        raise SweepError(str(exc)) from None


def _policy_kinds(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        kind, _, name = part.partition("=")
        out[kind.strip()] = name.strip()
    return out


def plan_sweep(
    scenario: str,
    axes: Sequence[GridAxis],
    seeds: Sequence[int] | None = None,
    policies: Sequence[str] = (),
    overrides: Sequence[str] = (),
) -> SweepPlan:
    """The cells of a sweep, each validated by the scenario loader before anything runs.

    Order: grid values (first axis slowest), then policies, then seeds.
    """
    paths = [a.path for a in axes]
    if len(set(paths)) != len(paths):
        raise SweepError(f"--grid: a path appears twice in {paths}")
    from clusteremu.scenarios.option_checks import OptionError, grid_points

    try:
        grid_points([len(a.values) for a in axes], "--grid")
    except OptionError as exc:
        raise SweepError(str(exc)) from None
    seed_count = len(seeds) if seeds else 1
    count = math.prod(len(a.values) for a in axes) * max(len(policies), 1) * seed_count
    refusal = limits.count_refusal(count, limits.BYTES_PER_CELL, "cells")
    if refusal is not None:
        raise SweepError(f"the sweep has {count:,} cells (grid x policies x seeds): {refusal}")
    path = resolve_path(scenario)
    base = load_scenario(scenario, list(overrides))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    seed_list = tuple(seeds) if seeds else (base.seed,)
    policy_list = tuple(policies) if policies else ("",)
    for policy in policy_list:
        if policy:
            check_policy_variant(base, policy)
    cells: list[Cell] = []
    combos = itertools.product(*(a.values for a in axes)) if axes else [()]
    for combo in combos:
        for policy in policy_list:
            for seed in seed_list:
                values = tuple(zip(paths, combo, strict=True))
                cells.append(Cell(len(cells), values, seed, policy))
    plan = SweepPlan(
        canonical_name(scenario),
        sha,
        tuple(overrides),
        tuple(axes),
        seed_list,
        policy_list,
        tuple(cells),
    )
    seen: set[tuple[tuple[str, str], ...]] = set()
    for cell in cells:  # validate every distinct override combination once
        if cell.values not in seen:
            seen.add(cell.values)
            plan.spec(cell)
    return plan


def check_policy_variant(spec: SimulationSpec, policy: str) -> None:
    """Build and set up a `--policy` variant's policies on `spec` (SweepError if they fail),
    so that a bad parameter is reported before Ray starts, not by a worker."""
    try:
        check_policies(with_policies(spec, **_policy_kinds(policy)), spec.name)
    except PairError as exc:  # a scaler that is not the placer's pair
        raise SweepError(f"--policy {shorten(policy)}: {exc}") from None
    except ScenarioError as exc:
        problems = "; ".join(f"{f}: {e}" if f else e for f, e in exc.problems)
        raise SweepError(f"--policy {shorten(policy)}: {problems}") from None


def flatten_summary(summary: dict[str, Any]) -> dict[str, float]:
    """Numeric summary entries as `key` / `per_class.<class>.<key>` floats (no CIs)."""
    out: dict[str, float] = {}

    def walk(prefix: str, data: dict[str, Any]) -> None:
        for key, value in data.items():
            if key in ("ci95", "ray"):
                continue
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(f"{name}.", value)
            elif isinstance(value, int | float):  # bool included
                out[name] = float(value)

    walk("", summary)
    return out


def cell_row(plan: SweepPlan, cell: Cell, summary: dict[str, Any]) -> pa.Table:
    """The one-row table stored for a finished cell: the cell's parameters (`seed` an
    integer), then its summary's numbers (floats; the summary's own `seed`, the same
    number, does not replace the cell's)."""
    row: dict[str, Any] = {
        "cell": cell.index,
        "key": cell.key,
        "seed": cell.seed,
        "policy": cell.policy,
    }
    for path, value in cell.values:
        row[f"grid.{path}"] = value
    row.update({k: v for k, v in flatten_summary(summary).items() if k not in row})
    return pa.table({k: [v] for k, v in row.items()})


def run_cell(spec: SimulationSpec) -> dict[str, Any]:
    """One kernel run (all its replications); the combined summary."""
    return run_spec(spec).summary


class SweepWorker:
    """A sweep worker actor: runs kernel runs, one at a time."""

    def run(self, spec: SimulationSpec) -> dict[str, Any]:
        return run_cell(spec)


@dataclass
class SweepOutcome:
    """How a sweep invocation ended: cells in all, already done, run now, still missing."""

    total: int
    skipped: int
    ran: int
    missing: list[int]
    wall_s: float

    @property
    def complete(self) -> bool:
        return not self.missing


def _read_cell(path: Path, index: int, key: str) -> pa.Table | None:
    """A cell file read back: a regular, readable one-row Parquet file whose `cell` and
    `key` are this cell's (None otherwise: cut short, damaged, or another file)."""
    try:
        table = readback.read_parquet(path, "a sweep cell", MAX_CELL_BYTES)
    except readback.ReadBackError:
        return None
    if table.num_rows != 1 or not {"cell", "key", "seed", "policy"} <= set(table.column_names):
        return None
    if table["cell"].to_pylist() != [index] or table["key"].to_pylist() != [key]:
        return None
    return table


def _readable_cell(path: Path, index: int, key: str) -> bool:
    """Whether a cell file is this cell's whole one-row result (`_read_cell`)."""
    return _read_cell(path, index, key) is not None


def done_cells(out: Path, plan: SweepPlan) -> set[int]:
    """Indices of cells with a readable result file whose key matches the plan.

    A matching file that cannot be read (cut short) is removed: its cell runs again.
    """
    done: set[int] = set()
    runs = out / RUNS
    if not runs.is_dir():
        return done
    for path in runs.iterdir():
        m = _CELL_FILE.match(path.name)
        if m:
            index = int(m.group(1))
            if index < len(plan.cells) and plan.cells[index].key == m.group(2):
                if _readable_cell(path, index, m.group(2)):
                    done.add(index)
                else:
                    log.warning(
                        "%s cannot be read (cut short?) or is not this cell's; the cell runs again",
                        path,
                    )
                    with suppress(OSError):
                        path.unlink()
    return done


def _same_sweep(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two manifests describe one sweep: the scenario by its content (any path or
    name to it), and the same overrides, grid, seeds and policies."""
    rest = [k for k in new if k != "scenario"]
    if any(old.get(k) != new[k] for k in rest) or set(old) != set(new):
        return False
    return bool(new["scenario_sha256"]) or old.get("scenario") == new["scenario"]


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The sweep manifest in `out`, None when there is none; SweepError when unreadable."""
    path = out / MANIFEST
    if not path.exists():
        return None
    try:
        data = readback.load_json(path, "a sweep manifest", limit=MAX_MANIFEST_BYTES)
    except readback.ReadBackError as exc:
        raise SweepError(
            f"{exc}: it says which sweep the folder holds; restore it, delete it "
            "(and the folder's runs/) to start over, or use another --out"
        ) from None
    if not isinstance(data, dict):
        raise SweepError(f"{path} is not a sweep manifest; use another --out")
    return data


def check_folder(out: Path, plan: SweepPlan) -> None:
    """Refuse a folder holding a different sweep (or an unreadable manifest); write nothing."""
    old = read_manifest(out)
    if old is not None and not _same_sweep(old, plan.manifest()):
        raise SweepError(
            f"{out} holds a different sweep ({out / MANIFEST}); use another --out or "
            "the same scenario, grid, seeds and policies to resume it"
        )


def check_manifest(out: Path, plan: SweepPlan) -> None:
    """Refuse to mix two different sweeps in one folder; write the manifest if new."""
    check_folder(out, plan)
    if not (out / MANIFEST).exists():
        write_json(plan.manifest(), out / MANIFEST)


def run_sweep(
    plan: SweepPlan,
    out: str | Path,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    name: str | None = None,
    metrics: bool = True,
) -> SweepOutcome:
    """Run the cells of `plan` without a result file in `out` on `workers` worker actors.

    Ray must be initialised. `progress(done, total)` is called after every finished cell.
    """
    from clusteremu.actors.metrics import SweepMetrics  # the Ray layer's gauges

    out = Path(out)
    check_manifest(out, plan)
    start = time.monotonic()
    done = done_cells(out, plan)
    todo = [c for c in plan.cells if c.index not in done]
    total = len(plan.cells)
    gauge = SweepMetrics(name or out.name, total) if metrics else None
    if gauge is not None:
        gauge.update(len(done))
    if progress is not None:
        progress(len(done), total)
    outcome = SweepOutcome(total, len(done), 0, [], 0.0)
    if not todo:
        outcome.wall_s = time.monotonic() - start
        return outcome
    label = re.sub(r"[^A-Za-z0-9_.-]", "-", name or out.name)
    actor: Any = ray.remote(num_cpus=1, max_restarts=0)(SweepWorker)
    pool: list[Any] = [
        actor.options(name=f"clusteremu/sweep-{label}/worker-{i}").remote()
        for i in range(max(1, min(workers, len(todo))))
    ]
    idle = list(range(len(pool)))
    running: dict[Any, tuple[int, Cell]] = {}
    queue = list(reversed(todo))
    dead: set[int] = set()
    try:
        while queue or running:
            while queue and idle:
                w = idle.pop()
                cell = queue.pop()
                running[pool[w].run.remote(plan.spec(cell))] = (w, cell)
            if not running:
                break  # every worker died: the rest stays missing
            ready, _ = ray.wait(list(running), num_returns=1)
            w, cell = running.pop(ready[0])
            try:
                summary = ray.get(ready[0])
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
                log.warning(
                    "sweep worker %d died running cell %d (%s); the cell stays missing",
                    w,
                    cell.index,
                    type(exc).__name__,
                )
                outcome.missing.append(cell.index)
                dead.add(w)
                continue
            write_parquet(cell_row(plan, cell, summary), out / RUNS / cell.filename)
            done.add(cell.index)
            outcome.ran += 1
            idle.append(w)
            if gauge is not None:
                gauge.update(len(done))
            if progress is not None:
                progress(len(done), total)
        outcome.missing.extend(c.index for c in reversed(queue))
    finally:
        # Interrupted (Ctrl-C, SIGTERM) or done: stop the workers. Actor tasks cannot be
        # force-cancelled; killing the actor ends its running task.
        for ref in running:
            with suppress(Exception):
                ray.cancel(ref)
        for i, handle in enumerate(pool):
            if i not in dead:
                with suppress(Exception):
                    ray.kill(handle)
    outcome.missing.sort()
    outcome.wall_s = time.monotonic() - start
    return outcome


def _integer_seed(table: pa.Table) -> pa.Table:
    """A cell row with its `seed` as an integer: rows written before the cell's seed won
    over the summary's stored it as a float (a folder resumed across versions mixes both)."""
    i = table.schema.get_field_index("seed")
    if pa.types.is_floating(table.schema.field(i).type):
        table = table.set_column(i, "seed", table["seed"].cast(pa.int64()))
    return table


def read_results(out: str | Path) -> pa.Table:
    """Every finished row of a sweep folder, sorted by cell index."""
    runs = Path(out) / RUNS
    files = sorted(p for p in runs.glob("cell-*.parquet") if _CELL_FILE.match(p.name))
    tables = []
    for p in files:
        m = _CELL_FILE.match(p.name)
        table = None if m is None else _read_cell(p, int(m.group(1)), m.group(2))
        if table is None:
            log.warning("%s cannot be read (cut short?) or is not a sweep cell; skipped", p)
        else:
            tables.append(_integer_seed(table))
    if not tables:
        return pa.table({})
    table = pa.concat_tables(tables, promote_options="default")
    return table.sort_by("cell")


def summary_table(table: pa.Table, metrics: str | Sequence[str] = ("mean_response_time_s",)) -> str:
    """One line per grid point and policy: each metric's mean over seeds with its 95% CI
    (n/a with one seed, or for a metric no cell reported), then the number of seeds."""
    from clusteremu.cluster.metrics import ci95_half_width

    chosen = [metrics] if isinstance(metrics, str) else list(metrics)
    if table.num_rows == 0:
        return ""
    keys = [c for c in table.column_names if c.startswith("grid.")] + ["policy"]
    columns = {k: table[k].to_pylist() for k in keys}
    nan = float("nan")
    values = {
        m: [nan if v is None else float(v) for v in table[m].to_pylist()]
        if m in table.column_names
        else [nan] * table.num_rows
        for m in chosen
    }
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in range(table.num_rows):
        groups.setdefault(tuple(columns[k][i] for k in keys), []).append(i)
    header = [k.removeprefix("grid.") for k in keys]
    for m in chosen:
        header += [m, "ci95"]
    header.append("seeds")
    rows = []
    for group, members in groups.items():
        row = [str(v) for v in group]
        for m in chosen:
            got = [values[m][i] for i in members if values[m][i] == values[m][i]]
            ci = ci95_half_width(got)
            row += [
                f"{sum(got) / len(got):.6g}" if got else "n/a",
                "n/a" if ci != ci else f"{ci:.3g}",  # one seed: no interval
            ]
        row.append(str(len(members)))
        rows.append(row)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
    )
