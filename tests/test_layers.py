"""The package's imports, read from the code (every `import` and `from ... import`, at
module level or inside a function, `TYPE_CHECKING` blocks included): no module imports
itself through others (no cycle), and nothing below the command line (`cluster/`,
`scenarios/`, `actors/`, `tuners/`, installed as `clusteremu.cluster`, ...) imports the
command line's modules (`clusteremu/`: `clusteremu.cli`, `clusteremu.commands`, ...), and
no import, at module level or inside a function, runs up the layers (`LAYERS`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cluster", "scenarios", "actors", "tuners", "clusteremu")
BELOW_THE_CLI = ("cluster", "scenarios", "actors", "tuners")


def _module_name(path: Path) -> str:
    """A file's import name: the folders of BELOW_THE_CLI install under `clusteremu`."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in BELOW_THE_CLI:
        parts.insert(0, "clusteremu")
    return ".".join(parts)


def _below_the_cli(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[0] == "clusteremu" and parts[1] in BELOW_THE_CLI


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules `path` imports (a `from package import module` counts as the
    module; a name imported from a module counts as that module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(path, name, known) for name, path in modules.items()}
    # A package's __init__ is imported with any of its modules: not an edge of its own.
    return {
        name: {t for t in targets if not name.startswith(t + ".")}
        for name, targets in graph.items()
    }


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_nothing_below_the_command_line_imports_it() -> None:
    wrong = sorted(
        f"{name} -> {target}"
        for name, targets in _graph().items()
        if _below_the_cli(name)
        for target in targets
        if target.split(".")[0] == "clusteremu" and not _below_the_cli(target)
    )
    assert not wrong, wrong


#: The layers, lowest first: a module may import its own layer and those below, at module
#: level or inside a function. The model, the kernels, the policies' interfaces and the
#: engine (0); the learned provisioners, which learn by running the engine on their scenario
#: (profiling runs), so the engine never imports them (the registry loads policies by name)
#: (1); the scenario layer (2); the actors, the tuners and the policy authors' conformance
#: kit, which builds scenarios (3); the command line (4).
LAYERS = (
    ("clusteremu.cluster.policies.provisioner", 1),
    ("clusteremu.cluster.testing", 3),
    ("clusteremu.cluster", 0),
    ("clusteremu.scenarios", 2),
    ("clusteremu.actors", 3),
    ("clusteremu.tuners", 3),
    ("clusteremu", 4),
)


def _layer(name: str) -> int:
    return next(
        level for prefix, level in LAYERS if name == prefix or name.startswith(prefix + ".")
    )


def test_no_import_runs_up_the_layers() -> None:
    """Module-level and function-level imports alike (an import inside a function that
    reaches up is still a dependency on the layer above)."""
    wrong = sorted(
        f"{name} ({_layer(name)}) -> {target} ({_layer(target)})"
        for name, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(name)
    )
    assert not wrong, wrong
