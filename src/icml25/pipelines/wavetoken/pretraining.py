"""Pretraining one forecaster on one tokenizer (the Chronos recipe).

Windows are drawn from the TSMixup and KernelSynth pools in the proportion ``kernelsynth_share``
(Chronos: 0.9 / 0.1), tokenized on the fly and fed to :func:`icml25.core.training.train`. Each
step's batch depends only on ``(seed, step)``, so an interrupted run resumes exactly from its
checkpoint. The optimiser is AdamW with a linear decay to 0 and no warm-up (Chronos
``scripts/training/configs/chronos-t5-small.yaml``: lr 1e-3, ``lr_scheduler_type: linear``,
``warmup_ratio: 0``, weight decay 0, gradient clipping 1.0).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from icml25.core.distributed import barrier, init_distributed
from icml25.core.training import TrainLoopConfig, TrainResult, train
from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.hf_t5 import build_model
from icml25.pipelines.wavetoken.model import IGNORE_INDEX, Seq2SeqConfig
from icml25.pipelines.wavetoken.params import ModelParams, TokenizerParams, TrainParams
from icml25.pipelines.wavetoken.tokenizer import ForecastTokenizer
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer
from icml25.pipelines.wavetoken.windows import sample_training_windows

logger = logging.getLogger(__name__)


def build_tokenizer(params: TokenizerParams, context_length: int) -> ForecastTokenizer:
    """The tokenizer a variant's parameters describe."""
    if params.kind == "wavelet":
        return WaveletTokenizer(
            vocab_size=params.vocab_size, wavelet=params.wavelet, level=params.level,
            threshold=params.threshold, threshold_q=params.threshold_q,
            threshold_targets=params.threshold_targets, limits=params.limits,
            scaling=params.scaling, context_length=context_length,
        )
    return MeanScaleUniformBins(vocab_size=params.vocab_size, limits=params.limits,
                                scaling=params.scaling, context_length=context_length)


def model_config(params: ModelParams, vocab_size: int, context_length: int,
                 prediction_length: int) -> Seq2SeqConfig:
    return Seq2SeqConfig(
        vocab_size=vocab_size, d_model=params.d_model, n_heads=params.n_heads,
        n_encoder_layers=params.n_encoder_layers, n_decoder_layers=params.n_decoder_layers,
        d_ff=params.d_ff, dropout=params.dropout, max_context_tokens=context_length + 1,
        max_target_tokens=prediction_length + 1, position=params.position,
    )


def make_batch_fn(
    mixes: Sequence[np.ndarray],
    kernelsynth: Sequence[np.ndarray],
    tokenizer: ForecastTokenizer,
    train_params: TrainParams,
    context_length: int,
    prediction_length: int,
    seed: int,
    device: torch.device,
) -> Callable[[int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``step -> (input_ids, attention_mask, labels)``, a pure function of ``(seed, step)``."""
    pools = [(p, w) for p, w in ((mixes, 1.0 - train_params.kernelsynth_share),
                                 (kernelsynth, train_params.kernelsynth_share)) if len(p) and w > 0]
    if not pools:
        raise ValueError("wavetoken.train: no training series (TSMixup and KernelSynth both empty "
                         "or given zero weight by kernelsynth_share)")
    weights = np.array([w for _, w in pools]) / sum(w for _, w in pools)
    batch = train_params.batch_size

    def batch_fn(step: int):
        rng = np.random.default_rng([seed, step])
        counts = rng.multinomial(batch, weights)
        contexts, targets = [], []
        for (pool, _), count in zip(pools, counts, strict=True):
            if count:
                c, t = sample_training_windows(
                    pool, int(count), context_length, prediction_length, train_params.min_past,
                    rng, nan_injection_max=train_params.nan_injection_max)
                contexts.append(c)
                targets.append(t)
        context, target = np.concatenate(contexts), np.concatenate(targets)
        ids, mask, state = tokenizer.context_input(context)
        labels = tokenizer.label_input(target, state)
        return (torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device),
                torch.from_numpy(labels).to(device))

    return batch_fn


def labelled_tokens(batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> float:
    """The tokens a micro-batch's loss averages over (labels not ignored): its weight in the
    step's loss, so that accumulated micro-batches give the whole batch's token mean."""
    return float((batch[2] != IGNORE_INDEX).sum())


def run_key(payload: dict[str, Any]) -> str:
    """Short hash of everything that defines a training run (names its checkpoint folder)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:10]


def pretrain(
    mixes: Sequence[np.ndarray],
    kernelsynth: Sequence[np.ndarray],
    tokenizer: ForecastTokenizer,
    config: Seq2SeqConfig,
    train_params: TrainParams,
    context_length: int,
    prediction_length: int,
    seed: int,
    device: torch.device,
    checkpoint_dir: Path | None = None,
    progress: bool = True,
    desc: str = "train",
    log_fn: Callable[[int, dict[str, float]], None] | None = None,
    backend: str = "torch",
) -> tuple[torch.nn.Module, TrainResult]:
    """Train a fresh model (``backend``: ours or transformers' T5) with cross-entropy on the
    tokenized windows.

    A checkpoint in ``checkpoint_dir`` is resumed; it is removed once training completes so a
    later run with the same settings trains anew rather than silently reusing old weights.
    """
    dist_ctx = init_distributed()  # single process unless started by torchrun
    if dist_ctx.enabled:
        device = dist_ctx.device()
    torch.manual_seed(seed)
    model = build_model(config, backend).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_params.lr,
                                  weight_decay=train_params.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, 1.0 - step / train_params.steps))
    batch_fn = make_batch_fn(mixes, kernelsynth, tokenizer, train_params, context_length,
                             prediction_length, seed, device)
    loop = TrainLoopConfig(
        steps=train_params.steps, grad_clip=train_params.grad_clip or None,
        amp=train_params.amp, log_every=train_params.log_every,
        checkpoint_every=train_params.checkpoint_every if checkpoint_dir else 0,
        checkpoint_dir=checkpoint_dir, progress=progress, desc=desc,
        micro_batches=train_params.micro_batches, micro_batch_weight=labelled_tokens,
    )
    result = train(model, optimizer, batch_fn, lambda m, b: m.loss(*b), loop,
                   scheduler=scheduler, log_fn=log_fn, device=device, dist_ctx=dist_ctx)
    barrier(dist_ctx)
    if dist_ctx.is_main and checkpoint_dir is not None and Path(checkpoint_dir).exists():
        shutil.rmtree(checkpoint_dir)
    return model, result
