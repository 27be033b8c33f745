"""TSMixup: convex combinations of mean-scaled windows of real series.

Chronos paper (Ansari et al., TMLR 2024), Section 4.1, Algorithm 1, as this project
reads it (the details below are not confirmed against Chronos' code):

1. ``k ~ U{1..k_max}`` series are drawn (independently, with replacement);
2. a window length ``ℓ ~ U{min_length..max_length}`` is drawn;
3. from each chosen series a window of length ``ℓ`` at an independent random offset is taken
   ("aligned": every window has the same length, so they are summed position by position);
4. each window is divided by its mean absolute value (Chronos' mean scaling; 0 -> 1);
5. the windows are mixed with weights ``λ ~ Dirichlet(alpha, …, alpha)``.

Open points decided here (documented, not from the paper):

- Short series: ``ℓ`` is clipped to the shortest chosen series, so a mix is never padded. Series
  shorter than ``min_series_length`` (default 16) are removed from the pool before sampling, so a
  mix is never shorter than that floor; if no series is long enough, ``ValueError``.
- The paper draws a dataset first, then a series in it; with a flat list of series the draw is
  uniform over series unless ``weights`` (one non-negative weight per series) is given, which lets
  the caller weight datasets (e.g. ``1 / n_series_in_dataset``).
- NaNs inside a window are ignored by the scale (``nanmean``) and stay NaN in the mix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def mean_abs_scale(window: np.ndarray) -> np.ndarray:
    """Divide by the mean absolute value (ignoring NaN); a zero or undefined scale becomes 1."""
    finite = np.isfinite(window)
    scale = float(np.mean(np.abs(window[finite]))) if finite.any() else 0.0
    if not np.isfinite(scale) or scale == 0.0:
        scale = 1.0
    return window / scale


def tsmixup(
    series: Sequence[np.ndarray],
    n_mixes: int,
    rng: np.random.Generator,
    k_max: int = 3,
    min_length: int = 128,
    max_length: int = 2048,
    alpha: float = 1.5,
    *,
    min_series_length: int = 16,
    weights: Sequence[float] | None = None,
) -> list[np.ndarray]:
    """``n_mixes`` TSMixup series (Chronos Algorithm 1); lengths vary, so a list is returned.

    Parameters
    ----------
    series:
        Pool of 1-D real series (the in-domain training parts only — never zero-shot data).
    n_mixes:
        Number of augmented series to generate.
    rng:
        Source of all randomness (reproducible for a fixed generator state).
    k_max:
        Maximum number of series mixed together (``k ~ U{1..k_max}``).
    min_length, max_length:
        Range of the window length ``ℓ ~ U{min_length..max_length}`` (inclusive), clipped to the
        shortest chosen series.
    alpha:
        Concentration of the symmetric Dirichlet that draws the mixing weights.
    min_series_length:
        Series shorter than this are dropped from the pool (floor on the length of a mix).
    weights:
        Optional sampling weight per series (normalised internally); default uniform.
    """
    if n_mixes < 0:
        raise ValueError(f"n_mixes must be >= 0, got {n_mixes}")
    if k_max < 1:
        raise ValueError(f"k_max must be >= 1, got {k_max}")
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got {min_length}, {max_length}")
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if min_series_length < 1:
        raise ValueError(f"min_series_length must be >= 1, got {min_series_length}")
    if len(series) == 0:
        raise ValueError("tsmixup needs at least one series")
    arrays = [np.asarray(s, dtype=np.float64).ravel() for s in series]
    if weights is not None:
        if len(weights) != len(arrays):
            raise ValueError(f"got {len(weights)} weights for {len(arrays)} series")
        w = np.asarray(weights, dtype=np.float64)
        if np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError("weights must be finite and non-negative")
    else:
        w = np.ones(len(arrays))
    keep = [i for i, a in enumerate(arrays) if a.size >= min_series_length and w[i] > 0]
    if not keep:
        raise ValueError(
            f"no series of length >= min_series_length={min_series_length} with positive weight"
        )
    pool = [arrays[i] for i in keep]
    p = w[keep] / w[keep].sum()

    mixes: list[np.ndarray] = []
    for _ in range(n_mixes):
        k = int(rng.integers(1, k_max + 1))
        length = int(rng.integers(min_length, max_length + 1))
        chosen = [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=True, p=p)]
        length = min(length, *(a.size for a in chosen))
        windows = []
        for a in chosen:
            start = int(rng.integers(0, a.size - length + 1))
            windows.append(mean_abs_scale(a[start : start + length]))
        lam = rng.dirichlet(np.full(k, alpha))
        mixes.append(np.einsum("k,kt->t", lam, np.stack(windows)))
    return mixes
