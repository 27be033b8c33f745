"""Speed and memory of the functional_tom pipeline (run with `make bench`; never part of
`make test`).

- reference agents: rounds per second of each agent against IPD tit-for-tat (T = 100);
- the meta-trained transformer: one DAgger training update (rollout + step) of the default model
  on 1 and on 2 threads, and batched greedy evaluation throughput (rounds per second);
- exact DP optimum: solves per second of the whole hypothesis library;
- the whole default run (`kedro run --pipeline=functional_tom`, conf/base): wall time and peak
  RSS recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import pytest
import torch

from icml25.pipelines.functional_tom.episodes import run_episode
from icml25.pipelines.functional_tom.games import default_games
from icml25.pipelines.functional_tom.meta_agent import (
    InContextAgentNet,
    MetaConfig,
    evaluate_meta_agent,
    train_meta_agent,
)
from icml25.pipelines.functional_tom.optimal_play import solve
from icml25.pipelines.functional_tom.partners import build_partner, hypothesis_library
from icml25.pipelines.functional_tom.reference_agents import (
    REFERENCE_AGENTS,
    make_reference_agent,
)

GAMES = default_games()


@pytest.mark.benchmark(group="functional_tom-reference")
@pytest.mark.parametrize("agent", REFERENCE_AGENTS)
def test_reference_agent_rounds_per_second(benchmark, agent):
    ipd = GAMES["ipd"]
    partner = build_partner(ipd, {"family": "tft", "first": 0})
    opt = solve(ipd, partner, 100)
    result = benchmark(lambda: run_episode(ipd, partner, make_reference_agent(agent), opt, 0,
                                           give_partner=agent == "oracle"))
    assert len(result.log) == 100
    benchmark.extra_info["rounds_per_second"] = 100 / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="functional_tom-dp")
def test_dp_solves_per_second(benchmark):
    library = hypothesis_library(GAMES["rps"])
    benchmark(lambda: [solve(GAMES["rps"], h, 100) for h in library])
    benchmark.extra_info["solves_per_second"] = len(library) / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="functional_tom-meta-train")
@pytest.mark.parametrize("threads", [1, 2])
def test_meta_training_update(benchmark, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ipd = GAMES["ipd"]
        benchmark.pedantic(
            lambda: train_meta_agent(ipd, ["single", "cycle", "tft", "anti"], MetaConfig(2),
                                     steps=5, batch_size=32, lr=1e-3, weight_decay=0.01,
                                     grad_clip=1.0, eps_start=0.5, eps_end=0.05, seed=0,
                                     progress=False),
            rounds=2, iterations=1)
        benchmark.extra_info["updates_per_second"] = 5 / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="functional_tom-meta-eval")
def test_meta_batched_evaluation_throughput(benchmark):
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as the pipeline runs it (num_threads: 1)
    try:
        torch.manual_seed(0)
        model = InContextAgentNet(MetaConfig(2)).eval()
        specs = [{"family": "tft", "first": 0}] * 60
        logs = benchmark(lambda: evaluate_meta_agent(model, GAMES["ipd"], specs, 0, "policy"))
        assert len(logs) == 60
        benchmark.extra_info["rounds_per_second"] = 60 * 50 / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


def test_default_run(default_run):
    result = default_run("functional_tom")
    assert result["wall_seconds"] > 0
