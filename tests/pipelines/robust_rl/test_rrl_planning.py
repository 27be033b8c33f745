"""Robust DP, the reduction and its baselines (radius 0, contraction, closed forms, the
reduction inequality, Q-learning), plus refusal of bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from icml25.core.mdp import (
    MDPError,
    discounted_value_iteration,
    garnet_kernel,
    relative_value_iteration,
)
from icml25.pipelines.robust_rl.environments import (
    garnet_sparse,
    make_env,
    recycling_robot,
)
from icml25.pipelines.robust_rl.reduction import (
    empirical_kernel,
    estimate_span_bound,
    nonrobust_plugin_policy,
    reduction_discount,
    reduction_policy,
    robust_rvi_q_learning,
)
from icml25.pipelines.robust_rl.robust_planning import (
    NotConvergedError,
    robust_bellman,
    robust_gain,
    robust_relative_value_iteration,
    robust_value_iteration,
    span,
)
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

SETS = [UncertaintySet("contamination", 0.2), UncertaintySet("tv", 0.2),
        UncertaintySet("chi2", 0.3), UncertaintySet("kl", 0.1)]


def _garnet(S=10, A=3, b=3, seed=0):
    rng = np.random.default_rng(seed)
    return garnet_kernel(S, A, b, rng), rng.random((S, A))


@pytest.mark.parametrize("kind", ["contamination", "tv", "chi2", "kl"])
def test_radius_zero_is_the_nominal_problem(kind):
    P, r = _garnet(seed=1)
    u = UncertaintySet(kind, 0.0)
    V_rob, pi_rob, _ = robust_value_iteration(P, r, u, 0.9, tol=1e-10)
    V, pi = discounted_value_iteration(P, r, 0.9, tol=1e-10)
    np.testing.assert_allclose(V_rob, V, atol=1e-8)
    np.testing.assert_array_equal(pi_rob, pi)
    g_rob, _, _ = robust_relative_value_iteration(P, r, u, tol=1e-11)
    g, _, _ = relative_value_iteration(P, r, tol=1e-11)
    assert g_rob == pytest.approx(g, abs=1e-8)


@pytest.mark.parametrize("uset", SETS, ids=lambda u: u.label)
def test_robust_bellman_is_a_gamma_contraction(uset):
    P, r = _garnet(seed=2)
    rng = np.random.default_rng(3)
    for _ in range(20):
        V, W = rng.normal(size=10) * 5, rng.normal(size=10) * 5
        TV = robust_bellman(P, r, V, uset, 0.95)
        TW = robust_bellman(P, r, W, uset, 0.95)
        assert np.max(np.abs(TV - TW)) <= 0.95 * np.max(np.abs(V - W)) + 1e-9


def test_full_contamination_gain_is_min_max_reward():
    """With R = 1, sigma(V) = min V everywhere, so g* = min_s max_a r(s, a)."""
    u = UncertaintySet("contamination", 1.0)
    for seed in range(5):
        P, r = _garnet(seed=seed)
        g, _, _ = robust_relative_value_iteration(P, r, u, tol=1e-12)
        assert g == pytest.approx(r.max(axis=1).min(), abs=1e-8)


@pytest.mark.parametrize("kind,radii", [("contamination", [0, 0.1, 0.2, 0.4]),
                                        ("tv", [0, 0.1, 0.2, 0.4]),
                                        ("chi2", [0, 0.1, 0.5]), ("kl", [0, 0.05, 0.1])])
def test_optimal_gain_is_non_increasing_in_the_radius(kind, radii):
    mdp = garnet_sparse(10, 3, 3, seed=4)
    gains = [robust_relative_value_iteration(mdp.P, mdp.r, UncertaintySet(kind, rho))[0]
             for rho in radii]
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(gains))
    assert gains[0] > gains[-1]


def test_robust_gain_is_below_every_member_of_the_set():
    mdp = garnet_sparse(10, 3, 3, seed=5)
    u = UncertaintySet("tv", 0.2)
    _, _, pi = robust_relative_value_iteration(mdp.P, mdp.r, u)
    g = robust_gain(mdp.P, mdp.r, u, pi)
    rng = np.random.default_rng(0)
    from icml25.core.mdp import policy_gain
    for _ in range(10):
        assert policy_gain(u.sample_member(mdp.P, rng), mdp.r, pi).min() >= g - 1e-8


def _policies(mdp, uset, rng, n_random=5):
    _, _, pi_star = robust_relative_value_iteration(mdp.P, mdp.r, uset)
    return [pi_star] + [rng.integers(mdp.n_actions, size=mdp.n_states) for _ in range(n_random)]


@pytest.mark.parametrize("env", ["recycling", "garnet10"])
@pytest.mark.parametrize("uset", [UncertaintySet("tv", 0.2), UncertaintySet("contamination", 0.2)],
                         ids=lambda u: u.label)
def test_reduction_inequality_and_three_eps_bound(env, uset):
    """|(1 - g) V^pi_g - g^pi| <= (1 - g) H for pi* and random policies, H the max robust bias
    span over them; the exactly optimal robust discounted policy at g = 1 - eps/H is
    3 eps-optimal for the robust average reward."""
    mdp = recycling_robot() if env == "recycling" else garnet_sparse(10, 3, 3, seed=6)
    rng = np.random.default_rng(7)
    pols = _policies(mdp, uset, rng)
    results = [robust_relative_value_iteration(mdp.P, mdp.r, uset, policy=pi) for pi in pols]
    H = max(span(h) for _, h, _ in results)
    g_star = results[0][0]
    for eps in (0.1, 0.05):
        disc = reduction_discount(eps, H)
        gamma = disc.gamma
        for pi, (g_pi, _, _) in zip(pols, results, strict=True):
            V_pi, _, _ = robust_value_iteration(mdp.P, mdp.r, uset, gamma, tol=1e-11, policy=pi)
            assert np.max(np.abs((1 - gamma) * V_pi - g_pi)) <= (1 - gamma) * H + 1e-8
        pi_gamma = reduction_policy(mdp.P, mdp.r, uset, gamma, tol=1e-10)
        assert g_star - robust_gain(mdp.P, mdp.r, uset, pi_gamma) <= 3 * eps


@pytest.mark.parametrize("uset", [UncertaintySet("tv", 0.4), UncertaintySet("contamination", 0.2),
                                  UncertaintySet("chi2", 0.5), UncertaintySet("kl", 0.1)],
                         ids=lambda u: u.label)
def test_reduction_with_exact_model_is_three_eps_optimal(uset):
    """N -> infinity (P_hat = P0): the reduction with H_hat = 2 Sp(h*) has gap <= 3 eps."""
    mdp = garnet_sparse(8, 2, 3, seed=3) if uset.kind in ("chi2", "kl") else garnet_sparse(
        12, 3, 3, seed=3)
    g_star, _, _ = robust_relative_value_iteration(mdp.P, mdp.r, uset)
    H = estimate_span_bound(mdp.P, mdp.r, uset, c_H=2.0)
    for eps in (0.1, 0.05):
        pi = reduction_policy(mdp.P, mdp.r, uset, reduction_discount(eps, H).gamma)
        assert g_star - robust_gain(mdp.P, mdp.r, uset, pi) <= 3 * eps


def test_robust_rvi_q_learning_with_exact_expectations_converges_to_g_star():
    mdp = garnet_sparse(10, 3, 3, seed=8)
    R = 0.2
    g_star, _, _ = robust_relative_value_iteration(mdp.P, mdp.r, UncertaintySet("contamination", R))
    _, trace = robust_rvi_q_learning(mdp.P, mdp.r, R, 20_000, exact=True)
    assert trace[-1] == pytest.approx(g_star, abs=1e-3)
    with pytest.raises(ValueError, match="random generator"):
        robust_rvi_q_learning(mdp.P, mdp.r, R, 5)


def test_sampled_robust_rvi_q_learning_gets_close():
    mdp = garnet_sparse(6, 2, 3, seed=9)
    R = 0.2
    g_star, _, _ = robust_relative_value_iteration(mdp.P, mdp.r, UncertaintySet("contamination", R))
    _, trace = robust_rvi_q_learning(mdp.P, mdp.r, R, 5000, np.random.default_rng(0))
    assert trace[-500:].mean() == pytest.approx(g_star, abs=0.05)


def test_reduction_discount_is_clamped_and_refuses_bad_eps():
    d = reduction_discount(0.05, 1.25)
    assert d.gamma_raw == pytest.approx(0.96) and d.gamma == pytest.approx(0.96)
    low = reduction_discount(2.0, 1.0)  # eps >= H: raw discount <= 0
    assert low.gamma_raw == pytest.approx(-1.0) and low.gamma == 0.5
    assert reduction_discount(1e-9, 1.0).gamma == 0.9999
    for bad in (0.0, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"eps \(target accuracy\) must be a finite number > 0"):
            reduction_discount(bad, 1.0)
    with pytest.raises(ValueError, match=r"H \(span bound\)"):
        reduction_discount(0.1, -1.0)


def test_empirical_kernel_is_a_frequency_table_converging_to_p():
    P, _ = _garnet(S=6, A=2, b=3, seed=10)
    rng = np.random.default_rng(0)
    P_hat = empirical_kernel(P, 7, rng)
    np.testing.assert_allclose(P_hat.sum(-1), 1.0)
    assert np.allclose(P_hat * 7, np.round(P_hat * 7))  # counts over 7 draws
    assert ((P_hat > 0) <= (P > 0)).all()  # never outside the true support (no smoothing)
    big = empirical_kernel(P, 20_000, np.random.default_rng(1))
    assert np.abs(big - P).max() < 0.02
    again = empirical_kernel(P, 7, np.random.default_rng(0))
    np.testing.assert_array_equal(P_hat, again)  # seeded
    with pytest.raises(ValueError, match="samples per"):
        empirical_kernel(P, 0, rng)


def test_plugin_policy_falls_back_when_phat_is_not_communicating():
    mdp = recycling_robot()
    pi, comm = nonrobust_plugin_policy(mdp.P, mdp.r)
    assert comm
    _, _, pi_rvi = relative_value_iteration(mdp.P, mdp.r)
    np.testing.assert_array_equal(pi, pi_rvi)
    P = np.zeros((3, 1, 3))
    P[0, 0, 0] = P[1, 0, 1] = P[2, 0, 2] = 1.0  # three absorbing states
    pi, comm = nonrobust_plugin_policy(P, np.ones((3, 1)))
    assert not comm and pi.shape == (3,)
    # a multichain model: the fallback's policy is gain-optimal from every start state
    P = np.zeros((3, 2, 3))
    P[0, 0, 0] = P[0, 1, 1] = P[1, :, 1] = P[2, :, 2] = 1.0
    r = np.array([[0.2, 0.0], [0.5, 0.1], [0.9, 0.9]])
    pi, comm = nonrobust_plugin_policy(P, r)
    assert not comm and list(pi) == [1, 0, 0]
    _, pi_vi = discounted_value_iteration(P, r, 0.99, tol=1e-10)
    np.testing.assert_array_equal(pi, pi_vi)


def test_non_communicating_model_is_refused():
    with pytest.raises(MDPError, match="not communicating"):
        make_env("garnet_sparse", n_states=8, n_actions=1, branching=1, seed=0)
    # robust RVI on a multichain model (two absorbing states, zero radius) does not settle
    P = np.zeros((2, 1, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    r = np.array([[1.0], [0.0]])
    with pytest.raises(NotConvergedError, match="unichain"):
        robust_relative_value_iteration(P, r, UncertaintySet("tv", 0.0), max_iter=500)
    g, _, _ = robust_relative_value_iteration(P, r, UncertaintySet("kl", 0.1), max_iter=500,
                                              strict=False)
    assert np.isnan(g)  # flagged, never a silent number


def test_recycling_robot_matches_its_definition():
    mdp = recycling_robot()
    assert mdp.P[0, 0, 0] == 0.7 and mdp.P[1, 0, 2] == 0.4 and (mdp.P[2, :, 0] == 1).all()
    assert mdp.r[2, 0] == 0.0 and mdp.r[0, 0] == 1.0 and mdp.r[1, 2] == pytest.approx(0.6)


@pytest.mark.parametrize("uset", [UncertaintySet("chi2", 0.5), UncertaintySet("kl", 0.1)],
                         ids=lambda u: u.label)
def test_tabular_study_runs_with_chi2_and_kl_sets(uset):
    """The paper config's chi2 / KL sets through the same planning and evaluation code; a sparse
    P_hat (N = 3 draws) may be multichain for them and is then flagged, not hidden."""
    from icml25.pipelines.robust_rl import tabular_study as ts

    mdp = garnet_sparse(6, 2, 3, seed=3)
    cfg = ts.StudyConfig(eps=[0.1], gamma_fixed=[0.9], H=None, c_H=2.0, drvi_tol=1e-6,
                         rrvi_tol=1e-8)
    truth = ts.ground_truth(mdp, uset, tol=1e-8)
    P_hats = ts.sample_empirical_models(mdp, [3, 200], [0])
    rows = ts.plan_policies(mdp, uset, P_hats, cfg, progress=False)
    assert {r["method"] for r in rows} == {"reduction_eps0.1", "fixed_gamma_0.9",
                                           "robust_rvi_phat", "nonrobust_plugin"}
    out = ts.evaluate_policies(mdp, uset, truth, rows, n_sampled_kernels=2, tol=1e-8,
                               progress=False)
    for row in out:
        assert -1e-7 <= row["gap"] <= truth["g_star"] + 1e-9
        assert isinstance(row["rrvi_converged"], bool)
