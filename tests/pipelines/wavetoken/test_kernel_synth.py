"""KernelSynth port (Chronos scripts/kernel-synth.py)."""

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
)


def test_bank_has_chronos_33_kernels():
    bank = kernel_bank(1024)
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
    # periods are in time steps whatever the length
    assert kernel_bank(256)[0].periodicity == pytest.approx(24 / 256)


def test_random_kernel_uses_one_to_five_base_kernels():
    bank = kernel_bank(64)
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
    with pytest.raises(ValueError):
        kernel_bank(1)
