"""Reader of the Alibaba cluster trace v2018 (`cluster-trace-v2018`): batch instances as jobs.

Files (recognised by name; no header row, as published; a header row equal to the column
names below is skipped; ``*.gz``, ``*.bz2``, ``*.zst``, ``*.lz4`` are read as they are):

- ``batch_instance.csv`` (required): instance_name, task_name, job_name, task_type, status,
  start_time, end_time, machine_id, seq_no, total_seq_no, cpu_avg, cpu_max, mem_avg, mem_max;
- ``batch_task.csv`` (required): task_name, instance_num, job_name, task_type, status,
  start_time, end_time, plan_cpu, plan_mem;
- ``machine_meta.csv`` (optional, gives the nodes): machine_id, time_stamp, failure_domain_1,
  failure_domain_2, cpu_num, mem_size, status.

One job row per batch_instance row (an instance run; a retried instance has one row per
run). Units: times are s from the trace's start; ``plan_cpu`` 100 = one core; ``plan_mem``
and ``mem_size`` are normalised to 0-100 (100 = the largest machine's memory) and turned
into GB by the option ``memory_gb_per_unit`` (default 5.12: the largest machine holds
512 GB; Alibaba does not publish the figure). No GPUs.

Rules, in this order (a dropped row is counted under the first rule that drops it;
corrections are counted on kept rows only):

1. ``status`` other than ``Terminated`` (the runs that finished): dropped, "status X";
2. an instance whose (job_name, task_name) is not in batch_task: dropped, "task not in
   batch_task"; batch_task rows repeating a (job_name, task_name): the first is used
   (noted);
3. the task's ``plan_cpu`` or ``plan_mem`` unknown (empty, NaN, or the trace's invalid
   markers -1 / 101 in ``plan_mem``): dropped, "no plan_cpu in batch_task" / "no plan_mem
   in batch_task";
4. arrival = the instance's ``start_time`` (the trace has no submission time); unknown
   (0, -1 or empty: the trace writes 0 for a time outside its 8 days): the task's
   ``start_time``, corrected "instance start_time unknown: the task's start_time"; both
   unknown:
   dropped, "no start_time";
5. ``end_time`` unknown (0, -1, empty): dropped, "no end_time"; run time
   ``end_time - start`` <= 0: dropped, "end_time not after start_time";
6. requests: ``plan_cpu / 100`` cores, ``plan_mem x memory_gb_per_unit`` GB, 0 GPUs;
7. class = the instance's ``task_type`` (option ``class_by=task_type``, the default), or
   "batch" where it is empty (corrected "no task_type: class batch"), or "batch" for every
   job (``class_by=none``); user, queue, priority: null; node = ``machine_id`` (null where
   empty); trace_id = ``job_name/task_name/instance_name``, with ``#<row>`` added (the
   line in batch_instance) where that repeats (a retried instance; corrected "trace_id
   repeats: '#<row>' added").

machine_meta has several rows per machine over time: each machine's last row (by
time_stamp, then file order) with status USING and known cpu_num and mem_size is kept,
else its last row with both known (then it is unschedulable); machines with neither
known are left out (noted). Node labels: ``failure_domain_1`` and ``failure_domain_2``.

Bad input is a `TraceError` naming the file, the line and the field: a value that is not
a number, a negative time (other than -1), a negative ``plan_cpu`` or ``cpu_num``, a
normalised memory outside 0-100 (other than -1 / 101), too few or too many fields (a cut
row), a blank line, an empty required name, a compressed file under a plain name, an
empty file. Fields the import does not use (instance_num, seq_no, the usage columns) are
not checked.

Speed: vectorised with pyarrow (multi-threaded CSV parsing of only the columns used, a
hash join of instances to tasks) and numpy, no loop over rows: 10^6 batch_instance rows
import in about 1 s on two cores, at a peak resident memory of about 0.7 KB per row
(measured with `resource.getrusage`: 8 times the CSV's 82 bytes a row). The whole trace
(1.4 billion rows) does not fit memory: cut batch_instance into parts (by time) first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
from clusteremu.cluster.traces.inputs import choice, number_above, parse_options, pick_files
from clusteremu.cluster.traces.rows import dedupe, unique_ids
from clusteremu.cluster.traces.table import ClassSpec, ImportReport, Trace, job_table, node_table

NAME = "alibaba-2018"
DESCRIPTION = "Alibaba cluster-trace-v2018: batch instances (one job each), tasks' plans, machines"
FILES = "batch_instance.csv and batch_task.csv (required), machine_meta.csv (optional: nodes)"
OPTIONS: dict[str, str] = {
    "memory_gb_per_unit": "GB per unit of the normalised memory (0-100); default 5.12 "
    "(100 = a 512 GB machine)",
    "class_by": "task_type (default: class = the instance's task_type) or none (class batch)",
}

INSTANCE_COLUMNS = (
    "instance_name",
    "task_name",
    "job_name",
    "task_type",
    "status",
    "start_time",
    "end_time",
    "machine_id",
    "seq_no",
    "total_seq_no",
    "cpu_avg",
    "cpu_max",
    "mem_avg",
    "mem_max",
)
TASK_COLUMNS = (
    "task_name",
    "instance_num",
    "job_name",
    "task_type",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
)
MACHINE_COLUMNS = (
    "machine_id",
    "time_stamp",
    "failure_domain_1",
    "failure_domain_2",
    "cpu_num",
    "mem_size",
    "status",
)
#: File kinds: the text a file's name contains.
KINDS = {
    "batch_instance": "batch_instance",
    "batch_task": "batch_task",
    "machine_meta": "machine_meta",
}
#: Default GB per normalised memory unit: 100 units = a 512 GB machine.
MEMORY_GB_PER_UNIT = 5.12
#: The trace's markers of an invalid normalised value.
INVALID_NORMALISED = (-1.0, 101.0)
#: The marker of an unknown time (besides 0 and empty).
UNKNOWN_TIME = (-1.0,)

S = pa.string()
F = pa.float64()


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read batch_instance (one job per row), batch_task and optional machine_meta files
    of cluster-trace-v2018 into the common per-job table (s, cores, GB)."""
    opts = parse_options(
        NAME,
        options,
        {
            "memory_gb_per_unit": (MEMORY_GB_PER_UNIT, number_above(0)),
            "class_by": ("task_type", choice("task_type", "none")),
        },
    )
    gb_per_unit: float = opts["memory_gb_per_unit"]
    files = pick_files(paths, KINDS, ("batch_instance", "batch_task"), FILES)
    report = ImportReport(format=NAME, files=[str(p) for p in files.values()])
    report.units = {
        "arrival_s": "s (instance start_time, s from the trace's start)",
        "run_s": "s (end_time - start_time)",
        "request_cpu": "cores (plan_cpu / 100)",
        "request_memory_gb": f"GB (plan_mem, normalised 0-100, x {gb_per_unit:g} GB per unit)",
        "request_gpu": "milli-GPU (none in this trace: 0)",
    }
    report.notes.append(
        "arrival = instance start time (the trace has no submission time); "
        f"memory: 100 normalised units = {100 * gb_per_unit:g} GB"
    )

    tpath = files["batch_task"]
    tasks, tfirst = read_headerless(
        tpath,
        TASK_COLUMNS,
        {"task_name": S, "job_name": S, "start_time": F, "plan_cpu": F, "plan_mem": F},
        TASK_KEYS,
    )
    t_start = numbers(tasks, "start_time", tpath, tfirst, unknown=UNKNOWN_TIME)
    t_cpu = numbers(tasks, "plan_cpu", tpath, tfirst)
    t_mem = numbers(tasks, "plan_mem", tpath, tfirst, 0.0, 100.0, INVALID_NORMALISED)
    tasks = pa.table(
        {
            "job_name": tasks.column("job_name"),
            "task_name": tasks.column("task_name"),
            "t_start": t_start,
            "t_cpu": t_cpu,
            "t_mem": t_mem,
            "t_row": np.arange(tasks.num_rows, dtype=np.int64),
        }
    )
    tasks = dedupe(tasks, TASK_KEYS, report, "batch_task")

    runs = read_instances(
        files["batch_instance"],
        INSTANCE_COLUMNS,
        {
            "instance_name": S,
            "task_name": S,
            "job_name": S,
            "task_type": S,
            "status": S,
            "start_time": F,
            "end_time": F,
            "machine_id": S,
        },
        ("job_name", "task_name", "instance_name"),
        UNKNOWN_TIME,
        report,
        (tasks, TASK_KEYS),
    )
    inst, i, lines, file = runs.table, runs.index, runs.lines, runs.file
    t_start_i, cpu, mem = runs.numbers("t_start", "t_cpu", "t_mem")

    rules = runs.rules(report)
    drop = rules.drop
    drop(~runs.matched("t_row"), "task not in batch_task")
    drop(np.isnan(cpu), "no plan_cpu in batch_task")
    drop(np.isnan(mem), "no plan_mem in batch_task")
    s_inst = runs.start[i]
    no_start = np.isnan(s_inst) | (s_inst == 0)
    s = np.where(no_start, t_start_i, s_inst)
    drop(np.isnan(s) | (s == 0), "no start_time")
    e = runs.end[i]
    drop(np.isnan(e) | (e == 0), "no end_time")
    run = e - s
    drop(~(run > 0), "end_time not after start_time")
    rules.correct(no_start, "instance start_time unknown: the task's start_time")

    alive = rules.kept
    rows = i[alive]
    take = pa.array(rows)
    job = inst.column("job_name").take(take)
    task = inst.column("task_name").take(take)
    name = inst.column("instance_name").take(take)
    ids = unique_ids(
        pc.binary_join_element_wise(job, task, name, "/"), lines[rows], report, file, "trace_id"
    )
    if opts["class_by"] == "task_type":
        ttype = strings(inst, "task_type").take(take)
        empty = as_mask(pc.equal(ttype, ""))
        report.correct("no task_type: class batch", lines[rows[empty]], file)
        job_class: Any = pc.if_else(pa.array(empty), "batch", ttype)
    else:
        job_class = "batch"
    node = null_if_empty(strings(inst, "machine_id").take(take))
    jobs = job_table(
        ids,
        s[alive],
        run[alive],
        cpu[alive] / 100.0,
        mem[alive] * gb_per_unit,
        0.0,
        job_class=job_class,
        node=node,
    )
    nodes = None
    if "machine_meta" in files:
        nodes = _machines(files["machine_meta"], gb_per_unit, report)
    classes = [ClassSpec(c) for c in pc.unique(jobs.column("class")).to_pylist()]
    return Trace(jobs=jobs, report=report, nodes=nodes, classes=classes)


