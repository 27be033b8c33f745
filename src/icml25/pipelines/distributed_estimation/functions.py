"""True functions, statistical models and their exact reduction to a discrete distribution.

The nonparametric and regression reductions (``docs/papers/distributed_estimation.md``, "The method"
and "Data").
Every function lives on a fine grid of ``G = 2^14`` cells and is piecewise constant there, so its
samples are exact (a categorical cell, then a uniform point inside it) and every integral below is
an exact finite sum. A histogram estimator with ``K = 2^j`` bins (``K`` divides ``G``) then reduces
the problem to estimating a distribution ``p`` on an alphabet of ``A`` symbols:

- density: symbol = bin of X, ``A = K``, ``f̂_j = K·p̂_j``;
- regression (Gaussian, binary, Poisson, heteroskedastic): Y is clipped to ``[lo, hi]``, a rounding
  bit ``Z ~ Bern((clip(Y) - lo)/(hi - lo))`` is drawn by the terminal, the symbol is ``2·bin + Z``
  (``A = 2K``) and ``f̂_j = lo + (hi - lo)·K·p̂(j, 1)``. With a symmetric clip
  ``lo = -B``, ``hi = B`` the variance constant ``4B²`` is ``(hi - lo)²``.

The squared L2 error of a histogram splits exactly into the Haar bias ``||Π_K f - f||²`` and
``(1/K)·Σ_j (f̂_j - f̄_j)²`` with ``f̄_j`` the bin means of f (Pythagoras on the fine grid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from icml25.core.lazy_import import lazy_module

stats = lazy_module("scipy.stats")

FINE_LOG2 = 14
FINE_CELLS = 2**FINE_LOG2
MODELS = ("density", "gaussian", "binary", "poisson", "heteroskedastic")
Model = Literal["density", "gaussian", "binary", "poisson", "heteroskedastic"]

#: Target ranges of the regression functions (binary f in [0.2, 0.8], Poisson [1, 5]).
_RANGES = {"binary": (0.2, 0.8), "poisson": (1.0, 5.0)}
GAUSSIAN_SIGMA = 0.5


def d1_cells(cells: int = FINE_CELLS) -> np.ndarray:
    """D1: ``f = 1 + 0.5·cos(2πx)`` as exact cell averages on ``cells`` equal cells of [0, 1]."""
    edges = np.arange(cells + 1) / cells
    sin = np.sin(2 * np.pi * edges)
    return 1.0 + 0.5 * (sin[1:] - sin[:-1]) * cells / (2 * np.pi)


def d2_cells(s: float, c: float = 0.1, levels: int = 12, seed: int = 7,
             cells: int = FINE_CELLS) -> np.ndarray:
    """D2: the random Haar series at the Sobolev boundary, on ``cells`` cells.

    ``f = 1 + Σ_{j<levels} Σ_k c·2^{-j(s+1/2)}·ε_jk·ψ_jk`` with L2-normalised Haar wavelets
    ``ψ_jk = 2^{j/2}(1 on the left half, -1 on the right half of [k2^-j, (k+1)2^-j))`` and
    Rademacher ``ε_jk`` drawn by ``default_rng(seed).choice([-1, 1])``, level by level, k ascending
    (the default D2 uses ``levels = 12`` and ``seed = 7``; its range is [0.664, 1.336]).
    """
    if cells < 2**levels or cells % 2**levels:
        raise ValueError(f"cells={cells} must be a multiple of 2^levels={2**levels}")
    rng = np.random.default_rng(seed)
    base = 2**levels
    f = np.ones(base)
    x = np.arange(base)
    for j in range(levels):
        eps = rng.choice([-1, 1], size=2**j)
        width = base >> j  # grid cells per support interval of psi_jk
        k = x // width
        sign = np.where((x % width) < width // 2, 1.0, -1.0)
        # c·2^{-j(s+1/2)}·2^{j/2} = c·2^{-js}
        f += c * 2.0 ** (-j * s) * eps[k] * sign
    return np.repeat(f, cells // base)


def bin_means(values: np.ndarray, k: int) -> np.ndarray:
    """Means of a fine-grid array over ``k`` equal bins (``k`` must divide its length)."""
    if values.size % k:
        raise ValueError(f"K={k} must divide the fine grid size {values.size}")
    return values.reshape(k, -1).mean(axis=1)


def haar_bias(f_cells: np.ndarray, k: int) -> float:
    """``||Π_K f - f||²_{L2[0,1]}``: the exact squared error of the K-bin projection."""
    blocks = f_cells.reshape(k, -1)
    return float(np.mean((blocks - blocks.mean(axis=1, keepdims=True)) ** 2))


@dataclass(frozen=True)
class TrueModel:
    """One of the five models with its true function on the fine grid.

    ``f`` is the density (model ``density``) or the regression function; ``sigma`` the noise scale
    per cell (Gaussian, heteroskedastic); ``lo``/``hi`` the clipping interval of the rounding
    reduction (regression only). ``p_bound`` is the known upper bound of a symbol probability
    (class bound ``max f / K`` for densities, ``1/K`` for regression) used by the one-bit
    protocols for their search interval.
    """

    model: str
    f: np.ndarray
    sigma: np.ndarray | None = None
    lo: float = 0.0
    hi: float = 1.0

    @property
    def is_regression(self) -> bool:
        return self.model != "density"

    def alphabet(self, k: int) -> int:
        return 2 * k if self.is_regression else k

    @property
    def scale(self) -> float:
        """Variance constant of the reduction: 1 for densities, ``(hi - lo)²`` for regression."""
        return (self.hi - self.lo) ** 2 if self.is_regression else 1.0

    def rounding_probability(self) -> np.ndarray:
        """Per fine cell, ``h(x) = E[(clip(Y) - lo)/(hi - lo) | X = x]`` (exact)."""
        f, lo, hi = self.f, self.lo, self.hi
        if self.model == "binary":
            return f.copy()  # Z = Y with lo = 0, hi = 1
        if self.model == "poisson":
            top = int(np.ceil(hi))
            y = np.arange(top)
            pmf = stats.poisson.pmf(y[None, :], f[:, None])
            mean_clipped = (pmf * y).sum(axis=1) + top * stats.poisson.sf(top - 1, f)
            return mean_clipped / top  # lo = 0, hi = top
        sigma = self.sigma
        a, b = (lo - f) / sigma, (hi - f) / sigma
        mean_clipped = (lo * stats.norm.cdf(a) + hi * stats.norm.sf(b)
                        + f * (stats.norm.cdf(b) - stats.norm.cdf(a))
                        + sigma * (stats.norm.pdf(a) - stats.norm.pdf(b)))
        return (mean_clipped - lo) / (hi - lo)

    def symbol_distribution(self, k: int) -> np.ndarray:
        """The exact distribution ``p`` of one sample's symbol for the K-bin histogram."""
        if self.model == "density":
            p = bin_means(self.f, k) / k
            return p / p.sum()
        h = bin_means(self.rounding_probability(), k)
        p = np.empty(2 * k)
        p[1::2] = h / k
        p[0::2] = (1.0 - h) / k
        return p

    def decode(self, p_hat: np.ndarray, k: int) -> np.ndarray:
        """Histogram values ``f̂_j`` from an estimate of the symbol distribution."""
        p_hat = np.asarray(p_hat, dtype=float)
        if self.model == "density":
            return k * p_hat
        return np.clip(self.lo + (self.hi - self.lo) * k * p_hat[1::2], self.lo, self.hi)

    def ise(self, p_hat: np.ndarray, k: int) -> float:
        """``∫(f̂ - f)²`` exactly: Haar bias plus the bin-level error (module docstring)."""
        err = self.decode(p_hat, k) - bin_means(self.f, k)
        if not np.all(np.isfinite(err)):
            raise ValueError("estimate contains NaN or inf")
        return haar_bias(self.f, k) + float(np.sum(err**2)) / k

    def bias(self, k: int) -> float:
        return haar_bias(self.f, k)

    def p_bound(self, k: int) -> float:
        return 1.0 / k if self.is_regression else float(self.f.max()) / k

    # ------------------------------------------------------------------ sample-level simulator
    def sample_symbols(self, k: int, size: tuple[int, ...], rng: np.random.Generator,
                       ) -> np.ndarray:
        """Literal samples: X from the model, binned, and (regression) Y and its rounding bit Z."""
        cells = self.f.size
        if self.model == "density":
            prob = self.f / self.f.sum()
            cell = rng.choice(cells, size=size, p=prob)
        else:
            cell = rng.integers(0, cells, size=size)  # X ~ U[0, 1]
        x = (cell + rng.random(size)) / cells
        bins = np.minimum((x * k).astype(np.int64), k - 1)
        if self.model == "density":
            return bins
        f = self.f[cell]
        if self.model == "binary":
            z = (rng.random(size) < f).astype(np.int64)
        else:
            if self.model == "poisson":
                y = rng.poisson(f).astype(float)
            else:
                y = f + self.sigma[cell] * rng.standard_normal(size)
            u = (np.clip(y, self.lo, self.hi) - self.lo) / (self.hi - self.lo)
            z = (rng.random(size) < u).astype(np.int64)
        return 2 * bins + z


