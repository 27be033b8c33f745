"""Plain CROWN against an independent dense reference written from auto_LiRPA's definition
(``method="CROWN"``: backward linear relaxation through every layer, every intermediate
pre-activation bound itself from CROWN, ReLU upper line through ``(l⁻, 0)`` and ``(u⁺, u⁺)`` with
``l⁻ = min(l, 0)``, ``u⁺ = max(u, 0)``, lower slope 1 if the upper slope exceeds 1/2 else 0), on
briefly trained MLP and CNN models; soundness against sampled points; the IBP-intersected variant;
inputs outside the data domain; population batch norm with a short last chunk."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from icml25.pipelines.ctbench.bounds import (
    BoundInputError,
    crown,
    crown_intersect_ibp,
    ibp,
    input_box,
    margin_spec,
    network_ops,
)
from icml25.pipelines.ctbench.certification import certify
from icml25.pipelines.ctbench.networks import build_network, reset_bn_to_population

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------ the dense reference
def _dense_layers(net: nn.Sequential, in_shape: tuple[int, ...]) -> list:
    """The network in float64 as a list of ``("affine", W, b)`` and ``("relu",)``: every run of
    non-ReLU layers is one affine map, read off from its values at 0 and at the unit vectors."""
    net = net.double().eval()
    layers, run, shape = [], [], tuple(in_shape)

    def flush(run, shape):
        n_in = int(np.prod(shape))
        seq = nn.Sequential(*run)
        basis = torch.cat([torch.zeros(1, n_in), torch.eye(n_in)]).double().reshape(-1, *shape)
        with torch.no_grad():
            out = seq(basis)
        out_shape = tuple(out.shape[1:])
        out = out.reshape(n_in + 1, -1)
        return ("affine", (out[1:] - out[0]).numpy().T, out[0].numpy()), out_shape

    for layer in net:
        if isinstance(layer, nn.ReLU):
            entry, shape = flush(run, shape)
            layers += [entry, ("relu",)]
            run = []
        else:
            run.append(layer)
    entry, _ = flush(run, shape)
    layers.append(entry)
    net.float()
    return layers


def _relu_lines(lo: np.ndarray, hi: np.ndarray):
    """auto_LiRPA's ReLU relaxation: (lower slope, upper slope, upper intercept)."""
    lo_r, hi_r = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    hi_r = np.maximum(hi_r, lo_r + 1e-12)
    up_d = hi_r / (hi_r - lo_r)
    up_b = -lo_r * up_d
    return (up_d > 0.5).astype(float), up_d, up_b


def _backward_min(rows: np.ndarray, layers: list, relu: list, x_lo: np.ndarray,
                  x_hi: np.ndarray) -> np.ndarray:
    """Lower bound of ``rows · (output of layers)`` over the box, one sample, by the chain rule
    of the relaxation from the last layer back to the input."""
    lam, const = rows.copy(), np.zeros(len(rows))
    k = sum(1 for e in layers if e[0] == "relu")
    for entry in reversed(layers):
        if entry[0] == "affine":
            _, w, b = entry
            const = const + lam @ b
            lam = lam @ w
        else:
            k -= 1
            lo_d, up_d, up_b = _relu_lines(*relu[k])
            pos, neg = np.maximum(lam, 0), np.minimum(lam, 0)
            const = const + neg @ up_b
            lam = pos * lo_d + neg * up_d
    return np.maximum(lam, 0) @ x_lo + np.minimum(lam, 0) @ x_hi + const


def reference_crown(net, in_shape, x_lo, x_hi, spec):
    """Per sample: the CROWN lower bounds of ``C f`` and the per-ReLU pre-activation bounds."""
    layers = _dense_layers(net, in_shape)
    cut = [i for i, e in enumerate(layers) if e[0] == "relu"]
    margins, per_relu = [], []
    for s in range(len(x_lo)):
        lo_s, hi_s = x_lo[s].reshape(-1), x_hi[s].reshape(-1)
        relu: list = []
        for c in cut:
            sub = layers[:c]
            n = sub[-1][1].shape[0]
            eye = np.eye(n)
            relu.append((_backward_min(eye, sub, relu, lo_s, hi_s),
                         -_backward_min(-eye, sub, relu, lo_s, hi_s)))
        margins.append(_backward_min(spec[s], layers, relu, lo_s, hi_s))
        per_relu.append(relu)
    return np.stack(margins), per_relu


# ----------------------------------------------------------------------- trained models
def _digits():
    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32)[:, None]
    return x, torch.tensor(d.target)


def _trained(kind: str) -> nn.Sequential:
    torch.manual_seed(0)
    x, y = _digits()
    if kind == "mlp":
        net = build_network("mlp", (1, 8, 8), 10, width=24, depth=3)
    else:
        net = build_network("small_cnn", (1, 8, 8), 10, linear=20)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(150):
        idx = torch.randint(0, len(x), (64,), generator=gen)
        loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        acc = (net(x[:500]).argmax(1) == y[:500]).float().mean()
    assert acc > 0.8  # trained, not random weights
    return net


@pytest.fixture(scope="module", params=["mlp", "small_cnn"])
def trained(request):
    return request.param, _trained(request.param)


def _case(net, eps=0.03, n=6):
    x, y = _digits()
    xs, ys = x[1000:1000 + n], y[1000:1000 + n]
    lower, upper = input_box(xs, eps)
    return xs, ys, lower, upper, margin_spec(ys, 10)


