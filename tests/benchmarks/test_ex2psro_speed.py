"""Speed and memory of the ex2psro pipeline (run with `make bench`; never part of `make test`).

- bargaining simulation throughput: uniform-random episodes per second through the wrapper
  (raw pyspiel states, seats drawn per episode);
- Harvest steps per second (random actions, dense map, observations built every step);
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
