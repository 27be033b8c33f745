"""Unit tests of the knowledge-swap mathematics (``docs/papers/knowledge_swap.md``)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from icml25.pipelines.knowledge_swap.pretraining import shift_images
from icml25.pipelines.knowledge_swap.swap import (
    PLANS,
    Stage,
    SwapHyper,
    bounded_forget_term,
    cosine_lr,
    forget_loss,
    h_mean,
    learn_loss,
    make_optimizer,
    prepare_swap_model,
    run_stage,
    run_swap,
)
from icml25.pipelines.knowledge_swap.vit import (
    ViT,
    ViTConfig,
    add_lora,
    expand_head,
    group_sparse_penalty,
    lora_modules,
    lora_update_norms,
    mark_only_lora_trainable,
)

pytestmark = pytest.mark.usefixtures("one_thread")

CFG = ViTConfig(patch=7, dim=16, depth=2, heads=2, mlp=32, n_classes=4)


def _model(seed: int = 0) -> ViT:
    torch.manual_seed(seed)
    return ViT(CFG).eval()


def _images(n: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 28, 28, generator=torch.Generator().manual_seed(seed))


def _tiny_sets(n: int = 24) -> tuple[dict, dict]:
    x = _images(4 * n, 1)
    train = {"retain": (x[:n], torch.arange(n) % 2),           # classes 0, 1 retained
             "forget": (x[n:2 * n], torch.full((n,), 2)),       # class 2 forgotten
             "learn": (x[2 * n:3 * n], 4 + torch.arange(n) % 2)}  # new classes 4, 5
    tests = {k: (v[0][: n // 2], v[1][: n // 2]) for k, v in train.items()}
    return train, tests


def test_lora_with_zero_b_and_expanded_head_keep_the_pretrained_logits():
    model, x = _model(), _images(8)
    before = model(x)
    feats = model.features(x)
    expand_head(model, 2, torch.Generator().manual_seed(0))
    add_lora(model, rank=4, alpha=1.0)
    after = model(x)
    assert after.shape == (8, 6)
    assert (after[:, :4] - before).abs().max() < 1e-6
    w_new = model.head.weight[4:]
    assert torch.equal(model.head.bias[4:], torch.zeros(2))
    torch.testing.assert_close(after[:, 4:], feats @ w_new.T, atol=1e-6, rtol=0)
    # xavier bound of the new rows: sqrt(6 / (fan_in + fan_out))
    assert w_new.abs().max() <= math.sqrt(6 / (16 + 2))
    for fc1, fc2 in lora_modules(model):
        for m in (fc1, fc2):
            assert torch.equal(m.lora_B, torch.zeros_like(m.lora_B))
            bound = math.sqrt(2 / (1 + 50)) * math.sqrt(3 / m.lora_A.shape[1])
            assert m.lora_A.abs().max() <= bound and m.lora_A.abs().max() > bound / 2
            assert m.scaling == pytest.approx(1.0 / 4)


def test_lora_forward_equals_the_merged_weight():
    model = _model()
    add_lora(model, rank=3, alpha=2.0)
    fc1 = model.blocks[0].ffn.fc1
    with torch.no_grad():
        fc1.lora_B.normal_()
    x = torch.randn(5, 16)
    merged = F.linear(x, fc1.base.weight + (2.0 / 3) * fc1.lora_B @ fc1.lora_A, fc1.base.bias)
    torch.testing.assert_close(fc1(x), merged, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        expected = float(torch.linalg.matrix_norm((2.0 / 3) * fc1.lora_B @ fc1.lora_A))
    assert lora_update_norms(model)[0][0] == pytest.approx(expected, rel=1e-5)


def test_only_lora_trains_and_a_step_leaves_every_other_tensor_bitwise_equal():
    model = _model()
    expand_head(model, 2)
    add_lora(model, rank=4, alpha=1.0)
    trainable = mark_only_lora_trainable(model)
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names and all(n.endswith(("lora_A", "lora_B")) for n in names)
    assert len(trainable) == 2 * 2 * CFG.depth
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lora_before = [p.detach().clone() for p in trainable]
    opt = make_optimizer(trainable, SwapHyper())
    loss = F.cross_entropy(model(_images(8)), torch.arange(8) % 6)
    loss.backward()
    opt.step()
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
    assert any(not torch.equal(a, b) for a, b in zip(lora_before, trainable, strict=True))
    head = mark_only_lora_trainable(model, train_head=True)
    assert len(head) == len(trainable) + 2


def test_group_sparse_penalty_is_the_sum_of_block_norms_with_finite_gradient_at_zero():
    model = _model()
    add_lora(model, rank=2, alpha=1.0)
    (a1, b1), (a2, b2) = lora_modules(model)
    with torch.no_grad():
        for m, value in ((a1, 1.0), (b1, 2.0)):
            m.lora_A.fill_(value)
            m.lora_B.fill_(-value)
        for m in (a2, b2):  # block 1: a whole zero group
            m.lora_A.zero_()
            m.lora_B.zero_()
    # block 0: fc1 A (2x16) of 1, B (32x2) of -1; fc2 A (2x32) of 2, B (16x2) of -2
    expected = math.sqrt(32 * 1 + 64 * 1 + 64 * 4 + 32 * 4)
    g = group_sparse_penalty(model)
    assert float(g.detach()) == pytest.approx(expected, rel=1e-6)
    g.backward()
    for m in (a2, b2):
        assert torch.isfinite(m.lora_A.grad).all() and torch.isfinite(m.lora_B.grad).all()
        assert torch.equal(m.lora_A.grad, torch.zeros_like(m.lora_A))
    # d||v||/dv = v / ||v|| on the non-zero group
    torch.testing.assert_close(a1.lora_A.grad, a1.lora_A.detach() / expected)


def test_bounded_forget_term_is_bnd_minus_ce_below_and_flat_above():
    logits = torch.tensor([[2.0, 0.5, -1.0]], requires_grad=True)
    y = torch.tensor([0])
    ce = F.cross_entropy(logits, y)
    value = bounded_forget_term(logits, y, 105.0)
    assert value.item() == pytest.approx(105.0 - ce.item())
    value.backward()
    assert logits.grad.abs().sum() > 0
    huge = torch.tensor([[-500.0, 0.0, 0.0]], requires_grad=True)  # CE ~ 500 > BND
    assert F.cross_entropy(huge, y) > 105
    term = bounded_forget_term(huge, y, 105.0)
    assert term.item() == 0.0
    term.backward()
    assert torch.equal(huge.grad, torch.zeros_like(huge))


def test_stage_losses_combine_the_terms_with_their_weights():
    g = torch.tensor(3.0)
    la, lb = torch.randn(4, 5), torch.randn(4, 5)
    ya, yb = torch.tensor([0, 1, 2, 3]), torch.tensor([4, 4, 0, 1])
    ce_a, ce_b = F.cross_entropy(la, ya), F.cross_entropy(lb, yb)
    assert float(learn_loss(la, ya, lb, yb, 0.2, 0.005, g)) == pytest.approx(
        float(ce_a + 0.2 * ce_b + 0.005 * 3))
    assert float(forget_loss(la, ya, lb, yb, 0.2, 105.0, 0.01, g)) == pytest.approx(
        float(ce_a + 0.2 * (105 - ce_b) + 0.03))


def test_cosine_schedule_values_and_restart_at_the_second_stage():
    assert cosine_lr(0, 5, 1e-2, 1e-5) == pytest.approx(1e-2)
    assert cosine_lr(4, 5, 1e-2, 1e-5) == pytest.approx(
        1e-5 + 0.5 * (1e-2 - 1e-5) * (1 + math.cos(math.pi * 4 / 5)))
    train, tests = _tiny_sets()
    hp = SwapHyper(epochs=3, batch_size=8, rank=2)
    result = run_swap(_model(), "ltf", train, tests, 2, hp, seed=0, progress=False)
    lrs = [c["lr"] for c in result["curve"]]
    expected = [cosine_lr(e, 3, hp.lr, hp.min_lr) for e in range(3)]
    assert lrs == pytest.approx(expected * 2)


@pytest.mark.parametrize(("variant", "keep_sizes"), [("ltf", (24, 48)), ("ftl", (24, 24))])
def test_ltf_forgets_with_the_learn_set_in_the_keep_set_and_ftl_without(variant, keep_sizes):
    """Steps per epoch = ceil(|keep| / B): LtF's forget stage passes over retain ∪ learn; the
    AdamW step counter also shows the optimizer is shared across the stages."""
    assert ("learn" in PLANS["ltf"][1].keep) and ("learn" not in PLANS["ftl"][0].keep)
    train, _ = _tiny_sets()
    hp = SwapHyper(epochs=2, batch_size=8, rank=2)
    model, trainable = prepare_swap_model(_model(), 2, hp, seed=0)
    opt = make_optimizer(trainable, hp)
    gen = torch.Generator().manual_seed(0)
    for stage, size in zip(PLANS[variant], keep_sizes, strict=True):
        before = int(opt.state[trainable[0]]["step"]) if opt.state else 0
        run_stage(model, opt, stage, train, hp, gen, progress=False)
        assert int(opt.state[trainable[0]]["step"]) - before == 2 * math.ceil(size / 8)


def _trained(stage: Stage, beta: float) -> tuple[ViT, dict]:
    train, _ = _tiny_sets(32)
    train["forget"] = (0.5 + 0.5 * train["forget"][0], train["forget"][1])  # separable
    hp = SwapHyper(epochs=16, batch_size=16, rank=4, lr=1e-2, beta=beta)
    model, trainable = prepare_swap_model(_model(), 2, hp, seed=0)
    run_stage(model, make_optimizer(trainable, hp), stage, train, hp,
              torch.Generator().manual_seed(0), progress=False)
    return model, train


def test_the_forget_term_raises_the_forget_ce_and_the_learn_stage_fits_the_new_classes():
    ce = {}
    for beta in (0.0, 1.0):
        model, train = _trained(Stage("forget", ("retain",)), beta)
        with torch.no_grad():
            ce[beta] = float(F.cross_entropy(model(train["forget"][0]), train["forget"][1]))
    assert ce[1.0] > ce[0.0] + 1.0
    fresh, _ = prepare_swap_model(_model(), 2, SwapHyper(rank=4), seed=0)
    model, train = _trained(Stage("learn", ("retain",)), 0.2)
    x_l, y_l = train["learn"]
    with torch.no_grad():
        after, before = F.cross_entropy(model(x_l), y_l), F.cross_entropy(fresh(x_l), y_l)
    assert float(after) < float(before) - 0.3


def test_swap_is_deterministic_for_a_seed_and_reports_every_stage():
    train, tests = _tiny_sets()
    hp = SwapHyper(epochs=1, batch_size=8, rank=2, norm_logs_per_epoch=2)
    a = run_swap(_model(), "ftl", train, tests, 2, hp, seed=3, progress=False)
    b = run_swap(_model(), "ftl", train, tests, 2, hp, seed=3, progress=False)
    assert a["acc"] == b["acc"] and a["norms"]["values"] == b["norms"]["values"]
    assert set(a["acc"]) == {"start", "stage1", "stage2", "final"}
    assert a["norms"]["stage"] == [1, 1, 2, 2] and len(a["norms"]["values"][0]) == CFG.depth
    for stage in a["acc"].values():
        assert all(0 <= v <= 100 and math.isfinite(v) for v in stage.values())
    joint = run_swap(_model(), "joint", train, tests, 2, hp, seed=3, progress=False)
    assert len(joint["curve"]) == 2  # one stage of 2E epochs
    with pytest.raises(ValueError, match="unknown swap variant"):
        run_swap(_model(), "bogus", train, tests, 2, hp, seed=3)


def test_h_mean_matches_the_official_formula():
    assert h_mean(80.0, 90.0, 10.0) == pytest.approx(2 * 80 * 80 / 160)
    assert h_mean(0.0, 5.0, 5.0) == 0.0


def test_shift_images_moves_pixels_with_zero_fill():
    x = torch.zeros(2, 5, 5)
    x[:, 2, 2] = 1.0
    out = shift_images(x, [[1, -2], [-2, 0]])
    assert out[0, 0, 3] == 1.0 and out[1, 2, 0] == 1.0 and out.sum() == 2.0
    np.testing.assert_array_equal(shift_images(x, [[0, 0], [0, 0]]), x)
    assert torch.equal(copy.deepcopy(x), x)


def test_paper_shapes_run_at_tiny_size_on_cpu():
    """conf/paper's choices (patch 4 -> 49 tokens, 3 heads, 8 new glyph classes, batch 80,
    fraction-0.1-sized sets) through the same swap code on a tiny model."""
    from icml25.pipelines.knowledge_swap.glyphs import GLYPH_CLASSES, make_glyph_set

    torch.manual_seed(0)
    model = ViT(ViTConfig(patch=4, dim=12, depth=2, heads=3, mlp=24, n_classes=5))
    gx, gy = make_glyph_set(list(GLYPH_CLASSES), 4, seed=0)
    x = _images(40, 2)
    train = {"retain": (x[:30], torch.arange(30) % 4), "forget": (x[30:], torch.full((10,), 4)),
             "learn": (torch.as_tensor(gx), torch.as_tensor(gy) + 5)}
    tests = {k: (v[0][:8], v[1][:8]) for k, v in train.items()}
    hp = SwapHyper(epochs=1, batch_size=80, rank=2)
    result = run_swap(model, "ltf", train, tests, len(GLYPH_CLASSES), hp, seed=0, progress=False)
    assert model.head.out_features == 13
    assert all(math.isfinite(v) for stage in result["acc"].values() for v in stage.values())
