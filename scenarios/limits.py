"""Will a run fit in memory? An estimate from the scenario, before anything is built.

A scenario names sizes (nodes, jobs, replications, a run length, an MDP truncation) that
the engine turns into arrays; a size the machine cannot hold used to surface as a
`MemoryError` (or a long swap) after seconds or minutes of work. `scenario_needs` estimates
the bytes each size costs from the validated model alone, and `check_scenario` refuses a
scenario whose estimate exceeds `memory_budget_bytes()` with one `ScenarioError` naming the
field that drives it, the estimate and the budget.

The per-item costs are measured (mm-c, one replication: about 210 bytes per job at peak,
the per-job table about 150 bytes per job and replication) and rounded up: the estimate is
an order of magnitude, meant to refuse the impossible, not to predict the peak.

A run that streams its results (`clusteremu run` in one process, `streamed=True`:
`clusteremu.cluster.runner`) holds only the live jobs' rows, not every job's: where the
scenario allows it (`stream_blockers`; its policies are the command's to check, since they
must be built), its estimate counts those rows (`STREAM_*`), and a scenario that only a
streamed run can hold raises `MemoryNeedError` for any other run.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusteremu.scenarios import schema
from clusteremu.scenarios.errors import ScenarioError

#: Bytes one job costs while its replication runs (engine arrays, per-job table, merge).
BYTES_PER_JOB_RUN = 256
#: Bytes one job's row costs in the per-job table kept for every replication until written.
BYTES_PER_JOB_KEPT = 160
#: Bytes one node costs (its name, its rows in the engine's node arrays).
BYTES_PER_NODE = 400
#: Bytes one replication costs besides its jobs (its summary).
BYTES_PER_REPLICATION = 4096
#: Bytes one sweep cell costs in the driver (its plan entry and its row).
BYTES_PER_CELL = 1024
#: Bytes one learning epoch costs (its row of estimates).
BYTES_PER_EPOCH = 512
#: Bytes one row of a trace file costs once read (the file's bytes times this factor).
TRACE_BYTES_FACTOR = 4
#: Bytes one node a timeline `join` adds costs per job of the replication (measured: a
#: node joined at run time costs the engine about 4.5 bytes per job, 20,000 joined nodes
#: over 6,400 jobs take 0.58 GB more than 20,000 static ones; rounded up).
BYTES_PER_JOINED_NODE_JOB = 8
#: The share of the machine's memory (or of the process's cgroup limit) a run may plan for.
MEMORY_FRACTION = 0.8
#: A streamed run's job rows (`clusteremu.cluster.runner`; a test checks they agree): jobs
#: that leave between two compactions, ...
STREAM_COMPACT_EVERY = 1 << 19
#: ... the rows kept before the run streams (`engine.sinks.KEEP_ROWS`, also the per-job
#: table's rows held before it goes to its file), ...
STREAM_KEEP_ROWS = 1 << 20
#: ... and the arrivals drawn at once (`job_chunks.CHUNK_JOBS`; the next chunk is drawn as
#: the last one's first job arrives).
STREAM_CHUNK_JOBS = 1 << 18
#: Response times a streamed run holds per class before they go to a temporary file
#: (`engine.sinks.MEMORY_VALUES`; twice: every job's, and its class's), 8 bytes each.
STREAM_MEMORY_VALUES = 1 << 22
#: Bytes of temporary disk a streamed run's job costs: its response time, kept for the
#: percentiles (`clusteremu.cluster.order_stats`; twice with several classes).
STREAM_DISK_PER_JOB = 8
#: The share of the temporary folder's free space a streamed run may plan for.
DISK_FRACTION = 0.8


@dataclass(frozen=True)
class Need:
    """Bytes a run needs for one reason: the field that drives them and how they add up."""

    field: str
    bytes: float
    detail: str


class MemoryNeedError(ScenarioError):
    """A run of the scenario cannot fit in memory (`check_scenario`): one problem, the
    field that drives the estimate and what it needs."""


def machine_memory_bytes() -> int:
    """Physical memory, or the cgroup memory limit of this process when that is lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        total = 8 * 2**30
    for limit_file in (
        Path("/sys/fs/cgroup/memory.max"),
        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    ):
        try:
            text = limit_file.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return int(total)


