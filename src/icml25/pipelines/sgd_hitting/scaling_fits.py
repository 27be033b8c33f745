"""Fits of log hitting time against 1/η.

The theory says ``η log E τ_η → E``: the slope of ``log(η τ)`` (continuous-time normalisation,
less prefactor bias) or of ``log τ`` against ``1/η`` estimates E. Reported: the OLS slope,
intercept and R², the local slopes between consecutive step sizes, and a bootstrap CI of the
slope (chains resampled within each η).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def ols(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Slope, intercept and R² of the least-squares line ``y ≈ a x + c``."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"ols: need two or more paired values, got {x.size} and {y.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return math.nan, math.nan, math.nan
    a, c = np.polyfit(x, y, 1)
    resid = y - (a * x + c)
    tss = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / tss if tss > 0 else math.nan
    return float(a), float(c), r2


def scaling_fit(etas: Sequence[float], times: Sequence[float],
                normalise: bool = True) -> dict[str, float | list[float]]:
    """OLS of ``log(η τ)`` (``normalise``) or ``log τ`` on ``1/η``, plus local slopes.

    Local slopes are listed from the largest η pair to the smallest; ``local_slope`` is the
    last (closest to the η → 0 limit).
    """
    etas = np.asarray(etas, float)
    times = np.asarray(times, float)
    if np.any(etas <= 0):
        raise ValueError(f"scaling_fit: step sizes must be > 0, got {etas.tolist()}")
    order = np.argsort(-etas)
    etas, times = etas[order], times[order]
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(etas * times) if normalise else np.log(times)
    x = 1.0 / etas
    slope, intercept, r2 = ols(x, y)
    local = [float((y[k + 1] - y[k]) / (x[k + 1] - x[k])) for k in range(len(x) - 1)]
    return {"slope": slope, "intercept": intercept, "r2": r2, "local_slopes": local,
            "local_slope": local[-1] if local else math.nan}


def bootstrap_slope(samples: Sequence[tuple[float, np.ndarray, np.ndarray]],
                    estimator: Callable[[np.ndarray, np.ndarray], float], n_boot: int,
                    rng: np.random.Generator, normalise: bool = True,
                    level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of the fitted slope, resampling chains within each step size.

    ``samples``: (η, τ, censored) per step size; ``estimator``: e.g. the censored mean.
    """
    etas = [s[0] for s in samples]
    slopes = []
    for _ in range(n_boot):
        times = []
        for _, tau, cens in samples:
            idx = rng.integers(0, len(tau), len(tau))
            times.append(estimator(tau[idx], cens[idx]))
        slopes.append(scaling_fit(etas, times, normalise)["slope"])
    slopes = np.asarray(slopes, float)
    slopes = slopes[np.isfinite(slopes)]
    if slopes.size == 0:
        return math.nan, math.nan
    a = (1 - level) / 2
    return float(np.quantile(slopes, a)), float(np.quantile(slopes, 1 - a))
