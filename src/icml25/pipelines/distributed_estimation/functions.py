"""True functions, statistical models and their exact reduction to a discrete distribution.

The nonparametric and regression reductions (``docs/papers/distributed_estimation.md``, "The method"
and "Data").
Every function lives on a fine grid of ``G = 2^14`` cells and is piecewise constant there, so its
samples are exact (a categorical cell, then a uniform point inside it) and every integral below is
an exact finite sum. A histogram estimator with ``K = 2^j`` bins (``K`` divides ``G``) then reduces
the problem to estimating a distribution ``p`` on an alphabet of ``A`` symbols:

- density: symbol = bin of X, ``A = K``, ``f̂_j = K·p̂_j``;
- regression (Gaussian noise with a constant or state-dependent σ(x), binary, Poisson counts, or
  any noise law a user names in conf): Y is clipped to ``[lo, hi]``, a rounding
  bit ``Z ~ Bern((clip(Y) - lo)/(hi - lo))`` is drawn by the terminal, the symbol is ``2·bin + Z``
  (``A = 2K``) and ``f̂_j = lo + (hi - lo)·K·p̂(j, 1)``. With a symmetric clip
  ``lo = -B``, ``hi = B`` the variance constant ``4B²`` is ``(hi - lo)²``.

The squared L2 error of a histogram splits exactly into the Haar bias ``||Π_K f - f||²`` and
``(1/K)·Σ_j (f̂_j - f̄_j)²`` with ``f̄_j`` the bin means of f (Pythagoras on the fine grid).

The target function, σ(x) and the noise law come from conf (``functions`` and ``models`` of
``params:distributed_estimation``), built-in or a Python callable named ``"module:attr"``; the law
(noise model) is piecewise constant on the fine cells like f, evaluated at each cell's midpoint.
With no bits at all (``l = 0``) the decoder knows only the model class: its estimate is the
uniform symbol distribution, ``f̂ ≡ 1`` for a density and ``f̂ ≡ (lo + hi)/2`` for regression
(:meth:`TrueModel.uninformed_ise`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from icml25.core.lazy_import import lazy_module
from icml25.core.named_callable import load_callable as resolve_callable

stats = lazy_module("scipy.stats")

FINE_LOG2 = 14
FINE_CELLS = 2**FINE_LOG2
#: Noise models: no noise (density estimation, W = X), Y = f(X) + σ(X)·ε with Gaussian ε,
#: Y ~ Bern(f(X)), Y ~ Poisson(f(X)), or ``law``: Y ~ law(f(X), X), a user callable returning a
#: frozen scipy.stats distribution.
NOISES = ("density", "gaussian", "bernoulli", "poisson", "law")
_GL_X, _GL_W = np.polynomial.legendre.leggauss(4)
_LAW_PANELS, _LAW_NODES = 32, 8  # composite Gauss-Legendre for ∫ sf(y) dy of a continuous law


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


def cell_midpoints(cells: int = FINE_CELLS) -> np.ndarray:
    return (np.arange(cells) + 0.5) / cells


def callable_cells(func: Callable, cells: int = FINE_CELLS, key: str = "function",
                   ) -> np.ndarray:
    """Cell averages of a user function ``f(x)`` on ``cells`` equal cells of [0, 1].

    ``func`` maps a 1-D array of points in [0, 1] to an array of the same shape. Each average is
    a 4-point Gauss–Legendre rule on its cell (exact for polynomials of degree 7 per cell).
    """
    x = (np.arange(cells)[:, None] + (_GL_X[None, :] + 1) / 2) / cells
    try:
        values = np.asarray(func(x.ravel()), dtype=float)
    except Exception as err:  # a user function: report which one failed and how
        raise ValueError(f"{key}: calling it on an array of x in [0, 1] failed ({err!r})") from None
    if values.shape != (x.size,):
        raise ValueError(f"{key}: must map an array of x in [0, 1] to an array of the same shape "
                         f"{(x.size,)}, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{key}: returned NaN or inf on [0, 1]")
    return values.reshape(cells, -1) @ (_GL_W / 2)


def sigma_cells(sigma: float | tuple[float, ...] | list[float] | str, cells: int = FINE_CELLS,
                key: str = "sigma") -> np.ndarray:
    """σ(x) per fine cell (at its midpoint) from conf: a constant, polynomial coefficients
    ``[a0, a1, ...]`` for ``a0 + a1·x + ...``, or a callable ``"module:attr"`` of x."""
    x = cell_midpoints(cells)
    if isinstance(sigma, str):
        out = np.asarray(resolve_callable(sigma, key)(x), dtype=float)
        if out.shape != x.shape:
            raise ValueError(f"{key}: must map an array of x to an array of the same shape")
    elif isinstance(sigma, list | tuple):
        out = np.polynomial.polynomial.polyval(x, np.asarray(sigma, dtype=float))
    else:
        out = np.full(cells, float(sigma))
    if not np.all(np.isfinite(out)) or out.min() <= 0:
        raise ValueError(f"{key}: σ(x) must be finite and > 0 on [0, 1], got range "
                         f"[{np.nanmin(out):.3g}, {np.nanmax(out):.3g}]")
    return out


def bin_means(values: np.ndarray, k: int) -> np.ndarray:
    """Means of a fine-grid array over ``k`` equal bins (``k`` must divide its length)."""
    if values.size % k:
        raise ValueError(f"K={k} must divide the fine grid size {values.size}")
    return values.reshape(k, -1).mean(axis=1)


def haar_bias(f_cells: np.ndarray, k: int) -> float:
    """``||Π_K f - f||²_{L2[0,1]}``: the exact squared error of the K-bin projection."""
    blocks = f_cells.reshape(k, -1)
    return float(np.mean((blocks - blocks.mean(axis=1, keepdims=True)) ** 2))


def clipped_mean_discrete(sf: Callable[[np.ndarray], np.ndarray], lo: float, hi: float,
                          ) -> np.ndarray:
    """``E[clip(Y, lo, hi)] = lo + ∫_lo^hi P(Y > y) dy`` for integer-valued Y, exactly.

    ``P(Y > y)`` is constant on each ``[k, k + 1)``, so the integral is a finite sum;
    ``sf(k)`` takes a row of integers and returns ``P(Y > k)`` per cell and integer.
    """
    ks = np.arange(np.floor(lo), np.ceil(hi))
    length = np.minimum(hi, ks + 1) - np.maximum(lo, ks)
    return lo + np.asarray(sf(ks[None, :])) @ length


def clipped_mean_continuous(sf: Callable[[np.ndarray], np.ndarray], lo: float, hi: float,
                            ) -> np.ndarray:
    """The same for a continuous law, by composite Gauss–Legendre quadrature of ``sf``."""
    x, w = np.polynomial.legendre.leggauss(_LAW_NODES)
    edges = np.linspace(lo, hi, _LAW_PANELS + 1)
    half = np.diff(edges)[:, None] / 2
    y = ((edges[:-1, None] + edges[1:, None]) / 2 + half * x[None, :]).ravel()
    weights = (half * w[None, :]).ravel()
    return lo + np.asarray(sf(y[None, :])) @ weights


@dataclass(frozen=True)
class ModelSpec:
    """How a statistical model is built from a base function g (conf ``models.<name>``).

    ``noise`` is one of :data:`NOISES`. ``sigma`` (Gaussian noise): a constant, polynomial
    coefficients in x, or ``"module:attr"`` of x. ``target_range``: ``(a, b)`` maps g affinely
    onto [a, b]; ``None`` uses g as given (e.g. Poisson counts with mean g). ``clip``: the
    clipping interval of the rounding reduction, ``None`` for the rule of :func:`make_model`.
    ``law`` (noise ``law``): ``"module:attr"`` of ``law(f, x)`` returning a frozen scipy.stats
    distribution of Y given f(x) and x (vectorised over arrays of f and x).
    """

    noise: str
    sigma: float | tuple[float, ...] | str | None = None
    target_range: tuple[float, float] | None = None
    clip: tuple[float, float] | None = None
    law: str | None = None


#: The entry's five models (conf/base lists the same ones explicitly).
ENTRY_MODELS = {
    "density": ModelSpec("density"),
    "gaussian": ModelSpec("gaussian", sigma=0.5),
    "binary": ModelSpec("bernoulli", target_range=(0.2, 0.8)),
    "poisson": ModelSpec("poisson", target_range=(1.0, 5.0)),
    "heteroskedastic": ModelSpec("gaussian", sigma=(0.3, 0.4)),
}
MODELS = tuple(ENTRY_MODELS)
_NOISE_OF = {name: spec.noise for name, spec in ENTRY_MODELS.items()}


@dataclass(frozen=True)
class TrueModel:
    """A statistical model with its true function on the fine grid.

    ``model`` is the model's name, ``noise`` its noise model (:data:`NOISES`; inferred from the
    name for the entry's five models). ``f`` is the density (noise ``density``) or the regression
    function; ``sigma`` the noise scale per cell (Gaussian); ``law`` the ``"module:attr"`` of a
    user noise law; ``lo``/``hi`` the clipping interval of the rounding reduction (regression).
    ``p_bound`` is the known upper bound of a symbol probability (class bound ``max f / K`` for
    densities, ``1/K`` for regression) used by the one-bit protocols for their search interval.
    """

    model: str
    f: np.ndarray
    sigma: np.ndarray | None = None
    lo: float = 0.0
    hi: float = 1.0
    noise: str = ""
    law: str | None = None

    def __post_init__(self) -> None:
        noise = self.noise or _NOISE_OF.get(self.model, "")
        if noise not in NOISES:
            raise ValueError(f"model {self.model!r}: unknown noise {self.noise!r}; expected one "
                             f"of {NOISES} (or one of the names {MODELS})")
        object.__setattr__(self, "noise", noise)
        if noise == "gaussian" and self.sigma is None:
            raise ValueError(f"model {self.model!r}: Gaussian noise needs sigma")
        if noise == "law" and not self.law:
            raise ValueError(f"model {self.model!r}: noise 'law' needs law: 'module:attr'")
        if noise != "density" and not self.lo < self.hi:
            raise ValueError(f"model {self.model!r}: clip interval [{self.lo}, {self.hi}] is empty")
        if noise == "bernoulli" and (self.lo, self.hi) != (0.0, 1.0):
            raise ValueError(f"model {self.model!r}: binary Y uses Z = Y, so clip must be [0, 1]")

    @property
    def is_regression(self) -> bool:
        return self.noise != "density"

    def alphabet(self, k: int) -> int:
        return 2 * k if self.is_regression else k

    @property
    def scale(self) -> float:
        """Variance constant of the reduction: 1 for densities, ``(hi - lo)²`` for regression."""
        return (self.hi - self.lo) ** 2 if self.is_regression else 1.0

    def law_of(self, cells: np.ndarray | slice = slice(None), column: bool = False):
        """The frozen scipy.stats law of Y in the given fine cells (noise ``law``)."""
        fn = resolve_callable(self.law, f"models.{self.model}.law")
        f, x = self.f[cells], cell_midpoints(self.f.size)[cells]
        return fn(f[:, None], x[:, None]) if column else fn(f, x)

    def clipped_mean(self) -> np.ndarray:
        """Per fine cell, ``E[clip(Y, lo, hi) | X = x]`` (exact; quadrature for a continuous
        user law)."""
        f, lo, hi = self.f, self.lo, self.hi
        if self.noise == "bernoulli":
            return f.copy()
        if self.noise == "poisson":
            return clipped_mean_discrete(lambda k: stats.poisson.sf(k, f[:, None]), lo, hi)
        if self.noise == "law":
            law = self.law_of(column=True)
            if isinstance(getattr(law, "dist", None), stats.rv_discrete):
                return clipped_mean_discrete(law.sf, lo, hi)
            return clipped_mean_continuous(law.sf, lo, hi)
        sigma = self.sigma
        a, b = (lo - f) / sigma, (hi - f) / sigma
        return (lo * stats.norm.cdf(a) + hi * stats.norm.sf(b)
                + f * (stats.norm.cdf(b) - stats.norm.cdf(a))
                + sigma * (stats.norm.pdf(a) - stats.norm.pdf(b)))

    @functools.cached_property
    def _rounding(self) -> np.ndarray:
        # computed once per model: a user law's quadrature is the costly part of a run
        h = (self.clipped_mean() - self.lo) / (self.hi - self.lo)
        if not np.all(np.isfinite(h)):
            raise ValueError(f"model {self.model!r}: E[clip(Y) | x] is NaN or inf")
        h = np.clip(h, 0.0, 1.0)
        h.setflags(write=False)
        return h

    def rounding_probability(self) -> np.ndarray:
        """Per fine cell, ``h(x) = E[(clip(Y) - lo)/(hi - lo) | X = x]`` (exact)."""
        return self._rounding

    def symbol_distribution(self, k: int) -> np.ndarray:
        """The exact distribution ``p`` of one sample's symbol for the K-bin histogram."""
        if not self.is_regression:
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
        if not self.is_regression:
            return k * p_hat
        return np.clip(self.lo + (self.hi - self.lo) * k * p_hat[1::2], self.lo, self.hi)

    def ise(self, p_hat: np.ndarray, k: int) -> float:
        """``∫(f̂ - f)²`` exactly: Haar bias plus the bin-level error (module docstring)."""
        err = self.decode(p_hat, k) - bin_means(self.f, k)
        if not np.all(np.isfinite(err)):
            raise ValueError("estimate contains NaN or inf")
        return haar_bias(self.f, k) + float(np.sum(err**2)) / k

    def uninformed_ise(self) -> float:
        """The error of the decoder that has no data (``l = 0``): the uniform symbol
        distribution, i.e. ``f̂ ≡ 1`` (density) or ``f̂ ≡ (lo + hi)/2`` (regression), for any K."""
        a = self.alphabet(1)
        return self.ise(np.full(a, 1.0 / a), 1)

    def bias(self, k: int) -> float:
        return haar_bias(self.f, k)

    def p_bound(self, k: int) -> float:
        return 1.0 / k if self.is_regression else float(self.f.max()) / k

    # ------------------------------------------------------------------ sample-level simulator
    def sample_symbols(self, k: int, size: tuple[int, ...], rng: np.random.Generator,
                       ) -> np.ndarray:
        """Literal samples: X from the model, binned, and (regression) Y and its rounding bit Z."""
        cells = self.f.size
        if not self.is_regression:
            prob = self.f / self.f.sum()
            cell = rng.choice(cells, size=size, p=prob)
        else:
            cell = rng.integers(0, cells, size=size)  # X ~ U[0, 1]
        x = (cell + rng.random(size)) / cells
        bins = np.minimum((x * k).astype(np.int64), k - 1)
        if not self.is_regression:
            return bins
        f = self.f[cell]
        if self.noise == "bernoulli":
            z = (rng.random(size) < f).astype(np.int64)
        else:
            if self.noise == "poisson":
                y = rng.poisson(f).astype(float)
            elif self.noise == "law":
                flat = cell.ravel()
                y = np.asarray(self.law_of(flat).rvs(random_state=rng), float).reshape(size)
            else:
                y = f + self.sigma[cell] * rng.standard_normal(size)
            u = (np.clip(y, self.lo, self.hi) - self.lo) / (self.hi - self.lo)
            z = (rng.random(size) < u).astype(np.int64)
        return 2 * bins + z


