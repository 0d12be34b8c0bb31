"""`clusteremu tune` and `train-rl`: bad input exits 2 before any work; a scenario tuning
writes its results and a placer block that pastes back into the scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from clusteremu.cli import main
from clusteremu.scenarios import faas
from clusteremu.tuners.domains import sample_config
from tests.actors.conftest import ray_local  # noqa: F401


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune", "--tuner", "grid"], "--tuner: unknown grid"),
        (["tune", "--tuner", "tpe", "--budget", "0"], "--budget: expected at least 1"),
        (["tune", "--tuner", "tpe", "--domain", "moon"], "unknown domain 'moon'"),
        (["tune", "--tuner", "rl"], "needs --model"),
        (["tune", "--tuner", "rl", "--model", "no/such.zip"], "no such model file"),
        (["tune", "--tuner", "fixed", "--weights", "1,1,1"], "expected 8 weights"),
        (["tune", "--tuner", "tpe", "--weights", "1,1,1,1,1,0,1,0"], "only with --tuner fixed"),
        (["tune", "--tuner", "tpe", "--experiments", "0"], "--experiments"),
        (["tune", "--tuner", "tpe", "--test-seeds", "-1"], "--test-seeds: expected at least 0"),
        (["train-rl", "--steps", "10", "--out", "model.bin"], "name it MODEL.zip"),
        (["train-rl", "--steps", "0", "--out", "m.zip"], "--steps"),
        (["train-rl", "--steps", "10", "--out", "m.zip", "--domain", "x"], "unknown domain"),
        (["train-rl", "--out", "m.zip", "--algorithm", "a2c"], "--algorithm: unknown algorithm"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*argv, "--json"] if argv[0] == "tune" else argv) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_tuning_a_scenario_file_writes_results_and_a_placer_block(
    ray_local: None,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = sample_config("tiny", 0, 0).scenario()
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    argv = ["tune", "--tuner", "random", "--scenario", str(path), "--budget", "3"]
    assert main([*argv, "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["experiments"] == 1 and summary["evaluations"] == 3
    assert summary["mean_improvement_over_fixed"] >= 0.0
    assert summary["label"].startswith("in sample")
    fresh = summary["out_of_sample"]
    assert fresh["label"].startswith("out of sample") and fresh["seeds"] == 5
    assert data["seed"] not in fresh["test_seeds"] and fresh["experiments"] == 1
    assert fresh["interval"] == [None, None]  # one experiment: no interval
    assert fresh["report"]["test"]["label"] == "test (held out, scored once)"
    assert "random search | ablation" in (out / "out-of-sample.md").read_text()
    row = pq.read_table(out / "experiments.parquet").to_pylist()[0]
    assert len(row["weights_tried"]) == 3 and row["best_score"] == summary["mean_best_score"]
    assert (out / "tune.png").stat().st_size > 0 and (out / "tune.json").exists()
    block = yaml.safe_load((out / "placer.yaml").read_text())
    data["scheduler"] = block["scheduler"]
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == pytest.approx(summary["mean_best_score"])
    assert faas.FUNCTIONS  # the scenario came from the faas family
    # The same command again into the same --out replaces the results, trials/ included.
    trials = {p.name for p in (out / "trials" / "random" / "trials").iterdir()}
    assert main([*argv, "--out", str(out), "--json", "--seed", "1"]) == 0
    capsys.readouterr()
    again = {p.name for p in (out / "trials" / "random" / "trials").iterdir()}
    assert again and not again & {t for t in trials if t.startswith("experiment-")}
    assert json.loads((out / "tune.json").read_text())["seed"] == 1
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    # nor anything Ray Tune writes only to check its storage (it stayed behind once)
    assert not list(out.rglob(".validate_storage_marker"))


def test_train_rl_refuses_a_model_folder_under_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    argv = ["train-rl", "--steps", "10", "--out", str(blocker / "m.zip")]
    assert main(argv) == 2
    assert f"--out {blocker / 'm.zip'}: cannot create" in capsys.readouterr().err


def test_one_experiment_has_no_interval_n_a_printed_null_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A single experiment's improvement has no 95% interval: `n/a` in the table and null
    in the JSON, never 0.00% (which reads as "exactly no spread")."""
    from types import SimpleNamespace

    from clusteremu.cluster.io import to_json
    from clusteremu.commands.tune import _print_table
    from clusteremu.tuners.tuning import ExperimentOutcome, TuningResult

    def result(*scores: list[float]) -> TuningResult:
        outcomes = [ExperimentOutcome(experiment=None, tuner="tpe", scores=s) for s in scores]  # type: ignore[arg-type]
        return TuningResult("tpe", 3, outcomes, 1.0, [])

    one, two = result([0.8, 0.9, 0.85]), result([0.8, 0.9], [0.5, 0.6])
    assert json.loads(to_json(one.summary()))["ci95"] is None
    assert two.summary()["ci95"] > 0
    exp = SimpleNamespace(name="mine", row={})
    _print_table({"tpe": one}, [exp])
    last = capsys.readouterr().out.splitlines()[-1].split()
    assert last[:4] == ["tpe", "0.9000", "0.8000", "12.50%"] and last[4] == "n/a"
    _print_table({"tpe": two}, [exp, exp])
    assert capsys.readouterr().out.splitlines()[-1].split()[4].endswith("%")


