"""Every command family refuses bad input the same way: exit status 2, one `error:` line on
stderr, no traceback, before any work starts (issue 11, "Bad input").

One Hypothesis test per family (run, validate, compare, learn, bound, dashboard, sweep)
draws from the classes of bad input: huge numbers (sizes that cannot fit in memory), deep
or exploding YAML, bad `--out` paths and bad options. The memory budget is pinned to 16 GB
so that the outcome does not depend on the machine. Ray is never started: for `sweep` a
stand-in `clusteremu.actors.launch` fails the test if anything reaches it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.scenarios import limits
from clusteremu.scenarios.loader import SHIPPED_DIR
from tests.clusteremu.badinput import refused

EXAMPLES = settings(
    max_examples=36,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
BUDGET = 16e9
MM_C = (SHIPPED_DIR / "mm-c.yaml").read_text()


@pytest.fixture(autouse=True)
def pinned_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "memory_budget_bytes", lambda: int(BUDGET))


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Paths that cannot take results, and folders that hold another command's."""
    root = tmp_path_factory.mktemp("bad-out")
    a_file = root / "a-file"
    a_file.write_text("not a folder\n")
    summary_dir = root / "summary-is-a-folder"
    (summary_dir / "summary.json").mkdir(parents=True)
    (summary_dir / "estimates.parquet").mkdir()
    run_dir = root / "a-run"
    run_dir.mkdir()
    (run_dir / "jobs.parquet").write_bytes(b"PAR1")
    (run_dir / "summary.json").write_text("{}\n")
    learn_dir = root / "a-learner"
    learn_dir.mkdir()
    (learn_dir / "estimates.parquet").write_bytes(b"PAR1")
    sweep_dir = root / "a-sweep"
    sweep_dir.mkdir()
    (sweep_dir / "sweep.json").write_text('{"scenario": "mm-c", "cel')  # cut short
    json_dir = root / "dash.json"
    json_dir.mkdir()
    return {
        "file": a_file,
        "under-file": a_file / "out",
        "deep-under-file": a_file / "a" / "b",
        "unwritable": Path("/proc/self/clusteremu-out"),
        "result-is-folder": summary_dir,
        "run-folder": run_dir,
        "learn-folder": learn_dir,
        "sweep-folder": sweep_dir,
        "json-folder": json_dir,
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Scenario files that are hazards as YAML."""
    root = tmp_path_factory.mktemp("bad-yaml")
    out = {}
    out["duplicate-stop"] = root / "dup.yaml"
    out["duplicate-stop"].write_text(MM_C + "\nstop: {jobs: 100}\n")
    out["oversize"] = root / "big.yaml"
    with out["oversize"].open("wb") as fh:
        fh.truncate(17 * 2**20)  # sparse: 17 MiB of NUL bytes
    out["binary"] = root / "binary.yaml"
    out["binary"].write_bytes(bytes(range(256)) * 4)
    out["folder"] = root
    out["recursive-alias"] = root / "recursive.yaml"
    out["recursive-alias"].write_text(MM_C + "\nextra: &a [1, *a]\n")
    return out


def deep_yaml(depth: int, flow: str) -> str:
    if flow == "list":
        return "[" * depth + "1" + "]" * depth
    return "{a: " * depth + "1" + "}" * depth


def alias_bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines)


def scenario_with(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


# --- the classes of bad input, as argv tails ----------------------------------------------

COUNT_FIELDS = ("cluster.nodes.0.count", "stop.jobs")
huge_ints = st.integers(min_value=10**9, max_value=10**40)
#: Jobs and run lengths (s, of mm-c's 8 jobs/s) no run can hold: `run` streams its
#: results and holds only the live jobs (10^9 jobs run), but keeps 8 bytes a job on its
#: temporary disk (10^16 jobs: 80 PB).
huge_jobs = st.integers(min_value=10**16, max_value=10**40)
huge_floats = st.floats(min_value=1e16, max_value=1e308, allow_nan=False)


@st.composite
def huge_numbers(draw: st.DrawFn) -> tuple[list[str], str]:
    which = draw(st.sampled_from(["count", "replications", "time", "batch", "rate-time"]))
    n = draw(huge_ints)
    if which == "count":
        field = draw(st.sampled_from(COUNT_FIELDS))
        n = draw(huge_jobs) if field == "stop.jobs" else n
        return ["--set", f"{field}={n}"], "huge number"
    if which == "replications":
        return ["--set", f"replications={n}"], "huge number"
    horizon = draw(huge_floats)
    stop = ["--set", "stop.jobs=null", "--set", "stop.warmup_jobs=0"]
    if which == "time":
        return [*stop, "--set", f"stop.time_s={horizon!r}"], "huge number"
    if which == "batch":
        batch = f"workload.classes.0.arrival={{kind: batch, count: {n}}}"
        return [*stop, "--set", "stop.time_s=10.0", "--set", batch], "huge number"
    return [*stop, "--set", f"stop.time_s={horizon!r}"], "huge number"


@st.composite
def deep_overrides(draw: st.DrawFn) -> tuple[list[str], str]:
    depth = draw(st.integers(min_value=65, max_value=3000))
    text = deep_yaml(depth, draw(st.sampled_from(["list", "map"])))
    return ["--set", f"scheduler.placer.params.x={text}"], "deep YAML"


@st.composite
def bad_overrides(draw: st.DrawFn) -> tuple[list[str], str]:
    field = draw(st.from_regex(r"[a-z_]{1,12}(\.[a-z_]{1,12}){0,2}", fullmatch=True))
    choice = draw(st.sampled_from(["unknown", "no-equals", "index", "plain", "huge-text"]))
    if choice == "unknown":
        return ["--set", f"zz_{field}=1"], "bad option"
    if choice == "no-equals":
        return ["--set", f"stop.{field}"], "bad option"
    if choice == "index":
        return ["--set", f"workload.classes.{draw(st.integers(5, 10**6))}.holding_cost=2"], (
            "bad option"
        )
    if choice == "plain":
        return ["--set", f"name.{field}=1"], "bad option"
    return ["--set", "scheduler.placer.name=" + "x" * draw(st.integers(10_000, 200_000))], (
        "huge value"
    )


def bad_out(places: dict[str, Path], keys: list[str]) -> st.SearchStrategy[tuple[list[str], str]]:
    return st.sampled_from(keys).map(lambda k: (["--out", str(places[k])], "bad --out"))


# --- run ---------------------------------------------------------------------------------


@st.composite
def run_ray_only(draw: st.DrawFn) -> tuple[list[str], str]:
    flag, value = draw(
        st.sampled_from(
            [
                ("--shards", "2"),
                ("--window", "1.5"),
                ("--realtime", "10"),
                ("--address", "127.0.0.1:6379"),
                ("--shard-cpus", "1"),
                ("--dashboard-host", "0.0.0.0"),
            ]
        )
    )
    return [flag, value], "Ray option without --ray"


@st.composite
def bad_counts(draw: st.DrawFn) -> tuple[list[str], str]:
    flag = draw(st.sampled_from(["--replications", "--seed"]))
    return [flag, str(draw(st.integers(max_value=0 if flag == "--replications" else -1)))], (
        "bad option"
    )


@given(data=st.data())
@EXAMPLES
def test_run_refuses_bad_input(data: st.DataObject, places: dict[str, Path]) -> None:
    outs = ["file", "under-file", "deep-under-file", "unwritable", "result-is-folder"]
    tail, kind = data.draw(
        st.one_of(
            huge_numbers(),
            deep_overrides(),
            bad_overrides(),
            bad_out(places, [*outs, "learn-folder", "sweep-folder"]),
            run_ray_only(),
            bad_counts(),
        )
    )
    refused(["run", "mm-c", *tail], "run", kind)


def test_run_refuses_ray_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    line = refused(["run", "mm-c", "--ray"], "run", "missing extra", "`ray` extra")
    assert "pip install" in line


# --- validate ----------------------------------------------------------------------------


@st.composite
def yaml_hazards(draw: st.DrawFn, tmp: Path) -> tuple[list[str], str]:
    choice = draw(st.sampled_from(["deep", "bomb", "dup", "lognormal", "cost", "kind"]))
    name = f"h{draw(st.integers(0, 10**9))}.yaml"
    if choice == "deep":
        depth = draw(st.integers(min_value=65, max_value=5000))
        text = MM_C + f"\ndeep: {deep_yaml(depth, draw(st.sampled_from(['list', 'map'])))}\n"
        return [str(scenario_with(tmp, name, text))], "deep YAML"
    if choice == "bomb":
        text = MM_C.replace("placer: {name: first-fit}", "placer: {name: first-fit, params: {}}")
        levels, width = draw(st.integers(7, 12)), draw(st.integers(9, 12))
        text = alias_bomb(levels, width) + "\n" + text
        return [str(scenario_with(tmp, name, text))], "alias bomb"
    if choice == "dup":
        key = draw(st.sampled_from(["stop", "cluster", "seed", "name"]))
        value = {"stop": "{jobs: 10}", "cluster": "{}", "seed": "3", "name": "x"}[key]
        return [str(scenario_with(tmp, name, MM_C + f"\n{key}: {value}\n"))], "duplicate key"
    if choice == "lognormal":
        sigma = draw(st.floats(19.0, 1e6))
        mu = draw(st.floats(-100.0, 1e6))
        size = f"workload.classes.0.size={{kind: lognormal, mu: {mu!r}, sigma: {sigma!r}}}"
        return ["mm-c", "--set", size], "lognormal overflow"
    if choice == "cost":
        cost = draw(st.floats(1.01e12, 1e308))
        return ["mm-c", "--set", f"workload.classes.0.holding_cost={cost!r}"], "huge cost"
    where = draw(
        st.sampled_from(["size", "arrival", "speedup", "arrival.interarrival", "size.kind"])
    )
    if where == "size.kind":
        return ["mm-c", "--set", f"workload.classes.0.size.kind={draw(st.text(max_size=30))!r}"], (
            "bad kind"
        )
    return ["mm-c", "--set", f"workload.classes.0.{where}={{mean_s: 1}}"], "missing kind"


@given(data=st.data())
@EXAMPLES
def test_validate_refuses_bad_input(
    data: st.DataObject, files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.getbasetemp()
    tail, kind = data.draw(
        st.one_of(
            yaml_hazards(tmp),
            st.sampled_from(sorted(files)).map(lambda k: ([str(files[k])], f"file: {k}")),
            huge_numbers().map(lambda t: (["mm-c", *t[0]], t[1])),
            deep_overrides().map(lambda t: (["mm-c", *t[0]], t[1])),
            st.sampled_from(["/dev/zero", "mm-cc", "mmc", "ps-amdal", "nosuch/x.yaml"]).map(
                lambda p: ([p], "unreadable or misspelt")
            ),
        )
    )
    refused(["validate", *tail], "validate", kind)


def test_validate_builds_the_policies() -> None:
    """What validate accepts, run accepts: an MDP allocator needs two classes."""
    refused(
        [
            "validate",
            "mdp-example-1",
            "--set",
            "workload.classes=["
            + (
                "{name: a, arrival: {kind: poisson, rate_per_s: 1}, size: {kind: exponential, "
                "mean_s: 0.4}, speedup: {kind: amdahl, parallel_fraction: 0.5}, pool: cores}]"
            ),
        ],
        "validate",
        "policy cannot be built",
        "scheduler.allocator",
    )


def test_messages_name_the_right_field(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,size_s\n0.5,1\n1.5,2\n")
    arrival = f"{{kind: trace, path: {trace}, size_column: nosuch}}"
    line = refused(
        ["validate", "mm-c", "--set", f"workload.classes.0.arrival={arrival}"],
        "validate",
        "wrong field named",
        "arrival.size_column: expected a column",
    )
    assert "arrival.column" not in line
    # An unrelated file as a trace: its lines are never quoted.
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\nPASSWORD=hunter2,1,2,3\n")
    arrival = f"{{kind: trace, path: {secret}}}"
    line = refused(
        ["validate", "mm-c", "--set", f"workload.classes.0.arrival={arrival}"],
        "validate",
        "unrelated file quoted",
    )
    assert "hunter2" not in line
    line = refused(
        ["validate", "mm-c", "--set", "workload.classes.0.size={mean_s: 1}"],
        "validate",
        "missing kind",
        "expected one of exponential, hyperexponential, lognormal, deterministic, empirical",
    )


# --- compare -----------------------------------------------------------------------------


@st.composite
def bad_policies(draw: st.DrawFn) -> tuple[list[str], str]:
    choice = draw(st.sampled_from(["params", "kind", "name", "junk", "twice"]))
    word = draw(st.from_regex(r"[a-z]{1,10}", fullmatch=True))
    if choice == "params":
        text = f"placer=first-fit:{word}={draw(st.integers())}"
    elif choice == "kind":
        text = f"zz{word}=first-fit"
    elif choice == "name":
        text = f"placer=zz-{word}"
    elif choice == "twice":
        text = "placer=first-fit,placer=random-fit"
    else:
        text = draw(st.text(min_size=1, max_size=200).filter(lambda t: "=" not in t))
    return ["--policy", text], "bad --policy"


@st.composite
def bad_metrics(draw: st.DrawFn) -> tuple[list[str], str]:
    metric = draw(st.text(min_size=1, max_size=100))
    if metric in ("mean_response_time_s",):
        metric += "x"
    return ["--policy", "placer=first-fit", "--metric", "zz" + metric], "bad --metric"


@given(data=st.data())
@EXAMPLES
def test_compare_refuses_bad_input(data: st.DataObject, places: dict[str, Path]) -> None:
    outs = ["file", "under-file", "unwritable", "run-folder", "learn-folder"]
    tail, kind = data.draw(
        st.one_of(
            bad_policies(),
            bad_metrics(),
            bad_out(places, outs).map(lambda t: (["--policy", "placer=first-fit", *t[0]], t[1])),
            huge_numbers().map(lambda t: (["--policy", "placer=first-fit", *t[0]], t[1])),
            st.just(([], "no --policy")),
        )
    )
    refused(["compare", "mm-c", *tail], "compare", kind)


def test_compare_without_out_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusteremu.cli import main

    monkeypatch.chdir(tmp_path)
    short = ["--set", "stop.jobs=1000", "--set", "stop.warmup_jobs=100"]
    assert main(["compare", "mm-c", "--policy", "placer=first-fit", *short]) == 0
    assert list(tmp_path.iterdir()) == []
    assert "wrote" not in capsys.readouterr().out


# --- learn -------------------------------------------------------------------------------


@given(data=st.data())
@EXAMPLES
def test_learn_refuses_bad_input(data: st.DataObject, places: dict[str, Path]) -> None:
    outs = ["file", "under-file", "unwritable", "result-is-folder", "run-folder", "sweep-folder"]
    tail, kind = data.draw(
        st.one_of(
            bad_out(places, outs),
            st.integers(max_value=0).map(lambda n: (["--iterations", str(n)], "bad option")),
            st.integers(10**11, 10**30).map(lambda n: (["--iterations", str(n)], "huge number")),
            st.integers(10**5, 10**12).map(
                lambda n: (["--set", f"scheduler.allocator.params.truncation={n}"], "huge number")
            ),
            deep_overrides(),
            st.sampled_from(["3", "1c", ""]).map(lambda a: (["--algorithm", a], "bad option")),
        )
    )
    refused(["learn", "mdp-example-2", *tail], "learn", kind)


# --- bound -------------------------------------------------------------------------------


@given(data=st.data())
@EXAMPLES
def test_bound_refuses_bad_input(data: st.DataObject) -> None:
    tail, kind = data.draw(st.one_of(huge_numbers(), deep_overrides(), bad_overrides()))
    refused(["bound", "ps-amdahl", *tail], "bound", kind)


# --- dashboard ---------------------------------------------------------------------------


@given(data=st.data())
@EXAMPLES
def test_dashboard_refuses_bad_input(data: st.DataObject, places: dict[str, Path]) -> None:
    outs = ["file", "under-file", "unwritable", "run-folder", "json-folder"]
    schemes = st.from_regex(r"(ftp|file|gopher|)://[a-z]{0,8}|[a-z]{1,12}", fullmatch=True)
    tail, kind = data.draw(
        st.one_of(
            bad_out(places, outs),
            st.sampled_from(["file", "under-file"]).map(
                lambda k: (["--out", str(places[k] / "dash.json")], "bad --out")
            ),
            schemes.map(lambda u: (["--url", u, "--token", "t"], "bad --url")),
            schemes.map(lambda u: (["--url", u], "no token")),
        )
    )
    refused(["dashboard", *tail], "dashboard", kind)


def test_dashboard_names_the_missing_extra_and_unreachable_grafana(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unreachable Grafana (a closed port on loopback) and a missing `grafana` extra
    each get their own message; the first needs the extra installed."""
    if importlib.util.find_spec("grafana_client") is None:
        pytest.skip(
            "the grafana extra (grafana-client) is not installed: pip install -e .[grafana]"
        )
    refused(
        ["dashboard", "--url", "http://127.0.0.1:1", "--token", "t"],
        "dashboard",
        "unreachable URL",
        "cannot reach Grafana at http://127.0.0.1:1",
    )
    monkeypatch.setitem(sys.modules, "grafana_client", None)
    refused(
        ["dashboard", "--url", "http://127.0.0.1:1", "--token", "t"],
        "dashboard",
        "missing extra",
        "`grafana` extra",
    )


# --- sweep -------------------------------------------------------------------------------


@pytest.fixture
def no_ray_start(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A stand-in `clusteremu.actors.launch` whose `ensure_ray` and `stop_ray` fail the test:
    nothing
    may reach Ray."""

    def ensure_ray(*args: object, **kwargs: object) -> bool:
        raise AssertionError("Ray was started for bad input")

    def stop_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was stopped for bad input")

    launch = types.SimpleNamespace(ensure_ray=ensure_ray, stop_ray=stop_ray)
    monkeypatch.setitem(sys.modules, "clusteremu.actors.launch", launch)
    yield


@st.composite
def bad_sweep_options(draw: st.DrawFn) -> tuple[list[str], str]:
    choice = draw(st.sampled_from(["seeds-huge", "seeds-text", "grid", "grid-value", "workers"]))
    if choice == "seeds-huge":
        lo = draw(st.integers(0, 10**6))
        return ["--seeds", f"{lo}-{lo + draw(st.integers(10**8, 10**15))}"], "huge number"
    if choice == "seeds-text":
        text = draw(st.sampled_from(["9-1", "x", "1,1", "-3", "1-", "1-2-3", "1.5"]))
        return ["--seeds", text], "bad option"
    if choice == "grid":
        text = draw(st.sampled_from(["a.b", "a.b=", "=1", "a=1,1", "stop.jobs=1,,2"]))
        return ["--grid", text], "bad option"
    if choice == "grid-value":
        value = draw(st.sampled_from(["oops", "-1", "1e400", "[1]", "{a: 1}"]))
        return ["--grid", f"workload.classes.0.arrival.rate_per_s=7,{value}"], "bad option"
    return ["--workers", str(draw(st.integers(max_value=0)))], "bad option"


@given(data=st.data())
@EXAMPLES
def test_sweep_refuses_bad_input_before_ray(
    data: st.DataObject,
    places: dict[str, Path],
    no_ray_start: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fresh = str(tmp_path_factory.getbasetemp() / "sweep-out")
    outs = ["file", "under-file", "unwritable", "run-folder", "learn-folder", "sweep-folder"]
    tail, kind = data.draw(
        st.one_of(
            bad_sweep_options().map(lambda t: ([*t[0], "--out", fresh], t[1])),
            bad_policies().map(lambda t: ([*t[0], "--out", fresh], t[1])),
            bad_out(places, outs),
            huge_numbers().map(lambda t: ([*t[0], "--out", fresh], t[1])),
            deep_overrides().map(lambda t: ([*t[0], "--out", fresh], t[1])),
        )
    )
    refused(["sweep", "mm-c", *tail], "sweep", kind)


def test_sweep_names_the_missing_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    refused(
        ["sweep", "mm-c", "--out", str(tmp_path / "s")], "sweep", "missing extra", "`ray` extra"
    )
