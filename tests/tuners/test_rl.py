"""The RL tuner: the environment passes Gymnasium's checker, rewards follow eq. 1, a short
SAC or RecurrentPPO training on tiny configurations gives an agent with valid proposals, an
agent learns to propose different weights for configurations that need different ones, and
model files load safely (no unpickling) or fail with a clear error; the untrained agent is
the trained one's starting network (same seed, 0 steps)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from clusteremu.tuners.domains import FIXED, STATIC_SPACE, WEIGHT_NAMES  # noqa: E402
from clusteremu.tuners.rl import (  # noqa: E402
    Agent,
    ModelError,
    TuningEnv,
    improvement,
    load_agent,
    observation,
    observation_size,
    train_agent,
    untrained_agent,
)


def test_eq_1_is_the_best_later_score_over_the_fixed_one() -> None:
    assert improvement([0.8, 0.7, 0.9, 0.85]) == pytest.approx(0.125)
    assert improvement([0.8, 0.7, 0.6]) == pytest.approx(-0.125)
    assert improvement([0.8]) == 0.0


def test_the_observation_stacks_weights_and_score_ratios() -> None:
    static = np.full(len(STATIC_SPACE), 0.5, dtype=np.float32)
    obs = observation(static, [FIXED, (0.2,) * 8], [0.8, 1.0], budget=5)
    k = len(WEIGHT_NAMES) + 1
    n = len(STATIC_SPACE)
    assert obs.shape == (observation_size(5),) == (n + 4 * k + 1,)
    assert obs[n : n + 8].tolist() == list(FIXED) and obs[n + 8] == 0.0
    assert obs[n + k + 8] == pytest.approx(0.25)  # 1.0 / 0.8 - 1
    assert not obs[n + 2 * k : -1].any()  # frames not yet visited are zeros
    assert obs[-1] == pytest.approx(2 / 5)


def test_the_environment_passes_gymnasiums_checker() -> None:
    check_env(TuningEnv("tiny", budget=5), skip_render_check=True)


@pytest.fixture(scope="module")
def agent_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rl") / "agent.zip"
    report = train_agent(
        240,
        out,
        envs=2,
        seed=0,
        domain_name="tiny",
        net_arch=(32, 32),
        learning_starts=40,
        algorithm="sac",
    )
    assert report.steps == 240 and report.episodes >= 50
    return out


def test_training_leaves_nothing_in_the_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SB3's default logger made a folder `SB3-<date>` in the temporary folder on every
    training, left behind (one per test run, and per `train-rl` of a user)."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    out = tmp_path / "agent.zip"
    train_agent(20, out, envs=1, seed=0, domain_name="tiny", net_arch=(8,), learning_starts=10)
    assert out.exists()
    # (torch keeps its compiler's cache there, torchinductor_<user>, shared by every run)
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("SB3-")]


def test_a_short_training_gives_valid_proposals_and_eq_1_rewards(agent_file: Path) -> None:
    agent = load_agent(agent_file)
    env = TuningEnv("tiny", budget=5)
    obs, info = env.reset(seed=3)
    scores, rewards = [info["score"]], []
    done = False
    while not done:
        w = agent.propose(env.experiment.static, env.tried, env.scores)
        assert len(w) == 8 and all(0.0 <= x <= 1.0 for x in w)
        obs, reward, done, _, info = env.step(np.array(w, dtype=np.float32))
        scores.append(info["score"])
        rewards.append(reward)
    assert len(scores) == 5 and rewards[:-1] == [0.0, 0.0, 0.0]
    assert rewards[-1] == pytest.approx((max(scores[1:]) - scores[0]) / scores[0])
    # proposals are deterministic
    assert agent.propose(env.experiment.static, env.tried[:2], env.scores[:2]) == agent.propose(
        env.experiment.static, env.tried[:2], env.scores[:2]
    )


def _rewrite(src: Path, dst: Path, name: str, data: bytes) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.namelist():
            zout.writestr(item, data if item == name else zin.read(item))


def test_bad_model_files_fail_clearly(agent_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no such model file"):
        load_agent(tmp_path / "missing.zip")
    cut = tmp_path / "cut.zip"
    cut.write_bytes(agent_file.read_bytes()[:500])
    with pytest.raises(ModelError, match="not a readable zip"):
        load_agent(cut)
    meta = json.loads(zipfile.ZipFile(agent_file).read("clusteremu.json"))
    other = tmp_path / "v2.zip"
    _rewrite(agent_file, other, "clusteremu.json", json.dumps({**meta, "version": 2}).encode())
    with pytest.raises(ModelError, match="version 2"):
        load_agent(other)
    wide = tmp_path / "wide.zip"
    _rewrite(agent_file, wide, "clusteremu.json", json.dumps({**meta, "net_arch": [64]}).encode())
    with pytest.raises(ModelError, match="policy.pth does not hold"):
        load_agent(wide)
    junk = tmp_path / "junk.zip"
    _rewrite(agent_file, junk, "policy.pth", b"not torch")
    with pytest.raises(ModelError, match="policy.pth"):
        load_agent(junk)


@pytest.fixture(scope="module")
def recurrent_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rl") / "recurrent.zip"
    report = train_agent(
        256, out, envs=1, seed=0, domain_name="tiny", net_arch=(32, 32), algorithm="recurrent-ppo"
    )
    assert report.steps == 256 and report.episodes >= 50
    return out


def test_a_recurrent_agent_replays_the_history_through_its_lstm(recurrent_file: Path) -> None:
    agent = load_agent(recurrent_file)
    assert agent.algorithm == "recurrent-ppo" and agent.meta["frames"] == 1
    env = TuningEnv("tiny", budget=5, frames=1)
    _, info = env.reset(seed=4)
    proposals = []
    for _ in range(4):
        w = agent.propose(env.experiment.static, env.tried, env.scores)
        assert len(w) == 8 and all(0.0 <= x <= 1.0 for x in w)
        proposals.append(w)
        env.step(np.array(w, dtype=np.float32))
    # the same history gives the same proposal (the LSTM state is rebuilt, not carried over)
    assert agent.propose(env.experiment.static, env.tried[:1], env.scores[:1]) == proposals[0]
    assert agent.propose(env.experiment.static, env.tried[:3], env.scores[:3]) == proposals[2]


class TwoKindsEnv(TuningEnv):
    """A synthetic objective with a known optimum that depends on the configuration: half
    the configurations (first static feature 0.1) are best with every weight at 0.1, the
    other half (0.9) with every weight at 0.9; score = 1 - mean squared distance."""

    def draw_experiment(self) -> Any:
        u = float(self.np_random.choice([0.1, 0.9]))
        static = np.zeros(len(STATIC_SPACE), dtype=np.float32)
        static[0] = u
        return SimpleNamespace(static=static, name=f"u={u}", u=u)

    def score(self, weights: Any) -> float:
        return 1.0 - float(np.mean((np.asarray(weights) - self.experiment.u) ** 2))


def _first_proposal(agent: Agent, u: float) -> float:
    static = np.zeros(len(STATIC_SPACE), dtype=np.float32)
    static[0] = u
    r0 = 1.0 - float(np.mean((np.asarray(FIXED) - u) ** 2))
    return float(np.mean(agent.propose(static, [FIXED], [r0])))


def test_a_trained_agent_proposes_different_weights_where_different_ones_are_needed(
    tmp_path: Path,
) -> None:
    """A constant-output agent (the same weights for every configuration) fails this: the
    mean proposed weight must follow the configuration's optimum (0.1 or 0.9) to within
    0.25, i.e. the two kinds' proposals differ by more than 0.3."""
    out = tmp_path / "two-kinds.zip"
    train_agent(
        3000,
        out,
        envs=1,
        seed=0,
        domain_name="tiny",
        budget=2,
        net_arch=(32, 32),
        algorithm="recurrent-ppo",
        env_class=TwoKindsEnv,
    )
    agent = load_agent(out)
    low, high = _first_proposal(agent, 0.1), _first_proposal(agent, 0.9)
    assert high - low > 0.3, (low, high)
    assert abs(low - 0.1) < 0.25 and abs(high - 0.9) < 0.25, (low, high)


