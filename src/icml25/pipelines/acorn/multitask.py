"""Multitask training and prediction of :class:`AcornModel` (task-head readout).

Round-robin task batches: every epoch each task's training items are shuffled into batches of
one task, and the batches of all tasks are interleaved; the loss of a batch is its task's loss
(LOS 2-way CE, multipath 3-way CE, Doppler Huber on Δf%, DoA Huber on the TDoA + 2-way
left/right CE, range Huber on log D; regression targets standardised with training statistics).
AdamW, one warm-up epoch then cosine decay; the weights with the lowest validation loss are kept.

Physics augmentation (:func:`physics_augment`, our addition): a random channel swap (TDoA label
negated, every other label kept), for DoA a random time reversal (a reversed pair has the
negated TDoA) and a random integer inter-channel delay δ (channel 2 delayed by δ samples,
label + δ, only where |τ + δ| stays inside the array's physical range). A fraction of the
Doppler training items gets the "unknown source type" token instead of its catalogue name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml25.core.training import TrainLoopConfig, train
from icml25.pipelines.acorn.encoder import AcornModel, EncoderConfig

REGRESSION = ("doppler", "doa", "range")
CLASSIFICATION = ("los", "multipath")


@dataclass
class TaskData:
    """One task's clips and targets on one split."""

    audio: torch.Tensor  # (n, C, N) float32 (float16 for a training split)
    target: np.ndarray  # float labels (class index for classification)
    source: np.ndarray  # source token per item


@dataclass(frozen=True)
class Augment:
    """Which label-aware augmentations :func:`physics_augment` applies (``acorn.train``)."""

    swap: bool = True
    reverse: bool = True
    max_delay: int = 2  # samples; 0 = off
    max_tdoa: float = 9.33  # |τ| the array can produce, d·fs/c (samples)
    unknown_source_rate: float = 0.0


def regression_target(task: str, label: np.ndarray) -> np.ndarray:
    """What the head regresses: log D for range, the label itself otherwise."""
    return np.log(label) if task == "range" else np.asarray(label, dtype=float)


def from_regression(task: str, value: np.ndarray) -> np.ndarray:
    return np.exp(value) if task == "range" else value


def target_stats(data: dict[str, TaskData], raw_units: tuple[str, ...] = ()
                 ) -> dict[str, tuple[float, float]]:
    """Mean and std of each regression task's training target; a task in ``raw_units`` (the
    lag DoA head, which answers in samples by construction) gets (0, 1), and DoA then also
    ``doa_token``, the statistics of the auxiliary token readout."""
    out = {}
    for task in REGRESSION:
        if task in data:
            y = regression_target(task, data[task].target)
            if task == "doa":  # centred at 0, so the antisymmetric head stays antisymmetric
                token = (0.0, float(np.sqrt(np.mean(y ** 2)) + 1e-6))
                out[task] = (0.0, 1.0) if task in raw_units else token
                if task in raw_units:  # the auxiliary token head keeps the standardised target
                    out["doa_token"] = token
            elif task in raw_units:
                out[task] = (0.0, 1.0)
            else:
                out[task] = (float(np.mean(y)), float(np.std(y) + 1e-6))
    return out


def task_loss(model: AcornModel, task: str, audio: torch.Tensor, target: torch.Tensor,
              source: torch.Tensor, stats: dict[str, tuple[float, float]]) -> torch.Tensor:
    out = model(audio, task, source)
    if task in CLASSIFICATION:
        return nn.functional.cross_entropy(out, target.long())
    mu, sd = stats[task]
    y = (regression_target(task, target.numpy()) - mu) / sd
    loss = nn.functional.huber_loss(out[:, 0], torch.as_tensor(y, dtype=out.dtype), delta=1.0)
    if task == "doa":  # left/right: positive TDoA ⇒ left (class 1)
        loss = loss + nn.functional.cross_entropy(out[:, 1:3], (target > 0).long())
        if model.lag_head is not None and model.cfg.doa_token_aux:  # auxiliary token readout
            aux = model(audio, task, source, readout="token")
            mu, sd = stats["doa_token"]
            y = (target.numpy() - mu) / sd
            loss = loss + nn.functional.huber_loss(aux[:, 0], torch.as_tensor(y, dtype=aux.dtype),
                                                   delta=1.0)
            loss = loss + nn.functional.cross_entropy(aux[:, 1:3], (target > 0).long())
    return loss