def _machines(path: Path, gb_per_unit: float, report: ImportReport) -> pa.Table:
    """The nodes table from machine_meta: each machine's last USING row with known sizes."""
    meta, first = read_headerless(
        path,
        MACHINE_COLUMNS,
        {
            "machine_id": S,
            "time_stamp": F,
            "failure_domain_1": S,
            "failure_domain_2": S,
            "cpu_num": F,
            "mem_size": F,
            "status": S,
        },
        ("machine_id",),
    )
    t = numbers(meta, "time_stamp", path, first, unknown=UNKNOWN_TIME)
    cpu = numbers(meta, "cpu_num", path, first, unknown=UNKNOWN_TIME)
    mem = numbers(meta, "mem_size", path, first, 0.0, 100.0, INVALID_NORMALISED)
    using = as_mask(pc.equal(pc.utf8_upper(strings(meta, "status")), "USING"))
    known = ~np.isnan(cpu) & ~np.isnan(mem)
    enc = pc.dictionary_encode(meta.column("machine_id").combine_chunks())
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    priority = 2 * known.astype(np.int64) + (known & using)
    order = np.lexsort((np.arange(code.size), np.nan_to_num(t, nan=-1.0), priority, code))
    last = order[np.r_[code[order][1:] != code[order][:-1], True]]  # one per machine
    good = last[known[last]]
    missing = last.size - good.size
    if missing:
        report.notes.append(
            f"{missing} machine(s) in machine_meta without a known cpu_num and mem_size: left out"
        )
    fd1 = strings(meta, "failure_domain_1").take(pa.array(good)).to_pylist()
    fd2 = strings(meta, "failure_domain_2").take(pa.array(good)).to_pylist()
    labels = [
        {k: v for k, v in (("failure_domain_1", a), ("failure_domain_2", b)) if v}
        for a, b in zip(fd1, fd2, strict=True)
    ]
    return node_table(
        meta.column("machine_id").take(pa.array(good)),
        cpu[good],
        mem[good] * gb_per_unit,
        0,
        unschedulable=~using[good],
        labels=labels,
    )
