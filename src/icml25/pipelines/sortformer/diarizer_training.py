"""Training and inference of the diarizer with PIL, Sort Loss or the hybrid.

Batches are a pure function of the step (a per-epoch permutation drawn from the seed), so the
shared loop in :mod:`icml25.core.training` can resume exactly. Optimiser: AdamW with betas
(0.9, 0.98) and an inverse-square-root schedule with linear warm-up and a floor ``min_lr``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from icml25.core.training import TrainLoopConfig, TrainResult, train
from icml25.pipelines.sortformer.model import Diarizer, DiarizerConfig
from icml25.pipelines.sortformer.sort_loss import (
    ats_targets,
    frame_f1,
    hybrid_loss,
    pil_targets,
)

#: (ats_weight, pil_weight) of each loss variant.
LOSS_WEIGHTS = {"pil": (0.0, 1.0), "sort": (1.0, 0.0), "hybrid": (0.5, 0.5)}


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 1e-3
    warmup_steps: int = 100
    min_lr: float = 1e-5
    epochs: int = 6
    batch_size: int = 8
    grad_clip: float = 1.0


def collate(feats: Sequence[np.ndarray], labels: Sequence[np.ndarray]
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad to the longest item: (B, T_feat, F) features, (B, T, K) labels, label lengths (B,)."""
    tf = max(f.shape[0] for f in feats)
    tl = max(y.shape[0] for y in labels)
    x = torch.zeros(len(feats), tf, feats[0].shape[1])
    y = torch.zeros(len(labels), tl, labels[0].shape[1])
    for i, (f, lab) in enumerate(zip(feats, labels, strict=True)):
        x[i, : f.shape[0]] = torch.from_numpy(f)
        y[i, : lab.shape[0]] = torch.from_numpy(lab)
    return x, y, torch.tensor([lab.shape[0] for lab in labels])


def predict(model: Diarizer, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Probabilities cropped to the label length (the conv front end may add one frame)."""
    p = model(x, lengths)
    return p[:, : int(lengths.max())]


def inverse_sqrt(optimizer: torch.optim.Optimizer, cfg: OptimConfig):
    def factor(step: int) -> float:
        s = step + 1
        f = s / cfg.warmup_steps if s < cfg.warmup_steps else (cfg.warmup_steps / s) ** 0.5
        return max(f, cfg.min_lr / cfg.lr)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_diarizer(feats: Sequence[np.ndarray], labels: Sequence[np.ndarray], loss: str,
                   model_cfg: DiarizerConfig, optim: OptimConfig, seed: int,
                   pil_match: str = "dot", progress: bool = True, device: str = "cpu"
                   ) -> tuple[Diarizer, TrainResult]:
    """Train one diarizer with ``loss`` in {pil, sort, hybrid} (or ``hybrid:<alpha>``)."""
    if loss.startswith("hybrid:"):
        alpha = float(loss.split(":", 1)[1])
        ats_w, pil_w = alpha, 1.0 - alpha
    elif loss in LOSS_WEIGHTS:
        ats_w, pil_w = LOSS_WEIGHTS[loss]
    else:
        raise ValueError(f"loss: got {loss!r}; expected one of {sorted(LOSS_WEIGHTS)}")
    if len(feats) != len(labels) or not feats:
        raise ValueError(f"need as many feature matrices as label matrices (>0), got "
                         f"{len(feats)} and {len(labels)}")
    torch.manual_seed(seed)
    model = Diarizer(model_cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=optim.lr, betas=optim.betas,
                            weight_decay=optim.weight_decay)
    n = len(feats)
    per_epoch = max(n // optim.batch_size, 1)
    steps = per_epoch * optim.epochs

    def batch_fn(step: int):
        epoch, i = divmod(step, per_epoch)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        idx = perm[i * optim.batch_size:(i + 1) * optim.batch_size]
        return collate([feats[j] for j in idx], [labels[j] for j in idx])

    def loss_fn(m, batch):
        x, y, lengths = (t.to(device) for t in batch)
        return hybrid_loss(predict(m, x, lengths), y, lengths, ats_w, pil_w, pil_match)

    cfg = TrainLoopConfig(steps=steps, grad_clip=optim.grad_clip, log_every=max(per_epoch, 1),
                          progress=progress, desc=f"sortformer: train {loss} (seed {seed})")
    result = train(model, opt, batch_fn, loss_fn, cfg, scheduler=inverse_sqrt(opt, optim),
                   device=device)
    model.eval()
    return model, result


@torch.no_grad()
def infer(model: Diarizer, feats: Sequence[np.ndarray], n_frames: Sequence[int],
          batch_size: int = 16) -> list[np.ndarray]:
    """Probabilities (n_frames_i, K) per recording."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for s in range(0, len(feats), batch_size):
        fb = feats[s:s + batch_size]
        nb = list(n_frames[s:s + batch_size])
        x, _, lengths = collate(fb, [np.zeros((k, 1), np.float32) for k in nb])
        p = model(x.to(device), lengths.to(device)).cpu().numpy()
        out += [p[i, :k] for i, k in enumerate(nb)]
    return out


def arrival_f1(probs: Sequence[np.ndarray], labels: Sequence[np.ndarray],
               threshold: float = 0.5) -> dict[str, float]:
    """Frame F1 against the arrival-sorted reference (F1_ats) and the best permutation (F1_pil)."""
    tp = {"ats": 0.0, "pil": 0.0}
    fp = dict(tp)
    fn = dict(tp)
    for p, y in zip(probs, labels, strict=True):
        pt = torch.from_numpy(np.asarray(p, np.float32))[None]
        yt = torch.from_numpy(np.asarray(y, np.float32))[None]
        for name, target in (("ats", ats_targets(yt, pt)), ("pil", pil_targets(yt, pt))):
            pred, ref = pt >= threshold, target >= 0.5
            tp[name] += float((pred & ref).sum())
            fp[name] += float((pred & ~ref).sum())
            fn[name] += float((~pred & ref).sum())
    return {f"f1_{k}": 2 * tp[k] / max(2 * tp[k] + fp[k] + fn[k], 1.0) for k in tp}


__all__ = ["LOSS_WEIGHTS", "OptimConfig", "arrival_f1", "collate", "frame_f1", "infer",
           "predict", "train_diarizer"]