def temp_disk_bytes() -> int:
    """Free space of the folder temporary files go to (`tempfile.gettempdir()`)."""
    try:
        return int(shutil.disk_usage(tempfile.gettempdir()).free)
    except OSError:
        return 0


def memory_budget_bytes() -> int:
    """The most memory a run may plan for: `MEMORY_FRACTION` of `machine_memory_bytes()`."""
    return int(MEMORY_FRACTION * machine_memory_bytes())


def format_bytes(count: float) -> str:
    """`3.2e9` -> '3.2 GB' (powers of 1000; 'more than 1e30 bytes' beyond any unit)."""
    if not math.isfinite(count) or count >= 1e30:
        return "more than 1e30 bytes"
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count:.0f} bytes"


def _count(value: float) -> str:
    if not math.isfinite(value):
        return "unboundedly many"
    return f"{value:,.0f}" if value < 1e15 else f"{value:.3g}"


def _mean_s(dist: Any) -> float:
    """The mean of a schema distribution (0 for an all-zero empirical one)."""
    if isinstance(dist, schema.ExponentialDist):
        return dist.mean_s
    if isinstance(dist, schema.HyperExponentialDist):
        return sum(p * m for p, m in zip(dist.probabilities, dist.means_s, strict=True))
    if isinstance(dist, schema.DeterministicDist):
        return dist.value_s
    if isinstance(dist, schema.EmpiricalDist):
        return sum(dist.values_s) / len(dist.values_s)
    if isinstance(dist, schema.LognormalDist):
        if math.isfinite(dist.max_s):
            return dist.min_s  # truncated: at least min_s (a lower bound keeps the count high)
        exponent = dist.mu + dist.sigma**2 / 2.0
        return math.exp(exponent) if exponent < 700 else math.inf
    return math.nan


def _node_cores(model: schema.ScenarioModel) -> float:
    cpu = {t.name: t.cpu for t in model.cluster.node_types}
    return float(sum(cpu.get(g.type, 0.0) * g.count for g in model.cluster.nodes))


def _class_jobs(model: schema.ScenarioModel, i: int, horizon_s: float) -> tuple[float, str]:
    """Jobs class `i` brings by `horizon_s`, and the field that sets the count (a timeline
    `set_rate` of the class bounds it by its rate over the whole horizon)."""
    jobs, field = _class_jobs_before_rates(model, i, horizon_s)
    name = model.workload.classes[i].name
    total = jobs
    for e, ev in enumerate(model.events):
        if ev.set_rate is not None and ev.set_rate.class_ == name:
            extra = ev.set_rate.rate_per_s * horizon_s
            total += extra
            if extra > jobs:
                jobs, field = extra, f"events.{e}.set_rate.rate_per_s"
    return total, field


def _class_jobs_before_rates(
    model: schema.ScenarioModel, i: int, horizon_s: float
) -> tuple[float, str]:
    jc = model.workload.classes[i]
    a = jc.arrival
    where = f"workload.classes.{i}.arrival"
    if isinstance(a, schema.BatchArrival):
        return (float(a.count) if a.at_s <= horizon_s else 0.0), f"{where}.count"
    if isinstance(a, schema.PoissonArrival):
        if a.rate_per_s is not None:
            return a.rate_per_s * horizon_s, f"{where}.rate_per_s"
        pools = {p.name: p.cores for p in model.cluster.pools}
        if jc.pool is not None:
            cores = pools.get(jc.pool, 0.0)
        elif len(pools) == 1 and not model.cluster.nodes:
            cores = next(iter(pools.values()))
        else:
            cores = _node_cores(model)
        return (a.rate_per_s_per_core or 0.0) * cores * horizon_s, f"{where}.rate_per_s_per_core"
    if isinstance(a, schema.RenewalArrival):
        mean = _mean_s(a.interarrival)
        jobs = math.inf if mean <= 0.0 else horizon_s / mean
        return jobs, f"{where}.interarrival"
    return 0.0, f"{where}.path"  # a trace: its file size is checked when it is read


