"""The engine is composed of parts (`clusteremu.cluster.engine`: store, builder, fault
feed, feeding, operations, policy bridge, loop, façade), read from the code: no part uses
another object's private attribute (`x._name` with `x` other than `self`), no part imports
the façade, and the loop answers every call the compiled loop can hand back."""

from __future__ import annotations

import ast
from pathlib import Path

from clusteremu.cluster.engine import loop
from clusteremu.cluster.layout import Status

PACKAGE = Path(__file__).resolve().parents[2] / "cluster" / "engine"
PARTS = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
#: A named tuple's public methods (`EngineState._replace`) carry an underscore by design.
NAMED_TUPLE_API = {"_replace", "_asdict", "_fields", "_make"}


def test_the_engine_is_the_parts_listed_in_its_docstring() -> None:
    from clusteremu.cluster import engine

    names = {p.stem for p in PARTS}
    assert names == {
        "builder",
        "compaction",
        "facade",
        "fault_feed",
        "feeding",
        "loop",
        "operations",
        "policy_bridge",
        "sinks",
        "store",
        "streaming",
    }
    for name in names:
        assert f"`{name}`" in (engine.__doc__ or ""), name


def test_no_part_uses_another_objects_private_attributes() -> None:
    wrong = []
    for path in PARTS:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in NAMED_TUPLE_API
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                wrong.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not wrong, wrong


def test_only_the_package_imports_the_facade() -> None:
    for path in PARTS:
        if path.stem == "facade":
            continue
        text = path.read_text()
        assert "engine.facade" not in text and "engine import Engine" not in text, path.name


def test_the_loop_has_an_answer_for_every_call() -> None:
    """Every status the compiled loop returns is a call (answered) or an end (FINISHED,
    PAUSED, YIELDED): a new call kind needs its entry in `loop.CALLS`."""
    ends = {Status.FINISHED, Status.PAUSED, Status.YIELDED}
    # never returned now: the Python placer is called from inside the loop
    retired = {Status.NEED_PLACE_DECISION}
    assert set(Status) == set(loop.CALLS) | ends | retired
    assert len(set(loop.CALLS)) == len(loop.CALLS)
