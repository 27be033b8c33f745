"""Certified training pieces: ε schedule, fast init, robust loss, SABR box, PGD, the loop."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

from icml25.pipelines.ctbench.attacks import pgd_attack, step_scale
from icml25.pipelines.ctbench.bounds import BoundInputError, input_box
from icml25.pipelines.ctbench.certified_training import (
    MethodConfig,
    TrainSetting,
    fast_regularizer,
    method_loss,
    robust_ce,
    sabr_box,
    smooth_eps,
    train_certified,
)
from icml25.pipelines.ctbench.networks import build_network, fast_init

pytestmark = pytest.mark.usefixtures("one_thread")


def test_smooth_schedule_is_zero_before_exact_after_monotone_and_continuous():
    eps, s0, s1 = 0.3, 100, 500
    values = [smooth_eps(t, eps, s0, s1) for t in range(0, 700)]
    assert all(v == 0.0 for v in values[:s0 + 1])
    assert all(v == eps for v in values[s1:])
    assert all(b >= a for a, b in itertools.pairwise(values))
    m = s0 + math.floor(0.25 * (s1 - s0))
    a = eps / ((s1 - m) * 4 * (m - s0) ** 3 + (m - s0) ** 4)
    # quartic part by hand, and continuity (value and slope) at m
    assert smooth_eps(s0 + 10, eps, s0, s1) == pytest.approx(a * 10**4)
    assert smooth_eps(m, eps, s0, s1) == pytest.approx(a * (m - s0) ** 4)
    left = smooth_eps(m, eps, s0, s1) - smooth_eps(m - 1, eps, s0, s1)
    right = smooth_eps(m + 1, eps, s0, s1) - smooth_eps(m, eps, s0, s1)
    assert right == pytest.approx(left, rel=0.02)


def test_fast_init_std_and_last_layer_untouched():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    last = net[4].weight.detach().clone()
    fast_init(net, torch.Generator().manual_seed(1))
    target = math.sqrt(2 * math.pi) / 256
    for layer in (net[0], net[2]):
        assert float(layer.weight.detach().std()) == pytest.approx(target, rel=0.05)
        assert float(layer.weight.detach().mean()) == pytest.approx(0.0, abs=0.05 * target)
    assert torch.equal(net[4].weight, last)


def test_robust_loss_by_hand_and_vanishing_for_large_margins():
    lb = torch.tensor([[0.5, -1.0]])  # 3 classes: lower bounds of z_y - z_j
    expected = math.log(1 + math.exp(-0.5) + math.exp(1.0))
    assert robust_ce(lb).item() == pytest.approx(expected, rel=1e-6)
    assert robust_ce(torch.tensor([[50.0, 60.0]])).item() < 1e-20
    # equals cross-entropy of [0, -lb] with target 0
    ce = nn.functional.cross_entropy(torch.tensor([[0.0, -0.5, 1.0]]), torch.tensor([0]))
    assert robust_ce(lb).item() == pytest.approx(ce.item(), rel=1e-6)


def test_sabr_box_inside_the_eps_box_contains_the_pgd_point_and_has_width_lambda():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, 5, 5, generator=gen)
    lower, upper = input_box(x, 0.2)
    x_adv = lower + torch.rand(x.shape, generator=gen) * (upper - lower)
    lo, hi = sabr_box(x_adv, lower, upper, 0.4)
    assert (lo >= lower - 1e-7).all() and (hi <= upper + 1e-7).all()
    assert torch.allclose(hi - lo, 0.4 * (upper - lower), atol=1e-6)
    # the PGD point is inside unless it was within ρ of the border (then clipped to the border)
    assert ((x_adv >= lo - 1e-6) & (x_adv <= hi + 1e-6)).all()


def test_pgd_stays_in_the_box_and_breaks_a_linear_model_beyond_its_margin():
    torch.manual_seed(0)
    lin = nn.Linear(4, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -1.0, 0.0, 0.0], [-1.0, 1.0, 0.0, 0.0]]))
        lin.bias.zero_()
    net = nn.Sequential(lin)
    x = torch.full((1, 4), 0.5)
    x[0, 0] = 0.6  # margin z_0 - z_1 = 2*(0.6-0.5) = 0.2; L1 norm of w_0 - w_1 is 4
    y = torch.tensor([0])
    # analytic robust radius: margin / ||w_0 - w_1||_1 = 0.2 / 4 = 0.05
    gen = torch.Generator().manual_seed(1)
    for eps, broken in ((0.045, False), (0.055, True)):
        lower, upper = input_box(x, eps)
        res = pgd_attack(net, x, y, lower, upper, steps=20, restarts=2, generator=gen)
        assert ((res.x_adv >= lower) & (res.x_adv <= upper)).all()
        assert bool(res.broken[0]) is broken


def test_pgd_step_decay_follows_the_schedule():
    assert [step_scale(s, 10) for s in (0, 9)] == [1.0, 1.0]
    assert step_scale(12, 15) == pytest.approx(0.2)
    assert step_scale(13, 20) == 1.0 and step_scale(14, 20) == pytest.approx(0.1)
    assert step_scale(95, 100) == pytest.approx(1e-3)


def test_fast_regularizer_is_finite_and_positive_for_a_fresh_ibp_net():
    torch.manual_seed(0)
    net = build_network("mlp", (1, 8, 8), 10, width=32)
    fast_init(net, torch.Generator().manual_seed(0))
    x = torch.rand(16, 1, 8, 8)
    from icml25.pipelines.ctbench.bounds import ibp, network_ops

    res = ibp(network_ops(net, (1, 8, 8)), *input_box(x, 0.1))
    reg = fast_regularizer(res)
    assert torch.isfinite(reg) and reg.item() > 0
    reg.backward()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)


@pytest.mark.parametrize("method", ["standard", "pgd", "ibp", "crown_ibp", "sabr", "mtl_ibp"])
def test_every_method_loss_is_finite_and_differentiable(method):
    torch.manual_seed(0)
    net = build_network("mlp", (1, 8, 8), 10, width=16, batch_norm=True).train()
    x, y = torch.rand(8, 1, 8, 8), torch.randint(0, 10, (8,))
    cfg = MethodConfig(method=method, train_steps=2)
    loss, info = method_loss(net, cfg, x, y, 0.1, 10, (1, 8, 8), 0.5,
                             torch.Generator().manual_seed(0))
    assert torch.isfinite(loss) and "nat_loss" in info
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def _digits(n_train=240, n_val=60):
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32)[:, None]
    y = torch.tensor(d.target)
    return x[:n_train], y[:n_train], x[n_train:n_train + n_val], y[n_train:n_train + n_val]


def test_training_is_deterministic_for_a_fixed_seed_and_ibp_training_certifies_more():
    x, y, xv, yv = _digits(400, 100)
    setting = TrainSetting(eps_train=0.05, eps_test=0.05, epochs=6, batch_size=32, ramp_start=0,
                           ramp_end=3, milestones=(5,), selection="final", lr=5e-3)
    outs = []
    for _ in range(2):
        torch.manual_seed(0)
        net = build_network("mlp", (1, 8, 8), 10, width=32)
        outs.append(train_certified(net, MethodConfig("ibp"), setting, x, y, xv, yv, 10, seed=3,
                                    progress=False))
    for a, b in zip(outs[0].model.parameters(), outs[1].model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert outs[0].steps == 6 * math.ceil(400 / 32)
    torch.manual_seed(0)
    std = train_certified(build_network("mlp", (1, 8, 8), 10, width=32),
                          MethodConfig("standard", fast_init=False, fast_reg=0.0), setting,
                          x, y, xv, yv, 10, seed=3, progress=False)
    from icml25.pipelines.ctbench.certified_training import ibp_certified

    cert_ibp = ibp_certified(outs[0].model, xv, yv, 0.05, 10).float().mean()
    cert_std = ibp_certified(std.model, xv, yv, 0.05, 10).float().mean()
    assert cert_ibp > cert_std + 0.2


def test_training_refuses_non_finite_images():
    x, y, xv, yv = _digits(40, 10)
    x = x.clone()
    x[3, 0, 2, 2] = float("nan")
    setting = TrainSetting(0.1, 0.1, 1, 16, 0, 1, ())
    with pytest.raises(BoundInputError, match="training images: 1 non-finite"):
        train_certified(build_network("mlp", (1, 8, 8), 10, width=8), MethodConfig("ibp"),
                        setting, x, y, xv, yv, 10, seed=0, progress=False)


def test_numpy_seed_is_not_needed():
    # the loop draws only from its own generators: the global numpy state is irrelevant
    np.random.seed(123)
    x, y, xv, yv = _digits(64, 16)
    setting = TrainSetting(0.1, 0.1, 1, 16, 0, 1, (), selection="final")
    torch.manual_seed(0)
    a = train_certified(build_network("mlp", (1, 8, 8), 10, width=8), MethodConfig("sabr",
                        train_steps=1), setting, x, y, xv, yv, 10, seed=1, progress=False)
    np.random.seed(999)
    torch.manual_seed(0)
    net = build_network("mlp", (1, 8, 8), 10, width=8)
    torch.manual_seed(77)  # global torch RNG moved after construction: no effect either
    b = train_certified(net, MethodConfig("sabr", train_steps=1), setting, x, y, xv, yv, 10,
                        seed=1, progress=False)
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_paper_network_code_path_runs_on_cpu_at_tiny_size():
    """conf/paper's CNN7 with batch norm (clean-batch statistics in the box pass, population
    statistics after each epoch, attacks in eval mode) at width 2 on 8x8 digits."""
    from icml25.pipelines.ctbench.certification import certify

    x, y, xv, yv = _digits(64, 32)
    setting = TrainSetting(0.1, 0.1, 2, 32, 0, 1, (2,), selection="best_val")
    for method in ("crown_ibp", "sabr", "mtl_ibp"):
        torch.manual_seed(0)
        net = build_network("cnn7", (1, 8, 8), 10, width=2, linear=8, batch_norm=True)
        out = train_certified(net, MethodConfig(method, train_steps=1), setting, x, y, xv, yv,
                              10, seed=0, progress=False)
        bn = net[2]
        assert isinstance(bn, nn.BatchNorm2d) and torch.isfinite(bn.running_var).all()
        assert out.best_epoch in (1, 2) and not net.training
        table = certify(net, xv, yv, 0.1, 10, pgd_steps=2, pgd_restarts=1,
                        crown_index=np.arange(4), crown_chunk=2, progress=False)
        assert not (table["certified"] & ~table["pgd_robust"]).any()
