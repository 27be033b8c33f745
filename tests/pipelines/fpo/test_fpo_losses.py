"""FPO and baseline losses against known answers and closed forms."""

import math

import pytest
import torch

from icml25.pipelines.fpo.losses import (
    PairStats,
    feature_discrepancy,
    margin_u,
    masked_mean,
    pooled_features,
    preference_loss,
    sequential_kl,
    token_logps,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _fpo_stats(d_w, d_l):
    t = torch.tensor
    return PairStats(sum_w=t([0.0]), sum_l=t([0.0]), avg_w=t([-1.0]), avg_l=t([-2.0]),
                     d_w=d_w, d_l=d_l, gamma_ref=0.1 * (t([-1.5]) - t([-1.5])))


def test_fpo_loss_known_answer_and_gradients():
    d_w = torch.tensor([0.2], requires_grad=True)
    d_l = torch.tensor([0.6], requires_grad=True)
    u = margin_u("fpo", _fpo_stats(d_w, d_l), beta=0.1, alpha=0.5)
    loss = preference_loss(u)
    assert float(u.detach()) == pytest.approx(0.08, abs=1e-7)
    assert float(loss.detach()) == pytest.approx(-math.log(1 / (1 + math.exp(-0.08))), abs=1e-6)
    assert float(loss.detach()) == pytest.approx(0.65395, abs=1e-5)
    loss.backward()
    sigma_neg = 1 / (1 + math.exp(0.08))
    assert float(d_l.grad) == pytest.approx(0.5 * 0.1 * sigma_neg, abs=1e-7)   # 0.024001
    assert float(d_l.grad) == pytest.approx(0.024001, abs=1e-6)
    assert d_w.grad is None or float(d_w.grad) == 0.0   # stop-gradient on the chosen side


def test_without_stopgrad_the_chosen_side_gets_the_opposite_gradient():
    d_w = torch.tensor([0.2], requires_grad=True)
    d_l = torch.tensor([0.6], requires_grad=True)
    preference_loss(margin_u("fpo", _fpo_stats(d_w, d_l), 0.1, 0.5, stopgrad=False)).backward()
    assert float(d_w.grad) == pytest.approx(-float(d_l.grad))


def test_losses_at_initialisation():
    z = torch.zeros(3)
    same = PairStats(sum_w=z - 5, sum_l=z - 7, avg_w=z - 1, avg_l=z - 1, ref_sum_w=z - 5,
                     ref_sum_l=z - 7, kl_w=z, kl_l=z, d_w=z, d_l=z, gamma_ref=z)
    for method in ("dpo", "tdpo1", "tdpo2", "fpo"):
        assert float(preference_loss(margin_u(method, same, beta=0.1))) == pytest.approx(
            math.log(2), abs=1e-6), method
    simpo = float(preference_loss(margin_u("simpo", same, beta=2.0, gamma=0.5)))
    assert simpo == pytest.approx(1.31326, abs=1e-5)


def test_dpo_and_tdpo_margins_match_their_formulas():
    s = PairStats(sum_w=torch.tensor([-3.0]), sum_l=torch.tensor([-5.0]),
                  avg_w=torch.tensor([-1.0]), avg_l=torch.tensor([-1.0]),
                  ref_sum_w=torch.tensor([-4.0]), ref_sum_l=torch.tensor([-4.5]),
                  kl_w=torch.tensor([0.3]), kl_l=torch.tensor([0.7]))
    ratio = (-3.0 + 4.0) - (-5.0 + 4.5)           # 1.5
    assert float(margin_u("dpo", s, 0.1)) == pytest.approx(0.1 * ratio)
    assert float(margin_u("tdpo1", s, 0.1)) == pytest.approx(0.1 * ratio - 0.1 * (0.7 - 0.3))
    assert float(margin_u("tdpo2", s, 0.1, alpha=0.5)) == pytest.approx(
        0.1 * ratio - 0.5 * (0.1 * 0.7 - 0.1 * 0.3))
    with pytest.raises(ValueError, match="needs reference log-probs"):
        margin_u("dpo", PairStats(s.sum_w, s.sum_l, s.avg_w, s.avg_l), 0.1)
    with pytest.raises(ValueError, match="unknown preference method"):
        margin_u("ipo", s, 0.1)


def test_feature_discrepancy_properties():
    g = torch.Generator().manual_seed(0)
    ref = torch.rand(4, 40, generator=g)
    pol = torch.rand(4, 40, generator=g)
    assert torch.allclose(feature_discrepancy(ref, ref, 5), torch.zeros(4))
    perm = torch.randperm(40, generator=g)
    assert torch.allclose(feature_discrepancy(pol[:, perm], ref[:, perm], 5),
                          feature_discrepancy(pol, ref, 5))
    # the union holds between k and 2k features: bounds of the sum
    sq = (pol - ref) ** 2
    d = feature_discrepancy(pol, ref, 5) * 5
    assert (d >= torch.sort(sq, dim=1).values[:, :5].sum(1) - 1e-6).all()
    assert (d <= torch.sort(sq, dim=1, descending=True).values[:, :10].sum(1) + 1e-6).all()
    # a hand case: k = 1, policy's top is feature 0, reference's top is feature 2
    p = torch.tensor([[3.0, 1.0, 0.0]])
    r = torch.tensor([[1.0, 1.0, 2.0]])
    assert float(feature_discrepancy(p, r, 1)) == pytest.approx((2.0 ** 2 + 2.0 ** 2) / 1)
    assert float(feature_discrepancy(p, r, 1, union=False)) == pytest.approx(4.0)
    with pytest.raises(ValueError, match=r"fpo\.loss\.fpo\.k"):
        feature_discrepancy(p, r, 4)


def test_masked_pooling_ignores_prompt_and_padding():
    codes = torch.arange(2 * 5 * 3, dtype=torch.float32).view(2, 5, 3)
    mask = torch.tensor([[0, 1, 1, 0, 0], [0, 0, 1, 1, 1]], dtype=torch.float32)
    pooled = pooled_features(codes, mask)
    assert torch.allclose(pooled[0], codes[0, 1:3].mean(0))
    assert torch.allclose(pooled[1], codes[1, 2:5].mean(0))
    padded = torch.cat([codes, torch.full((2, 3, 3), 99.0)], dim=1)
    assert torch.allclose(pooled_features(padded, torch.cat([mask, torch.zeros(2, 3)], 1)),
                          pooled)
    x = torch.tensor([[1.0, 2.0, 3.0]])
    assert float(masked_mean(x, torch.tensor([[0.0, 1.0, 1.0]]))) == pytest.approx(2.5)


def test_sequential_kl_hand_computed_and_non_negative():
    ref_p = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]])
    pol_p = torch.tensor([[[0.25, 0.5, 0.25], [0.1, 0.1, 0.8]]])
    kl = sequential_kl(ref_p.log(), pol_p.log(), torch.ones(1, 2))
    by_hand = (0.5 * math.log(2) + 0.25 * math.log(0.5)
               + 0.8 * math.log(8) + 0.1 * math.log(0.125))
    assert float(kl) == pytest.approx(by_hand, abs=1e-6)
    assert float(sequential_kl(ref_p.log(), ref_p.log(), torch.ones(1, 2))) == pytest.approx(
        0.0, abs=1e-7)
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(3, 4, 7, generator=g), torch.randn(3, 4, 7, generator=g)
    assert (sequential_kl(a, b, torch.ones(3, 4)) >= 0).all()
    # only response positions count
    assert float(sequential_kl(ref_p.log(), pol_p.log(), torch.tensor([[0.0, 1.0]]))) == (
        pytest.approx(0.8 * math.log(8) + 0.1 * math.log(0.125), abs=1e-6))


def test_token_logps_gathers_the_targets():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])
    assert float(token_logps(logits, torch.tensor([[1]]))) == pytest.approx(math.log(0.75))
