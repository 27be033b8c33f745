"""True functions, Haar bias and the regression reduction against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.distributed_estimation import functions as F


def test_d1_haar_bias_matches_closed_form():
    f = F.d1_cells()
    assert f.mean() == pytest.approx(1.0, abs=1e-12)
    for k in (8, 16, 32, 64, 128, 256):
        assert F.haar_bias(f, k) == pytest.approx(np.pi**2 / 24 / k**2, rel=0.05)


@pytest.mark.parametrize("s", [0.5, 0.75])
def test_d2_bias_slope_is_minus_two_s(s):
    f = F.d2_cells(s)
    ks = np.array([4, 8, 16, 32, 64, 128, 256])
    bias = [F.haar_bias(f, k) for k in ks]
    slope = np.polyfit(np.log(ks), np.log(bias), 1)[0]
    assert slope == pytest.approx(-2 * s, abs=0.05)
    # independent check: the energy of the wavelet levels j >= log2 K, c²·Σ 2^{-2js}
    j = np.arange(3, 12)
    assert F.haar_bias(f, 8) == pytest.approx(0.01 * np.sum(2.0 ** (-2 * s * j)), rel=1e-9)


def test_d2_anchor_function_range():
    f = F.d2_cells(0.5)
    assert f.min() == pytest.approx(0.664, abs=1e-3) and f.max() == pytest.approx(1.336, abs=1e-3)


def test_ise_decomposes_into_bias_plus_bin_error():
    model = F.make_model("density", F.d1_cells())
    k = 16
    rng = np.random.default_rng(0)
    p_hat = model.symbol_distribution(k) + rng.normal(0, 1e-3, k)
    direct = np.mean((np.repeat(model.decode(p_hat, k), F.FINE_CELLS // k) - model.f) ** 2)
    assert model.ise(p_hat, k) == pytest.approx(direct, rel=1e-10)


@pytest.mark.parametrize("model", F.MODELS)
def test_symbol_distribution_matches_sample_level_frequencies(model):
    tm = F.make_model(model, F.d2_cells(0.5))
    k, size = 8, 400_000
    p = tm.symbol_distribution(k)
    assert p.sum() == pytest.approx(1.0) and p.min() >= 0
    freq = np.bincount(tm.sample_symbols(k, (size,), np.random.default_rng(1)),
                       minlength=p.size) / size
    se = np.sqrt(p * (1 - p) / size)
    assert np.all(np.abs(freq - p) < 4 * se + 1e-12)


@pytest.mark.parametrize("model", ["gaussian", "poisson", "heteroskedastic", "binary"])
def test_regression_reduction_is_unbiased_for_a_constant(model):
    a = {"gaussian": 0.8, "heteroskedastic": 1.1, "poisson": 3.0, "binary": 0.3}[model]
    tm = F.make_model(model, F.d2_cells(0.5))
    tm = F.TrueModel(model, np.full(tm.f.size, a), tm.sigma, tm.lo, tm.hi)
    k, m, reps = 4, 20_000, 1
    sym = tm.sample_symbols(k, (reps, m), np.random.default_rng(2))[0]
    p_hat = np.bincount(sym, minlength=2 * k) / m
    f_hat = tm.lo + (tm.hi - tm.lo) * k * p_hat[1::2]
    se = (tm.hi - tm.lo) * k * np.sqrt(p_hat[1::2] * (1 - p_hat[1::2]) / m)
    assert np.all(np.abs(f_hat - a) < 3 * se + 1e-3)  # 1e-3: the clipping bias (z = 3)
    if model == "binary":
        assert np.all((tm.decode(p_hat, k) >= 0) & (tm.decode(p_hat, k) <= 1))


def test_binary_decoder_stays_in_unit_interval_for_any_estimate():
    tm = F.make_model("binary", F.d1_cells())
    wild = np.random.default_rng(3).normal(0, 1, 16)
    out = tm.decode(wild, 8)
    assert out.min() >= 0 and out.max() <= 1


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown model"):
        F.make_model("laplace", F.d1_cells())
    with pytest.raises(ValueError, match="divide"):
        F.bin_means(np.ones(12), 5)
    tm = F.make_model("density", F.d1_cells())
    with pytest.raises(ValueError, match="NaN"):
        tm.ise(np.full(4, np.nan), 4)
