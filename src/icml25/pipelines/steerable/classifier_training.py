"""Training and evaluation of the image classifiers (``docs/papers/steerable.md``,
"Metrics"): Adam with step decay and validation-based early stopping through the shared
:func:`icml25.core.training.train` loop, accuracy overall and per rotation-angle bin, and the
measured invariance error of the logits under exact (90-degree) and interpolated rotations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml25.core.training import TrainLoopConfig, TrainResult, train
from icml25.pipelines.steerable.rotated_digits import check_digit_images, rotate_images


@dataclass(frozen=True)
class FitConfig:
    epochs: int = 6
    batch_size: int = 64
    lr: float = 5e-3
    weight_decay: float = 5e-4
    decay_every_epochs: int = 20
    decay_factor: float = 0.5
    eval_every_epochs: int = 1
    patience: int | None = 11
    grad_clip: float | None = None
    augment_rotation: bool = False


def rotate_batch(images: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Bilinear rotation of a batch ``[B, 1, H, W]`` about the image centre (augmentation)."""
    cos, sin = torch.cos(angles), torch.sin(angles)
    zero = torch.zeros_like(cos)
    theta = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False)


def _tensor(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))[:, None]


@torch.no_grad()
def predict_logits(model: nn.Module, images: np.ndarray | torch.Tensor,
                   batch_size: int = 500) -> torch.Tensor:
    """Logits of ``model`` in eval mode for ``images [N, H, W]`` (or ``[N, 1, H, W]``; voxel
    grids ``[N, G, G, G]`` as numpy arrays)."""
    x = images if isinstance(images, torch.Tensor) else _tensor(images)
    if x.ndim == 3:
        x = x[:, None]
    device = next(model.parameters()).device
    model.eval()
    return torch.cat([model(x[i:i + batch_size].to(device)).cpu()
                      for i in range(0, len(x), batch_size)])


def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray,
             check: Callable[..., None] = check_digit_images) -> float:
    return float(correct(model, images, labels, check).mean())


def correct(model: nn.Module, images: np.ndarray, labels: np.ndarray,
            check: Callable[..., None] = check_digit_images) -> np.ndarray:
    """Per test image: 1.0 where the top logit is the label, else 0.0 (mean = accuracy)."""
    check(images, labels, name="evaluation images")
    pred = predict_logits(model, images).argmax(1).numpy()
    return (pred == np.asarray(labels)).astype(float)


