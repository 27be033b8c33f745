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


def test_with_vanishing_noise_tau_is_the_deterministic_step_count():
    # f = -x: every step moves right by η; U = {x > 1} from 0 takes 11 steps at η = 0.1
    kernel = ex.build_kernel(_flat(1.0), NoiseLaw("gaussian", (1e-12,)), 0.1,
                             Target("right_of", threshold=1.0), h=0.1 / 8, walls=(-1.0, 2.0))
    assert ex.mean_hitting_time(kernel, 0.0) == pytest.approx(11.0, abs=1e-9)
    assert ex.median_hitting_time(kernel, 0.0) == 11.0


def test_zero_noise_is_refused_by_name():
    target = Target("right_of", threshold=1.0)
    with pytest.raises(ValueError, match=r"σ\(x\) = 0 .*needs σ > 0.*noise.scale"):
        ex.build_kernel(_flat(1.0), NoiseLaw("gaussian", (0.0,)), 0.1, target, h=0.1 / 8,
                        walls=(-1.0, 2.0))
    with pytest.raises(ValueError, match="needs σ > 0"):
        ex.default_spacing(NoiseLaw("gaussian", (0.0,)), 0.1)


def test_a_start_that_cannot_reach_u_has_infinite_mean_not_a_garbage_solve():
    # f = 0.8 x²: |f'| reaches 1.6 > 1 at |x| > 0.625, so Rademacher ±1 noise never leaves
    # [-0.7, 0.7]; U = {x > 1.5} is unreachable. I - P_TT is singular on that closed class (an
    # unchecked sparse solve returns 8.0e16 from x0 = 0); the checked solve says E τ = ∞.
    steep = Landscape("steep", 1, lambda c, xp: 0.8 * c[0] ** 2, lambda c, xp: (1.6 * c[0],),
                      lambda p: np.array([[1.6]]), ((-3.0, 3.0),))
    kernel = ex.build_kernel(steep, NoiseLaw("rademacher"), 0.05, Target("right_of",
                             threshold=1.5), h=0.05 / 8, walls=(-3.0, 3.0))
    sol = ex.solve_hitting_time(kernel, 0.0)
    assert sol.mean == np.inf
    # from x0 = 2 the drift alone carries the chain into the trap: also never
    assert ex.mean_hitting_time(kernel, 1.4) == np.inf


def test_checked_solve_reports_residual_and_condition():
    land = tilted_double_well(0.1)
    noise = NoiseLaw("gaussian")
    kernel = ex.build_kernel(land, noise, 0.06, Target("right_of", threshold=0.8),
                             ex.default_spacing(noise, 0.06), walls=(-3.0, 1.2))
    sol = ex.solve_hitting_time(kernel, -0.945649)
    assert 0 <= sol.residual < 1e-12
    # independent dense solve and condition number (numpy) on the same kernel
    m = np.eye(kernel.p_tt.shape[0]) - kernel.p_tt.toarray()
    dense = np.linalg.solve(m, np.ones(len(m)))
    j = int(np.searchsorted(kernel.transient, np.argmin(np.abs(kernel.grid + 0.945649))))
    assert sol.mean == pytest.approx(dense[j], rel=1e-9)
    # the solve runs on the states reachable from x0, a subset of T: at most the full one
    full = np.linalg.cond(m, np.inf)
    assert sol.condition <= full * (1 + 1e-9) and sol.condition == pytest.approx(full, rel=1e-4)


def test_a_step_size_beyond_the_curvature_limit_is_refused():
    with pytest.raises(ValueError, match="diverges"):
        ex.build_kernel(tilted_double_well(), NoiseLaw("gaussian"), 1.3,
                        Target("right_of", threshold=0.8), 0.2, curvature=2.2)


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
