"""What a Kubernetes pod requests, as the kube-scheduler computes it (``PodRequests``):
cpu, memory and ``nvidia.com/gpu`` summed over the containers and the sidecar init
containers, an init container's need where larger, pod-level requests, the overhead, limits
standing in for missing requests; and its GPUs in milli-GPU from the nvidia requests or
Alibaba's ``gpu-count`` / ``gpu-milli`` annotations (`pod_gpu`). The rules are stated in
`clusteremu.cluster.traces.kubernetes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clusteremu.cluster.traces.kubernetes_yaml import KubeObject
from clusteremu.cluster.traces.table import GPU_MILLI

GPU_RESOURCE = "nvidia.com/gpu"
ALI_COUNT = "alibabacloud.com/gpu-count"
ALI_MILLI = "alibabacloud.com/gpu-milli"
#: The resources of a pod the table models.
POD_RESOURCES = ("cpu", "memory", GPU_RESOURCE)


def _count_of(obj: KubeObject, value: Any, field: str) -> int:
    """A quantity that must be a whole count >= 0 (GPUs, pods)."""
    return obj.whole(obj.quantity(value, field), field)


def _resource_list(
    obj: KubeObject, value: Any, field: str, stats: set[str] | None
) -> dict[str, tuple[int, str]]:
    """The modelled resources of a requests / limits / overhead map: name -> (nano, field);
    names of the others go to `stats`."""
    out: dict[str, tuple[int, str]] = {}
    for key, q in obj.mapping(value, field).items():
        name = str(key)
        if name in POD_RESOURCES:
            f = f"{field}.{name}"
            out[name] = (obj.quantity(q, f), f)
        elif stats is not None:
            stats.add(name)
    return out


def _requests(
    obj: KubeObject, resources: Any, field: str, unmodelled: set[str]
) -> tuple[dict[str, int], bool]:
    """The requests of one container (or of ``spec.resources``) in nano units, limits
    standing in for missing requests (Kubernetes defaulting); and whether any did."""
    res = obj.mapping(resources, field)
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


def pod_requests(obj: KubeObject, spec: Mapping[str, Any]) -> tuple[dict[str, int], bool, set[str]]:
    """Requests of a pod as the kube-scheduler computes them (``PodRequests``), nano units;
    whether Kubernetes defaulting filled a request from a limit; and the resources it
    names that are not modelled."""
    unmodelled: set[str] = set()
    defaulted = False
    containers = obj.sequence(spec.get("containers"), "spec.containers")
    if not containers:
        raise obj.error("a Pod needs at least one container", "spec.containers")
    total: dict[str, int] = {}
    for f, c in obj.mappings(containers, "spec.containers"):
        r, d = _requests(obj, c.get("resources"), f"{f}.resources", unmodelled)
        defaulted |= d
        _add(total, r)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for f, c in obj.mappings(spec.get("initContainers"), "spec.initContainers"):
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
    return total, defaulted, unmodelled


@dataclass
class Gpu:
    """A pod's GPU request, milli-GPU, and the corrections made to reach it."""

    milli: float
    corrections: list[str]


def pod_gpu(obj: KubeObject, nvidia_nano: int, annotations: Mapping[str, str]) -> Gpu:
    """The pod's GPU request from its ``nvidia.com/gpu`` requests (`nvidia_nano`) or the
    Alibaba annotations (the reader's docstring states the rules)."""
    nv_field = "spec.containers[*].resources.requests.nvidia.com/gpu"
    nvidia = obj.whole(nvidia_nano, nv_field) if nvidia_nano else 0
    count_text, milli_text = annotations.get(ALI_COUNT), annotations.get(ALI_MILLI)
    if count_text is None and milli_text is None:
        return Gpu(GPU_MILLI * nvidia, [])
    count_field = f"metadata.annotations.{ALI_COUNT}"
    milli_field = f"metadata.annotations.{ALI_MILLI}"
    count = None if count_text is None else _count_of(obj, count_text, count_field)
    milli = None if milli_text is None else _count_of(obj, milli_text, milli_field)
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
        return Gpu(0.0, corrections)
    if count == 1:
        return Gpu(float(milli), corrections)
    if milli != 1000:
        corrections.append(f"{ALI_MILLI} below 1000 with {ALI_COUNT} >= 2: whole GPUs")
    return Gpu(GPU_MILLI * count, corrections)
