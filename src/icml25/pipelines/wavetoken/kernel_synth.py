"""KernelSynth: synthetic series drawn from Gaussian-process priors with random composite kernels.

A port of Chronos' ``scripts/kernel-synth.py`` (github.com/amazon-science/chronos-forecasting,
``main`` branch; Ansari et al., "Chronos", TMLR 2024, Section 4.2 / Algorithm 2), exact up to
the two differences below:

1. ``X = linspace(0, 1, length)`` (Chronos: ``LENGTH = 1024``);
2. draw ``j ~ U{1..5}`` kernels *with replacement* from a bank of 33 (:func:`kernel_bank`);
3. fold them left to right with ``+`` or ``*``, each operator chosen with probability 1/2
   (Chronos' ``functools.reduce(random_binary_map, ...)``);
4. draw one sample from the zero-mean GP prior with that covariance; on ``LinAlgError`` start over
   with new kernels (Chronos retries the whole draw in a ``while True`` loop).

Differences from the Chronos script, both for speed and reproducibility: the GP sample is drawn with a
Cholesky factor of ``K + 1e-6 I`` (falling back to an eigendecomposition with negative eigenvalues
clipped to 0) instead of sklearn's SVD-based ``GaussianProcessRegressor.sample_y``, which is much
slower; and every random choice comes from one ``numpy.random.Generator`` per series, seeded from
the caller's generator, instead of the global ``np.random`` state, so a run is reproducible.
"""

from __future__ import annotations

import functools

import numpy as np
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    ExpSineSquared,
    Kernel,
    RationalQuadratic,
    WhiteKernel,
)
from tqdm.auto import tqdm

#: Periods (in time steps) of the 21 ExpSineSquared kernels, in the order of Chronos' bank
#: (hourly 24/48/96, 24*7 .. ; daily 7/14/30/60/365/730; weekly 4/26/52; monthly 4/6/12;
#: quarterly 4/40; yearly 10). Duplicates (4 appears three times) are kept: they weight the draw.
PERIODS: tuple[int, ...] = (24, 48, 96, 168, 336, 672, 7, 14, 30, 60, 365, 730, 4, 26, 52, 4, 6,
                            12, 4, 40, 10)

#: Chronos' ``max_kernels``: j ~ U{1..MAX_KERNELS}.
MAX_KERNELS = 5

#: Diagonal jitter added to the covariance before the Cholesky factorisation.
JITTER = 1e-6

#: Chronos' series length; its periodicities are ``p / LENGTH``.
CHRONOS_LENGTH = 1024


def kernel_bank(length: int = CHRONOS_LENGTH) -> list[Kernel]:
    """The 33 base kernels of Chronos' ``KERNEL_BANK`` for series of ``length`` points.

    ExpSineSquared periodicities are ``p / length`` on ``X = linspace(0, 1, length)``, i.e. a period
    of ``p`` time steps, which equals Chronos' bank exactly at ``length = 1024``. The other 12:
    DotProduct(sigma_0 in {0, 1, 10}), RBF(length_scale in {0.1, 1, 10}),
    RationalQuadratic(alpha in {0.1, 1, 10}), WhiteKernel(0.1), WhiteKernel(1), ConstantKernel().
    """
    if length < 2:
        raise ValueError(f"length must be >= 2, got {length}")
    return [
        *(ExpSineSquared(periodicity=p / length) for p in PERIODS),
        DotProduct(sigma_0=0.0),
        DotProduct(sigma_0=1.0),
        DotProduct(sigma_0=10.0),
        RBF(length_scale=0.1),
        RBF(length_scale=1.0),
        RBF(length_scale=10.0),
        RationalQuadratic(alpha=0.1),
        RationalQuadratic(alpha=1.0),
        RationalQuadratic(alpha=10.0),
        WhiteKernel(noise_level=0.1),
        WhiteKernel(noise_level=1.0),
        ConstantKernel(),
    ]


