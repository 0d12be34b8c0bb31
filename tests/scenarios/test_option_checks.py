"""`clusteremu.scenarios.option_checks`: one check per kind of option, each refusing with a message
that starts with the option and says what was expected."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.cluster.errors import UsageError
from clusteremu.scenarios import limits
from clusteremu.scenarios import option_checks as oc

#: No wall-clock verdict: Hypothesis' default 200 ms deadline per example and its too_slow
#: health check fail a test on a machine that is merely busy.
NO_CLOCK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

BUDGET = 16e9


@pytest.fixture(autouse=True)
def pinned_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "memory_budget_bytes", lambda: int(BUDGET))


def test_an_option_error_is_a_usage_error_and_a_value_error() -> None:
    with pytest.raises(UsageError):
        oc.seed(-1)
    with pytest.raises(ValueError):
        oc.seed(-1)


@pytest.mark.parametrize("value", ["", " ", "\t\n"])
def test_an_empty_out_is_refused(value: str) -> None:
    with pytest.raises(oc.OptionError, match=r"^--out .*expected a path, got an empty one"):
        oc.out_path(value)


def test_an_out_path_or_none_passes() -> None:
    assert oc.out_path(None) is None
    assert oc.out_path("runs/x") == "runs/x"
    with pytest.raises(oc.OptionError, match="NUL"):
        oc.out_path("a\0b")


@NO_CLOCK
@given(st.integers(min_value=0, max_value=oc.MAX_SEED))
def test_seeds_from_zero_to_2_63_pass(value: int) -> None:
    assert oc.seed(value, "--seed") == value


@NO_CLOCK
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=oc.MAX_SEED + 1)))
def test_other_seeds_are_refused(value: int) -> None:
    with pytest.raises(oc.OptionError, match=r"^--seed: expected a non-negative integer"):
        oc.seed(value)


def test_seed_lists() -> None:
    assert oc.seeds("1-3") == (1, 2, 3)
    assert oc.seeds("4, 9") == (4, 9)
    assert oc.seeds("0") == (0,)
    assert oc.seeds("1-2,5") == (1, 2, 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "got an empty list"),
        (" ", "got an empty list"),
        ("1,,2", "got an empty item"),
        ("1,", "got an empty item"),
        (",", "got an empty item"),
        ("-3", "got '-3'"),
        ("x", "got 'x'"),
        ("1.5", "got '1.5'"),
        ("1-2-3", "got '1-2-3'"),
        ("5-1", "the range 5-1 runs backwards"),
        ("3,3", "3 is given twice"),
        ("1-3,2", "2 is given twice"),
        (f"0-{2**63}", "below 2^63"),
    ],
)
def test_bad_seed_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(oc.OptionError, match=r"^--seeds ") as info:
        oc.seeds(text)
    assert message in str(info.value)


def test_a_seed_range_is_counted_before_it_is_expanded() -> None:
    """16 GB at 1 kB a seed holds about 15 million seeds; 10^15 are refused at once."""
    with pytest.raises(oc.OptionError, match="of memory"):
        oc.seeds("0-1000000000000000")
    assert len(oc.seeds("0-99999")) == 100_000
    with pytest.raises(oc.OptionError, match=r"100,000 seeds"):
        oc.seeds("0-99999", bytes_each=1e6)


def test_counts() -> None:
    assert oc.count(5, "--runs") == 5
    with pytest.raises(oc.OptionError, match=r"^--runs: expected at least 10, got 3$"):
        oc.count(3, "--runs", minimum=10)
    with pytest.raises(oc.OptionError, match=r"^--jobs: expected at most 62 \(a reason\), got 100"):
        oc.count(100, "--jobs", maximum=62, reason="a reason")


def test_sizes_are_estimated_against_the_memory_budget() -> None:
    oc.fits_memory(1000, 1e6, "--runs", "runs")  # 1 GB: fits 16 GB
    with pytest.raises(oc.OptionError, match=r"^--runs: needs about 20 GB of memory \(20,000 runs"):
        oc.fits_memory(20_000, 1e6, "--runs", "runs")


def test_workers(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(oc.os, "cpu_count", lambda: 4)
    assert oc.workers(4) == 4
    assert capsys.readouterr().err == ""
    assert oc.workers(8) == 8  # more than the CPUs: allowed, said on stderr
    assert "this machine has 4 CPUs" in capsys.readouterr().err
    with pytest.raises(oc.OptionError, match=r"^--workers: expected at least 1, got 0"):
        oc.workers(0)
    most = int(BUDGET // oc.BYTES_PER_WORKER)
    oc.workers(most)
    with pytest.raises(oc.OptionError, match=r"^--envs 54: needs about .* worker processes"):
        oc.workers(most + 1, "--envs")
    assert oc.workers(100_000, local=False) == 100_000  # a cluster joined with --address


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e9])
def test_bad_time_limits_are_refused(value: float) -> None:
    with pytest.raises(oc.OptionError, match=r"^--time-limit: expected 0 < seconds <= 86400"):
        oc.time_limit(value)


def test_time_limits() -> None:
    assert oc.time_limit(0.5) == 0.5
    assert oc.time_limit(3600.0, maximum=3600) == 3600.0
    with pytest.raises(oc.OptionError, match="<= 3600"):
        oc.time_limit(3601.0, maximum=3600)


KNOWN = ["fixed", "random", "tpe"]


def test_name_lists() -> None:
    assert oc.name_list("tpe, fixed", "--tuner", KNOWN) == ["tpe", "fixed"]
    assert oc.name_list("all", "--policy", KNOWN, everything="all") == KNOWN


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fixed,,", "--tuner 'fixed,,': expected a comma list of fixed, random, tpe; got an empty"),
        ("", "got an empty list"),
        (",fixed", "got an empty item"),
        ("fixed,fixed", "--tuner 'fixed,fixed': fixed is given twice"),
        ("grid", "--tuner: unknown grid; expected a comma list of fixed, random, tpe"),
        ("all", "unknown all"),
    ],
)
def test_bad_name_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(oc.OptionError) as info:
        oc.name_list(text, "--tuner", KNOWN)
    assert message in str(info.value)


def test_layer_sizes() -> None:
    assert oc.layer_sizes("512,512,512") == [512, 512, 512]
    for bad in ("", "0", "512,,512", "-1", "a", "512,0"):
        with pytest.raises(oc.OptionError, match=r"^--net-arch .*expected positive layer sizes"):
            oc.layer_sizes(bad)


def test_grids() -> None:
    assert oc.grid("cluster.pools.0.cores=4, 8,16") == ("cluster.pools.0.cores", ("4", "8", "16"))
    for bad, message in [
        ("cluster.pools.0.cores", "expected path.to.field=v1,v2,..."),
        ("cluster.pools.0.cores=", "expected path.to.field=v1,v2,..."),
        ("=1,2", "expected path.to.field=v1,v2,..."),
        ("a=1,,2", "got an empty one"),
        ("a=1,2,1", "'1' is given twice"),
    ]:
        with pytest.raises(oc.OptionError, match=r"^--grid ") as info:
            oc.grid(bad)
        assert message in str(info.value)


def test_grid_points_are_bounded() -> None:
    assert oc.grid_points([300, 300]) == 90_000
    with pytest.raises(oc.OptionError, match=r"at most 100,000 grid points .* got 9,000,000"):
        oc.grid_points([3000, 3000])
    values = ",".join(str(i) for i in range(oc.MAX_GRID_POINTS + 1))
    with pytest.raises(oc.OptionError, match="grid points"):
        oc.grid(f"a={values}")
