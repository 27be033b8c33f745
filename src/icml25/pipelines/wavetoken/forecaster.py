"""Probabilistic forecasts from a token model and a tokenizer (paper Sec. 3, decoding).

The loop is Chronos' ``ChronosPipeline.predict`` (amazon-science/chronos-forecasting,
``src/chronos/chronos.py``, read at commit 95185d1): tokenize the context, sample token paths,
decode them to values; while more steps are wanted, append the per-step median of the samples to
the context and forecast again. Two differences, both forced by the wavelet tokens (only full
coefficient blocks can be inverted):

- the model always emits a full block of ``tokenizer.num_target_tokens(prediction_length)``
  tokens, and a shorter request keeps the first values of the block (Chronos generates
  ``min(remaining, prediction_length)`` tokens instead);
- the context keeps its width ``C``: appending a block drops the oldest points (Chronos appends and
  lets ``context_input_transform`` keep the last ``context_length`` points -- the same thing when
  ``C`` is the model's context length).

The median is torch's ``median(dim=1)`` as in Chronos, i.e. the *lower* of the two middle samples
for an even number of samples (20 by default), not numpy's average of the two.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from tqdm.auto import tqdm

from icml25.core.params import positive_int
from icml25.pipelines.wavetoken.tokenizer import ForecastTokenizer


def _check_contexts(contexts: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(contexts, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(
            f"contexts: expected a 2-D array [n_series, context_length], got shape {arr.shape}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"contexts: empty input (shape {arr.shape}); nothing to forecast")
    if np.isinf(arr).any():
        rows = np.unique(np.nonzero(np.isinf(arr))[0])
        raise ValueError(
            f"contexts: ±inf in rows {rows[:5].tolist()}{'...' if rows.size > 5 else ''}; "
            "use NaN for missing values"
        )
    no_history = np.isnan(arr).all(axis=1)
    if no_history.any():
        rows = np.nonzero(no_history)[0]
        raise ValueError(
            f"contexts: rows {rows[:5].tolist()}{'...' if rows.size > 5 else ''} have no "
            "observed value (all NaN)"
        )
    return arr


def _lower_median(samples: np.ndarray) -> np.ndarray:
    """Median over axis 1 of ``[n, S, H]`` exactly as ``torch.Tensor.median(dim=1)`` (Chronos)."""
    return torch.from_numpy(np.ascontiguousarray(samples)).median(dim=1).values.numpy()


def forecast(
    model: Any,
    tokenizer: ForecastTokenizer,
    contexts: npt.ArrayLike,
    horizon: int,
    prediction_length: int,
    n_samples: int = 20,
    temperature: float = 1.0,
    top_k: int | None = 50,
    top_p: float = 1.0,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    seed: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """Sample ``n_samples`` forecast paths of ``horizon`` steps for every context row.

    Args:
        model: an object with ``generate(input_ids, attention_mask, n_tokens, n_samples,
            temperature, top_k, top_p, generator) -> LongTensor [b, n_samples, n_tokens]``
            (:class:`~icml25.pipelines.wavetoken.model.Seq2SeqForecaster`). An ``nn.Module`` is
            moved to ``device``.
        tokenizer: a :class:`~icml25.pipelines.wavetoken.tokenizer.ForecastTokenizer`.
        contexts: float ``[n, C]``; leading NaNs mark a shorter history, interior NaNs are
            missing values (the tokenizer fills them). ±inf, all-NaN rows and empty input raise.
        horizon: steps to forecast (any positive integer).
        prediction_length: values per generated block (the model's H; the tokenizer may require
            it to be a multiple of 2^J). ``horizon > prediction_length`` rolls out block by block.
        n_samples, temperature, top_k, top_p: sampling settings (Chronos defaults: 20, 1, 50, 1).
        batch_size: series per ``generate`` call.
        device: where the model runs.
        seed: seeds one ``torch.Generator`` for the whole call; results are identical for the same
            (seed, batch_size, inputs) -- the batch size changes how the random stream is split.
        progress: show a tqdm bar over batches.

    Returns:
        float64 ``[n, n_samples, horizon]`` in the contexts' units.
    """
    arr = _check_contexts(contexts)
    horizon = positive_int(horizon, "horizon")
    prediction_length = positive_int(prediction_length, "prediction_length")
    n_samples = positive_int(n_samples, "n_samples")
    batch_size = positive_int(batch_size, "batch_size")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed: got {seed!r}; expected a non-negative integer")
    n_tokens = int(tokenizer.num_target_tokens(prediction_length))
    device = torch.device(device)

    was_training = None
    if isinstance(model, nn.Module):
        was_training = model.training
        model.to(device)
        model.eval()
    generator = torch.Generator(device=device).manual_seed(int(seed))

    n, width = arr.shape
    out = np.empty((n, n_samples, horizon), dtype=np.float64)
    starts = range(0, n, batch_size)
    bar = tqdm(
        starts,
        total=math.ceil(n / batch_size),
        desc=f"forecast {getattr(tokenizer, 'name', 'tokens')}",
        disable=not progress,
    )
    try:
        for start in bar:
            context = arr[start : start + batch_size].copy()
            done = 0
            while done < horizon:
                input_ids, attention_mask, state = tokenizer.context_input(context)
                tokens = model.generate(
                    torch.as_tensor(np.asarray(input_ids), dtype=torch.long, device=device),
                    torch.as_tensor(np.asarray(attention_mask), dtype=torch.bool, device=device),
                    n_tokens=n_tokens,
                    n_samples=n_samples,
                    temperature=temperature,
                    top_k=top_k,
                    top_p=top_p,
                    generator=generator,
                )
                ids = tokens.detach().cpu().numpy()
                expected = (context.shape[0], n_samples, n_tokens)
                if ids.shape != expected:
                    raise ValueError(
                        f"model.generate returned shape {ids.shape}; expected {expected}"
                    )
                values = np.asarray(tokenizer.output_transform(ids, state), dtype=np.float64)
                if values.ndim != 3 or values.shape[:2] != expected[:2]:
                    raise ValueError(
                        f"tokenizer.output_transform returned shape {values.shape}; expected "
                        f"[{expected[0]}, {n_samples}, >= {prediction_length}]"
                    )
                if values.shape[2] < prediction_length:
                    raise ValueError(
                        f"tokenizer.output_transform returned {values.shape[2]} steps per block; "
                        f"expected at least prediction_length={prediction_length}"
                    )
                block = values[:, :, :prediction_length]
                take = min(horizon - done, prediction_length)
                out[start : start + context.shape[0], :, done : done + take] = block[:, :, :take]
                done += take
                if done < horizon:
                    # Chronos: feed the per-step median back and forecast the next block
                    context = np.concatenate([context, _lower_median(block)], axis=1)[:, -width:]
    finally:
        bar.close()
        if was_training:
            model.train()
    return out
