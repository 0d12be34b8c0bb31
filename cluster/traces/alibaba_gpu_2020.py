"""Reader of the Alibaba PAI GPU cluster trace (`cluster-trace-gpu-v2020`): instances as jobs.

Files (recognised by name; no header row, as published, the repository's ``*.header``
files give the columns; a header row equal to them is skipped; ``*.gz`` etc. are read as
they are):

- ``pai_instance_table.csv`` (required): job_name, task_name, inst_name, worker_name,
  inst_id, status, start_time, end_time, machine;
- ``pai_task_table.csv`` (required): job_name, task_name, inst_num, status, start_time,
  end_time, plan_cpu, plan_mem, plan_gpu, gpu_type;
- ``pai_job_table.csv`` (required): job_name, inst_id, user, status, start_time, end_time;
- ``pai_machine_spec.csv`` (optional, gives the nodes): machine, gpu_type, cap_cpu,
  cap_mem, cap_gpu.

One job row per pai_instance row. Units: times in s (shifted by Alibaba by a constant);
``plan_cpu`` 100 = one core; ``plan_mem`` GB; ``plan_gpu`` 100 = one GPU (50: half a GPU)
-> milli-GPU x 10; ``cap_cpu`` cores, ``cap_mem`` GB, ``cap_gpu`` GPUs.

Rules, in this order (a dropped row is counted under the first rule that drops it;
corrections are counted on kept rows only):

1. ``status`` other than ``Terminated`` (the only successful end): dropped, "status X";
2. an instance whose (job_name, task_name) is not in pai_task: dropped, "task not in
   pai_task"; pai_task rows repeating a (job_name, task_name), and pai_job rows repeating
   a job_name: the first is used (noted);
3. the task's ``plan_cpu`` or ``plan_mem`` unknown (empty, NaN): dropped, "no plan_cpu in
   pai_task" / "no plan_mem in pai_task"; ``plan_gpu`` unknown: 0 GPUs, corrected "no
   plan_gpu: 0 GPUs";
4. ``plan_gpu`` above 100 and not a whole number of GPUs (150: one and a half): the engine
   holds a share of one GPU or whole GPUs, so it is rounded up to whole GPUs (150 -> 2,000
   milli-GPU), corrected "plan_gpu above 100 not whole GPUs: rounded up" (option
   ``fractional_gpus=up``, the default), or dropped "plan_gpu above 100 not whole GPUs"
   (``fractional_gpus=drop``);
5. the instance's ``start_time`` or ``end_time`` unknown (empty, NaN, 0 or -1; the same
   for every time of this trace): dropped, "no start_time" / "no end_time"; ``end_time -
   start_time`` <= 0: dropped, "end_time not after start_time"; run time = ``end_time -
   start_time``;
6. arrival = the job's ``start_time`` (its submission; option ``arrival=job``, the
   default): where unknown, the instance's ``start_time``, corrected "no job start_time:
   the instance's start_time" (a job not in pai_job: "job not in pai_job: the instance's
   start_time, user unknown"); ``arrival=instance``: always the instance's start;
7. requests: ``plan_cpu / 100`` cores, ``plan_mem`` GB, ``plan_gpu x 10`` milli-GPU (a
   job on k >= 2 GPUs: 1,000 k); class = the task's ``gpu_type``; "any" where it is empty
   (corrected "no gpu_type: class any") or ``MISC`` (older GPUs of several models:
   corrected "gpu_type MISC: class any"); a class per GPU type has the node selector
   ``gpu_model: [type]`` (`ClassSpec`), "any" none; user = the job's ``user`` (null where
   empty); node = ``machine`` (null where empty); queue, priority: null; trace_id =
   ``job_name/task_name/worker_name`` (``#<row>`` added where that repeats, corrected).

pai_machine_spec: one node per machine (a repeated machine: its last row, noted); cpu =
``cap_cpu``, memory = ``cap_mem`` GB, gpu = ``cap_gpu`` (unknown: 0), gpu_model =
``gpu_type`` on a machine with GPUs, label ``gpu_model: gpu_type``; a machine without a
known ``cap_cpu`` or ``cap_mem`` is left out (noted).

Bad input is a `TraceError` naming the file, the line and the field: a value that is not
a number, a negative time (other than -1), a negative plan or capacity, too few or too many
fields, a blank line, an empty job_name / task_name / machine, a compressed file under a
plain name, an empty file. Fields the import does not use are not checked.

Speed: vectorised like `clusteremu.cluster.traces.alibaba_2018` (whose CSV helpers it uses): 10^6
pai_instance rows import in under 1 s on two cores, at a peak of about 0.6 KB per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clusteremu.cluster.traces.alibaba_instances import TASK_KEYS, read_instances
from clusteremu.cluster.traces.csv_columns import (
    as_mask,
    null_if_empty,
    numbers,
    read_headerless,
    strings,
)
from clusteremu.cluster.traces.inputs import choice, parse_options, pick_files
from clusteremu.cluster.traces.rows import dedupe, unique_ids
from clusteremu.cluster.traces.table import (
    GPU_MILLI,
    ClassSpec,
    ImportReport,
    Trace,
    job_table,
    node_table,
)
from clusteremu.cluster.traces.text_files import check_values

NAME = "alibaba-gpu-2020"
DESCRIPTION = (
    "Alibaba cluster-trace-gpu-v2020 (PAI): instances (one job each), tasks, jobs, machines"
)
FILES = (
    "pai_instance_table.csv, pai_task_table.csv, pai_job_table.csv (required), "
    "pai_machine_spec.csv (optional: nodes)"
)
OPTIONS: dict[str, str] = {
    "arrival": "job (default: the job's submission time) or instance (the instance's start)",
    "fractional_gpus": "up (default: plan_gpu such as 150 rounded up to whole GPUs) or drop",
}

INSTANCE_COLUMNS = (
    "job_name",
    "task_name",
    "inst_name",
    "worker_name",
    "inst_id",
    "status",
    "start_time",
    "end_time",
    "machine",
)
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
KINDS = {
    "instance": "pai_instance",
    "task": "pai_task",
    "job": "pai_job",
    "machine": "pai_machine_spec",
}
#: Markers of an unknown time (besides empty and NaN): the trace's times are offset by a
#: large constant, so 0 is no real time.
UNKNOWN_TIMES = (0.0, -1.0)
#: The class of jobs that may run on any GPU model.
ANY = "any"

S = pa.string()
F = pa.float64()


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read the pai_instance (one job per row), pai_task, pai_job and optional
    pai_machine_spec files of cluster-trace-gpu-v2020 into the common per-job table
    (s, cores, GB, milli-GPU)."""
    opts = parse_options(
        NAME,
        options,
        {
            "arrival": ("job", choice("job", "instance")),
            "fractional_gpus": ("up", choice("up", "drop")),
        },
    )
    files = pick_files(paths, KINDS, ("instance", "task", "job"), FILES)
    report = ImportReport(format=NAME, files=[str(p) for p in files.values()])
    report.units = {
        "arrival_s": "s (the job's start_time: its submission)"
        if opts["arrival"] == "job"
        else "s (the instance's start_time)",
        "run_s": "s (instance end_time - start_time)",
        "request_cpu": "cores (plan_cpu / 100)",
        "request_memory_gb": "GB (plan_mem, GB)",
        "request_gpu": "milli-GPU (plan_gpu x 10: plan_gpu 100 = one GPU)",
    }

    tpath = files["task"]
    tasks, tfirst = read_headerless(
        tpath,
        TASK_COLUMNS,
        {"job_name": S, "task_name": S, "plan_cpu": F, "plan_mem": F, "plan_gpu": F, "gpu_type": S},
        TASK_KEYS,
    )
    tasks = pa.table(
        {
            "job_name": tasks.column("job_name"),
            "task_name": tasks.column("task_name"),
            "t_cpu": numbers(tasks, "plan_cpu", tpath, tfirst),
            "t_mem": numbers(tasks, "plan_mem", tpath, tfirst),
            "t_gpu": numbers(tasks, "plan_gpu", tpath, tfirst),
            "t_type": strings(tasks, "gpu_type"),
            "t_row": np.arange(tasks.num_rows, dtype=np.int64),
        }
    )
    tasks = dedupe(tasks, TASK_KEYS, report, "pai_task")

    jpath = files["job"]
    jobs_in, jfirst = read_headerless(
        jpath, JOB_COLUMNS, {"job_name": S, "user": S, "start_time": F}, ("job_name",)
    )
    jobs_t = pa.table(
        {
            "job_name": jobs_in.column("job_name"),
            "j_user": strings(jobs_in, "user"),
            "j_start": numbers(jobs_in, "start_time", jpath, jfirst, unknown=UNKNOWN_TIMES),
            "j_row": np.arange(jobs_in.num_rows, dtype=np.int64),
        }
    )
    jobs_t = dedupe(jobs_t, ["job_name"], report, "pai_job")

    runs = read_instances(
        files["instance"],
        INSTANCE_COLUMNS,
        {
            "job_name": S,
            "task_name": S,
            "worker_name": S,
            "status": S,
            "start_time": F,
            "end_time": F,
            "machine": S,
        },
        TASK_KEYS,
        UNKNOWN_TIMES,
        report,
        (tasks, TASK_KEYS),
        (jobs_t, ["job_name"]),
    )
    inst, joined, i, lines, file = runs.table, runs.joined, runs.index, runs.lines, runs.file
    has_task, has_job = runs.matched("t_row"), runs.matched("j_row")
    cpu, mem, gpu, j_start = runs.numbers("t_cpu", "t_mem", "t_gpu", "j_start")

    rules = runs.rules(report)
    drop, correct = rules.drop, rules.correct
    drop(~has_task, "task not in pai_task")
    drop(np.isnan(cpu), "no plan_cpu in pai_task")
    drop(np.isnan(mem), "no plan_mem in pai_task")
    no_gpu = np.isnan(gpu)
    gpu = np.where(no_gpu, 0.0, gpu) * (GPU_MILLI / 100.0)
    partial = (gpu > GPU_MILLI) & (np.mod(gpu, GPU_MILLI) != 0)
    if opts["fractional_gpus"] == "drop":
        drop(partial, "plan_gpu above 100 not whole GPUs")
    s, e = runs.start[i], runs.end[i]
    drop(np.isnan(s), "no start_time")
    drop(np.isnan(e), "no end_time")
    run = e - s
    drop(~(run > 0), "end_time not after start_time")

    correct(no_gpu, "no plan_gpu: 0 GPUs")
    correct(partial, "plan_gpu above 100 not whole GPUs: rounded up")
    gpu = np.where(partial, np.ceil(gpu / GPU_MILLI) * GPU_MILLI, gpu)
    if opts["arrival"] == "job":
        correct(~has_job, "job not in pai_job: the instance's start_time, user unknown")
        correct(has_job & np.isnan(j_start), "no job start_time: the instance's start_time")
        arrival = np.where(np.isnan(j_start), s, j_start)
    else:
        arrival = s

    gtype = joined.column("t_type").combine_chunks()
    gtype = pc.fill_null(gtype, "")
    no_type = as_mask(pc.equal(gtype, ""))
    misc = as_mask(pc.equal(gtype, "MISC"))
    correct(no_type, f"no gpu_type: class {ANY}")
    correct(misc, f"gpu_type MISC: class {ANY}")

    alive = rules.kept
    keep = pa.array(alive)
    rows = i[alive]
    take = pa.array(rows)
    ids = pc.binary_join_element_wise(
        inst.column("job_name").take(take),
        inst.column("task_name").take(take),
        strings(inst, "worker_name").take(take),
        "/",
    )
    ids = unique_ids(ids, lines[rows], report, file, "trace_id")
    job_class = pc.if_else(pa.array(no_type | misc), ANY, gtype).filter(keep)
    user = null_if_empty(pc.fill_null(joined.column("j_user"), "").filter(keep))
    node = null_if_empty(strings(inst, "machine").take(take))
    jobs = job_table(
        ids,
        arrival[alive],
        run[alive],
        cpu[alive] / 100.0,
        mem[alive],
        gpu[alive],
        job_class=job_class,
        user=user,
        node=node,
    )
    classes = [
        ClassSpec(c) if c == ANY else ClassSpec(c, node_selector={"gpu_model": [c]})
        for c in sorted(pc.unique(jobs.column("class")).to_pylist())
    ]
    nodes = _machines(files["machine"], report) if "machine" in files else None
    return Trace(jobs=jobs, report=report, nodes=nodes, classes=classes)


