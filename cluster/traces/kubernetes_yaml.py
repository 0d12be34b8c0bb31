"""Kubernetes objects from YAML, safely: files read with PyYAML's *safe* loader only
(libyaml's when installed), documents whose aliases loop or would expand them past
`MAX_ALIAS_NODES` refused before they are built (a billion-laughs guard that walks the
nodes without recursion), nesting deeper than the parser allows refused, and every object
(`KubeObject`, ``kind: List`` items unpacked by `objects`) kept with the line where it
starts.

`KubeObject` walks its fields (`mapping`, `sequence`, `mappings`, `nonempty`, `text`,
`string_map`, `quantity`, `whole`, `timestamp`): a field of the wrong type is a
`TraceError` that names the file, the object's line, the object (kind, name, document,
list item) and the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusteremu.cluster.traces.kubernetes_quantity import (
    NANO,
    QuantityError,
    quantity_nano,
    rfc3339_seconds,
)
from clusteremu.cluster.traces.table import TraceError
from clusteremu.cluster.traces.text_files import check_file, compression

#: A file larger than this is refused, bytes (512 MiB).
MAX_FILE_BYTES = 512 * 2**20
#: Nodes that aliases may add to one document once expanded (a billion-laughs guard).
MAX_ALIAS_NODES = 100_000

_SafeBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SafeLoader(_SafeBase):  # type: ignore[valid-type, misc]
    """PyYAML's safe loader (libyaml's when installed): only plain YAML types are built."""


@dataclass
class KubeObject:
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

    def mapping(self, value: Any, field: str) -> Mapping[str, Any]:
        """A mapping field (absent / null: empty)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(f"expected a mapping, got {type(value).__name__}", field)
        return value

    def sequence(self, value: Any, field: str) -> list[Any]:
        """A list field (absent / null: empty)."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"expected a list, got {type(value).__name__}", field)
        return value

    def mappings(self, value: Any, field: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """Each item of a list field (absent / null: none) as a mapping, with its field
        (``field[i]``)."""
        for i, item in enumerate(self.sequence(value, field)):
            f = f"{field}[{i}]"
            yield f, self.mapping(item, f)

    def nonempty(self, value: Any, problem: str, field: str) -> str:
        """A field that must be a non-empty string (else a `TraceError`: `problem`)."""
        if not isinstance(value, str) or not value:
            raise self.error(problem, field)
        return value

    def text(self, value: Any, field: str, default: str | None = None) -> str:
        """A string field; a YAML integer or boolean is read as its text; null: `default`."""
        if value is None and default is not None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return value
        if isinstance(value, int):
            return str(value)
        raise self.error(f"expected a string, got {value!r}", field)

    def string_map(self, value: Any, field: str) -> dict[str, str]:
        """A map of string -> string (labels, annotations, a node selector)."""
        out: dict[str, str] = {}
        for k, v in self.mapping(value, field).items():
            key = self.text(k, field)
            out[key] = self.text(v, f"{field}.{key}", "")
        return out

    def quantity(self, value: Any, field: str) -> int:
        """A quantity field in nano units (null: 0), errors naming the field."""
        if value is None:
            return 0
        try:
            return quantity_nano(value)
        except QuantityError as e:
            raise self.error(str(e), field) from None

    def whole(self, nano: int, field: str) -> int:
        """A quantity that must be a whole count >= 0 (GPUs, pods)."""
        if nano < 0 or nano % NANO:
            raise self.error(f"expected a whole number >= 0, got {nano / NANO:g}", field)
        return nano // NANO

    def timestamp(self, value: Any, field: str) -> float | None:
        """RFC 3339 time (or a YAML timestamp) -> seconds since the epoch (None: absent)."""
        if value is None:
            return None
        try:
            return rfc3339_seconds(value)
        except QuantityError as e:
            raise self.error(str(e), field) from None


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


def _read_text(path: Path, max_bytes: int) -> str:
    """The file's text, after the checks on size, emptiness and compression."""
    size = check_file(path, "YAML Node and Pod objects")
    if size > max_bytes:
        raise TraceError(path, f"file of {size:,} bytes: over the limit of {max_bytes:,} bytes")
    raw = path.read_bytes()
    kind = compression(raw[:16])
    if kind is not None:
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


def _documents(
    path: Path, max_bytes: int, loader: type[yaml.SafeLoader]
) -> Iterator[tuple[int, Any, yaml.Node]]:
    """(1-based document number, its data, its root node) for each non-empty document."""
    text = _read_text(path, max_bytes)
    check = "*" in text  # no alias without a '*': nothing to expand
    parser = loader(text)
    doc = 0
    try:
        while parser.check_node():
            node = parser.get_node()
            doc += 1
            if node is None:
                continue
            if check:
                _check_graph(node, path, doc)
            try:
                data = parser.construct_document(node)
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
        parser.dispose()


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


def objects(
    paths: Sequence[Path],
    max_file_bytes: int = MAX_FILE_BYTES,
    loader: type[yaml.SafeLoader] = SafeLoader,
) -> Iterator[KubeObject]:
    """Every object of the input, Lists unpacked, in file / document / item order (a file
    over `max_file_bytes` refused; `loader`: a safe loader)."""
    for path in paths:
        found = False
        for doc, data, node in _documents(path, max_file_bytes, loader):
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
                    yield KubeObject(item_kind, item, path, lines[i], doc, i)
            else:
                yield KubeObject(kind, data, path, line, doc, None)
        if not found:
            raise TraceError(path, "no YAML object in the file (only blanks or comments)")
