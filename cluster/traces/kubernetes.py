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

import calendar
import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster.traces.table import (
    GPU_MILLI,
    ClassSpec,
    ImportReport,
    Trace,
    TraceError,
    job_table,
    node_table,
)

NAME = "kubernetes"
DESCRIPTION = "Kubernetes Node and Pod objects (kube-scheduler requests, selectors, taints)"
FILES = "YAML of Node and Pod objects (kubectl get nodes,pods -o yaml, or multi-document)"
#: Format options (`clusteremu import kubernetes ... --option KEY=VALUE`).
OPTIONS: dict[str, str] = {
    "gpu_annotations": "requests (default): the Alibaba gpu-count / gpu-milli pod annotations "
    "are GPU requests, as Alibaba's GPU-sharing scheduler reads them; ignore: they are not "
    "(the vanilla kube-scheduler sees only resource requests)",
}

#: A file larger than this is refused, bytes (512 MiB).
MAX_FILE_BYTES = 512 * 2**20
#: Nodes that aliases may add to one document once expanded (a billion-laughs guard).
MAX_ALIAS_NODES = 100_000
#: A quantity above this is refused (it would not fit the float the table keeps).
MAX_QUANTITY = 10**300

NANO = 10**9
BYTES_PER_GB = 2**30
#: Largest binary-SI quantity Kubernetes keeps (it caps larger ones silently), nano units.
_BINARY_CAP_NANO = (2**63 - 1) * NANO

_DECIMAL_SUFFIX = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Kubernetes' scanner: sign, digits, optional fraction, suffix letters, optional signed digits.
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)")
_RFC3339_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)
_COMPRESSED = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}

GPU_RESOURCE = "nvidia.com/gpu"
ALI_COUNT = "alibabacloud.com/gpu-count"
ALI_MILLI = "alibabacloud.com/gpu-milli"
GPU_MODEL_LABELS = ("alibabacloud.com/gpu-card-model", "nvidia.com/gpu.product")
_NODE_RESOURCES = {"cpu", "memory", "pods", GPU_RESOURCE, ALI_COUNT, ALI_MILLI}
_POD_RESOURCES = ("cpu", "memory", GPU_RESOURCE)
_KEPT_PHASES = {"Pending", "Running", "Unknown"}
_FINISHED_PHASES = {"Succeeded", "Failed"}
_TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
_TOLERATION_EFFECTS = {"", *_TAINT_EFFECTS}
_AFFINITY_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}
_UNMODELLED_OPERATORS = {"Gt", "Lt"}

Where = tuple[Path | str, int | None, str]
"""Where a value was read, for a `TraceError`: (file, 1-based row or None, field)."""

_SafeBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeBase):  # type: ignore[valid-type, misc]
    """PyYAML's safe loader (libyaml's when installed): only plain YAML types are built."""


# --- quantities ----------------------------------------------------------------------------


class _QuantityError(ValueError):
    """A quantity Kubernetes would refuse (the message says why)."""


