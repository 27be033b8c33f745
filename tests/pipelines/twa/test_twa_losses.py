"""TWA's loss and the baselines' losses against hand computations and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml25.pipelines.twa.losses import build_batch, dpo_loss, sequence_ul_loss, sft_loss, twa_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def _logits_for(probs: list[float], targets: list[int]) -> torch.Tensor:
    """Logits on a 3-word vocabulary whose softmax gives ``probs[t]`` to ``targets[t]``."""
    rows = []
    for p, y in zip(probs, targets, strict=True):
        row = [math.log((1 - p) / 2)] * 3
        row[y] = math.log(p)
        rows.append(row)
    return torch.tensor([rows], dtype=torch.float64, requires_grad=True)


def _logp(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1)


def test_known_answer_two_prefix_tokens_and_one_span():
    # prefix p = 0.8, 0.9; span over positions 2-3 with p = 0.5, 0.4, weight 5
    targets = torch.tensor([[0, 1, 2, 0]])
    logits = _logits_for([0.8, 0.9, 0.5, 0.4], targets[0].tolist())
    batch = build_batch([4], [[(2, 4, 5.0)]], 4)
    loss = twa_loss(_logp(logits, targets), batch, reduction="sum")
    expected = -math.log(0.8) - math.log(0.9) + 5 * -math.log(1 - 0.2)
    assert expected == pytest.approx(1.44422, abs=1e-5)
    assert loss.item() == pytest.approx(expected, abs=1e-5)


def test_no_annotations_is_token_summed_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 11, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 11, (5, 7), generator=g)
    lengths = [7, 5, 3, 7, 1]
    batch = build_batch(lengths, [[] for _ in lengths], 7)
    logp = _logp(logits, targets)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1),
                                           reduction="none").reshape(5, 7)
    expected = sum(float(ce[i, :n].sum()) for i, n in enumerate(lengths))
    assert float(twa_loss(logp, batch, reduction="sum")) == pytest.approx(expected, rel=1e-12)
    assert float(sft_loss(logp, batch.valid, reduction="sum")) == pytest.approx(expected,
                                                                                rel=1e-12)
    # the per-token mean divides by the number of target tokens
    assert float(twa_loss(logp, batch)) == pytest.approx(expected / sum(lengths), rel=1e-12)


def test_matches_brute_force_on_random_annotations():
    """Independent per-example computation in probability space (float64, moderate values)."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(3, 9))
        logp = torch.tensor(np.log(rng.uniform(0.05, 0.95, size=(1, n))))
        s = int(rng.integers(0, n - 1))
        e = int(rng.integers(s + 1, n + 1))
        w = float(rng.choice([5.0, 1.0, 0.1]))
        batch = build_batch([n], [[(s, e, w)]], n)
        p = np.exp(logp.numpy()[0])
        for off, gran in [(False, "span"), (True, "span"), (False, "token"), (True, "token")]:
            ce_pos = [t for t in range(n) if not s <= t < e and (off or t < s)]
            ce = -sum(math.log(p[t]) for t in ce_pos)
            ul = (-math.log(1 - np.prod(p[s:e])) if gran == "span"
                  else -sum(math.log(1 - p[t]) for t in range(s, e)))
            got = twa_loss(logp, batch, ul_scale=0.2, granularity=gran, use_off_trajectory=off,
                           reduction="sum")
            assert float(got) == pytest.approx(ce + 0.2 * w * ul, rel=1e-9)


def test_tokens_after_first_error_get_no_gradient_unless_off_trajectory():
    g = torch.Generator().manual_seed(1)
    targets = torch.randint(0, 5, (1, 6), generator=g)
    for off, after_is_zero in [(False, True), (True, False)]:
        logits = torch.randn(1, 6, 5, generator=g, requires_grad=True)
        batch = build_batch([6], [[(2, 3, 5.0)]], 6)
        twa_loss(_logp(logits, targets), batch, use_off_trajectory=off).backward()
        grad = logits.grad[0].abs().sum(-1)
        assert float(grad[:2].min()) > 0 and float(grad[2]) > 0  # prefix CE, span UL
        assert (float(grad[3:].max()) == 0.0) is after_is_zero


def test_span_level_lets_the_model_keep_the_correct_token():
    # span (a, b): p(a) = 0.99 (correct token), p(b) = 1e-4 (the real error)
    targets = torch.tensor([[0, 0]])
    grads = {}
    for gran in ("span", "token"):
        logits = _logits_for([0.99, 1e-4], [0, 0])
        batch = build_batch([2], [[(0, 2, 1.0)]], 2)
        twa_loss(_logp(logits, targets), batch, granularity=gran, reduction="sum").backward()
        grads[gran] = float(logits.grad[0, 0, 0])
    assert abs(grads["span"]) < 1e-3
    assert grads["token"] == pytest.approx(0.99, abs=0.01) and grads["token"] > 0.5


def test_certain_span_gives_finite_loss_and_gradient():
    logits = torch.tensor([[[50.0, -50.0, -50.0], [50.0, -50.0, -50.0]]], requires_grad=True)
    targets = torch.tensor([[0, 0]])
    batch = build_batch([2], [[(0, 2, 5.0)]], 2)
    loss = twa_loss(_logp(logits, targets), batch)
    loss.backward()
    assert math.isfinite(loss.item()) and torch.isfinite(logits.grad).all()
    seq = sequence_ul_loss(_logp(logits, targets), batch.valid, torch.tensor([5.0]))
    assert math.isfinite(seq.item())


def test_overlapping_spans_merge_with_max_weight_and_empty_spans_are_ignored():
    batch = build_batch([6], [[(1, 3, 1.0), (2, 4, 5.0), (5, 5, 5.0)]], 6)
    assert batch.span_index[0].tolist() == [-1, 0, 0, 0, -1, -1]
    assert batch.span_weight.tolist() == [5.0]
    assert batch.first_err.tolist() == [1]
    with pytest.raises(ValueError, match=r"output 0 of the batch: span \[2, 5\) outside"):
        build_batch([3], [[(2, 5, 1.0)]], 6)


def test_sequence_level_ablation():
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.8], [0.9, 0.5, 0.4]], dtype=torch.float64))
    valid = torch.ones(2, 3, dtype=torch.bool)
    got = sequence_ul_loss(logp, valid, torch.tensor([0.0, 2.0], dtype=torch.float64),
                           reduction="sum")
    expected = -math.log(0.5 * 0.5 * 0.8) + 2 * -math.log(1 - 0.9 * 0.5 * 0.4)
    assert float(got) == pytest.approx(expected, rel=1e-12)


def test_dpo_at_initialisation_is_ln2_and_sft_variant_adds_ce():
    w = torch.tensor([-3.0, -7.5, -1.0])
    lo = torch.tensor([-2.0, -9.0, -4.0])
    assert float(dpo_loss(w, lo, w.clone(), lo.clone(), beta=0.1)) == pytest.approx(math.log(2))
    with_sft = dpo_loss(w, lo, w.clone(), lo.clone(), beta=0.1, sft_weight=1.0,
                        len_w=torch.tensor([3.0, 5.0, 2.0]))
    assert float(with_sft) == pytest.approx(math.log(2) + np.mean([1.0, 1.5, 0.5]))
    # the policy preferring y_w more than the reference lowers the loss
    assert float(dpo_loss(w + 1, lo, w, lo, beta=0.1)) < math.log(2)
