"""Load scenarios: the public entry, and reading YAML files and `--set` overrides.

`load_scenario(path, overrides)` reads YAML with a safe loader (data, never code; duplicate
keys, deep nesting, alias bombs and oversized files refused), applies `--set
path.to.field=value` overrides, validates (`scenarios/validation.py`: the pydantic schema,
then the cross-checks of references) and builds the engine's `SimulationSpec`
(`scenarios/build.py`, with the load-time checks of `scenarios/feasibility.py` and
`scenarios/policy_checks.py`). Every failure raises `ScenarioError` naming the file, the
field path and what was expected.

This module stays the one to import from: `validate`, `build_spec`, `check_policies`,
`check_feasible`, `check_job_supply`, `ScenarioError`, ... are importable here. The YAML
limits (`MAX_YAML_NODES`, ...) live here and are read at every parse.
"""

from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Any

import yaml

from clusteremu.cluster import readback
from clusteremu.cluster.model import SimulationSpec
from clusteremu.scenarios.build import FILE_PARAMS, build_spec
from clusteremu.scenarios.errors import ScenarioError, clip, shorten
from clusteremu.scenarios.feasibility import check_feasible, check_job_supply
from clusteremu.scenarios.policy_checks import check_policies
from clusteremu.scenarios.validation import MAX_PROBLEMS, validate

#: The largest scenario file read (bytes): scenarios are small; `/dev/zero` is not one.
MAX_INPUT_BYTES = 16 * 2**20
#: The deepest nesting of mappings and lists accepted in YAML (scenarios need about 8).
MAX_YAML_DEPTH = 64
#: The most YAML values accepted once aliases are expanded (an alias bomb is refused).
MAX_YAML_VALUES = 2_000_000
#: The most values (scalars, lists, mappings) a scenario file may write out: PyYAML reads
#: some 10,000 to 30,000 a second, so more would take minutes (checked while parsing).
MAX_YAML_NODES = 100_000

SHIPPED_DIR = Path(__file__).resolve().parent


def shipped_scenarios() -> list[Path]:
    """The YAML scenarios that ship with clusteremu."""
    return sorted(SHIPPED_DIR.glob("*.yaml"))


def resolve_path(name: str | Path) -> Path:
    """A scenario path as given, or the name of a shipped scenario (with or without .yaml)."""
    path = Path(name)
    if path.exists():
        return path
    for candidate in (SHIPPED_DIR / path.name, SHIPPED_DIR / f"{path.name}.yaml"):
        if candidate.exists():
            return candidate
    return path


def canonical_name(name: str | Path) -> str:
    """One name per scenario file: a shipped scenario's stem (`mm-c`, whether given as
    `mm-c`, `mm-c.yaml` or a path to the shipped file), else the absolute, resolved path."""
    path = resolve_path(name).resolve()
    if path.parent == SHIPPED_DIR and path.suffix == ".yaml":
        return path.stem
    return str(path)


def nearest_shipped(name: str | Path) -> list[str]:
    """The shipped scenario names closest to `name` (a misspelling), best first."""
    stem = Path(name).name.removesuffix(".yaml").removesuffix(".yml")
    names = [p.stem for p in shipped_scenarios()]
    return difflib.get_close_matches(stem, names, n=3, cutoff=0.6)


def _not_found(path: Path) -> str:
    close = nearest_shipped(path)
    if close:
        return f"file not found (did you mean the shipped scenario {' or '.join(close)}?)"
    if len(path.parts) == 1 and path.suffix == "":
        names = ", ".join(p.stem for p in shipped_scenarios())
        return f"file not found, and no shipped scenario has that name (shipped: {names})"
    return "file not found"


