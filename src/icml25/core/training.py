"""A small, resumable torch training loop shared by every pipeline that trains a network.

Design: a batch is a pure function of the step index (``batch_fn(step)``). That makes resuming
exact without saving a data iterator: a run interrupted after its checkpoint at step k and
resumed from it ends with the same weights as an uninterrupted run, because the model, the
optimiser, the scheduler and torch's RNG (dropout) are all restored and step k+1 sees the same
batch. Papers whose optimiser is the contribution pass their own ``optimizer``.

Under ``torchrun`` (see :mod:`icml25.core.distributed`) the same loop trains data-parallel with
DistributedDataParallel: each rank keeps its shard of the global batch, gradients are averaged by
DDP, the logged losses and evaluation scores are averaged over ranks, and only rank 0 writes
checkpoints, calls ``log_fn`` and shows the progress bar. The checkpoint holds the unwrapped
model and the global step, so a run can resume with a different number of processes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from icml25.core.distributed import (
    SINGLE,
    DistContext,
    LossModule,
    all_reduce_mean,
    barrier,
    shard,
)

logger = logging.getLogger(__name__)

LossFn = Callable[[nn.Module, Any], torch.Tensor]
BatchFn = Callable[[int], Any]
EvalFn = Callable[[nn.Module], float]
LogFn = Callable[[int, dict[str, float]], None]

CHECKPOINT_NAME = "checkpoint.pt"


@dataclass(frozen=True)
class TrainLoopConfig:
    """How to run the loop (not what to learn).

    Attributes:
        steps: optimisation steps in total (a resumed run counts the steps already done).
        grad_clip: max global gradient norm; ``None`` or 0 disables clipping.
        amp: mixed precision: on CUDA bfloat16 where supported, else float16 with loss
            scaling; on the CPU bfloat16 autocast (off by default, so the CPU path stays
            exact; the paper configs' CPU dry run turns it on); ignored on MPS.
        log_every: log the running mean loss every this many steps.
        eval_every: call ``eval_fn`` every this many steps (0 = never).
        early_stopping_patience: stop after this many evaluations without improvement
            (``None`` = never stop early). The best weights are restored at the end.
        checkpoint_every: save a checkpoint every this many steps (0 = never).
        checkpoint_dir: where ``checkpoint.pt`` goes; required when checkpointing.
        resume: continue from ``checkpoint_dir/checkpoint.pt`` if it exists.
        progress: show a tqdm bar.
        desc: the bar's label.
        micro_batches: gradient accumulation: each step's batch (each rank's shard under
            ``torchrun``) is split along its first dimension into this many equal parts, each
            forward and backward on its own, so only one part's activations are alive at a
            time; the gradient is that of the whole batch's loss (see ``micro_batch_weight``).
        micro_batch_weight: ``part -> weight`` of a part's loss in the step's loss; the
            default weighs each part by its number of examples, exact for a loss that is a
            mean over examples. A loss that is a mean over tokens with some ignored passes
            the count of its counted tokens, so the accumulated loss equals the whole batch's.
    """

    steps: int
    grad_clip: float | None = 1.0
    amp: bool = False
    log_every: int = 10
    eval_every: int = 0
    early_stopping_patience: int | None = None
    checkpoint_every: int = 0
    checkpoint_dir: Path | str | None = None
    resume: bool = True
    progress: bool = True
    desc: str = "train"
    micro_batches: int = 1
    micro_batch_weight: Callable[[Any], float] | None = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps: got {self.steps}; expected a positive integer")
        if self.micro_batches < 1:
            raise ValueError(f"micro_batches: got {self.micro_batches}; expected >= 1")
        for name in ("log_every", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: got {getattr(self, name)}; expected >= 0")
        if self.checkpoint_every and self.checkpoint_dir is None:
            raise ValueError("checkpoint_dir: required when checkpoint_every > 0")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            raise ValueError(
                f"early_stopping_patience: got {self.early_stopping_patience}; expected >= 1"
            )
        if self.early_stopping_patience is not None and not self.eval_every:
            raise ValueError("early_stopping_patience needs eval_every > 0")


@dataclass
class TrainResult:
    """What the loop did: per-log-step history, where it stopped and why."""

    history: list[dict[str, float]] = field(default_factory=list)
    steps_done: int = 0
    best_step: int | None = None
    best_eval: float | None = None
    stopped_early: bool = False
    resumed_from: int | None = None
    seconds: float = 0.0


def _autocast(device: torch.device, enabled: bool):
    if enabled and device.type == "cpu":
        # bf16 autocast on the CPU (no scaler: bf16 has fp32's range), so that the CPU dry run
        # of a paper config (conf/paper_check, amp: true) exercises the mixed-precision path
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16), None
    if not (enabled and device.type == "cuda"):
        return nullcontext(), None
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    return torch.autocast(device_type="cuda", dtype=dtype), scaler


def _state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    step: int,
    result: TrainResult,
    best_state: dict[str, torch.Tensor] | None,
    evals_since_best: int,
) -> dict[str, Any]:
    return {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "history": result.history,
        "best_step": result.best_step,
        "best_eval": result.best_eval,
        "best_model": best_state,
        "evals_since_best": evals_since_best,
    }


def split_batch(batch: Any, parts: int) -> list[Any]:
    """``batch`` cut into ``parts`` equal micro-batches along the first dimension of every
    tensor in it (tensors, or tuples, lists and dicts of them; other leaves are shared)."""
    if parts == 1:
        return [batch]
    sizes: set[int] = set()

    def collect(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            sizes.add(int(x.shape[0]) if x.dim() else -1)
        elif isinstance(x, (tuple, list)):
            for v in x:
                collect(v)
        elif isinstance(x, dict):
            for v in x.values():
                collect(v)

    collect(batch)
    if len(sizes) != 1 or -1 in sizes:
        raise ValueError(f"micro_batches: the batch's tensors must share one first dimension to "
                         f"be split, got first dimensions {sorted(sizes)}")
    size = sizes.pop()
    if size % parts:
        raise ValueError(f"micro_batches: {parts} does not divide the batch of {size} examples"
                         " (per process under torchrun)")
    step = size // parts

    def take(x: Any, i: int) -> Any:
        if isinstance(x, torch.Tensor):
            return x[i * step:(i + 1) * step]
        if isinstance(x, tuple):
            return tuple(take(v, i) for v in x)
        if isinstance(x, list):
            return [take(v, i) for v in x]
        if isinstance(x, dict):
            return {k: take(v, i) for k, v in x.items()}
        return x

    return [take(batch, i) for i in range(parts)]


def _examples(part: Any) -> float:
    """The first dimension of a micro-batch's first tensor (its number of examples)."""
    if isinstance(part, torch.Tensor):
        return float(part.shape[0])
    values = part.values() if isinstance(part, dict) else part
    return next(_examples(v) for v in values
                if isinstance(v, (torch.Tensor, tuple, list, dict)))


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) so a crash mid-write never corrupts the last one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (tensors and plain types only)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # corrupt or truncated file: name it, keep it for inspection
        raise RuntimeError(f"checkpoint {path} cannot be read ({err}); delete it to restart") from err


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    config: TrainLoopConfig,
    *,
    scheduler: Any = None,
    eval_fn: EvalFn | None = None,
    log_fn: LogFn | None = None,
    device: torch.device | str = "cpu",
    stop_after: int | None = None,
    dist_ctx: DistContext | None = None,
) -> TrainResult:
    """Train ``model`` for ``config.steps`` steps and return what happened.

    Args:
        batch_fn: ``step -> batch`` (already on ``device`` or moved by ``loss_fn``); must be a
            deterministic function of the step for exact resume.
        loss_fn: ``(model, batch) -> scalar loss``.
        eval_fn: ``model -> validation score`` (lower is better), run in eval mode.
        log_fn: receives ``(step, metrics)`` at every log and eval step (e.g. MLflow).
        stop_after: stop (as if interrupted) after this many steps of *this call*; used to
            simulate an interruption in tests and for time-boxed runs.
        dist_ctx: the data-parallel context from :func:`icml25.core.distributed.init_distributed`
            (default: single process). When it spans several processes, ``device`` is replaced
            by the rank's device and the global batch from ``batch_fn`` is sharded.
    """
    ctx = dist_ctx or SINGLE
    device = ctx.device() if ctx.enabled else torch.device(device)
    model.to(device)
    result = TrainResult()
    ckpt_path = Path(config.checkpoint_dir) / CHECKPOINT_NAME if config.checkpoint_dir else None
    start = 0
    best_state: dict[str, torch.Tensor] | None = None
    evals_since_best = 0
    barrier(ctx)  # no rank looks for a checkpoint while rank 0 may still be writing one
    if config.resume and ckpt_path is not None and ckpt_path.exists():
        state = load_checkpoint(ckpt_path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None and state["scheduler"] is not None:
            scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        start = int(state["step"])
        result.history = list(state["history"])
        result.best_step, result.best_eval = state["best_step"], state["best_eval"]
        best_state = state["best_model"]
        evals_since_best = int(state["evals_since_best"])
        result.resumed_from = start
        logger.info("%s: resumed from %s at step %d", config.desc, ckpt_path, start)

    ddp = None
    if ctx.enabled:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(
            LossModule(model, loss_fn),
            device_ids=[device.index] if device.type == "cuda" else None,
        )
    autocast, scaler = _autocast(device, config.amp)
    t0 = time.perf_counter()
    running, n_running = 0.0, 0
    step = start
    bar = tqdm(
        total=config.steps, initial=start, desc=config.desc,
        disable=not (config.progress and ctx.is_main), dynamic_ncols=True, leave=False,
    )
    try:
        model.train()
        while step < config.steps:
            if stop_after is not None and step - start >= stop_after:
                break
            batch = batch_fn(step)
            optimizer.zero_grad(set_to_none=True)
            parts = split_batch(shard(batch, ctx) if ddp is not None else batch,
                                config.micro_batches)
            weights = ([float((config.micro_batch_weight or _examples)(p)) for p in parts]
                       if len(parts) > 1 else [1.0])
            total = sum(weights)
            if not total > 0:
                raise ValueError(f"{config.desc}: micro-batch weights {weights} at step "
                                 f"{step + 1} sum to {total}; nothing to learn from")
            local_loss = 0.0
            for i, (part, weight) in enumerate(zip(parts, weights, strict=True)):
                # DDP averages the gradients over ranks once, at the last part's backward
                sync = ddp.no_sync() if ddp is not None and i < len(parts) - 1 else nullcontext()
                with sync:
                    with autocast:
                        loss = ddp(part) if ddp is not None else loss_fn(model, part)
                    part_loss = float(loss.detach())
                    if len(parts) > 1:
                        loss = loss * (weight / total)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                    else:
                        loss.backward()
                local_loss += part_loss * weight / total
            loss_value = all_reduce_mean(local_loss, ctx)  # every rank sees the same
            if not math.isfinite(loss_value):  # checked before the weights change, on all ranks
                raise FloatingPointError(
                    f"{config.desc}: loss is {loss_value} at step {step + 1}; "
                    "lower the learning rate or check the data for NaN/inf"
                )
            if scaler is not None:
                scaler.unscale_(optimizer)
            if config.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            if scheduler is not None:
                scheduler.step()
            step += 1
            running += loss_value
            n_running += 1
            bar.update(1)

            metrics: dict[str, float] = {}
            if config.log_every and step % config.log_every == 0:
                metrics["train_loss"] = running / n_running
                metrics["lr"] = float(optimizer.param_groups[0]["lr"])
                running, n_running = 0.0, 0
                bar.set_postfix(loss=f"{metrics['train_loss']:.4f}")
            if eval_fn is not None and config.eval_every and step % config.eval_every == 0:
                model.eval()
                score = all_reduce_mean(float(eval_fn(model)), ctx)
                model.train()
                metrics["val_loss"] = score
                if result.best_eval is None or score < result.best_eval:
                    result.best_eval, result.best_step = score, step
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                    evals_since_best = 0
                else:
                    evals_since_best += 1
            if metrics:
                result.history.append({"step": float(step), **metrics})
                if log_fn is not None and ctx.is_main:
                    log_fn(step, metrics)
            if ckpt_path is not None and config.checkpoint_every and (
                step % config.checkpoint_every == 0
            ):
                if ctx.is_main:
                    save_checkpoint(
                        ckpt_path,
                        _state(model, optimizer, scheduler, step, result, best_state,
                               evals_since_best),
                    )
                barrier(ctx)
            if (
                config.early_stopping_patience is not None
                and evals_since_best >= config.early_stopping_patience
            ):
                result.stopped_early = True
                logger.info(
                    "%s: early stop at step %d (best %.5f at step %s)",
                    config.desc, step, result.best_eval, result.best_step,
                )
                break
    finally:
        bar.close()

    if best_state is not None and config.early_stopping_patience is not None:
        model.load_state_dict(best_state)
    model.eval()
    result.steps_done = step
    result.seconds = time.perf_counter() - t0
    return result
