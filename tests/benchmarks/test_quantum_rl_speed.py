"""Speed and memory of the quantum_rl pipeline (run with `make bench`; never part of `make test`).

- the agent loop: environment steps per second of Q-UCRL and UCRL2 on RiverSwim-6 and Garnet-10
  (T = 1e5, everything included: stepping, EVI, quantum estimates), with the mean time per EVI call
  of those runs in extra_info;
- one EVI call on its own, at the tolerances Q-UCRL uses late (1/t_e = 1e-5) and UCRL2 (1e-2.5);
- one quantum row estimate (median of 7 AE runs per next state, M = 2^13);
- the whole default run (`kedro run --pipeline=quantum_rl`, conf/base): wall time and peak RSS.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.core.mdp import relative_value_iteration, riverswim
from icml25.pipelines.quantum_rl.agents import AgentConfig, log_checkpoints, run_optimistic
from icml25.pipelines.quantum_rl.amplitude_estimation import quantum_row_estimate
from icml25.pipelines.quantum_rl.environments import garnet_mdp
from icml25.pipelines.quantum_rl.extended_value_iteration import extended_value_iteration

AGENTS = {
    "qucrl": AgentConfig(),
    "ucrl2": AgentConfig(estimator="classical", radius="classical", eps_rule="inv_sqrt"),
}
ENVS = {"riverswim_6": lambda: riverswim(6), "garnet_10": lambda: garnet_mdp(10, 3, 3, 0.05, 7)}


@pytest.mark.benchmark(group="agent-loop")
@pytest.mark.parametrize("env", list(ENVS))
@pytest.mark.parametrize("agent", list(AGENTS))
def test_agent_loop_steps_per_second(benchmark, agent, env):
    mdp = ENVS[env]()
    rho, _, _ = relative_value_iteration(mdp.P, mdp.r)
    T = 100_000
    checkpoints = log_checkpoints(T, 200)
    result = benchmark.pedantic(
        lambda: run_optimistic(mdp, rho, T, AGENTS[agent], np.random.default_rng(0),
                               checkpoints), rounds=3, iterations=1)
    benchmark.extra_info.update({
        "steps_per_second": T / benchmark.stats.stats.mean,
        "evi_calls": result.evi_calls,
        "ms_per_evi_call": 1e3 * result.evi_seconds / result.evi_calls,
        "steps_per_second_excluding_evi": T / (result.wall_seconds - result.evi_seconds),
    })


@pytest.mark.benchmark(group="evi-call")
@pytest.mark.parametrize("eps", [1e-5, 10**-2.5], ids=["qucrl_1e-5", "ucrl2_3e-3"])
def test_single_evi_call(benchmark, eps):
    mdp = riverswim(6)
    rng = np.random.default_rng(0)
    noisy = mdp.P + rng.uniform(0, 0.02, size=mdp.P.shape)
    P_hat = noisy / noisy.sum(axis=2, keepdims=True)
    L = math.log(2 * 6 * 2 * 1e5 / 0.05)
    beta = 6 * L / rng.integers(100, 20_000, size=(6, 2))  # quantum radii late in a run
    result = benchmark(extended_value_iteration, P_hat, mdp.r, beta, eps)
    assert result.converged
    benchmark.extra_info["sweeps"] = result.sweeps


@pytest.mark.benchmark(group="quantum-estimate")
def test_quantum_row_estimate(benchmark):
    rng = np.random.default_rng(0)
    row = np.array([0.05, 0.6, 0.35, 0.0, 0.0, 0.0])
    est, M = benchmark(quantum_row_estimate, row, 60_000, 7, 1, "paper", rng)
    assert M == 2**13 and est is not None


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("quantum_rl")
