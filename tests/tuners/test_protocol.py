"""The evaluation protocol of the learned policies (`clusteremu.tuners.protocol`): disjoint splits,
overlap counting, paired intervals, the learned-something check, the test set scored once
and the report's JSON, table and plot."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from clusteremu.tuners.protocol import (
    Comparison,
    Interval,
    Overlap,
    Report,
    Row,
    Splits,
    TestSet,
    TestSetReused,
    canonical_key,
    compare,
    drop_equivalent,
    equivalence_report,
    instance_rng,
    instance_seed,
    instance_sequence,
    learned_something,
    mean_interval,
    paired_interval,
    paired_rank_test,
    split_key,
    split_rng,
    split_sequence,
    verdict_of,
)

# --- splits ----------------------------------------------------------------------------------


def test_split_streams_repeat_for_a_seed_and_differ_across_names_and_seeds() -> None:
    draw = {
        (seed, name): split_rng(seed, name).integers(0, 2**62, 8).tolist()
        for seed in (0, 1)
        for name in ("train", "validation", "test")
    }
    assert split_rng(0, "test").integers(0, 2**62, 8).tolist() == draw[0, "test"]
    assert len({tuple(v) for v in draw.values()}) == len(draw)  # all six streams differ


def test_split_key_is_the_bytes_of_the_name_not_pythons_hash() -> None:
    assert split_key("test") == (4, 116, 101, 115, 116)
    assert split_key("validation")[0] == len("validation")
    # pinned: the same in every process and Python version (hash() is salted per process)
    assert instance_seed(0, "test", 0) == 4014767234
    assert instance_seed(7, "validation", 3) == 217008286
    for bad in ("", "a\x00b"):
        with pytest.raises(ValueError, match="split name"):
            split_key(bad)
    with pytest.raises(ValueError, match="seed"):
        split_rng(-1, "test")


def test_instance_i_depends_only_on_seed_split_and_i() -> None:
    few = [instance_rng(3, "test", i).random() for i in range(5)]
    many = [instance_rng(3, "test", i).random() for i in range(50)]
    assert many[:5] == few
    # the same as SeedSequence.spawn's child i, however many children are spawned
    child = split_sequence(3, "test").spawn(10)[4]
    assert (
        child.generate_state(4).tolist()
        == instance_sequence(3, "test", 4).generate_state(4).tolist()
    )
    assert instance_seed(3, "test", 4) != instance_seed(3, "validation", 4)
    assert 0 <= instance_seed(3, "test", 4) < 2**32


def test_splits_describe_seed_and_sizes() -> None:
    s = Splits(seed=5, sizes={"train": 20, "validation": 5, "test": 6})
    assert s.size("test") == 6
    assert s.instance_seed("test", 2) == instance_seed(5, "test", 2)
    assert s.rng("train").random() == split_rng(5, "train").random()
    assert Splits.from_dict(s.to_dict()) == s
    assert "SeedSequence" in s.to_dict()["drawn_by"]
    with pytest.raises(KeyError, match="no split 'tset'"):
        s.size("tset")
    with pytest.raises(ValueError, match="size"):
        Splits(seed=0, sizes={"test": -1})


# --- equivalent instances --------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    index: int
    nodes: int
    rate_per_s: float


def test_canonical_key_rounds_floats_and_drops_excluded_names() -> None:
    a = canonical_key(((3, 1, 0), np.array([1.0000001, 2.5])), decimals=3)
    b = canonical_key(([3, 1, 0], [1.0, 2.5000004]), decimals=3)
    assert a == b and hash(a) == hash(b)
    assert canonical_key(((3, 1, 0), [1.01, 2.5]), decimals=3) != a
    # a tuning experiment: the same config under another index is the same instance
    assert canonical_key(Config(0, 4, 2.0), exclude=["index"]) == canonical_key(
        Config(9, 4, 2.0), exclude=["index"]
    )
    assert canonical_key(Config(0, 4, 2.0)) != canonical_key(Config(9, 4, 2.0))
    assert canonical_key([math.nan]) == canonical_key([math.nan])
    with pytest.raises(TypeError, match="object"):
        canonical_key([object()])


def test_equivalence_report_counts_instances_seen_in_training() -> None:
    o = equivalence_report([1, 2, 3], [5, 2, 7, 3, 2], split="validation")
    assert (o.count, o.total, o.train, o.indices) == (3, 5, 3, (1, 3, 4))
    assert not o.disjoint and "3 of 5" in o.describe()
    assert equivalence_report([1], [2, 3]).disjoint


def test_drop_equivalent_redraws_until_disjoint_and_checks() -> None:
    def draw(i: int) -> int:  # a tiny instance space: 0..19
        return int(instance_rng(11, "test", i).integers(0, 20))

    train = set(range(10))
    got = drop_equivalent(train, draw, lambda x: x, 8)
    assert len(got.instances) == 8 and not set(got.instances) & train
    assert got.overlap.count == 0 and got.overlap.dropped == len(got.dropped) > 0
    assert [draw(i) for i in got.indices] == list(got.instances)
    assert all(draw(i) in train for i in got.dropped)
    assert sorted(got.indices + got.dropped) == list(range(max(got.indices) + 1))
    assert drop_equivalent(train, draw, lambda x: x, 8) == got  # a pure function
    unique = drop_equivalent(train, draw, lambda x: x, 8, unique=True)
    assert len(set(unique.instances)) == 8 and not set(unique.instances) & train
    with pytest.raises(ValueError, match="too small"):
        drop_equivalent(train, draw, lambda x: x, 11, unique=True)  # only 10 new instances


# --- intervals -------------------------------------------------------------------------------


def test_t_interval_on_known_data() -> None:
    iv = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, s = sqrt(2.5), t(0.975, 4) = 2.776445: 3 -+ 1.963243
    assert iv.estimate == 3.0 and iv.n == 5 and iv.method == "t"
    assert iv.low == pytest.approx(1.036757, abs=1e-6)
    assert iv.high == pytest.approx(4.963243, abs=1e-6)


def test_t_interval_matches_scipy_and_paired_is_the_interval_of_differences() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(10, 2, 30), rng.normal(9, 2, 30)
    d = a - b
    low, high = stats.t.interval(0.9, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    iv = paired_interval(a, b, level=0.9)
    assert (iv.low, iv.high) == (pytest.approx(low), pytest.approx(high))
    assert paired_interval(a, b, kind="ratio").estimate == pytest.approx(np.mean(a / b))


def test_intervals_cover_the_mean_at_their_level() -> None:
    # 95% intervals on simulated N(1, 2^2) data, fixed seed: the t-interval is exact, so its
    # coverage is 0.95 within 0.015 (about 3 standard errors of 2000 replications); the
    # percentile bootstrap is a little narrow at n = 30: 0.90..0.98 over 300 replications
    rng = np.random.default_rng(12345)
    t_hits = sum(not mean_interval(rng.normal(1.0, 2.0, 15)).excludes(1.0) for _ in range(2000))
    assert abs(t_hits / 2000 - 0.95) < 0.015
    b_hits = sum(
        not mean_interval(
            rng.normal(1.0, 2.0, 30), method="bootstrap", resamples=1000, seed=i
        ).excludes(1.0)
        for i in range(300)
    )
    assert 0.90 <= b_hits / 300 <= 0.98


def test_bootstrap_is_seeded_and_close_to_t_on_normal_data() -> None:
    x = np.random.default_rng(4).normal(0, 1, 200)
    b1 = mean_interval(x, method="bootstrap")
    assert b1 == mean_interval(x, method="bootstrap")
    t = mean_interval(x)
    assert b1.method == "bootstrap"
    assert b1.low == pytest.approx(t.low, abs=0.03) and b1.high == pytest.approx(t.high, abs=0.03)


def test_interval_input_errors_and_single_instances() -> None:
    one = mean_interval([2.0])
    assert (one.low, one.high) == (-math.inf, math.inf) and one.describe() == "n/a (n < 2)"
    with pytest.raises(ValueError, match="instance 1 is nan"):
        mean_interval([1.0, math.nan])
    with pytest.raises(ValueError, match="same instances"):
        paired_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="instance 0 .* b > 0"):
        paired_interval([1.0, 2.0], [0.0, 1.0], kind="ratio")
    with pytest.raises(ValueError, match="interval method"):
        mean_interval([1.0, 2.0], method="normal")  # type: ignore[arg-type]


# --- learned something -----------------------------------------------------------------------


def _pair(shift: float, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Ablation costs and method costs `shift` lower on every instance, with noise."""
    rng = np.random.default_rng(8)
    ablation = rng.uniform(1.0, 2.0, n)
    return ablation - shift + rng.normal(0, 0.05, n), ablation


