"""Forecast metrics of the wavetoken pipeline (docs/papers/wavetoken.md, "Metrics").

WQL and MASE are gluonts' (0.17, ``gluonts.model.evaluation.evaluate_forecasts`` with
``MeanWeightedSumQuantileLoss`` and ``MASE()``, as the Chronos benchmark scores them), and equal
them to float rounding (tests/pipelines/wavetoken/test_peer_gluonts.py asserts 1e-6 relative on
random sample forecasts, real datasets and short histories):

- quantiles: the sample paths' order statistics as gluonts' ``SampleForecast.quantile`` picks
  them (rank ``round((S - 1) q)`` of the sorted samples, no interpolation);
- WQL: ``MeanWeightedSumQuantileLoss`` — per level 2 sum |(y - y_q)(1{y <= y_q} - q)| / sum |y|,
  both sums over the whole dataset, then the mean over the levels;
- MASE: ``MASE()`` — the mean over every (series, step) of |y - median| / seasonal error of that
  series' whole history (``gluonts.ev.ts_stats.seasonal_error``: lag s, or 1 when s exceeds the
  history length; NaN pairs masked). gluonts masks the entries of a series whose seasonal error
  is zero or undefined (history of length s or 1); :func:`mase` skips those series, the same
  value. With one horizon for all series this is the mean over series of per-series ratios;
- ``seasonality``: gluonts ``get_seasonality`` of pandas frequency strings.

Not covered by the equality: NaN targets or forecasts (gluonts masks NaN labels; these functions
reject them — the pipeline's evaluation sets have none), and datasets on which every series is
skipped or sum |y| = 0 (NaN with a warning here, NaN or inf in gluonts).

- Aggregation: geometric mean of per-dataset ratios to seasonal naive (Chronos
  ``scripts/evaluation/agg-relative-score.py``) and average rank.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

QUANTILE_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""The nine quantile levels of the Chronos benchmark WQL."""

GLUONTS_SEASONALITIES: dict[str, int] = {
    "S": 3600,
    "T": 1440,
    "H": 24,
    "D": 1,
    "W": 1,
    "M": 12,
    "B": 5,
    "Q": 4,
}
"""gluonts ``time_feature.seasonality.DEFAULT_SEASONALITIES`` (keys in the pre-2.2 pandas names)."""

# pandas >= 2.2 renamed offset aliases (h, min, s, ME, QE, YE); map them back to gluonts' keys.
_PANDAS_ALIASES: dict[str, str] = {
    "s": "S",
    "min": "T",
    "h": "H",
    "ME": "M",
    "MS": "M",
    "QE": "Q",
    "QS": "Q",
    "YE": "Y",
    "YS": "Y",
    "A": "Y",
    "AS": "Y",
}


def _levels(levels: Sequence[float] | npt.ArrayLike, name: str = "levels") -> FloatArray:
    q = np.asarray(levels, dtype=np.float64)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of quantile levels")
    if not np.all((q > 0) & (q < 1)):
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {q.tolist()}")
    return q


def _finite_array(values: npt.ArrayLike, name: str, ndim: int) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or ±inf")
    return arr


def quantiles_from_samples(
    samples: npt.ArrayLike, levels: Sequence[float] = QUANTILE_LEVELS
) -> FloatArray:
    """Sample quantiles of sample paths as gluonts' ``SampleForecast.quantile`` takes them:
    samples [n, S, H] -> quantiles [n, Q, H].

    The quantile at level q is the order statistic of rank ``round((S - 1) q)`` (numpy's
    round-half-to-even) of each step's S sorted samples, with no interpolation between order
    statistics. This is what the Chronos evaluation scores (its forecasts are gluonts
    ``SampleForecast`` objects), so WQL and MASE here equal gluonts' on the same samples.
    """
    x = _finite_array(samples, "samples", 3)
    q = _levels(levels)
    n_samples = x.shape[1]
    ranks = np.array([int(np.round((n_samples - 1) * level)) for level in q], dtype=np.int64)
    return np.sort(x, axis=1)[:, ranks, :]


