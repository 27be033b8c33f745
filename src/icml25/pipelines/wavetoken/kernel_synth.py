"""KernelSynth: synthetic series drawn from Gaussian-process priors with random composite kernels.

A port of Chronos' ``scripts/kernel-synth.py`` (github.com/amazon-science/chronos-forecasting;
Ansari et al., "Chronos", TMLR 2024, Section 4.2 / Algorithm 2). Chronos draws series of
``LENGTH = 1024`` points on ``X = linspace(0, 1, 1024)`` as follows, and so do we:

1. draw ``j ~ U{1..5}`` kernels *with replacement* from a fixed bank of 33 (:func:`kernel_bank`:
   21 ExpSineSquared with periodicity ``p / 1024`` for periods ``p`` in time steps, three each of
   DotProduct, RBF and RationalQuadratic, two WhiteKernel, one ConstantKernel, all with fixed
   hyperparameters in ``X`` units);
2. fold them left to right with ``+`` or ``*``, each operator chosen with probability 1/2
   (Chronos' ``functools.reduce(random_binary_map, ...)``);
3. draw one sample from the zero-mean GP prior with that covariance; on ``LinAlgError`` start over
   with new kernels (Chronos retries the whole draw in a ``while True`` loop).

**Other lengths.** The project trains on shorter series (``length`` 256 or 96). A series of
``length = L`` is a length-``L`` window of Chronos' length-1024 process: it lives on
``x = arange(L) / 1023`` (:func:`time_grid`), the first ``L`` points of Chronos' grid, and uses
Chronos' bank unchanged. Its covariance is therefore exactly the top-left ``L x L`` block of
Chronos' 1024-point covariance, for every composite kernel: periods, RBF/RationalQuadratic length
scales and the DotProduct trend all keep their size *in time steps*. (Placing the ``L`` points on
``linspace(0, 1, L)`` with periodicities ``p / L`` keeps the periods in steps but shrinks every
non-periodic length scale, measured in steps, by ``(L - 1) / 1023`` -- 4x at ``L = 256``; that is
not Chronos' distribution.) For ``L > 1024`` the grid continues with the same step ``1/1023``
past ``x = 1``: the same process observed for longer (stationary kernels are unchanged in
distribution; DotProduct draws, straight lines ``a + b x``, keep growing, as they would in
Chronos' process were it longer).

Differences from the Chronos script, for speed and reproducibility only: the GP sample is drawn
with a Cholesky factor of ``K + eps * mean(diag K) * I``, with the smallest ``eps`` in
:data:`JITTERS` (1e-12 .. 1e-6) that factorises (almost all bank composites need 1e-12 or less),
falling back to an eigendecomposition with negative eigenvalues clipped to 0, instead of sklearn's
SVD-based ``GaussianProcessRegressor.sample_y`` (no jitter, much slower). The jitter adds white
noise of standard deviation ``sqrt(eps)`` relative to the series' scale (``1e-6`` at the usual
``eps = 1e-12``), far below the lag-1 increments of the smoothest bank kernels on the ``1/1023``
grid (about ``1e-4`` for RBF(10.0)); a fixed absolute jitter of ``1e-6`` would not be (its noise
of standard deviation ``1e-3`` is as large as RBF(1.0)'s increments). Every random choice comes
from one ``numpy.random.Generator`` per series, seeded from the caller's generator, instead of the
global ``np.random`` state, so a run is reproducible.
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

from icml25.core.workers import chunks, process_map, resolve_workers

#: Periods (in time steps) of the 21 ExpSineSquared kernels, in the order of Chronos' bank
#: (hourly 24/48/96, 24*7 .. ; daily 7/14/30/60/365/730; weekly 4/26/52; monthly 4/6/12;
#: quarterly 4/40; yearly 10). Duplicates (4 appears three times) are kept: they weight the draw.
PERIODS: tuple[int, ...] = (24, 48, 96, 168, 336, 672, 7, 14, 30, 60, 365, 730, 4, 26, 52, 4, 6,
                            12, 4, 40, 10)

#: Chronos' ``max_kernels``: j ~ U{1..MAX_KERNELS}.
MAX_KERNELS = 5

#: Relative diagonal jitters tried in turn before the Cholesky factorisation (times mean(diag K)).
JITTERS: tuple[float, ...] = (1e-12, 1e-10, 1e-8, 1e-6)

#: Chronos' series length: its grid is ``linspace(0, 1, 1024)`` and its periodicities ``p / 1024``.
CHRONOS_LENGTH = 1024


def time_grid(length: int) -> np.ndarray:
    """``arange(length) / 1023``: the first ``length`` points of Chronos' ``linspace(0, 1, 1024)``.

    Continues with the same step past ``x = 1`` when ``length > 1024``.
    """
    if length < 2:
        raise ValueError(f"length must be >= 2, got {length}")
    return np.arange(length, dtype=np.float64) / (CHRONOS_LENGTH - 1)


def kernel_bank() -> list[Kernel]:
    """The 33 base kernels of Chronos' ``KERNEL_BANK``, hyperparameters in grid (``x``) units.

    ExpSineSquared periodicities are ``p / 1024`` for ``p`` in :data:`PERIODS`; the other 12:
    DotProduct(sigma_0 in {0, 1, 10}), RBF(length_scale in {0.1, 1, 10}),
    RationalQuadratic(alpha in {0.1, 1, 10}), WhiteKernel(0.1), WhiteKernel(1), ConstantKernel().
    The bank does not depend on the series length: shorter series are windows of the same process
    on :func:`time_grid`.
    """
    return [
        *(ExpSineSquared(periodicity=p / CHRONOS_LENGTH) for p in PERIODS),
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
    """One draw from the zero-mean GP prior with covariance ``K = kernel(x)``.

    ``L L^T = K + eps * mean(diag K) * I`` (Cholesky) with the first ``eps`` of :data:`JITTERS`
    that factorises, and ``f = L z``, ``z ~ N(0, I)``; if none does, ``K`` is eigendecomposed
    (negative eigenvalues clipped to 0) and ``f = V sqrt(w) z``. Raises
    ``numpy.linalg.LinAlgError`` if the covariance is not finite or the eigendecomposition fails.
    """
    if x.ndim == 1:
        x = x[:, None]
    cov = np.asarray(kernel(x), dtype=np.float64)
    if not np.all(np.isfinite(cov)):
        raise np.linalg.LinAlgError("covariance has non-finite entries")
    n = cov.shape[0]
    z = rng.standard_normal(n)
    scale = float(np.mean(np.abs(np.diag(cov))))
    scale = scale if scale > 0.0 else 1.0
    for eps in JITTERS:
        try:
            chol = np.linalg.cholesky(cov + (eps * scale) * np.eye(n))
        except np.linalg.LinAlgError:
            continue
        return chol @ z
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

    Sampled on :func:`time_grid` ``(length)``, a window of Chronos' 1024-point process. A draw that
    raises ``LinAlgError`` or yields a non-finite value is discarded and a new kernel is drawn
    (Chronos retries forever; we stop after ``max_tries`` and raise).
    """
    x = time_grid(length)
    bank = kernel_bank() if bank is None else bank
    for _ in range(max_tries):
        kernel = random_kernel(bank, rng, max_kernels)
        try:
            series = sample_gp_prior(kernel, x, rng)
        except np.linalg.LinAlgError:
            continue
        if np.all(np.isfinite(series)):
            return series
    raise RuntimeError(f"KernelSynth: no valid GP sample after {max_tries} kernel draws")