def test_learned_something_holds_for_a_clearly_better_method() -> None:
    method, ablation = _pair(0.2)
    v = learned_something(method, ablation, better="lower", names=("tree", "no-tree"))
    assert v.holds and bool(v) and v.paired.high < 0
    assert "tree learned something over no-tree" in v.explain()
    assert learned_something(method, ablation, kind="ratio").holds
    assert learned_something(-method, -ablation, better="higher").holds


def test_learned_something_does_not_hold_for_a_tie_or_a_worse_method() -> None:
    _, ablation = _pair(0.0)
    empty = learned_something(ablation.copy(), ablation)  # an empty model: the ablation
    assert not empty.holds and not empty and "did NOT" in empty.explain()
    # a shuffled-label model: as often better as worse (differences exactly symmetric)
    d = np.random.default_rng(3).normal(0, 0.3, 20)
    shuffled = ablation[:40] + np.concatenate([d, -d])
    assert not learned_something(shuffled, ablation[:40]).holds
    worse, _ = _pair(-0.2)
    assert not learned_something(worse, ablation).holds
    assert not learned_something(worse, ablation, method="bootstrap").holds
    better, _ = _pair(0.2)
    assert not learned_something(better, ablation, better="higher").holds  # wrong direction
    assert not learned_something([1.0], [5.0]).holds  # one instance: no evidence


