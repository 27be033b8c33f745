"""Exact 1-D hitting times on a grid: edge cases with known answers and the L1 exponent."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.sgd_hitting import exact_solver as ex
from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target, camel, tilted_double_well
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw
from icml25.pipelines.sgd_hitting.scaling_fits import scaling_fit


def _flat(slope: float = 0.0) -> Landscape:
    return Landscape("line", 1, lambda c, xp: -slope * c[0], lambda c, xp: (0 * c[0] - slope,),
                     lambda p: np.zeros((1, 1)), ((-5.0, 5.0),))


def test_without_noise_tau_is_the_deterministic_step_count():
    # f = -x: every step moves right by η; U = {x > 1} from 0 takes 11 steps at η = 0.1
    kernel = ex.build_kernel(_flat(1.0), NoiseLaw("gaussian", (0.0,)), 0.1,
                             Target("right_of", threshold=1.0), h=0.1 / 8, walls=(-1.0, 2.0))
    assert ex.mean_hitting_time(kernel, 0.0) == pytest.approx(11.0, abs=1e-9)
    assert ex.median_hitting_time(kernel, 0.0) == 11.0


def test_pure_gaussian_increments_exit_an_interval_in_a2_over_eta2_sigma2():
    a, eta, sigma = 2.0, 0.05, 1.0  # a / (η σ) = 40 steps of one standard deviation
    outside = Target("outside", threshold=a, threshold_low=-a)  # both ends absorb: |x| > a
    kernel = ex.build_kernel(_flat(), NoiseLaw("gaussian", (sigma,)), eta, outside,
                             h=eta * sigma / 6, walls=(-a - 1.0, a + 1.0))
    mean = ex.mean_hitting_time(kernel, 0.0)
    assert mean == pytest.approx(a**2 / (eta * sigma) ** 2, rel=0.05)


def test_kernel_rows_sum_to_one_for_every_law():
    land = tilted_double_well(0.1)
    target = Target("right_of", threshold=0.8)
    for noise in (NoiseLaw("gaussian"), NoiseLaw("rademacher"), NoiseLaw("centred_exp")):
        kernel = ex.build_kernel(land, noise, 0.06, target, ex.default_spacing(noise, 0.06),
                                 walls=(-3.0, 1.2))
        rows = np.asarray(kernel.p_tt.sum(1)).ravel()
        assert np.all(rows <= 1 + 1e-12) and np.all(rows > 0)


def test_median_by_repeated_squaring_matches_step_by_step_iteration():
    land = tilted_double_well(0.1)
    target = Target("right_of", threshold=0.8)
    noise = NoiseLaw("rademacher")
    kernel = ex.build_kernel(land, noise, 0.15, target, 0.15 / 8, walls=(-3.0, 1.2))
    j = int(np.searchsorted(kernel.transient, np.argmin(np.abs(kernel.grid + 0.9456))))
    survival, n = np.ones(len(kernel.transient)), 0
    while survival[j] > 0.5:  # independent: iterate P_TT 1 one step at a time
        survival = kernel.p_tt @ survival
        n += 1
    assert ex.median_hitting_time(kernel, kernel.grid[kernel.transient[j]]) == n


def test_l1_gaussian_local_slope_is_within_two_percent_of_the_theory():
    land = tilted_double_well(0.1)
    target = Target("right_of", threshold=1.046681 - 0.25)
    noise = NoiseLaw("gaussian")
    etas = [0.027, 0.021]
    means = [ex.solve_mean(land, noise, eta, target, -0.945649, ex.default_spacing(noise, eta),
                           walls=(-3.0, 1.2)) for eta in etas]
    fit = scaling_fit(etas, means)
    assert fit["local_slope"] == pytest.approx(0.31533, rel=0.02)


def test_exact_solver_refuses_bad_input():
    target = Target("right_of", threshold=0.8)
    with pytest.raises(ValueError, match="step size must be a finite number > 0"):
        ex.build_kernel(tilted_double_well(), NoiseLaw("gaussian"), 0.0, target, 0.01)
    with pytest.raises(ValueError, match="step size must be a finite number > 0"):
        ex.build_kernel(tilted_double_well(), NoiseLaw("gaussian"), -0.1, target, 0.01)
    with pytest.raises(ValueError, match="1-D"):
        ex.build_kernel(camel(), NoiseLaw("gaussian"), 0.01, target, 0.01)
    with pytest.raises(ValueError, match="spacing"):
        ex.build_kernel(tilted_double_well(), NoiseLaw("gaussian"), 0.1, target, 0.0)