def _jobs_per_replication(model: schema.ScenarioModel) -> tuple[float, str, str]:
    """Jobs one replication draws, the field that drives the count, and how it adds up."""
    stop = model.stop
    if stop.jobs is not None:
        return float(stop.jobs), "stop.jobs", f"{_count(stop.jobs)} jobs per replication"
    horizon = float(stop.time_s or 0.0)
    per_class = [_class_jobs(model, i, horizon) for i in range(len(model.workload.classes))]
    total = (
        math.fsum(n for n, _ in per_class)
        if all(math.isfinite(n) for n, _ in per_class)
        else math.inf
    )
    biggest, field = max(per_class, key=lambda item: item[0])
    if field.endswith(".count"):
        detail = f"{_count(total)} jobs per replication, {_count(biggest)} of them from {field}"
    else:
        detail = (
            f"{_count(total)} jobs per replication by stop.time_s = {horizon:g} s, "
            f"most of them from {field}"
        )
        field = "stop.time_s"
    return total, field, detail


def _mdp_need(model: schema.ScenarioModel) -> Need | None:
    """The MDP allocator's tables: (B + 1)^m states for truncation B and m classes."""
    ref = model.scheduler.allocator
    if ref.name != "mdp":
        return None
    params = ref.params
    truncation, actions = params.get("truncation", 20), params.get("actions", 100)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (truncation, actions)):
        return None  # the policy itself reports a malformed parameter
    classes = params.get("classes")
    m = len(classes) if isinstance(classes, list) else len(model.workload.classes)
    m = max(m, 2)
    states = float(max(truncation, 1) + 1) ** m
    state_bytes = states * (48 + 40 * m)  # values, shares, neighbours, the sparse chain
    share_vectors = math.comb(max(actions, 1) + m - 1, m - 1)
    action_bytes = float(share_vectors) * m * 8
    where = "scheduler.allocator.params"
    if action_bytes > state_bytes:
        detail = f"{share_vectors:.3g} share vectors of {m} classes for actions = {actions}"
        return Need(f"{where}.actions", state_bytes + action_bytes, detail)
    detail = f"{states:.3g} states ((truncation + 1)^{m} with truncation = {truncation})"
    return Need(f"{where}.truncation", state_bytes + action_bytes, detail)


def stream_blockers(model: schema.ScenarioModel) -> str | None:
    """Why a run of `model` cannot stream its results, as far as the scenario says (None:
    it can, if its policies are compiled: `clusteremu.cluster.engine.streaming`): metrics
    that need the whole per-job table at once."""
    classes = model.workload.classes
    reasons = []
    if model.slo is not None:
        reasons.append("an SLO (`slo:`)")
    if any(
        c.containers or c.data_in_mb or c.data_out_mb or c.model_mb or c.data_items for c in classes
    ):
        reasons.append("a world model")
    if model.metrics.score is not None:
        reasons.append("a score metric (`metrics.score`)")
    if model.workload.usage is not None or any(c.usage is not None for c in classes):
        reasons.append("a usage model")
    if not reasons:
        return None
    return "streamed results cannot give the metrics of " + ", ".join(reasons)


#: Distributions drawn a chunk at a time (`clusteremu.cluster.job_chunks.CHUNKABLE`).
_CHUNKABLE = (schema.ExponentialDist, schema.DeterministicDist)


