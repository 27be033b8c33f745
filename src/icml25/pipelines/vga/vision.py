"""Training and evaluating the vision models on the rendered tasks.

AdamW, cross-entropy, cosine schedule after a linear warm-up, optional dihedral augmentation
(``augment``; the paper uses none, ``conf/base`` turns it on); the validation set is drawn in
the training layout(s), optionally after re-estimating the BatchNorm statistics
(``recalibrate_batchnorm``), and the reported model is the checkpoint with the best validation
accuracy (the shared loop restores it). Test accuracy of every epoch can be tracked
too: its maximum is the paper-comparable, optimistic "best test accuracy over epochs".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from icml25.core.training import TrainLoopConfig, train
from icml25.pipelines.vga.models import build_model
from icml25.pipelines.vga.render import from_png


def decode_stack(pngs: pd.Series | list) -> np.ndarray:
    """PNG bytes -> uint8 array (N, H, W); all images of one task share a shape."""
    arrays = [from_png(b) for b in pngs]
    if not arrays:
        raise ValueError("no images to decode")
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"images of one task differ in shape: {sorted(shapes)}")
    return np.stack(arrays)


def to_input(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W) on white -> float (N, 1, H, W) ink intensity in [0, 1]."""
    return torch.from_numpy((255.0 - images.astype(np.float32)) / 255.0).unsqueeze(1)


@torch.no_grad()
def predict(model: nn.Module, images: np.ndarray, batch_size: int = 256,
            device: torch.device | str = "cpu") -> np.ndarray:
    """Class predictions (argmax of the logits) for uint8 images."""
    model.eval()
    out = []
    for start in range(0, len(images), batch_size):
        x = to_input(images[start:start + batch_size]).to(device)
        out.append(model(x).argmax(dim=1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=int)


@dataclass
class TrainedClassifier:
    model: nn.Module
    best_epoch: int
    val_acc_by_epoch: list[float] = field(default_factory=list)
    test_acc_by_epoch: dict[str, list[float]] = field(default_factory=dict)
    train_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0


def dihedral_augment(x: torch.Tensor, rng: np.random.Generator, pair: bool) -> torch.Tensor:
    """A random symmetry of each drawing; no task's answer depends on the drawing's orientation.

    Single drawings: one of the 8 rotations/reflections of the square. Pair images keep their
    panel order (left Kamada-Kawai, right test layout): only vertical flips of the whole image.
    """
    out = x.clone()
    for i in range(len(x)):
        if pair:
            if rng.random() < 0.5:
                out[i] = torch.flip(x[i], dims=[-2])
            continue
        img = torch.rot90(x[i], k=int(rng.integers(4)), dims=(-2, -1))
        out[i] = torch.flip(img, dims=[-1]) if rng.random() < 0.5 else img
    return out


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, batches) -> None:
    """Re-estimate every BatchNorm's running statistics as the plain average over ``batches``
    with the current weights ("precise BN", Wu and Johnson 2021). The running averages that
    training keeps mix statistics of weights many steps old; when the class signal is a small
    shift of a feature (one node more in nine), that lag can be larger than the signal and
    the evaluation-mode model answers one class (measured on the node-count control with the
    CNN of ``conf/base``: validation accuracy 0.50 after seven of eight epochs on ``kk``; on
    ``planar`` 0.50 after epochs 1, 3 and 5 and 0.98-1.00 after the others)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    was_training = model.training
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the batches below
    model.train()
    for x in batches:
        model(x)
    for m, momentum in zip(norms, momenta, strict=True):
        m.momentum = momentum
    model.train(was_training)


def cosine_with_warmup(warmup_steps: int, total_steps: int):
    """LR multiplier: linear warm-up to 1, then cosine decay to 0."""
    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return factor


def train_classifier(
    kind: str,
    model_kwargs: Mapping,
    num_classes: int,
    x_train: np.ndarray, y_train: np.ndarray,
    x_val: np.ndarray, y_val: np.ndarray,
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float = 0.05,
    warmup_epochs: float = 1.0,
    grad_clip: float | None = 1.0,
    device: torch.device | str = "cpu",
    test_sets: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    augment: bool = False,
    bn_recalibrate_batches: int = 0,
    progress: bool = True,
    desc: str = "train",
) -> TrainedClassifier:
    """Train one model from scratch; returns the best-validation checkpoint and its curves."""
    if len(x_train) == 0 or len(x_val) == 0:
        raise ValueError(f"{desc}: empty training or validation set")
    if len(x_train) != len(y_train) or len(x_val) != len(y_val):
        raise ValueError(f"{desc}: images and labels differ in length")
    torch.manual_seed(seed)
    model = build_model(kind, num_classes, **model_kwargs).to(device)
    xt, yt = to_input(x_train), torch.as_tensor(y_train, dtype=torch.long)
    pair = xt.shape[-1] != xt.shape[-2]
    steps_per_epoch = math.ceil(len(xt) / batch_size)
    total = steps_per_epoch * epochs
    gen = np.random.default_rng(seed)
    perms = [gen.permutation(len(xt)) for _ in range(epochs)]

    def batch_fn(step: int):
        epoch, within = divmod(step, steps_per_epoch)
        idx = perms[epoch][within * batch_size:(within + 1) * batch_size]
        x = xt[idx]
        if augment:  # a pure function of (seed, step): resuming replays the same batches
            x = dihedral_augment(x, np.random.default_rng([seed, step]), pair)
        return x.to(device), yt[idx].to(device)

    def loss_fn(m: nn.Module, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(m(x), y)

    result = TrainedClassifier(model=model, best_epoch=0)

    def eval_fn(m: nn.Module) -> float:
        if bn_recalibrate_batches:  # the first batches of a fixed order, un-augmented
            order = perms[0]
            recalibrate_batchnorm(m, (
                xt[order[i * batch_size:(i + 1) * batch_size]].to(device)
                for i in range(min(bn_recalibrate_batches, steps_per_epoch))))
        acc = float((predict(m, x_val, device=device) == y_val).mean())
        result.val_acc_by_epoch.append(acc)
        for name, (xs, ys) in (test_sets or {}).items():
            result.test_acc_by_epoch.setdefault(name, []).append(
                float((predict(m, xs, device=device) == ys).mean()))
        return 1.0 - acc

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, cosine_with_warmup(round(warmup_epochs * steps_per_epoch), total))
    config = TrainLoopConfig(steps=total, grad_clip=grad_clip, log_every=steps_per_epoch,
                             eval_every=steps_per_epoch, early_stopping_patience=epochs + 1,
                             progress=progress, desc=desc)
    out = train(model, optimizer, batch_fn, loss_fn, config, scheduler=scheduler,
                eval_fn=eval_fn, device=device)
    result.best_epoch = int(out.best_step // steps_per_epoch) if out.best_step else 0
    result.train_loss = [h["train_loss"] for h in out.history if "train_loss" in h]
    result.seconds = out.seconds
    return result
