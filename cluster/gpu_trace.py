"""Loaders for the Alibaba GPU-cluster trace (2023) that the ATC'23 FGD paper evaluated on.

Node list (`openb_node_list_gpu_node.csv`): `sn, cpu_milli, memory_mib, gpu, model`.
Pod list (`openb_pod_list_*.csv`): `name, cpu_milli, memory_mib, num_gpu, gpu_milli`, and
optionally `gpu_spec` (absent: any GPU model), `qos, pod_phase, creation_time,
deletion_time, scheduled_time` (not used). The files stay in
`../shared/traces/alibaba-gpu-v2023/` (research-use terms): clusteremu reads them from a
path and never copies them.

Every malformed row is an error naming the file, the row (1-based, the header is row 1)
and the column; an unknown GPU model in a pod's `gpu_spec` (not on any node) too, and a
pod request the model cannot hold as written (nothing is coerced): `gpu_milli` above
1,000, a GPU pod with `gpu_milli` 0, a CPU-only pod with `gpu_milli` above 0, a multi-GPU
pod with `gpu_milli` other than 1,000.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import readback

IntArray = npt.NDArray[np.int64]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: The pod list's columns that must be there (the `..._multigpu50.csv` list has only these).
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: Columns a pod list may add: `gpu_spec` (absent or empty: any GPU model) is read; the
#: others (the original trace's QoS, phase and times) are not used by the replay.
POD_OPTIONAL_COLUMNS = (
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
#: The most GPUs a node (and a pod) may have.
MAX_GPUS = 62
#: A GPU in milli-GPU: a pod's `gpu_milli` (per GPU) is at most this.
GPU_MILLI = 1000
#: Largest CPU (milli-cores) a node or pod may have: a million cores.
MAX_CPU_MILLI = 10**9
#: Largest memory (MiB) a node or pod may have: 1 EiB.
MAX_MEMORY_MIB = 2**40
#: Largest trace file read (bytes; the Alibaba files are under 1 MiB).
MAX_TRACE_BYTES = 256 * 2**20


class TraceError(ValueError):
    """A malformed trace file: names the file, the row and the column."""

    def __init__(
        self, path: Path | str, problem: str, row: int | None = None, column: str = ""
    ) -> None:
        where = str(path) + (f", row {row}" if row is not None else "")
        where += f", column {column!r}" if column else ""
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Nodes:
    """GPU nodes: names, CPU (milli-cores), memory (MiB), GPU count, GPU model code."""

    name: list[str]
    cpu_milli: IntArray
    memory_mib: IntArray
    gpus: IntArray
    model: IntArray  #: index into `models` (-1: no GPU)
    models: list[str]

    @property
    def gpu_capacity_milli(self) -> int:
        return int(self.gpus.sum()) * 1000


@dataclass(frozen=True)
class Pods:
    """Pods: CPU (milli), memory (MiB), GPUs k, milli-GPU per GPU d (0: CPU-only), allowed
    GPU models as a bit mask over `Nodes.models` (all bits: any), and `gpu_spec` as given."""

    name: list[str]
    cpu_milli: IntArray
    memory_mib: IntArray
    num_gpu: IntArray
    gpu_milli: IntArray
    model_mask: IntArray
    gpu_spec: list[str]

    def __len__(self) -> int:
        return len(self.name)

    @property
    def gpu_request_milli(self) -> IntArray:
        """k x d of every pod (what it adds to the arrived and allocated GPU)."""
        return self.num_gpu * self.gpu_milli

    def take(self, index: IntArray) -> Pods:
        return Pods(
            [self.name[i] for i in index],
            self.cpu_milli[index],
            self.memory_mib[index],
            self.num_gpu[index],
            self.gpu_milli[index],
            self.model_mask[index],
            [self.gpu_spec[i] for i in index],
        )


def _rows(
    path: Path, columns: tuple[str, ...], optional: tuple[str, ...] = ()
) -> list[dict[str, str]]:
    """The rows of a CSV file whose header has every one of `columns` (`optional` ones may
    be there too; other columns are ignored)."""
    try:
        raw = readback.read_capped(path, MAX_TRACE_BYTES, "a CSV file with a header row")
    except readback.ReadBackError as exc:
        raise TraceError(path, f"{exc.field + ': ' if exc.field else ''}{exc.problem}") from None
    try:
        with io.StringIO(raw.decode("utf-8"), newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in columns if c not in header]
            if missing:
                also = f" (optional: {', '.join(optional)})" if optional else ""
                raise TraceError(
                    path,
                    f"missing column(s) {', '.join(missing)}; expected {', '.join(columns)}" + also,
                    1,
                    missing[0],
                )
            rows = list(reader)
    except UnicodeDecodeError:
        raise TraceError(path, "not a UTF-8 text file") from None
    except csv.Error as exc:
        raise TraceError(path, f"not a CSV file ({exc})") from None
    return rows


def _int(
    path: Path, row: int, column: str, text: str | None, lo: int = 0, hi: int | None = None
) -> int:
    if text is None or text.strip() == "":
        raise TraceError(path, "empty; expected a whole number", row, column)
    try:
        value = float(text)
    except ValueError:
        raise TraceError(path, f"{text!r} is not a number", row, column) from None
    if not np.isfinite(value) or value != int(value):
        raise TraceError(path, f"{text!r} is not a whole number", row, column)
    if value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise TraceError(path, f"{text!r} out of range; expected {bound}", row, column)
    return int(value)


def load_nodes(path: str | Path) -> Nodes:
    """Read a node list; nodes without GPUs are kept (model -1)."""
    p = Path(path)
    rows = _rows(p, NODE_COLUMNS)
    if not rows:
        raise TraceError(p, "no nodes")
    models: list[str] = []
    name, cpu, mem, gpus, model = [], [], [], [], []
    seen: dict[str, int] = {}
    for i, r in enumerate(rows, start=2):
        node = r["sn"] or f"node-{i - 2}"
        if node in seen:
            raise TraceError(p, f"node {node[:60]!r} again (first on row {seen[node]})", i, "sn")
        seen[node] = i
        name.append(node)
        cpu.append(_int(p, i, "cpu_milli", r["cpu_milli"], 1, MAX_CPU_MILLI))
        mem.append(_int(p, i, "memory_mib", r["memory_mib"], 0, MAX_MEMORY_MIB))
        g = _int(p, i, "gpu", r["gpu"], 0, MAX_GPUS)
        gpus.append(g)
        m = (r["model"] or "").strip()
        if g > 0:
            if not m or m.lower() == "nan":
                raise TraceError(p, "a node with GPUs needs a GPU model", i, "model")
            if m not in models:
                models.append(m)
            model.append(models.index(m))
        else:
            model.append(-1)
    if len(models) > 62:
        raise TraceError(p, f"{len(models)} GPU models; at most 62 are supported")
    a = np.asarray
    return Nodes(
        name,
        a(cpu, dtype=np.int64),
        a(mem, dtype=np.int64),
        a(gpus, dtype=np.int64),
        a(model, dtype=np.int64),
        models,
    )


def load_pods(path: str | Path, models: list[str]) -> Pods:
    """Read a pod list against the GPU models of the nodes (`Nodes.models`).

    `gpu_milli` (per GPU) is 0 to 1000 (a whole GPU): 0 on a CPU-only pod (`num_gpu` 0),
    1 to 1000 on a pod of one GPU (below 1000 it may share it), 1000 on a pod of several
    GPUs (they are taken whole). Any other combination is refused, not coerced.
    """
    p = Path(path)
    rows = _rows(p, POD_COLUMNS, POD_OPTIONAL_COLUMNS)
    if not rows:
        raise TraceError(p, "no pods: the pod list is empty")
    all_models = (1 << len(models)) - 1
    name, cpu, mem, k, d, mask, spec = [], [], [], [], [], [], []
    for i, r in enumerate(rows, start=2):
        name.append(r["name"] or f"pod-{i - 2}")
        cpu.append(_int(p, i, "cpu_milli", r["cpu_milli"], 0, MAX_CPU_MILLI))
        mem.append(_int(p, i, "memory_mib", r["memory_mib"], 0, MAX_MEMORY_MIB))
        n = _int(p, i, "num_gpu", r["num_gpu"], 0, MAX_GPUS)
        milli = _int(p, i, "gpu_milli", r["gpu_milli"], 0, GPU_MILLI)
        if n == 0 and milli > 0:
            raise TraceError(
                p,
                f"{milli} milli-GPU on a pod with num_gpu 0; expected 0 (CPU-only)",
                i,
                "gpu_milli",
            )
        if n == 1 and milli == 0:
            raise TraceError(
                p, "0 milli-GPU on a pod with num_gpu 1; expected 1 to 1000", i, "gpu_milli"
            )
        if n > 1 and milli != GPU_MILLI:
            raise TraceError(
                p,
                f"{milli} milli-GPU per GPU on a pod with num_gpu {n}; expected 1000 "
                "(a pod of several GPUs takes them whole)",
                i,
                "gpu_milli",
            )
        k.append(n)
        d.append(milli)
        text = (r.get("gpu_spec") or "").strip()
        spec.append(text)
        if not text or text.lower() == "nan":
            mask.append(all_models)
            continue
        bits = 0
        for m in text.split("|"):
            m = m.strip()
            if m not in models:
                raise TraceError(
                    p, f"unknown GPU model {m!r}; the nodes have {', '.join(models)}", i, "gpu_spec"
                )
            bits |= 1 << models.index(m)
        mask.append(bits)
    a = np.asarray
    return Pods(
        name,
        a(cpu, dtype=np.int64),
        a(mem, dtype=np.int64),
        a(k, dtype=np.int64),
        a(d, dtype=np.int64),
        a(mask, dtype=np.int64),
        spec,
    )
