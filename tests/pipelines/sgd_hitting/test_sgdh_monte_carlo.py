"""The many-chains simulator and its censored estimators."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.pipelines.sgd_hitting import monte_carlo as mc
from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target, camel, tilted_double_well
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw

QUAD = Landscape("quadratic", 1, lambda c, xp: c[0] ** 2 / 2, lambda c, xp: (c[0],),
                 lambda p: np.array([[1.0]]), ((-5.0, 5.0),))


def test_censored_exponential_mle_recovers_the_mean_with_half_censored():
    rng = np.random.default_rng(0)
    lam = 0.01
    tau = rng.exponential(1 / lam, 2000)
    cap = math.log(2) / lam  # 50 % censored
    censored = tau > cap
    assert 0.45 < censored.mean() < 0.55
    est = mc.censored_mean(np.minimum(tau, cap), censored)
    assert est == pytest.approx(1 / lam, rel=0.05)
    assert mc.censored_median(np.minimum(tau, cap), censored) is not None


def test_ks_distance_is_small_for_exponential_and_large_for_constant_times():
    rng = np.random.default_rng(1)
    tau = rng.exponential(100.0, 4000)
    cens = np.zeros_like(tau, bool)
    assert mc.ks_exponential(tau, cens, tau.mean()) < 0.03
    assert mc.ks_exponential(np.full(100, 5.0), np.zeros(100, bool), 5.0) > 0.3


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_without_noise_tau_is_the_deterministic_hitting_step(backend):
    eta, x0 = 0.01, 2.0
    target = Target("ball", center=(0.0,), radius=0.5)
    sample = mc.simulate_hitting_times(QUAD, NoiseLaw("gaussian", (0.0,)), eta, (x0,), target,
                                       16, seed=0, max_steps=10_000, backend=backend)
    x, n = x0, 0
    while not abs(x) < 0.5:
        x -= eta * x
        n += 1
    assert np.all(sample.tau == n) and not sample.censored.any()


def test_a_start_inside_u_has_tau_zero():
    target = Target("ball", center=(0.0,), radius=0.5)
    sample = mc.simulate_hitting_times(QUAD, NoiseLaw("gaussian"), 0.1, (0.1,), target, 10, 0,
                                       100)
    assert np.all(sample.tau == 0) and not sample.censored.any()


def test_runs_are_deterministic_for_a_seed_and_censor_at_the_cap():
    land = tilted_double_well(0.1)
    target = Target("right_of", threshold=0.8)
    args = (land, NoiseLaw("gaussian"), 0.1, (-0.9456,), target, 200)
    a = mc.simulate_hitting_times(*args, seed=5, max_steps=300)
    b = mc.simulate_hitting_times(*args, seed=5, max_steps=300)
    c = mc.simulate_hitting_times(*args, seed=6, max_steps=300)
    assert np.array_equal(a.tau, b.tau) and not np.array_equal(a.tau, c.tau)
    assert a.stop == 300 and a.censored.any() and np.all(a.tau[a.censored] == 300)
    assert np.all(a.tau[~a.censored] <= 300)


def test_monte_carlo_mean_agrees_with_the_eyring_kramers_order_on_l1():
    land = tilted_double_well(0.1)
    target = Target("right_of", threshold=1.046681 - 0.25)
    sample = mc.simulate_hitting_times(land, NoiseLaw("gaussian"), 0.1, (-0.945649,), target,
                                       600, seed=0, max_steps=100_000)
    mean = mc.censored_mean(sample.tau, sample.censored)
    # Eyring–Kramers at η = 0.1: (1/η) 2π / sqrt(|f''(s)| f''(m)) exp(2Δf/(η σ²)) ≈ 1.2e3
    ek = 10 * 2 * math.pi / math.sqrt(0.969 * 1.683) * math.exp(0.31533 / 0.1)
    assert 0.7 < mean / ek < 1.4


def test_simulator_refuses_bad_input():
    target = Target("ball", center=(0.0, 0.0), radius=0.25)
    for eta in (0.0, -0.01, float("nan")):
        with pytest.raises(ValueError, match="step size must be a finite number > 0"):
            mc.simulate_hitting_times(camel(), NoiseLaw("gaussian", (1.0, 1.0)), eta,
                                      (1.7, -0.8), target, 10, 0, 10)
    with pytest.raises(ValueError, match="outside the domain"):
        mc.simulate_hitting_times(camel(), NoiseLaw("gaussian", (1.0, 1.0)), 0.01,
                                  (9.0, 0.0), target, 10, 0, 10)
    with pytest.raises(ValueError, match="diverges"):
        mc.check_step_size(0.2, curvature=12.25)
    with pytest.raises(ValueError, match="finite and non-negative"):
        mc.censored_mean(np.array([1.0, np.nan]), np.array([False, False]))


def test_torch_backend_agrees_with_numpy_in_distribution():
    land = tilted_double_well(0.1)
    target = Target("right_of", threshold=1.046681 - 0.25)
    means = {}
    for backend in ("numpy", "torch"):
        s = mc.simulate_hitting_times(land, NoiseLaw("gaussian"), 0.12, (-0.945649,), target,
                                      800, seed=3, max_steps=50_000, backend=backend)
        means[backend] = mc.censored_mean(s.tau, s.censored)
    assert means["torch"] == pytest.approx(means["numpy"], rel=0.15)


QUARTIC = Landscape("quartic", 1, lambda c, xp: c[0] ** 4 / 4, lambda c, xp: (c[0] ** 3,),
                    lambda p: np.array([[3 * p[0] ** 2]]), ((-1e301, 1e301),))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_chains_that_overflow_are_diverged_never_hits(backend):
    # from x0 = 1e200 one step on f = x⁴/4 overflows to -inf, which the half-line
    # U = {x < -1e300} contains: a diverged chain, not a hit
    target = Target("left_of", threshold=-1e300)
    sample = mc.simulate_hitting_times(QUARTIC, NoiseLaw("gaussian", (0.1,)), 0.1, (1e200,),
                                       target, 50, seed=0, max_steps=500, backend=backend)
    assert sample.diverged.all() and sample.n_hits == 0 and sample.n_diverged == 50
    assert not sample.censored.any() and np.all(sample.tau == 1)
    # from x0 = 30 the iterates grow in magnitude with alternating sign (-2670, 1.9e9, ...)
    # and never enter the ball U around 0: non-finite after a few steps, flagged, not censored
    ball = Target("ball", center=(0.0,), radius=0.5)
    sample = mc.simulate_hitting_times(QUARTIC, NoiseLaw("gaussian", (0.1,)), 0.1, (30.0,),
                                       ball, 50, seed=0, max_steps=500, backend=backend)
    assert sample.diverged.all() and not sample.censored.any() and np.all(sample.tau <= 10)
    # the same law from a start in the well: nothing diverges, the chains hit
    ok = mc.simulate_hitting_times(QUARTIC, NoiseLaw("gaussian", (1.0,)), 0.1, (-3.0,),
                                   ball, 50, seed=0, max_steps=5000, backend=backend)
    assert not ok.diverged.any() and ok.n_hits == 50


def test_mixed_divergence_keeps_the_estimators_on_the_other_chains():
    # one start per run, so mix two runs: the estimator leaves the diverged chains out
    target = Target("ball", center=(0.0,), radius=0.5)
    bad = mc.simulate_hitting_times(QUARTIC, NoiseLaw("gaussian", (0.1,)), 0.1, (30.0,),
                                    target, 5, seed=1, max_steps=200)
    good = mc.simulate_hitting_times(QUARTIC, NoiseLaw("gaussian", (1.0,)), 0.1, (-3.0,),
                                     target, 200, seed=1, max_steps=5000)
    import pandas as pd

    from icml25.pipelines.sgd_hitting.experiments import fit_mc

    rows = []
    for eta in (0.1, 0.09):  # two η with the same samples: only the estimator is checked
        for s in (bad, good):
            rows.append(pd.DataFrame({"eta": eta, "tau": s.tau, "censored": s.censored,
                                      "diverged": s.diverged}))
    frame = pd.concat(rows, ignore_index=True)

    class R:
        name = "quartic"

    fit = fit_mc(frame, R(), None, 0, np.random.default_rng(0))
    assert fit["diverged_chains"] == [5, 5] and fit["diverged_total"] == 10
    assert fit["means"][0] == pytest.approx(mc.censored_mean(good.tau, good.censored))


def test_simulator_refuses_a_step_size_beyond_the_curvature_at_the_minima():
    target = Target("ball", center=(0.0, 0.0), radius=0.25)
    with pytest.raises(ValueError, match="diverges"):
        mc.simulate_hitting_times(camel(), NoiseLaw("gaussian", (1.0, 1.0)), 0.2, (1.7, -0.8),
                                  target, 10, 0, 10, curvature=12.25)
