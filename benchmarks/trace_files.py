"""Synthetic trace files in each format `clusteremu import` reads (`benchmarks/traces.py`).

Values are random, the layouts are the published schemas: the Standard Workload Format,
Alibaba cluster-trace-v2018 (batch_task, batch_instance, machine_meta),
cluster-trace-gpu-v2020 (pai_job, pai_task, pai_instance, pai_machine_spec),
cluster-trace-gpu-v2023 (openb node and pod lists), Google cluster-data 2019
(instance_events, machine_events as CSV), the Azure VM trace's vmtable and Kubernetes
Node/Pod YAML. Every generator writes `rows` jobs into a folder and returns the files.

    python benchmarks/trace_files.py FORMAT ROWS FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

#: Jobs per second arriving in the synthetic traces (their offered load is moderate).
RATE_PER_S = 50.0


def _csv(path: Path, columns: dict[str, object], header: bool = False) -> Path:
    table = pa.table({k: pa.array(v) for k, v in columns.items()})
    options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    with pa.OSFile(str(path), "wb") as sink:
        if header:  # unquoted, as the traces write it (pyarrow would quote the names)
            sink.write(",".join(columns).encode() + b"\n")
        pacsv.write_csv(table, sink, options)
    return path


def _arrivals(rng: np.random.Generator, rows: int, rate: float = RATE_PER_S) -> np.ndarray:
    return np.floor(np.cumsum(rng.exponential(1.0 / rate, rows))).astype(np.int64)


def swf(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    submit = _arrivals(rng, rows)
    run = rng.integers(1, 3600, rows)
    procs = rng.integers(1, 65, rows)
    req_time = run + rng.integers(0, 3600, rows)
    minus = np.full(rows, -1)
    fields = [
        np.arange(1, rows + 1),
        submit,
        minus,
        run,
        procs,
        minus,
        minus,
        procs,
        req_time,
        minus,
        np.ones(rows, dtype=np.int64),
        rng.integers(1, 200, rows),
        rng.integers(1, 20, rows),
        minus,
        rng.integers(1, 4, rows),
        minus,
        minus,
        minus,
    ]
    path = folder / "synthetic.swf"
    body = np.column_stack(fields)
    with open(path, "w") as f:
        f.write("; Version: 2.2\n; Computer: synthetic (benchmarks/trace_files.py)\n")
        f.write("; MaxProcs: 4096\n; MaxNodes: 4096\n; UnixStartTime: 0\n")
        np.savetxt(f, body, fmt="%d", delimiter=" ")
    return [path]


def alibaba_2018(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    tasks = max(1, rows // 10)
    task_of = np.sort(rng.integers(0, tasks, rows))
    start = _arrivals(rng, rows) + 1
    end = start + rng.integers(1, 3600, rows)
    t_names = np.char.add("M", np.arange(tasks).astype(str))
    j_names = np.char.add("j_", np.arange(tasks).astype(str))
    task_start = np.full(tasks, 1, dtype=np.int64)
    np.minimum.at(task_start, task_of, start)
    _csv(
        folder / "batch_task.csv",
        {
            "task_name": t_names,
            "instance_num": np.bincount(task_of, minlength=tasks),
            "job_name": j_names,
            "task_type": rng.integers(1, 13, tasks),
            "status": np.full(tasks, "Terminated"),
            "start_time": task_start,
            "end_time": task_start + 7200,
            "plan_cpu": rng.choice([50, 100, 200, 400], tasks),
            "plan_mem": np.round(rng.uniform(0.1, 2.0, tasks), 2),
        },
    )
    machines = 4000
    _csv(
        folder / "machine_meta.csv",
        {
            "machine_id": np.char.add("m_", np.arange(1, machines + 1).astype(str)),
            "time_stamp": np.zeros(machines, dtype=np.int64),
            "failure_domain_1": rng.integers(1, 100, machines),
            "failure_domain_2": np.full(machines, "x"),
            "cpu_num": np.full(machines, 96),
            "mem_size": np.full(machines, 100),
            "status": np.full(machines, "USING"),
        },
    )
    _csv(
        folder / "batch_instance.csv",
        {
            "instance_name": np.char.add("i_", np.arange(rows).astype(str)),
            "task_name": t_names[task_of],
            "job_name": j_names[task_of],
            "task_type": rng.integers(1, 13, rows),
            "status": np.full(rows, "Terminated"),
            "start_time": start,
            "end_time": end,
            "machine_id": np.char.add("m_", rng.integers(1, machines + 1, rows).astype(str)),
            "seq_no": np.ones(rows, dtype=np.int64),
            "total_seq_no": np.ones(rows, dtype=np.int64),
            "cpu_avg": np.round(rng.uniform(0, 100, rows), 2),
            "cpu_max": np.round(rng.uniform(0, 100, rows), 2),
            "mem_avg": np.round(rng.uniform(0, 1, rows), 2),
            "mem_max": np.round(rng.uniform(0, 1, rows), 2),
        },
    )
    return [folder / n for n in ("batch_instance.csv", "batch_task.csv", "machine_meta.csv")]


def alibaba_gpu_2020(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    jobs = max(1, rows // 4)
    job_of = np.sort(rng.integers(0, jobs, rows))
    j_names = np.char.add("job_", np.arange(jobs).astype(str))
    j_start = _arrivals(rng, jobs) + 1
    _csv(
        folder / "pai_job_table.csv",
        {
            "job_name": j_names,
            "inst_id": np.char.add("iid_", np.arange(jobs).astype(str)),
            "user": np.char.add("u", rng.integers(0, 500, jobs).astype(str)),
            "status": np.full(jobs, "Terminated"),
            "start_time": j_start,
            "end_time": j_start + 9000,
        },
    )
    _csv(
        folder / "pai_task_table.csv",
        {
            "job_name": j_names,
            "task_name": np.full(jobs, "worker"),
            "inst_num": np.bincount(job_of, minlength=jobs),
            "status": np.full(jobs, "Terminated"),
            "start_time": j_start,
            "end_time": j_start + 9000,
            "plan_cpu": rng.choice([200, 400, 600, 800], jobs),
            "plan_mem": rng.choice([8, 16, 29.296875, 64], jobs),
            "plan_gpu": rng.choice([25, 50, 100, 200], jobs),
            "gpu_type": rng.choice(["V100", "T4", "P100"], jobs),
        },
    )
    start = j_start[job_of] + rng.integers(0, 60, rows)
    machines = 2000
    _csv(
        folder / "pai_instance_table.csv",
        {
            "job_name": j_names[job_of],
            "task_name": np.full(rows, "worker"),
            "inst_name": np.char.add("in_", np.arange(rows).astype(str)),
            "worker_name": np.char.add("w_", np.arange(rows).astype(str)),
            "inst_id": np.char.add("iid_", job_of.astype(str)),
            "status": np.full(rows, "Terminated"),
            "start_time": start,
            "end_time": start + rng.integers(1, 7200, rows),
            "machine": np.char.add("mach", rng.integers(0, machines, rows).astype(str)),
        },
    )
    _csv(
        folder / "pai_machine_spec.csv",
        {
            "machine": np.char.add("mach", np.arange(machines).astype(str)),
            "gpu_type": rng.choice(["V100", "T4", "P100"], machines),
            "cap_cpu": np.full(machines, 96),
            "cap_mem": np.full(machines, 512),
            "cap_gpu": np.full(machines, 8),
        },
    )
    return [
        folder / n
        for n in (
            "pai_job_table.csv",
            "pai_task_table.csv",
            "pai_instance_table.csv",
            "pai_machine_spec.csv",
        )
    ]


def alibaba_gpu_2023(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    nodes = 2000
    _csv(
        folder / "openb_node_list_gpu_node.csv",
        {
            "sn": np.char.add("node-", np.arange(nodes).astype(str)),
            "cpu_milli": np.full(nodes, 96000),
            "memory_mib": np.full(nodes, 786432),
            "gpu": np.full(nodes, 8),
            "model": rng.choice(["V100M32", "T4", "P100"], nodes),
        },
        header=True,
    )
    created = _arrivals(rng, rows)
    gpus = rng.choice([0, 1, 1, 2], rows)
    milli = np.where(gpus == 1, rng.choice([250, 500, 1000], rows), np.where(gpus > 1, 1000, 0))
    _csv(
        folder / "openb_pod_list_default.csv",
        {
            "name": np.char.add("pod-", np.arange(rows).astype(str)),
            "cpu_milli": rng.choice([1000, 4000, 8000], rows),
            "memory_mib": rng.choice([4096, 16384], rows),
            "num_gpu": gpus,
            "gpu_milli": milli,
            "gpu_spec": np.full(rows, ""),
            "qos": np.full(rows, "LS"),
            "pod_phase": np.full(rows, "Running"),
            "creation_time": created,
            "deletion_time": created + 10 + rng.integers(1, 7200, rows),
            "scheduled_time": created + 10,
        },
        header=True,
    )
    return [folder / "openb_node_list_gpu_node.csv", folder / "openb_pod_list_default.csv"]


def google_2019(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    """Three events per instance: SUBMIT, SCHEDULE, FINISH (times in microseconds)."""
    rng = np.random.default_rng(seed)
    submit = (_arrivals(rng, rows) + 1) * 1_000_000
    sched = submit + 1_000_000
    finish = sched + rng.integers(1, 3600, rows) * 1_000_000
    coll = np.arange(rows) // 4 + 1
    idx = np.arange(rows) % 4
    cpus = np.round(rng.uniform(0.001, 0.05, rows), 5)
    mem = np.round(rng.uniform(0.001, 0.05, rows), 5)
    machines = rng.integers(1, 5000, rows)
    n = 3 * rows
    _csv(
        folder / "instance_events.csv",
        {
            "time": np.concatenate([submit, sched, finish]),
            "type": np.repeat([0, 3, 6], rows),
            "collection_id": np.tile(coll, 3),
            "instance_index": np.tile(idx, 3),
            "machine_id": np.concatenate([np.zeros(rows, dtype=np.int64), machines, machines]),
            "priority": np.full(n, 200),
            "scheduling_class": np.tile(rng.integers(0, 4, rows), 3),
            "resource_request.cpus": np.tile(cpus, 3),
            "resource_request.memory": np.tile(mem, 3),
        },
        header=True,
    )
    m = 5000
    _csv(
        folder / "machine_events.csv",
        {
            "time": np.zeros(m, dtype=np.int64),
            "machine_id": np.arange(1, m + 1),
            "type": np.ones(m, dtype=np.int64),
            "capacity.cpus": np.full(m, 0.5),
            "capacity.memory": np.full(m, 0.5),
        },
        header=True,
    )
    return [folder / "instance_events.csv", folder / "machine_events.csv"]


def azure_vm(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    # The 2019 vmtable's 2.7 million VMs came in 30 days: about one a second (at 50 a
    # second, VMs living hours would hold 750,000 at once).
    created = _arrivals(rng, rows, rate=2.0)
    _csv(
        folder / "vmtable.csv",
        {
            "vmid": np.char.add("vm", np.arange(rows).astype(str)),
            "subscriptionid": np.char.add("s", rng.integers(0, 1000, rows).astype(str)),
            "deploymentid": np.char.add("d", rng.integers(0, 5000, rows).astype(str)),
            "vmcreated": created,
            "vmdeleted": created + 300 * rng.integers(1, 100, rows),
            "maxcpu": np.round(rng.uniform(0, 100, rows), 2),
            "avgcpu": np.round(rng.uniform(0, 50, rows), 2),
            "p95maxcpu": np.round(rng.uniform(0, 100, rows), 2),
            "vmcategory": rng.choice(["Delay-insensitive", "Interactive", "Unknown"], rows),
            "vmcorecountbucket": rng.choice(["2", "4", "8", "12", "24", ">24"], rows),
            "vmmemorybucket": rng.choice(["2", "4", "8", "32", "64", ">64"], rows),
        },
    )
    return [folder / "vmtable.csv"]


def kubernetes(rows: int, folder: Path, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    nodes = max(10, rows // 20)
    with open(folder / "nodes.yaml", "w") as f:
        for i in range(nodes):
            f.write(
                f"---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i}\n"
                f"  labels: {{zone: z{i % 3}}}\nstatus:\n  allocatable:\n"
                f"    cpu: '64'\n    memory: 256Gi\n    pods: '110'\n"
            )
    cpu = rng.choice([100, 500, 1000, 4000], rows)
    mem = rng.choice([128, 512, 2048], rows)
    with open(folder / "pods.yaml", "w") as f:
        for i in range(rows):
            f.write(
                f"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-{i}\n"
                f"  namespace: default\nspec:\n  containers:\n  - name: main\n"
                f"    resources:\n      requests:\n        cpu: {cpu[i]}m\n"
                f"        memory: {mem[i]}Mi\n"
            )
    return [folder / "nodes.yaml", folder / "pods.yaml"]


GENERATORS = {
    "swf": swf,
    "alibaba-2018": alibaba_2018,
    "alibaba-gpu-2020": alibaba_gpu_2020,
    "alibaba-gpu-2023": alibaba_gpu_2023,
    "google-2019": google_2019,
    "azure-vm": azure_vm,
    "kubernetes": kubernetes,
}


if __name__ == "__main__":
    fmt, rows, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    print("\n".join(str(p) for p in GENERATORS[fmt](rows, out)))
