"""The trace formats `clusteremu import` reads: name -> the module that reads it.

Each module defines `NAME`, `DESCRIPTION` (one line), `FILES` (which files to pass),
`OPTIONS` (format option -> help) and `read(paths, options) -> Trace`; it is imported only
when its format is used.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

#: Format name -> reader module (one per format; docs/traces.md).
FORMATS: dict[str, str] = {
    "swf": "clusteremu.cluster.traces.swf",
    "alibaba-2018": "clusteremu.cluster.traces.alibaba_2018",
    "alibaba-gpu-2020": "clusteremu.cluster.traces.alibaba_gpu_2020",
    "alibaba-gpu-2023": "clusteremu.cluster.traces.alibaba_gpu_2023",
    "google-2019": "clusteremu.cluster.traces.google",
    "azure-vm": "clusteremu.cluster.traces.azure",
    "kubernetes": "clusteremu.cluster.traces.kubernetes",
}


def reader(name: str) -> ModuleType:
    """The reader module of format `name` (a KeyError names the known formats)."""
    if name not in FORMATS:
        raise KeyError(f"unknown trace format {name!r}; expected one of {', '.join(FORMATS)}")
    return import_module(FORMATS[name])
