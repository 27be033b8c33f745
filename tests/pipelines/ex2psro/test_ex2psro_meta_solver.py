"""RRD meta-solver, welfare and regret against independent computations."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.ex2psro.meta_solver import (
    kl_weight,
    regret,
    regret_lambda,
    rrd,
    simplex_projection,
    total_regret,
    welfare,
)


def test_ex2psro_rrd_prisoners_dilemma_goes_to_defect():
    sigma, _ = rrd(np.array([[3.0, 0.0], [5.0, 1.0]]), lam=0.0, dt=1e-2, max_steps=20_000)
    assert sigma[1] > 0.99


def test_ex2psro_rrd_stops_early_below_threshold():
    u = np.diag([1.0, 2.0, 3.0]) + 0.1
    lam = 0.05
    sigma, steps = rrd(u, lam=lam, dt=1e-2, max_steps=100_000)
    assert steps < 100_000
    assert total_regret(u, sigma) < lam
    assert steps > 0  # the uniform start has regret above 0.05


def test_ex2psro_rrd_rock_paper_scissors_stays_near_uniform():
    rps = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    sigma, steps = rrd(rps, lam=0.0, dt=1e-3, max_steps=50_000)
    assert steps == 50_000
    assert np.max(np.abs(sigma - 1 / 3)) < 0.05


def test_ex2psro_rrd_matches_openspiel_prd():
    prd = pytest.importorskip("open_spiel.python.algorithms.projected_replicator_dynamics")
    rng = np.random.default_rng(0)
    u = rng.normal(size=(4, 4))
    ours, _ = rrd(u, lam=0.0, dt=1e-3, max_steps=3000)
    theirs = prd.projected_replicator_dynamics(
        [u, u.T], prd_iterations=3000, prd_dt=1e-3, prd_gamma=0.0,
        average_over_last_n_strategies=1)
    np.testing.assert_allclose(ours, theirs[0], atol=1e-10)
    np.testing.assert_allclose(theirs[0], theirs[1], atol=1e-10)  # symmetric: seats agree


def test_ex2psro_simplex_projection_matches_brute_force():
    cvxpy = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(1)
    v = rng.normal(size=6)
    x = cvxpy.Variable(6)
    cvxpy.Problem(cvxpy.Minimize(cvxpy.sum_squares(x - v)), [cvxpy.sum(x) == 1, x >= 0]).solve()
    np.testing.assert_allclose(simplex_projection(v), x.value, atol=1e-5)


def test_ex2psro_welfare_equals_brute_force_sum():
    rng = np.random.default_rng(2)
    u = rng.normal(size=(5, 5))
    sigma = rng.dirichlet(np.ones(5))
    brute = sum(sigma[i] * sigma[j] * (u[i, j] + u[j, i]) for i in range(5) for j in range(5))
    assert welfare(u, sigma) == pytest.approx(brute)


def test_ex2psro_regret_zero_at_pure_nash_positive_when_dominated():
    pd = np.array([[3.0, 0.0], [5.0, 1.0]])
    assert regret(pd, np.array([0.0, 1.0])) == 0.0
    assert regret(pd, np.array([1.0, 0.0])) == pytest.approx(2.0)  # 5 - 3


def test_ex2psro_schedules():
    assert regret_lambda(0, 5.0, 0.0, 25) == 5.0
    assert regret_lambda(25, 5.0, 0.0, 25) == 1e-3
    assert regret_lambda(10, 5.0, 0.0, 25) == pytest.approx(3.0)
    assert kl_weight(1, 0.1, 20) == pytest.approx(0.1)
    assert kl_weight(11, 0.1, 20) == pytest.approx(0.05)
    assert kl_weight(30, 0.1, 20) == 0.0


@pytest.mark.parametrize("bad", [np.zeros((2, 3)), np.array([[np.nan]]), np.zeros((0, 0))])
def test_ex2psro_rrd_rejects_bad_payoffs(bad):
    with pytest.raises(ValueError, match="payoffs"):
        rrd(bad, lam=0.1)
