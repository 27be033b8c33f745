"""Local statistical baselines of the WaveToken paper as quantile forecasts.

The paper's local models: seasonal naive (the normaliser of every relative score), naive,
AutoETS, AutoARIMA and AutoTheta via statsforecast, quantiles 0.1 … 0.9 from the prediction
intervals ``level = [20, 40, 60, 80]`` (the ``level``-% interval has bounds at quantiles
``(1 ∓ level/100)/2``: 80 -> 0.1/0.9, …, 20 -> 0.4/0.6), median = the point forecast ``mean``.

Choices made here:

- ``seasonal_naive`` and ``naive`` are the *point* versions (every quantile on the point forecast,
  a point forecast such as seasonal naive puts every quantile on the point, so
  their WQL equals WAPE). They are computed in numpy with exactly statsforecast's formula
  (``ŷ_{T+h} = y_{T+h-s·⌈h/s⌉}``; naive = season 1); a season at least as long as the history
  falls back to season 1 (as in MASE).
- The auto models run per series through statsforecast's model API
  (``Model(season_length=s).forecast(y=history, h=H, level=…)``), which is what
  ``StatsForecast(freq=1).forecast`` calls for each series; calling it directly lets a failure on one
  series (an exception or a non-finite output, e.g. AutoARIMA on a very short series) fall back to
  the point seasonal naive for that series, with a logged warning and a count
  (``BaselineForecasts.n_fallbacks``).
- AutoARIMA ignores seasons longer than ``arima_max_season`` (default 24, the same limit as ETS'
  "frequency greater than 24" rule that statsforecast's AutoETS applies): a seasonal ARIMA with
  period 48 (taylor) takes minutes per series (measured: 138 s on 500 points), a non-seasonal one
  seconds. AutoETS and AutoTheta get the true season.
- ``max_history`` (default ``None`` = all) optionally fits the auto models on the last points only.
- Quantiles are sorted along the quantile axis (a no-op for statsforecast's symmetric intervals,
  kept as a guarantee of non-crossing quantiles).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Sequence

import numpy as np

from icml25.pipelines.wavetoken.metrics import effective_season

logger = logging.getLogger(__name__)

DEFAULT_MODELS: tuple[str, ...] = ("seasonal_naive", "naive", "auto_ets", "auto_arima", "auto_theta")
DEFAULT_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
POINT_MODELS = ("seasonal_naive", "naive")
AUTO_MODELS = ("auto_ets", "auto_arima", "auto_theta")


class BaselineForecasts(dict):
    """``{model: array [n_series, n_levels, horizon]}`` plus bookkeeping of the run.

    ``n_fallbacks[model]``: series on which the model failed and seasonal naive was used instead;
    ``seconds[model]``: wall time spent on that model.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.n_fallbacks: dict[str, int] = {}
        self.seconds: dict[str, float] = {}


def seasonal_naive_point(history: np.ndarray, horizon: int, season: int) -> np.ndarray:
    """Point seasonal naive: repeat the last ``season`` observations (statsforecast's formula)."""
    history = np.asarray(history, dtype=np.float64)
    if history.size == 0:
        raise ValueError("seasonal naive needs a non-empty history")
    s = effective_season(season, history.size)
    last_season = history[-s:]
    return last_season[np.arange(horizon) % s]


def level_keys(levels: Sequence[float]) -> list[str]:
    """statsforecast output key of each quantile level: ``lo-80`` for 0.1, ``mean`` for 0.5, …"""
    keys = []
    for q in levels:
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile levels must lie in (0, 1), got {q}")
        width = round(100 * abs(1.0 - 2.0 * q), 6)
        if width == 0:
            keys.append("mean")
        else:
            keys.append(f"{'lo' if q < 0.5 else 'hi'}-{width:g}")
    return keys


def interval_levels(levels: Sequence[float]) -> list[float]:
    """The distinct interval widths (statsforecast ``level``) needed for ``levels``."""
    widths = sorted({round(100 * abs(1.0 - 2.0 * q), 6) for q in levels} - {0})
    return [int(w) if float(w).is_integer() else w for w in widths]


def _make_model(name: str, season: int, arima_max_season: int):
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta

    if name == "auto_ets":
        return AutoETS(season_length=season)
    if name == "auto_theta":
        return AutoTheta(season_length=season)
    if name == "auto_arima":
        if season > arima_max_season:
            return AutoARIMA(season_length=1, seasonal=False)
        return AutoARIMA(season_length=season)
    raise ValueError(f"unknown model {name!r}")


