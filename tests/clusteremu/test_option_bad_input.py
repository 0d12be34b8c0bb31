"""Bad options of every command end the same way before any work (issue 28): exit status
2, one `error:` line naming the option, no traceback (`tests/clusteremu/badinput.py`).

One Hypothesis family per command draws from the classes of bad options that
`clusteremu.scenarios.option_checks` refuses: sizes that multiply into memory (seed ranges, runs,
environments, network layers, trials, experiments x budget, grid points, batch counts),
worker counts, negative seeds, time limits that are not finite and positive, lists with
an empty item or a name twice, an empty `--out`. The memory budget is pinned to 16 GB so
the outcome does not depend on the machine.

"Before any work" is checked with stand-ins (`no_work`): Ray's start, the trace replays,
the engine, profiling, RL training, the exact solver and the per-cell scenario validation
of a sweep or compare grid each fail the test if a bad option reaches them.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.scenarios import limits
from tests.clusteremu.badinput import refused

EXAMPLES = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
BUDGET = 16e9
GPU = Path(__file__).parent.parent / "fixtures" / "gpu"
GPU_FILES = ["--nodes", str(GPU / "nodes.csv"), "--pods", str(GPU / "pods.csv")]
#: More workers than 16 GB holds at 300 MB a worker process.
MANY = st.integers(min_value=54, max_value=10**9)
NEGATIVE = st.integers(max_value=-1)
EMPTY_OUT = st.sampled_from(["", " ", "\t"])
Draw = tuple[list[str], str]


@pytest.fixture(autouse=True)
def pinned_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "memory_budget_bytes", lambda: int(BUDGET))


def _work(what: str) -> Callable[..., Any]:
    def started(*args: object, **kwargs: object) -> Any:
        raise AssertionError(f"{what} started for bad input")

    return started


class Limited:
    """`real`, failing the test after `calls` calls since the last `reset` (a grid whose
    points are validated one by one)."""

    def __init__(self, real: Callable[..., Any], calls: int, what: str) -> None:
        self.real, self.calls, self.what, self.count = real, calls, what, 0

    def reset(self) -> None:
        self.count = 0

    def __call__(self, *args: object, **kwargs: object) -> Any:
        self.count += 1
        if self.count > self.calls:
            raise AssertionError(f"{self.what}: over {self.calls} scenarios loaded for bad input")
        return self.real(*args, **kwargs)


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Stand-ins that fail the test if a bad option reaches work of any command; yields a
    function to call before each command (it resets the count of scenarios loaded)."""
    import clusteremu.cli
    import clusteremu.cluster.engine
    import clusteremu.cluster.experiments.mdp_learner
    import clusteremu.cluster.policies.pennyworth.exact
    import clusteremu.cluster.policies.pennyworth.problem
    import clusteremu.cluster.policies.provisioner.sizing
    import clusteremu.commands.gpu_frag
    import clusteremu.tuners.domains
    import clusteremu.tuners.evaluate
    import clusteremu.tuners.rl
    import clusteremu.tuners.sweep

    launch = types.SimpleNamespace(
        ensure_ray=_work("Ray"),
        stop_ray=_work("Ray"),
        run_on_ray=_work("Ray"),
        LOOPBACK="127.0.0.1",
    )
    monkeypatch.setitem(sys.modules, "clusteremu.actors.launch", launch)
    monkeypatch.setattr(clusteremu.cluster.engine, "Engine", _work("the engine"))
    monkeypatch.setattr(
        clusteremu.cluster.policies.provisioner.sizing, "profile", _work("profiling")
    )
    monkeypatch.setattr(
        clusteremu.cluster.policies.pennyworth.exact, "solve_jobs", _work("the solver")
    )
    problem = clusteremu.cluster.policies.pennyworth.problem
    monkeypatch.setattr(problem, "checked_problem", _work("building the batch"))
    monkeypatch.setattr(clusteremu.commands.gpu_frag, "_replay_task", _work("a replay"))
    monkeypatch.setattr(clusteremu.tuners.rl, "train_agent", _work("RL training"))
    monkeypatch.setattr(clusteremu.tuners.domains, "sample_configs", _work("drawing experiments"))
    monkeypatch.setattr(
        clusteremu.tuners.evaluate, "experiment_from_file", _work("building experiments")
    )
    monkeypatch.setattr(clusteremu.cli, "run_spec", _work("a run"))
    monkeypatch.setattr(clusteremu.cluster.experiments.mdp_learner, "learn", _work("learning"))
    sweep_load = Limited(clusteremu.tuners.sweep.load_scenario, 20, "sweep")
    monkeypatch.setattr(clusteremu.tuners.sweep, "load_scenario", sweep_load)
    compare_load = Limited(clusteremu.cli.load_scenario, 20, "compare --grid")
    monkeypatch.setattr(clusteremu.cli, "load_scenario", compare_load)

    def reset() -> None:
        sweep_load.reset()
        compare_load.reset()

    yield reset


