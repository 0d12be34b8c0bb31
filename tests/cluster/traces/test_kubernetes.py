"""The Kubernetes reader: every rule on small fixtures, bad input naming file / line /
field, hostile YAML refused, and the k8s-sims benchmark's 100 nodes and 1,067 pods."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from clusteremu.cluster.traces import kubernetes as k8s
from clusteremu.cluster.traces.table import JOB_SCHEMA, NODE_SCHEMA, TraceError, check_jobs

FIX = Path(__file__).parent / "fixtures" / "kubernetes"
LIST = FIX / "list.yaml"
MULTI = FIX / "multi.yaml"
SIMS = Path(__file__).resolve().parents[3].parent / "shared" / "traces" / "k8s-sims"


@pytest.fixture(scope="module")
def trace() -> k8s.Trace:
    return k8s.read([LIST, MULTI])


def jobs_by_id(trace: k8s.Trace) -> dict[str, dict[str, object]]:
    return {r["trace_id"]: r for r in trace.jobs.to_pylist()}


# --- quantities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64000m", 64.0),
        ("1.5", 1.5),
        ("2", 2.0),
        ("262144Mi", 262144 * 2**20),
        ("256Gi", 256 * 2**30),
        ("1e9", 1e9),
        ("1E3", 1e3),
        ("1e-3", 1e-3),
        ("1e+3", 1e3),
        ("129M", 129e6),
        ("1k", 1e3),
        ("1Ki", 1024.0),
        ("1.5Gi", 1.5 * 2**30),
        ("100n", 1e-7),
        ("5u", 5e-6),
        ("1T", 1e12),
        ("1P", 1e15),
        ("1E", 1e18),
        ("1Ti", 2.0**40),
        ("1Pi", 2.0**50),
        ("1Ei", 2.0**60),
        (".5", 0.5),
        ("1.", 1.0),
        ("+2", 2.0),
        ("-2", -2.0),
        ("007", 7.0),
        (" 3 ", 3.0),  # Kubernetes trims spaces
        ("0.9n", 1e-9),  # finer than nano: rounds away from zero
        ("1e-20", 1e-9),
        ("9Ei", 2.0**63 - 1),  # binary SI capped at 2^63 - 1
        ("m", 0.0),  # no digits: 0, as Kubernetes' fast path reads it
        (2, 2.0),
        (0.5, 0.5),
    ],
)
def test_parse_quantity(text: str | int | float, value: float) -> None:
    assert k8s.parse_quantity(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize(
    "text",
    ["", "1K", "1ki", "1mi", "abc", "1e", "1e+", "1.2.3", "1 m", "12 cores", "1-2", "Ei", "1e400"]
    + ["9" * 5000, "1e" + "9" * 5000, True, None, math.nan],
)
def test_parse_quantity_refuses_what_kubernetes_refuses(text: object) -> None:
    with pytest.raises(TraceError) as e:
        k8s.parse_quantity(text, ("f.yaml", 7, "spec.x"))  # type: ignore[arg-type]
    assert (e.value.path, e.value.row, e.value.field) == ("f.yaml", 7, "spec.x")


# --- the fixtures --------------------------------------------------------------------------


def test_conservation_and_totals(trace: k8s.Trace) -> None:
    report = trace.report
    assert trace.jobs.schema == JOB_SCHEMA
    check_jobs(trace.jobs)
    assert report.rows_read == 13
    assert report.rows_read == trace.jobs.num_rows + report.rows_dropped
    assert trace.jobs.num_rows == 11
    # by hand: 4 + 1.25 + 8 + 1.5 + 0.25 (List) + 6 + 2 + 32 + 4 + 0.1 + 3 (multi-document)
    cpu = trace.jobs.column("request_cpu").to_numpy()
    assert math.isclose(cpu.sum(), 62.1)
    # 2000 (nvidia) + 500 + 2000 + 8000 + 300 + 250 (Alibaba annotations)
    assert trace.jobs.column("request_gpu").to_numpy().sum() == 13050
    assert report.files == [str(LIST), str(MULTI)]
    assert trace.notes == {"nodes": 3, "pods": 13, "skipped": {"Service": 1, "Deployment": 1}}


def test_requests_as_the_scheduler_computes_them(trace: k8s.Trace) -> None:
    jobs = jobs_by_id(trace)
    # init container needs more than the containers' sum: max(0.5 + 1.5, 4), max(1.5, 2) GB
    assert (
        jobs["batch/init-heavy"]["request_cpu"],
        jobs["batch/init-heavy"]["request_memory_gb"],
    ) == (4.0, 2.0)
    # limits only -> requests = limits; plus overhead 250m / 128Mi
    assert jobs["batch/overhead-limits"]["request_cpu"] == 1.25
    assert jobs["batch/overhead-limits"]["request_memory_gb"] == 1.125
    # sidecar (restartPolicy Always) runs beside main: 1 + 0.5 cores; memory: the plain init
    # container (1Gi) plus the sidecar started before it (256Mi) = 1.25 GB > 512Mi + 256Mi
    assert jobs["ml/sidecar"]["request_cpu"] == 1.5
    assert jobs["ml/sidecar"]["request_memory_gb"] == 1.25
    assert jobs["openb/queued"]["request_memory_gb"] == pytest.approx(100e6 / 2**30)
    assert trace.report.corrected["requests defaulted to limits (a limit without a request)"] == 1


def test_gpus(trace: k8s.Trace) -> None:
    jobs = jobs_by_id(trace)
    gpu = {k: v["request_gpu"] for k, v in jobs.items()}
    assert gpu["ml/trainer"] == 2000  # nvidia.com/gpu: 2
    assert gpu["openb/share"] == 500  # count 1, milli 500
    assert gpu["openb/share2"] == 250
    assert gpu["openb/multi"] == 2000  # count 2, milli 500 -> whole GPUs (corrected)
    assert gpu["openb/whole8"] == 8000
    assert gpu["openb/nocount"] == 300  # milli without count: one GPU (corrected)
    assert gpu["batch/init-heavy"] == 0
    corrected = trace.report.corrected
    assert corrected[f"{k8s.ALI_MILLI} below 1000 with {k8s.ALI_COUNT} >= 2: whole GPUs"] == 1
    assert corrected[f"{k8s.ALI_MILLI} without {k8s.ALI_COUNT}: one GPU"] == 1


def test_labels_priority_node_queue(trace: k8s.Trace) -> None:
    jobs = jobs_by_id(trace)
    assert jobs["ml/trainer"]["priority"] == 1000 and jobs["ml/trainer"]["node"] == "gpu-a"
    assert jobs["openb/multi"]["priority"] == 0
    assert jobs["ml/sidecar"]["priority"] is None and jobs["ml/sidecar"]["node"] is None
    assert jobs["batch/overhead-limits"]["node"] == "cpu-b"
    assert jobs["default/ephemeral"]["queue"] == "default"  # no namespace: default
    assert {r["user"] for r in jobs.values()} == {None}
    assert all(math.isnan(r["estimate_s"]) for r in jobs.values())  # type: ignore[arg-type]
    notes = "\n".join(trace.report.notes)
    assert "priorityClassName without spec.priority" in notes
    assert "pod resources not modelled (pods): ephemeral-storage x1, example.com/fpga x1" in notes
    assert "skipped objects of other kinds: Deployment x1, Service x1" in notes


def test_phases_and_timestamps(trace: k8s.Trace) -> None:
    report = trace.report
    assert report.dropped == {
        "finished before the import (phase Succeeded)": 1,
        "finished before the import (phase Failed)": 1,
    }
    assert report.examples["finished before the import (phase Failed)"] == ["multi.yaml:98"]
    jobs = jobs_by_id(trace)
    assert "batch/done" not in jobs and "openb/failed" not in jobs
    assert "openb/nocount" in jobs  # phase Unknown: kept
    arrival = {k: v["arrival_s"] for k, v in jobs.items()}
    assert arrival["batch/init-heavy"] == 0.0  # 10:00:00Z, the first
    assert arrival["batch/overhead-limits"] == 10.0
    assert arrival["ml/sidecar"] == 90.5  # 12:01:30.5+02:00
    assert arrival["openb/share2"] == 480.0
    # no creationTimestamp: arrives at the earliest creation time, in document order
    assert arrival["openb/whole8"] == 0.0 and arrival["openb/queued"] == 0.0
    assert trace.jobs.column("trace_id").to_pylist()[:3] == [
        "batch/init-heavy",
        "openb/whole8",
        "openb/queued",
    ]
    assert (
        report.corrected["no metadata.creationTimestamp: arrives at the earliest creation time"]
        == 2
    )
    assert jobs["batch/init-heavy"]["run_s"] == 1800.0  # deletion - creation
    assert jobs["openb/whole8"]["run_s"] == 600.0  # deleted 10:10, arrived 10:00
    assert math.isnan(jobs["ml/trainer"]["run_s"])  # type: ignore[arg-type]


def test_nodes(trace: k8s.Trace) -> None:
    assert trace.nodes is not None and trace.nodes.schema == NODE_SCHEMA
    nodes = {r["node"]: r for r in trace.nodes.to_pylist()}
    a, b, ali = nodes["gpu-a"], nodes["cpu-b"], nodes["ali-0"]
    assert (a["cpu"], a["memory_gb"], a["gpu"], a["max_pods"]) == (63.5, 256.0, 4, 110)
    assert a["gpu_model"] == "A100-SXM4-40GB" and not a["unschedulable"]
    assert json.loads(a["taints"]) == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert json.loads(a["labels"])["zone"] == "z1"
    # no allocatable: capacity
    assert (b["cpu"], b["memory_gb"], b["gpu"], b["max_pods"]) == (32.0, 128.0, 0, None)
    assert b["unschedulable"] and b["gpu_model"] is None
    assert (ali["cpu"], ali["memory_gb"], ali["gpu"], ali["gpu_model"]) == (
        96.0,
        384.0,
        2,
        "V100M16",
    )
    notes = "\n".join(trace.report.notes)
    assert "status.capacity used for 1 node(s) missing status.allocatable" in notes
    assert "ephemeral-storage x1, example.com/fpga x1, hugepages-2Mi x1" in notes


def test_classes(trace: k8s.Trace) -> None:
    classes = {c.name: c for c in trace.classes}
    assert [c.name for c in trace.classes] == ["pods", "pods-1", "pods-2", "pods-3"]
    assert classes["pods"].node_selector == {} and classes["pods"].tolerations == []
    assert classes["pods-1"].node_selector == {"zone": ["z1"]}
    assert classes["pods-1"].tolerations == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"}
    ]
    # In / NotIn / Exists / DoesNotExist kept; Gt, Lt and matchFields dropped (noted)
    assert classes["pods-2"].node_affinity == [
        [
            {
                "key": "alibabacloud.com/gpu-card-model",
                "operator": "In",
                "values": ["V100M16", "P100"],
            },
            {"key": "spot", "operator": "DoesNotExist", "values": []},
        ],
        [
            {"key": "zone", "operator": "NotIn", "values": ["z9"]},
            {"key": "gpu", "operator": "Exists", "values": []},
        ],
    ]
    assert classes["pods-3"].tolerations == [
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}
    ]
    jobs = jobs_by_id(trace)
    cls = {k: v["class"] for k, v in jobs.items()}
    # sidecar lists its toleration's fields in another order; share2 its terms: same class
    assert cls["ml/trainer"] == cls["ml/sidecar"] == "pods-1"
    assert cls["openb/share"] == cls["openb/share2"] == "pods-2"
    assert cls["openb/queued"] == "pods-3"
    assert cls["batch/init-heavy"] == cls["openb/multi"] == "pods"
    assert "matchFields x1, operator Gt x1, operator Lt x1" in "\n".join(trace.report.notes)


def test_list_and_multi_document_agree(tmp_path: Path) -> None:
    """The List's items as documents of one multi-document file read the same."""
    items = yaml.safe_load(LIST.read_text())["items"]
    multi = tmp_path / "multi.yaml"
    multi.write_text(yaml.safe_dump_all(items))
    one, other = k8s.read([LIST]), k8s.read([multi])
    for name in one.jobs.column_names:  # NaN-aware: run_s and estimate_s hold NaNs
        np.testing.assert_array_equal(
            one.jobs.column(name).to_numpy(zero_copy_only=False),
            other.jobs.column(name).to_numpy(zero_copy_only=False),
        )
    assert one.nodes is not None and other.nodes is not None and one.nodes.equals(other.nodes)


