"""KernelSynth port (Chronos scripts/kernel-synth.py).

Chronos' process: series of 1024 points on ``linspace(0, 1, 1024)``, a bank of 33 kernels whose
hyperparameters are in those ``x`` units (periodicities ``p / 1024``). The references below are
written from the kernels' formulas, not from sklearn or Chronos' script.
"""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    ExpSineSquared,
    RationalQuadratic,
    WhiteKernel,
)

from icml25.pipelines.wavetoken.kernel_synth import (
    PERIODS,
    generate_series,
    kernel_bank,
    random_kernel,
    sample_gp_prior,
    sample_kernelsynth,
    time_grid,
)

CHRONOS_X = np.linspace(0.0, 1.0, 1024)  # Chronos' grid

# Chronos' periods in time steps, by the frequency they stand for
REFERENCE_PERIODS = {
    "hourly": [24, 48, 96, 24 * 7, 48 * 7, 96 * 7],
    "daily": [7, 14, 30, 60, 365, 365 * 2],
    "weekly": [4, 26, 52],
    "monthly": [4, 6, 12],
    "quarterly": [4, 4 * 10],
    "yearly": [10],
}


def _reference_bank():
    """Chronos' 33 kernels as functions of grid points ``x`` (1-D), from their formulas."""

    def d(x):
        return x[:, None] - x[None, :]

    def periodic(q):  # ExpSineSquared(length_scale=1, periodicity=q)
        return lambda x: np.exp(-2.0 * np.sin(np.pi * np.abs(d(x)) / q) ** 2)

    def dot(s0):
        return lambda x: s0**2 + np.outer(x, x)

    def rbf(ell):
        return lambda x: np.exp(-(d(x) ** 2) / (2.0 * ell**2))

    def rq(alpha):  # RationalQuadratic(length_scale=1, alpha)
        return lambda x: (1.0 + d(x) ** 2 / (2.0 * alpha)) ** (-alpha)

    def white(noise):
        return lambda x: noise * np.eye(len(x))

    periods = [p for ps in REFERENCE_PERIODS.values() for p in ps]
    return (
        [periodic(p / 1024) for p in periods]
        + [dot(s) for s in (0.0, 1.0, 10.0)]
        + [rbf(ell) for ell in (0.1, 1.0, 10.0)]
        + [rq(a) for a in (0.1, 1.0, 10.0)]
        + [white(0.1), white(1.0), lambda x: np.ones((len(x), len(x)))]
    )


def test_bank_has_chronos_33_kernels():
    bank = kernel_bank()
    assert len(bank) == 33
    periodic = [k for k in bank if isinstance(k, ExpSineSquared)]
    assert len(periodic) == 21
    # Chronos: periodicity = p / LENGTH with LENGTH = 1024
    assert [k.periodicity for k in periodic] == [p / 1024 for p in PERIODS]
    assert sorted(PERIODS) == sorted(
        [24, 48, 96, 168, 336, 672, 7, 14, 30, 60, 365, 730, 4, 26, 52, 4, 6, 12, 4, 40, 10]
    )
    assert [k.sigma_0 for k in bank if isinstance(k, DotProduct)] == [0.0, 1.0, 10.0]
    assert [k.length_scale for k in bank if isinstance(k, RBF)] == [0.1, 1.0, 10.0]
    assert [k.alpha for k in bank if isinstance(k, RationalQuadratic)] == [0.1, 1.0, 10.0]
    assert [k.noise_level for k in bank if isinstance(k, WhiteKernel)] == [0.1, 1.0]
    assert sum(isinstance(k, ConstantKernel) for k in bank) == 1
    assert list(PERIODS) == [p for ps in REFERENCE_PERIODS.values() for p in ps]


def test_time_grid_is_prefix_of_chronos_grid():
    for length in (2, 96, 256, 1024):
        np.testing.assert_allclose(time_grid(length), CHRONOS_X[:length], rtol=0, atol=1e-15)
    # longer series continue with Chronos' step 1/1023 past x = 1
    x = time_grid(1500)
    np.testing.assert_allclose(np.diff(x), 1 / 1023, rtol=1e-9)
    assert x[1023] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="length"):
        time_grid(1)


@pytest.mark.parametrize("length", [96, 256])
def test_kernel_matrices_are_top_left_block_of_chronos_1024(length):
    """Each bank kernel on our length-L grid = top-left LxL block of Chronos' 1024-point matrix."""
    bank, reference = kernel_bank(), _reference_bank()
    assert len(bank) == len(reference) == 33
    x = time_grid(length)
    for i, (kernel, ref) in enumerate(zip(bank, reference, strict=True)):
        ours = kernel(x[:, None])
        chronos = ref(CHRONOS_X)[:length, :length]
        np.testing.assert_allclose(ours, chronos, rtol=1e-9, atol=1e-12, err_msg=f"kernel {i}")
    # ... and so is every composite (sums and products of the same blocks)
    rng = np.random.default_rng(5)
    for _ in range(20):
        kernel = random_kernel(bank, rng)
        np.testing.assert_allclose(
            kernel(x[:, None]), kernel(CHRONOS_X[:, None])[:length, :length], rtol=1e-9, atol=1e-12
        )
    # the old construction (L points on linspace(0, 1, L), periodicity p / L) is not that block
    rbf = reference[25]  # RBF(1.0)
    assert not np.allclose(rbf(np.linspace(0, 1, length)), rbf(CHRONOS_X)[:length, :length])


def test_longer_series_extend_chronos_process():
    x = time_grid(1100)
    rng = np.random.default_rng(6)
    for _ in range(5):
        kernel = random_kernel(kernel_bank(), rng)
        np.testing.assert_allclose(
            kernel(x[:, None])[:1024, :1024], kernel(CHRONOS_X[:, None]), rtol=1e-9, atol=1e-12
        )


