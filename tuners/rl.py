"""The RL tuner of the Learning to Score paper (docs/tuning.md): a Gymnasium environment
whose episode is one tuning experiment, a Stable-Baselines3 SAC agent trained on it, and
safe loading.

Episode (`TuningEnv`): `reset` draws an experiment from the domain and evaluates the Fixed
weights (score r_0); each of the `budget - 1` steps evaluates the action's weights (r_i).

- observation: the experiment's coarse static description (`tuners.domains.STATIC_SPACE`,
  scaled to [0, 1]), a frame stack of the last `budget - 1` explored (weights,
  score / r_0 - 1) pairs, oldest first (the ratio clipped to [-1, 1]; zeros for frames not
  yet visited), and the step index / budget;
- action: the weight vector in [0, 1]^8 (`tuners.domains.WEIGHT_NAMES` order);
- reward: the paper's percentage-improvement reward (its eq. 1), (max(r_1..r_n) - r_0) / r_0
  at the last step n = budget - 1, 0 before.

Training (`train_agent`) runs SAC with the paper's 512x512x512 ReLU networks on parallel
environments (`SubprocVecEnv`, one process each); rewards are scaled for the learner by a
running estimate of the return's spread (`VecNormalize`, rewards only), the environment's
reward stays eq. 1. Torch runs on one thread in every process.

The model is an SB3 zip plus ``clusteremu.json`` (budget, domain, network, spaces, version).
`load_agent` never unpickles: it reads that JSON and the zip's ``policy.pth`` with
``torch.load(weights_only=True)`` into a freshly built policy, so a shared model file cannot
run code; a missing, truncated or tampered file is a `ModelError`.
"""

from __future__ import annotations

import io
import json
import math
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from cluster import readback
from tuners.domains import FIXED, STATIC_SPACE, WEIGHT_NAMES, domain, sample_config
from tuners.evaluate import Experiment, evaluate, experiment_from_config

try:
    import gymnasium as gym
except ImportError:  # pragma: no cover - the rl extra is missing
    gym = None  # type: ignore[assignment]

MODEL_FORMAT = "clusteremu-rl-tuner"
MODEL_VERSION = 1
META_FILE = "clusteremu.json"
#: Largest model file read (bytes; a 512x512x512 SAC model is about 10 MB).
MAX_MODEL_BYTES = 512 * 2**20
#: Bounds on a model's budget and network read back (what a file may make us allocate).
MAX_BUDGET = 10_000
MAX_LAYERS = 16
MAX_LAYER_SIZE = 8192
NET_ARCH: tuple[int, ...] = (512, 512, 512)


class ModelError(ValueError):
    """A model file is missing, unreadable or not a clusteremu RL tuner."""


def require_rl() -> None:
    """Raise a clear error when the ``rl`` extra (torch, gymnasium, SB3) is missing."""
    try:
        import gymnasium  # noqa: F401
        import stable_baselines3  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            f"the RL tuner needs the rl extra ({exc.name} is missing): pip install -e '.[rl]'"
        ) from None


def observation_size(budget: int) -> int:
    """Length of the observation vector for a budget (Fixed included)."""
    frames = max(budget - 1, 1)
    return len(STATIC_SPACE) + frames * (len(WEIGHT_NAMES) + 1) + 1


def observation(
    static: npt.NDArray[np.float32],
    tried: Sequence[Sequence[float]],
    scores: Sequence[float],
    budget: int,
) -> npt.NDArray[np.float32]:
    """The agent's view after evaluating `tried` (the first is the Fixed weights)."""
    frames = max(budget - 1, 1)
    k = len(WEIGHT_NAMES) + 1
    obs = np.zeros(observation_size(budget), dtype=np.float32)
    obs[: len(static)] = static
    base = scores[0] if scores else float("nan")
    pairs = list(zip(tried, scores, strict=True))[-frames:]
    for j, (w, s) in enumerate(pairs):
        off = len(static) + j * k
        obs[off : off + k - 1] = np.clip(np.asarray(w, dtype=np.float32), 0.0, 1.0)
        ratio = s / base - 1.0 if base > 0 and math.isfinite(s) else -1.0
        obs[off + k - 1] = float(np.clip(ratio, -1.0, 1.0))
    obs[-1] = min(len(tried), budget) / budget
    return obs


def improvement(scores: Sequence[float]) -> float:
    """Eq. 1: (max(r_1..r_n) - r_0) / r_0 over finite scores (r_0 the Fixed score)."""
    r0 = scores[0]
    rest = [s for s in scores[1:] if math.isfinite(s)]
    if not rest or not (r0 > 0):
        return 0.0
    return (max(rest) - r0) / r0


_BaseEnv: Any = gym.Env if gym is not None else object