# --- more rules, on small inline inputs ----------------------------------------------------

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  creationTimestamp: "2024-05-01T10:00:00Z"
spec:
  containers:
  - name: main
    resources:
      requests: {{cpu: "1", memory: 1Gi}}
"""
AFFINITY = """\
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
"""


def write(tmp: Path, text: str, name: str = "t.yaml") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def test_duplicates_early_deletion_and_empty_terms_dropped(tmp_path: Path) -> None:
    text = "---\n".join(
        [
            POD.format(name="a"),
            POD.format(name="a"),
            POD.format(name="b").replace(
                "  creationTimestamp:",
                '  deletionTimestamp: "2024-05-01T09:00:00Z"\n  creationTimestamp:',
            ),
            POD.format(name="c") + AFFINITY + "        - {}\n",
        ]
    )
    t = k8s.read([write(tmp_path, text)])
    assert t.jobs.column("trace_id").to_pylist() == ["default/a"]
    assert t.report.rows_read == 4 and t.report.rows_dropped == 3
    assert set(t.report.dropped) == {
        "duplicate pod (namespace/name seen before)",
        "deleted at or before its creation (run time <= 0 s)",
        "required node affinity matches no node (only empty terms)",
    }
    assert t.nodes is None


def test_pod_level_resources_and_no_creation_time_anywhere(tmp_path: Path) -> None:
    text = POD.format(name="p").replace('  creationTimestamp: "2024-05-01T10:00:00Z"\n', "")
    text += "  resources:\n    limits: {cpu: 2500m}\n"
    t = k8s.read([write(tmp_path, text)])
    assert t.jobs.column("request_cpu").to_pylist() == [2.5]
    assert t.jobs.column("arrival_s").to_pylist() == [0.0]


def test_typed_lists_and_node_annotations(tmp_path: Path) -> None:
    """PodList / NodeList items may omit their kind; Alibaba GPU counts as node annotations;
    nodes without pods give an empty job table."""
    text = """\
