"""Pre-training of the small LLaMA model with one optimiser (``docs/papers/frugal.md``).

Everything every optimiser shares lives here: the token windows (a batch is a pure function of
``(seed, step)``), the schedule (linear warm-up, one cosine cycle to ``min_lr_ratio·lr``), the
held-out windows (the same for every optimiser; validation windows for learning-rate
selection, test windows for the reported results) and the measurements: held-out perplexity
curve, optimiser-state floats counted from ``optimizer.state``, memory, optimiser step time
(step hooks) and the effective rank of the update accumulated over one refresh period.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from icml25.core.causal_lm import LlamaConfig, LlamaLM, mean_token_nll, perplexity
from icml25.core.training import TrainLoopConfig, train
from icml25.pipelines.frugal.optimizers import (
    BlockAdam,
    Frugal,
    SignSGD,
    layer_blocks,
    split_parameters,
    state_bytes,
    state_floats,
)
from icml25.pipelines.frugal.params import ModelParams, OptimizerParams, TrainParams
from icml25.pipelines.frugal.projectors import block_active_set, subspace_rank


def check_token_ids(ids: np.ndarray, vocab_size: int, name: str) -> np.ndarray:
    """Token ids must be a non-empty 1-D integer array inside the vocabulary."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D token array, got shape {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"{name}: expected integer token ids, got {ids.dtype}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"{name}: ids outside [0, {vocab_size}) "
                         f"(min {ids.min()}, max {ids.max()})")
    return ids