def weighted_quantile_loss(
    y: npt.ArrayLike, q_forecast: npt.ArrayLike, levels: Sequence[float] = QUANTILE_LEVELS
) -> float:
    """Dataset WQL = mean_q 2 sum |(y - y_q)(1{y <= y_q} - q)| / sum |y| (gluonts).

    gluonts ``MeanWeightedSumQuantileLoss``: both sums run over every series and step of the
    dataset. A point forecast (every quantile equal) gives WAPE. Returns NaN with a warning when
    sum |y| = 0.

    Args:
        y: targets [n, H].
        q_forecast: quantile forecasts [n, Q, H], Q = len(levels).
        levels: quantile levels in (0, 1).
    """
    target = _finite_array(y, "y", 2)
    fc = _finite_array(q_forecast, "q_forecast", 3)
    q = _levels(levels)
    if fc.shape != (target.shape[0], q.size, target.shape[1]):
        raise ValueError(
            f"q_forecast must have shape [n, Q, H] = {(target.shape[0], q.size, target.shape[1])} "
            f"to match y {target.shape} and {q.size} levels, got {fc.shape}"
        )
    denom = np.abs(target).sum()
    if denom == 0:
        warnings.warn("weighted_quantile_loss: sum |y| = 0, WQL undefined (NaN)", stacklevel=2)
        return float("nan")
    yy = target[:, None, :]
    indicator = (yy <= fc).astype(np.float64)
    loss = 2.0 * np.abs((yy - fc) * (indicator - q[None, :, None]))
    per_level = loss.sum(axis=(0, 2)) / denom
    return float(per_level.mean())


def effective_season(season: int, history_length: int) -> int:
    """The seasonal lag seasonal naive uses: ``season`` if shorter than the history, else 1.

    (A history exactly one season long still repeats that season here; :func:`seasonal_error`
    instead follows gluonts, for which that history has no seasonal pair.)
    """
    return season if 1 <= season < history_length else 1


def seasonal_error(history: npt.ArrayLike, season: int) -> float:
    """mean_t |x_t - x_{t-s}| over one whole history (gluonts ``ts_stats.seasonal_error``).

    s > len(history) falls back to s = 1, as gluonts does; pairs with a NaN are ignored (gluonts
    masks invalid values). Returns NaN when no pair is left: a history of length 1, one exactly
    ``season`` long (gluonts: an empty mean, which it masks), or NaN in every pair.
    """
    x = np.asarray(history, dtype=np.float64).ravel()
    if np.isinf(x).any():
        raise ValueError("history contains ±inf")
    s = int(season)
    if s < 1:
        raise ValueError(f"season must be a positive integer, got {season!r}")
    if s > x.size:
        s = 1
    if x.size <= s:
        return float("nan")
    diffs = np.abs(x[s:] - x[:-s])
    diffs = diffs[~np.isnan(diffs)]
    return float(diffs.mean()) if diffs.size else float("nan")


def mase(
    y: npt.ArrayLike,
    median: npt.ArrayLike,
    histories: Sequence[npt.ArrayLike],
    season: int,
) -> float:
    """Dataset MASE = mean over series of mean|y - median| / seasonal error (gluonts ``MASE()``).

    Series whose seasonal error is zero or undefined (see :func:`seasonal_error`) are skipped
    with a log message, as gluonts masks their entries; if every series is skipped the result is
    NaN with a warning.

    Args:
        y: targets [n, H].
        median: point (median) forecasts [n, H].
        histories: n 1-D arrays, the observed history before each target window.
        season: seasonal lag s >= 1 (see :func:`seasonality`); s > len(history) -> s = 1.
    """
    target = _finite_array(y, "y", 2)
    point = _finite_array(median, "median", 2)
    if point.shape != target.shape:
        raise ValueError(f"median shape {point.shape} does not match y shape {target.shape}")
    if isinstance(season, bool) or not isinstance(season, int | np.integer) or season < 1:
        raise ValueError(f"season must be a positive integer, got {season!r}")
    if len(histories) != target.shape[0]:
        raise ValueError(f"histories has {len(histories)} series but y has {target.shape[0]} rows")
    ratios = []
    skipped = []
    for i, hist in enumerate(histories):
        scale = seasonal_error(hist, season)
        if not scale > 0:  # zero or NaN
            skipped.append(i)
            continue
        ratios.append(np.abs(target[i] - point[i]).mean() / scale)
    if skipped:
        logger.info(
            "mase: skipped %d of %d series with zero or undefined seasonal error (first: %s)",
            len(skipped),
            target.shape[0],
            skipped[:5],
        )
    if not ratios:
        warnings.warn(
            "mase: every series has a zero or undefined seasonal error (NaN)", stacklevel=2
        )
        return float("nan")
    return float(np.mean(ratios))