def random_kernel(
    bank: list[Kernel], rng: np.random.Generator, max_kernels: int = MAX_KERNELS
) -> Kernel:
    """Draw ``j ~ U{1..max_kernels}`` bank kernels with replacement and fold them with random +/×.

    Mirrors Chronos' ``np.random.choice(KERNEL_BANK, randint(1, max_kernels + 1), replace=True)``
    followed by ``functools.reduce(random_binary_map, ...)``.
    """
    n_kernels = int(rng.integers(1, max_kernels + 1))
    chosen = [bank[int(i)] for i in rng.integers(0, len(bank), size=n_kernels)]

    def combine(a: Kernel, b: Kernel) -> Kernel:
        return a + b if rng.random() < 0.5 else a * b

    return functools.reduce(combine, chosen)


def sample_gp_prior(kernel: Kernel, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw from the zero-mean GP prior with covariance ``kernel(x)``.

    ``L L^T = K + 1e-6 I`` (Cholesky) and ``f = L z``, ``z ~ N(0, I)``; if the Cholesky fails the
    covariance is eigendecomposed (negative eigenvalues clipped to 0) and ``f = V sqrt(w) z``.
    Raises ``numpy.linalg.LinAlgError`` if both fail or the covariance is not finite.
    """
    if x.ndim == 1:
        x = x[:, None]
    cov = np.asarray(kernel(x), dtype=np.float64)
    if not np.all(np.isfinite(cov)):
        raise np.linalg.LinAlgError("covariance has non-finite entries")
    z = rng.standard_normal(cov.shape[0])
    try:
        chol = np.linalg.cholesky(cov + JITTER * np.eye(cov.shape[0]))
        return chol @ z
    except np.linalg.LinAlgError:
        eigenvalues, eigenvectors = np.linalg.eigh(cov)
        return eigenvectors @ (np.sqrt(np.clip(eigenvalues, 0.0, None)) * z)


def generate_series(
    length: int,
    rng: np.random.Generator,
    bank: list[Kernel] | None = None,
    max_kernels: int = MAX_KERNELS,
    max_tries: int = 100,
) -> np.ndarray:
    """One KernelSynth series of ``length`` points (Chronos' ``generate_time_series``).

    A draw that raises ``LinAlgError`` or yields a non-finite value is discarded and a new kernel
    is drawn (Chronos retries forever; we stop after ``max_tries`` and raise).
    """
    bank = kernel_bank(length) if bank is None else bank
    x = np.linspace(0.0, 1.0, length)
    for _ in range(max_tries):
        kernel = random_kernel(bank, rng, max_kernels)
        try:
            series = sample_gp_prior(kernel, x, rng)
        except np.linalg.LinAlgError:
            continue
        if np.all(np.isfinite(series)):
            return series
    raise RuntimeError(f"KernelSynth: no valid GP sample after {max_tries} kernel draws")


def sample_kernelsynth(
    n_series: int,
    length: int,
    rng: np.random.Generator,
    max_kernels: int = MAX_KERNELS,
) -> np.ndarray:
    """``n_series`` KernelSynth series, shape ``[n_series, length]``, float64.

    One child seed per series is drawn from ``rng`` up front, so series ``i`` depends only on its
    seed: the same ``rng`` state gives the same array, and the first ``k`` series of a run with
    ``n_series >= k`` equal those of a run with ``n_series = k``. Shows a progress bar when
    ``n_series >= 50``.
    """
    if n_series < 0:
        raise ValueError(f"n_series must be >= 0, got {n_series}")
    bank = kernel_bank(length)
    seeds = rng.integers(0, np.iinfo(np.int64).max, size=n_series)
    out = np.empty((n_series, length), dtype=np.float64)
    for i in tqdm(range(n_series), desc="KernelSynth", disable=n_series < 50):
        out[i] = generate_series(length, np.random.default_rng(int(seeds[i])), bank, max_kernels)
    return out
