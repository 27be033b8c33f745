"""Exact planning on finite MDPs: RVI against the LP and closed forms, validation messages."""

import numpy as np
import pytest

from icml25.core.mdp import (
    MDPError,
    TabularMDP,
    average_reward_lp,
    discounted_policy_iteration,
    discounted_value_iteration,
    garnet_kernel,
    is_communicating,
    policy_gain,
    relative_value_iteration,
    riverswim,
    sample_next_states,
)


def test_two_state_closed_form():
    # state 0: action 1 moves to state 1 surely; state 1: stay (r=1) or leave (r=0)
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = 1.0
    P[1, 0, 1] = P[1, 1, 0] = 1.0
    r = np.array([[0.2, 0.0], [1.0, 0.0]])
    gain, _, policy = relative_value_iteration(P, r)
    assert gain == pytest.approx(1.0, abs=1e-9)
    assert policy.tolist() == [1, 0]
    assert average_reward_lp(P, r) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("n", [6, 12])
def test_riverswim_gain_matches_lp_and_the_known_value(n):
    m = riverswim(n)
    gain, _, policy = relative_value_iteration(m.P, m.r)
    assert gain == pytest.approx(average_reward_lp(m.P, m.r), abs=1e-8)
    assert gain == pytest.approx(0.4286, abs=1e-3)
    assert np.all(policy == 1)
    assert np.allclose(policy_gain(m.P, m.r, policy), gain, atol=1e-8)


def test_garnet_rvi_matches_lp_and_dominates_every_policy_gain():
    rng = np.random.default_rng(0)
    P = garnet_kernel(8, 3, 3, rng, uniform_mix=0.05)
    r = rng.random((8, 3))
    gain, _, _ = relative_value_iteration(P, r)
    assert gain == pytest.approx(average_reward_lp(P, r), abs=1e-8)
    for _ in range(20):
        other = rng.integers(0, 3, size=8)
        assert policy_gain(P, r, other).max() <= gain + 1e-9


def test_discounted_vi_satisfies_bellman_equation():
    m = riverswim(6)
    V, _ = discounted_value_iteration(m.P, m.r, gamma=0.9, tol=1e-12)
    Q = m.r + 0.9 * m.P @ V
    assert np.allclose(Q.max(1), V, atol=1e-9)
    with pytest.raises(MDPError, match="discount"):
        discounted_value_iteration(m.P, m.r, gamma=1.0)


def test_validation_names_the_bad_row():
    P = np.full((2, 1, 2), 0.5)
    P[1, 0] = [0.5, 0.4]
    with pytest.raises(MDPError, match=r"P\[1, 0\] sums to 0.9"):
        TabularMDP(P, np.zeros((2, 1)))
    with pytest.raises(MDPError, match="NaN"):
        TabularMDP(np.full((2, 1, 2), np.nan), np.zeros((2, 1)))
    with pytest.raises(MDPError, match=r"\.r has shape"):
        TabularMDP(np.full((2, 1, 2), 0.5), np.zeros(2))


def test_communicating_check_and_sampling():
    assert is_communicating(riverswim(6).P)
    assert not is_communicating(np.eye(3)[:, None, :])
    m = riverswim(6)
    rng = np.random.default_rng(1)
    s = np.full(200_000, 0)
    nxt = sample_next_states(m.P, s, np.ones_like(s), rng)
    assert np.mean(nxt == 1) == pytest.approx(0.6, abs=0.005)


def test_policy_iteration_agrees_with_value_iteration():
    rng = np.random.default_rng(4)
    P = garnet_kernel(12, 3, 4, rng)
    r = rng.random((12, 3))
    pi = discounted_policy_iteration(P, r, gamma=0.95)
    V, _ = discounted_value_iteration(P, r, gamma=0.95, tol=1e-12)
    Q = r + 0.95 * P @ V
    assert np.allclose(Q[np.arange(12), pi], V, atol=1e-8)  # greedy w.r.t. the optimal values