@pytest.mark.parametrize("eps", [0.03, 0.3])
def test_plain_crown_equals_the_dense_reference_to_1e_4(trained, eps):
    _kind, net = trained
    xs, _ys, lower, upper, spec = _case(net, eps=eps)
    ops = network_ops(net, (1, 8, 8))
    with torch.no_grad():
        lb, _, relu_bounds = crown(ops, lower, upper, spec, chunk=4)
    ref, ref_relu = reference_crown(net, (1, 8, 8), lower.double().numpy(),
                                    upper.double().numpy(), spec.double().numpy())
    assert np.abs(lb.numpy() - ref).max() < 1e-4
    for k, (lo, hi) in enumerate(relu_bounds):
        ref_lo = np.stack([r[k][0] for r in ref_relu])
        ref_hi = np.stack([r[k][1] for r in ref_relu])
        assert np.abs(lo.reshape(len(xs), -1).numpy() - ref_lo).max() < 1e-4
        assert np.abs(hi.reshape(len(xs), -1).numpy() - ref_hi).max() < 1e-4
    # a non-trivial case: unstable ReLUs in every hidden layer
    for lo, hi in relu_bounds:
        assert ((lo < 0) & (hi > 0)).any()


def test_plain_crown_is_not_the_ibp_intersected_variant(trained):
    """The variant's intermediate bounds are never looser than IBP's; on the trained MLP at
    ε = 0.3 plain CROWN's deeper bounds are looser than IBP's on some neurons, so the two
    differ (the reference test above pins plain CROWN at the same ε)."""
    kind, net = trained
    _xs, _ys, lower, upper, spec = _case(net, eps=0.3)
    ops = network_ops(net, (1, 8, 8))
    with torch.no_grad():
        _, _, plain = crown(ops, lower, upper, spec)
        _lb_int, _, inter = crown_intersect_ibp(ops, lower, upper, spec)
        res = ibp(ops, lower, upper)
    for (lo, hi), (lo_i, hi_i) in zip(inter, res.relu_bounds, strict=True):
        assert (lo >= lo_i - 1e-5).all() and (hi <= hi_i + 1e-5).all()
    if kind == "mlp":
        gap = max(float((a[0] - b[0]).abs().max()) for a, b in zip(plain, inter, strict=True))
        assert gap > 0.1
        looser = any(bool((lo < lo_i - 1e-3).any())
                     for (lo, _), (lo_i, _) in zip(plain, res.relu_bounds, strict=True))
        assert looser


def test_plain_crown_is_sound_on_sampled_points(trained):
    _kind, net = trained
    xs, _ys, lower, upper, spec = _case(net, eps=0.05, n=4)
    ops = network_ops(net, (1, 8, 8))
    with torch.no_grad():
        lb, _, _ = crown(ops, lower, upper, spec)
        lo_f, up_f, _ = crown(ops, lower, upper)
        gen = torch.Generator().manual_seed(1)
        pts = lower + torch.rand(4000, *lower.shape, generator=gen) * (upper - lower)
        # corners too: ReLU networks attain extremes on the boundary more often
        corners = torch.where(torch.rand(1000, *lower.shape, generator=gen) < 0.5, lower, upper)
        pts = torch.cat([pts, corners])
        logits = net(pts.reshape(-1, 1, 8, 8)).reshape(len(pts), len(xs), 10)
    margins = torch.einsum("bsk,nbk->nbs", spec, logits)
    assert (margins >= lb - 1e-5).all()
    assert (logits >= lo_f - 1e-5).all() and (logits <= up_f + 1e-5).all()


# ------------------------------------------------------------------------ data domain
def test_inputs_outside_the_data_domain_are_refused_naming_the_samples():
    net = build_network("mlp", (1, 8, 8), 10, width=8, depth=1).eval()
    x, y = _digits()
    xs, ys = x[:20].clone(), y[:20]
    xs[3, 0, 2, 2] = -0.2
    xs[17, 0, 0, 0] = 1.5
    with pytest.raises(BoundInputError, match=r"2 sample\(s\) outside the data domain \[0, 1\] "
                                              r"\(samples 3, 17"):
        certify(net, xs, ys, 0.1, 10, pgd_steps=1, pgd_restarts=1,
                crown_index=np.arange(0), progress=False)
    with pytest.raises(BoundInputError, match=r"samples 1;"):
        input_box(xs[2:4], 0.1)
    lower, upper = input_box(x[:5], 0.1)  # inside the domain: the box contains x
    assert ((lower <= x[:5]) & (x[:5] <= upper)).all()


# ---------------------------------------------------------------------- population BN
@pytest.mark.parametrize("name", ["mlp", "cnn7"])
def test_population_bn_weights_chunks_by_size(name):
    torch.manual_seed(0)
    if name == "mlp":
        net = build_network("mlp", (1, 8, 8), 10, width=16, depth=2, batch_norm=True)
    else:
        net = build_network("cnn7", (1, 8, 8), 10, width=3, linear=8)
    x, _ = _digits()
    # shift the images so the chunk means differ: the last chunk (70 of 1030) is far off
    images = torch.cat([x[:960], (x[960:1030] * 0.2).clamp(0, 1)])
    full = [m for m in net.modules() if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d)]
    net.train()
    for bn in full:
        bn.reset_running_stats()
        bn.momentum = None
    with torch.no_grad():
        net(images)  # one training-mode pass over all images: the full-batch statistics
    want = [(bn.running_mean.clone(), bn.running_var.clone()) for bn in full]
    for bn in full:
        bn.momentum = 0.1
    reset_bn_to_population(net, images, batch_size=320)  # 3 chunks of 320 and one of 70
    for bn, (mean, var) in zip(full, want, strict=True):
        assert torch.allclose(bn.running_mean, mean, atol=1e-5, rtol=1e-5)
        assert torch.allclose(bn.running_var, var, atol=1e-5, rtol=1e-4)
        assert bn.momentum == 0.1
    assert net.training
