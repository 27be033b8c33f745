"""The 3D steerable layers: spherical harmonics, Wigner matrices and Clebsch-Gordan couplings
against closed forms, every layer's equivariance on the 24 exact rotations of the voxel grid,
the conv and the CG product against brute-force sums of their formulas, the attention against a
loop over its equations, and the refusal of degrees the layers cannot represent."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from icml25.pipelines.steerable.attention3d import (
    SteerableAttention3d,
    SteerableTransformerEncoder3d,
    grid_geometry3d,
)
from icml25.pipelines.steerable.evaluation3d import (
    invariance_error_cube,
    rotate_voxels_interpolated,
)
from icml25.pipelines.steerable.harmonics import SteerableConfigError
from icml25.pipelines.steerable.harmonics3d import (
    cube_rotations,
    real_clebsch_gordan,
    real_sph_harm,
    rotate_field3d,
    rotate_voxels,
    wigner_d_real,
)
from icml25.pipelines.steerable.layers3d import (
    CGNonlinearity3d,
    FieldBatchNorm3d,
    SteerableConv3d,
    avg_pool3d_field,
    frequency_norm3d,
    norm_flatten3d,
)
from icml25.pipelines.steerable.models3d import PlainCNN3d, SteerableNet3d, SteerableNet3dConfig

pytestmark = pytest.mark.usefixtures("one_thread")

ROTATIONS = cube_rotations()


def _random_rotation(seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


# ------------------------------------------------------------------------ geometry
def test_degree_one_harmonics_are_the_direction_in_y_z_x_order():
    u = np.random.default_rng(0).normal(size=(20, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    expected = np.sqrt(3 / (4 * np.pi)) * u[:, [1, 2, 0]]
    np.testing.assert_allclose(real_sph_harm(1, u), expected, atol=1e-12)
    np.testing.assert_allclose(real_sph_harm(0, u), np.full((20, 1), 0.5 / np.sqrt(np.pi)))


@pytest.mark.parametrize("ell", [1, 2, 3])
def test_wigner_matrices_are_an_orthogonal_representation(ell):
    R1, R2 = _random_rotation(1), _random_rotation(2)
    D1, D2, D12 = wigner_d_real(ell, R1), wigner_d_real(ell, R2), wigner_d_real(ell, R1 @ R2)
    np.testing.assert_allclose(D1 @ D1.T, np.eye(2 * ell + 1), atol=1e-10)
    np.testing.assert_allclose(D12, D1 @ D2, atol=1e-10)  # homomorphism
    if ell == 1:  # closed form: Y_1 is the direction in (y, z, x) order
        P = np.eye(3)[[1, 2, 0]]
        np.testing.assert_allclose(D1, P @ R1 @ P.T, atol=1e-10)


def test_clebsch_gordan_matches_dot_and_cross_products():
    a, b = np.random.default_rng(3).normal(size=(2, 3))
    P = np.eye(3)[[1, 2, 0]]  # Cartesian -> (y, z, x)
    ya, yb = P @ a, P @ b
    dot = np.einsum("ijk,i,j->k", real_clebsch_gordan(1, 1, 0), ya, yb)
    assert abs(abs(dot[0]) - abs(a @ b) / np.sqrt(3)) < 1e-10
    cross = np.einsum("ijk,i,j->k", real_clebsch_gordan(1, 1, 1), ya, yb)
    expected = P @ np.cross(a, b) / np.sqrt(6)  # Levi-Civita / its norm sqrt(6)
    assert min(np.abs(cross - expected).max(), np.abs(cross + expected).max()) < 1e-10


@pytest.mark.parametrize(("l1", "l2", "ell"), [(1, 1, 2), (2, 1, 1), (2, 2, 2), (1, 2, 3)])
def test_clebsch_gordan_is_equivariant_for_unseen_rotations(l1, l2, ell):
    C = real_clebsch_gordan(l1, l2, ell)
    R = _random_rotation(99)
    a = np.random.default_rng(4).normal(size=2 * l1 + 1)
    b = np.random.default_rng(5).normal(size=2 * l2 + 1)
    lhs = np.einsum("ijk,i,j->k", C, wigner_d_real(l1, R) @ a, wigner_d_real(l2, R) @ b)
    rhs = wigner_d_real(ell, R) @ np.einsum("ijk,i,j->k", C, a, b)
    np.testing.assert_allclose(lhs, rhs, atol=1e-10)


def test_selection_rule_and_degree_limits_are_refused():
    with pytest.raises(SteerableConfigError, match="cannot couple"):
        real_clebsch_gordan(1, 1, 3)
    with pytest.raises(SteerableConfigError, match="out_degree: got 5"):
        SteerableConv3d(1, 2, 0, 5)
    with pytest.raises(SteerableConfigError, match="max_degree: got -1"):
        CGNonlinearity3d(2, -1)
    with pytest.raises(SteerableConfigError, match="kernel_size: got 4"):
        SteerableConv3d(1, 2, 0, 1, kernel_size=4)
    with pytest.raises(SteerableConfigError, match="n_radius: got 2"):
        SteerableConv3d(1, 2, 0, 1, kernel_size=3, n_radius=2)
    with pytest.raises(SteerableConfigError, match="odd map"):
        SteerableNet3d(SteerableNet3dConfig(grid=12, widths=(2, 2, 2)))
    with pytest.raises(SteerableConfigError, match=r"voxels: expected a batch \[B, 1, 8, 8, 8\]"):
        PlainCNN3d((2,), grid=8)(torch.zeros(2, 1, 8, 8, 6))


def test_the_cube_group_has_24_proper_rotations_and_rotates_like_rot90():
    assert len(ROTATIONS) == 24
    assert len({R.tobytes() for R in ROTATIONS}) == 24
    assert all(np.isclose(np.linalg.det(R), 1) for R in ROTATIONS)
    keys = {R.astype(int).tobytes() for R in ROTATIONS}
    assert all((A @ B).astype(int).tobytes() in keys for A in ROTATIONS for B in ROTATIONS)
    x = torch.rand(1, 6, 6, 6)
    # a quarter turn about axis 2 maps axis 0 to axis 1: out[p] = in[R^T p]
    R = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(rotate_voxels(x, R).numpy(),
                                  np.rot90(x.numpy(), 1, axes=(1, 2)))
    np.testing.assert_allclose(rotate_voxels_interpolated(x.numpy(), R),
                               rotate_voxels(x, R).numpy(), atol=1e-6)


# ------------------------------------------------------------------------- layers
def _field(L=1, C=3, side=6, seed=0):
    return torch.randn(2, (L + 1) ** 2, C, side, side, side,
                       generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("L", [1, 2])
def test_every_layer_is_equivariant_on_the_24_cube_rotations(L):
    torch.manual_seed(0)
    x = _field(L, side=6 if L == 1 else 4)
    conv1 = SteerableConv3d(1, 3, 0, L, kernel_size=3)
    conv2 = SteerableConv3d(3, 4, L, L, kernel_size=5 if L == 1 else 3, n_radius=2 if L == 1
                            else 1)
    cg = CGNonlinearity3d(3, L)
    bn = FieldBatchNorm3d(3, L)
    scalar = torch.rand(2, 1, *x.shape[-3:])
    for R in ROTATIONS[1:]:
        g = lambda f, R=R: rotate_field3d(f, R, L)  # noqa: E731
        assert _rel(conv1(rotate_voxels(scalar, R)), g(conv1(scalar))) < 1e-5
        assert _rel(conv2(g(x)), g(conv2(x))) < 1e-5
        assert _rel(cg(g(x)), g(cg(x))) < 1e-5
        assert _rel(frequency_norm3d(g(x)), g(frequency_norm3d(x))) < 1e-5
        assert _rel(avg_pool3d_field(g(x)), g(avg_pool3d_field(x))) < 1e-5
        for mode in (True, False):
            bn.train(mode)
            assert _rel(bn(g(x)), g(bn(x))) < 1e-5
        assert _rel(norm_flatten3d(g(x), L), norm_flatten3d(x, L)) < 1e-5
    # the transposed action D(R)^T on a quarter turn is not a symmetry: the test can fail
    R = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
    Dt = torch.from_numpy(np.linalg.inv(wigner_d_real(1, R))).float()
    D = torch.block_diag(torch.ones(1, 1), Dt, *([torch.eye(5)] if L == 2 else []))
    wrong = torch.einsum("kj,bjc...->bkc...", D, rotate_voxels(conv2(x), R))
    assert _rel(conv2(rotate_field3d(x, R, L)), wrong) > 1e-2


def test_conv3d_matches_a_direct_sum_of_its_formula():
    torch.manual_seed(1)
    L, C_in, C_out, s = 1, 2, 2, 3
    conv = SteerableConv3d(C_in, C_out, L, L, kernel_size=s)
    x = _field(L, C_in, 5, seed=2)
    out = conv(x)
    basis = conv.basis.numpy()  # [paths, K_out, K_in, rho, s, s, s] (coupled harmonics)
    w = conv.weight.detach().numpy()
    xn = np.pad(x.numpy(), [(0, 0)] * 3 + [(1, 1)] * 3)
    p = (2, 1, 3)
    expected = np.zeros((4, C_out))
    for path, k, o, j, c in itertools.product(range(len(conv.paths)), range(4), range(C_out),
                                              range(4), range(C_in)):
        patch = xn[0, j, c, p[0]:p[0] + s, p[1]:p[1] + s, p[2]:p[2] + s]
        expected[k, o] += sum(w[path, o, c, r] * (basis[path, k, j, r] * patch).sum()
                              for r in range(basis.shape[3]))
    np.testing.assert_allclose(out[0, :, :, p[0], p[1], p[2]].detach().numpy(), expected,
                               atol=1e-5)
    # the scalar-to-scalar filter (l = l1 = l2 = 0) is radial: constant on each shell
    scalar = basis[conv.paths.index((0, 0, 0)), 0, 0, 0]
    u = np.stack(np.meshgrid(*[np.arange(3) - 1.0] * 3, indexing="ij"), -1)
    r = np.linalg.norm(u, axis=-1)
    for shell in (1.0, np.sqrt(2), np.sqrt(3)):
        values = scalar[np.isclose(r, shell)]
        assert np.ptp(values) < 1e-6 and values[0] > 0
    # the vector filter of a degree-0 input (l = 1, l1 = 0, l2 = 1) points along the offset
    vec = basis[conv.paths.index((1, 0, 1)), 1:4, 0, 0]  # [3 (y, z, x), s, s, s]
    cart = np.moveaxis(vec, 0, -1)[..., [2, 0, 1]]  # -> (x, y, z)
    cos = (cart * u).sum(-1) / (np.linalg.norm(cart, axis=-1) * r + 1e-300)
    assert np.allclose(np.abs(cos[r > 0]), 1.0, atol=1e-5)


def test_cg_nonlinearity_matches_the_full_double_sum():
    torch.manual_seed(2)
    L, C = 1, 3
    cg = CGNonlinearity3d(C, L)
    x = _field(L, C, 2, seed=3)
    Q, w = cg.Q.numpy(), cg.weight.detach().numpy()
    xn = x.numpy()
    expected = np.einsum("pijk,pc,bicxyz,bjcxyz->bkcxyz", Q, w, xn, xn)
    np.testing.assert_allclose(cg(x).detach().numpy(), expected, atol=1e-5)


# ---------------------------------------------------------------------- attention
def test_token_geometry_of_a_4_cube():
    r, Y, R = grid_geometry3d(4, 1)
    offsets = {a * a + b * b + c * c for a, b, c in itertools.product(range(4), repeat=3)}
    assert len(offsets) - 1 == R
    assert (r == r.T).all() and (np.diag(r) == 0).all() and (r[~np.eye(64, dtype=bool)] > 0).all()
    np.testing.assert_allclose(Y[1:].transpose(0, 2, 1), -Y[1:], atol=1e-12)  # odd degree
    assert np.all(Y[:, np.arange(64), np.arange(64)] == 0)


def test_attention3d_matches_a_loop_over_its_equations():
    torch.manual_seed(3)
    L, D, h, g = 1, 4, 2, 2
    att = SteerableAttention3d(D, h, L, g)
    x = torch.randn(1, g**3, 4, D)
    out = att(x)[0].detach().numpy()
    Wq, Wk, Wv, Wo = (m.weight.detach().numpy() for m in (att.q, att.k, att.v, att.o))
    deg = [0, 1, 1, 1]
    r, Y, _ = grid_geometry3d(g, L)
    Pk = np.concatenate([np.zeros((L + 1, h, D // h, 1)), att.pos_k.detach().numpy()], -1)
    Pv = np.concatenate([np.zeros((L + 1, h, D // h, 1)), att.pos_v.detach().numpy()], -1)
    xn = x[0].numpy()
    q = np.stack([xn[:, k] @ Wq[deg[k]].T for k in range(4)], 1).reshape(8, 4, h, D // h)
    kk = np.stack([xn[:, k] @ Wk[deg[k]].T for k in range(4)], 1).reshape(8, 4, h, D // h)
    v = np.stack([xn[:, k] @ Wv[deg[k]].T for k in range(4)], 1).reshape(8, 4, h, D // h)
    scale = np.sqrt((1 + 3) * D // h)
    o = np.zeros((8, 4, h, D // h))
    for head in range(h):
        A = np.zeros((8, 8))
        for i, j in itertools.product(range(8), range(8)):
            for k in range(4):
                A[i, j] += q[i, k, head] @ (kk[j, k, head]
                                            + Pk[deg[k], head, :, r[i, j]] * Y[k, i, j])
        a = np.exp(np.abs(A) / scale)
        a /= a.sum(1, keepdims=True)
        for i, j, k in itertools.product(range(8), range(8), range(4)):
            o[i, k, head] += a[i, j] * (v[j, k, head] + Pv[deg[k], head, :, r[i, j]] * Y[k, i, j])
    o = o.reshape(8, 4, D)
    expected = np.stack([o[:, k] @ Wo[deg[k]].T for k in range(4)], 1)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_encoder3d_scores_invariant_and_features_equivariant():
    torch.manual_seed(4)
    L = 1
    enc = SteerableTransformerEncoder3d(4, 2, 1, L, 4)
    x = _field(L, 4, 4, seed=5)
    tokens = lambda f: f.permute(0, 3, 4, 5, 1, 2).reshape(2, 64, 4, 4)  # noqa: E731
    att = enc.blocks[0].attn
    base = att.scores(tokens(x)).abs()
    for R in ROTATIONS[1:]:
        gx = rotate_field3d(x, R, L)
        # token t of g x carries (rotated) token idx[t] of x
        idx = rotate_voxels(torch.arange(64).reshape(1, 4, 4, 4), R).reshape(-1)
        s_rot = att.scores(tokens(gx)).abs()
        assert _rel(s_rot, base[:, :, idx][:, :, :, idx]) < 1e-5
        assert _rel(enc(gx), rotate_field3d(enc(x), R, L)) < 1e-4
    with torch.no_grad():
        assert (att.positional_terms(att.pos_k)[..., torch.arange(64), torch.arange(64)] == 0).all()


# ------------------------------------------------------------------------- models
def test_whole_3d_models_are_invariant_on_cube_rotations_and_the_cnn_is_not():
    torch.manual_seed(5)
    x = np.random.default_rng(6).random((6, 8, 8, 8)).astype(np.float32)
    for layers in (0, 1):
        net = SteerableNet3d(SteerableNet3dConfig(grid=8, widths=(2, 4), transformer_layers=layers,
                                                  head_hidden=8)).eval()
        assert invariance_error_cube(net, x) < 1e-4
    cnn = PlainCNN3d((4, 4), grid=8).eval()
    assert invariance_error_cube(cnn, x) > 1e-2


def test_paper_3d_layout_runs_on_cpu_at_tiny_width():
    """conf/paper's 3D layout (L = 2, 5^3 kernels with two shells, three convs, 32^3 -> 4^3
    tokens, one encoder layer) at tiny widths: the same code path, still exactly invariant; and
    conf/paper's parameters validate."""
    from pathlib import Path

    import yaml

    from icml25.core.params import validate_parameters
    from icml25.pipelines.steerable.builders import architecture_3d, build_network_3d
    from icml25.pipelines.steerable.params import SteerableParams

    root = Path(__file__).resolve().parents[3]
    tree = yaml.safe_load((root / "conf/base/parameters_steerable.yml").read_text())["steerable"]
    paper = yaml.safe_load((root / "conf/paper/parameters_steerable.yml").read_text())
    for key, value in paper["steerable"].items():
        tree[key] = {**tree[key], **value} if isinstance(value, dict) and isinstance(
            tree.get(key), dict) else value
    p = validate_parameters(SteerableParams, tree, "steerable")
    arch = architecture_3d(p, "steer_tf_3d")
    assert (arch["max_degree"], arch["grid"], arch["kernel_size"]) == (2, 32, 5)
    arch.update(widths=[1, 2, 2], transformer_heads=2, head_hidden=4)
    torch.manual_seed(6)
    net = build_network_3d(arch).eval()
    x = torch.rand(1, 1, 32, 32, 32)
    with torch.no_grad():
        base = net(x)
        for R in ROTATIONS[1:4]:
            assert _rel(net(rotate_voxels(x, R)), base) < 1e-4