def drawn_as_it_goes(model: schema.ScenarioModel) -> bool:
    """Whether a streamed run draws the jobs a chunk at a time (`job_chunks.drawn_chunks`:
    one class of Poisson or renewal arrivals with exponential or fixed gaps and sizes)
    rather than all before the run."""
    classes = model.workload.classes
    if len(classes) != 1 or model.workload.usage is not None:
        return False
    c = classes[0]
    if c.usage is not None or c.runtime_by_node_type or not isinstance(c.size, _CHUNKABLE):
        return False
    a = c.arrival
    if isinstance(a, schema.RenewalArrival):
        return isinstance(a.interarrival, _CHUNKABLE)
    return isinstance(a, schema.PoissonArrival)


def _cores(model: schema.ScenarioModel) -> float:
    """Cores of the nodes (static, generated and joined) and pools: about the most jobs
    in service at once."""
    cpu = {t.name: t.cpu for t in model.cluster.node_types}
    joined = sum(cpu.get(ev.join.type, 1.0) * ev.join.count for ev in model.events if ev.join)
    generator = model.cluster.generator  # its devices have 4 to 64 cores; most have few
    generated = 8.0 * generator.nodes if generator is not None else 0.0
    pools = sum(p.cores for p in model.cluster.pools)
    return _node_cores(model) + joined + generated + pools


def _streamed_job_needs(
    model: schema.ScenarioModel, jobs: float, job_field: str, reps: int
) -> list[Need]:
    """What the jobs cost a run that streams its results: the live jobs' rows, the rows
    kept before it streams, the response times held; every job's where the jobs are
    drawn before the run."""
    kept = min(jobs, STREAM_KEEP_ROWS)
    if drawn_as_it_goes(model):
        held = STREAM_COMPACT_EVERY + 2 * STREAM_CHUNK_JOBS + _cores(model)
        rows = min(jobs, held)
        detail = (
            f"a run that streams its results holds about {_count(rows)} jobs' rows at once "
            f"(those in service, those that left since the last compaction, arrivals drawn "
            f"ahead) and {_count(kept)} kept before it streams"
        )
    else:
        rows = jobs
        detail = (
            f"{_count(jobs)} jobs drawn before the run; they are drawn as it goes only for "
            "one class of exponential or fixed gaps and sizes"
        )
    values = 2 * len(model.workload.classes) * min(jobs, STREAM_MEMORY_VALUES) * 8
    table = min(jobs * reps, STREAM_KEEP_ROWS)
    return [
        Need(job_field, (rows + kept) * BYTES_PER_JOB_RUN + values, detail),
        Need(
            "replications" if reps > 1 else job_field,
            table * BYTES_PER_JOB_KEPT + reps * BYTES_PER_REPLICATION,
            f"{_count(reps)} replication(s), at most {_count(table)} rows of the per-job "
            "table held before it goes to its file",
        ),
    ]


def scenario_needs(
    model: schema.ScenarioModel, replications: int | None = None, streamed: bool = False
) -> list[Need]:
    """The memory a run of the validated `model` needs, one entry per reason (with
    `replications`, as if the scenario had that many; `streamed`: a run that streams its
    results, whether or not the scenario allows it: `stream_blockers`)."""
    jobs, job_field, job_detail = _jobs_per_replication(model)
    reps = model.replications if replications is None else replications
    generator = model.cluster.generator
    nodes = float(sum(g.count for g in model.cluster.nodes))
    node_field = "cluster.nodes"
    if generator is not None and generator.nodes >= nodes:
        node_field = "cluster.generator.nodes"
    elif model.cluster.nodes:
        biggest = max(range(len(model.cluster.nodes)), key=lambda i: model.cluster.nodes[i].count)
        node_field = f"cluster.nodes.{biggest}.count"
    nodes += generator.nodes if generator is not None else 0
    joins = [(e, ev.join.count) for e, ev in enumerate(model.events) if ev.join is not None]
    if joins:
        biggest_join = max(joins, key=lambda item: item[1])
        if biggest_join[1] > nodes:
            node_field = f"events.{biggest_join[0]}.join.count"
        nodes += sum(count for _, count in joins)
    joined = float(sum(count for _, count in joins))
    if streamed:
        needs = _streamed_job_needs(model, jobs, job_field, reps)
    else:
        needs = [
            Need(job_field, jobs * BYTES_PER_JOB_RUN, job_detail),
            Need(
                "replications" if reps > 1 else job_field,
                jobs * reps * BYTES_PER_JOB_KEPT + reps * BYTES_PER_REPLICATION,
                f"{_count(reps)} replication(s) of {_count(jobs)} jobs, every job's row kept",
            ),
        ]
    needs.append(Need(node_field, nodes * BYTES_PER_NODE, f"{_count(nodes)} nodes"))
    if joined:
        biggest_join = max(joins, key=lambda item: item[1])
        needs.append(
            Need(
                f"events.{biggest_join[0]}.join.count",
                joined * jobs * BYTES_PER_JOINED_NODE_JOB,
                f"{_count(joined)} nodes joined by the timeline, each tracked through "
                f"{_count(jobs)} jobs",
            )
        )
    types = len(model.cluster.node_types) + (8 if generator is not None else 0)
    if any(jc.runtime_by_node_type for jc in model.workload.classes):
        needs.append(
            Need(
                job_field,
                jobs * types * 8,
                f"a run time per job and node type ({_count(jobs)} x {types})",
            )
        )
    mdp = _mdp_need(model)
    if mdp is not None:
        needs.append(mdp)
    return needs


