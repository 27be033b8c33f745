"""Bound propagation: soundness against sampled and adversarial points, tightness order, exact
small cases, elision, ε = 0, batch norm, and refusals of bad input."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from icml25.pipelines.ctbench.attacks import pgd_attack
from icml25.pipelines.ctbench.bounds import (
    BoundInputError,
    ConvOp,
    Normalize,
    UnsupportedLayerError,
    crown,
    crown_ibp,
    crown_intersect_ibp,
    forward_with_bn_stats,
    ibp,
    input_box,
    margin_spec,
    network_ops,
)
from icml25.pipelines.ctbench.networks import build_network

pytestmark = pytest.mark.usefixtures("one_thread")


def _randomise_bn(net: nn.Module, gen: torch.Generator) -> None:
    for m in net.modules():
        if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(0.3 * torch.randn(n, generator=gen))
            m.running_var.copy_(0.5 + 1.5 * torch.rand(n, generator=gen))
            m.weight.data.copy_(torch.randn(n, generator=gen))  # negative γ included
            m.bias.data.copy_(0.3 * torch.randn(n, generator=gen))


def _random_net(kind: str, seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    if kind == "mlp_bn":
        net = build_network("mlp", (1, 6, 6), 5, width=24, depth=3, batch_norm=True)
    elif kind == "small_cnn":
        net = build_network("small_cnn", (1, 8, 8), 5, linear=16)
    else:  # cnn7 at width 4 (Conv/BN/ReLU, stride 2)
        net = build_network("cnn7", (1, 6, 6), 5, width=3, linear=12)
    _randomise_bn(net, gen)
    return net.eval()


def _spec_values(net, spec, points):
    """``C f(p)`` for points ``[N, B, ...]`` -> ``[N, B, K-1]``."""
    n, b = points.shape[:2]
    with torch.no_grad():
        logits = net(points.reshape(n * b, *points.shape[2:])).reshape(n, b, -1)
    return torch.einsum("bsk,nbk->nbs", spec, logits)


@pytest.mark.parametrize("kind", ["mlp_bn", "small_cnn", "cnn7"])
def test_every_bound_encloses_10000_sampled_points_and_pgd_points(kind):
    net = _random_net(kind, seed=3)
    side = 6 if kind != "small_cnn" else 8
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(3, 1, side, side, generator=gen)
    y = torch.tensor([0, 2, 4])
    lower, upper = input_box(x, 0.08)
    ops = network_ops(net, (1, side, side))
    spec = margin_spec(y, 5)
    lb_ibp = ibp(ops, lower, upper, spec).lower
    lb_cibp, _ = crown_ibp(ops, lower, upper, spec)
    lb_crown, _, _ = crown(ops, lower, upper, spec, chunk=2)
    lb_crown_int, _, _ = crown_intersect_ibp(ops, lower, upper, spec, chunk=2)
    points = lower + torch.rand(10_000, *lower.shape, generator=gen) * (upper - lower)
    worst = _spec_values(net, spec, points).min(0).values
    adv = pgd_attack(net, x, y, lower, upper, steps=20, restarts=2, generator=gen).x_adv
    assert ((adv >= lower) & (adv <= upper)).all()
    at_adv = _spec_values(net, spec, adv.unsqueeze(0))[0]
    for lb in (lb_ibp, lb_cibp, lb_crown, lb_crown_int):
        assert (lb <= worst + 1e-5).all()
        assert (lb <= at_adv + 1e-5).all()
    # output bounds without a spec (upper and lower) enclose the logits too
    with torch.no_grad():
        logits = net(points[:2000].reshape(-1, *x.shape[1:])).reshape(2000, len(x), -1)
    res = ibp(ops, lower, upper)
    lo_c, up_c, _ = crown(ops, lower, upper)
    lo_ci, up_ci = crown_ibp(ops, lower, upper)
    for lo, up in ((res.lower, res.upper), (lo_c, up_c), (lo_ci, up_ci)):
        assert (lo <= logits.min(0).values + 1e-5).all()
        assert (up >= logits.max(0).values - 1e-5).all()


@pytest.mark.parametrize("seed", range(4))
def test_ibp_intersected_crown_is_at_least_as_tight_as_ibp_on_every_sample(seed):
    net = _random_net("mlp_bn" if seed % 2 else "small_cnn", seed)
    side = 6 if seed % 2 else 8
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(8, 1, side, side, generator=gen)
    y = torch.randint(0, 5, (8,), generator=gen)
    lower, upper = input_box(x, 0.05)
    ops = network_ops(net, (1, side, side))
    spec = margin_spec(y, 5)
    lb_ibp = ibp(ops, lower, upper, spec).lower
    lb_crown, _, relu_crown = crown_intersect_ibp(ops, lower, upper, spec, chunk=3)
    assert (lb_crown >= lb_ibp - 1e-5).all()
    assert (lb_crown > lb_ibp + 1e-3).any()  # strictly tighter somewhere on a random net
    # intermediate bounds are never looser than IBP's either
    for (lo_c, hi_c), (lo_i, hi_i) in zip(relu_crown, ibp(ops, lower, upper).relu_bounds,
                                          strict=True):
        assert (lo_c >= lo_i - 1e-5).all() and (hi_c <= hi_i + 1e-5).all()


def test_ibp_of_relu_2x_minus_1_on_unit_interval():
    net = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 1))
    with torch.no_grad():
        net[0].weight.fill_(2.0)
        net[0].bias.fill_(-1.0)
        net[2].weight.fill_(1.0)
        net[2].bias.fill_(0.0)
    ops = network_ops(net, (1,))
    res = ibp(ops, torch.zeros(1, 1), torch.ones(1, 1))
    assert res.lower.item() == pytest.approx(0.0)
    assert res.upper.item() == pytest.approx(1.0)
    assert res.relu_bounds[0][0].item() == pytest.approx(-1.0)
    assert res.relu_bounds[0][1].item() == pytest.approx(1.0)
    # CROWN: upper line u/(u-l)(z-l) = (z+1)/2 gives the same upper bound 1 here
    lo, up, _ = crown(ops, torch.zeros(1, 1), torch.ones(1, 1))
    assert up.item() == pytest.approx(1.0) and lo.item() <= 0.0 + 1e-7


def test_ibp_on_an_affine_layer_is_exact_interval_arithmetic():
    gen = torch.Generator().manual_seed(1)
    lin = nn.Linear(4, 3)
    w, b = lin.weight.detach(), lin.bias.detach()
    lo, hi = torch.rand(2, 4, generator=gen), None
    hi = lo + torch.rand(2, 4, generator=gen)
    res = ibp(network_ops(nn.Sequential(lin), (4,)), lo, hi)
    # exact: each output's min/max picks the interval end by the sign of its weight
    exact_lo = b + (torch.where(w > 0, lo[:, None, :], hi[:, None, :]) * w).sum(-1)
    exact_hi = b + (torch.where(w > 0, hi[:, None, :], lo[:, None, :]) * w).sum(-1)
    assert torch.allclose(res.lower, exact_lo, atol=1e-6)
    assert torch.allclose(res.upper, exact_hi, atol=1e-6)


def test_elided_ibp_lies_between_exact_and_non_elided_bounds():
    net = _random_net("mlp_bn", 5)
    gen = torch.Generator().manual_seed(2)
    x = torch.rand(4, 1, 6, 6, generator=gen)
    y = torch.tensor([1, 0, 3, 4])
    lower, upper = input_box(x, 0.05)
    ops = network_ops(net, (1, 6, 6))
    spec = margin_spec(y, 5)
    elided = ibp(ops, lower, upper, spec).lower
    plain = ibp(ops, lower, upper)
    # non-elided: lower bound of z_y - z_j from the logit box is lb_y - ub_j
    non_elided = torch.einsum("bsk,bk->bs", spec.clamp(min=0), plain.lower) + torch.einsum(
        "bsk,bk->bs", spec.clamp(max=0), plain.upper)
    points = lower + torch.rand(5000, *lower.shape, generator=gen) * (upper - lower)
    sampled = _spec_values(net, spec, points).min(0).values
    assert (elided >= non_elided - 1e-5).all()
    assert (elided > non_elided + 1e-4).any()
    assert (elided <= sampled + 1e-5).all()


@pytest.mark.parametrize("kind", ["mlp_bn", "small_cnn"])
def test_zero_eps_collapses_every_bound_to_the_logits(kind):
    net = _random_net(kind, 7)
    side = 6 if kind == "mlp_bn" else 8
    x = torch.rand(3, 1, side, side, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 1, 2])
    lower, upper = input_box(x, 0.0)
    ops = network_ops(net, (1, side, side))
    spec = margin_spec(y, 5)
    with torch.no_grad():
        margins = torch.einsum("bsk,bk->bs", spec, net(x))
    for lb in (ibp(ops, lower, upper, spec).lower, crown_ibp(ops, lower, upper, spec)[0],
               crown(ops, lower, upper, spec)[0]):
        assert (lb - margins).abs().max() < 1e-5


def test_conv_backward_is_the_transpose_of_the_convolution():
    gen = torch.Generator().manual_seed(0)
    for stride, pad, size in ((2, 2, 8), (2, 1, 7), (1, 1, 5), (2, 1, 6)):
        conv = nn.Conv2d(2, 3, 4 if stride == 2 and pad == 1 else 3, stride=stride, padding=pad)
        op = ConvOp(conv.weight, conv.bias, conv.stride, conv.padding, (2, size, size))
        x = torch.randn(1, 2, size, size, generator=gen, requires_grad=True)
        out = conv(x)
        assert tuple(out.shape[1:]) == op.out_shape
        lam = torch.randn(1, 1, *op.out_shape, generator=gen)
        (grad,) = torch.autograd.grad((out * lam[:, 0]).sum(), x)
        back, bias = op.backward(lam)
        assert torch.allclose(back[:, 0], grad, atol=1e-5)
        assert torch.allclose(bias, (lam[:, 0].sum((-1, -2)) * conv.bias).sum(-1), atol=1e-5)


def test_training_mode_box_pass_uses_the_clean_batch_statistics():
    torch.manual_seed(0)
    net = build_network("mlp", (1, 4, 4), 3, width=8, depth=1, batch_norm=True).train()
    x = torch.rand(16, 1, 4, 4)
    logits, stats = forward_with_bn_stats(net, x)
    ops = network_ops(net, (1, 4, 4), stats)
    # the ops with the clean stats reproduce the training-mode forward pass exactly
    h = x
    for op in ops:
        h = op.forward(h)
    assert torch.allclose(h, logits, atol=1e-5)
    # perturbing the box does not change the statistics the box pass uses
    lower, upper = input_box(x, 0.2)
    before = [s[0].clone() for s in stats]
    res = ibp(ops, lower, upper)
    assert all(torch.equal(a, s[0]) for a, s in zip(before, stats, strict=True))
    assert (res.lower <= logits + 1e-5).all() and (res.upper >= logits - 1e-5).all()


def test_negative_gamma_batch_norm_gives_a_valid_box():
    bn = nn.BatchNorm1d(3).eval()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([-2.0, 0.5, -0.1]))
        bn.running_var.fill_(1.0)
    net = nn.Sequential(bn, nn.Linear(3, 2))
    ops = network_ops(net, (3,))
    lo, hi = torch.zeros(1, 3), torch.ones(1, 3)
    res = ibp(ops, lo, hi)
    pts = lo + torch.rand(2000, 3) * (hi - lo)
    out = net(pts).detach()
    assert (res.lower <= out.min(0).values + 1e-5).all()
    assert (res.upper >= out.max(0).values - 1e-5).all()
    assert (res.upper >= res.lower).all()


def test_bad_input_is_refused_with_a_clear_message():
    x = torch.rand(2, 1, 4, 4)
    with pytest.raises(BoundInputError, match=r"eps: got -0\.1"):
        input_box(x, -0.1)
    bad = x.clone()
    bad[0, 0, 1, 1] = float("nan")
    with pytest.raises(BoundInputError, match="input: 1 non-finite"):
        input_box(bad, 0.1)
    with pytest.raises(UnsupportedLayerError, match=r"layer 2 \(Tanh\) is not supported"):
        network_ops(nn.Sequential(Normalize([0.0], [1.0]), nn.Flatten(), nn.Tanh(),
                                  nn.Linear(16, 2)), (1, 4, 4))
    with pytest.raises(UnsupportedLayerError, match=r"layer 1 \(MaxPool2d\)"):
        network_ops(nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2), nn.Flatten(),
                                  nn.Linear(2, 2)), (1, 6, 6))
    ops = network_ops(nn.Sequential(nn.Flatten(), nn.Linear(16, 2)), (1, 4, 4))
    lower, upper = input_box(x, 0.1)
    with pytest.raises(BoundInputError, match="non-finite"):
        ibp(ops, lower, upper + float("inf"))
    with pytest.raises(BoundInputError, match="lower > upper"):
        crown(ops, upper, lower)
