"""Translation: the global-average read-out against the authors' whole-map valid conv, the
shift helper behind ``acc_shift``, and the norm-GELU of the transformer feed-forward layer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml25.pipelines.steerable.classifier_training import (
    invariance_error_rot90,
    random_shifts,
    shift_images,
)
from icml25.pipelines.steerable.harmonics import SteerableConfigError
from icml25.pipelines.steerable.layers2d import NormNonlinearity, invariant_gap, rotate_field
from icml25.pipelines.steerable.models2d import SteerableNet, SteerableNetConfig

pytestmark = pytest.mark.usefixtures("one_thread")

#: a 60x60 image has a 15x15 final map: a small pattern at the centre keeps every feature map's
#: support (it grows with each conv) away from the border, where zero padding truncates it
BIG = dict(image_size=60, freq_cutoff=3, widths=(2, 4, 4), pool_after=(0, 1),
           nonlinear_after=(0, 1), final_channels=8, head_hidden=16, transformer_heads=2,
           ff_mult=2)


def _centre_patterns(n: int = 4, size: int = 60, half: int = 2, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, 1, size, size)
    c = size // 2
    x[:, :, c - half:c + half, c - half:c + half] = torch.rand(n, 1, 2 * half, 2 * half,
                                                               generator=g)
    return x


def _shift(x: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    shifts = np.tile([[dy, dx]], (len(x), 1))
    return torch.from_numpy(shift_images(x[:, 0].numpy(), shifts))[:, None]


@torch.no_grad()
def _rel_change(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    base = net(x)
    return float((net(y) - base).abs().max() / base.abs().max())


@torch.no_grad()
def test_gap_readout_is_exactly_invariant_to_shifts_on_the_pool_lattice():
    """A shift by a multiple of the total pool stride (4 px) commutes with every conv, norm,
    nonlinearity and pool while the pattern stays clear of the border, so the average over
    positions of the invariant norms does not change; the authors' whole-map valid conv weighs
    each position differently and changes by tens of percent."""
    torch.manual_seed(0)
    x = _centre_patterns()
    gap = SteerableNet(SteerableNetConfig(**BIG, readout="gap")).eval()
    valid = SteerableNet(SteerableNetConfig(**BIG, readout="valid")).eval()
    for dy, dx in [(4, -4), (-4, 0), (0, 4)]:
        assert _rel_change(gap, x, _shift(x, dy, dx)) < 1e-5
        assert _rel_change(valid, x, _shift(x, dy, dx)) > 1e-2
    # off the lattice the pools alias: close, not exact
    assert 1e-5 < _rel_change(gap, x, _shift(x, 1, 2)) < _rel_change(valid, x, _shift(x, 1, 2))


@pytest.mark.parametrize("transformer", [0, 1])
def test_gap_readout_models_stay_rot90_invariant(transformer):
    torch.manual_seed(0)
    net = SteerableNet(SteerableNetConfig(**BIG, readout="gap", transformer_layers=transformer))
    x = torch.rand(6, 60, 60).numpy()
    assert invariance_error_rot90(net, x) < 1e-4


def test_invariant_gap_ignores_position_and_rotation_of_the_field():
    g = torch.Generator().manual_seed(1)
    f = torch.complex(torch.randn(2, 3, 5, 7, 7, generator=g),
                      torch.randn(2, 3, 5, 7, 7, generator=g))
    out = invariant_gap(f)
    ref = torch.sqrt((f.abs() ** 2).sum(1)).mean(dim=(-2, -1))  # from the definition
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(invariant_gap(torch.roll(f, (2, 3), (-2, -1))), out,
                               rtol=1e-5, atol=1e-6)
    for k in (1, 2, 3):
        torch.testing.assert_close(invariant_gap(rotate_field(f, k)), out, rtol=1e-5,
                                   atol=1e-6)


def test_unknown_readout_is_refused():
    with pytest.raises(SteerableConfigError, match="readout"):
        SteerableNet(SteerableNetConfig(**BIG, readout="max"))


def test_shift_images_moves_pixels_and_fills_zeros():
    img = np.arange(1, 26, dtype=np.float32).reshape(1, 5, 5)
    out = shift_images(img, np.array([[1, -2]]))
    expected = np.zeros_like(img)
    expected[0, 1:, :3] = img[0, :4, 2:]
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(shift_images(img, np.zeros((1, 2), int)), img)
    vox = np.random.default_rng(0).random((2, 4, 4, 4)).astype(np.float32)
    out3 = shift_images(vox, np.array([[1, 0, -1], [0, 0, 0]]))
    np.testing.assert_array_equal(out3[0, 1:, :, :3], vox[0, :3, :, 1:])
    assert (out3[0, 0] == 0).all() and (out3[0, :, :, 3] == 0).all()
    np.testing.assert_array_equal(out3[1], vox[1])
    with pytest.raises(ValueError, match="shifts"):
        shift_images(img, np.array([[5, 0]]))
    with pytest.raises(ValueError, match="shifts"):
        shift_images(img, np.array([1, 0]))


def test_random_shifts_are_seeded_and_cover_the_range():
    a = random_shifts(2000, 3, seed=0)
    np.testing.assert_array_equal(a, random_shifts(2000, 3, seed=0))
    assert not np.array_equal(a, random_shifts(2000, 3, seed=1))
    assert a.shape == (2000, 2) and set(np.unique(a)) == set(range(-3, 4))
    assert random_shifts(5, 1, 0, dims=3).shape == (5, 3)


def _gelu(v: float) -> float:
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def test_norm_gelu_puts_eps_inside_the_activation():
    """``F * s(|F| + eps + b) / (|F| + eps)`` with eps = 1e-4, element by element."""
    torch.manual_seed(0)
    layer = NormNonlinearity(3, 2, "gelu")
    with torch.no_grad():
        layer.bias.copy_(torch.tensor([[-0.3, 0.0, 0.2], [0.5, -1.0, 0.1]]))
    x = torch.complex(torch.randn(4, 2, 3), torch.randn(4, 2, 3))
    x[0, 0, 0] = 0.0  # the modulus at zero: gelu(1e-4 + b) / 1e-4 times 0
    x[1, 1, 1] = 1e-5 + 0j  # near zero the eps placement matters most
    out = layer(x)
    eps = 1e-4
    expected = torch.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        f = complex(x[idx])
        r = math.sqrt(abs(f) ** 2 + 1e-12)
        b = float(layer.bias[idx[-2], idx[-1]])
        expected[idx] = f * _gelu(r + eps + b) / (r + eps)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-7)
    # the other placement, s(|F| + b) / (|F| + eps), differs measurably near zero
    r = 1e-5
    assert abs(_gelu(r + eps + 0.1) - _gelu(r + 0.1)) / _gelu(r + 0.1) > 1e-4