apiVersion: v1
kind: NodeList
items:
- metadata:
    name: n0
    annotations: {alibabacloud.com/gpu-count: "4"}
  status:
    allocatable: {cpu: "8", memory: 16Gi}
"""
    t = k8s.read([write(tmp_path, text)])
    assert t.nodes is not None and t.nodes.column("gpu").to_pylist() == [4]
    assert t.jobs.num_rows == 0 and t.classes == []
    pods = "kind: PodList\nitems:\n- " + POD.format(name="p").replace("\n", "\n  ")
    t = k8s.read([write(tmp_path, pods, "pods.yaml")])
    assert t.jobs.column("trace_id").to_pylist() == ["default/p"]
    e = refused(tmp_path, text.replace('{cpu: "8",', '{nvidia.com/gpu: "2", cpu: "8",'))
    assert "disagree" in e.problem and e.field == "status.allocatable.nvidia.com/gpu"
    assert e.row == 4 and "items[0]" in e.problem
    e = refused(tmp_path, text.replace("memory: 16Gi", 'pods: "1.5"'))
    assert e.field == "status.allocatable.memory"


def test_cpu_rounded_up_to_the_millicore(tmp_path: Path) -> None:
    text = POD.format(name="p").replace('cpu: "1"', "cpu: 100100u")
    t = k8s.read([write(tmp_path, text)])
    assert t.jobs.column("request_cpu").to_pylist() == [0.101]


# --- bad input -----------------------------------------------------------------------------


def refused(tmp_path: Path, text: str) -> TraceError:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as e:
        k8s.read([path])
    assert e.value.path == str(path)
    return e.value


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ('cpu: "1"', 'cpu: "12 cores"', "spec.containers[0].resources.requests.cpu", "malformed"),
        ("memory: 1Gi", "memory: -1Gi", "spec.containers[0].resources.requests.memory", ">= 0"),
        (
            "    resources:\n",
            "    resources:\n      limits: {cpu: 1x}\n",
            "spec.containers[0].resources.limits.cpu",
            "malformed",
        ),
    ],
)
def test_bad_quantities_name_file_line_field(
    tmp_path: Path, old: str, new: str, field: str, words: str
) -> None:
    # the bad pod is the second document: it starts on line 12
    text = POD.format(name="ok") + "---\n" + POD.format(name="bad").replace(old, new)
    e = refused(tmp_path, text)
    assert (e.row, e.field) == (12, field)
    assert words in e.problem and "default/bad" in str(e) and "document 2" in str(e)


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        (
            "  tolerations:\n  - {key: a, operator: Contains}\n",
            "spec.tolerations[0].operator",
            "Contains",
        ),
        (
            "  tolerations:\n  - {key: a, effect: Sometimes}\n",
            "spec.tolerations[0].effect",
            "effect",
        ),
        (
            AFFINITY + "        - matchExpressions:\n          - {key: a, operator: Near}\n",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
            "Near",
        ),
        ("  priority: high\n", "spec.priority", "integer"),
        ("  nodeSelector: [a, b]\n", "spec.nodeSelector", "mapping"),
        ("status:\n  phase: Exploded\n", "status.phase", "phase"),
    ],
)
def test_bad_fields(tmp_path: Path, extra: str, field: str, words: str) -> None:
    e = refused(tmp_path, POD.format(name="p") + extra)
    assert (e.row, e.field) == (1, field) and words in e.problem


def test_bad_gpu_annotations_and_timestamps(tmp_path: Path) -> None:
    ann = "  annotations:\n    alibabacloud.com/gpu-milli: '1500'\n"
    e = refused(tmp_path, POD.format(name="p").replace("metadata:\n", "metadata:\n" + ann))
    assert e.field == f"metadata.annotations.{k8s.ALI_MILLI}" and "over 1000" in e.problem
    e = refused(tmp_path, POD.format(name="p").replace("T10:00:00Z", " at ten"))
    assert e.field == "metadata.creationTimestamp" and "RFC 3339" in e.problem
    e = refused(tmp_path, POD.format(name="p").replace('cpu: "1"', 'cpu: "1", nvidia.com/gpu: 0.5'))
    assert e.field.endswith("nvidia.com/gpu") and "whole number" in e.problem


def test_not_a_mapping(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n- kind: Service\n  metadata: {name: s}\n"
    text += "- just a string\n"
    e = refused(tmp_path, text)
    assert (e.row, e.field) == (6, "items[1]") and "mapping" in e.problem
    e = refused(tmp_path, POD.format(name="a") + "---\n- a\n- b\n")
    assert e.row == 12 and "document 2" in e.problem
    e = refused(
        tmp_path,
        "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: p}\n  spec: 3\n",
    )
    assert (e.row, e.field) == (4, "spec") and "items[0]" in e.problem


def test_missing_containers_or_kind(tmp_path: Path) -> None:
    e = refused(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n")
    assert e.field == "spec.containers"
    e = refused(tmp_path, "apiVersion: v1\nmetadata: {name: p}\n")
    assert e.field == "kind"


def test_truncated_yaml(tmp_path: Path) -> None:
    text = LIST.read_text()
    cut = text.index("A100-SXM4-40GB") - 1
    e = refused(tmp_path, text[:cut] + '"A100-SX')  # cut inside a quoted string
    assert e.row is not None and e.row >= 13 and "not valid YAML" in e.problem
    # cut at a line end inside a pod: a Pod without containers
    cut = text.index("    containers:\n    - name: a")
    e = refused(tmp_path, text[:cut])
    assert e.field == "spec.containers"


def test_compressed_missing_empty_files(tmp_path: Path) -> None:
    gz = tmp_path / "pods.yaml"
    gz.write_bytes(gzip.compress(MULTI.read_bytes(), mtime=0))
    with pytest.raises(TraceError, match="gzip-compressed") as e:
        k8s.read([gz])
    assert e.value.path == str(gz)
    with pytest.raises(TraceError, match="no such file"):
        k8s.read([tmp_path / "absent.yaml"])
    with pytest.raises(TraceError, match="empty file"):
        k8s.read([write(tmp_path, "", "empty.yaml")])
    with pytest.raises(TraceError, match="no YAML object"):
        k8s.read([write(tmp_path, "# nothing\n---\n", "blank.yaml")])
    with pytest.raises(TraceError, match="no Node and no Pod"):
        k8s.read([write(tmp_path, "kind: Service\nmetadata: {name: s}\n", "svc.yaml")])
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"kind: Pod\nmetadata: {name: \xff}\n")
    with pytest.raises(TraceError, match="not UTF-8") as e:
        k8s.read([binary])
    assert e.value.row == 2
    with pytest.raises(TraceError, match="unknown option"):
        k8s.read([LIST], {"speed": "fast"})


def test_file_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(k8s, "MAX_FILE_BYTES", 100)
    with pytest.raises(TraceError, match="over the limit"):
        k8s.read([LIST])


def test_billion_laughs_refused_quickly(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    text = "kind: Pod\nmetadata:\n  name: lol\n" + "\n".join(lines) + "\n"
    e = refused(tmp_path, text)  # refused before the aliases are expanded (10^9 nodes)
    assert "billion-laughs" in e.problem and e.field == "alias"


def test_recursive_alias_and_deep_nesting(tmp_path: Path) -> None:
    e = refused(tmp_path, "kind: Pod\nloop: &x [*x]\n")
    assert "refers to itself" in e.problem
    e = refused(tmp_path, "kind: Pod\ndeep: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "not valid YAML" in e.problem and "nesting depth" in e.problem and e.row == 2
    # deep but within the parser's limit: read (no RecursionError), then refused as a Pod
    e = refused(tmp_path, "kind: Pod\ndeep: " + "[" * 900 + "]" * 900 + "\n")
    assert e.field == "metadata.name"


def test_deep_nesting_with_the_pure_python_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class PyLoader(yaml.SafeLoader):
        pass

    monkeypatch.setattr(k8s, "_Loader", PyLoader)
    e = refused(tmp_path, "kind: Pod\ndeep: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in e.problem
    assert k8s.read([MULTI]).jobs.num_rows == 6  # the same reader otherwise


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    text = POD.format(name="a").replace(
        'requests: {cpu: "1", memory: 1Gi}',
        'requests: &r {cpu: "1", memory: 1Gi}\n      limits: *r',
    )
    assert k8s.read([write(tmp_path, text)]).jobs.num_rows == 1


# --- the k8s-sims benchmark manifests ------------------------------------------------------


def _cores(text: str) -> float:
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


@pytest.mark.skipif(not (SIMS / "pods-100.yaml").exists(), reason=f"{SIMS} absent")
def test_k8s_sims_manifests() -> None:
    t = k8s.read([SIMS / "nodes-100.yaml", SIMS / "pods-100.yaml"])
    assert t.nodes is not None and t.nodes.num_rows == 100
    assert t.jobs.num_rows == 1067 and t.report.rows_read == 1067 and t.report.rows_dropped == 0
    check_jobs(t.jobs)
    # independent sums, plain yaml parsing
    cpu = gpu = 0.0
    for doc in yaml.safe_load_all((SIMS / "pods-100.yaml").read_text()):
        cpu += sum(_cores(c["resources"]["requests"]["cpu"]) for c in doc["spec"]["containers"])
        ann = doc["metadata"].get("annotations", {})
        count, milli = int(ann.get(k8s.ALI_COUNT, 0)), int(ann.get(k8s.ALI_MILLI, 0))
        gpu += milli if count == 1 else 1000 * count
    assert math.isclose(t.jobs.column("request_cpu").to_numpy().sum(), cpu, rel_tol=1e-12)
    assert t.jobs.column("request_gpu").to_numpy().sum() == gpu
    node_cpu = node_gpu = 0.0
    for doc in yaml.safe_load_all((SIMS / "nodes-100.yaml").read_text()):
        node_cpu += _cores(doc["status"]["allocatable"]["cpu"])
        node_gpu += int(doc["status"]["allocatable"][k8s.ALI_COUNT])
    assert np.isclose(t.nodes.column("cpu").to_numpy().sum(), node_cpu)
    assert t.nodes.column("gpu").to_numpy().sum() == node_gpu
    assert [c.name for c in t.classes] == ["pods"]