def total_bytes(needs: list[Need]) -> float:
    """The sum of the needs (infinite when any is)."""
    if not all(math.isfinite(n.bytes) for n in needs):
        return math.inf
    return math.fsum(n.bytes for n in needs)


def exceeds(needs: list[Need], budget: float | None = None) -> Need | None:
    """The largest need, with the total as its bytes, when the total exceeds the budget."""
    limit = memory_budget_bytes() if budget is None else budget
    total = total_bytes(needs)
    if total <= limit:
        return None
    worst = max(needs, key=lambda n: n.bytes)
    return Need(worst.field, total, worst.detail)


def describe(
    need: Need, budget: float | None = None, note: str = "", streamed: bool = False
) -> str:
    """'needs about 7.3 TB of memory (...), more than the 18 GB this machine allows; ...'
    (`note`: a sentence added after it; `streamed`: the need of a run that streams its
    results)."""
    limit = memory_budget_bytes() if budget is None else budget
    amount = format_bytes(need.bytes)
    amount = amount if amount.startswith("more") else f"about {amount}"
    when = " even when the run streams its results" if streamed else ""
    return (
        f"needs {amount} of memory{when} ({need.detail}), more than the "
        f"{format_bytes(limit)} this machine allows ({MEMORY_FRACTION:.0%} of its memory); "
        "expected a smaller value" + (f"; {note}" if note else "")
    )


def with_note(error: MemoryNeedError, note: str) -> MemoryNeedError:
    """`error` with a sentence added to its problem."""
    field, text = error.problems[0]
    return MemoryNeedError(error.source, [(field, f"{text.removesuffix('.')}; {note}")])


def cannot_stream(error: MemoryNeedError, why: str) -> MemoryNeedError:
    """`error` (a run that does not stream its results cannot fit), saying why this run
    cannot stream them either (`why`: its policies, `clusteremu.cluster.engine.streaming`)."""
    return with_note(error, f"a run that streams its results would fit, but this one cannot: {why}")


def event_budget(budget: float | None = None) -> float:
    """The most events of one kind a run may plan for: as many as the jobs the memory
    budget holds (`BYTES_PER_JOB_RUN` each), the bound every job-count size bomb meets."""
    limit = memory_budget_bytes() if budget is None else budget
    return limit / BYTES_PER_JOB_RUN


