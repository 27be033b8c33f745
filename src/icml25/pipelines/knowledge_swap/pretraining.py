"""Training a ViT classifier from scratch: the pretrained model ``f_θ0`` and the retrain oracle.

The CPU-scale backbone of this project (``docs/papers/knowledge_swap.md``, "Data"): AdamW (lr 1e-3,
weight decay 0.05), one-cycle schedule, batch 64, 10 epochs, random shifts of up to ±2 px (zero
fill). The loop is :func:`icml25.core.training.train`; a batch is a pure function of the step (the
epoch's permutation and the shifts come from generators seeded by ``seed`` and the step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from icml25.core.training import TrainLoopConfig, train
from icml25.pipelines.knowledge_swap.vit import ViT, ViTConfig, build_vit


@dataclass(frozen=True)
class PretrainHyper:
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.05
    max_shift: int = 2


def shift_images(images: torch.Tensor, shifts: list[list[int]]) -> torch.Tensor:
    """Translate each image ``[n, H, W]`` by integer ``shifts [n, 2]`` = (dx, dy) px, zero fill."""
    n, h, w = images.shape
    out = torch.zeros_like(images)
    for i in range(n):
        dx, dy = shifts[i]
        ys, yd = (slice(0, h - dy), slice(dy, h)) if dy >= 0 else (slice(-dy, h), slice(0, h + dy))
        xs, xd = (slice(0, w - dx), slice(dx, w)) if dx >= 0 else (slice(-dx, w), slice(0, w + dx))
        out[i, yd, xd] = images[i, ys, xs]
    return out


def train_classifier(images: np.ndarray, labels: np.ndarray, cfg: ViTConfig, hp: PretrainHyper,
                     seed: int, progress: bool = True, desc: str = "pretrain",
                     device: torch.device | str = "cpu") -> tuple[ViT, dict]:
    """Train a ViT on ``(images, labels)`` from scratch; returns the model and its loss history."""
    if len(labels) == 0:
        raise ValueError(f"{desc}: no training images")
    if labels.min() < 0 or labels.max() >= cfg.n_classes:
        raise ValueError(f"{desc}: labels must lie in 0..{cfg.n_classes - 1}")
    x = torch.as_tensor(images, dtype=torch.float32, device=device)
    y = torch.as_tensor(labels, dtype=torch.long, device=device)
    n = len(y)
    per_epoch = math.ceil(n / hp.batch_size)
    steps = hp.epochs * per_epoch
    model = build_vit(cfg, seed).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=hp.lr, total_steps=steps)

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, i = divmod(step, per_epoch)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        perm = perm.to(x.device)
        idx = perm[i * hp.batch_size:(i + 1) * hp.batch_size]
        xb = x[idx]
        if hp.max_shift:
            g = torch.Generator().manual_seed(seed * 1_000_003 + step)
            xb = shift_images(xb, torch.randint(-hp.max_shift, hp.max_shift + 1, (len(idx), 2),
                                                generator=g).tolist())
        return xb, y[idx]

    def loss_fn(model: ViT, b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(model(b[0]), b[1])

    result = train(model, opt, batch, loss_fn,
                   TrainLoopConfig(steps=steps, grad_clip=None, log_every=per_epoch,
                                   progress=progress, desc=desc), scheduler=sched, device=device)
    model.eval()
    return model, {"history": result.history, "seconds": result.seconds, "steps": steps}
