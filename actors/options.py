"""`RayRunOptions`: how one run is spread over Ray actors (shards, window, pacing, pinning)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RayRunOptions:
    """How to spread one run over actors.

    `shards`: node shard actors (nodes are split into contiguous slices); `window_s`: 0 for
    exact mode, else the windowed mode's window in simulated seconds; `realtime`: pace
    windows to the wall clock times this factor (windowed; default window 1 s);
    `shard_resources`: Ray custom resources per node shard (cycled), e.g. to pin shards
    to particular machines (without it, a shard whose nodes are all of type T goes to a
    machine offering the resource `node-type-T` when the cluster has one); `shard_cpus`:
    CPUs each shard actor reserves.
    """

    shards: int = 1
    window_s: float = 0.0
    realtime: float = 0.0
    run_name: str = ""
    shard_resources: tuple[dict[str, float], ...] = ()
    shard_cpus: float = 0.0
    metrics: bool = True

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise ValueError(f"shards must be at least 1, got {self.shards}")
        if not (self.window_s >= 0 and math.isfinite(self.window_s)):
            raise ValueError(f"window must be a finite number of seconds >= 0, got {self.window_s}")
        if not (self.realtime >= 0 and math.isfinite(self.realtime)):
            raise ValueError(f"realtime must be a finite factor >= 0, got {self.realtime}")
        if not (self.shard_cpus >= 0 and math.isfinite(self.shard_cpus)):
            raise ValueError(f"shard CPUs must be a finite number >= 0, got {self.shard_cpus}")

    @property
    def mode(self) -> str:
        return (
            "exact"
            if self.window_s == 0 and self.realtime == 0
            else ("realtime" if self.realtime > 0 else "windowed")
        )

    @property
    def effective_window_s(self) -> float:
        return self.window_s if self.window_s > 0 else 1.0