def _quantity_nano(text: str | int | float) -> int:
    """A Kubernetes ``resource.Quantity`` as an exact integer of nano units (1e-9), parsed as
    ``resource.ParseQuantity`` parses it (the value rounded away from zero to the nano, a
    binary-SI value capped at 2^63 - 1). Raises `_QuantityError`."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise _QuantityError(f"expected a quantity (a string such as '500m'), got {text!r}")
    if isinstance(text, float):
        if not math.isfinite(text):
            raise _QuantityError(f"expected a finite quantity, got {text!r}")
        text = repr(text)
    s = str(text).strip()
    if not s:
        raise _QuantityError("expected a quantity, got an empty string")
    m = _QUANTITY_RE.fullmatch(s)
    if m is None:
        raise _QuantityError(f"malformed quantity {s!r}")
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    binary = False
    if suffix in _DECIMAL_SUFFIX:
        exponent = _DECIMAL_SUFFIX[suffix]
    elif suffix in _BINARY_SUFFIX:
        exponent, binary = _BINARY_SUFFIX[suffix], True
    else:
        e = _EXPONENT_RE.fullmatch(suffix)
        if e is None or len(e.group(1)) > 20 or abs(int(e.group(1))) >= 2**63:
            raise _QuantityError(f"malformed quantity {s!r}: unknown suffix {suffix!r}")
        exponent = int(e.group(1))
    digits = (whole + frac).lstrip("0")
    if not (whole + frac):
        # No digit at all ("m", "Ki", "-"): Kubernetes reads 0 on its fast path, and refuses
        # it where it would take its slow path (a scale below nano, or Pi / Ei).
        if (not binary and exponent < -9) or (binary and exponent >= 50):
            raise _QuantityError(f"malformed quantity {s!r}: no digits")
        return 0
    if not digits:
        return 0
    if len(digits) > 1000:
        raise _QuantityError(f"quantity of {len(digits)} digits: more than 1000")
    mantissa = int(digits)
    if binary:
        nano = (mantissa << exponent) * NANO
        # exact: mantissa x 2^exp / 10^len(frac), rounded away from zero to the nano
        scale = len(frac)
        q, r = divmod(nano, 10**scale)
        nano = min(q + (1 if r else 0), _BINARY_CAP_NANO)
    else:
        scale10 = exponent - len(frac) + 9  # nano = mantissa x 10^scale10
        if len(digits) + scale10 > 300 + 9:
            raise _QuantityError(f"quantity {s!r} out of range (over 1e300)")
        if scale10 >= 0:
            nano = mantissa * 10**scale10
        elif len(digits) < -scale10:
            nano = 1  # below one nano: rounds up to 1n
        else:
            q, r = divmod(mantissa, 10**-scale10)
            nano = q + (1 if r else 0)
    if nano > MAX_QUANTITY * NANO:
        raise _QuantityError(f"quantity {s!r} out of range (over 1e300)")
    return -nano if sign == "-" else nano


def parse_quantity(text: str | int | float, where: Where = ("quantity", None, "")) -> float:
    """A Kubernetes ``resource.Quantity`` as the plain number: cores for cpu, bytes for
    memory, a count for ``pods`` and GPUs. Parsed exactly as Kubernetes parses it:
    ``"64000m"`` -> 64.0, ``"1.5"``, ``"2"``, ``"262144Mi"`` -> 2^38, ``"256Gi"``, ``"1e9"``,
    ``"129M"``, ``"1k"``, ``"1Ki"``, ``"100n"`` -> 1e-7; decimal SI suffixes n u m k M G T P
    E, binary Ki Mi Gi Ti Pi Ei, exponents e / E; kept to the nano, rounding a finer value
    away from zero. A YAML number is read from its text.

    `where` is (file, row, field) for the `TraceError` a malformed quantity raises.
    """
    try:
        return _quantity_nano(text) / NANO
    except _QuantityError as e:
        raise TraceError(where[0], str(e), where[1], where[2]) from None


# --- YAML ----------------------------------------------------------------------------------


@dataclass
class _Object:
    """One Kubernetes object of the input and where it was found."""

    kind: str
    body: Mapping[str, Any]
    path: Path
    line: int  # 1-based line where the object starts
    doc: int  # 1-based document number in its file
    item: int | None  # index in a List's items

    def name(self) -> str:
        meta = self.body.get("metadata")
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            ns = meta.get("namespace")
            if self.kind == "Pod":
                return f"{ns if isinstance(ns, str) and ns else 'default'}/{meta['name']}"
            return str(meta["name"])
        return "(no name)"

    def error(self, problem: str, field: str = "") -> TraceError:
        """A `TraceError` at this object: row = its line; the message says which object."""
        item = f", items[{self.item}]" if self.item is not None else ""
        where = f"{self.kind} {self.name()} at line {self.line}, document {self.doc}{item}"
        return TraceError(self.path, f"{problem} ({where})", self.line, field)


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_graph(root: yaml.Node, path: Path, doc: int) -> None:
    """Refuse a document whose aliases loop or expand it past `MAX_ALIAS_NODES` (iterative:
    no recursion, linear in the distinct nodes)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            on_path.discard(key)
            continue
        if key in size:
            continue  # an alias of a node already counted
        if key in on_path:
            raise TraceError(
                path, f"an alias refers to itself (document {doc})", _line(node), "alias"
            )
        on_path.add(key)
        distinct += 1
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(_children(node)))
    if size[id(root)] - distinct > MAX_ALIAS_NODES:
        raise TraceError(
            path,
            f"aliases expand document {doc} by {size[id(root)] - distinct:,} nodes (more "
            f"than {MAX_ALIAS_NODES:,}: a billion-laughs document?)",
            _line(root),
            "alias",
        )