def base_function(name: str, s: float, c: float = 0.1, levels: int = 12, seed: int = 7,
                  ref: str | None = None, key: str = "function") -> np.ndarray:
    """The fine-grid base function: D1, D2, or a user callable ``ref = "module:attr"``."""
    if name == "d1":
        return d1_cells()
    if name == "d2":
        return d2_cells(s, c=c, levels=levels, seed=seed)
    if name == "callable":
        if not ref:
            raise ValueError(f"{key}: kind 'callable' needs callable: 'module:attr'")
        return callable_cells(resolve_callable(ref, f"{key}.callable"), key=f"{key}.callable")
    raise ValueError(f"{key}: unknown function kind {name!r}; expected d1, d2 or callable")


def make_model(model: str, g: np.ndarray, clip_z: float = 3.0, spec: ModelSpec | None = None,
               ) -> TrueModel:
    """The model named ``model`` built on base function ``g`` (``spec``: from conf; ``None``:
    the entry's model of that name, :data:`ENTRY_MODELS`).

    ``f = g`` unless ``spec.target_range = (a, b)`` maps g affinely onto [a, b] (a density is
    always normalised to integrate to 1). The clipping interval, unless ``spec.clip`` sets it, is
    ``[min f - z·σ_max, max f + z·σ_max]`` (Gaussian noise), ``[0, 1]`` (binary),
    ``[0, ⌈max f + z·sqrt(max f)⌉]`` (Poisson) and, for a user law, from its quantiles at
    ``Φ(∓z)`` over the cells (``z = clip_z``).
    """
    if spec is None:
        if model not in ENTRY_MODELS:
            raise ValueError(f"unknown model {model!r}; expected one of {MODELS} or a ModelSpec")
        spec = ENTRY_MODELS[model]
    key = f"models.{model}"
    if spec.noise not in NOISES:
        raise ValueError(f"{key}.noise: unknown noise {spec.noise!r}; expected one of {NOISES}")
    f = np.asarray(g, dtype=float).copy()
    if spec.target_range is not None:
        a, b = spec.target_range
        if f.max() == f.min():
            raise ValueError(f"{key}.range: a constant function cannot be mapped onto [{a}, {b}]")
        f = a + (f - f.min()) / (f.max() - f.min()) * (b - a)
    if spec.noise == "density":
        if f.min() <= 0:
            raise ValueError(f"{key}: a density must stay above 0, got min {f.min():.3g}")
        return TrueModel(model, f / f.mean(), noise="density")
    if spec.noise == "bernoulli" and (f.min() < 0 or f.max() > 1):
        raise ValueError(f"{key}: binary Y needs f in [0, 1], got [{f.min():.3g}, {f.max():.3g}]"
                         "; set range")
    if spec.noise == "poisson" and f.min() < 0:
        raise ValueError(f"{key}: a Poisson mean must be >= 0, got min {f.min():.3g}")
    sigma = (sigma_cells(spec.sigma, f.size, key=f"{key}.sigma")
             if spec.noise == "gaussian" else None)
    if spec.clip is not None:
        lo, hi = map(float, spec.clip)
    elif spec.noise == "bernoulli":
        lo, hi = 0.0, 1.0
    elif spec.noise == "poisson":
        lo, hi = 0.0, float(np.ceil(f.max() + clip_z * np.sqrt(f.max())))
    elif spec.noise == "gaussian":
        lo, hi = float(f.min() - clip_z * sigma.max()), float(f.max() + clip_z * sigma.max())
    else:
        tail = float(stats.norm.sf(clip_z))
        law = TrueModel(model, f, lo=0.0, hi=1.0, noise="law", law=spec.law).law_of()
        lo, hi = float(np.min(law.ppf(tail))), float(np.max(law.isf(tail)))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"{key}: the law's quantiles are not finite; set clip")
        if lo == hi:
            hi = lo + 1.0
    return TrueModel(model, f, sigma=sigma, lo=lo, hi=hi, noise=spec.noise, law=spec.law)
