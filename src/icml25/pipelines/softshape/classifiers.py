"""Training and prediction of the torch classifiers (SoftShape and the FCN baseline).

Both are trained with :func:`icml25.core.training.train` following the reference code's recipe
(the reference code's training loop): Adam (lr 1e-3, no weight decay, no gradient clipping),
loss = CE + moe_loss_rate * aux, warm-up epochs with every remain ratio forced to 1, validation
loss after every epoch, and the weights of the epoch with the lowest validation loss kept (early
stopping after ``patience`` epochs without improvement). Test accuracy is reported at that best
epoch and, for reference, at the last epoch trained.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml25.core.device import seed_everything
from icml25.core.training import TrainLoopConfig, train
from icml25.pipelines.softshape.model import FCN, SoftShape, SoftShapeConfig


@dataclass(frozen=True)
class TrainSettings:
    """How one network is trained (the reference code's hyper-parameters, scaled for CPU)."""

    epochs: int = 80
    warm_up: int = 25
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_mode: Literal["large", "paper"] = "large"
    large_batch: int = 512
    patience: int = 30
    moe_loss_rate: float = 1e-3
    eval_batch: int = 512
    device: str = "cpu"


@dataclass
class FitResult:
    """A trained network and what happened while training it."""

    model: nn.Module
    best_epoch: int
    epochs_run: int
    best_in_warm_up: bool
    train_seconds: float
    last_state: dict[str, torch.Tensor]
    history: list[dict[str, float]] = field(default_factory=list)
    steps_per_epoch: int = 1
    #: SoftShape only: the MoE balance loss (aux, step 7) of every training epoch, the mean over
    #: its batches; 0 in the warm-up epochs, where no layer sparsifies and the MoE is not called
    balance_loss: list[float] = field(default_factory=list)


def batch_size_for(settings: TrainSettings, n_train: int, n_total: int) -> int:
    """``large``: min(512, n_train) (the reference code's June 2025 default); ``paper``:
    min(floor(0.6 N_total / 10), 16), at least 1 (the paper-era rule)."""
    if settings.batch_mode == "large":
        return max(1, min(settings.large_batch, n_train))
    return max(1, min(int(0.6 * n_total / 10), 16, n_train))


def _tensor(X: np.ndarray) -> torch.Tensor:
    """(n, T) univariate or (n, C, T) multichannel series -> a (n, C, T) float tensor."""
    x = torch.as_tensor(np.asarray(X, dtype=np.float32))
    if x.ndim == 2:
        return x.unsqueeze(1)
    if x.ndim != 3:
        raise ValueError(f"series: expected (n, T) or (n, C, T), got shape {tuple(x.shape)}")
    return x


def _fit(
    model: nn.Module,
    loss_of: Callable[[nn.Module, torch.Tensor, torch.Tensor, bool], torch.Tensor],
    X_tr: np.ndarray, y_tr: np.ndarray, X_va: np.ndarray, y_va: np.ndarray,
    settings: TrainSettings, seed: int, batch_size: int, progress: bool, desc: str,
    warm_up: int,
) -> FitResult:
    """The shared loop: batches are a pure function of the step (exact resume, determinism)."""
    device = torch.device(settings.device)
    xt, yt = _tensor(X_tr).to(device), torch.as_tensor(y_tr, dtype=torch.long).to(device)
    xv, yv = _tensor(X_va).to(device), torch.as_tensor(y_va, dtype=torch.long).to(device)
    n = len(yt)
    chunks = max(1, math.ceil(n / batch_size))
    clock = {"epoch": 0}
    last: dict[str, dict[str, torch.Tensor]] = {}

    def batch_fn(step: int):
        epoch, part = divmod(step, chunks)
        clock["epoch"] = epoch
        if chunks == 1:
            idx = torch.arange(n, device=device)
        else:
            perm = np.random.default_rng([seed, epoch]).permutation(n)
            idx = torch.as_tensor(np.array_split(perm, chunks)[part], device=device)
        return xt[idx], yt[idx], epoch < warm_up

    def loss_fn(net: nn.Module, batch) -> torch.Tensor:
        x, y, warm = batch
        return loss_of(net, x, y, warm)

    def eval_fn(net: nn.Module) -> float:
        warm = clock["epoch"] < warm_up
        with torch.no_grad():
            logits = predict_logits(net, X_va, warm, settings.eval_batch, tensor=xv)
            val = float(F.cross_entropy(logits, yv))
        last["state"] = {k: v.detach().clone() for k, v in net.state_dict().items()}
        return val

    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay)
    config = TrainLoopConfig(
        steps=settings.epochs * chunks, grad_clip=None, log_every=chunks, eval_every=chunks,
        early_stopping_patience=settings.patience, progress=progress, desc=desc,
    )
    model.to(device)
    result = train(model, optimizer, batch_fn, loss_fn, config, eval_fn=eval_fn, device=device)
    best_epoch = (result.best_step or chunks) // chunks  # 1-based epoch count
    return FitResult(model, best_epoch, result.steps_done // chunks,
                     best_epoch <= warm_up, result.seconds, last["state"], result.history,
                     chunks)


