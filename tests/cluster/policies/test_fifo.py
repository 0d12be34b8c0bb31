"""The baseline policies pass the conformance suites."""

from __future__ import annotations

from cluster.policies.base import Allocator, Placer
from cluster.policies.fifo import Equi, FcfsOneCore, FirstFit, RandomFit
from tests.cluster.policies.conformance import AllocatorConformance, PlacerConformance


class TestFirstFit(PlacerConformance):
    def make_placer(self) -> Placer:
        return FirstFit()


class TestRandomFit(PlacerConformance):
    def make_placer(self) -> Placer:
        return RandomFit()


class TestEqui(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return Equi()


class TestFcfsOneCore(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return FcfsOneCore()

    def check_allocation(self, view, cores) -> None:  # type: ignore[no-untyped-def]
        # Jobs are served in arrival order: a job may hold a core only if all earlier ones do.
        served = cores > 0
        assert not (served[1:] & ~served[:-1]).any()
