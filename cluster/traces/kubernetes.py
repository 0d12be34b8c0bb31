"""Kubernetes objects in: Node and Pod objects as YAML into the common per-job table.

Input: what ``kubectl get nodes,pods -o yaml`` prints (a ``kind: List`` with ``items``;
``NodeList`` / ``PodList`` as the API server returns them, whose items may omit ``kind``),
or multi-document YAML (``---``) of Node and Pod objects, in one file or several (read in
the order given, documents and list items in file order). Objects of other kinds
(Service, Deployment, ...) are skipped and counted in the report's notes; empty documents
are skipped.

Safety. Files are parsed with a PyYAML *safe* loader only (libyaml's when installed; never
``yaml.load``). A file over 512 MiB (`MAX_FILE_BYTES`) is refused, and so is an empty one or a
compressed one (gzip, bzip2, xz, zstd or zip magic bytes: decompress it first). A document
whose aliases would expand it by more than 100,000 nodes (`MAX_ALIAS_NODES`: a billion-laughs
document) or whose aliases loop is refused before it is built (the check walks the nodes
without recursion); nesting deeper than the parser allows (libyaml: 1,000 levels; PyYAML's
pure-Python parser: until ``RecursionError``, caught) is refused too. Every refusal is a
`TraceError`.

Units. cpu in cores, memory in GB (1 GB = 1,024 MiB = 2^30 bytes), GPUs in milli-GPU on
the jobs (1,000 = one GPU; k >= 2 whole GPUs = 1,000 k; below 1,000 a share of one GPU) and
whole GPUs on the nodes. Quantities are parsed exactly as Kubernetes' ``resource.Quantity``
(`parse_quantity`): a signed decimal number (``2``, ``1.5``, ``.5``), then a decimal SI suffix
(``n u m k M G T P E``), a binary one (``Ki Mi Gi Ti Pi Ei``) or an exponent (``e3``,
``E-2``); values are kept to the nano (a finer non-zero value rounds away from zero, as
Kubernetes does) and binary ones are capped at 2^63 - 1. As the kube-scheduler counts
them, cpu totals are rounded up to the millicore and memory totals up to the byte. A
quantity written as a YAML number is read from its text; a null one is 0 (as Kubernetes
decodes it); a quantity over 1e300 or of more than 1,000 digits is refused.

Nodes (the nodes table): ``metadata.name`` (unique); ``status.allocatable`` ``cpu``,
``memory`` (both required) and ``pods`` (-> ``max_pods``; absent: no limit), each taken from
``status.capacity`` where allocatable lacks it (the nodes that needed it are counted in the
notes); GPUs from ``nvidia.com/gpu`` (whole GPUs) or from Alibaba's
``alibabacloud.com/gpu-count`` and ``alibabacloud.com/gpu-milli`` (total milli over the
node's GPUs, so 1,000 x the count; without a count it must be a multiple of 1,000), as
resources (allocatable, then capacity) or node annotations; both kinds present must agree,
or it is an error. ``gpu_model`` from the label ``alibabacloud.com/gpu-card-model``, else
``nvidia.com/gpu.product``; ``labels`` from ``metadata.labels``; ``taints`` from
``spec.taints`` (``{key, value, effect}``, effect NoSchedule, PreferNoSchedule or
NoExecute); ``unschedulable`` from ``spec.unschedulable``. Other resources
(``ephemeral-storage``, ``hugepages-*``, other extended resources) are not modelled:
the notes count the nodes that have each.

Pods (one job row each, ``trace_id`` = ``namespace/name``, namespace ``default`` when
absent; ``queue`` = namespace; ``user`` null; ``estimate_s`` NaN):

- Requests as the kube-scheduler computes them (``PodRequests``): per resource, the sum over
  ``spec.containers[*]`` and the restartable (sidecar: ``restartPolicy: Always``) init
  containers, or more where an init container needs more: each plain init container needs
  its own requests plus the sidecars started before it; then pod-level
  ``spec.resources.requests`` (cpu, memory) replace the containers' sum where set; then
  ``spec.overhead`` is added. A container (or ``spec.resources``) with a limit but no request
  for a resource requests its limit (Kubernetes defaulting; the pod is counted as
  corrected). A negative request is an error.
- GPUs: ``nvidia.com/gpu`` requests (whole GPUs, an integer) -> 1,000 x n milli; or the
  annotations ``alibabacloud.com/gpu-milli`` (milli per GPU, 0..1,000; over 1,000 is an
  error) and ``alibabacloud.com/gpu-count``: count 1 -> the milli; count k >= 2 -> 1,000 k
  (a milli other than 1,000 is corrected to whole GPUs and counted); milli without count ->
  one GPU (counted); count without milli -> whole GPUs; count 0 or milli 0 -> no GPU. Both
  an nvidia request and Alibaba annotations on one pod is an error.
- ``spec.priority`` (an integer; absent: null) -> ``priority``; ``spec.nodeName`` -> ``node``
  (already bound; the notes count pods bound to a node not in the input).
- ``status.phase``: Succeeded or Failed -> dropped ("finished before the import (phase X)");
  Pending, Running, Unknown or absent -> kept; anything else is an error. A pod whose
  ``namespace/name`` was seen before is dropped as a duplicate.
- ``metadata.creationTimestamp`` (RFC 3339, e.g. ``2024-05-01T10:00:00Z``, fractions and
  offsets allowed) -> ``arrival_s`` (seconds, shifted so the first arrival is 0);
  ``metadata.deletionTimestamp`` -> ``run_s`` = deletion - creation (absent: NaN, runs until
  the end of the run; at or before the creation: dropped). A pod without a creation time
  arrives at the earliest creation time of the pods kept (0 s when none has one), keeping
  document order among equal arrivals, and is counted as corrected; its deletion time, if
  any, counts from that arrival (and is ignored, counted, when no pod has a creation time).
- Classes: pods with the same node selector, required node affinity and tolerations share
  one class (`ClassSpec`, compared as sets: the order of keys, expressions, values and
  tolerations does not matter). The unconstrained class is ``pods``; the others are
  ``pods-1``, ``pods-2``, ... in order of first appearance; `Trace.classes` lists the
  classes of the kept pods in order of first appearance. ``spec.nodeSelector`` ->
  ``node_selector`` ``{key: [value]}``;
  ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
  .nodeSelectorTerms`` -> ``node_affinity`` (terms ORed, each term's ``matchExpressions``
  ANDed; operators In, NotIn, Exists, DoesNotExist). ``Gt`` / ``Lt`` expressions and
  ``matchFields`` are not modelled: each such requirement is dropped from its term (the pod
  may then fit more nodes) and counted in the notes; a term left with no requirement matches
  every node. A term that was empty in the input matches no node (as in Kubernetes) and is
  left out; a pod whose terms are all empty is dropped (it can never be placed).
  ``spec.tolerations`` -> ``tolerations`` (``{key, operator, value, effect}``; operator
  Equal, the default, or Exists; effect empty, NoSchedule, PreferNoSchedule or NoExecute;
  ``tolerationSeconds`` ignored). Preferred node affinity, pod (anti-)affinity and
  topology spread constraints are not modelled; the notes count the pods that have them.
- Resources other than cpu, memory and nvidia.com/gpu (``ephemeral-storage``,
  ``hugepages-*``, extended resources) are not modelled: the notes count the pods that
  request each.
- Labels, selector values and toleration values must be strings (a YAML integer or boolean
  is read as its text, ``true`` / ``false``).

Bad input raises `TraceError` naming the file, the row -- the 1-based line where the object
starts (the message adds the object, its document number and list item) -- and the field,
e.g. ``spec.containers[0].resources.requests.cpu``: a malformed quantity, a negative
request, an unknown toleration operator, an object that is not a mapping, YAML that does
not parse (a truncated file: the line where it fails), a compressed, missing or empty
file, or no Node and no Pod in the input at all.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusteremu.cluster.traces.inputs import choice, expect_paths, parse_options
from clusteremu.cluster.traces.kubernetes_quantity import NANO, cores, gigabytes, parse_quantity
from clusteremu.cluster.traces.kubernetes_requests import (
    ALI_COUNT,
    ALI_MILLI,
    GPU_RESOURCE,
    pod_gpu,
    pod_requests,
)
from clusteremu.cluster.traces.kubernetes_yaml import (
    MAX_ALIAS_NODES,
    MAX_FILE_BYTES,
    KubeObject,
    objects,
)
from clusteremu.cluster.traces.kubernetes_yaml import SafeLoader as _Loader
from clusteremu.cluster.traces.table import (
    ClassSpec,
    ImportReport,
    Trace,
    TraceError,
    job_table,
    node_table,
)

__all__ = [
    "ALI_COUNT",
    "ALI_MILLI",
    "DESCRIPTION",
    "FILES",
    "GPU_MODEL_LABELS",
    "GPU_RESOURCE",
    "MAX_ALIAS_NODES",
    "MAX_FILE_BYTES",
    "NAME",
    "OPTIONS",
    "parse_quantity",
    "read",
]

NAME = "kubernetes"
DESCRIPTION = "Kubernetes Node and Pod objects (kube-scheduler requests, selectors, taints)"
FILES = "YAML of Node and Pod objects (kubectl get nodes,pods -o yaml, or multi-document)"
#: Format options (`clusteremu import kubernetes ... --option KEY=VALUE`).
OPTIONS: dict[str, str] = {
    "gpu_annotations": "requests (default): the Alibaba gpu-count / gpu-milli pod annotations "
    "are GPU requests, as Alibaba's GPU-sharing scheduler reads them; ignore: they are not "
    "(the vanilla kube-scheduler sees only resource requests)",
}

GPU_MODEL_LABELS = ("alibabacloud.com/gpu-card-model", "nvidia.com/gpu.product")
_NODE_RESOURCES = {"cpu", "memory", "pods", GPU_RESOURCE, ALI_COUNT, ALI_MILLI}
_KEPT_PHASES = {"Pending", "Running", "Unknown"}
_FINISHED_PHASES = {"Succeeded", "Failed"}
_TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
_TOLERATION_EFFECTS = {"", *_TAINT_EFFECTS}
_AFFINITY_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}
_UNMODELLED_OPERATORS = {"Gt", "Lt"}


def _is_one_of(value: Any, allowed: set[str]) -> bool:
    """Whether `value` is one of the strings `allowed` (False for any other type)."""
    return isinstance(value, str) and value in allowed


# --- nodes ---------------------------------------------------------------------------------


@dataclass
class _Nodes:
    """Columns of the nodes table, filled node by node."""

    name: list[str] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    memory_gb: list[float] = field(default_factory=list)
    gpu: list[int] = field(default_factory=list)
    gpu_model: list[str | None] = field(default_factory=list)
    max_pods: list[int | None] = field(default_factory=list)
    unschedulable: list[bool] = field(default_factory=list)
    labels: list[dict[str, str]] = field(default_factory=list)
    taints: list[list[dict[str, str]]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    capacity_used: int = 0
    unmodelled: Counter[str] = field(default_factory=Counter)


def _read_node(obj: KubeObject, nodes: _Nodes) -> None:
    body = obj.body
    meta = obj.mapping(body.get("metadata"), "metadata")
    name = obj.nonempty(meta.get("name"), "a Node needs a name", "metadata.name")
    if name in nodes.seen:
        raise obj.error(f"node {name!r} appears twice", "metadata.name")
    labels = obj.string_map(meta.get("labels"), "metadata.labels")
    annotations = obj.string_map(meta.get("annotations"), "metadata.annotations")
    spec = obj.mapping(body.get("spec"), "spec")
    status = obj.mapping(body.get("status"), "status")
    alloc = obj.mapping(status.get("allocatable"), "status.allocatable")
    cap = obj.mapping(status.get("capacity"), "status.capacity")
    fell_back = False

    def resource(key: str, annotation: bool = False) -> tuple[int | None, str]:
        nonlocal fell_back
        if key in alloc:
            f = f"status.allocatable.{key}"
            return obj.quantity(alloc[key], f), f
        if key in cap:
            fell_back = True
            f = f"status.capacity.{key}"
            return obj.quantity(cap[key], f), f
        if annotation and key in annotations:
            f = f"metadata.annotations.{key}"
            return obj.quantity(annotations[key], f), f
        return None, f"status.allocatable.{key}"

    cpu, cpu_field = resource("cpu")
    memory, memory_field = resource("memory")
    if cpu is None or memory is None:
        missing = "cpu" if cpu is None else "memory"
        raise obj.error(
            f"a Node needs {missing} in status.allocatable or status.capacity",
            f"status.allocatable.{missing}",
        )
    for value, f in ((cpu, cpu_field), (memory, memory_field)):
        if value < 0:
            raise obj.error("expected a quantity >= 0", f)
    pods, pods_field = resource("pods")
    max_pods = None if pods is None else obj.whole(pods, pods_field)

    nv, nv_field = resource(GPU_RESOURCE)
    nv_gpus = None if nv is None else obj.whole(nv, nv_field)
    count, count_field = resource(ALI_COUNT, annotation=True)
    milli, milli_field = resource(ALI_MILLI, annotation=True)
    ali_gpus: int | None = None
    if count is not None:
        ali_gpus = obj.whole(count, count_field)
        if milli is not None and obj.whole(milli, milli_field) != 1000 * ali_gpus:
            raise obj.error(
                f"{ALI_MILLI} {milli // NANO} is not 1000 x {ALI_COUNT} {ali_gpus}", milli_field
            )
    elif milli is not None:
        total = obj.whole(milli, milli_field)
        if total % 1000:
            raise obj.error(
                f"{ALI_MILLI} {total} without {ALI_COUNT}: expected a multiple of 1000",
                milli_field,
            )
        ali_gpus = total // 1000
    if nv_gpus is not None and ali_gpus is not None and nv_gpus != ali_gpus:
        raise obj.error(f"{GPU_RESOURCE} {nv_gpus} and {ALI_COUNT} {ali_gpus} disagree", nv_field)
    gpus = nv_gpus if nv_gpus is not None else (ali_gpus or 0)

    taints: list[dict[str, str]] = []
    for f, t in obj.mappings(spec.get("taints"), "spec.taints"):
        key = obj.nonempty(t.get("key"), "a taint needs a key", f"{f}.key")
        effect = t.get("effect")
        if not _is_one_of(effect, _TAINT_EFFECTS):
            raise obj.error(
                f"unknown taint effect {effect!r}: expected one of {sorted(_TAINT_EFFECTS)}",
                f"{f}.effect",
            )
        taints.append(
            {
                "key": key,
                "value": obj.text(t.get("value"), f"{f}.value", ""),
                "effect": str(effect),
            }
        )
    unschedulable = spec.get("unschedulable")
    if unschedulable is None:
        unschedulable = False
    if not isinstance(unschedulable, bool):
        raise obj.error(f"expected true or false, got {unschedulable!r}", "spec.unschedulable")

    for key in set(alloc) | set(cap):
        if str(key) not in _NODE_RESOURCES:
            nodes.unmodelled[str(key)] += 1
    nodes.capacity_used += fell_back
    nodes.name.append(name)
    nodes.seen.add(name)
    nodes.cpu.append(cores(cpu))
    nodes.memory_gb.append(gigabytes(memory))
    nodes.gpu.append(gpus)
    nodes.gpu_model.append(next((labels[k] for k in GPU_MODEL_LABELS if k in labels), None))
    nodes.max_pods.append(max_pods)
    nodes.unschedulable.append(unschedulable)
    nodes.labels.append(labels)
    nodes.taints.append(taints)


# --- pods ----------------------------------------------------------------------------------


@dataclass
class _Stats:
    """What the pods had that the notes report."""

    unmodelled: Counter[str] = field(default_factory=Counter)
    dropped_requirements: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)
    priority_class_only: int = 0


def _constraints(
    obj: KubeObject, spec: Mapping[str, Any], stats: _Stats
) -> tuple[ClassSpec, tuple[Any, ...], bool]:
    """The pod's class constraints, their canonical key, and whether its required node
    affinity can match no node (terms all empty)."""
    selector = obj.string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    affinity = obj.mapping(spec.get("affinity"), "spec.affinity")
    node_aff = obj.mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    for key in ("podAffinity", "podAntiAffinity"):
        if affinity.get(key):
            stats.ignored[f"spec.affinity.{key}"] += 1
    if node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"):
        stats.ignored["preferred node affinity"] += 1
    if spec.get("topologySpreadConstraints"):
        stats.ignored["spec.topologySpreadConstraints"] += 1
    base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = obj.mapping(node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"), base)
    terms_in = obj.sequence(required.get("nodeSelectorTerms"), f"{base}.nodeSelectorTerms")
    terms: list[list[dict[str, Any]]] = []
    for tf, term in obj.mappings(terms_in, f"{base}.nodeSelectorTerms"):
        exprs = obj.sequence(term.get("matchExpressions"), f"{tf}.matchExpressions")
        fields = obj.sequence(term.get("matchFields"), f"{tf}.matchFields")
        if not exprs and not fields:
            continue  # an empty term matches no node
        out: list[dict[str, Any]] = []
        for ef, expr in obj.mappings(exprs, f"{tf}.matchExpressions"):
            problem = "a node selector requirement needs a key"
            label = obj.nonempty(expr.get("key"), problem, f"{ef}.key")
            op = expr.get("operator")
            if _is_one_of(op, _UNMODELLED_OPERATORS):
                stats.dropped_requirements[f"operator {op}"] += 1
                continue
            if not _is_one_of(op, _AFFINITY_OPERATORS):
                raise obj.error(
                    f"unknown operator {op!r}: expected one of "
                    f"{sorted(_AFFINITY_OPERATORS | _UNMODELLED_OPERATORS)}",
                    f"{ef}.operator",
                )
            values = [
                obj.text(v, f"{ef}.values[{j}]")
                for j, v in enumerate(obj.sequence(expr.get("values"), f"{ef}.values"))
            ]
            if op in ("Exists", "DoesNotExist"):
                values = []
            out.append({"key": label, "operator": str(op), "values": values})
        stats.dropped_requirements["matchFields"] += len(fields)
        terms.append(out)
    no_match = bool(terms_in) and not terms
    tolerations: list[dict[str, str]] = []
    for f, tol in obj.mappings(spec.get("tolerations"), "spec.tolerations"):
        op = tol.get("operator") or "Equal"
        if not _is_one_of(op, {"Equal", "Exists"}):
            raise obj.error(
                f"unknown toleration operator {op!r}: expected Equal or Exists", f"{f}.operator"
            )
        effect = tol.get("effect") or ""
        if not _is_one_of(effect, _TOLERATION_EFFECTS):
            raise obj.error(
                f"unknown toleration effect {effect!r}: expected one of "
                f"{sorted(_TOLERATION_EFFECTS)}",
                f"{f}.effect",
            )
        tolerations.append(
            {
                "key": obj.text(tol.get("key"), f"{f}.key", ""),
                "operator": str(op),
                "value": obj.text(tol.get("value"), f"{f}.value", ""),
                "effect": str(effect),
            }
        )
    class_key = (
        tuple(sorted(selector.items())),
        tuple(
            sorted(
                {
                    tuple(
                        sorted(
                            {
                                (x["key"], x["operator"], tuple(sorted(set(x["values"]))))
                                for x in term
                            }
                        )
                    )
                    for term in terms
                }
            )
        ),
        tuple(sorted({(t["key"], t["operator"], t["value"], t["effect"]) for t in tolerations})),
    )
    spec_out = ClassSpec(
        name="",
        node_selector={k: [v] for k, v in selector.items()},
        node_affinity=terms,
        tolerations=tolerations,
    )
    return spec_out, class_key, no_match


@dataclass
class _Pod:
    """One kept pod, before arrivals are settled."""

    trace_id: str
    line: int
    file: str
    created: float | None
    deleted: float | None
    cpu: float
    memory_gb: float
    gpu: float
    class_key: tuple[Any, ...]
    queue: str
    priority: int | None
    node: str | None


def _read_pod(
    obj: KubeObject,
    report: ImportReport,
    stats: _Stats,
    seen: set[str],
    classes: dict[tuple[Any, ...], ClassSpec],
    gpu_annotations: bool = True,
) -> _Pod | None:
    """One pod as a job (None: dropped, the report says why); `gpu_annotations`: read the
    Alibaba GPU annotations as requests."""
    body = obj.body
    file = str(obj.path)
    meta = obj.mapping(body.get("metadata"), "metadata")
    name = obj.nonempty(meta.get("name"), "a Pod needs a name", "metadata.name")
    namespace = obj.text(meta.get("namespace"), "metadata.namespace", "default") or "default"
    annotations = obj.string_map(meta.get("annotations"), "metadata.annotations")
    spec = obj.mapping(body.get("spec"), "spec")
    status = obj.mapping(body.get("status"), "status")
    requests, defaulted, unmodelled = pod_requests(obj, spec)
    stats.unmodelled.update(unmodelled)
    gpu = pod_gpu(obj, requests.get(GPU_RESOURCE, 0), annotations if gpu_annotations else {})
    class_spec, key, no_match = _constraints(obj, spec, stats)
    priority = spec.get("priority")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) >= 2**31
    ):
        raise obj.error(f"expected a 32-bit integer priority, got {priority!r}", "spec.priority")
    if priority is None and spec.get("priorityClassName"):
        stats.priority_class_only += 1
    node = spec.get("nodeName")
    if node is not None and (not isinstance(node, str) or not node):
        raise obj.error(f"expected a node name, got {node!r}", "spec.nodeName")
    phase = status.get("phase")
    if phase is not None and not _is_one_of(phase, _KEPT_PHASES | _FINISHED_PHASES):
        raise obj.error(
            f"unknown phase {phase!r}: expected Pending, Running, Succeeded, Failed or Unknown",
            "status.phase",
        )
    created = obj.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    deleted = obj.timestamp(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
    trace_id = f"{namespace}/{name}"

    report.read(1)
    if trace_id in seen:
        report.drop("duplicate pod (namespace/name seen before)", obj.line, file)
        return None
    seen.add(trace_id)
    if phase in _FINISHED_PHASES:
        report.drop(f"finished before the import (phase {phase})", obj.line, file)
        return None
    if no_match:
        report.drop("required node affinity matches no node (only empty terms)", obj.line, file)
        return None
    if defaulted:
        report.correct("requests defaulted to limits (a limit without a request)", obj.line, file)
    for reason in gpu.corrections:
        report.correct(reason, obj.line, file)
    if key not in classes:
        classes[key] = class_spec
    return _Pod(
        trace_id=trace_id,
        line=obj.line,
        file=file,
        created=created,
        deleted=deleted,
        cpu=cores(requests.get("cpu", 0)),
        memory_gb=gigabytes(requests.get("memory", 0)),
        gpu=gpu.milli,
        class_key=key,
        queue=namespace,
        priority=priority,
        node=node,
    )


# --- the reader ----------------------------------------------------------------------------


def _counts(counter: Mapping[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(counter.items()))


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read Kubernetes Node and Pod objects (YAML files, in order) into the common per-job
    table (cpu in cores, memory in GB, GPUs in milli-GPU, times in s), the nodes table
    (None when the input has no Node) and the pods' classes; the module docstring states
    every rule. Raises `TraceError` on bad input."""
    option_spec = {"gpu_annotations": ("requests", choice("requests", "ignore"))}
    opts = parse_options(NAME, options, option_spec, name_as_field=False)
    annotations = opts["gpu_annotations"]
    paths = expect_paths(NAME, paths, FILES)
    report = ImportReport(format=NAME, files=[str(p) for p in paths])
    report.units = {
        "request_cpu": "cores (Kubernetes cpu quantity; pod total rounded up to 1m)",
        "request_memory_gb": "GB = 2^30 bytes (Kubernetes memory quantity, bytes)",
        "request_gpu": "milli-GPU (nvidia.com/gpu x 1000, or alibabacloud.com/gpu-milli)",
        "arrival_s": "s from the first creationTimestamp (RFC 3339)",
        "run_s": "s, deletionTimestamp - creationTimestamp (NaN: not deleted)",
        "nodes.cpu": "cores (status.allocatable.cpu)",
        "nodes.memory_gb": "GB = 2^30 bytes (status.allocatable.memory)",
        "nodes.gpu": "whole GPUs",
    }
    nodes = _Nodes()
    stats = _Stats()
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    classes: dict[tuple[Any, ...], ClassSpec] = {}
    pods: list[_Pod] = []
    n_pods = 0
    # The file limit and the loader as this module holds them when it runs (tests set them).
    for obj in objects(paths, MAX_FILE_BYTES, _Loader):
        if obj.kind == "Node":
            _read_node(obj, nodes)
        elif obj.kind == "Pod":
            n_pods += 1
            pod = _read_pod(obj, report, stats, seen, classes, annotations == "requests")
            if pod is not None:
                pods.append(pod)
        else:
            skipped[obj.kind] += 1
    if not nodes.name and not n_pods:
        raise TraceError(
            ", ".join(str(p) for p in paths),
            "no Node and no Pod object in the input"
            + (f" (only {_counts(skipped)})" if skipped else ""),
        )

    # arrivals and run times
    kept: list[_Pod] = []
    runs: list[float] = []
    for p in pods:
        if p.created is not None and p.deleted is not None and p.deleted <= p.created:
            report.drop("deleted at or before its creation (run time <= 0 s)", p.line, p.file)
            continue
        kept.append(p)
    created = [p.created for p in kept if p.created is not None]
    first = min(created) if created else None
    arrivals: list[float] = []
    final: list[_Pod] = []
    for p in kept:
        arrival = p.created
        if arrival is None:
            report.correct(
                "no metadata.creationTimestamp: arrives at the earliest creation time",
                p.line,
                p.file,
            )
            arrival = first if first is not None else 0.0
            if p.deleted is not None and first is None:
                report.correct(
                    "deletionTimestamp ignored: no creation time in the input", p.line, p.file
                )
                p.deleted = None
        run = math.nan if p.deleted is None else p.deleted - arrival
        if run <= 0:
            report.drop("deleted at or before its creation (run time <= 0 s)", p.line, p.file)
            continue
        final.append(p)
        arrivals.append(arrival)
        runs.append(run)

    # classes, named in order of first appearance among the kept pods
    names: dict[tuple[Any, ...], str] = {}
    class_list: list[ClassSpec] = []
    unconstrained: tuple[Any, ...] = ((), (), ())
    constrained = 0
    for p in final:
        if p.class_key not in names:
            if p.class_key == unconstrained:
                name = "pods"
            else:
                constrained += 1
                name = f"pods-{constrained}"
            names[p.class_key] = name
            spec = classes[p.class_key]
            spec.name = name
            class_list.append(spec)

    jobs = job_table(
        trace_id=[p.trace_id for p in final],
        arrival_s=arrivals,
        run_s=runs,
        request_cpu=[p.cpu for p in final],
        request_memory_gb=[p.memory_gb for p in final],
        request_gpu=[p.gpu for p in final],
        job_class=[names[p.class_key] for p in final],
        queue=[p.queue for p in final],
        priority=[p.priority for p in final],
        node=[p.node for p in final],
    )

    node_names = set(nodes.name)
    notes = report.notes
    if skipped:
        notes.append(f"skipped objects of other kinds: {_counts(skipped)}")
    if nodes.capacity_used:
        notes.append(
            f"status.capacity used for {nodes.capacity_used} node(s) missing "
            "status.allocatable (or some of it)"
        )
    if nodes.unmodelled:
        notes.append(f"node resources not modelled (nodes): {_counts(nodes.unmodelled)}")
    if stats.unmodelled:
        notes.append(f"pod resources not modelled (pods): {_counts(stats.unmodelled)}")
    if stats.dropped_requirements:
        notes.append(
            "required node affinity requirements not modelled, dropped (the pods may fit "
            f"more nodes): {_counts(stats.dropped_requirements)}"
        )
    if stats.ignored:
        notes.append(f"scheduling constraints not modelled (pods): {_counts(stats.ignored)}")
    if stats.priority_class_only:
        notes.append(
            f"{stats.priority_class_only} pods name a priorityClassName without "
            "spec.priority: priority null"
        )
    unbound = sum(1 for p in final if p.node is not None and p.node not in node_names)
    if unbound:
        notes.append(f"{unbound} pods bound (spec.nodeName) to a node not in the input")
    table = (
        node_table(
            node=nodes.name,
            cpu=nodes.cpu,
            memory_gb=nodes.memory_gb,
            gpu=nodes.gpu,
            gpu_model=nodes.gpu_model,
            max_pods=nodes.max_pods,
            unschedulable=nodes.unschedulable,
            labels=nodes.labels,
            taints=nodes.taints,
        )
        if nodes.name
        else None
    )
    return Trace(
        jobs=jobs,
        report=report,
        nodes=table,
        classes=class_list,
        notes={"nodes": len(nodes.name), "pods": n_pods, "skipped": dict(skipped)},
    )