def predict_logits(model: nn.Module, X: np.ndarray, warm: bool = False, batch: int = 512,
                   tensor: torch.Tensor | None = None) -> torch.Tensor:
    """Logits of ``X`` (n, T) in eval mode, in chunks of ``batch`` series."""
    device = next(model.parameters()).device
    x = (_tensor(X) if tensor is None else tensor).to(device)
    was_training = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(x), batch):
            chunk = x[start: start + batch]
            out.append(model(chunk, warm=warm)[0] if isinstance(model, SoftShape)
                       else model(chunk))
    model.train(was_training)
    return torch.cat(out).cpu()


def fit_softshape(
    X_tr: np.ndarray, y_tr: np.ndarray, X_va: np.ndarray, y_va: np.ndarray,
    config: SoftShapeConfig, settings: TrainSettings, seed: int, n_total: int,
    progress: bool = False, desc: str = "softshape",
) -> FitResult:
    """Train one SoftShape network (CE + moe_loss_rate * aux; warm-up = no sparsification)."""
    seed_everything(seed)
    model = SoftShape(config)
    aux_per_step: list[float] = []

    def loss_of(net, x, y, warm):
        logits, aux, _ = net(x, warm=warm)
        aux_per_step.append(float(aux.detach()))
        return F.cross_entropy(logits, y) + settings.moe_loss_rate * aux

    bs = batch_size_for(settings, len(y_tr), n_total)
    fit = _fit(model, loss_of, X_tr, y_tr, X_va, y_va, settings, seed, bs, progress, desc,
               warm_up=settings.warm_up)
    per_epoch = [float(np.mean(aux_per_step[i: i + fit.steps_per_epoch]))
                 for i in range(0, len(aux_per_step), fit.steps_per_epoch)]
    fit.balance_loss = per_epoch
    for entry in fit.history:  # the loop logs once per epoch: add that epoch's balance loss
        epoch = int(entry["step"]) // fit.steps_per_epoch
        if "train_loss" in entry and 1 <= epoch <= len(per_epoch):
            entry["balance_loss"] = per_epoch[epoch - 1]
    return fit


def fit_fcn(
    X_tr: np.ndarray, y_tr: np.ndarray, X_va: np.ndarray, y_va: np.ndarray, n_classes: int,
    settings: TrainSettings, seed: int, n_total: int, progress: bool = False,
    desc: str = "fcn",
) -> FitResult:
    """Train the FCN baseline with the same loop, optimiser and model selection (no warm-up)."""
    seed_everything(seed)
    model = FCN(_tensor(X_tr[:1]).shape[1], n_classes)

    def loss_of(net, x, y, warm):
        return F.cross_entropy(net(x), y)

    bs = batch_size_for(settings, len(y_tr), n_total)
    return _fit(model, loss_of, X_tr, y_tr, X_va, y_va, settings, seed, bs, progress, desc,
                warm_up=0)


@dataclass
class SoftShapeOutput:
    """Test-time outputs of a SoftShape network."""

    predictions: np.ndarray
    seconds: float
    expert_load: np.ndarray  # tokens per expert on the test set, post-warm-up routing
    #: (n, M) scores of the sparsifying layer (step 6: the scores that choose the kept shapes
    #: and weight the merged one), before its sparsification; None when no layer sparsifies
    scores: np.ndarray | None
    first_layer_scores: np.ndarray  # (n, M) layer-1 scores, on the embedded input shapes
    balance_loss: float  # the MoE balance loss (aux) of the test forward, post-warm-up routing


def softshape_outputs(model: SoftShape, X: np.ndarray, warm: bool,
                      batch: int = 512) -> SoftShapeOutput:
    """Predictions (in the mode of the selected epoch), expert load, balance loss and scores.

    The interpretability map is the sparsifying layer's scores, as the method defines it: the
    contribution scores by which soft shape sparsification keeps the top shapes and merges the
    rest (layer 2 of the default schedule). The layer-1 scores are returned beside them.

    The expert load, the balance loss and the scores are measured with the post-warm-up
    routing (the only mode that sparsifies and calls the MoE), so they are reported even when
    the selected epoch lies in the warm-up. The balance loss of several test chunks is their
    mean weighted by chunk size.
    """
    device = next(model.parameters()).device
    x = _tensor(X).to(device)
    model.eval()
    preds, loads, scores, first, aux = [], [], [], [], []
    start_t = time.perf_counter()
    with torch.no_grad():
        for start in range(0, len(x), batch):
            logits, _, _ = model(x[start: start + batch], warm=warm)
            preds.append(logits.argmax(-1).cpu())
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start_t
    layer = model.sparsifying_layer
    with torch.no_grad():
        for start in range(0, len(x), batch):
            chunk = x[start: start + batch]
            _, chunk_aux, info = model(chunk, warm=False)
            loads.append(info.load.cpu())
            aux.append(float(chunk_aux) * len(chunk))
            first.append(info.scores[0].cpu())
            if layer is not None:
                scores.append(info.scores[layer].cpu())
    return SoftShapeOutput(torch.cat(preds).numpy(), seconds,
                           torch.stack(loads).sum(0).numpy(),
                           torch.cat(scores).numpy() if scores else None,
                           torch.cat(first).numpy(), float(sum(aux) / len(x)))


def accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    """Fraction of correct predictions."""
    pred, y = np.asarray(pred), np.asarray(y)
    if pred.shape != y.shape or y.size == 0:
        raise ValueError(f"accuracy: predictions {pred.shape} vs labels {y.shape}")
    return float((pred == y).mean())