def _arrival_rate(model: schema.ScenarioModel) -> float:
    """Jobs per second the generated classes bring together (0 when none says: batches,
    traces)."""
    pools = {p.name: p.cores for p in model.cluster.pools}
    total = 0.0
    for jc in model.workload.classes:
        a = jc.arrival
        if isinstance(a, schema.PoissonArrival):
            if a.rate_per_s is not None:
                total += a.rate_per_s
            else:
                cores = pools.get(jc.pool or "", 0.0) if jc.pool else 0.0
                if not cores:
                    cores = next(iter(pools.values())) if len(pools) == 1 else _node_cores(model)
                total += (a.rate_per_s_per_core or 0.0) * cores
        elif isinstance(a, schema.RenewalArrival):
            mean = _mean_s(a.interarrival)
            total += math.inf if mean <= 0.0 else 1.0 / mean
    return total


def run_length_s(model: schema.ScenarioModel) -> float | None:
    """How long one replication runs in simulated seconds: `stop.time_s`, or the expected
    time the arrivals take to bring `stop.jobs` (None when neither says)."""
    stop = model.stop
    lengths = []
    if stop.time_s is not None:
        lengths.append(float(stop.time_s))
    if stop.jobs is not None:
        rate = _arrival_rate(model)
        if rate > 0.0:
            lengths.append(float(stop.jobs) / rate)
    return min(lengths) if lengths else None


def _time_mean_s(dist: Any) -> float:
    """The mean of an up or down time distribution; a truncated lognormal's exactly (where
    `_mean_s` keeps its lower bound, which may be 0)."""
    if isinstance(dist, schema.LognormalDist) and math.isfinite(dist.max_s):
        s = dist.sigma

        def phi(x: float) -> float:
            return 0.5 * math.erfc(-x / math.sqrt(2.0))

        lo = -math.inf if dist.min_s <= 0 else (math.log(dist.min_s) - dist.mu) / s
        hi = (math.log(dist.max_s) - dist.mu) / s
        mass = phi(hi) - phi(lo)
        exponent = dist.mu + s * s / 2.0
        if mass <= 0.0 or exponent > 700:
            return dist.min_s
        return math.exp(exponent) * (phi(hi - s) - phi(lo - s)) / mass
    return _mean_s(dist)


def failure_events(model: schema.ScenarioModel) -> tuple[float, str, str] | None:
    """The node failures and recoveries a run of `model` can expect (all replications),
    with the field that drives the count and how it adds up: per node type with a failure
    model, its nodes (static and joined) x run length / (mean up + mean down time) x 2.
    None without failures or a known run length."""
    horizon = run_length_s(model)
    if horizon is None:
        return None
    joined: dict[str, float] = {}
    for ev in model.events:
        if ev.join is not None:
            joined[ev.join.type] = joined.get(ev.join.type, 0.0) + ev.join.count
    static: dict[str, float] = {}
    for g in model.cluster.nodes:
        static[g.type] = static.get(g.type, 0.0) + g.count
    total, worst, field, detail = 0.0, -1.0, "", ""
    for i, t in enumerate(model.cluster.node_types):
        f = t.failures
        if f is None:
            continue
        nodes = static.get(t.name, 0.0) + joined.get(t.name, 0.0)
        if not nodes:
            continue
        up = f.mtbf_s if f.mtbf_s is not None else _time_mean_s(f.up)
        down = f.mttr_s if f.mttr_s is not None else _time_mean_s(f.down)
        if not (math.isfinite(up) or math.isfinite(down)) or math.isnan(up + down):
            continue
        cycle = up + down
        events = math.inf if cycle <= 0.0 else 2.0 * nodes * horizon / cycle
        events *= model.replications
        total += events
        if events > worst:
            worst = events
            which = (
                ("mtbf_s" if f.mtbf_s is not None else "up")
                if up <= down
                else ("mttr_s" if f.mttr_s is not None else "down")
            )
            field = f"cluster.node_types.{i}.failures.{which}"
            detail = (
                f"{_count(nodes)} {t.name} node(s) failing and recovering every "
                f"{cycle:.3g} s on average over {horizon:.6g} s"
            )
    if not field:
        return None
    return total, field, detail


