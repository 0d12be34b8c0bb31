"""The world a job runs in: images, data, bandwidths and caches, owned by the engine.

The scenario describes it (`SimulationSpec.world`: the image and data-item catalogue and
the transfers' goodput; workload classes' containers, data and model; node types'
bandwidths and pre-pulled caches). `World.from_spec` resolves it once into tables (which
image each container runs on each node type, sizes, bandwidths); `build_world` packs them
into the engine's arrays (`EngineState.world_f`, `world_i`, `cached`), and the engine's
`start_job` calls `setup_delay` for every start, whatever the placer: a job's set-up delay
(image pulls, model and data downloads, data transfer) is physics, not policy. A scenario
without a world model gets empty tables and no delay.

The set-up rule (seconds) of a job of class c starting on node k of type t:

    registry MB = MB of the items c needs on t that k does not hold, fetched from the
                  registry (each container's image, the class's model, registry data items)
    storage MB  = the same for data items fetched from storage
    setup_s     = registry MB * 8 / (registry Mbit/s * goodput)
                + storage MB * 8 / (storage Mbit/s * goodput)
                + (data in + data out MB) * 8 / (storage Mbit/s * goodput)

Fetched items stay cached on k (never evicted); data in/out moves at every start. Items are
numbered: the catalogue's images, then its data items, then one model per class with a
model (named ``model:<class>``).

Tables (rows named by `WF` and `WI`; T node types, C classes, I items):

- `world_f` (4 + I, max(T, C, 4)): `WF.STATS` counters (`Stat`), then per node type the
  effective registry and storage Mbit/s (bandwidth x goodput; inf = no cost), per class the
  MB moved at every start (in + out), and per item the MB it takes on each node type;
- `world_i` (2 + C * T, max(1 + most needs, I, 4)): a header (C, T, I, most needs), each
  item's `ItemKind`, and for each (class, node type) the items a start needs, in fetch order
  (the containers' images, the model, the data items): [count, item, item, ...].
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.jit import internal_function
from clusteremu.cluster.layout import JI, NI
from clusteremu.cluster.model import Image, JobClass, NodeType, SimulationSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Bits per byte: MB * 8 / Mbit/s = seconds.
BITS_PER_BYTE = 8.0


class WF(IntEnum):
    """Rows of `world_f`."""

    STATS = 0  #: counters over the run (`Stat` columns)
    REGISTRY_MBPS = 1  #: per node type: registry Mbit/s x goodput
    STORAGE_MBPS = 2  #: per node type: storage Mbit/s x goodput
    DATA_MB = 3  #: per class: MB moved at every start (data in + data out)
    SIZES = 4  #: rows SIZES + i: MB of item i on each node type (-1: no build there)


class Stat(IntEnum):
    """Columns of `world_f[WF.STATS]`: what the world moved over the whole run."""

    IMAGE_PULLS = 0  #: images pulled onto a node (one per container image not cached)
    FETCHED_MB = 1  #: MB of images, models and data items fetched onto nodes
    DATA_MB = 2  #: MB of per-start data moved (in + out)
    FETCHES = 3  #: items (images, models, data items) fetched onto nodes


class WI(IntEnum):
    """Rows of `world_i`."""

    HEADER = 0  #: [classes, node types, items, most needs of one start]
    KIND = 1  #: per item: its `ItemKind`
    NEEDS = 2  #: rows NEEDS + c * T + t: [count, item ids in fetch order ...]


class ItemKind(IntEnum):
    """What an item is, and where it comes from."""

    IMAGE = 0  #: a container image (registry)
    MODEL = 1  #: a class's model (registry)
    DATA_REGISTRY = 2  #: a data item fetched from the registry
    DATA_STORAGE = 3  #: a data item fetched from storage


def image_size_on(image: Image, labels: dict[str, str]) -> float | None:
    """MB of `image` on a node with these labels, or None when it cannot run there (no build
    for the node's ``arch`` label, or a required label missing)."""
    arch = labels.get("arch", "")
    size = image.size_mb.get(arch, image.size_mb.get("*"))
    if size is None:
        return None
    if not all(labels.get(k) in allowed for k, allowed in image.requires.items()):
        return None
    return float(size)


@dataclass(frozen=True)
class World:
    """The world model of one scenario, resolved into tables (see the module doc).

    Arrays: `size_mb` (I, T), -1 where an item has no build for a node type; `image_of`
    (C, most containers, T), the item a container runs on a node type (-1: none of its
    images can run there, or no such container); `runnable` (C, T), every container of the
    class has an image for the node type; `needs[c][t]`, the item ids a start fetches
    unless cached, in fetch order; `initial` (T, I), 1.0 for items a node type holds when
    it joins. Bandwidths in Mbit/s (inf = no cost) before the goodput.
    """

    items: tuple[str, ...]
    kinds: IntArray
    size_mb: FloatArray
    registry_mbps: FloatArray
    storage_mbps: FloatArray
    goodput: float
    data_in_mb: FloatArray
    data_out_mb: FloatArray
    image_of: IntArray
    runnable: BoolArray
    needs: tuple[tuple[tuple[int, ...], ...], ...]
    initial: FloatArray
    active: bool

    @property
    def n_items(self) -> int:
        return len(self.items)

    @classmethod
    def from_spec(cls, spec: SimulationSpec) -> World:
        """Resolve `spec`'s world. Raises ValueError naming the class or node type when a
        name refers to no catalogue entry (the scenario loader checks these first)."""
        return _resolve(spec)

    def item(self, name: str) -> int:
        """The id of the item called `name` (KeyError if none)."""
        return self.items.index(name)

    def data_mb(self, c: int) -> float:
        """MB class c moves at every start (in + out)."""
        return float(self.data_in_mb[c] + self.data_out_mb[c])

    def setup_seconds(self, c: int, t: int, cached: npt.ArrayLike) -> float:
        """Set-up delay (s) of a class-c job on a node of type t holding the items marked
        in `cached` (a row of the engine's `cached`): the compiled `setup_delay`'s rule,
        without marking anything."""
        held = np.asarray(cached, dtype=np.float64)
        reg_mb = sto_mb = 0.0
        for i in self.needs[c][t]:
            if i < held.size and held[i] != 0.0:
                continue
            if self.kinds[i] == ItemKind.DATA_STORAGE:
                sto_mb += float(self.size_mb[i, t])
            else:
                reg_mb += float(self.size_mb[i, t])
        registry = float(self.registry_mbps[t]) * self.goodput
        storage = float(self.storage_mbps[t]) * self.goodput
        seconds = reg_mb * BITS_PER_BYTE / registry if reg_mb else 0.0
        if sto_mb:
            seconds += sto_mb * BITS_PER_BYTE / storage
        data = self.data_mb(c)
        if data:
            seconds += data * BITS_PER_BYTE / storage
        return seconds

    def pack(self) -> tuple[FloatArray, IntArray]:
        """(world_f, world_i) for the engine (see the module doc)."""
        n_types = self.registry_mbps.size
        n_classes = self.data_in_mb.size
        n_items = self.n_items
        most = max((len(n) for per_class in self.needs for n in per_class), default=0)
        world_f = np.zeros((int(WF.SIZES) + n_items, max(n_types, n_classes, len(Stat))))
        world_f[WF.REGISTRY_MBPS, :n_types] = self.registry_mbps * self.goodput
        world_f[WF.STORAGE_MBPS, :n_types] = self.storage_mbps * self.goodput
        world_f[WF.DATA_MB, :n_classes] = self.data_in_mb + self.data_out_mb
        world_f[WF.SIZES :, :n_types] = self.size_mb
        width = max(1 + most, n_items, 4)
        world_i = np.zeros((int(WI.NEEDS) + n_classes * n_types, width), dtype=np.int64)
        world_i[WI.HEADER, :4] = (n_classes, n_types, n_items, most)
        world_i[WI.KIND, :n_items] = self.kinds
        for c, per_class in enumerate(self.needs):
            for t, need in enumerate(per_class):
                row = world_i[WI.NEEDS + c * n_types + t]
                row[0] = len(need)
                row[1 : 1 + len(need)] = need
        return world_f, world_i


def _resolve(spec: SimulationSpec) -> World:
    types: tuple[NodeType, ...] = spec.node_types
    classes: tuple[JobClass, ...] = spec.classes
    world = spec.world
    images = {img.name: img for img in world.images}
    items = [img.name for img in world.images] + [d.name for d in world.data_items]
    kinds = [ItemKind.IMAGE] * len(world.images) + [
        ItemKind.DATA_STORAGE if d.source == "storage" else ItemKind.DATA_REGISTRY
        for d in world.data_items
    ]
    sizes: list[list[float]] = [
        [s if (s := image_size_on(img, dict(t.labels))) is not None else -1.0 for t in types]
        for img in world.images
    ]
    sizes += [[float(d.size_mb)] * len(types) for d in world.data_items]
    model_of: dict[int, int] = {}
    for c, jc in enumerate(classes):
        if jc.model_mb > 0:
            model_of[c] = len(items)
            items.append(f"model:{jc.name}")
            kinds.append(ItemKind.MODEL)
            sizes.append([float(jc.model_mb)] * len(types))
    ids = {name: i for i, name in enumerate(items)}
    if len(ids) != len(items):
        raise ValueError("world: image, data item and model names must be unique")
    most = max((len(jc.containers) for jc in classes), default=0)
    image_of = np.full((len(classes), max(most, 1), len(types)), -1, dtype=np.int64)
    runnable = np.ones((len(classes), len(types)), dtype=bool)
    needs: list[tuple[tuple[int, ...], ...]] = []
    for c, jc in enumerate(classes):
        for q, container in enumerate(jc.containers):
            for name in container.images:
                if name not in images:
                    raise ValueError(
                        f"workload class {jc.name!r}: container {q} names image {name!r}, "
                        "which is not in world.images"
                    )
            for t, nt in enumerate(types):
                labels = dict(nt.labels)
                for name in container.images:
                    if image_size_on(images[name], labels) is not None:
                        image_of[c, q, t] = ids[name]
                        break
                else:
                    runnable[c, t] = False
        for name in jc.data_items:
            if name not in ids or kinds[ids[name]] not in (
                ItemKind.DATA_REGISTRY,
                ItemKind.DATA_STORAGE,
            ):
                raise ValueError(
                    f"workload class {jc.name!r}: data item {name!r} is not in world.data_items"
                )
        per_type = []
        for t in range(len(types)):
            need: list[int] = []
            for q in range(len(jc.containers)):
                i = int(image_of[c, q, t])
                if i >= 0 and i not in need:
                    need.append(i)
            if c in model_of:
                need.append(model_of[c])
            for name in jc.data_items:
                if ids[name] not in need:
                    need.append(ids[name])
            per_type.append(tuple(need))
        needs.append(tuple(per_type))
    initial = np.zeros((len(types), len(items)))
    for t, nt in enumerate(types):
        for name in nt.cached:
            if name not in ids:
                raise ValueError(
                    f"node type {nt.name!r}: cached names {name!r}, which is not in "
                    "world.images or world.data_items"
                )
            initial[t, ids[name]] = 1.0
    active = any(
        jc.containers or jc.model_mb > 0 or jc.data_items or jc.data_in_mb or jc.data_out_mb
        for jc in classes
    )
    return World(
        items=tuple(items),
        kinds=np.array(kinds, dtype=np.int64),
        size_mb=np.array(sizes, dtype=np.float64).reshape(len(items), len(types)),
        registry_mbps=np.array([t.registry_mbps for t in types], dtype=np.float64),
        storage_mbps=np.array([t.storage_mbps for t in types], dtype=np.float64),
        goodput=float(world.goodput),
        data_in_mb=np.array([jc.data_in_mb for jc in classes], dtype=np.float64),
        data_out_mb=np.array([jc.data_out_mb for jc in classes], dtype=np.float64),
        image_of=image_of,
        runnable=runnable,
        needs=tuple(needs),
        initial=initial,
        active=bool(active),
    )


def build_world(spec: SimulationSpec) -> tuple[FloatArray, IntArray, int]:
    """(world_f, world_i, number of cacheable items) of a scenario; empty tables when the
    scenario has no world model (no class needs an image, a model or data)."""
    world = World.from_spec(spec)
    if not world.active:
        return np.zeros((0, 0)), np.zeros((0, 0), dtype=np.int64), 0
    world_f, world_i = world.pack()
    return world_f, world_i, world.n_items


def initial_cache(spec: SimulationSpec, node_type: int, items: int) -> FloatArray:
    """The row of `cached` (width max(items, 1)) of a node of type `node_type` when it joins:
    1.0 for the images and data items the type lists in `cached` (pre-pulled)."""
    row = np.zeros(max(items, 1))
    names = spec.node_types[node_type].cached
    if not names or items <= 0:
        return row
    world = spec.world
    catalogue = [img.name for img in world.images] + [d.name for d in world.data_items]
    for name in names:
        if name in catalogue and catalogue.index(name) < items:
            row[catalogue.index(name)] = 1.0
    return row


@internal_function
def setup_delay(s, j: int, k: int) -> float:  # type: ignore[no-untyped-def]
    """Seconds job j needs on node row k before it runs (pulls of the items the node does
    not hold, data transfer; see the module doc); marks what it fetched as cached on k and
    counts it in `world_f[WF.STATS]`."""
    wf, wi = s.world_f, s.world_i
    c = s.jobs_i[JI.CLS, j]
    t = s.nodes_i[NI.NODE_TYPE, k]
    n_types = wi[WI.HEADER, 1]
    row = WI.NEEDS + c * n_types + t
    reg_mb = 0.0
    sto_mb = 0.0
    for q in range(wi[row, 0]):
        i = wi[row, 1 + q]
        if s.cached[k, i] != 0.0:
            continue
        mb = wf[WF.SIZES + i, t]
        kind = wi[WI.KIND, i]
        if kind == ItemKind.DATA_STORAGE:
            sto_mb += mb
        else:
            reg_mb += mb
        if kind == ItemKind.IMAGE:
            wf[WF.STATS, Stat.IMAGE_PULLS] += 1.0
        wf[WF.STATS, Stat.FETCHES] += 1.0
        wf[WF.STATS, Stat.FETCHED_MB] += mb
        s.cached[k, i] = 1.0
    seconds = reg_mb * BITS_PER_BYTE / wf[WF.REGISTRY_MBPS, t] if reg_mb else 0.0
    if sto_mb:
        seconds += sto_mb * BITS_PER_BYTE / wf[WF.STORAGE_MBPS, t]
    data = wf[WF.DATA_MB, c]
    if data:
        seconds += data * BITS_PER_BYTE / wf[WF.STORAGE_MBPS, t]
        wf[WF.STATS, Stat.DATA_MB] += data
    return seconds


__all__ = [
    "BITS_PER_BYTE",
    "WF",
    "WI",
    "ItemKind",
    "Stat",
    "World",
    "build_world",
    "image_size_on",
    "initial_cache",
    "setup_delay",
]
