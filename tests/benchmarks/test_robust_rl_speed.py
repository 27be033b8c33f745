"""Speed and memory of the robust_rl pipeline (run with `make bench`; never part of `make test`).

- support-function throughput: rows of sigma(V) per second for each set on Garnet-sparse-20;
- robust value iteration (DRVI) sweeps per second at the reduction's discount (TV 0.4);
- robust linear Q-learning steps per second on the default Garnet-200 features;
- robust DQN training steps per second on CartPole (CPU, 1 and 2 threads);
- the whole default run (`kedro run --pipeline=robust_rl`, conf/base): wall time and peak RSS
  in the benchmark's extra_info.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.robust_rl.environments import (
    action_block_features,
    garnet_sparse,
    state_features,
)
from icml25.pipelines.robust_rl.linear_q import RobustLinearQ
from icml25.pipelines.robust_rl.robust_dqn import DQNConfig, train_dqn
from icml25.pipelines.robust_rl.robust_planning import robust_value_iteration
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

GARNET = garnet_sparse(20, 4, 3, seed=3)


@pytest.mark.benchmark(group="support-function")
@pytest.mark.parametrize(("kind", "radius"), [("contamination", 0.2), ("tv", 0.4),
                                              ("chi2", 0.5), ("kl", 0.1)])
def test_support_function_rows_per_second(benchmark, kind, radius):
    u = UncertaintySet(kind, radius)
    V = np.random.default_rng(0).normal(size=20)
    out = benchmark(u.sigma, GARNET.P, V)
    assert out.shape == (20, 4)
    benchmark.extra_info["rows_per_second"] = 80 / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="drvi")
def test_drvi_sweeps_per_second(benchmark):
    u = UncertaintySet("tv", 0.4)
    _, _, sweeps = benchmark.pedantic(robust_value_iteration, (GARNET.P, GARNET.r, u, 0.98),
                                      rounds=3, iterations=1)
    benchmark.extra_info["sweeps"] = sweeps
    benchmark.extra_info["sweeps_per_second"] = sweeps / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="linear-q")
def test_linear_q_steps_per_second(benchmark):
    mdp = garnet_sparse(200, 4, 5, seed=0, n_goals=10)
    phi = action_block_features(state_features(200, 16, np.random.default_rng(0)), 4)
    rng = np.random.default_rng(0)
    transitions = [(int(s), int(a), float(mdp.r[s, a]), int(rng.choice(200, p=mdp.P[s, a])))
                   for s, a in zip(rng.integers(200, size=2000), rng.integers(4, size=2000),
                                   strict=True)]

    def run():
        learner = RobustLinearQ(phi, gamma=0.98, radius=0.2, rng=np.random.default_rng(0))
        for t in transitions:
            learner.update(*t)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["steps_per_second"] = len(transitions) / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="dqn")
@pytest.mark.parametrize("threads", [1, 2])
def test_dqn_training_steps_per_second(benchmark, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg = DQNConfig(steps=1500, gamma=0.995, radius=0.1, learning_starts=500)
        benchmark.pedantic(train_dqn, (cfg, 0, torch.device("cpu")),
                           kwargs={"progress": False}, rounds=1, iterations=1)
        benchmark.extra_info["steps_per_second"] = cfg.steps / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("robust_rl")
