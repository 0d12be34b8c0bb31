"""Files the commands read back are validated like scenarios (issue 28): Pennyworth trees,
sizing models, RL models, GPU traces, sweep manifests and scenario files. Each bad file
exits 2 with one line naming the file, the field and what was expected, before any work
(`badinput.refused` tallies them); a FIFO is refused from `stat`, never opened."""

from __future__ import annotations

import copy
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from clusteremu.cluster.policies.pennyworth.tree import _digest
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario
from tests.clusteremu.badinput import refused

SHIPPED_TREE = SHIPPED_DIR / "policies" / "pennyworth-avg.json"
GPU = Path(__file__).parent.parent / "fixtures" / "gpu"


# --- Pennyworth trees ------------------------------------------------------------------------


def _tree() -> dict[str, Any]:
    return json.loads(SHIPPED_TREE.read_text())


def _sealed(tmp_path: Path, name: str, change: Any) -> Path:
    """The shipped tree with `change(body)` applied and its sha256 recomputed."""
    data = _tree()
    body = copy.deepcopy(data["tree"])
    change(body)
    data["tree"] = body
    data["sha256"] = _digest(body)
    path = tmp_path / name
    path.write_text(json.dumps(data))  # NaN is written as NaN (not JSON)
    return path


def _explain(path: Path, kind: str, expect: str) -> None:
    refused(["synthesize", "--tree", str(path), "--explain"], "synthesize", kind, expect)


def _run_with_tree(path: Path, kind: str, expect: str) -> None:
    argv = ["run", "pennyworth-avg", "--set", f"scheduler.placer.tree={path}"]
    refused(argv, "run", kind, expect)


def _set_count(body: dict[str, Any]) -> None:
    body["nodes"]["counts"][3][0] = -1e9


def _set_nan_profile(body: dict[str, Any]) -> None:
    body["profiles"]["q1"]["t2.small"][0] = float("nan")


def _set_text_profile(body: dict[str, Any]) -> None:
    body["profiles"]["q1"]["t2.small"][0] = "43"


def _twice(body: dict[str, Any]) -> None:
    body["tasks"][1] = body["tasks"][0]


def _other_types(body: dict[str, Any]) -> None:
    body["types"] = ["m5.small", "m5.medium", "m5.large"]
    body["profiles"] = {t: {} for t in body["tasks"]}


def _shared_child(body: dict[str, Any]) -> None:
    nodes = body["nodes"]
    last = max(i for i, f in enumerate(nodes["feature"]) if f >= 0)
    nodes["right"][last] = nodes["left"][last]  # both branches to one node (a DAG)


def test_a_tree_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "tree.json"
    os.mkfifo(fifo)
    _explain(fifo, "tree: FIFO", "is a FIFO; expected a RAD-tree JSON file")
    _run_with_tree(fifo, "tree: FIFO", "is a FIFO")


def test_a_tree_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"format": "clusteremu.rad-tree", "tree": ' + "[" * 100_000 + "]" * 100_000)
    _explain(deep, "tree: nested 100,000 deep", "nested 100001 levels deep")


@pytest.mark.parametrize(
    ("change", "kind", "expect"),
    [
        (_set_count, "tree: count -1e9", "tree.nodes.counts: expected training counts"),
        (_set_nan_profile, "tree: NaN profile", "NaN is not a JSON number"),
        (_set_text_profile, "tree: text profile", "tree.profiles.q1.t2.small: expected 20 finite"),
        (_twice, "tree: task named twice", "tree.tasks: expected distinct names"),
        (_shared_child, "tree: node with two parents", "every node but the root has one parent"),
    ],
)
def test_a_resealed_tree_with_bad_values_is_refused(
    tmp_path: Path, change: Any, kind: str, expect: str
) -> None:
    path = _sealed(tmp_path, "t.json", change)
    _explain(path, kind, expect)
    _run_with_tree(path, kind, expect)


def test_a_tree_of_other_node_types_is_refused_by_run(tmp_path: Path) -> None:
    path = _sealed(tmp_path, "types.json", _other_types)
    _run_with_tree(
        path, "tree: other node types", "expected a tree that knows node type(s) t2.small"
    )