def check_failures(model: schema.ScenarioModel, source: str, budget: float | None = None) -> None:
    """Raise ScenarioError when the node failures a run can expect exceed the event budget
    (`event_budget`): a failure model with a mean up and down time of microseconds would
    run for ever, one failure after another."""
    found = failure_events(model)
    if found is None:
        return
    events, field, detail = found
    limit = event_budget(budget)
    if events <= limit:
        return
    raise ScenarioError(
        source,
        [
            (
                field,
                f"expects about {_count(events)} node failures and recoveries ({detail}"
                + (f", {model.replications} replications" if model.replications > 1 else "")
                + f"), more than the {_count(limit)} events a run may plan for (as many as "
                "the jobs this machine's memory holds); expected longer up or down times",
            )
        ],
    )


def check_scenario(
    model: schema.ScenarioModel, source: str, budget: float | None = None, streamed: bool = False
) -> None:
    """Raise ScenarioError when a run of `model` cannot fit in memory (`MemoryNeedError`),
    or expects more node failures than the event budget (`check_failures`). `streamed`:
    the run streams its results where the scenario allows it (`stream_blockers`).

    The error names the largest need's field; `replications` only when one replication
    alone would fit.
    """
    check_failures(model, source, budget)
    worst = _worst(model, budget, streamed=False)
    if worst is None:
        return
    note = ""
    if streamed:
        why = stream_blockers(model)
        if why is None:
            worst = _worst(model, budget, streamed=True)
            if worst is None:
                check_temp_disk(model, source)
                return
            text = describe(worst, budget, streamed=True)
            raise MemoryNeedError(source, [(worst.field, text)])
        note = f"a run that streams its results would hold only the live jobs, but {why}"
    raise MemoryNeedError(source, [(worst.field, describe(worst, budget, note))])


def check_temp_disk(
    model: schema.ScenarioModel, source: str, free_bytes: float | None = None
) -> None:
    """Raise ScenarioError when a streamed run's response times (`STREAM_DISK_PER_JOB`
    bytes a job, one replication at a time) exceed `DISK_FRACTION` of the temporary
    folder's free space (`free_bytes`, default `temp_disk_bytes()`): with memory no
    longer the bound, the disk is, and it refuses a run of unboundedly many jobs."""
    jobs, field, detail = _jobs_per_replication(model)
    copies = 2 if len(model.workload.classes) > 1 else 1
    need = jobs * STREAM_DISK_PER_JOB * copies
    free = temp_disk_bytes() if free_bytes is None else free_bytes
    if need <= DISK_FRACTION * free:
        return
    amount = format_bytes(need)
    amount = amount if amount.startswith("more") else f"about {amount}"
    raise ScenarioError(
        source,
        [
            (
                field,
                f"needs {amount} of temporary disk space ({detail}, each one's response "
                f"time kept for the percentiles in {tempfile.gettempdir()}), more than the "
                f"{format_bytes(DISK_FRACTION * free)} free there ({DISK_FRACTION:.0%}); "
                "expected a smaller value (or TMPDIR on a larger disk)",
            )
        ],
    )


def _worst(model: schema.ScenarioModel, budget: float | None, streamed: bool) -> Need | None:
    """The need to name when the estimate exceeds the budget (None: it fits)."""
    worst = exceeds(scenario_needs(model, streamed=streamed), budget)
    if worst is None:
        return None
    if worst.field != "replications" and model.replications > 1:
        if exceeds(scenario_needs(model, replications=1, streamed=streamed), budget) is None:
            kept = scenario_needs(model, streamed=streamed)[1]
            worst = Need("replications", worst.bytes, kept.detail)
    elif worst.field == "replications":
        alone = exceeds(scenario_needs(model, replications=1, streamed=streamed), budget)
        if alone is not None:
            worst = Need(alone.field, worst.bytes, alone.detail)
    return worst


def count_refusal(
    count: float, bytes_each: float, what: str, budget: float | None = None
) -> str | None:
    """A message when `count` items of `bytes_each` bytes cannot fit, else None."""
    need = Need("", count * bytes_each, f"{_count(count)} {what}")
    if exceeds([need], budget) is None:
        return None
    return describe(need, budget)
