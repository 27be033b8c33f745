"""Speed and memory of the ex2psro pipeline (run with `make bench`; never part of `make test`).

- bargaining simulation throughput: uniform-random episodes per second through the wrapper
  (raw pyspiel states, seats drawn per episode);
- Harvest steps per second (random actions, dense map, observations built every step);
- evaluation episodes per second with 2x50 MLP policies, one episode at a time
  (``estimate_entry``, as the PSRO loop's estimates play them) against lockstep
  (``evaluate_entry``, as the combined game's cross-evaluation plays them), bargaining and the
  stag hunt, at the default run's 24 and the paper's 200 episodes per pair, side by side;
- discrete-SAC learner updates per second (batch 64, 2x50 MLPs, one thread);
- the whole default run (`kedro run --pipeline=ex2psro`, conf/base): wall time and peak RSS in
  the benchmark's extra_info.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.ex2psro.bargaining import (
    EX2PSRO_INSTANCES,
    UniformPolicy,
    load_game,
    play_match,
)
from icml25.pipelines.ex2psro.responses import DiscreteSAC, ReplayBuffer, SACConfig

N_EPISODES, N_UPDATES = 500, 200


@pytest.mark.benchmark(group="ex2psro-simulation")
def test_ex2psro_episodes_per_second(benchmark):
    game = load_game("bargaining", 0.99, EX2PSRO_INSTANCES)
    uniform = UniformPolicy()

    def episodes():
        rng = np.random.default_rng(0)
        for _ in range(N_EPISODES):
            play_match(game, uniform, uniform, rng)

    benchmark.pedantic(episodes, rounds=3, iterations=1)
    benchmark.extra_info["episodes_per_second"] = N_EPISODES / benchmark.stats.stats.mean


@pytest.mark.parametrize("sims", [24, 200])
@pytest.mark.parametrize("player", ["sequential", "lockstep"])
@pytest.mark.parametrize("which", ["bargaining", "staghunt"])
def test_ex2psro_evaluation_episodes_per_second(benchmark, which, player, sims):
    from threadpoolctl import threadpool_limits

    from icml25.pipelines.ex2psro.psro import estimate_entry, evaluate_entry
    from icml25.pipelines.ex2psro.responses import mlp, numpy_policy
    from icml25.pipelines.ex2psro.staghunt import StagHuntGame

    benchmark.group = f"ex2psro-evaluation-{which}-{sims}"
    game = (load_game("bargaining", 0.99, EX2PSRO_INSTANCES) if which == "bargaining"
            else StagHuntGame())
    n_obs, n_actions = game.information_state_tensor_shape()[0], game.num_distinct_actions()
    torch.manual_seed(0)
    a, b = (numpy_policy(mlp(n_obs, n_actions, (50, 50))) for _ in range(2))
    play = estimate_entry if player == "sequential" else evaluate_entry
    reps = max(1, 2000 // sims)

    def entries():
        rng = np.random.default_rng(0)
        with threadpool_limits(1, user_api="blas"):  # as the cross-evaluation runs
            for _ in range(reps):
                play(game, a, b, sims, rng)

    benchmark.pedantic(entries, rounds=3, iterations=1)
    benchmark.extra_info["episodes_per_second"] = reps * sims / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="ex2psro-simulation")
def test_ex2psro_harvest_steps_per_second(benchmark):
    from icml25.pipelines.ex2psro.harvest import Harvest

    def steps():
        env = Harvest("dense", max_steps=1000, seed=0)
        rng = np.random.default_rng(0)
        n = 0
        while not env.done:
            env.step(rng.integers(8, size=2))
            n += 1
        return n

    n = benchmark.pedantic(steps, rounds=3, iterations=1)
    benchmark.extra_info["harvest_steps_per_second"] = n / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="ex2psro-sac")
def test_ex2psro_sac_updates_per_second(benchmark):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rng = np.random.default_rng(0)
        replay = ReplayBuffer(5000, 309, 121)
        for _ in range(5000):
            legal = rng.random(121) < 0.2
            legal[120] = True
            replay.add(rng.random(309), legal, 120, rng.random(), rng.random(309), legal, 0.0)
        sac = DiscreteSAC(309, 121, SACConfig(), seed=0)

        def updates():
            for _ in range(N_UPDATES):
                sac.update(replay.sample(64, rng))

        benchmark.pedantic(updates, rounds=3, iterations=1)
        benchmark.extra_info["updates_per_second"] = N_UPDATES / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_ex2psro_default_run(default_run):
    default_run("ex2psro")