def _lag1_path(f):
    """Per-path empirical lag-1 autocorrelation (mean removed), one value per row."""
    f = f - f.mean(axis=1, keepdims=True)
    return (f[:, :-1] * f[:, 1:]).sum(axis=1) / (f * f).sum(axis=1)


def _one_minus_lag1_ensemble(f):
    """mean over t of 1 - corr(f_t, f_{t+1}), the correlation taken across sample paths."""
    f = f - f.mean(axis=0)
    cov = (f[:, :-1] * f[:, 1:]).mean(axis=0)
    sd = np.sqrt((f * f).mean(axis=0))
    return float(np.mean(1.0 - cov / (sd[:-1] * sd[1:])))


def test_rbf_samples_at_256_match_first_256_points_of_chronos_process():
    """RBF(1.0)-only KernelSynth at L = 256 vs the first 256 points of Chronos' 1024-point draws.

    Reference: exact Gaussian draws (numpy, SVD, no jitter) with the RBF formula on Chronos' grid.
    Ensemble 1 - lag-1 correlation: theory 1 - exp(-h^2/2) with h = 1/1023 (4.78e-7); with 2000
    paths its estimate has ~3 % relative error, so the ratio ours/reference must lie within 20 %.
    (The old grid linspace(0, 1, 256) gives h = 1/255, a ratio of 16; an absolute jitter of 1e-6
    adds 2e-6 to the increments' variance, a ratio of ~3.) Per-path lag-1 autocorrelations: the
    means of log(1 - r1) must agree within 5 combined standard errors.
    """
    n, length = 2000, 256
    rng = np.random.default_rng(11)
    reference = _reference_bank()[25](CHRONOS_X)  # RBF(1.0), 1024 x 1024
    ref = rng.multivariate_normal(np.zeros(1024), reference, size=n, method="svd")[:, :length]
    ours = np.stack([
        generate_series(length, np.random.default_rng(1000 + i), bank=[RBF(1.0)], max_kernels=1)
        for i in range(n)
    ])

    theory = 1.0 - np.exp(-0.5 / 1023**2)
    m_ref, m_ours = _one_minus_lag1_ensemble(ref), _one_minus_lag1_ensemble(ours)
    assert m_ref / theory == pytest.approx(1.0, abs=0.2)
    assert m_ours / m_ref == pytest.approx(1.0, abs=0.2)

    a, b = np.log1p(-_lag1_path(ref)), np.log1p(-_lag1_path(ours))
    se = np.sqrt(a.var() / n + b.var() / n)
    assert abs(a.mean() - b.mean()) < 5 * se


def test_random_kernel_uses_one_to_five_base_kernels():
    bank = kernel_bank()
    rng = np.random.default_rng(0)
    counts = set()
    for _ in range(300):
        kernel = random_kernel(bank, rng)
        # every composite is a binary tree of Sum/Product; count its leaves
        stack, leaves = [kernel], 0
        while stack:
            k = stack.pop()
            if hasattr(k, "k1") and hasattr(k, "k2"):
                stack += [k.k1, k.k2]
            else:
                leaves += 1
        counts.add(leaves)
    assert counts == {1, 2, 3, 4, 5}


def test_gp_sample_has_kernel_covariance():
    x = np.linspace(0, 1, 6)
    kernel = RBF(length_scale=0.3)
    rng = np.random.default_rng(1)
    draws = np.stack([sample_gp_prior(kernel, x, rng) for _ in range(20000)])
    assert np.abs(draws.mean(0)).max() < 0.05
    np.testing.assert_allclose(np.cov(draws.T), kernel(x[:, None]), atol=0.05)


def test_gp_sample_falls_back_to_eigh_on_indefinite_covariance():
    class Indefinite(RBF):
        def __call__(self, X, Y=None, eval_gradient=False):
            return np.diag([1.0, -1.0, 4.0])  # Cholesky fails even with jitter

    f = sample_gp_prior(Indefinite(), np.zeros(3), np.random.default_rng(0))
    assert np.isfinite(f).all()
    assert f[1] == 0.0  # the negative eigenvalue is clipped to zero variance


def test_shapes_finite_and_reproducible():
    a = sample_kernelsynth(12, 128, np.random.default_rng(7))
    b = sample_kernelsynth(12, 128, np.random.default_rng(7))
    c = sample_kernelsynth(12, 128, np.random.default_rng(8))
    assert a.shape == (12, 128) and a.dtype == np.float64
    assert np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # series i depends only on its own seed: a prefix of a longer run is the shorter run
    np.testing.assert_array_equal(sample_kernelsynth(4, 128, np.random.default_rng(7)), a[:4])
    # the series are not all trivial
    assert (a.std(axis=1) > 0).sum() >= 10


def test_generate_series_retries_and_empty():
    series = generate_series(32, np.random.default_rng(3))
    assert series.shape == (32,)
    assert sample_kernelsynth(0, 16, np.random.default_rng(0)).shape == (0, 16)
    with pytest.raises(ValueError, match="length"):
        generate_series(1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="length"):
        sample_kernelsynth(2, 1, np.random.default_rng(0))


def test_worker_processes_draw_the_same_series():
    serial = sample_kernelsynth(130, 96, np.random.default_rng(3))
    parallel = sample_kernelsynth(130, 96, np.random.default_rng(3), n_jobs=2)
    np.testing.assert_array_equal(parallel, serial)
    with pytest.raises(ValueError, match="n_jobs must be >= 0"):
        sample_kernelsynth(4, 96, np.random.default_rng(3), n_jobs=-1)
