"""The linear learner's step schedules and its convergence to the tabular robust Q*, and the
reduction's discount clamp (warned, recorded)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from icml25.core.mdp import TabularMDP
from icml25.pipelines.robust_rl.linear_q import (
    RobustLinearQ,
    TraceConfig,
    robust_q_star,
    train_linear,
)
from icml25.pipelines.robust_rl.reduction import reduction_discount
from icml25.pipelines.robust_rl.robust_planning import robust_value_iteration
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet


def _mdp() -> TabularMDP:
    P = np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]],
                  [[0.3, 0.4, 0.3], [0.0, 0.5, 0.5]],
                  [[0.6, 0.0, 0.4], [0.2, 0.7, 0.1]]])
    r = np.array([[0.1, 0.0], [0.5, 0.2], [1.0, 0.3]])
    return TabularMDP(P, r, name="three_state")


def _one_hot(S: int, A: int) -> np.ndarray:
    return np.eye(S * A).reshape(S, A, S * A)


def test_visit_schedule_steps_on_each_pairs_own_count_and_global_on_the_clock():
    learner = RobustLinearQ(_one_hot(3, 2), 0.9, 0.2, alpha0=0.5, k0=2.0, reservoir_size=0)
    for _ in range(4):
        learner.update(0, 0, 0.1, 1)
    assert learner.step_size(0, 0) == pytest.approx(0.5 / (1 + 4 / 2.0))
    assert learner.step_size(2, 1) == 0.5  # never updated: the full first step
    shared = RobustLinearQ(_one_hot(3, 2), 0.9, 0.2, alpha0=0.5, k0=2.0, reservoir_size=0,
                           schedule="global")
    for _ in range(4):
        shared.update(0, 0, 0.1, 1)
    assert shared.step_size(2, 1) == pytest.approx(0.5 / 3.0)  # starved by others' updates
    with pytest.raises(ValueError, match="schedule 'harmonic' is unknown"):
        RobustLinearQ(_one_hot(3, 2), 0.9, 0.2, schedule="harmonic")


def test_robust_q_star_is_the_fixed_point_and_matches_drvi():
    mdp, gamma, R = _mdp(), 0.9, 0.2
    Q = robust_q_star(mdp, gamma, R)
    V = Q.max(axis=1)
    residual = mdp.r + gamma * ((1 - R) * (mdp.P @ V) + R * V.min()) - Q
    assert np.abs(residual).max() < 1e-11
    V_drvi, _, _ = robust_value_iteration(mdp.P, mdp.r, UncertaintySet("contamination", R),
                                          gamma, tol=1e-12)
    np.testing.assert_allclose(V, V_drvi, atol=1e-9)


def test_one_hot_learner_with_visit_steps_converges_to_the_tabular_answer():
    mdp, gamma, R = _mdp(), 0.8, 0.2
    Q = robust_q_star(mdp, gamma, R)
    uset = UncertaintySet("contamination", R)
    cfg = TraceConfig(steps=30_000, explore=1.0, eval_every=3_000)
    errors = {}
    for schedule, alpha0, k0 in (("visit", 0.5, 50.0), ("global", 0.05, 100.0)):
        _, trace = train_linear(mdp, _one_hot(3, 2), gamma, R, cfg, np.random.default_rng(0),
                                uset, alpha0=alpha0, k0=k0, reservoir_size=0, progress=False,
                                schedule=schedule, q_reference=Q)
        errors[schedule] = trace[-1]["q_error"]
        assert trace[-1]["min_visits"] > 1000
        assert trace[-1]["q_rel_error"] == pytest.approx(trace[-1]["q_error"] / np.abs(Q).max())
    assert errors["visit"] < 0.02 * np.abs(Q).max()
    # the shared step decays on the clock: its steps sum to ~ alpha0 k0 log(k / k0) / (S A) per
    # pair, too little to reach Q* (which is why the parameter change is no convergence test)
    assert errors["global"] > 5 * errors["visit"]


def test_reference_q_of_the_wrong_shape_is_refused():
    mdp = _mdp()
    with pytest.raises(ValueError, match=r"q_reference must be a finite \(S, A\)"):
        train_linear(mdp, _one_hot(3, 2), 0.9, 0.2, TraceConfig(steps=10, eval_every=5),
                     np.random.default_rng(0), UncertaintySet("contamination", 0.2),
                     reservoir_size=0, progress=False, q_reference=np.zeros((2, 2)))


def test_a_clamped_discount_is_warned_and_flagged(caplog):
    with caplog.at_level(logging.WARNING, logger="icml25.pipelines.robust_rl.reduction"):
        disc = reduction_discount(0.5, 0.3)
    assert disc.gamma_raw == pytest.approx(1 - 0.5 / 0.3) and disc.gamma == 0.5
    assert disc.clamped
    assert "clamped to 0.5" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="icml25.pipelines.robust_rl.reduction"):
        fine = reduction_discount(0.05, 2.0)
    assert not fine.clamped and fine.gamma == pytest.approx(0.975)
    assert caplog.text == ""
