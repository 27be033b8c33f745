"""Environments, optimal gains, the Q-UCRL / UCRL2 loop and the bracketing agents."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.core.mdp import (
    MDPError,
    TabularMDP,
    average_reward_lp,
    relative_value_iteration,
    riverswim,
)
from icml25.pipelines.quantum_rl.agents import (
    AgentConfig,
    AgentInputError,
    log_checkpoints,
    momentum_update,
    radii,
    run_agent,
    run_optimistic,
)
from icml25.pipelines.quantum_rl.environments import (
    build_mdp,
    garnet_mdp,
    two_state_gain,
    two_state_toy,
)
from icml25.pipelines.quantum_rl.evaluation import epoch_bound, last_decade_slope

QUCRL = AgentConfig()
UCRL2 = AgentConfig(estimator="classical", radius="classical", eps_rule="inv_sqrt")


def _optimal(mdp):
    rho, _, policy = relative_value_iteration(mdp.P, mdp.r, tol=1e-12)
    return rho, policy


def test_rvi_gain_matches_closed_form_and_lp():
    toy = two_state_toy()
    rho, policy = _optimal(toy)
    assert rho == pytest.approx(two_state_gain(), abs=1e-9)
    assert rho == pytest.approx(average_reward_lp(toy.P, toy.r), abs=1e-9)
    assert policy.tolist() == [1, 0]
    for S in (6, 12):
        mdp = riverswim(S)
        rho, _ = _optimal(mdp)
        assert rho == pytest.approx(average_reward_lp(mdp.P, mdp.r), abs=1e-8)
        assert rho == pytest.approx(0.4286, abs=1e-4)


def test_garnet_is_ergodic_and_reproducible():
    a, b = garnet_mdp(10, 3, 3, 0.05, 7), garnet_mdp(10, 3, 3, 0.05, 7)
    np.testing.assert_array_equal(a.P, b.P)
    assert a.P.min() >= 0.05 / 10 - 1e-15
    rho, _ = _optimal(a)
    assert rho == pytest.approx(average_reward_lp(a.P, a.r), abs=1e-8)


def test_momentum_update_with_empirical_frequencies_is_the_pooled_mean():
    rng = np.random.default_rng(0)
    counts = [rng.multinomial(n, [0.2, 0.5, 0.3]) for n in (1, 1, 2, 4, 8, 16, 37)]
    P_hat, N = np.full(3, 1 / 3), 0
    for c in counts:
        P_hat = momentum_update(P_hat, N, c / c.sum(), int(c.sum()))
        N += int(c.sum())
    pooled = np.sum(counts, axis=0) / N
    np.testing.assert_allclose(P_hat, pooled, rtol=0, atol=1e-15)
    # and inside UCRL2's loop: the final estimate is the pooled empirical frequency
    mdp = riverswim(6)
    rho, _ = _optimal(mdp)
    res = run_optimistic(mdp, rho, 5000, UCRL2, np.random.default_rng(1),
                         log_checkpoints(5000, 20))
    visited = res.N > 0
    np.testing.assert_allclose(res.P_hat[visited],
                               (res.counts / np.maximum(res.N, 1)[..., None])[visited],
                               atol=1e-12)
    np.testing.assert_array_equal(res.counts.sum(axis=2), res.N)


@pytest.mark.parametrize("cfg", [QUCRL, UCRL2], ids=["qucrl", "ucrl2"])
def test_number_of_epochs_is_within_the_doubling_bound(cfg):
    mdp = riverswim(6)
    rho, _ = _optimal(mdp)
    T = 10_000
    res = run_optimistic(mdp, rho, T, cfg, np.random.default_rng(2), log_checkpoints(T, 30))
    S, A = mdp.n_states, mdp.n_actions
    assert len(res.epochs) <= epoch_bound(S, A, T) + S * A
    assert sum(e["length"] for e in res.epochs) == T
    assert all(e["evi_converged"] for e in res.epochs)


def test_oracle_regret_is_near_zero_and_random_regret_is_linear():
    T = 10_000
    for mdp in (riverswim(6), riverswim(12)):
        rho, policy = _optimal(mdp)
        cps = log_checkpoints(T, 30)
        oracle = run_agent(mdp, rho, policy, T, AgentConfig(kind="oracle"),
                           np.random.default_rng(3), cps)
        random = run_agent(mdp, rho, policy, T, AgentConfig(kind="random"),
                           np.random.default_rng(3), cps)
        assert abs(oracle.regret[-1]) / T < 0.01
        assert random.regret[-1] / T > 0.1 * rho
        assert last_decade_slope(cps, random.regret) == pytest.approx(1.0, abs=0.05)


def test_qucrl_uses_quantum_updates_and_is_deterministic_for_a_seed():
    mdp = riverswim(6)
    rho, _ = _optimal(mdp)
    cps = log_checkpoints(20_000, 30)
    a = run_optimistic(mdp, rho, 20_000, QUCRL, np.random.default_rng(5), cps)
    b = run_optimistic(mdp, rho, 20_000, QUCRL, np.random.default_rng(5), cps)
    np.testing.assert_array_equal(a.regret, b.regret)
    np.testing.assert_array_equal(a.P_hat, b.P_hat)
    assert sum(e["quantum_updates"] for e in a.epochs) > 0
    assert sum(e["fallback_updates"] for e in a.epochs) > 0  # the first, small epochs
    assert a.K == 7
    # estimates of well-visited pairs are close to the truth
    well = a.N >= 1000
    assert well.any()
    assert np.abs(a.P_hat - mdp.P).sum(axis=2)[well].max() < 0.1


def test_radius_shapes_and_a_small_constant_breaks_coverage():
    N = np.array([[0.0, 10.0, 1000.0]])
    L = math.log(2 * 6 * 2 * 100 / 0.05)
    np.testing.assert_allclose(radii(QUCRL, N, np.zeros_like(N), 100, 6, 2),
                               6 * L / np.maximum(N, 1))
    np.testing.assert_allclose(radii(UCRL2, N, np.zeros_like(N), 100, 6, 2),
                               np.sqrt(6 * L / np.maximum(N, 1)))
    fallback = np.array([[0.0, 3.0 + 2.0, 50.0]])  # sum of sqrt(nu_k) of fallback updates
    share = math.sqrt(6 * L) * fallback / np.maximum(N, 1)
    bare = 6 * L / np.maximum(N, 1)
    for rule, expected in (("max", np.maximum(bare, share)), ("sum", bare + share),
                           ("none", bare)):
        cfg = AgentConfig(c=2.0, fallback_radius=rule)
        np.testing.assert_allclose(radii(cfg, N, fallback, 100, 6, 2), 2.0 * expected)
    assert share[0, 2] > bare[0, 2]  # the max rule does bite when fallbacks dominate
    mdp = riverswim(6)
    rho, _ = _optimal(mdp)
    cov = {}
    for c in (0.1, 1.0):
        res = run_optimistic(mdp, rho, 20_000, AgentConfig(c=c), np.random.default_rng(6),
                             log_checkpoints(20_000, 20))
        cov[c] = (sum(e["covered_pairs"] for e in res.epochs)
                  / sum(e["visited_pairs"] for e in res.epochs))
    assert cov[1.0] >= 0.95
    assert cov[0.1] < cov[1.0]


def test_bad_mdps_and_settings_are_refused():
    P = riverswim(6).P.copy()
    P[2, 1, 3] += 0.1
    with pytest.raises(MDPError, match=r"\[2, 1\] sums to 1.1"):
        TabularMDP(P, np.zeros((6, 2)))
    r = riverswim(6).r.copy()
    r[0, 0] = -0.5
    bad_reward = TabularMDP(riverswim(6).P, r, name="rs")
    cps = log_checkpoints(10, 5)
    with pytest.raises(AgentInputError, match=r"rs.r\[0, 0\] = -0.5.*negative reward"):
        run_optimistic(bad_reward, 0.4, 10, QUCRL, np.random.default_rng(0), cps)
    mdp = riverswim(6)
    for delta in (0.0, 1.0, 1.5):
        with pytest.raises(AgentInputError, match="delta"):
            run_optimistic(mdp, 0.4, 10, AgentConfig(delta=delta), np.random.default_rng(0), cps)
    with pytest.raises(AgentInputError, match="T >= 1"):
        run_optimistic(mdp, 0.4, 0, QUCRL, np.random.default_rng(0), cps)
    with pytest.raises(ValueError, match="unknown environment kind"):
        build_mdp("x", {"kind": "gridworld"})


@pytest.mark.parametrize("cfg", [AgentConfig(reward_known=False),
                                 AgentConfig(estimator="classical", radius="classical",
                                             eps_rule="inv_sqrt", reward_known=False)],
                         ids=["qucrl", "ucrl2"])
def test_unknown_bernoulli_rewards_are_learned(cfg):
    mdp = riverswim(6)
    rho, policy = _optimal(mdp)
    T = 30_000
    cps = log_checkpoints(T, 30)
    res = run_optimistic(mdp, rho, T, cfg, np.random.default_rng(7), cps)
    random = run_agent(mdp, rho, policy, T, AgentConfig(kind="random", reward_known=False),
                       np.random.default_rng(7), cps)
    assert res.regret[-1] < 0.5 * random.regret[-1]
    well = res.N >= 1000
    assert np.abs(res.r_hat - mdp.r)[well].max() < 0.05
    # realised regret differs from the pseudo-regret by the reward noise only (~ sqrt(T))
    assert not np.array_equal(res.realised_regret, res.regret)
    assert abs(res.realised_regret[-1] - res.regret[-1]) < 5 * math.sqrt(T)
    known = run_optimistic(mdp, rho, 2000, AgentConfig(), np.random.default_rng(7),
                           log_checkpoints(2000, 10))
    np.testing.assert_array_equal(known.realised_regret, known.regret)
    assert known.r_hat is None