def test_an_unknown_algorithm_is_refused(agent_file: Path, tmp_path: Path) -> None:
    meta = json.loads(zipfile.ZipFile(agent_file).read("clusteremu.json"))
    other = tmp_path / "a3c.zip"
    _rewrite(
        agent_file, other, "clusteremu.json", json.dumps({**meta, "algorithm": "a3c"}).encode()
    )
    with pytest.raises(ModelError, match="algorithm 'a3c'"):
        load_agent(other)
    with pytest.raises(ValueError, match="algorithm: expected one of sac, recurrent-ppo"):
        train_agent(10, tmp_path / "x.zip", envs=1, domain_name="tiny", algorithm="a3c")


def _proposals(agent: Agent, seed: int = 5) -> list[tuple[float, ...]]:
    rng = np.random.default_rng(seed)
    statics = rng.uniform(0.0, 1.0, (4, len(STATIC_SPACE))).astype(np.float32)
    return [agent.propose(s, [FIXED], [0.8]) for s in statics]


def test_the_untrained_agent_is_the_trained_ones_starting_network(tmp_path: Path) -> None:
    """SAC takes no gradient step before `learning_starts`: a model trained for fewer steps
    is its starting network, and `untrained_agent` rebuilds exactly that from the model's
    recorded seed and architecture (another seed gives another network)."""
    out = tmp_path / "start.zip"
    train_agent(
        20,
        out,
        envs=1,
        seed=3,
        domain_name="tiny",
        net_arch=(16,),
        learning_starts=40,
        algorithm="sac",
    )
    agent = load_agent(out)
    assert agent.meta["seed"] == 3
    untrained = untrained_agent(agent)
    assert untrained.meta["steps"] == 0 and untrained.meta["untrained"]
    assert untrained.algorithm == "sac" and untrained.budget == agent.budget
    assert _proposals(untrained) == _proposals(agent)
    other = dict(agent.meta, seed=4)
    assert _proposals(untrained_agent(Agent(agent.policy, agent.budget, other))) != _proposals(
        agent
    )


def test_training_moves_the_network_away_from_the_untrained_one(recurrent_file: Path) -> None:
    agent = load_agent(recurrent_file)
    untrained = untrained_agent(agent)
    assert untrained.algorithm == "recurrent-ppo" and agent.meta["seed"] == 0
    assert _proposals(untrained) != _proposals(agent)
    # the first proposal depends on the configuration only, not on the Fixed score
    static = np.full(len(STATIC_SPACE), 0.4, dtype=np.float32)
    assert agent.propose(static, [FIXED], [0.3]) == agent.propose(static, [FIXED], [0.9])