def _machines(path: Path, report: ImportReport) -> pa.Table:
    """The nodes table from pai_machine_spec (one row per machine; repeated: the last)."""
    spec, first = read_headerless(
        path,
        MACHINE_COLUMNS,
        {"machine": S, "gpu_type": S, "cap_cpu": F, "cap_mem": F, "cap_gpu": F},
        ("machine",),
    )
    cpu = numbers(spec, "cap_cpu", path, first)
    mem = numbers(spec, "cap_mem", path, first)
    gpu = numbers(spec, "cap_gpu", path, first)
    whole = np.mod(np.nan_to_num(gpu), 1) == 0
    check_values(path, gpu, whole, first, "cap_gpu", "a whole number of GPUs")
    table = pa.table(
        {
            "machine": spec.column("machine"),
            "gpu_type": strings(spec, "gpu_type"),
            "cpu": cpu,
            "mem": mem,
            "gpu": gpu,
        }
    )
    table = dedupe(table, ["machine"], report, "pai_machine_spec", keep="last")
    cpu = np.asarray(table.column("cpu").to_numpy(), dtype=np.float64)
    mem = np.asarray(table.column("mem").to_numpy(), dtype=np.float64)
    known = ~np.isnan(cpu) & ~np.isnan(mem)
    if not known.all():
        report.notes.append(
            f"{int((~known).sum())} machine(s) in pai_machine_spec without a known cap_cpu "
            "and cap_mem: left out"
        )
    table = table.filter(pa.array(known))
    gpu = np.nan_to_num(np.asarray(table.column("gpu").to_numpy(), dtype=np.float64))
    gtype = table.column("gpu_type").to_pylist()
    model = [t if g > 0 and t else None for t, g in zip(gtype, gpu.tolist(), strict=True)]
    return node_table(
        table.column("machine"),
        table.column("cpu"),
        table.column("mem"),
        gpu.astype(np.int64),
        gpu_model=model,
        labels=[{"gpu_model": t} if t else {} for t in gtype],
    )
