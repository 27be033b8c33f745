"""Trajectory selection, KL term, SAC target and behaviour cloning."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.ex2psro.responses import (
    DiscreteSAC,
    SACConfig,
    behaviour_clone,
    kl_exploration_policy,
    masked_log_softmax,
)
from icml25.pipelines.ex2psro.trajectory_buffer import TopKTrajectories

pytestmark = pytest.mark.usefixtures("one_thread")

PAIRS = [(1, 5), (3, 3), (2, 8), (4, 4), (0, 9), (3, 3), (6, 1), (5, 5), (2, 2), (7, 3)]


@pytest.mark.parametrize(("criterion", "score"), [
    ("ex2psro", lambda g: min(g)), ("maxwelfare", lambda g: sum(g)),
    ("minwelfare", lambda g: -sum(g))])
def test_ex2psro_top_k_selection(criterion, score):
    buf = TopKTrajectories(4, criterion, chunk=3)
    for i, g in enumerate(PAIRS):
        buf.offer(g, i)
    expected = sorted(range(10), key=lambda i: (-score(PAIRS[i]), i))[:4]
    assert buf.items() == expected


def test_ex2psro_top_k_ties_by_insertion_order():
    buf = TopKTrajectories(4, "ex2psro")
    for i, g in enumerate(PAIRS):
        buf.offer(g, i)
    # min values: 5 (7), 4 (3), 3 (1), 3 (5), 3 (9): the earlier 3s win
    assert buf.items() == [7, 3, 1, 5]


def test_ex2psro_kl_zero_when_equal_and_matches_torch():
    gen = torch.Generator().manual_seed(0)
    legal = torch.rand(8, 6, generator=gen) > 0.3
    legal[:, 0] = True
    a = masked_log_softmax(torch.randn(8, 6, generator=gen), legal)
    b = masked_log_softmax(torch.randn(8, 6, generator=gen), legal)
    assert torch.allclose(kl_exploration_policy(a, a, legal), torch.zeros(8), atol=1e-6)
    ours = kl_exploration_policy(a, b, legal)
    assert (ours > 0).all()
    for i in range(8):
        m = legal[i]
        ref = torch.distributions.kl_divergence(
            torch.distributions.Categorical(logits=a[i][m]),
            torch.distributions.Categorical(logits=b[i][m]))
        assert float(ours[i]) == pytest.approx(float(ref), rel=1e-5, abs=1e-6)


def test_ex2psro_sac_target_by_hand():
    cfg = SACConfig(hidden=(4,), alpha=0.1, gamma=0.9)
    sac = DiscreteSAC(3, 2, cfg, seed=0)
    next_obs = torch.tensor([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    legal = torch.tensor([[True, True], [True, False]])
    reward = torch.tensor([1.0, 2.0])
    done = torch.tensor([0.0, 0.0])
    y = sac.critic_target(reward, next_obs, legal, done)
    with torch.no_grad():
        logits = sac.policy(next_obs)
        q = 0.5 * (sac.q1_target(next_obs) + sac.q2_target(next_obs))
    p0 = torch.softmax(logits[0], -1)
    hand0 = 1.0 + 0.9 * float((p0 * (q[0] - 0.1 * torch.log(p0))).sum())
    hand1 = 2.0 + 0.9 * float(q[1, 0])  # only action 0 is legal: probability 1, log 0
    assert float(y[0]) == pytest.approx(hand0, rel=1e-5)
    assert float(y[1]) == pytest.approx(hand1, rel=1e-5)
    assert float(masked_log_softmax(logits, legal)[1, 1].exp()) < 1e-8
    assert float(sac.critic_target(reward, next_obs, legal, torch.ones(2))[0]) == 1.0


def test_ex2psro_sac_policy_loss_has_kl_term():
    cfg = SACConfig(hidden=(8,))
    explore = torch.nn.Sequential(torch.nn.Linear(3, 2))
    sac = DiscreteSAC(3, 2, cfg, seed=0, exploration=explore, kl_weight=0.5)
    obs, legal = torch.randn(5, 3), torch.ones(5, 2, dtype=torch.bool)
    loss, kl = sac.policy_loss(obs, legal)
    sac.kl_weight = 0.0
    base, _ = sac.policy_loss(obs, legal)
    assert float(loss) == pytest.approx(float(base) + 0.5 * float(kl), rel=1e-5)
    assert float(kl) > 0


def test_ex2psro_behaviour_cloning_learns_argmax_rule():
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(2000, 8)).astype(np.float32)
    actions = obs[:, :4].argmax(1)
    net, _ = behaviour_clone(obs, actions, (50, 50), 4, lr=3e-3, batch=128, epochs=100,
                             min_loss=0.0, seed=0, max_steps=200)
    test = rng.normal(size=(1000, 8)).astype(np.float32)
    with torch.no_grad():
        pred = net(torch.from_numpy(test)).argmax(1).numpy()
    assert np.mean(pred == test[:, :4].argmax(1)) > 0.95


def test_ex2psro_behaviour_cloning_rejects_empty_data():
    with pytest.raises(ValueError, match="behaviour cloning"):
        behaviour_clone(np.zeros((0, 3), np.float32), np.zeros(0, np.int64), (4,), 2, 1e-3, 8, 1,
                        0.8, 0)