def _read_text(path: Path) -> str:
    """The file's text, after the checks on size, emptiness and compression."""
    if not path.is_file():
        raise TraceError(path, "no such file")
    size = path.stat().st_size
    if size == 0:
        raise TraceError(path, "empty file: expected YAML of Node and Pod objects")
    if size > MAX_FILE_BYTES:
        raise TraceError(
            path, f"file of {size:,} bytes: over the limit of {MAX_FILE_BYTES:,} bytes"
        )
    raw = path.read_bytes()
    for magic, kind in _COMPRESSED.items():
        if raw.startswith(magic):
            raise TraceError(path, f"a {kind}-compressed file: decompress it first", 1)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise TraceError(path, f"not UTF-8 text ({e.reason})", line) from None


def _yaml_error(path: Path, e: yaml.YAMLError) -> TraceError:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    context = getattr(e, "context", None)
    text = f"not valid YAML: {problem}" + (f" ({context})" if context else "")
    return TraceError(path, text, None if mark is None else int(mark.line) + 1)


def _documents(path: Path) -> Iterator[tuple[int, Any, yaml.Node]]:
    """(1-based document number, its data, its root node) for each non-empty document."""
    text = _read_text(path)
    check = "*" in text  # no alias without a '*': nothing to expand
    loader = _Loader(text)
    doc = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            doc += 1
            if node is None:
                continue
            if check:
                _check_graph(node, path, doc)
            try:
                data = loader.construct_document(node)
            except (ValueError, TypeError, OverflowError) as e:
                raise TraceError(
                    path, f"bad YAML value in document {doc}: {e}", _line(node)
                ) from None
            yield doc, data, node
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    except RecursionError:
        raise TraceError(path, "YAML nested too deeply to parse") from None
    finally:
        loader.dispose()