class TuningEnv(_BaseEnv):
    """One tuning experiment per episode (see the module docstring).

    `domain` names the domain experiments are drawn from; ``reset(options={"experiment":
    Experiment})`` runs a given one instead. `repeats`: replications per evaluation.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, domain_name: str = "train", budget: int = 5, repeats: int = 1) -> None:
        require_rl()
        from gymnasium import spaces

        domain(domain_name)  # ValueError for an unknown domain
        if budget < 2:
            raise ValueError(f"budget: the RL tuner needs at least 2 evaluations, got {budget}")
        self.domain_name = domain_name
        self.budget = int(budget)
        self.repeats = int(repeats)
        n = observation_size(self.budget)
        low = np.zeros(n, dtype=np.float32)
        for j in range(max(self.budget - 1, 1)):  # the score ratios may be negative
            low[len(STATIC_SPACE) + j * (len(WEIGHT_NAMES) + 1) + len(WEIGHT_NAMES)] = -1.0
        self.observation_space = spaces.Box(low, np.ones(n, dtype=np.float32), dtype=np.float32)
        self.action_space = spaces.Box(0.0, 1.0, (len(WEIGHT_NAMES),), dtype=np.float32)
        self.experiment: Experiment | None = None
        self.tried: list[tuple[float, ...]] = []
        self.scores: list[float] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if options.get("experiment") is not None:
            self.experiment = options["experiment"]
        else:
            config_seed = int(self.np_random.integers(2**31 - 1))
            self.experiment = experiment_from_config(
                sample_config(self.domain_name, config_seed, 0)
            )
        assert self.experiment is not None
        r0 = evaluate(self.experiment, FIXED, self.repeats).score
        self.tried, self.scores = [FIXED], [r0]
        obs = observation(self.experiment.static, self.tried, self.scores, self.budget)
        return obs, {"score": r0, "experiment": self.experiment.name}

    def step(
        self, action: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        if self.experiment is None:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.size != len(WEIGHT_NAMES):
            raise ValueError(f"action: expected {len(WEIGHT_NAMES)} weights, got {a.size}")
        weights = tuple(float(x) for x in np.clip(a, 0.0, 1.0))
        score = evaluate(self.experiment, weights, self.repeats).score
        self.tried.append(weights)
        self.scores.append(score)
        done = len(self.tried) >= self.budget
        reward = improvement(self.scores) if done else 0.0
        obs = observation(self.experiment.static, self.tried, self.scores, self.budget)
        return obs, float(reward), done, False, {"score": score}


# --- training --------------------------------------------------------------------------------


def _make_env(
    domain_name: str, budget: int, repeats: int, rank: int, seed: int
) -> Callable[[], Any]:
    def make() -> Any:
        import torch

        torch.set_num_threads(1)
        env = TuningEnv(domain_name, budget, repeats)
        env.reset(seed=seed + rank)
        return env

    return make


@dataclass(frozen=True)
class TrainingReport:
    """What `train_agent` did: steps, episodes, mean eq. 1 reward of the last 100 episodes,
    wall seconds."""

    steps: int
    episodes: int
    mean_reward_last_100: float
    wall_s: float


def train_agent(
    steps: int,
    out: str | Path,
    envs: int = 2,
    seed: int = 0,
    domain_name: str = "train",
    budget: int = 5,
    repeats: int = 1,
    net_arch: Sequence[int] = NET_ARCH,
    learning_starts: int = 200,
    progress: Callable[[int, int, float], None] | None = None,
) -> TrainingReport:
    """Train SAC for `steps` environment steps on `envs` parallel environments and save
    the model to `out` (an SB3 zip with ``clusteremu.json``)."""
    require_rl()
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    makers = [_make_env(domain_name, budget, repeats, i, seed) for i in range(envs)]
    vec = SubprocVecEnv(makers, start_method="spawn") if envs > 1 else DummyVecEnv(makers)
    vec.seed(seed)
    learner_env = VecNormalize(vec, norm_obs=False, norm_reward=True, gamma=0.99)
    rewards: list[float] = []

    class Progress(BaseCallback):
        def _on_step(self) -> bool:
            for done, r in zip(
                self.locals["dones"],
                learner_env.get_original_reward(),
                strict=True,
            ):
                if done:
                    rewards.append(float(r))
            if progress is not None:
                tail = rewards[-100:]
                progress(self.num_timesteps, len(rewards), float(np.mean(tail)) if tail else 0.0)
            return True

    model = SAC(
        "MlpPolicy",
        learner_env,
        policy_kwargs={"net_arch": list(net_arch)},
        learning_starts=learning_starts,
        batch_size=256,
        buffer_size=max(steps, 1000),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=Progress())
    wall = time.perf_counter() - start
    learner_env.close()
    save_agent(model, out, budget=budget, domain_name=domain_name, net_arch=net_arch, steps=steps)
    tail = rewards[-100:]
    return TrainingReport(steps, len(rewards), float(np.mean(tail)) if tail else 0.0, wall)


def save_agent(
    model: Any,
    out: str | Path,
    budget: int,
    domain_name: str,
    net_arch: Sequence[int],
    steps: int,
) -> Path:
    """`model.save(out)` plus the ``clusteremu.json`` that `load_agent` needs."""
    path = Path(out)
    if path.suffix != ".zip":
        path = path.with_suffix(path.suffix + ".zip") if path.suffix else path.with_suffix(".zip")
    model.save(path)
    meta = {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "budget": int(budget),
        "domain": domain_name,
        "net_arch": [int(n) for n in net_arch],
        "observation_size": observation_size(budget),
        "weights": list(WEIGHT_NAMES),
        "static": [list(s) for s in STATIC_SPACE],
        "steps": int(steps),
    }
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(META_FILE, json.dumps(meta, indent=2))
    return path


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


@dataclass
class Agent:
    """A loaded SAC actor: proposes weights from the experiment's history."""

    policy: Any
    budget: int
    meta: dict[str, Any]

    def propose(
        self,
        static: npt.NDArray[np.float32],
        tried: Sequence[Sequence[float]],
        scores: Sequence[float],
    ) -> tuple[float, ...]:
        obs = observation(static, tried, scores, self.budget)
        action, _ = self.policy.predict(obs, deterministic=True)
        return tuple(float(x) for x in np.clip(np.asarray(action).reshape(-1), 0.0, 1.0))