def test_verdict_of_reads_the_side_of_the_null() -> None:
    def iv(low: float, high: float) -> Interval:
        return Interval((low + high) / 2, low, high, 0.95, "t", 10)

    assert verdict_of(iv(-2, -1), better="lower") == "better"
    assert verdict_of(iv(-2, -1), better="higher") == "worse"
    assert verdict_of(iv(-1, 0), better="lower") == "tie"  # touching 0 is not excluding it
    assert verdict_of(iv(0.8, 0.9), better="lower", kind="ratio") == "better"
    assert verdict_of(iv(0.9, 1.1), better="lower", kind="ratio") == "tie"
    with pytest.raises(ValueError, match="explicitly"):
        verdict_of(iv(0, 1), better="smaller")  # type: ignore[arg-type]


# --- comparisons, the test set and the report ------------------------------------------------


def _values(n: int = 30) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(21)
    base = rng.uniform(1.0, 2.0, n)
    return {
        "tree": base,
        "greedy": base + 0.3 + rng.normal(0, 0.05, n),  # the method is better
        "oracle": base - 0.3 + rng.normal(0, 0.05, n),  # the method is worse
        "no-tree": base + 0.2 + rng.normal(0, 0.05, n),
    }


def _scored(n: int = 30) -> Comparison:
    values = _values(n)
    test = TestSet(range(n))
    scores = test.score(lambda instances: {k: v[list(instances)] for k, v in values.items()})
    return scores.compare(
        "tree",
        better="lower",
        metric="cost / optimum",
        baselines=["greedy", "oracle"],
        ablations=["no-tree"],
    )


def test_comparison_rows_intervals_and_verdicts() -> None:
    c = _scored()
    assert [r.policy for r in c.rows] == ["tree", "greedy", "oracle", "no-tree"]
    assert [r.role for r in c.rows] == ["method", "baseline", "baseline", "ablation"]
    assert [r.verdict for r in c.rows] == [None, "better", "worse", "better"]
    greedy = c.row("greedy")
    assert greedy.paired == paired_interval(c.method.values, greedy.values)
    assert greedy.mean == mean_interval(greedy.values)
    assert c.label == "test (held out, scored once)" and c.n == 30
    assert c.learned_something("no-tree").holds
    with pytest.raises(ValueError, match="not an ablation"):
        c.learned_something("greedy")