def _auto_forecast(
    name: str,
    history: np.ndarray,
    horizon: int,
    season: int,
    levels: Sequence[float],
    arima_max_season: int,
    max_history: int | None,
) -> np.ndarray | None:
    """``[Q, H]`` quantile forecast of one auto model on one series, or ``None`` on failure."""
    y = history if max_history is None else history[-max_history:]
    s = effective_season(season, y.size)
    keys = level_keys(levels)
    widths = interval_levels(levels)
    try:
        with warnings.catch_warnings():
            # statsforecast warns (divide by zero in acf, sigma2 ...) on degenerate series; a
            # bad result is caught below by the finiteness check.
            warnings.simplefilter("ignore")
            model = _make_model(name, s, arima_max_season)
            kwargs = {"level": widths} if widths else {}
            out = model.forecast(y=y, h=horizon, **kwargs)
        fc = np.stack([np.asarray(out[key], dtype=np.float64) for key in keys])
    except Exception as err:  # statsforecast raises many types on degenerate series
        logger.debug("%s failed: %r", name, err)
        return None
    if fc.shape != (len(keys), horizon) or not np.all(np.isfinite(fc)):
        return None
    return np.sort(fc, axis=0)


def _forecast_chunk(
    name: str,
    histories: Sequence[np.ndarray],
    horizon: int,
    season: int,
    levels: Sequence[float],
    arima_max_season: int,
    max_history: int | None,
) -> list[np.ndarray | None]:
    return [
        _auto_forecast(name, h, horizon, season, levels, arima_max_season, max_history)
        for h in histories
    ]


def run_statsforecast(
    histories: Sequence[np.ndarray],
    horizon: int,
    season: int,
    models: Sequence[str] = DEFAULT_MODELS,
    levels: Sequence[float] = DEFAULT_LEVELS,
    n_jobs: int = 1,
    *,
    arima_max_season: int = 24,
    max_history: int | None = None,
) -> BaselineForecasts:
    """Quantile forecasts ``{model: [n_series, len(levels), horizon]}`` of the local baselines.

    ``histories`` are the observed parts (no NaN) of the series of one dataset, ``season`` its
    gluonts seasonality. Failures of an auto model on a series fall back to point seasonal naive
    (warning + ``n_fallbacks``). ``n_jobs > 1`` spreads the series over joblib processes.
    """
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    if season < 1:
        raise ValueError(f"season must be >= 1, got {season}")
    unknown = [m for m in models if m not in POINT_MODELS + AUTO_MODELS]
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; known: {POINT_MODELS + AUTO_MODELS}")
    level_keys(levels)  # validates the levels
    arrays = [np.asarray(h, dtype=np.float64).ravel() for h in histories]
    for i, h in enumerate(arrays):
        if h.size == 0 or not np.all(np.isfinite(h)):
            raise ValueError(f"history {i} is empty or has non-finite values")
    n, n_q = len(arrays), len(levels)

    def point_forecasts(s: int) -> np.ndarray:
        rows = [seasonal_naive_point(h, horizon, s) for h in arrays]
        return np.stack(rows) if rows else np.empty((0, horizon))

    snaive = point_forecasts(season)
    result = BaselineForecasts()
    for name in models:
        start = time.perf_counter()
        if name in POINT_MODELS:
            point = snaive if name == "seasonal_naive" else point_forecasts(1)
            result[name] = np.repeat(point[:, None, :], n_q, axis=1)
            result.n_fallbacks[name] = 0
        else:
            args = (horizon, season, levels, arima_max_season, max_history)
            if n_jobs == 1 or n <= 1:
                forecasts = _forecast_chunk(name, arrays, *args)
            else:
                from joblib import Parallel, delayed, effective_n_jobs

                n_chunks = min(n, effective_n_jobs(n_jobs))
                chunks = [c.tolist() for c in np.array_split(np.arange(n), n_chunks)]
                parts = Parallel(n_jobs=n_jobs)(
                    delayed(_forecast_chunk)(name, [arrays[i] for i in c], *args) for c in chunks
                )
                forecasts = [fc for part in parts for fc in part]
            out = np.empty((n, n_q, horizon))
            failed = 0
            for i, fc in enumerate(forecasts):
                if fc is None:
                    failed += 1
                    out[i] = snaive[i][None, :]
                else:
                    out[i] = fc
            if failed:
                logger.warning(
                    "%s failed on %d of %d series; used seasonal naive for those", name, failed, n
                )
            result[name] = out
            result.n_fallbacks[name] = failed
        result.seconds[name] = time.perf_counter() - start
    return result
