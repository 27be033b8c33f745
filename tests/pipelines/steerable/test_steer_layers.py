"""The mathematics of the 2D steerable layers: exact 90-degree equivariance of every layer,
known answers and brute-force checks of the convolution, CG product and attention formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.signal import correlate2d

from icml25.pipelines.steerable.attention2d import (
    SteerableAttention,
    SteerableEncoderBlock,
    SteerableTransformerEncoder,
)
from icml25.pipelines.steerable.harmonics import (
    SteerableConfigError,
    filter_basis,
    grid_geometry,
    offset_angles,
    relative_harmonics,
)
from icml25.pipelines.steerable.layers2d import (
    CGNonlinearity,
    FourierReLU,
    FrequencyNorm,
    NormNonlinearity,
    SteerableConv2d,
    complex_avg_pool,
    norm_flatten,
    rotate_field,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _field(M=4, C=8, H=9, seed=0, b=2):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(b, M, C, H, H, generator=g),
                         torch.randn(b, M, C, H, H, generator=g))


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def _opposite(x, k):
    M = x.shape[1]
    phase = torch.exp(1j * torch.arange(M, dtype=torch.float32) * (k * math.pi / 2))
    return torch.rot90(x, k, dims=(-2, -1)) * phase.to(x.dtype)[None, :, None, None, None]


# ------------------------------------------------------------------------ attention (test 1-2)
def test_encoder_is_rot90_equivariant_and_pins_the_phase_convention():
    torch.manual_seed(0)
    x = _field(M=4, C=8, H=9)
    enc = SteerableTransformerEncoder(8, 2, 2, 4, (9, 9), positional=True)
    with torch.no_grad():  # trained-size positional terms (the init is small)
        for block in enc.blocks:
            block.attn.pos_k.mul_(10)
            block.attn.pos_v.mul_(10)
    out = enc(x)
    for k in (1, 2, 3):
        assert _rel(enc(rotate_field(x, k)), rotate_field(out, k)) < 1e-5
    # the opposite phase sign is far off: the test pins the convention
    assert _rel(enc(_opposite(x, 1)), _opposite(out, 1)) > 0.1


def test_layer_scale_keeps_the_block_equivariant_and_scales_its_branches():
    torch.manual_seed(7)
    x = _field(M=4, C=8, H=7)
    plain = SteerableTransformerEncoder(8, 2, 1, 4, (7, 7), positional=True)
    scaled = SteerableTransformerEncoder(8, 2, 1, 4, (7, 7), positional=True, layer_scale=0.1)
    scaled.load_state_dict(plain.state_dict(), strict=False)  # same attention and FFN weights
    block_p, block_s = plain.blocks[0], scaled.blocks[0]
    with torch.no_grad():
        block_s.gamma1.uniform_(0.05, 0.2)  # per-channel gains, not one number
        block_s.gamma2.uniform_(0.05, 0.2)
    out = scaled(x)
    for k in (1, 2, 3):
        assert _rel(scaled(rotate_field(x, k)), rotate_field(out, k)) < 1e-5
    # x + gamma * branch, with gamma on the channel axis of the tokens
    tokens = x.permute(0, 3, 4, 1, 2).reshape(2, 49, 4, 8)
    with torch.no_grad():
        a = block_p.attn(block_p.norm1(tokens))
        h = tokens + a * block_s.gamma1
        f = block_p.ff2(block_p.act(block_p.ff1(block_p.norm2(h))))
        expected = h + f * block_s.gamma2
        assert _rel(block_s(tokens), expected) < 1e-5


def test_encoder_without_positions_commutes_with_cyclic_token_shifts():
    torch.manual_seed(1)
    x = _field(M=4, C=8, H=9)
    enc = SteerableTransformerEncoder(8, 4, 1, 4, (9, 9), positional=False)
    shift = (2, -3)
    out = enc(torch.roll(x, shift, dims=(-2, -1)))
    assert _rel(out, torch.roll(enc(x), shift, dims=(-2, -1))) < 1e-5


def test_attention_scores_are_rotation_invariant_and_r0_terms_stay_zero():
    torch.manual_seed(2)
    att = SteerableAttention(8, 2, 4, (9, 9), positional=True)
    x = _field(M=4, C=8, H=9)
    tokens = x.permute(0, 3, 4, 1, 2).reshape(2, 81, 4, 8)
    rot = rotate_field(x, 1).permute(0, 3, 4, 1, 2).reshape(2, 81, 4, 8)
    A = att.scores(tokens).abs()
    A_rot = att.scores(rot).abs()
    # token i of the rotated map sits at the rotated position: permute before comparing
    perm = torch.rot90(torch.arange(81).reshape(9, 9), 1).reshape(-1)
    assert torch.allclose(A_rot, A[:, :, perm][:, :, :, perm], rtol=1e-5, atol=1e-5 * A.max().item())
    # one optimiser step: the r = 0 (i = j) positional entries remain exactly zero
    opt = torch.optim.SGD(att.parameters(), lr=0.1)
    att(tokens).abs().sum().backward()
    opt.step()
    for table in (att.pos_k, att.pos_v):
        diag = att.positional_terms(table).diagonal(dim1=-2, dim2=-1)
        assert diag.abs().max().item() == 0.0


@torch.no_grad()
def test_attention_matches_a_loop_over_the_formula():
    torch.manual_seed(3)
    M, D, h, side = 3, 4, 2, 3
    att = SteerableAttention(D, h, M, (side, side), positional=True)
    x = _field(M=M, C=D, H=side, b=1).permute(0, 3, 4, 1, 2).reshape(1, side * side, M, D)
    got = att(x)[0]
    n, dq = side * side, D // h
    q = torch.einsum("mod,nmd->nmo", att.q.weight, x[0]).reshape(n, M, h, dq)
    k = torch.einsum("mod,nmd->nmo", att.k.weight, x[0]).reshape(n, M, h, dq)
    v = torch.einsum("mod,nmd->nmo", att.v.weight, x[0]).reshape(n, M, h, dq)
    rows, cols = np.divmod(np.arange(n), side)
    sq = sorted({(rows[i] - rows[j]) ** 2 + (cols[i] - cols[j]) ** 2
                 for i in range(n) for j in range(n)})
    out = torch.zeros(n, M, h, dq, dtype=torch.complex64)
    for head in range(h):
        logits = torch.zeros(n, n)
        terms = {}
        for i in range(n):
            for j in range(n):
                dr, dc = rows[i] - rows[j], cols[i] - cols[j]
                r = sq.index(dr**2 + dc**2)
                A = 0j
                for m in range(M):
                    E = 0 if r == 0 else complex(np.exp(-1j * m * np.arctan2(dc, dr)))
                    pk = 0 if r == 0 else att.pos_k[m, head, :, r - 1]
                    pv = 0 if r == 0 else att.pos_v[m, head, :, r - 1]
                    A = A + (q[i, m, head].conj() * (k[j, m, head] + pk * E)).sum()
                    terms[i, j, m] = v[j, m, head] + pv * E
                logits[i, j] = abs(complex(A)) / math.sqrt(dq)
        a = torch.softmax(logits, dim=1)
        for i in range(n):
            for m in range(M):
                out[i, m, head] = sum(a[i, j] * terms[i, j, m] for j in range(n))
    want = torch.einsum("mod,nmd->nmo", att.o.weight, out.reshape(n, M, D))
    assert torch.allclose(got, want, atol=1e-4)


# ---------------------------------------------------------------------------- layers (test 3)
@pytest.mark.parametrize("make", [
    lambda: SteerableConv2d(8, 3, 4, 5, kind="type2", filter_freqs="signed"),
    lambda: SteerableConv2d(8, 3, 4, 5, kind="type2", filter_freqs="nonneg"),
    lambda: SteerableConv2d(8, 3, 4, 9, kind="type2", padding="valid"),
    lambda: CGNonlinearity(8, 4, wrap=False),
    lambda: NormNonlinearity(8, 4, "relu"),
    lambda: FourierReLU(4, 40),
    lambda: FrequencyNorm(),
], ids=["conv-signed", "conv-nonneg", "conv-valid", "cg", "norm-nl", "fourier-relu", "norm"])
def test_each_layer_is_rot90_equivariant(make):
    torch.manual_seed(4)
    layer = make()
    x = _field(M=4, C=8, H=10 if not isinstance(layer, SteerableConv2d) else 11)
    out = layer(x)
    for k in (1, 2, 3):
        assert _rel(layer(rotate_field(x, k)), rotate_field(out, k)) < 1e-5


def test_type1_conv_pool_and_readout_are_rot90_equivariant():
    torch.manual_seed(5)
    conv = SteerableConv2d(1, 4, 4, 5, kind="type1")
    img = torch.rand(2, 1, 12, 12)
    out = conv(img)
    for k in (1, 2, 3):
        rot = conv(torch.rot90(img, k, dims=(-2, -1)))
        assert _rel(rot, rotate_field(out, k)) < 1e-5
        assert _rel(complex_avg_pool(rot), rotate_field(complex_avg_pool(out), k)) < 1e-5
        assert _rel(norm_flatten(rot), norm_flatten(out)) < 1e-5


def test_type2_conv_matches_direct_correlation_of_the_formula():
    torch.manual_seed(6)
    M, C_in, C_out, k, R = 3, 2, 2, 5, 2
    conv = SteerableConv2d(C_in, C_out, M, k, R, kind="type2", filter_freqs="signed")
    x = _field(M=M, C=C_in, H=7, b=1)
    got = conv(x)[0].detach().numpy()
    basis = filter_basis(k, R, np.arange(-(M - 1), M)).numpy()
    w = conv.weight.detach().numpy()
    xn = x[0].numpy()
    want = np.zeros((M, C_out, 7, 7), dtype=complex)
    for out_m in range(M):
        for o in range(C_out):
            for m in range(M):
                for c in range(C_in):
                    for rho in range(R):
                        psi = basis[out_m - m + M - 1, rho]
                        # scipy conjugates its second argument: pass conj(psi)
                        want[out_m, o] += w[out_m, o, m, c, rho] * correlate2d(
                            xn[m, c], np.conj(psi), mode="same")
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


def test_cg_nonlinearity_matches_the_selection_rule():
    torch.manual_seed(7)
    cg = CGNonlinearity(2, 4, wrap=False)
    x = _field(M=4, C=2, H=3, b=1)
    got = cg(x)[0]
    want = torch.zeros_like(got)
    pairs = [(m, n) for m in range(4) for n in range(m, 4) if m + n < 4]
    for p, (m, n) in enumerate(pairs):
        want[m + n] += cg.weight[p][:, None, None] * x[0, m] * x[0, n]
    assert torch.allclose(got, want, atol=1e-5)


# ----------------------------------------------------------------------- known answer (test 5)
@pytest.mark.parametrize("m", [1, 2, 3])
def test_type1_response_phase_follows_the_rotation(m):
    """An image ``cos(m (phi - a)) * bump(r)`` (generated analytically at each angle a, no
    interpolation) gives a frequency-m response at the centre with phase ``-m a + const``."""
    conv = SteerableConv2d(1, 1, 4, 9, n_radius=4, kind="type1")
    with torch.no_grad():
        conv.weight.zero_()
        conv.weight[m, 0, 0, 2] = 1.0  # one ring, frequency m
    r, theta = offset_angles(9)
    phases = []
    angles = np.radians([0.0, 20.0, 37.0, 70.0])
    for a in angles:
        img = np.exp(-((r - 3.0) ** 2) / 2) * np.cos(m * (theta - a))
        out = conv(torch.tensor(img, dtype=torch.float32)[None, None])
        phases.append(torch.angle(out[0, m, 0, 4, 4]).item())
    expected = np.angle(np.exp(-1j * m * (angles - angles[0])))
    got = np.angle(np.exp(1j * (np.array(phases) - phases[0])))
    assert np.abs(np.angle(np.exp(1j * (got - expected)))).max() < 0.05


# ------------------------------------------------------------------------- CG wrap (test 6)
def test_cg_wrap_is_exact_only_for_the_cyclic_group_of_order_m():
    torch.manual_seed(8)
    for M, exact in ((8, True), (6, False)):
        cg = CGNonlinearity(3, M, wrap=True)
        x = _field(M=M, C=3, H=8)
        err = _rel(cg(rotate_field(x, 1)), rotate_field(cg(x), 1))
        assert (err < 1e-5) if exact else (err > 1e-2), (M, err)


# ------------------------------------------------------------------- positional geometry (7)
def test_positional_geometry_of_a_7x7_grid():
    r_index, theta, R = grid_geometry(7, 7)
    assert R == 26
    assert (r_index == r_index.T).all() and (np.diag(r_index) == 0).all()
    assert (r_index[~np.eye(49, dtype=bool)] > 0).all()
    E, _, _ = relative_harmonics(7, 7, 4)
    off = ~np.eye(49, dtype=bool)
    assert np.allclose(np.exp(1j * theta.T[off]), -np.exp(1j * theta[off]))
    for m in range(4):
        assert torch.allclose(E[m].T, ((-1) ** m) * E[m], atol=1e-6)


# -------------------------------------------------------------------------- bad input (issue 7)
def test_unrepresentable_band_limits_and_shapes_are_refused():
    with pytest.raises(SteerableConfigError, match="freq_cutoff"):
        SteerableConv2d(1, 2, 0, 5, kind="type1")
    with pytest.raises(SteerableConfigError, match="n_angle"):
        FourierReLU(8, 10)
    with pytest.raises(SteerableConfigError, match="odd"):
        SteerableConv2d(2, 2, 4, 4)
    with pytest.raises(SteerableConfigError, match="not divisible"):
        SteerableAttention(6, 4, 4, (3, 3))
    conv = SteerableConv2d(2, 2, 4, 5)
    with pytest.raises(SteerableConfigError, match=r"M=4"):
        conv(_field(M=3, C=2, H=6))
    with pytest.raises(SteerableConfigError, match="odd sizes"):
        complex_avg_pool(_field(M=2, C=1, H=7))
    block = SteerableEncoderBlock(8, 2, 4, (3, 3))
    with pytest.raises(SteerableConfigError, match="expected tokens"):
        block(torch.zeros(1, 10, 4, 8, dtype=torch.complex64))
