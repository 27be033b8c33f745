"""Training windows for the wavetoken models (the Chronos training recipe).

Follows Chronos' training data path (amazon-science/chronos-forecasting,
``scripts/training/train.py``, read at commit 95185d1):

- ``has_enough_observations``: a series is used only if ``len >= min_past + prediction_length``;
- gluonts ``ExpectedNumInstanceSampler(min_past, min_future=prediction_length)`` +
  ``InstanceSplitter(past_length=context_length, dummy_value=nan)``: a cut ``t`` uniform in
  ``[min_past, len - prediction_length]`` (both ends included), context = the ``context_length``
  points before ``t`` left-padded with NaN, target = the ``prediction_length`` points from ``t``;
  windows whose context is entirely NaN are dropped (``FilterTransformation``);
- ``ChronosDataset.preprocess_entry``: NaN injection at a rate ``p ~ U(0, drop_prob)`` per series
  (``drop_prob = 0.2``, seq2seq only).

Differences (ours): series are drawn uniformly with replacement per window instead of Chronos'
cyclic, shuffled streams; NaNs are injected into the *context only* -- Chronos drops values of the
whole series, targets included, and masks those labels with -100, but a wavelet coefficient mixes
several target values, so a single missing target cannot be masked token by token; injection never
removes the last observed point of a context, and a window whose target is entirely NaN is redrawn
like one with an empty context.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from icml25.core.params import positive_int

_MAX_DRAWS_PER_WINDOW = 100


def sample_training_windows(
    series: Sequence[npt.ArrayLike],
    n_windows: int,
    context_length: int,
    prediction_length: int,
    min_past: int,
    rng: np.random.Generator,
    nan_injection_max: float = 0.2,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n_windows`` (context, target) pairs from ``series``.

    Args:
        series: 1-D float arrays (NaN = missing; ±inf is rejected).
        n_windows: number of windows to return.
        context_length: C, columns of each context (left-padded with NaN when the cut is early).
        prediction_length: H, columns of each target.
        min_past: at least this many points of the series lie before the cut (Chronos 60 at paper
            scale); series shorter than ``min_past + H`` are skipped.
        rng: the only source of randomness.
        nan_injection_max: per window, a rate ``p ~ U(0, nan_injection_max)`` and every observed
            context point becomes NaN with probability ``p``; 0 disables it.

    Returns:
        ``contexts`` float64 ``[n_windows, C]`` and ``targets`` float64 ``[n_windows, H]``.
    """
    n_windows = positive_int(n_windows, "n_windows")
    context_length = positive_int(context_length, "context_length")
    prediction_length = positive_int(prediction_length, "prediction_length")
    min_past = positive_int(min_past, "min_past")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    if isinstance(nan_injection_max, bool) or not 0.0 <= float(nan_injection_max) < 1.0:
        raise ValueError(
            f"nan_injection_max: got {nan_injection_max!r}; expected 0 <= value < 1 (0 = off)"
        )
    if isinstance(series, np.ndarray) and series.ndim == 1:
        raise ValueError("series: expected a list of 1-D arrays, got a single 1-D array")
    if len(series) == 0:
        raise ValueError("series: empty list; no data to draw training windows from")

    min_length = min_past + prediction_length
    usable: list[np.ndarray] = []
    for i, values in enumerate(series):
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"series[{i}]: expected a 1-D array, got shape {arr.shape}")
        if np.isinf(arr).any():
            raise ValueError(f"series[{i}]: contains ±inf; use NaN for missing values")
        if arr.size >= min_length and not np.isnan(arr).all():
            usable.append(arr)
    if not usable:
        longest = max(np.asarray(v).size for v in series)
        raise ValueError(
            f"series: none of the {len(series)} series is long enough for training windows: "
            f"each needs >= min_past + prediction_length = {min_past} + {prediction_length} = "
            f"{min_length} points with at least one observed value (longest: {longest})"
        )

    contexts = np.full((n_windows, context_length), np.nan)
    targets = np.empty((n_windows, prediction_length))
    for w in range(n_windows):
        for _ in range(_MAX_DRAWS_PER_WINDOW):
            arr = usable[rng.integers(len(usable))]
            cut = int(rng.integers(min_past, arr.size - prediction_length + 1))
            past = arr[max(0, cut - context_length) : cut]
            future = arr[cut : cut + prediction_length]
            if not (np.isnan(past).all() or np.isnan(future).all()):
                break
        else:
            raise ValueError(
                f"series: {_MAX_DRAWS_PER_WINDOW} draws in a row gave windows whose context or "
                "target is entirely NaN; the series hold too many missing values"
            )
        contexts[w, context_length - past.size :] = past
        targets[w] = future
        if nan_injection_max > 0:
            _inject_nans(contexts[w], float(nan_injection_max), rng)
    return contexts, targets


def _inject_nans(context: np.ndarray, nan_injection_max: float, rng: np.random.Generator) -> None:
    """Set observed points of ``context`` (in place) to NaN with a rate ``p ~ U(0, max)``."""
    rate = rng.uniform(0.0, nan_injection_max)
    observed = ~np.isnan(context)
    drop = observed & (rng.random(context.size) < rate)
    if drop.sum() == observed.sum():
        # keep the newest observation so the window still has a history (Chronos filters
        # windows with no observed past)
        drop[np.flatnonzero(observed)[-1]] = False
    context[drop] = np.nan