@pytest.fixture
def fresh(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder that does not exist yet (an --out that would be accepted)."""
    return str(tmp_path_factory.mktemp("option-out") / "out")


def _values(n: int) -> str:
    return ",".join(str(6 + i / 1000) for i in range(n))


# --- solve -------------------------------------------------------------------------------


@st.composite
def solve_options(draw: st.DrawFn) -> Draw:
    choice = draw(st.sampled_from(["time", "seed", "count", "set"]))
    if choice == "time":
        value = draw(st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e9", "-0.0"]))
        return ["--time-limit", value], "bad time limit"
    if choice == "seed":
        return ["--seed", str(draw(NEGATIVE))], "negative seed"
    if choice == "count":
        count = draw(st.integers(min_value=63, max_value=10**12))
        return ["--set", f"workload.classes.0.arrival.count={count}"], "huge number"
    path = draw(st.sampled_from(["seed.", ".seed", "stop..jobs", "seed. ", "seed.."]))
    return ["--set", f"{path}=3"], "bad --set"


@given(data=st.data())
@EXAMPLES
def test_solve_refuses_bad_options_before_work(
    data: st.DataObject, no_work: Callable[[], None]
) -> None:
    tail, kind = data.draw(solve_options())
    no_work()
    refused(["solve", "pennyworth-max", *tail], "solve", kind)


def test_solve_says_what_it_does_and_its_time_limit(capsys: pytest.CaptureFixture[str]) -> None:
    """A search that may run to --time-limit (600 s by default) says so as it starts."""
    from clusteremu.cli import main

    assert main(["solve", "pennyworth-max", "--json", "--time-limit", "3"]) == 0
    err = capsys.readouterr().err
    assert "planning 32 jobs exactly" in err and "--time-limit 3 s" in err


# --- synthesize ----------------------------------------------------------------------------


@st.composite
def synthesize_options(draw: st.DrawFn) -> Draw:
    choice = draw(st.sampled_from(["jobs", "workers", "seed", "trials", "time", "out"]))
    if choice == "jobs":
        return ["--jobs", str(draw(st.integers(min_value=63, max_value=10**9)))], "huge number"
    if choice == "workers":
        return ["--workers", str(draw(MANY))], "too many workers"
    if choice == "seed":
        return ["--seed", str(draw(NEGATIVE))], "negative seed"
    if choice == "trials":
        return ["--trials", str(draw(st.integers(2 * 10**5, 10**15)))], "huge number"
    if choice == "time":
        return ["--time-limit", draw(st.sampled_from(["nan", "inf", "0", "-5"]))], (
            "bad time limit"
        )
    return ["--out", draw(EMPTY_OUT)], "empty --out"


@given(data=st.data())
@EXAMPLES
def test_synthesize_refuses_bad_options_before_ray(
    data: st.DataObject, no_work: Callable[[], None], fresh: str
) -> None:
    tail, kind = data.draw(synthesize_options())
    no_work()
    out = [] if "--out" in tail else ["--out", fresh]
    refused(["synthesize", "pennyworth-max", *out, *tail], "synthesize", kind)


# --- tune ----------------------------------------------------------------------------------

BAD_TUNER_LISTS = ["fixed,,", ",fixed", "fixed,fixed", "", " ", "fixed, ,tpe", "tpe,random,tpe"]


@st.composite
def tune_options(draw: st.DrawFn) -> Draw:
    choice = draw(st.sampled_from(["tuner", "budget", "experiments", "seed", "workers", "out"]))
    if choice == "tuner":
        return ["--tuner", draw(st.sampled_from(BAD_TUNER_LISTS))], "bad list"
    tail = ["--tuner", "fixed"]
    if choice == "budget":
        return [*tail, "--budget", str(draw(st.integers(10**4, 10**15)))], "huge number"
    if choice == "experiments":
        n = draw(st.integers(2 * 10**5, 10**15))
        return [*tail, "--experiments", str(n), "--budget", "1"], "huge number"
    if choice == "seed":
        return [*tail, "--seed", str(draw(NEGATIVE))], "negative seed"
    if choice == "workers":
        return [*tail, "--workers", str(draw(MANY))], "too many workers"
    return [*tail, "--out", draw(EMPTY_OUT)], "empty --out"


@given(data=st.data())
@EXAMPLES
def test_tune_refuses_bad_options_before_ray(
    data: st.DataObject, no_work: Callable[[], None]
) -> None:
    tail, kind = data.draw(tune_options())
    no_work()
    refused(["tune", *tail], "tune", kind)


# --- train-rl ------------------------------------------------------------------------------


@st.composite
def train_rl_options(draw: st.DrawFn) -> Draw:
    choice = draw(st.sampled_from(["steps", "envs", "net", "net-text", "seed", "out"]))
    if choice == "steps":
        return ["--steps", str(draw(st.integers(10**8, 10**15)))], "huge number"
    if choice == "envs":
        return ["--envs", str(draw(MANY))], "too many workers"
    if choice == "net":
        width = draw(st.integers(20_000, 10**6))
        layers = draw(st.integers(2, 4))
        return ["--net-arch", ",".join([str(width)] * layers)], "huge number"
    if choice == "net-text":
        text = draw(st.sampled_from(["", "0", "512,,512", "-1", "a", "512,0"]))
        return ["--net-arch", text], "bad list"
    if choice == "seed":
        return ["--seed", str(draw(NEGATIVE))], "negative seed"
    return ["--out", draw(EMPTY_OUT)], "empty --out"


@given(data=st.data())
@EXAMPLES
def test_train_rl_refuses_bad_options_before_training(
    data: st.DataObject, no_work: Callable[[], None], tmp_path_factory: pytest.TempPathFactory
) -> None:
    tail, kind = data.draw(train_rl_options())
    no_work()
    model = str(tmp_path_factory.getbasetemp() / "model.zip")
    out = [] if "--out" in tail else ["--out", model]
    steps = [] if "--steps" in tail else ["--steps", "10"]
    refused(["train-rl", *steps, *out, *tail], "train-rl", kind)


# --- provision -----------------------------------------------------------------------------

BAD_PROVISIONER_LISTS = ["static,static", "grouped,,vpa", ",static", "", "vpa,grouped,vpa"]


@st.composite
def provision_options(draw: st.DrawFn, fresh: str, model: str) -> Draw:
    choice = draw(
        st.sampled_from(
            [
                "list",
                "model",
                "profiling-runs",
                "trials",
                "huge-profiling",
                "runs",
                "seed",
                "train-trials",
                "out",
            ]
        )
    )
    compare = ["compare", "ml-workflow"]
    train = ["train", "ml-workflow", "--out", fresh]
    if choice == "list":
        return [*compare, "--provisioners", draw(st.sampled_from(BAD_PROVISIONER_LISTS))], (
            "bad list"
        )
    if choice == "model":
        which = draw(st.sampled_from(["static", "grouped", "static,vpa"]))
        return [*compare, "--provisioners", which, "--model", model], "ignored option"
    if choice == "profiling-runs":
        return [*compare, "--profiling-runs", str(draw(st.integers(max_value=1)))], "bad count"
    if choice == "trials":
        return [*compare, "--trials", str(draw(st.integers(max_value=0)))], "bad count"
    if choice == "huge-profiling":
        n = draw(st.integers(10**6, 10**15))
        return [*compare, "--profiling-runs", str(n)], "huge number"
    if choice == "runs":
        return [*train, "--runs", str(draw(st.integers(10**6, 10**15)))], "huge number"
    if choice == "seed":
        return [*train, "--seed", str(draw(NEGATIVE))], "negative seed"
    if choice == "train-trials":
        return [*train, "--trials", str(draw(st.integers(2 * 10**5, 10**15)))], "huge number"
    return ["train", "ml-workflow", "--out", draw(EMPTY_OUT)], "empty --out"


@given(data=st.data())
@EXAMPLES
def test_provision_refuses_bad_options_before_work(
    data: st.DataObject,
    no_work: Callable[[], None],
    fresh: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    model = tmp_path_factory.getbasetemp() / "sizing.json"
    tail, kind = data.draw(provision_options(fresh, str(model)))
    no_work()
    expect = "provisioners use a sizing model" if kind == "ignored option" else None
    refused(["provision", *tail], "provision", kind, expect)


def test_provision_train_with_too_few_runs_to_learn_from_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Profiled usages that fill one bin (`provision train ml-workflow --runs 20`) end
    with exit 2 and a message saying to profile more runs, not a traceback (after the
    profiling, which is what shows it)."""
    import clusteremu.cluster.policies.provisioner.sizing as sizing
    from clusteremu.cli import main

    def one_bin(*args: object, **kwargs: object) -> Any:
        raise ValueError("training: the usages fill only one bin; nothing to predict")

    profiled = types.SimpleNamespace(table=types.SimpleNamespace(num_rows=20))
    monkeypatch.setattr(sizing, "profile", lambda *a, **k: profiled)
    monkeypatch.setattr(sizing, "train_sizing", one_bin)
    out = tmp_path / "out"
    assert main(["provision", "train", "ml-workflow", "--runs", "20", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: --runs 20: ") and "profile more runs" in last
    assert not out.exists()


# --- gpu-frag ------------------------------------------------------------------------------

BAD_SEED_LISTS = ["1,,2", "", ",", "3,3", "1-3,2", "-3", "5-1", "x", "1,", "1.5"]


@st.composite
def gpu_frag_options(draw: st.DrawFn) -> Draw:
    choice = draw(st.sampled_from(["seeds", "huge", "policy", "workers", "out"]))
    if choice == "seeds":
        return ["--policy", "fgd", "--seeds", draw(st.sampled_from(BAD_SEED_LISTS))], "bad list"
    if choice == "huge":
        lo = draw(st.integers(0, 10**6))
        hi = lo + draw(st.integers(10**5, 2 * 10**6))  # 512 kB a replay: over 50 GB
        return ["--policy", "fgd", "--seeds", f"{lo}-{hi}"], "huge number"
    if choice == "policy":
        text = draw(st.sampled_from(["fgd,,best-fit", "fgd,fgd", "", "all,fgd", ","]))
        return ["--policy", text, "--seeds", "1"], "bad list"
    tail = ["--policy", "fgd", "--seeds", "1-2"]
    if choice == "workers":
        return [*tail, "--workers", str(draw(MANY))], "too many workers"
    return [*tail, "--out", draw(EMPTY_OUT)], "empty --out"


@given(data=st.data())
@EXAMPLES
def test_gpu_frag_refuses_bad_options_before_replaying(
    data: st.DataObject, no_work: Callable[[], None]
) -> None:
    tail, kind = data.draw(gpu_frag_options())
    no_work()
    refused(["gpu-frag", *GPU_FILES, *tail], "gpu-frag", kind)


# --- dashboard -----------------------------------------------------------------------------


@given(out=EMPTY_OUT)
@EXAMPLES
def test_dashboard_refuses_an_empty_out(out: str, no_work: Callable[[], None]) -> None:
    refused(["dashboard", "--out", out], "dashboard", "empty --out", "expected a path")


# --- sweep, compare, run, validate, bound: the same checks ---------------------------------


@st.composite
def sweep_options(draw: st.DrawFn) -> Draw:
    choice = draw(st.sampled_from(["seeds", "grid", "workers", "out"]))
    if choice == "seeds":
        return ["--seeds", draw(st.sampled_from(["", ",", "1,,2", "1,", " "]))], "bad list"
    if choice == "grid":
        a, b = draw(st.integers(317, 400)), draw(st.integers(317, 400))
        rate, cost = "workload.classes.0.arrival.rate_per_s", "workload.classes.0.holding_cost"
        return ["--grid", f"{rate}={_values(a)}", "--grid", f"{cost}={_values(b)}"], ("huge number")
    if choice == "workers":
        return ["--workers", str(draw(MANY))], "too many workers"
    return ["--out", draw(EMPTY_OUT)], "empty --out"


@given(data=st.data())
@EXAMPLES
def test_sweep_refuses_bad_options_before_ray(
    data: st.DataObject, no_work: Callable[[], None], fresh: str
) -> None:
    tail, kind = data.draw(sweep_options())
    no_work()
    out = [] if "--out" in tail else ["--out", fresh]
    refused(["sweep", "mm-c", *out, *tail], "sweep", kind)


@st.composite
def compare_grids(draw: st.DrawFn) -> Draw:
    path = "workload.classes.0.arrival.rate_per_s"
    choice = draw(st.sampled_from(["empty", "twice", "huge"]))
    if choice == "empty":
        return ["--grid", f"{path}={draw(st.sampled_from(['6,,7', ',6', '6,', ' , ']))}"], (
            "bad list"
        )
    if choice == "twice":
        return ["--grid", f"{path}={draw(st.sampled_from(['6,6', '6,7,6', '6, 6']))}"], ("bad list")
    return ["--grid", f"{path}={_values(draw(st.integers(100_001, 120_000)))}"], "huge number"


@given(data=st.data())
@EXAMPLES
def test_compare_refuses_bad_grids_before_running(
    data: st.DataObject, no_work: Callable[[], None]
) -> None:
    tail, kind = data.draw(compare_grids())
    no_work()
    refused(["compare", "mm-c", "--policy", "placer=first-fit", *tail], "compare", kind)


@given(data=st.data())
@EXAMPLES
def test_run_refuses_empty_out_and_too_many_shards(
    data: st.DataObject, no_work: Callable[[], None]
) -> None:
    pytest.importorskip("ray")
    no_work()
    which = data.draw(st.sampled_from(["out", "shards"]))
    if which == "out":
        refused(["run", "mm-c", "--out", data.draw(EMPTY_OUT)], "run", "empty --out")
    else:
        shards = str(data.draw(MANY))
        refused(["run", "mm-c", "--ray", "--shards", shards], "run", "too many workers")


@given(
    command=st.sampled_from(["validate", "bound", "run", "learn"]),
    path=st.sampled_from(["seed.", ".seed", "stop..jobs", "seed.. ", "."]),
)
@EXAMPLES
def test_set_refuses_a_field_path_with_an_empty_part(
    command: str, path: str, no_work: Callable[[], None]
) -> None:
    """`--set 'seed.=3'` used to be taken as `seed=3`."""
    scenario = {"bound": "ps-amdahl", "learn": "mdp-example-2"}.get(command, "mm-c")
    no_work()
    refused([command, scenario, "--set", f"{path}=3"], command, "bad --set", "--set")


@pytest.mark.parametrize(
    ("index", "code"),
    list(enumerate(["sys.exit(0)", "sys.exit(3)", "sys.exit()", "raise SystemExit", "exit(0)"])),
)
def test_a_plugin_that_exits_is_bad_input(
    index: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plug-in module that calls sys.exit(0) while imported used to end the command
    with exit status 0."""
    name = f"exiting_plugin_{index}"
    (tmp_path / f"{name}.py").write_text(f"import sys\n{code}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = refused(["validate", "mm-c", "--plugin", name], "validate", "plugin exits", name)
    assert "sys.exit" in line
