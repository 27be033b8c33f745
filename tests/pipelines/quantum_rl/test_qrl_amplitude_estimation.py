"""The exact AE simulation: pmf identities, known answers, the 8/pi^2 bound, median-of-K failure
rates against the binomial tail, budgets and the 1/n vs 1/sqrt(n) error scaling."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from icml25.pipelines.quantum_rl.amplitude_estimation import (
    SINGLE_RUN_FAILURE,
    ae_error_bound,
    ae_estimates,
    ae_pmf,
    auto_k,
    estimator_error_table,
    grover_power,
    loglog_slope,
    median_failure_probability,
    median_of_k_estimate,
    quantum_row_estimate,
    sample_ae_outcomes,
    union_bound_delta,
)

POWERS = [2**k for k in range(1, 11)]


def test_pmf_sums_to_one_and_has_both_symmetries():
    rng = np.random.default_rng(0)
    for M in POWERS:
        p = rng.random(25)
        pmf = ae_pmf(p, M)
        np.testing.assert_allclose(pmf.sum(axis=1), 1.0, atol=1e-12)
        y = np.arange(M)
        np.testing.assert_allclose(pmf, pmf[:, (M - y) % M], atol=1e-13)
        if M >= 2:  # reflection p -> 1 - p maps y -> M/2 - y, i.e. estimates p~ -> 1 - p~
            np.testing.assert_allclose(ae_pmf(1 - p, M), pmf[:, (M // 2 - y) % M], atol=1e-12)
            est = ae_estimates(M)
            np.testing.assert_allclose(est[(M // 2 - y) % M], 1 - est, atol=1e-12)


def test_grid_probabilities_and_endpoints_are_estimated_exactly():
    M = 16
    for y0 in range(M):
        p = math.sin(math.pi * y0 / M) ** 2
        pmf = ae_pmf(p, M)
        support = {y0 % M, (M - y0) % M}
        assert pmf[sorted(support)].sum() == pytest.approx(1.0, abs=1e-12)
    rng = np.random.default_rng(1)
    for p in (0.0, 1.0):
        est = median_of_k_estimate(np.array([p]), 64, 7, rng)
        assert est[0] == pytest.approx(p, abs=1e-15)


def test_single_run_bound_holds_with_probability_8_over_pi_squared_exactly():
    p = np.linspace(0.0, 1.0, 199)
    worst = 1.0
    for M in POWERS:
        pmf = ae_pmf(p, M)
        ok = np.abs(ae_estimates(M)[None, :] - p[:, None]) <= ae_error_bound(p, M)[:, None] + 1e-12
        worst = min(worst, float((pmf * ok).sum(axis=1).min()))
    assert worst >= 8 / math.pi**2 - 1e-9
    assert worst < 0.82  # the bound is nearly tight somewhere on the grid (0.8106 found)


def test_sampled_bound_and_median_of_k_failure_rate():
    rng = np.random.default_rng(2)
    p, M = 0.3, 64
    y = sample_ae_outcomes(np.array([p]), M, 2000, rng)[0]
    ok = np.abs(ae_estimates(M)[y] - p) <= ae_error_bound(p, M)
    assert ok.mean() >= 0.78
    # median of K = 7: failure rate at most the binomial tail (0.028) + 0.01, at several p
    for p in (0.05, 0.3, 0.62):
        med = np.median(ae_estimates(M)[sample_ae_outcomes(np.array([p]), M, 7 * 4000,
                                                           rng)[0].reshape(4000, 7)], axis=1)
        fail = np.mean(np.abs(med - p) > ae_error_bound(p, M))
        assert fail <= median_failure_probability(7) + 0.01


def test_binomial_tails_and_auto_k_match_known_values():
    assert abs(SINGLE_RUN_FAILURE - 0.189) < 5e-4
    assert median_failure_probability(5) == pytest.approx(0.050, abs=5e-4)
    assert median_failure_probability(7) == pytest.approx(0.028, abs=5e-4)
    assert median_failure_probability(15) == pytest.approx(0.0030, abs=5e-5)
    assert auto_k(union_bound_delta(0.05, 6, 2, 100_000)) == 69
    with pytest.raises(ValueError, match="odd"):
        median_failure_probability(4)


def test_grover_power_budget():
    assert grover_power(13, K=7) == 0  # fewer than 2K calls: fall back to classical
    assert grover_power(14, K=7) == 2
    assert grover_power(64, K=7) == 8  # 2^floor(log2(64/7))
    assert grover_power(64, K=7, kappa=2) == 4
    assert grover_power(2**16, K=1) == 2**16


def test_row_estimate_is_a_distribution_and_keeps_exact_zeros():
    rng = np.random.default_rng(3)
    row = np.array([0.0, 0.6, 0.35, 0.05, 0.0])
    est, M = quantum_row_estimate(row, 700, 7, 1, "paper", rng)
    assert M == 64
    assert est.sum() == pytest.approx(1.0) and np.all(est >= 0)
    assert est[0] == 0.0 and est[4] == 0.0
    assert np.abs(est - row).sum() < 0.2
    _, M_split = quantum_row_estimate(row, 700, 7, 1, "split", rng)
    assert M_split == 16  # 700 / 5 = 140 calls per coordinate
    assert quantum_row_estimate(row, 10, 7, 1, "paper", rng) == (None, 0)


def test_bad_probabilities_are_refused():
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        ae_pmf(np.array([0.2, 1.3]), 8)
    with pytest.raises(ValueError, match="power of two"):
        ae_pmf(0.2, 6)


def test_error_scaling_slopes_quantum_minus_one_classical_minus_half():
    rows = estimator_error_table(np.linspace(0.05, 0.95, 10), np.arange(6, 17), 60, 7, 1,
                                 np.random.default_rng(4))
    table = pd.DataFrame(rows)
    slopes = {m: loglog_slope(g.groupby("n").error.mean().index.to_numpy(),
                              g.groupby("n").error.mean().to_numpy())
              for m, g in table.groupby("method")}
    assert -1.25 <= slopes["quantum"] <= -0.75
    assert -0.6 <= slopes["classical"] <= -0.4
