"""Robust linear Q-learning (one-hot features = tabular), the continuing CartPole wrapper and the
robust DQN target, plus a tiny DQN training run on the same code path as conf/paper."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.robust_rl.environments import (
    action_block_features,
    garnet_sparse,
    state_features,
)
from icml25.pipelines.robust_rl.linear_q import (
    RobustLinearQ,
    TraceConfig,
    tabular_robust_q_update,
    train_linear,
)
from icml25.pipelines.robust_rl.robust_dqn import (
    ContinuingCartPole,
    DQNConfig,
    evaluate_grid,
    perturbation_grid,
    robust_target,
    train_dqn,
)
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet


@pytest.mark.parametrize("reservoir", [0, 5])
def test_one_hot_linear_q_equals_tabular_robust_q_update_by_update(reservoir):
    mdp = garnet_sparse(6, 2, 3, seed=0)
    S, A = 6, 2
    one_hot = np.eye(S * A).reshape(S, A, S * A)
    rng = np.random.default_rng(1)
    learner = RobustLinearQ(one_hot, gamma=0.9, radius=0.3, alpha0=0.5, k0=50.0,
                            reservoir_size=reservoir, rng=np.random.default_rng(2))
    Q = np.zeros((S, A))
    s = 0
    for _ in range(400):
        a = int(rng.integers(A))
        s_next = int(rng.choice(S, p=mdp.P[s, a]))
        alpha = learner.step_size(s, a)
        learner.update(s, a, float(mdp.r[s, a]), s_next)
        states = np.arange(S) if reservoir == 0 else np.asarray(learner.reservoir)
        Q = tabular_robust_q_update(Q, s, a, float(mdp.r[s, a]), s_next, 0.9, 0.3, alpha,
                                    states)
        np.testing.assert_allclose(learner.theta.reshape(S, A), Q, atol=1e-12)
        s = s_next
    assert 0 < len(learner.reservoir) <= max(reservoir, 0) or reservoir == 0


def test_reservoir_is_a_uniform_sample_of_the_stream():
    learner = RobustLinearQ(np.ones((50, 1, 1)), gamma=0.5, radius=0.1, reservoir_size=10,
                            rng=np.random.default_rng(0))
    hits = np.zeros(50)
    for _ in range(300):
        learner.reservoir.clear()
        learner._seen = 0
        learner._counts[:] = 0
        for s in range(50):
            learner.observe_state(s)
        assert len(learner.reservoir) == 10
        np.testing.assert_array_equal(np.bincount(learner.reservoir, minlength=50),
                                      learner._counts)
        hits[learner.reservoir] += 1
    # each state is kept with probability 10/50: 60 of 300 rounds on average
    assert hits.min() > 30 and hits.max() < 95


def test_linear_learner_converges_on_a_small_garnet():
    mdp = garnet_sparse(12, 2, 3, seed=1)
    features = action_block_features(state_features(12, 4, np.random.default_rng(0)), 2)
    learner, trace = train_linear(mdp, features, 0.9, 0.2, TraceConfig(steps=4000, eval_every=400),
                                  np.random.default_rng(0), UncertaintySet("contamination", 0.2),
                                  k0=500, reservoir_size=50, progress=False)
    assert len(trace) == 10
    changes = [t["theta_change"] for t in trace]
    assert changes[-1] < 0.2 * changes[0]
    assert np.isfinite(learner.theta).all()
    assert all(0 <= t["robust_gain"] <= t["nominal_gain"] + 1e-9 for t in trace)


def test_learner_refuses_bad_settings():
    with pytest.raises(ValueError, match="gamma"):
        RobustLinearQ(np.ones((2, 1, 1)), gamma=1.0, radius=0.1)
    with pytest.raises(ValueError, match="radius"):
        RobustLinearQ(np.ones((2, 1, 1)), gamma=0.9, radius=1.5)


def test_continuing_cartpole_never_terminates_and_resets_on_failure():
    env = ContinuingCartPole(seed=0)
    failures, rewards = 0, []
    for _ in range(300):
        obs, reward, terminated, truncated, info = env.step(0)  # always push left: falls fast
        assert terminated is False and truncated is False
        rewards.append(reward)
        if info["failure"]:
            failures += 1
            assert reward == 0.0
            assert np.all(np.abs(obs) <= 0.05)  # a fresh reset state
        else:
            assert reward == 1.0
    assert failures > 3 and failures == env.failures == rewards.count(0.0)


def test_cartpole_perturbations_change_the_physics():
    env = ContinuingCartPole(seed=0, length_scale=2.0, masspole_scale=5.0, force_scale=0.5)
    e = env.env
    assert e.length == pytest.approx(1.0) and e.masspole == pytest.approx(0.5)
    assert e.force_mag == pytest.approx(5.0)
    assert e.total_mass == pytest.approx(1.5) and e.polemass_length == pytest.approx(0.5)
    with pytest.raises(ValueError, match="action_noise"):
        ContinuingCartPole(seed=0, action_noise=1.5)
    with pytest.raises(ValueError, match="length_scale"):
        ContinuingCartPole(seed=0, length_scale=0.0)


def test_robust_target_uses_the_batch_minimum():
    q_next = torch.tensor([[1.0, 3.0], [0.5, 0.2], [2.0, 2.5]])
    r = torch.tensor([1.0, 0.0, 1.0])
    y = robust_target(q_next, r, gamma=0.9, radius=0.2)
    v = torch.tensor([3.0, 0.5, 2.5])
    torch.testing.assert_close(y, r + 0.9 * (0.8 * v + 0.2 * 0.5))
    torch.testing.assert_close(robust_target(q_next, r, 0.9, 0.0), r + 0.9 * v)


@pytest.mark.usefixtures("one_thread")
def test_tiny_robust_dqn_trains_and_is_evaluated_on_the_grid():
    cfg = DQNConfig(steps=200, gamma=0.99, radius=0.1, hidden=(16, 16), buffer=200, batch=16,
                    target_update=50, learning_starts=50)
    net, history = train_dqn(cfg, seed=0, device=torch.device("cpu"), progress=False)
    assert history[-1]["step"] == 200 and np.isfinite(history[-1]["loss"])
    net2, _ = train_dqn(cfg, seed=0, device=torch.device("cpu"), progress=False)
    for a, b in zip(net.state_dict().values(), net2.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)  # deterministic on CPU for a fixed seed
    grid = perturbation_grid([1.0, 2.0], [1.0], [1.0], [0.0, 0.2])
    cells = evaluate_grid(net, grid, steps=40, seed=0, device=torch.device("cpu"))
    assert len(cells) == 4
    assert all(0.0 <= c["avg_reward"] <= 1.0 for c in cells)