class _ScenarioYamlLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses duplicate keys and nesting deeper than MAX_YAML_DEPTH.

    (Aliases are counted after composing, in `_check_expansion`.)
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > MAX_YAML_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"more than {MAX_YAML_NODES:,} values written out (parsing them takes "
                    "minutes); expected a scenario, with long lists in a trace file",
                    self.peek_event().start_mark,
                )
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nesting deeper than {MAX_YAML_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first_line.get(key)
                except TypeError:  # an unhashable key: SafeConstructor reports it
                    continue
                if seen is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {shorten(key)} (first at line {seen}); "
                        "a repeated key would silently replace the first",
                        key_node.start_mark,
                    )
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads `1e6` and `1.0e308` as text: read them as the numbers they are
# (YAML 1.2 does), so that number fields can refuse text ("8" quoted stays text).
_ScenarioYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _check_expansion(root: Any) -> None:
    """Refuse a YAML graph that expands (through aliases) into too many values, too deep,
    or into itself: the expanded size of every node, each counted once."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    visiting: set[int] = set()

    def walk(node: Any) -> None:
        key = id(node)
        if key in size:
            return
        if key in visiting:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a node that contains it", node.start_mark
            )
        visiting.add(key)
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        for child in children:
            walk(child)
        visiting.discard(key)
        size[key] = 1 + sum(size[id(c)] for c in children)
        depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
        if size[key] > MAX_YAML_VALUES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"the document expands (through aliases) to more than {MAX_YAML_VALUES:,} values",
                node.start_mark,
            )
        if depth[key] > MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"nesting deeper than {MAX_YAML_DEPTH} levels once aliases are expanded",
                node.start_mark,
            )

    walk(root)


def safe_yaml(text: str) -> Any:
    """Parse YAML data (never code) with duplicate keys, deep nesting and alias bombs refused.

    Raises `yaml.YAMLError` (with a mark naming the line) for every problem.
    """
    loader = _ScenarioYamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except RecursionError:  # a guard: the depth check should come first
        raise yaml.YAMLError(f"nesting deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """'YAML [syntax] error at line 3, column 5: <problem>' (shortened, no file lines)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or (str(exc) if not mark else "syntax error")
    if len(problem) > 200:
        problem = problem[:199] + "…"
    syntax = isinstance(exc, yaml.scanner.ScannerError | yaml.parser.ParserError)
    return f"YAML {'syntax ' if syntax else ''}error{where}: {problem}"


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in scenario file `path`: a regular file (a FIFO or a device is refused
    without opening it) of at most MAX_INPUT_BYTES, nested at most MAX_YAML_DEPTH deep."""
    source = str(path)
    if not path.exists() and not path.is_symlink():
        raise ScenarioError(source, [("", _not_found(path))])
    try:
        raw = readback.read_capped(path, MAX_INPUT_BYTES, "a scenario YAML file")
    except readback.ReadBackError as exc:
        raise ScenarioError(source, [("", exc.problem)]) from None
    if len(raw) > MAX_INPUT_BYTES:
        raise ScenarioError(
            source,
            [("", f"larger than {MAX_INPUT_BYTES // 2**20} MiB; expected a scenario YAML file")],
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(
            source, [("", "not UTF-8 text; expected a scenario YAML file")]
        ) from None
    if "\x00" in text:
        raise ScenarioError(source, [("", "contains NUL bytes; expected a scenario YAML file")])
    try:
        data = safe_yaml(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(source, [("", yaml_problem(exc))]) from None
    if not isinstance(data, dict):
        raise ScenarioError(
            source, [("", f"expected a mapping at the top level, got {type(data).__name__}")]
        )
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.0.c=value` -> (['a', 'b', '0', 'c'], value parsed as YAML)."""
    if "=" not in text:
        raise ValueError(f"override {shorten(text)} must look like path.to.field=value")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not any(parts):
        raise ValueError(f"override {shorten(text)} has an empty field path")
    if not all(parts):
        raise ValueError(
            f"override {shorten(text)}: expected a field path like a.b.0.c, with no empty "
            "part between dots"
        )
    if len(raw) > MAX_INPUT_BYTES:
        raise ValueError(f"override {shorten(text)}: value longer than {MAX_INPUT_BYTES} bytes")
    try:
        value = safe_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.composer.ComposerError | yaml.constructor.ConstructorError):
            raise ValueError(f"override {shorten(text)}: {yaml_problem(exc)}") from None
        value = raw  # not YAML: the plain string
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """Return a copy of `data` with every `path=value` override applied."""
    out = copy.deepcopy(data)
    for text in overrides:
        try:
            parts, value = parse_override(text)
        except ValueError as exc:
            raise ScenarioError(source, [("--set", str(exc))]) from None
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = clip(".".join(parts[: depth + 1]), 120)
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(
                        source, [(where, f"expected a list index below {len(node)}")]
                    )
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ScenarioError(source, [(where, "cannot set a field inside a plain value")])
    return out


def load_scenario(
    path: str | Path, overrides: list[str] | None = None, streamed: bool = False
) -> SimulationSpec:
    """Read, override, validate and build a scenario file into a SimulationSpec.

    `streamed`: the run will stream its results where the scenario allows it (`clusteremu
    run` in one process), so the memory estimate counts only the live jobs' rows
    (`clusteremu.scenarios.limits`)."""
    resolved = resolve_path(path)
    source = str(resolved)
    data = apply_overrides(read_yaml(resolved), overrides or [], source)
    model = validate(data, source, streamed)
    return build_spec(model, resolved.parent, source)


def spec_from_dict(
    data: dict[str, Any], source: str = "<scenario>", base_dir: Path | None = None
) -> SimulationSpec:
    """Validate and build a scenario given as a plain dict (tests, sweeps)."""
    return build_spec(validate(data, source), base_dir or Path.cwd(), source)


__all__ = [
    "FILE_PARAMS",
    "MAX_INPUT_BYTES",
    "MAX_PROBLEMS",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "MAX_YAML_VALUES",
    "SHIPPED_DIR",
    "ScenarioError",
    "apply_overrides",
    "build_spec",
    "canonical_name",
    "check_feasible",
    "check_job_supply",
    "check_policies",
    "load_scenario",
    "nearest_shipped",
    "parse_override",
    "read_yaml",
    "resolve_path",
    "safe_yaml",
    "shipped_scenarios",
    "spec_from_dict",
    "validate",
    "yaml_problem",
]
