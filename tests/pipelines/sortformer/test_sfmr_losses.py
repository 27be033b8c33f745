"""Sort Loss, PIL and hybrid: known answers computed by hand, ties, invariances."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from icml25.pipelines.sortformer.sort_loss import (
    arrival_times,
    ats_targets,
    hybrid_loss,
    masked_bce,
    pil_loss,
    pil_targets,
    sort_loss,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _reference() -> torch.Tensor:
    # T=6, K=3: A active frames 3-5, B frames 0-2, C silent
    y = torch.zeros(1, 6, 3)
    y[0, 3:, 0] = 1  # A
    y[0, :3, 1] = 1  # B
    return y


def _b_first_predictions() -> torch.Tensor:
    p = torch.full((1, 6, 3), 0.1)
    p[0, :3, 0] = 0.9  # channel 0 = B-like
    p[0, 3:, 1] = 0.9  # channel 1 = A-like
    return p


def test_known_answer_arrival_ordered_predictions():
    y, p = _reference(), _b_first_predictions()
    expected = -math.log(0.9)
    assert sort_loss(p, y).item() == pytest.approx(expected, abs=1e-6)
    assert pil_loss(p, y).item() == pytest.approx(expected, abs=1e-6)
    assert hybrid_loss(p, y).item() == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx(0.105361, abs=1e-6)


def test_known_answer_swapped_channels_matches_torch_bce():
    y, p = _reference(), _b_first_predictions()[:, :, [1, 0, 2]]
    assert sort_loss(p, y).item() == pytest.approx(1.570177, abs=1e-5)
    assert pil_loss(p, y).item() == pytest.approx(0.105361, abs=1e-5)
    assert hybrid_loss(p, y).item() == pytest.approx(0.837769, abs=1e-5)
    # independent computation: torch's BCELoss against the hand-sorted target (B, A, C)
    target = y[:, :, [1, 0, 2]]
    assert sort_loss(p, y).item() == pytest.approx(
        torch.nn.BCELoss()(p, target).item(), abs=1e-6)


def test_ties_are_broken_by_the_match_score():
    y = torch.zeros(1, 4, 3)
    y[0, 0:3, 0] = 1  # spk0 frames 0-2
    y[0, 0:2, 1] = 1  # spk1 frames 0-1 (same onset)
    y[0, 3, 2] = 1  # spk2 frame 3
    p = torch.full((1, 4, 3), 0.1)
    p[0, 0:3, 1] = 0.9  # channel 1 looks like spk0
    p[0, 0:2, 0] = 0.6
    p[0, 3, 2] = 0.9
    assert torch.equal(ats_targets(y, p), y[:, :, [1, 0, 2]])


def test_silent_speakers_are_last_and_capped_at_T():
    y = torch.zeros(1, 5, 4)
    y[0, 2:, 3] = 1
    y[0, 1:, 1] = 1
    assert arrival_times(y).tolist() == [[5, 1, 5, 2]]
    target = ats_targets(y, torch.rand(1, 5, 4))
    assert torch.equal(target[0, :, 0], y[0, :, 1]) and torch.equal(target[0, :, 1], y[0, :, 3])
    assert target[0, :, 2:].sum() == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffling_reference_columns_changes_neither_ats_target_nor_pil(seed):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(2, 12, 4, generator=g) > 0.6).float()
    p = torch.rand(2, 12, 4, generator=g)
    for perm in itertools.permutations(range(4)):
        ys = y[:, :, list(perm)]
        # arrival times are almost surely distinct here; check the target only then
        if (arrival_times(y).sort(dim=1).values.diff(dim=1) > 0).all():
            assert torch.equal(ats_targets(ys, p), ats_targets(y, p))
        assert pil_loss(p, ys).item() == pytest.approx(pil_loss(p, y).item(), abs=1e-6)
    assert sort_loss(p, y).item() >= pil_loss(p, y, match="bce").item() - 1e-6


def test_pil_brute_force_minimum_under_bce_rule():
    g = torch.Generator().manual_seed(3)
    y = (torch.rand(1, 10, 3, generator=g) > 0.5).float()
    p = torch.rand(1, 10, 3, generator=g)
    brute = min(masked_bce(p, y[:, :, list(q)]).item()
                for q in itertools.permutations(range(3)))
    assert pil_loss(p, y, match="bce").item() == pytest.approx(brute, abs=1e-6)
    # the dot rule picks the max-overlap permutation, never a better BCE than the minimum
    assert pil_loss(p, y).item() >= brute - 1e-6


def test_padded_frames_are_excluded():
    y, p = _reference(), _b_first_predictions()
    y_pad = torch.cat([y, torch.ones(1, 3, 3)], dim=1)
    p_pad = torch.cat([p, torch.full((1, 3, 3), 0.01)], dim=1)
    lengths = torch.tensor([6])
    assert hybrid_loss(p_pad, y_pad, lengths).item() == pytest.approx(
        hybrid_loss(p, y).item(), abs=1e-6)


def test_targets_are_detached_and_gradients_flow():
    y = _reference()
    logits = torch.zeros(1, 6, 3, requires_grad=True)
    loss = hybrid_loss(torch.sigmoid(logits), y)
    loss.backward()
    assert logits.grad is not None and np.isfinite(logits.grad.numpy()).all()
    assert not pil_targets(y, torch.sigmoid(logits)).requires_grad


def test_bad_shapes_and_weights_are_refused():
    with pytest.raises(ValueError, match="must both be"):
        sort_loss(torch.rand(1, 5, 3), torch.rand(1, 5, 4))
    with pytest.raises(ValueError, match="weights"):
        hybrid_loss(torch.rand(1, 5, 3), torch.rand(1, 5, 3), ats_weight=0, pil_weight=0)