def seasonality(freq: str) -> int:
    """Seasonal period of a pandas frequency string (gluonts ``get_seasonality``).

    Base periods: seconds 3600, minutes 1440, hours 24, D 1, W 1, M 12, Q 4, B 5, anything
    else (Y/A included) 1; a multiple divides the base (``30min`` -> 48, ``15min`` -> 96,
    ``2h`` -> 12) and falls back to 1 when it does not divide evenly. Unknown strings -> 1.
    """
    if not isinstance(freq, str) or not freq.strip():
        raise ValueError(f"freq must be a non-empty pandas frequency string, got {freq!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas deprecation notes for 'H', 'T', 'M', 'A'...
            offset = pd.tseries.frequencies.to_offset(freq)
    except ValueError:
        logger.warning("seasonality: unknown frequency %r, using 1", freq)
        return 1
    name = offset.name.split("-")[0]
    name = re.sub(r"^\d+", "", name)
    key = _PANDAS_ALIASES.get(name, name)
    base = GLUONTS_SEASONALITIES.get(key, 1)
    period, remainder = divmod(base, offset.n)
    if remainder or period < 1:
        logger.warning(
            "seasonality: multiple %d does not divide base seasonality %d of %r, using 1",
            offset.n,
            base,
            freq,
        )
        return 1
    return int(period)


def _check_scores(scores: Mapping[str, Mapping[str, float]]) -> None:
    if not isinstance(scores, Mapping) or not scores:
        raise ValueError("scores must be a non-empty mapping model -> {dataset: value}")
    for model, per_dataset in scores.items():
        if not isinstance(per_dataset, Mapping):
            raise ValueError(f"scores[{model!r}] must be a mapping dataset -> value")


def aggregate_relative(
    scores: Mapping[str, Mapping[str, float]], baseline: str = "seasonal_naive"
) -> dict[str, float]:
    """Geometric mean over datasets of model / baseline (Chronos ``agg-relative-score.py``).

    For each model, only datasets that both it and the baseline have are used; datasets whose
    baseline value is zero or non-finite, or whose model value is non-finite, are skipped and
    logged. A model with no usable dataset gets NaN (with a warning). The baseline scores 1.
    A model value of 0 gives a ratio of 0 and hence an aggregate of 0; negative values raise.
    """
    _check_scores(scores)
    if baseline not in scores:
        raise ValueError(f"baseline {baseline!r} is not among the scored models {list(scores)}")
    base = scores[baseline]
    out: dict[str, float] = {}
    for model, per_dataset in scores.items():
        ratios = []
        skipped = []
        for dataset, value in per_dataset.items():
            if dataset not in base:
                continue
            b = float(base[dataset])
            v = float(value)
            if v < 0 or b < 0:
                raise ValueError(
                    f"scores must be non-negative errors, got {model!r}/{dataset!r} = {v} "
                    f"against baseline {b}"
                )
            if not np.isfinite(b) or b == 0 or not np.isfinite(v):
                skipped.append(dataset)
                continue
            ratios.append(v / b)
        if skipped:
            logger.info(
                "aggregate_relative: %s skips datasets %s (zero or non-finite values)",
                model,
                skipped,
            )
        if not ratios:
            warnings.warn(
                f"aggregate_relative: no dataset usable for {model!r} (NaN)", stacklevel=2
            )
            out[model] = float("nan")
            continue
        r = np.asarray(ratios)
        out[model] = 0.0 if np.any(r == 0) else float(np.exp(np.mean(np.log(r))))
    return out


def average_rank(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean over datasets of each model's rank (1 = lowest score, ties share the average rank).

    Only datasets on which every model has a finite score are ranked; the others are skipped
    and logged. With no such dataset every model gets NaN (with a warning).
    """
    _check_scores(scores)
    models = list(scores)
    datasets = sorted(set().union(*(set(v) for v in scores.values())))
    usable = [
        d
        for d in datasets
        if all(d in scores[m] and np.isfinite(float(scores[m][d])) for m in models)
    ]
    skipped = sorted(set(datasets) - set(usable))
    if skipped:
        logger.info(
            "average_rank: skipping datasets without a finite score for every model: %s", skipped
        )
    if not usable:
        warnings.warn("average_rank: no dataset is scored by every model (NaN)", stacklevel=2)
        return {m: float("nan") for m in models}
    table = np.array([[float(scores[m][d]) for d in usable] for m in models])
    from scipy.stats import rankdata  # scipy.stats takes ~0.3 s to import: only when ranking

    ranks = rankdata(table, method="average", axis=0)
    return {m: float(r) for m, r in zip(models, ranks.mean(axis=1), strict=True)}