def _series_chunk(seeds: np.ndarray, length: int, max_kernels: int) -> np.ndarray:
    """The series of ``seeds`` (one per series), in order: the unit of work of a worker."""
    bank = kernel_bank()
    out = np.empty((len(seeds), length), dtype=np.float64)
    for i, seed in enumerate(seeds):
        out[i] = generate_series(length, np.random.default_rng(int(seed)), bank, max_kernels)
    return out


def sample_kernelsynth(
    n_series: int,
    length: int,
    rng: np.random.Generator,
    max_kernels: int = MAX_KERNELS,
    n_jobs: int = 1,
) -> np.ndarray:
    """``n_series`` KernelSynth series, shape ``[n_series, length]``, float64.

    One child seed per series is drawn from ``rng`` up front, so series ``i`` depends only on its
    seed: the same ``rng`` state gives the same array, and the first ``k`` series of a run with
    ``n_series >= k`` equal those of a run with ``n_series = k``. Shows a progress bar when
    ``n_series >= 50``.

    ``n_jobs`` worker processes (``0``: one per CPU core) draw the series in chunks; as each
    series depends only on its own seed, the array is the same for every ``n_jobs``. At the
    paper's 100,200 series of 1024 points one core needs hours (the CPU dry run measured it,
    docs/scale.md); the workers divide that.
    """
    if n_series < 0:
        raise ValueError(f"n_series must be >= 0, got {n_series}")
    workers = resolve_workers(n_jobs, n_series, min_items=64)  # at least 64 series each
    time_grid(length)  # validates length
    seeds = rng.integers(0, np.iinfo(np.int64).max, size=n_series)
    if workers == 1:
        out = np.empty((n_series, length), dtype=np.float64)
        bank = kernel_bank()
        for i in tqdm(range(n_series), desc="KernelSynth", disable=n_series < 50):
            out[i] = generate_series(length, np.random.default_rng(int(seeds[i])), bank,
                                     max_kernels)
        return out
    jobs = [(part, length, max_kernels) for part in chunks(seeds, workers)]
    parts = list(tqdm(process_map(_series_chunk, jobs, workers), total=len(jobs),
                      desc=f"KernelSynth ({workers} processes)"))
    return np.concatenate(parts, axis=0)