def test_a_tree_of_other_task_names_is_mapped_with_a_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def rename(body: dict[str, Any]) -> None:
        body["tasks"] = [f"job{i}" for i in range(len(body["tasks"]))]
        body["profiles"] = {f"job{i}": v for i, v in enumerate(body["profiles"].values())}

    path = _sealed(tmp_path, "renamed.json", rename)
    spec = load_scenario("pennyworth-avg", [f"scheduler.placer.tree={path}"])
    from clusteremu.cluster.policies import registry

    ref = spec.scheduler.placer
    placer = registry.create("placer", ref.name, **ref.params)
    import numpy as np

    with caplog.at_level("WARNING"):
        placer.setup(spec, np.random.default_rng(0))
    assert "are not in the tree; each is mapped to the tree task" in caplog.text


# --- sizing models ---------------------------------------------------------------------------


def _sizing(tmp_path: Path, change: Any = None, name: str = "sizing.json") -> Path:
    """A valid sizing model for ml-workflow (every task light, its static request kept)."""
    spec = load_scenario("ml-workflow")
    tasks = {
        c.name: {
            "cluster": "light",
            "cpu": 1.0,
            "memory_gb": min(5.0, c.request.memory_gb),
            "static": [c.request.cpu, c.request.memory_gb],
            "heavy": None,
        }
        for c in spec.classes
    }
    data = {"format": "clusteremu-sizing", "version": 1, "info": {}, "tasks": tasks}
    if change is not None:
        change(data["tasks"][spec.classes[0].name], data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _compare(path: Path, kind: str, expect: str) -> None:
    argv = ["provision", "compare", "ml-workflow", "--provisioners", "predictive"]
    refused([*argv, "--model", str(path)], "provision", kind, expect)


def test_a_valid_hand_written_sizing_model_loads(tmp_path: Path) -> None:
    from clusteremu.cluster.policies.provisioner.sizing import Sizing

    model = Sizing.load(_sizing(tmp_path))
    assert model.mismatch(load_scenario("ml-workflow")) is None


@pytest.mark.parametrize(
    ("value", "kind", "expect"),
    [
        (1e12, "sizing: memory_gb 1e12", "memory_gb: expected a number in"),
        (-5, "sizing: memory_gb -5", "memory_gb: expected a number in"),
        (float("nan"), "sizing: memory_gb NaN", "NaN is not a JSON number"),
        ("4", "sizing: memory_gb text", "memory_gb: expected a number, got str"),
        (True, "sizing: memory_gb bool", "memory_gb: expected a number, got bool"),
    ],
)
def test_a_sizing_model_with_bad_memory_is_refused(
    tmp_path: Path, value: Any, kind: str, expect: str
) -> None:
    def change(task: dict[str, Any], _: dict[str, Any]) -> None:
        task["memory_gb"] = value

    _compare(_sizing(tmp_path, change), kind, expect)


def test_a_sizing_model_of_other_shapes_is_refused(tmp_path: Path) -> None:
    def cluster(task: dict[str, Any], _: dict[str, Any]) -> None:
        task["cluster"] = "huge"

    def static(task: dict[str, Any], _: dict[str, Any]) -> None:
        task["static"] = [1.0]

    def missing(task: dict[str, Any], data: dict[str, Any]) -> None:
        del data["tasks"][next(iter(data["tasks"]))]

    _compare(_sizing(tmp_path, cluster, "c.json"), "sizing: unknown cluster", "cluster: expected")
    _compare(_sizing(tmp_path, static, "s.json"), "sizing: short static", "static: expected")
    _compare(_sizing(tmp_path, missing, "m.json"), "sizing: task missing", "has no task")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    _compare(fifo, "sizing: FIFO", "is a FIFO")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    _compare(deep, "sizing: nested 50,000 deep", "nested 50000 levels deep")


# --- RL models -------------------------------------------------------------------------------


def _model_zip(path: Path) -> None:
    """An archive laid out like train-rl's (members stored, so bytes can be damaged)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("data", b'{"policy_class": "SACPolicy-PAYLOAD"}')
        zf.writestr("policy.pth", b"weights")
        zf.writestr("clusteremu.json", b'{"format": "clusteremu-rl-tuner"}')


def _tune(path: Path, kind: str, expect: str) -> None:
    refused(["tune", "--tuner", "rl", "--model", str(path)], "tune", kind, expect)


def test_an_rl_model_with_a_damaged_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.zip"
    _model_zip(path)
    path.write_bytes(path.read_bytes().replace(b"PAYLOAD", b"PAYLOAX"))
    _tune(path, "rl model: CRC-damaged data", "member data: fails its CRC-32 check")


def test_rl_models_that_are_not_archives_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.zip"
    os.mkfifo(fifo)
    _tune(fifo, "rl model: FIFO", "is a FIFO")
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("clusteremu.json", b"{}")
        zf.writestr("policy.pth", b"\0" * 10)
        for i in range(80):
            zf.writestr(f"extra{i}", b"")
    _tune(bomb, "rl model: too many members", "82 members")


# --- GPU traces ------------------------------------------------------------------------------


def _frag(nodes: Path, pods: Path, kind: str, expect: str) -> None:
    argv = ["gpu-frag", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd"]
    refused([*argv, "--seeds", "1"], "gpu-frag", kind, expect)


def _with_row(tmp_path: Path, source: Path, row: str) -> Path:
    path = tmp_path / source.name
    path.write_text(source.read_text().rstrip("\n") + "\n" + row + "\n")
    return path


def test_a_trace_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "nodes.csv"
    os.mkfifo(fifo)
    _frag(fifo, GPU / "pods.csv", "trace: --nodes FIFO", "is a FIFO")
    _frag(GPU / "nodes.csv", fifo, "trace: --pods FIFO", "is a FIFO")


@pytest.mark.parametrize(
    ("row", "kind", "expect"),
    [
        ("px,1e300,8192,1,500,,LS,Running,0,10,0", "pods: cpu_milli 1e300", "column 'cpu_milli'"),
        ("px,4000,1e300,1,500,,LS,Running,0,10,0", "pods: memory 1e300", "column 'memory_mib'"),
        ("px,4000,8192,1,5000,,LS,Running,0,10,0", "pods: gpu_milli 5000", "in [0, 1000]"),
    ],
)
def test_pods_with_values_out_of_range_are_refused(
    tmp_path: Path, row: str, kind: str, expect: str
) -> None:
    pods = _with_row(tmp_path, GPU / "pods.csv", row)
    line = refused(
        ["gpu-frag", "--nodes", str(GPU / "nodes.csv"), "--pods", str(pods), "--policy", "fgd"],
        "gpu-frag",
        kind,
        expect,
    )
    assert "row " in line


def test_nodes_named_twice_or_out_of_range_are_refused(tmp_path: Path) -> None:
    first = (GPU / "nodes.csv").read_text().splitlines()[1]
    twice = _with_row(tmp_path, GPU / "nodes.csv", first)
    _frag(twice, GPU / "pods.csv", "nodes: name twice", "column 'sn': node 'n0' again")
    (tmp_path / "big").mkdir()
    big = _with_row(tmp_path / "big", GPU / "nodes.csv", "nx,1e300,1024,1,T4")
    _frag(big, GPU / "pods.csv", "nodes: cpu_milli 1e300", "column 'cpu_milli'")


# --- sweep manifests and scenario files --------------------------------------------------------


def test_a_sweep_manifest_that_is_a_fifo_or_nested_deep_is_refused(tmp_path: Path) -> None:
    for kind, make in (
        ("sweep.json: FIFO", lambda p: os.mkfifo(p)),
        ("sweep.json: nested deep", lambda p: p.write_text("[" * 10_000 + "]" * 10_000)),
    ):
        out = tmp_path / kind.split()[-1]
        out.mkdir()
        make(out / "sweep.json")
        refused(
            ["sweep", "mm-c", "--grid", "workload.classes.0.holding_cost=1,2", "--out", str(out)],
            "sweep",
            kind,
            "sweep.json",
        )


def test_a_scenario_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    for command in ("run", "validate"):
        refused([command, str(fifo)], command, "scenario: FIFO", "is a FIFO")


@pytest.mark.parametrize("value", ['"8"', "true", "'1e3'"])
def test_numbers_given_as_text_or_bools_are_refused(value: str) -> None:
    override = f"workload.classes.0.arrival.rate_per_s={value}"
    for command in ("run", "validate"):
        refused(
            [command, "mm-c", "--set", override],
            command,
            "scenario: number as text/bool",
            "rate_per_s: expected a number",
        )
