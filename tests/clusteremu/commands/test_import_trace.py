"""`clusteremu import` (clusteremu/commands/import_trace.py): a trace into a folder that runs
as it is; `--stats` and `--json`; bad input refused with exit 2 and one line naming the
file; the output folder written together (an error or an interrupt leaves it as it was);
and the summary keys of a replayed trace (`mean_bounded_slowdown`, `unscheduled`)."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from clusteremu.cli import main
from clusteremu.scenarios.errors import ScenarioError
from tests.clusteremu.badinput import refused

pytestmark = pytest.mark.timeout(180)

#: MaxProcs 4; job 4 has a zero run time (dropped). Under easy-backfill (the SWF default):
#: job 1 holds the 4 cores from 0 s to 100 s; jobs 2 (1 core, 5 s) and 3 (2 cores, 40 s)
#: cannot start beside it and both start at 100 s.
#:   response 100, 95, 120 s; run 100, 5, 40 s; wait 0, 90, 80 s
#:   bounded slowdown max(1, response / max(run, 10 s)): 1, 95 / 10 = 9.5, 120 / 40 = 3
SWF = """\
; Version: 2.2
; MaxProcs: 4
1 0 0 100 4 -1 -1 4 100 -1 1 1 -1 -1 1 -1 -1 -1
2 10 0 5 1 -1 -1 1 5 -1 1 2 -1 -1 1 -1 -1 -1
3 20 0 40 2 -1 -1 2 -1 -1 1 1 -1 -1 -1 -1 -1 -1
4 30 0 0 1 -1 -1 1 10 -1 1 1 -1 -1 -1 -1 -1 -1
"""
BOUNDED_SLOWDOWN = (1.0 + 9.5 + 3.0) / 3.0
RESULT_FILES = {"scenario.yaml", "jobs.parquet", "import-report.json", "load.png"}

#: Two 4-core nodes; pod `wide` requests 16 cores: no node can ever take it.
KUBERNETES = """\
apiVersion: v1
kind: List
items:
- kind: Node
  metadata: {name: n1, labels: {zone: a}}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- kind: Node
  metadata: {name: n2, labels: {zone: b}}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- kind: Pod
  metadata: {name: p1, creationTimestamp: "2024-05-01T10:00:00Z",
             deletionTimestamp: "2024-05-01T10:01:40Z"}
  spec: {containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
- kind: Pod
  metadata: {name: wide, creationTimestamp: "2024-05-01T10:00:10Z",
             deletionTimestamp: "2024-05-01T10:01:40Z"}
  spec: {containers: [{name: c, resources: {requests: {cpu: "16", memory: 1Gi}}}]}
- kind: Pod
  metadata: {name: p3, creationTimestamp: "2024-05-01T10:00:20Z",
             deletionTimestamp: "2024-05-01T10:01:40Z"}
  spec: {containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
"""


def _clusteremu(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clusteremu", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _main(argv: list[str | Path]) -> tuple[int, str, str]:
    """`clusteremu ARGV` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("traces")
    paths = {
        "swf": root / "log.swf",
        "gz": root / "log-gzipped.swf",
        "cut-gz": root / "cut.swf",
        "truncated": root / "truncated.swf",
        "backwards": root / "backwards.swf",
        "all-dropped": root / "all-dropped.swf",
        "kubernetes": root / "cluster.yaml",
        "a-file": root / "a-file",
    }
    paths["swf"].write_text(SWF)
    whole = gzip.compress(SWF.encode(), mtime=0)
    paths["gz"].write_bytes(whole)  # gzip whatever the name: read transparently
    paths["cut-gz"].write_bytes(whole[: len(whole) // 2])
    lines = SWF.splitlines()
    paths["truncated"].write_text("\n".join([*lines[:3], lines[3][:20]]) + "\n")
    paths["backwards"].write_text("\n".join([*lines[:2], lines[3], lines[2]]) + "\n")
    paths["all-dropped"].write_text("\n".join([*lines[:2], lines[5]]) + "\n")
    paths["kubernetes"].write_text(KUBERNETES)
    paths["a-file"].write_text("not a folder\n")
    return paths


@pytest.fixture(scope="module")
def imported(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clusteremu import swf log.swf --out DIR`, end to end."""
    out = tmp_path_factory.mktemp("imported") / "swf-run"
    done = _clusteremu("import", "swf", files["swf"], "--out", out)
    assert done.returncode == 0, done.stderr
    assert "scenario.yaml" in done.stdout
    return out


@pytest.fixture(scope="module")
def summary(imported: Path) -> dict[str, Any]:
    """`clusteremu run DIR/scenario.yaml --json`, end to end."""
    done = _clusteremu("run", imported / "scenario.yaml", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


# --- --out: a folder that runs as it is ----------------------------------------------------


def test_import_writes_the_folder(imported: Path) -> None:
    names = {p.name for p in imported.iterdir()}
    assert names >= RESULT_FILES
    assert "nodes.parquet" not in names  # SWF gives only the machine's size
    manifest = json.loads((imported / "clusteremu-manifest.json").read_text())
    assert manifest["command"] == "import"
    assert set(manifest["files"]) == RESULT_FILES
    assert (imported / "load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((imported / "import-report.json").read_text())
    assert (report["rows_read"], report["rows_kept"], report["rows_dropped"]) == (4, 3, 1)
    assert report["dropped"] == {"zero run time": 1}
    assert report["scenario"] == {
        "placer": "easy-backfill",
        "node_types": 1,
        "nodes": 1,
        "classes": 1,
    }
    jobs = pq.read_table(imported / "jobs.parquet")
    assert jobs.column("trace_id").to_pylist() == ["1", "2", "3"]
    assert jobs.column("arrival_s").to_pylist() == [0.0, 10.0, 20.0]
    scenario = yaml.safe_load((imported / "scenario.yaml").read_text())
    assert scenario["name"] == "swf-run"  # the folder's name
    assert scenario["stop"] == {"jobs": 3}
    assert scenario["workload"]["jobs"] == {"path": "jobs.parquet"}
    assert scenario["cluster"]["node_types"][0]["cpu"] == 4.0


def test_the_imported_scenario_runs(imported: Path, summary: dict[str, Any]) -> None:
    report = json.loads((imported / "import-report.json").read_text())
    assert summary["jobs_completed"] == report["rows_kept"] == 3
    assert summary["jobs_unfinished"] == 0 and summary["unscheduled"] == 0
    assert summary["mean_response_time_s"] == pytest.approx((100 + 95 + 120) / 3)
    assert summary["mean_wait_s"] == pytest.approx((0 + 90 + 80) / 3)


def test_mean_bounded_slowdown_by_hand(summary: dict[str, Any]) -> None:
    """(1 + 9.5 + 3) / 3 = 4.5: job 2's 5 s run is bounded below by 10 s."""
    assert summary["mean_bounded_slowdown"] == pytest.approx(BOUNDED_SLOWDOWN)
    assert summary["per_class"]["swf"]["mean_bounded_slowdown"] == pytest.approx(4.5)


def test_a_gzipped_log_reads_as_the_plain_one(
    files: dict[str, Path], imported: Path, tmp_path: Path
) -> None:
    code, _, err = _main(["import", "swf", files["gz"], "--out", tmp_path / "gz", "--name", "x"])
    assert code == 0, err
    a = pq.read_table(imported / "jobs.parquet")
    b = pq.read_table(tmp_path / "gz" / "jobs.parquet")
    assert a.drop_columns(["trace_id"]).equals(b.drop_columns(["trace_id"]))
    assert yaml.safe_load((tmp_path / "gz" / "scenario.yaml").read_text())["name"] == "x"


def test_kubernetes_import_writes_five_files_and_counts_the_unscheduled_pod(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Pod `wide` (16 cores) fits no 4-core node: under kube-default it never starts, the
    run still ends, and the summary counts it as unscheduled (and unfinished)."""
    out = tmp_path / "k8s"
    code, _, err = _main(["import", "kubernetes", files["kubernetes"], "--out", out])
    assert code == 0, err
    assert {p.name for p in out.iterdir()} >= RESULT_FILES | {"nodes.parquet"}
    scenario = yaml.safe_load((out / "scenario.yaml").read_text())
    assert scenario["scheduler"]["placer"]["name"] == "kube-default"
    code, stdout, err = _main(["run", out / "scenario.yaml", "--json"])
    assert code == 0, err
    result = json.loads(stdout)
    assert result["unscheduled"] == 1
    assert result["jobs_completed"] == 2
    assert result["jobs_unfinished"] == 1


# --- --stats and --json --------------------------------------------------------------------


def test_stats_print_the_trace_and_write_nothing(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, stdout, err = _main(["import", "swf", files["swf"], "--stats"])
    assert code == 0, err
    assert "jobs 3 over 20 s" in stdout
    assert "4 rows read, 3 kept, 1 dropped" in stdout
    assert list(tmp_path.iterdir()) == []
    assert files["swf"].read_text() == SWF


def test_stats_as_json(files: dict[str, Path]) -> None:
    code, stdout, err = _main(["import", "swf", files["swf"], "--stats", "--json"])
    assert code == 0, err
    data = json.loads(stdout)
    assert data["stats"]["jobs"] == 3
    assert data["stats"]["span_s"] == 20.0
    assert data["stats"]["capacity_cores"] == 4.0
    assert data["stats"]["peak_jobs_running"] == 2  # jobs 1 and 3 (job 2 ends at 15 s)
    assert data["stats"]["peak_cores_requested"] == 6.0
    assert data["report"]["rows_kept"] == 3 and "scenario" not in data["report"]


def test_out_as_json_prints_the_report(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "j"
    code, stdout, err = _main(["import", "swf", files["swf"], "--out", out, "--json"])
    assert code == 0, err
    report = json.loads(stdout)
    assert report == json.loads((out / "import-report.json").read_text())
    assert report["rows_kept"] == 3 and report["scenario"]["placer"] == "easy-backfill"


# --- bad input: exit 2, one line naming the file ---------------------------------------------


def _bad(argv: list[str | Path], *expected: str) -> str:
    """Exit 2, nothing on stdout, no traceback, one `error:` line (the last) holding each of
    `expected`; returns it."""
    code, stdout, err = _main(argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert stdout == ""
    assert "Traceback" not in err
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


BAD_INPUT: dict[str, tuple[Callable[[dict[str, Path]], list[str | Path]], tuple[str, ...]]] = {
    "missing file": (
        lambda f: ["swf", f["swf"].parent / "no-such.swf"],
        ("no-such.swf", "no such file"),
    ),
    "gzip cut short": (lambda f: ["swf", f["cut-gz"]], ("cut.swf", "gzip")),
    "truncated line": (
        lambda f: ["swf", f["truncated"]],
        ("truncated.swf", "row 4", "expected 18 fields"),
    ),
    "submit time going back": (
        lambda f: ["swf", f["backwards"]],
        ("backwards.swf", "row 4", "submit time"),
    ),
    "no job kept": (lambda f: ["swf", f["all-dropped"]], ("all-dropped.swf", "kept no job")),
    "a kubernetes file as swf": (lambda f: ["swf", f["kubernetes"]], ("cluster.yaml", "row 1")),
    "unknown option": (lambda f: ["swf", f["swf"], "--option", "x=1"], ("swf", "'x'")),
    "option without =": (lambda f: ["swf", f["swf"], "--option", "x"], ("--option 'x'", "=")),
    "unknown format": (lambda f: ["no-such-format", f["swf"]], ("no-such-format",)),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_refused(files: dict[str, Path], tmp_path: Path, case: str) -> None:
    args, expected = BAD_INPUT[case]
    out = tmp_path / "never"
    _bad(["import", *args(files), "--out", out], *expected)
    assert not out.exists()  # refused before anything is written
    if case != "no job kept":  # --stats reads the trace the same way
        _bad(["import", *args(files), "--stats"], *expected)


def test_bad_out_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    _bad(["import", "swf", files["swf"], "--out", files["a-file"]], "a-file", "is a file")
    _bad(["import", "swf", files["swf"], "--out", files["a-file"] / "under"], "a-file")
    _bad(["import", "swf", files["swf"], "--out", "/proc/x"], "/proc/x")
    assert files["a-file"].read_text() == "not a folder\n"


def test_bad_input_prints_one_line_only(files: dict[str, Path], tmp_path: Path) -> None:
    """As every command: one `error:` line on stderr and nothing else (tests/clusteremu/
    badinput.py), also when the trace is read before the error is found."""
    refused(["import", "swf", str(files["truncated"]), "--stats"], "import", "bad trace")
    refused(
        ["import", "swf", str(files["swf"].parent / "no-such.swf"), "--out", str(tmp_path / "o")],
        "import",
        "missing file",
    )


# --- the folder is written together ------------------------------------------------------------


def test_a_folder_with_other_files_keeps_them(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    code, _, err = _main(["import", "swf", files["swf"], "--out", out])
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine\n"
    assert {p.name for p in out.iterdir()} >= RESULT_FILES


def test_import_replaces_its_own_results_and_refuses_another_commands(
    files: dict[str, Path], imported: Path, tmp_path: Path
) -> None:
    out = tmp_path / "again"
    assert _main(["import", "swf", files["swf"], "--out", out, "--name", "first"])[0] == 0
    code, _, err = _main(["import", "swf", files["swf"], "--out", out, "--name", "second"])
    assert code == 0, err
    assert yaml.safe_load((out / "scenario.yaml").read_text())["name"] == "second"
    run_dir = tmp_path / "a-run"
    code, _, err = _main(["run", imported / "scenario.yaml", "--out", run_dir])
    assert code == 0, err
    before = _snapshot(run_dir)
    _bad(
        ["import", "swf", files["swf"], "--out", run_dir],
        str(run_dir),
        "holds the results of `clusteremu run`",
    )
    assert _snapshot(run_dir) == before


def _failing_load(exc: BaseException) -> Callable[..., Any]:
    def load(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return load


def test_a_failed_import_leaves_the_folder_as_it_was(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The written scenario fails to load (a stand-in loader): exit 2, the folder's earlier
    import untouched, no staging folder left."""
    out = tmp_path / "kept"
    assert _main(["import", "swf", files["swf"], "--out", out])[0] == 0
    before = _snapshot(out)
    monkeypatch.setattr(
        "clusteremu.scenarios.loader.load_scenario",
        _failing_load(ScenarioError(str(out / "scenario.yaml"), [("workload", "broken")])),
    )
    _bad(["import", "swf", files["swf"], "--out", out, "--name", "other"], "broken")
    assert _snapshot(out) == before


def test_an_interrupted_import_leaves_the_folder_as_it_was(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "kept"
    assert _main(["import", "swf", files["swf"], "--out", out])[0] == 0
    before = _snapshot(out)
    monkeypatch.setattr(
        "clusteremu.scenarios.loader.load_scenario", _failing_load(KeyboardInterrupt())
    )
    code, stdout, err = _main(["import", "swf", files["swf"], "--out", out, "--name", "other"])
    assert code == 130, err
    assert "interrupted" in err and stdout == ""
    assert _snapshot(out) == before


def test_a_failed_import_does_not_create_the_folder(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import into a new folder that fails while writing leaves no folder behind (it
    was not there: "an error or an interrupt leaves DIR as it was")."""
    out = tmp_path / "new"
    monkeypatch.setattr(
        "clusteremu.scenarios.loader.load_scenario",
        _failing_load(ScenarioError(str(out / "scenario.yaml"), [("workload", "broken")])),
    )
    _bad(["import", "swf", files["swf"], "--out", out], "broken")
    assert not out.exists()