def augment_batch(audio: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Label-preserving augmentation of a cached batch: a random circular time shift (the same
    for all channels of an item, so inter-channel delays and echo delays are kept) and a random
    polarity. With a fixed, cached training set it stops the encoder from memorising each
    clip's magnitude fingerprint (our choice; the paper trains on ~1M fresh clips)."""
    b, _, n = audio.shape
    shifts = torch.as_tensor(rng.integers(0, n, size=b))
    idx = (torch.arange(n)[None, :] + shifts[:, None]) % n
    rolled = torch.gather(audio, 2, idx[:, None, :].expand_as(audio))
    sign = torch.as_tensor(rng.choice([-1.0, 1.0], size=b), dtype=audio.dtype)
    return rolled * sign[:, None, None]


def physics_augment(task: str, audio: torch.Tensor, target: np.ndarray, source: np.ndarray,
                    rng: np.random.Generator, aug: Augment, unknown_source: int
                    ) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """Label-aware augmentation of one task's batch (see the module docstring); returns new
    audio, targets and source tokens (inputs are not modified)."""
    b = audio.shape[0]
    target = np.asarray(target, dtype=float).copy()
    source = np.asarray(source).copy()
    if aug.swap and audio.shape[1] == 2:
        swap = rng.random(b) < 0.5
        if swap.any():
            audio = audio.clone()
            audio[swap] = audio[swap].flip(1)
            if task == "doa":
                target[swap] = -target[swap]
    if task == "doa" and aug.reverse:
        rev = rng.random(b) < 0.5
        if rev.any():
            audio = audio.clone()
            audio[rev] = audio[rev].flip(2)
            target[rev] = -target[rev]
    if task == "doa" and aug.max_delay > 0 and audio.shape[1] == 2:
        delta = rng.integers(-aug.max_delay, aug.max_delay + 1, size=b)
        delta[np.abs(target + delta) > aug.max_tdoa] = 0
        if np.any(delta):
            audio = audio.clone()
            for i in np.flatnonzero(delta):
                audio[i, 1] = torch.roll(audio[i, 1], int(delta[i]))
            target = target + delta
    if task == "doppler" and aug.unknown_source_rate > 0:
        source[rng.random(b) < aug.unknown_source_rate] = unknown_source
    return audio, target, source


def batch_schedule(sizes: dict[str, int], batch_size: int, epochs: int, seed: int
                   ) -> list[tuple[str, np.ndarray]]:
    """Round-robin (task, indices) batches for all epochs, a pure function of ``seed``."""
    rng = np.random.default_rng(seed)
    schedule = []
    for _ in range(epochs):
        queues = {t: [idx[i:i + batch_size] for i in range(0, n, batch_size)]
                  for t, n in sizes.items() for idx in [rng.permutation(n)]}
        while any(queues.values()):
            for task in sizes:
                if queues[task]:
                    schedule.append((task, queues[task].pop(0)))
    return schedule


@torch.no_grad()
def predict(model: AcornModel, data: dict[str, TaskData], stats: dict[str, tuple[float, float]],
            batch_size: int = 128, device: torch.device | str = "cpu") -> dict[str, np.ndarray]:
    """Per-task predictions: class index (classification) or the label in its own units."""
    model.eval()
    preds = {}
    for task, d in data.items():
        outs = []
        for i in range(0, len(d.target), batch_size):
            audio = d.audio[i:i + batch_size].to(device)
            src = torch.as_tensor(d.source[i:i + batch_size], dtype=torch.long, device=device)
            outs.append(model(audio, task, src).cpu())
        out = torch.cat(outs)
        if task in CLASSIFICATION:
            preds[task] = out.argmax(dim=1).numpy().astype(float)
        else:
            mu, sd = stats[task]
            preds[task] = from_regression(task, out[:, 0].numpy().astype(float) * sd + mu)
    return preds


@torch.no_grad()
def validation_loss(model: AcornModel, data: dict[str, TaskData],
                    stats: dict[str, tuple[float, float]], device="cpu",
                    batch_size: int = 128) -> float:
    """Mean over tasks of the task loss on the validation split. Each task's loss is a mean
    over items (every term of :func:`task_loss` is), so it is computed in batches of
    ``batch_size`` and averaged with the batches' sizes as weights: the paper config's 1000
    validation clips of a task in one forward would hold every layer's attention of all of
    them at once."""
    losses = []
    for task, d in data.items():
        n = len(d.target)
        parts = []
        for i in range(0, n, batch_size):
            src = torch.as_tensor(d.source[i:i + batch_size], dtype=torch.long, device=device)
            loss = task_loss(model, task, d.audio[i:i + batch_size].float().to(device),
                             torch.as_tensor(d.target[i:i + batch_size]), src, stats)
            parts.append((float(loss), len(src)))
        losses.append(parts[0][0] if len(parts) == 1 else sum(v * k for v, k in parts) / n)
    return float(np.mean(losses))


def train_model(cfg: EncoderConfig, train_data: dict[str, TaskData],
                val_data: dict[str, TaskData], *, epochs: int, batch_size: int, lr: float,
                weight_decay: float, seed: int, device: torch.device | str = "cpu",
                augment: bool = True, physics: Augment | None = None,
                progress: bool = False, desc: str = "acorn") -> tuple[AcornModel, dict]:
    """Train one encoder (one seed); returns the model (best validation weights) and a record
    of the run (history, target statistics, parameter count)."""
    torch.manual_seed(seed)
    model = AcornModel(cfg)
    stats = target_stats(train_data, ("doa",) if cfg.doa_head == "lag" else ())
    schedule = batch_schedule({t: len(d.target) for t, d in train_data.items()}, batch_size,
                              epochs, seed)
    steps_per_epoch = max(1, len(schedule) // epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    warm = steps_per_epoch

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        frac = (step - warm) / max(1, len(schedule) - warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)

    def batch_fn(step: int):
        task, idx = schedule[step]
        d = train_data[task]
        # float32 per batch: the training split may stay float16 (nodes._task_data)
        audio, target, source = d.audio[idx].float(), d.target[idx], d.source[idx]
        if augment:
            audio = augment_batch(audio, np.random.default_rng([seed, step]))
        if physics is not None:
            audio, target, source = physics_augment(
                task, audio, target, source, np.random.default_rng([seed, step, 1]), physics,
                model.unknown_source)
        return task, audio, torch.as_tensor(target), torch.as_tensor(source, dtype=torch.long)

    def loss_fn(m: nn.Module, batch) -> torch.Tensor:
        task, audio, target, src = batch
        return task_loss(m, task, audio.to(device), target, src.to(device), stats)

    result = train(model, opt, batch_fn, loss_fn,
                   TrainLoopConfig(steps=len(schedule), grad_clip=1.0, log_every=steps_per_epoch,
                                   eval_every=steps_per_epoch, early_stopping_patience=epochs + 1,
                                   progress=progress, desc=desc),
                   scheduler=scheduler,
                   eval_fn=lambda m: validation_loss(m, val_data, stats, device),
                   device=device)
    record = {"history": result.history, "stats": stats, "seconds": result.seconds,
              "best_step": result.best_step, "steps": result.steps_done,
              "n_parameters": sum(p.numel() for p in model.parameters())}
    return model, record
