"""The ablations a trained RL tuner is judged against (issue 40; docs/tuning.md, "Did the
agent learn something?").

An RL tuner that beats the Fixed weights has not thereby learnt anything: an untrained
network of the same architecture proposes weights other than Fixed too, and may beat Fixed
by chance. So the out-of-sample judgement (`clusteremu.tuners.out_of_sample`) runs, beside
Fixed and random search at the same budget, three policies made from the agent:

- ``untrained agent``: the same algorithm, architecture, budget and seed with 0 training
  steps (`clusteremu.tuners.rl.untrained_agent`), searching the same experiments at the
  same budget;
- ``constant``: one weight vector for every experiment, the trained agent's mean first
  proposal over `CONSTANT_CONFIGS` configurations of its *training* domain (never the
  judged ones; `constant_weights`) -- the agent's average decision without conditioning
  on the configuration. It is searched like every tuner: Fixed, then the constant, the
  better of the two on the experiment's search seed;
- ``first proposal only``: the agent's own search cut to its first proposal (the better
  of Fixed and that proposal on the search seed, `first_proposal_best`), which shows how
  much of the gain the first proposal carries and what the later proposals add.

The agent "learned something" only when it beats both the untrained agent and the constant
by paired intervals above zero (`LEARNED_AGAINST`). The first proposal does not depend on
the Fixed score: the observation holds the score's ratio to itself, 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from clusteremu.cluster.splits import instance_seed
from clusteremu.tuners.domains import FIXED, ExperimentConfig, sample_configs

#: The ablation policies' names (each prefixed by the tuner's name in a report).
UNTRAINED = "untrained agent"
CONSTANT = "constant"
FIRST_PROPOSAL = "first proposal only"
#: What an RL tuner must beat, by paired intervals above zero, to have learned something.
LEARNED_AGAINST: tuple[str, ...] = (UNTRAINED, CONSTANT)
#: Training-domain configurations the constant is averaged over (the issue's 20).
CONSTANT_CONFIGS = 20
#: The protocol stream the constant's configurations are drawn from (under the tuning seed).
CONSTANT_SPLIT = "constant"

Weights = tuple[float, ...]


def constant_configs(domain_name: str, count: int, seed: int) -> list[ExperimentConfig]:
    """`count` configurations of `domain_name` (the agent's training domain) from a stream of
    their own under `seed`: not the configurations a tuning with `--seed seed` judges, even
    on the same domain."""
    if count < 1:
        raise ValueError(f"constant configurations: expected at least 1, got {count}")
    return sample_configs(domain_name, count, instance_seed(seed, CONSTANT_SPLIT, 0))


def first_proposal(agent: Any, static: Any) -> Weights:
    """The agent's first proposal for an experiment with this static description (after the
    Fixed weights; it does not depend on their score, whose ratio to itself is 0)."""
    return tuple(float(w) for w in agent.propose(static, [FIXED], [1.0]))


def constant_weights(agent: Any, configs: Sequence[ExperimentConfig]) -> Weights:
    """The mean first proposal of `agent` over `configs` (each weight in [0, 1]). Builds each
    configuration's scenario to read its static description; runs no emulator."""
    from clusteremu.tuners.evaluate import experiment_from_config

    if not configs:
        raise ValueError("constant weights: no configurations to average over")
    proposals = [first_proposal(agent, experiment_from_config(c).static) for c in configs]
    return tuple(float(w) for w in np.mean(np.array(proposals), axis=0))


def better_of(fixed_score: float, weights: Sequence[float], score: float) -> Weights:
    """`weights` when they scored strictly above Fixed on the search seed, else Fixed (a tie
    or a failed run keeps Fixed, as a tuner's own best does)."""
    return tuple(float(w) for w in weights) if score > fixed_score else tuple(FIXED)


def first_proposal_best(tried: Sequence[Sequence[float]], scores: Sequence[float]) -> Weights:
    """The search cut to its first proposal: the better of Fixed (`tried[0]`) and the first
    proposal (`tried[1]`) on the search seed; Fixed when the search made no proposal."""
    if len(tried) < 2:
        return tuple(float(w) for w in tried[0])
    return better_of(scores[0], tried[1], scores[1])