def validation_windows(ids: np.ndarray, seq: int, max_windows: int) -> torch.Tensor:
    """Non-overlapping windows of ``seq + 1`` tokens from the start of a held-out stream."""
    n = min((len(ids) - 1) // seq, max_windows)
    if n < 1:
        raise ValueError(f"held-out stream of {len(ids)} tokens is shorter than one window "
                         f"of {seq + 1}")
    rows = [ids[i * seq: i * seq + seq + 1] for i in range(n)]
    return torch.from_numpy(np.stack(rows).astype(np.int64))


def batch_sampler(ids: np.ndarray, seq: int, batch: int, seed: int):
    """``step -> (batch, seq + 1)`` windows at random offsets, a pure function of the step."""
    if len(ids) <= seq + 1:
        raise ValueError(f"training stream of {len(ids)} tokens is shorter than one window")
    data = torch.from_numpy(ids.astype(np.int64))
    high = len(ids) - seq - 1

    def batch_fn(step: int) -> torch.Tensor:
        rng = np.random.default_rng([seed, step])
        starts = rng.integers(0, high + 1, size=batch)
        return torch.stack([data[s: s + seq + 1] for s in starts])

    return batch_fn


def lr_lambda(steps: int, warmup: int, min_ratio: float):
    """Linear warm-up from ``lr/warmup`` to ``lr``, then cosine decay to ``min_ratio·lr``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, steps - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def build_optimizer(model: LlamaLM, cfg: OptimizerParams, seed: int) -> torch.optim.Optimizer:
    """The optimiser of one named configuration on ``model``."""
    regular, proj = split_parameters(model, proj_embeds=cfg.proj_embeds,
                                     proj_norms=cfg.proj_norms, proj_logits=cfg.proj_logits)
    if cfg.kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=cfg.weight_decay)
    if cfg.kind == "signsgd":
        return SignSGD(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.kind == "badam":
        blocks = layer_blocks(proj, model.config.n_layers, cfg.density)
        return BlockAdam(regular, blocks, lr=cfg.lr, weight_decay=cfg.weight_decay,
                         switch_every=cfg.update_gap, switch_mode="descending")
    # frugal and galore share the implementation; galore is its no-residual, keep-state setting
    return Frugal(regular, proj, lr=cfg.lr, weight_decay=cfg.weight_decay,
                  density=cfg.density, update_gap=cfg.update_gap, projector=cfg.projector,
                  state_free=cfg.state_free, inactive_lr_scale=cfg.inactive_lr_scale,
                  proj_lr_scale=cfg.proj_lr_scale, state_on_refresh=cfg.state_on_refresh,
                  block_order=cfg.block_order, seed=seed)


def expected_state_floats(model: LlamaLM, cfg: OptimizerParams,
                          steps: int = 1, seed: int = 0) -> dict[str, float]:
    """Closed-form optimiser memory (``docs/papers/frugal.md``, "Metrics") for this model.

    ``formula_floats``: the exact count for this configuration after ``steps`` steps (block:
    2·(N_reg + Σ_active m·n) over the last refresh's active set; svd: 2·(N_reg + Σ r·max) +
    Σ r·min; ...).
    ``rho_floats``: the paper's headline ``2·(N_reg + ρ·N_proj)`` with the configured ρ.
    """
    regular, proj = split_parameters(model, proj_embeds=cfg.proj_embeds,
                                     proj_norms=cfg.proj_norms, proj_logits=cfg.proj_logits)
    n_reg = sum(p.numel() for _, p in regular)
    n_proj = sum(p.numel() for _, p in proj)
    n_all = n_reg + n_proj
    last_refresh = (steps - 1) // cfg.update_gap
    rho_floats = 2 * (n_reg + cfg.density * n_proj)
    if cfg.kind == "adamw":
        exact = 2 * n_all
    elif cfg.kind == "signsgd":
        exact = 0
    elif cfg.kind == "badam":
        blocks = layer_blocks(proj, model.config.n_layers, cfg.density)
        active_block = (len(blocks) - 1 - last_refresh) % len(blocks)  # descending
        exact = 2 * (n_reg + sum(p.numel() for _, p in blocks[active_block]))
    elif cfg.projector == "block":
        active = block_active_set(len(proj), cfg.density, last_refresh, cfg.block_order,
                                  seed)
        exact = 2 * (n_reg + sum(proj[i][1].numel() for i in active))
    elif cfg.projector in ("svd", "random"):
        exact = 2 * n_reg
        for _, p in proj:
            r = subspace_rank(tuple(p.shape), cfg.density)
            exact += 2 * r * max(p.shape) + r * min(p.shape)
    elif cfg.projector == "randperm":
        exact = 2 * (n_reg + sum(subspace_rank(tuple(p.shape), cfg.density) * max(p.shape)
                                 for _, p in proj))
    else:  # randk
        exact = 2 * (n_reg + sum(int(cfg.density * p.numel()) for _, p in proj))
    return {"formula_floats": float(exact), "rho_floats": float(rho_floats),
            "n_regular": float(n_reg), "n_projectable": float(n_proj)}


def effective_rank(delta: torch.Tensor, threshold: float) -> int:
    """Numerical rank: singular values above ``threshold·σ_max`` (0 for a zero matrix)."""
    s = torch.linalg.svdvals(delta.double())
    if s.numel() == 0 or s[0] == 0:
        return 0
    return int((s > threshold * s[0]).sum())


@dataclass
class _StepProbe:
    """Optimiser step hooks: wall time of every ``optimizer.step`` and the weights at the start
    and the end of one refresh period (for the effective update rank)."""

    matrices: list[tuple[str, nn.Parameter]]
    start: int
    length: int
    k: int = 0
    seconds: list[float] = field(default_factory=list)
    snapshot: list[torch.Tensor] | None = None
    deltas: list[torch.Tensor] | None = None
    _t0: float = 0.0

    def pre(self, optimizer, args, kwargs) -> None:
        if self.k == self.start:
            self.snapshot = [p.detach().clone() for _, p in self.matrices]
        self._t0 = time.perf_counter()

    def post(self, optimizer, args, kwargs) -> None:
        if next(iter(self.matrices))[1].is_cuda:
            torch.cuda.synchronize()
        self.seconds.append(time.perf_counter() - self._t0)
        self.k += 1
        if self.k == self.start + self.length and self.snapshot is not None:
            self.deltas = [p.detach() - s for (_, p), s in zip(self.matrices, self.snapshot,
                                                                strict=True)]
            self.snapshot = None


def pretrain(
    train_ids: np.ndarray,
    eval_ids: np.ndarray,
    vocab_size: int,
    model_params: ModelParams,
    train_params: TrainParams,
    opt_params: OptimizerParams,
    seed: int,
    device: torch.device,
    *,
    progress: bool = True,
    desc: str = "pretrain",
    split: str = "val",
) -> tuple[LlamaLM, dict[str, Any]]:
    """Train one model with one optimiser and measure it; returns the model and a record.

    ``eval_ids`` is the held-out stream the perplexity is measured on, named ``split`` in the
    record (``<split>_ppl``, ``<split>_nll`` and the curve's ``<split>_ppl``): the validation
    split when learning rates are selected, the test split for the reported results.
    """
    train_ids = check_token_ids(train_ids, vocab_size, "train token ids")
    eval_ids = check_token_ids(eval_ids, vocab_size, f"{split} token ids")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, d_model=model_params.d,
                         n_layers=model_params.layers, n_heads=model_params.heads,
                         d_ff=model_params.ff, max_seq_len=model_params.seq,
                         tie_embeddings=model_params.tie)
    model = LlamaLM(config).to(device)
    optimizer = build_optimizer(model, opt_params, seed)
    tp = train_params
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda(tp.steps, tp.warmup, tp.min_lr_ratio))
    held_out = validation_windows(eval_ids, model_params.seq, tp.val_windows).to(device)
    sample = batch_sampler(train_ids, model_params.seq, tp.batch * tp.grad_accum, seed)

    def batch_fn(step: int) -> torch.Tensor:
        return sample(step).to(device)

    def loss_fn(m: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        if tp.grad_accum == 1:
            return m.loss(batch)
        # gradient accumulation inside one loop step: sum of micro-batch means / n
        # (earlier micro-batches are back-propagated here; the returned value is the full mean
        # while only the last micro-batch's graph is left for the loop's backward)
        chunks = batch.chunk(tp.grad_accum)
        done = 0.0
        for chunk in chunks[:-1]:
            part = m.loss(chunk) / len(chunks)
            part.backward()
            done += float(part.detach())
        return m.loss(chunks[-1]) / len(chunks) + done

    _, proj = split_parameters(model)
    gap = opt_params.update_gap
    period_start = gap if tp.steps >= 2 * gap else 0
    probe = _StepProbe([(n, p) for n, p in proj if p.ndim == 2], period_start,
                       min(gap, tp.steps - period_start))
    handles = [optimizer.register_step_pre_hook(probe.pre),
               optimizer.register_step_post_hook(probe.post)]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        result = train(
            model, optimizer, batch_fn, loss_fn,
            TrainLoopConfig(steps=tp.steps, grad_clip=tp.grad_clip, amp=tp.amp,
                            log_every=tp.log_every, eval_every=tp.eval_every,
                            progress=progress, desc=desc, checkpoint_every=0),
            scheduler=scheduler,
            eval_fn=lambda m: mean_token_nll(m, held_out, tp.eval_batch),
            device=device,
        )
    finally:
        for h in handles:
            h.remove()
    final_nll = mean_token_nll(model, held_out, tp.eval_batch)
    counted = state_floats(optimizer)
    formulas = expected_state_floats(model, opt_params, result.steps_done, seed)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    ranks = []
    if probe.deltas is not None:
        for (_, p), delta in zip(probe.matrices, probe.deltas, strict=True):
            ranks.append(effective_rank(delta, tp.rank_threshold) / min(p.shape))
    # None (JSON null) marks "not measured at this step / on this device"
    curve = [{"step": h["step"], "train_loss": h.get("train_loss"),
              f"{split}_ppl": perplexity(h["val_loss"]) if "val_loss" in h else None}
             for h in result.history]
    step_times = np.asarray(probe.seconds[5:] or probe.seconds)  # skip warm-up allocations
    record = {
        f"{split}_ppl": perplexity(final_nll),
        f"{split}_nll": final_nll,
        "state_floats": float(counted),
        "state_floats_formula": formulas["formula_floats"],
        "state_floats_rho_formula": formulas["rho_floats"],
        "state_floats_formula_abs_error": abs(counted - formulas["formula_floats"]),
        "state_floats_rho_abs_error": abs(counted - formulas["rho_floats"]),
        "state_bytes": float(state_bytes(optimizer)),
        "persistent_memory_bytes": float(2 * param_bytes + state_bytes(optimizer)),
        "cuda_peak_memory_bytes": (float(torch.cuda.max_memory_allocated(device))
                                   if device.type == "cuda" else None),
        "optimizer_step_ms": float(np.median(step_times) * 1e3),
        "train_step_ms": 1e3 * result.seconds / max(1, result.steps_done),
        "update_rank_fraction": float(np.mean(ranks)) if ranks else None,
        "train_seconds": result.seconds,
        "n_regular": formulas["n_regular"],
        "n_projectable": formulas["n_projectable"],
        "curve": curve,
    }
    return model, record