def test_an_untrained_agent_is_reported_learned_nothing(
    ray_local: None,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """End to end: an agent saved before its first gradient step (SAC waits for
    `learning_starts`) is its own untrained ablation; `tune --tuner rl` runs that ablation
    and the constant beside it and reports "learned nothing", whatever it does against
    Fixed. The ablation searches' trials, the constant and the first proposal's share are
    written out."""
    from clusteremu.tuners.rl import train_agent

    model = tmp_path / "untrained.zip"
    train_agent(
        10,
        model,
        envs=1,
        seed=0,
        domain_name="tiny",
        budget=3,
        net_arch=(8,),
        learning_starts=40,
        algorithm="sac",
    )
    out = tmp_path / "out"
    argv = ["tune", "--tuner", "rl", "--model", str(model), "--domain", "tiny"]
    argv += ["--experiments", "3", "--budget", "3", "--test-seeds", "2", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "rl out of sample against its ablations" in printed
    assert "learned something: no (needs paired intervals above 0 against rl: untrained" in printed
    saved = json.loads((out / "tune.json").read_text())
    fresh = saved["tuners"]["rl"]["out_of_sample"]
    assert not fresh["learned_something"] and fresh["clusters_redrawn"] == 3
    assert fresh["learned_against"] == ["rl: untrained agent", "rl: constant"]
    untrained = fresh["ablations"]["rl: untrained agent"]
    assert untrained["mean_difference"] == 0.0 and untrained["verdict"] == "tie"
    assert set(fresh["ablations"]) == {
        "Fixed",
        "random search",
        "rl: untrained agent",
        "rl: constant",
        "rl: first proposal only",
    }
    assert "later_proposals_add" in fresh["first_proposal"]
    extra = saved["rl_ablations"]
    assert len(extra["constant_weights"]) == 8 and extra["constant_from"]["domain"] == "tiny"
    assert extra["untrained_search"]["experiments"] == 3
    for folder in ("rl", "rl-untrained", "rl-constant", "random-ablation"):
        assert (out / "trials" / folder / "trials").is_dir(), folder
    report = (out / "out-of-sample.md").read_text()
    assert "| rl: untrained agent | ablation |" in report and "against rl: constant" in report


def test_train_rl_warns_when_it_trains_on_a_held_out_domain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "m.zip"
    folder.mkdir()  # refused after the warning, before any training
    assert main(["train-rl", "--domain", "test", "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "warning: --domain test: training on a held-out domain" in err
    assert main(["train-rl", "--domain", "train", "--out", str(folder)]) == 2
    assert "held-out" not in capsys.readouterr().err
