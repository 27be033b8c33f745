"""EVI: the closed-form inner maximum against linprog, the gain with beta = 0 against RVI, optimism,
and the optimistic gain against the occupancy-measure LP with l1 constraints (HiGHS)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from icml25.core.mdp import relative_value_iteration, riverswim
from icml25.pipelines.quantum_rl.environments import garnet_mdp
from icml25.pipelines.quantum_rl.extended_value_iteration import (
    extended_value_iteration,
    optimistic_transitions,
)

TIGHT = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def _inner_max_lp(p_hat: np.ndarray, beta: float, u: np.ndarray) -> float:
    """max_p u.p  s.t.  p in simplex, sum |p - p_hat| <= beta  (variables p, z)."""
    S = p_hat.size
    c = np.concatenate([-u, np.zeros(S)])
    eye = np.eye(S)
    A_ub = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, S)), np.ones((1, S))]])
    b_ub = np.concatenate([p_hat, -p_hat, [beta]])
    A_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=(0, None),
                  method="highs", options=TIGHT)
    assert res.success
    return -res.fun


def test_inner_maximum_is_feasible_and_matches_linprog():
    rng = np.random.default_rng(0)
    for _ in range(40):
        S = int(rng.integers(2, 9))
        p_hat = rng.dirichlet(np.ones(S) * rng.choice([0.3, 1.0, 5.0]), size=(3,))
        beta = rng.uniform(0.0, 2.5, size=3)
        u = rng.normal(size=S)
        if rng.random() < 0.3:
            u[rng.integers(S)] = u.max()  # ties
        p = optimistic_transitions(p_hat, beta, u)
        assert np.all(p >= -1e-15)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
        assert np.all(np.abs(p - p_hat).sum(axis=1) <= beta + 1e-12)
        for i in range(3):
            assert p[i] @ u == pytest.approx(_inner_max_lp(p_hat[i], beta[i], u), abs=1e-9)


@pytest.mark.parametrize("mdp", [riverswim(6), riverswim(12), garnet_mdp(10, 3, 3, 0.05, 7)],
                         ids=["riverswim_6", "riverswim_12", "garnet_10"])
def test_evi_with_zero_radius_is_value_iteration(mdp):
    rho, _, _ = relative_value_iteration(mdp.P, mdp.r, tol=1e-12)
    res = extended_value_iteration(mdp.P, mdp.r, np.zeros(mdp.r.shape), eps=1e-10)
    assert res.converged
    assert res.gain == pytest.approx(rho, abs=1e-9)


def test_optimistic_gain_is_at_least_the_true_gain_when_the_balls_cover_p():
    rng = np.random.default_rng(1)
    mdp = riverswim(6)
    rho, _, _ = relative_value_iteration(mdp.P, mdp.r)
    for _ in range(5):
        noisy = mdp.P + rng.uniform(0, 0.2, size=mdp.P.shape)
        P_hat = noisy / noisy.sum(axis=2, keepdims=True)
        beta = np.abs(P_hat - mdp.P).sum(axis=2) + 0.01
        res = extended_value_iteration(P_hat, mdp.r, beta, eps=1e-9)
        assert res.gain >= rho - 1e-8


def _occupancy_lp_gain(P_hat: np.ndarray, r: np.ndarray, beta: np.ndarray) -> float:
    """max sum r(s,a) q(s,a) over rho(s,a,s') >= 0 with flow balance, sum rho = 1 and
    sum_s' |rho(s,a,s') - P_hat(s'|s,a) q(s,a)| <= beta(s,a) q(s,a)  (z = the absolute values)."""
    S, A, _ = P_hat.shape
    n = S * A * S

    def idx(s, a, t):
        return (s * A + a) * S + t

    c = np.zeros(2 * n)
    for s in range(S):
        for a in range(A):
            for t in range(S):
                c[idx(s, a, t)] = -r[s, a]
    A_eq, b_eq = [], []
    row = np.zeros(2 * n)
    row[:n] = 1.0
    A_eq.append(row)
    b_eq.append(1.0)
    for s2 in range(S):
        row = np.zeros(2 * n)
        for a in range(A):
            for t in range(S):
                row[idx(s2, a, t)] += 1.0
        for s in range(S):
            for a in range(A):
                row[idx(s, a, s2)] -= 1.0
        A_eq.append(row)
        b_eq.append(0.0)
    A_ub, b_ub = [], []
    for s in range(S):
        for a in range(A):
            budget = np.zeros(2 * n)
            for t in range(S):
                for sign in (1.0, -1.0):
                    row = np.zeros(2 * n)
                    row[idx(s, a, t)] += sign
                    for t2 in range(S):
                        row[idx(s, a, t2)] -= sign * P_hat[s, a, t]
                    row[n + idx(s, a, t)] = -1.0
                    A_ub.append(row)
                    b_ub.append(0.0)
                budget[n + idx(s, a, t)] = 1.0
                budget[idx(s, a, t)] -= beta[s, a]
            A_ub.append(budget)
            b_ub.append(0.0)
    res = linprog(c, A_ub=np.array(A_ub), b_ub=b_ub, A_eq=np.array(A_eq), b_eq=b_eq,
                  bounds=(0, None), method="highs", options=TIGHT)
    assert res.success, res.message
    return -res.fun


def test_evi_gain_matches_the_occupancy_measure_lp_on_a_three_state_model():
    rng = np.random.default_rng(2)
    for _ in range(3):
        P_hat = rng.dirichlet(np.ones(3), size=(3, 2))
        r = rng.uniform(size=(3, 2))
        beta = rng.uniform(0.05, 0.8, size=(3, 2))
        res = extended_value_iteration(P_hat, r, beta, eps=1e-10)
        assert res.converged
        assert res.gain == pytest.approx(_occupancy_lp_gain(P_hat, r, beta), abs=1e-6)


def test_evi_refuses_a_bad_aperiodicity_weight():
    mdp = riverswim(6)
    with pytest.raises(ValueError, match="aperiodic"):
        extended_value_iteration(mdp.P, mdp.r, np.zeros((6, 2)), 1e-3, aperiodic=1.0)