def _item_lines(node: yaml.Node, count: int) -> list[int]:
    """The line of each item of a List document's ``items`` (the List's line where the
    nodes do not match the data, e.g. after merge keys)."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if (
                isinstance(k, yaml.ScalarNode)
                and k.value == "items"
                and isinstance(v, yaml.SequenceNode)
                and len(v.value) == count
            ):
                return [_line(x) for x in v.value]
    return [_line(node)] * count


def _objects(paths: Sequence[Path]) -> Iterator[_Object]:
    """Every object of the input, Lists unpacked, in file / document / item order."""
    for path in paths:
        found = False
        for doc, data, node in _documents(path):
            if data is None:
                continue  # an empty document
            found = True
            line = _line(node)
            if not isinstance(data, Mapping):
                raise TraceError(
                    path,
                    f"expected a Kubernetes object (a mapping) in document {doc}, got "
                    f"{type(data).__name__}",
                    line,
                )
            kind = data.get("kind")
            if not isinstance(kind, str) or not kind:
                raise TraceError(path, f"no kind in document {doc}", line, "kind")
            if kind == "List" or (kind.endswith("List") and "items" in data):
                items = data.get("items") or []
                if not isinstance(items, list):
                    raise TraceError(
                        path, f"expected a list of objects (document {doc})", line, "items"
                    )
                lines = _item_lines(node, len(items))
                default = kind[: -len("List")] if kind != "List" else None
                for i, item in enumerate(items):
                    if not isinstance(item, Mapping):
                        raise TraceError(
                            path,
                            f"expected a Kubernetes object (a mapping) as item {i} of the "
                            f"{kind} at line {line}, document {doc}; got {type(item).__name__}",
                            lines[i],
                            f"items[{i}]",
                        )
                    item_kind = item.get("kind") or default
                    if not isinstance(item_kind, str):
                        raise TraceError(
                            path,
                            f"no kind for item {i} of the {kind} (document {doc})",
                            lines[i],
                            f"items[{i}].kind",
                        )
                    yield _Object(item_kind, item, path, lines[i], doc, i)
            else:
                yield _Object(kind, data, path, line, doc, None)
        if not found:
            raise TraceError(path, "no YAML object in the file (only blanks or comments)")


# --- field helpers -------------------------------------------------------------------------


def _is_one_of(value: Any, allowed: set[str]) -> bool:
    """Whether `value` is one of the strings `allowed` (False for any other type)."""
    return isinstance(value, str) and value in allowed


def _mapping(obj: _Object, value: Any, field: str) -> Mapping[str, Any]:
    """A mapping field (absent / null: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise obj.error(f"expected a mapping, got {type(value).__name__}", field)
    return value


def _list(obj: _Object, value: Any, field: str) -> list[Any]:
    """A list field (absent / null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise obj.error(f"expected a list, got {type(value).__name__}", field)
    return value


def _text(obj: _Object, value: Any, field: str, default: str | None = None) -> str:
    """A string field; a YAML integer or boolean is read as its text; null: `default`."""
    if value is None and default is not None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    raise obj.error(f"expected a string, got {value!r}", field)


def _string_map(obj: _Object, value: Any, field: str) -> dict[str, str]:
    """A map of string -> string (labels, annotations, a node selector)."""
    out: dict[str, str] = {}
    for k, v in _mapping(obj, value, field).items():
        key = _text(obj, k, field)
        out[key] = _text(obj, v, f"{field}.{key}", "")
    return out


def _quantity(obj: _Object, value: Any, field: str) -> int:
    """A quantity field in nano units (null: 0), errors naming the field."""
    if value is None:
        return 0
    try:
        return _quantity_nano(value)
    except _QuantityError as e:
        raise obj.error(str(e), field) from None


def _whole(obj: _Object, nano: int, field: str) -> int:
    """A quantity that must be a whole count >= 0 (GPUs, pods)."""
    if nano < 0 or nano % NANO:
        raise obj.error(f"expected a whole number >= 0, got {nano / NANO:g}", field)
    return nano // NANO


def _timestamp(obj: _Object, value: Any, field: str) -> float | None:
    """RFC 3339 time (or a YAML timestamp) -> seconds since the epoch (None: absent)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()
    if not isinstance(value, str):
        raise obj.error(f"expected an RFC 3339 time, got {value!r}", field)
    m = _RFC3339_RE.fullmatch(value.strip())
    if m is None:
        raise obj.error(
            f"expected an RFC 3339 time such as 2024-05-01T10:00:00Z, got {value!r}", field
        )
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    try:
        dt.datetime(y, mo, d, h, mi, s)
    except ValueError as e:
        raise obj.error(f"bad time {value!r}: {e}", field) from None
    t = float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    if m.group(7):
        t += float("0" + m.group(7))
    tz = m.group(8)
    if tz != "Z":
        off = int(tz[1:3]) * 3600 + int(tz[4:6]) * 60
        t -= off if tz[0] == "+" else -off
    return t


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


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _read_node(obj: _Object, nodes: _Nodes) -> None:
    body = obj.body
    meta = _mapping(obj, body.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise obj.error("a Node needs a name", "metadata.name")
    if name in nodes.seen:
        raise obj.error(f"node {name!r} appears twice", "metadata.name")
    labels = _string_map(obj, meta.get("labels"), "metadata.labels")
    annotations = _string_map(obj, meta.get("annotations"), "metadata.annotations")
    spec = _mapping(obj, body.get("spec"), "spec")
    status = _mapping(obj, body.get("status"), "status")
    alloc = _mapping(obj, status.get("allocatable"), "status.allocatable")
    cap = _mapping(obj, status.get("capacity"), "status.capacity")
    fell_back = False

    def resource(key: str, annotation: bool = False) -> tuple[int | None, str]:
        nonlocal fell_back
        if key in alloc:
            f = f"status.allocatable.{key}"
            return _quantity(obj, alloc[key], f), f
        if key in cap:
            fell_back = True
            f = f"status.capacity.{key}"
            return _quantity(obj, cap[key], f), f
        if annotation and key in annotations:
            f = f"metadata.annotations.{key}"
            return _quantity(obj, annotations[key], f), f
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
    max_pods = None if pods is None else _whole(obj, pods, pods_field)

    nv, nv_field = resource(GPU_RESOURCE)
    nv_gpus = None if nv is None else _whole(obj, nv, nv_field)
    count, count_field = resource(ALI_COUNT, annotation=True)
    milli, milli_field = resource(ALI_MILLI, annotation=True)
    ali_gpus: int | None = None
    if count is not None:
        ali_gpus = _whole(obj, count, count_field)
        if milli is not None and _whole(obj, milli, milli_field) != 1000 * ali_gpus:
            raise obj.error(
                f"{ALI_MILLI} {milli // NANO} is not 1000 x {ALI_COUNT} {ali_gpus}", milli_field
            )
    elif milli is not None:
        total = _whole(obj, milli, milli_field)
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
    for i, t in enumerate(_list(obj, spec.get("taints"), "spec.taints")):
        f = f"spec.taints[{i}]"
        t = _mapping(obj, t, f)
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise obj.error("a taint needs a key", f"{f}.key")
        effect = t.get("effect")
        if not _is_one_of(effect, _TAINT_EFFECTS):
            raise obj.error(
                f"unknown taint effect {effect!r}: expected one of {sorted(_TAINT_EFFECTS)}",
                f"{f}.effect",
            )
        taints.append(
            {
                "key": key,
                "value": _text(obj, t.get("value"), f"{f}.value", ""),
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
    nodes.cpu.append(_ceil_div(cpu, 10**6) / 1000)
    nodes.memory_gb.append(_ceil_div(memory, NANO) / BYTES_PER_GB)
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


def _resource_list(
    obj: _Object, value: Any, field: str, stats: set[str] | None
) -> dict[str, tuple[int, str]]:
    """The modelled resources of a requests / limits / overhead map: name -> (nano, field);
    names of the others go to `stats`."""
    out: dict[str, tuple[int, str]] = {}
    for key, q in _mapping(obj, value, field).items():
        name = str(key)
        if name in _POD_RESOURCES:
            f = f"{field}.{name}"
            out[name] = (_quantity(obj, q, f), f)
        elif stats is not None:
            stats.add(name)
    return out


def _requests(
    obj: _Object, resources: Any, field: str, unmodelled: set[str]
) -> tuple[dict[str, int], bool]:
    """The requests of one container (or of ``spec.resources``) in nano units, limits
    standing in for missing requests (Kubernetes defaulting); and whether any did."""
    res = _mapping(obj, resources, field)
    requests = _resource_list(obj, res.get("requests"), f"{field}.requests", unmodelled)
    limits = _resource_list(obj, res.get("limits"), f"{field}.limits", unmodelled)
    defaulted = False
    for name, (q, f) in limits.items():
        if q < 0:
            raise obj.error("expected a limit >= 0", f)
        if name not in requests:
            requests[name] = (q, f)
            defaulted = True
    # an unmodelled limit without request also defaults, but is not modelled: no count
    out: dict[str, int] = {}
    for name, (q, f) in requests.items():
        if q < 0:
            raise obj.error("expected a request >= 0", f)
        out[name] = q
    return out, defaulted


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = max(into.get(k, 0), v)


def _pod_requests(
    obj: _Object, spec: Mapping[str, Any], stats: _Stats
) -> tuple[dict[str, int], bool]:
    """Requests of a pod as the kube-scheduler computes them (``PodRequests``), nano units;
    and whether Kubernetes defaulting filled a request from a limit."""
    unmodelled: set[str] = set()
    defaulted = False
    containers = _list(obj, spec.get("containers"), "spec.containers")
    if not containers:
        raise obj.error("a Pod needs at least one container", "spec.containers")
    total: dict[str, int] = {}
    for i, c in enumerate(containers):
        f = f"spec.containers[{i}]"
        c = _mapping(obj, c, f)
        r, d = _requests(obj, c.get("resources"), f"{f}.resources", unmodelled)
        defaulted |= d
        _add(total, r)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(_list(obj, spec.get("initContainers"), "spec.initContainers")):
        f = f"spec.initContainers[{i}]"
        c = _mapping(obj, c, f)
        r, d = _requests(obj, c.get("resources"), f"{f}.resources", unmodelled)
        defaulted |= d
        if c.get("restartPolicy") == "Always":  # a sidecar: runs beside the containers
            _add(total, r)
            _add(sidecars, r)
            need = dict(sidecars)
        else:
            need = dict(r)
            _add(need, sidecars)
        _max(init_max, need)
    _max(total, init_max)
    if spec.get("resources") is not None:
        r, d = _requests(obj, spec.get("resources"), "spec.resources", unmodelled)
        for name in ("cpu", "memory"):
            if name in r:
                total[name] = r[name]
                defaulted |= d
    overhead = _resource_list(obj, spec.get("overhead"), "spec.overhead", unmodelled)
    for name, (q, f) in overhead.items():
        if q < 0:
            raise obj.error("expected an overhead >= 0", f)
        total[name] = total.get(name, 0) + q
    for name in unmodelled:
        stats.unmodelled[name] += 1
    return total, defaulted


@dataclass
class _Gpu:
    """A pod's GPU request, milli-GPU, and the corrections made to reach it."""

    milli: float
    corrections: list[str]


def _pod_gpu(obj: _Object, nvidia_nano: int, annotations: Mapping[str, str]) -> _Gpu:
    nv_field = "spec.containers[*].resources.requests.nvidia.com/gpu"
    nvidia = _whole(obj, nvidia_nano, nv_field) if nvidia_nano else 0
    count_text, milli_text = annotations.get(ALI_COUNT), annotations.get(ALI_MILLI)
    if count_text is None and milli_text is None:
        return _Gpu(GPU_MILLI * nvidia, [])
    count_field = f"metadata.annotations.{ALI_COUNT}"
    milli_field = f"metadata.annotations.{ALI_MILLI}"
    count = (
        None
        if count_text is None
        else _whole(obj, _quantity(obj, count_text, count_field), count_field)
    )
    milli = (
        None
        if milli_text is None
        else _whole(obj, _quantity(obj, milli_text, milli_field), milli_field)
    )
    if milli is not None and milli > 1000:
        raise obj.error(
            f"{ALI_MILLI} {milli} is over 1000 (it is the share of each GPU, in milli)",
            milli_field,
        )
    if nvidia and (count or milli):
        raise obj.error(
            f"both {GPU_RESOURCE} requests and Alibaba GPU annotations: which one?", count_field
        )
    corrections: list[str] = []
    if count is None:
        count = 1
        if milli:
            corrections.append(f"{ALI_MILLI} without {ALI_COUNT}: one GPU")
    if milli is None:
        milli = 1000
    if count == 0 or milli == 0:
        return _Gpu(0.0, corrections)
    if count == 1:
        return _Gpu(float(milli), corrections)
    if milli != 1000:
        corrections.append(f"{ALI_MILLI} below 1000 with {ALI_COUNT} >= 2: whole GPUs")
    return _Gpu(GPU_MILLI * count, corrections)


def _constraints(
    obj: _Object, spec: Mapping[str, Any], stats: _Stats
) -> tuple[ClassSpec, tuple[Any, ...], bool]:
    """The pod's class constraints, their canonical key, and whether its required node
    affinity can match no node (terms all empty)."""
    selector = _string_map(obj, spec.get("nodeSelector"), "spec.nodeSelector")
    affinity = _mapping(obj, spec.get("affinity"), "spec.affinity")
    node_aff = _mapping(obj, affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    for key in ("podAffinity", "podAntiAffinity"):
        if affinity.get(key):
            stats.ignored[f"spec.affinity.{key}"] += 1
    if node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"):
        stats.ignored["preferred node affinity"] += 1
    if spec.get("topologySpreadConstraints"):
        stats.ignored["spec.topologySpreadConstraints"] += 1
    base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _mapping(obj, node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"), base)
    terms_in = _list(obj, required.get("nodeSelectorTerms"), f"{base}.nodeSelectorTerms")
    terms: list[list[dict[str, Any]]] = []
    for t, term in enumerate(terms_in):
        tf = f"{base}.nodeSelectorTerms[{t}]"
        term = _mapping(obj, term, tf)
        exprs = _list(obj, term.get("matchExpressions"), f"{tf}.matchExpressions")
        fields = _list(obj, term.get("matchFields"), f"{tf}.matchFields")
        if not exprs and not fields:
            continue  # an empty term matches no node
        out: list[dict[str, Any]] = []
        for e, expr in enumerate(exprs):
            ef = f"{tf}.matchExpressions[{e}]"
            expr = _mapping(obj, expr, ef)
            label = expr.get("key")
            if not isinstance(label, str) or not label:
                raise obj.error("a node selector requirement needs a key", f"{ef}.key")
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
                _text(obj, v, f"{ef}.values[{j}]")
                for j, v in enumerate(_list(obj, expr.get("values"), f"{ef}.values"))
            ]
            if op in ("Exists", "DoesNotExist"):
                values = []
            out.append({"key": label, "operator": str(op), "values": values})
        stats.dropped_requirements["matchFields"] += len(fields)
        terms.append(out)
    no_match = bool(terms_in) and not terms
    tolerations: list[dict[str, str]] = []
    for i, tol in enumerate(_list(obj, spec.get("tolerations"), "spec.tolerations")):
        f = f"spec.tolerations[{i}]"
        tol = _mapping(obj, tol, f)
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
                "key": _text(obj, tol.get("key"), f"{f}.key", ""),
                "operator": str(op),
                "value": _text(obj, tol.get("value"), f"{f}.value", ""),
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
    obj: _Object,
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
    meta = _mapping(obj, body.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise obj.error("a Pod needs a name", "metadata.name")
    namespace = _text(obj, meta.get("namespace"), "metadata.namespace", "default") or "default"
    annotations = _string_map(obj, meta.get("annotations"), "metadata.annotations")
    spec = _mapping(obj, body.get("spec"), "spec")
    status = _mapping(obj, body.get("status"), "status")
    requests, defaulted = _pod_requests(obj, spec, stats)
    gpu = _pod_gpu(obj, requests.get(GPU_RESOURCE, 0), annotations if gpu_annotations else {})
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
    created = _timestamp(obj, meta.get("creationTimestamp"), "metadata.creationTimestamp")
    deleted = _timestamp(obj, meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
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
        cpu=_ceil_div(requests.get("cpu", 0), 10**6) / 1000,
        memory_gb=_ceil_div(requests.get("memory", 0), NANO) / BYTES_PER_GB,
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
    options = dict(options or {})
    for key in options:
        if key not in OPTIONS:
            raise TraceError(
                "options", f"unknown option {key!r}: expected one of {', '.join(OPTIONS)}"
            )
    annotations = options.get("gpu_annotations", "requests")
    if annotations not in ("requests", "ignore"):
        raise TraceError("options", f"gpu_annotations={annotations!r}: expected requests or ignore")
    paths = [Path(p) for p in paths]
    if not paths:
        raise TraceError("(no files)", f"the {NAME} reader needs at least one YAML file")
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
    for obj in _objects(paths):
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