def load_agent(path: str | Path) -> Agent:
    """Load a model written by `train_agent` without unpickling anything (`ModelError`)."""
    require_rl()
    import torch
    from gymnasium import spaces
    from stable_baselines3.sac.policies import SACPolicy

    p = Path(path)
    if not p.exists():
        raise ModelError(f"{p}: no such model file (train one with `clusteremu train-rl`)")
    try:  # every member's size and CRC-32, before anything is decoded
        readback.check_zip(
            p, "an RL tuner model (clusteremu train-rl)", MAX_MODEL_BYTES, (META_FILE, "policy.pth")
        )
        with zipfile.ZipFile(p) as zf:
            meta = json.loads(zf.read(META_FILE), parse_constant=_no_constant)
            state_bytes = zf.read("policy.pth")
    except readback.ReadBackError as exc:
        raise ModelError(str(exc)) from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ModelError(f"{p}: not a readable zip file ({exc})") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, NaN, a deep document
        raise ModelError(f"{p}: {META_FILE} is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        raise ModelError(f"{p}: {META_FILE}: format is not {MODEL_FORMAT!r}")
    if meta.get("version") != MODEL_VERSION:
        raise ModelError(
            f"{p}: {META_FILE}: version {meta.get('version')!r}, this clusteremu reads "
            f"{MODEL_VERSION}"
        )
    if meta.get("weights") != list(WEIGHT_NAMES):
        raise ModelError(
            f"{p}: {META_FILE}: weights {meta.get('weights')!r} are not {list(WEIGHT_NAMES)}"
        )
    budget, net_arch = meta.get("budget"), meta.get("net_arch")
    if readback.number_problem(budget, 2, MAX_BUDGET, integer=True) is not None:
        raise ModelError(f"{p}: {META_FILE}: budget: expected a whole number 2..{MAX_BUDGET}")
    if (
        not isinstance(net_arch, list)
        or not 0 < len(net_arch) <= MAX_LAYERS
        or any(readback.number_problem(n, 1, MAX_LAYER_SIZE, integer=True) for n in net_arch)
    ):
        raise ModelError(
            f"{p}: {META_FILE}: net_arch: expected 1 to {MAX_LAYERS} layer sizes "
            f"of 1..{MAX_LAYER_SIZE}"
        )
    budget, net_arch = int(budget), [int(n) for n in net_arch]
    if budget < 2 or meta.get("observation_size") != observation_size(budget):
        raise ModelError(f"{p}: {META_FILE}: observation_size does not match budget {budget}")
    env = TuningEnv.__new__(TuningEnv)  # spaces only; no experiment is drawn
    n = observation_size(budget)
    low = np.zeros(n, dtype=np.float32)
    for j in range(budget - 1):
        low[len(STATIC_SPACE) + j * (len(WEIGHT_NAMES) + 1) + len(WEIGHT_NAMES)] = -1.0
    obs_space = spaces.Box(low, np.ones(n, dtype=np.float32), dtype=np.float32)
    act_space = spaces.Box(0.0, 1.0, (len(WEIGHT_NAMES),), dtype=np.float32)
    del env
    policy = SACPolicy(obs_space, act_space, lambda _: 0.0, net_arch=net_arch)
    try:
        state = torch.load(io.BytesIO(state_bytes), map_location="cpu", weights_only=True)
        policy.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - any decoding or shape problem is a bad file
        raise ModelError(f"{p}: policy.pth does not hold this network's weights ({exc})") from None
    policy.set_training_mode(False)
    return Agent(policy, budget, meta)