def base_function(name: str, s: float, c: float = 0.1, levels: int = 12, seed: int = 7,
                  ) -> np.ndarray:
    """The fine-grid base function D1 or D2."""
    if name == "d1":
        return d1_cells()
    if name == "d2":
        return d2_cells(s, c=c, levels=levels, seed=seed)
    raise ValueError(f"unknown function {name!r}; expected d1 or d2")


def make_model(model: str, g: np.ndarray, clip_z: float = 3.0) -> TrueModel:
    """The model ``model`` built on base function ``g`` (shifted/scaled to its range).

    Gaussian (σ = 0.5) and heteroskedastic (σ(x) = 0.3 + 0.4x) regression use ``f = g``; binary
    and Poisson map g linearly onto [0.2, 0.8] and [1, 5]. The clipping interval is
    ``[min f - z·σ_max, max f + z·σ_max]`` (Gaussian noise), ``[0, 1]`` (binary) and
    ``[0, ⌈max f + z·sqrt(max f)⌉]`` (Poisson), with ``z = clip_z``.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {MODELS}")
    if model == "density":
        return TrueModel("density", g / g.mean())
    if model in _RANGES:
        a, b = _RANGES[model]
        f = a + (g - g.min()) / (g.max() - g.min()) * (b - a)
    else:
        f = g.copy()
    if model == "binary":
        return TrueModel(model, f, lo=0.0, hi=1.0)
    if model == "poisson":
        return TrueModel(model, f, lo=0.0, hi=float(np.ceil(f.max() + clip_z * np.sqrt(f.max()))))
    x = (np.arange(f.size) + 0.5) / f.size
    sigma = (np.full(f.size, GAUSSIAN_SIGMA) if model == "gaussian" else 0.3 + 0.4 * x)
    smax = float(sigma.max())
    return TrueModel(model, f, sigma=sigma, lo=float(f.min() - clip_z * smax),
                     hi=float(f.max() + clip_z * smax))