def test_compare_refuses_unreported_or_unpaired_policies() -> None:
    values = _values()
    kw = {"better": "lower", "metric": "m", "split": "validation"}
    with pytest.raises(ValueError, match=r"\['oracle'\] are neither"):
        compare("tree", values, baselines=["greedy"], ablations=["no-tree"], **kw)  # type: ignore[arg-type]
    values["oracle"] = values["oracle"][:-1]
    with pytest.raises(ValueError, match="same instances"):
        compare("tree", values, baselines=["greedy", "oracle"], ablations=["no-tree"], **kw)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compare("tree", {"tree": [1.0, 2.0]}, metric="m", split="test")  # type: ignore[call-arg]


def test_the_test_set_is_scored_only_once() -> None:
    test = TestSet([1, 2, 3])
    scores = test.score(lambda xs: {"a": [float(x) for x in xs], "b": [0.0, 0.0, 0.0]})
    assert test.scored and list(scores) == ["a", "b"] and scores["a"].tolist() == [1, 2, 3]
    with pytest.raises(TestSetReused, match="already scored once .*'a', 'b'.* only once"):
        test.score(lambda xs: {"a": [0.0] * 3})
    with pytest.raises(ValueError, match="read-only"):
        scores["a"][0] = 9.0

    def boom(xs: tuple[int, ...]) -> dict[str, list[float]]:
        raise RuntimeError("boom")

    failed = TestSet([1, 2])
    with pytest.raises(RuntimeError, match="boom"):
        failed.score(boom)
    with pytest.raises(TestSetReused, match="raised"):
        failed.score(lambda xs: {"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="2 values for 3"):
        TestSet([1, 2, 3]).score(lambda xs: {"a": [1.0, 2.0]})


def _report(n: int = 30) -> Report:
    test = _scored(n)
    values = _values(n)
    validation = compare(
        "tree",
        values,
        better="lower",
        metric="cost / optimum",
        split="validation",
        baselines=["greedy", "oracle"],
        ablations=["no-tree"],
    )
    splits = Splits(seed=3, sizes={"train": 100, "validation": n, "test": n})
    overlaps = (Overlap("validation", 0, n, 100), Overlap("test", 0, n, 100, dropped=2))
    return Report("RAD-tree", splits, overlaps, test, test.learned_something("no-tree"), validation)


def test_report_json_round_trip_with_stable_keys_and_plain_floats() -> None:
    report = _report()
    text = report.to_json()
    assert text == _report().to_json()
    data = json.loads(text)
    assert list(data) == [
        "format",
        "version",
        "title",
        "protocol",
        "test",
        "learned_something",
        "validation",
        "notes",
        "learned_something_also",
        "learned_something_against_every_ablation",
        "held_out",
        "scope",
    ]
    assert data["held_out"] is True and data["scope"] == "test (held out, scored once)"
    proto = data["protocol"]
    assert (proto["selection_split"], proto["reported_split"], proto["test_scored"]) == (
        "validation",
        "test",
        "once",
    )
    assert proto["overlaps"][1]["dropped"] == 2 and proto["interval"] == "t"
    assert type(data["test"]["rows"][1]["paired"]["low"]) is float
    assert Report.from_json(text) == report
    one = Report.from_json(_report(1).to_json())  # infinite interval ends survive as null
    assert one.test.rows[0].mean.high == math.inf and not one.learned.holds


def test_a_report_with_a_scope_never_calls_its_figures_held_out() -> None:
    """Fresh seeds of a validation domain go through the same TestSet, but they select: the
    report's `scope` names them everywhere the test label would stand, and reads back."""
    plain = _report()
    scoped = dataclasses.replace(plain, scope="validation domain, fresh seeds (not held out)")
    table = scoped.to_table()
    assert "held out," not in table and "**validation domain, fresh seeds" in table
    assert "reported: validation domain, fresh seeds (not held out)" in table
    data = json.loads(scoped.to_json())
    assert data["held_out"] is False and data["scope"].startswith("validation domain")
    assert Report.from_json(scoped.to_json()) == scoped
    assert scoped.test == plain.test  # the numbers are the same; only their name changes


def test_report_table_labels_only_the_test_split_held_out() -> None:
    table = _report().to_table()
    assert "| policy | role | mean | 95% CI | vs method (paired: method − policy)" in table
    assert "| verdict (method) | median | paired median (Wilcoxon p) |" in table
    assert "**test (held out, scored once)**" in table
    assert "**validation (used for selection)**" in table
    validation_part = table.split("**validation (used for selection)**")[1]
    assert "held out" not in validation_part
    assert "| greedy | baseline |" in table and "| better |" in table
    assert "test: 0 of 30 equivalent to a training instance (2 dropped and redrawn" in table


def test_report_refuses_pieces_that_do_not_fit() -> None:
    report = _report()
    unscored = compare(
        "tree",
        _values(),
        better="lower",
        metric="m",
        split="test",
        baselines=["greedy", "oracle"],
        ablations=["no-tree"],
    )
    with pytest.raises(ValueError, match="scored once"):
        Report("x", report.splits, (), unscored, report.learned)
    with pytest.raises(ValueError, match="not about the test comparison"):
        Report("x", report.splits, (), report.test, learned_something([1.0, 2.0], [2.0, 3.0]))
    with pytest.raises(ValueError, match="selection comparison"):
        Report("x", report.splits, (), report.test, report.learned, report.test)


def test_plot_writes_a_png_and_names_an_unwritable_path(tmp_path: Path) -> None:
    out = _report().plot(tmp_path / "plots" / "protocol.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    bad = blocker / "protocol.png"
    with pytest.raises(OSError, match=f"cannot write the plot to {bad}"):
        _report().plot(bad)


def test_rows_carry_medians_and_a_paired_rank_test_beside_the_means() -> None:
    """One long tail moves the mean and its t interval; the median and Wilcoxon's signed-rank
    test say that most instances did not move."""
    method = np.array([0.0] * 15 + [10.0])
    other = np.zeros(16)
    other[:15] = 0.01  # the method is slightly worse on 15 of 16 instances
    c = compare(
        "m", {"m": method, "o": other}, better="higher", metric="x", split="test", baselines=["o"]
    )
    row = c.row("o")
    assert row.paired is not None and row.paired.estimate > 0.6  # the tail's mean
    assert row.paired_median == pytest.approx(-0.01) and row.median == pytest.approx(0.01)
    assert row.rank_p is not None and row.rank_p < 0.05
    assert paired_rank_test(method, other) == row.rank_p
    assert paired_rank_test([1.0, 2.0], [1.0, 2.0]) == 1.0  # no difference at all
    assert math.isnan(paired_rank_test([1.0], [0.0]))  # one instance: no test
    one = compare(
        "m", {"m": [1.0], "o": [0.0]}, better="higher", metric="x", split="test", baselines=["o"]
    )
    assert one.row("o").rank_p is None and "0 (p = n/a)" not in one.to_table()
    assert "| 1 (p = n/a) |" in one.to_table()
    data = row.to_dict()
    assert data["median"] == row.median and data["wilcoxon_p"] == row.rank_p
    assert Row.from_dict(data) == row


def test_a_report_may_need_several_ablations_and_learns_only_past_all() -> None:
    """The report's verdict against each ablation; `learned_all` needs every one (a learned
    policy that beats its empty model but not the constant learned nothing worth the name)."""
    n = 12
    rng = np.random.default_rng(0)
    base = rng.normal(0.0, 0.1, n)
    values = {"rl": base + 1.0, "untrained": base, "constant": base + 1.0}
    scores = TestSet(range(n)).score(lambda _: values)
    table = scores.compare(
        "rl", better="higher", metric="gain", ablations=["untrained", "constant"]
    )
    first, second = table.learned_something("untrained"), table.learned_something("constant")
    splits = Splits(seed=0, sizes={"test": n})
    report = Report("rl", splits, (), table, first, learned_also=(second,))
    assert first.holds and not second.holds and not report.learned_all
    assert [v.ablation for v in report.verdicts] == ["untrained", "constant"]
    text = report.to_table()
    assert "- learned something: NO (only when it beats every ablation below)" in text
    assert "  - against untrained: yes" in text and "  - against constant: NO" in text
    again = Report.from_json(report.to_json())
    assert again == report and not again.learned_all
    assert json.loads(report.to_json())["learned_something_against_every_ablation"] is False
    alone = Report("rl", splits, (), table, first)
    assert alone.learned_all and Report.from_json(alone.to_json()).learned_also == ()
    with pytest.raises(ValueError, match="not about the test comparison"):
        Report(
            "rl",
            splits,
            (),
            table,
            first,
            learned_also=(learned_something([1.0, 2.0], [0.0, 0.0]),),
        )