def fit_classifier(model: nn.Module, train_images: np.ndarray, train_labels: np.ndarray,
                   val_images: np.ndarray, val_labels: np.ndarray, cfg: FitConfig, seed: int,
                   progress: bool = True, desc: str = "train",
                   device: torch.device | str = "cpu",
                   check: Callable[..., None] = check_digit_images) -> TrainResult:
    """Train with cross-entropy; batches are a pure function of the step (seeded epoch
    permutations), so a run is reproducible bit for bit on the CPU. ``check`` refuses bad
    data (digit images by default; voxel grids for the 3D experiment)."""
    check(train_images, train_labels, name="training images")
    check(val_images, val_labels, name="validation images")
    n = len(train_labels)
    steps_per_epoch = max(1, math.ceil(n / cfg.batch_size))
    x_train, y_train = _tensor(train_images), torch.from_numpy(np.asarray(train_labels))
    perms: dict[int, np.ndarray] = {}

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, k = divmod(step, steps_per_epoch)  # the loop counts steps from 0
        if epoch not in perms:
            perms.clear()
            perms[epoch] = np.random.default_rng([seed, epoch]).permutation(n)
        idx = torch.from_numpy(perms[epoch][k * cfg.batch_size:(k + 1) * cfg.batch_size])
        x = x_train[idx]
        if cfg.augment_rotation:
            gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
            x = rotate_batch(x, torch.rand(len(idx), generator=gen) * (2 * math.pi))
        return x.to(device), y_train[idx].to(device)

    def loss_fn(net: nn.Module, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(net(x), y)

    def eval_fn(net: nn.Module) -> float:
        return 1.0 - accuracy(net, val_images, val_labels, check)

    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(
        optimizer, step_size=cfg.decay_every_epochs * steps_per_epoch, gamma=cfg.decay_factor)
    loop = TrainLoopConfig(
        steps=cfg.epochs * steps_per_epoch, grad_clip=cfg.grad_clip, log_every=steps_per_epoch,
        eval_every=cfg.eval_every_epochs * steps_per_epoch,
        early_stopping_patience=cfg.patience, progress=progress, desc=desc)
    return train(model, optimizer, batch_fn, loss_fn, loop, scheduler=scheduler,
                 eval_fn=eval_fn, device=device)


def bin_accuracy(hits: np.ndarray, angles: np.ndarray, n_bins: int = 12,
                 period: float = 2 * np.pi) -> np.ndarray:
    """Accuracy per rotation-angle bin of width ``period / n_bins`` (NaN for an empty bin): the
    mean of the per-image ``hits`` of :func:`correct`, so the test set is run once for both."""
    hits = np.asarray(hits, dtype=float)
    bins = np.minimum((np.mod(angles, period) / period * n_bins).astype(int), n_bins - 1)
    return np.array([hits[bins == b].mean() if (bins == b).any() else np.nan
                     for b in range(n_bins)])


def invariance_error_rot90(model: nn.Module, images: np.ndarray) -> float:
    """``max_k max |f(rot90^k x) - f(x)| / max |f(x)|`` over k = 1, 2, 3: exact group elements
    of the pixel grid, so an invariant model shows float rounding only."""
    x = _tensor(images)
    base = predict_logits(model, x)
    scale = base.abs().max().item()
    errs = [(predict_logits(model, torch.rot90(x, k, dims=(-2, -1))) - base).abs().max().item()
            for k in (1, 2, 3)]
    return max(errs) / scale


def invariance_error_angles(model: nn.Module, images: np.ndarray, angles_deg: list[float]
                            ) -> dict[float, float]:
    """The same relative error for rotations the grid does not allow (bilinear interpolation);
    never exact, reported per angle."""
    base = predict_logits(model, images)
    scale = base.abs().max().item()
    out = {}
    for a in angles_deg:
        rotated = rotate_images(images, np.full(len(images), np.radians(a)))
        out[a] = (predict_logits(model, rotated) - base).abs().max().item() / scale
    return out


def shift_images(images: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Images ``[N, H, W]`` (or voxel grids ``[N, G, G, G]``) moved by integer shifts
    ``shifts [N, d]``, one per spatial axis (positive = towards higher indices), the uncovered
    pixels zero (no wrap-around)."""
    images = np.asarray(images)
    shifts = np.asarray(shifts)
    spatial = images.shape[1:]
    if images.ndim < 3 or shifts.shape != (len(images), len(spatial)):
        raise ValueError(f"shift_images: expected images [N, *spatial] and shifts "
                         f"[N, {len(spatial)}], got {images.shape} and {shifts.shape}")
    if np.any(np.abs(shifts) >= np.asarray(spatial)):
        raise ValueError(f"shift_images: shifts must be smaller than the grid {spatial}")
    out = np.zeros_like(images)
    for i, shift in enumerate(shifts.astype(int)):
        src = tuple(slice(max(0, -d), n - max(0, d)) for d, n in zip(shift, spatial, strict=True))
        dst = tuple(slice(max(0, d), n - max(0, -d)) for d, n in zip(shift, spatial, strict=True))
        out[(i, *dst)] = images[(i, *src)]
    return out


def random_shifts(n: int, max_shift: int, seed: int, dims: int = 2) -> np.ndarray:
    """``[n, dims]`` integer shifts uniform on ``-max_shift..max_shift`` per axis (seeded)."""
    if max_shift < 0:
        raise ValueError(f"max_shift: got {max_shift}; expected >= 0")
    return np.random.default_rng(seed).integers(-max_shift, max_shift + 1, (n, dims))
