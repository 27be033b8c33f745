"""Synthetic stress sets (the patterns of the paper's Figure 1)."""

import numpy as np
import pytest
from scipy.signal import hilbert

from icml25.pipelines.wavetoken.stress_sets import (
    chirps,
    make_stress_sets,
    sparse_spikes,
    trend_season,
)


def test_make_stress_sets_shapes_and_reproducible():
    a = make_stress_sets(5, 200, np.random.default_rng(0))
    b = make_stress_sets(5, 200, np.random.default_rng(0))
    assert set(a) == {"sparse_spikes", "chirps", "trend_season"}
    for name, values in a.items():
        assert values.shape == (5, 200) and values.dtype == np.float64
        assert np.isfinite(values).all()
        np.testing.assert_array_equal(values, b[name])
    assert not np.array_equal(a["chirps"][0], a["chirps"][1])


def test_spikes_are_periodic_with_period_in_range():
    x = sparse_spikes(40, 400, np.random.default_rng(1))
    for row in x:
        spikes = np.flatnonzero(row > 1.5)  # noise std 0.1, heights >= 3
        assert spikes.size >= 400 // 40
        gaps = np.unique(np.diff(spikes))
        assert gaps.size == 1 and 12 <= gaps[0] <= 40
        assert np.abs(np.delete(row, spikes)).max() < 1.0  # flat noise elsewhere


def test_chirp_matches_formula_and_parameter_ranges():
    x = chirps(30, 256, np.random.default_rng(2))
    assert np.abs(x).max() <= 1.0
    t = np.arange(256.0)
    for row in x:
        # recover f0 and kappa from the unwrapped phase of the analytic signal: fit in range
        phase = np.unwrap(np.angle(hilbert(row)))[20:-20] / (2 * np.pi)
        kappa2, f0, _ = np.polyfit(t[20:-20], phase, 2)
        assert 0.004 <= f0 <= 0.021
        assert 0.9e-4 <= 2 * kappa2 <= 4.1e-4
    # the exact formula: sin(2π(f0 t + κ t²/2)) starts at 0
    np.testing.assert_allclose(x[:, 0], 0.0, atol=1e-12)


def test_trend_season_has_trend_and_season():
    x = trend_season(30, 240, np.random.default_rng(3))
    t = np.arange(240.0)
    slopes = np.array([np.polyfit(t, row, 1)[0] for row in x])
    assert np.all((np.abs(slopes) > 0.003) & (np.abs(slopes) < 0.025))
    assert (slopes > 0).any() and (slopes < 0).any()
    detrended = x - slopes[:, None] * t
    assert np.all(detrended.std(axis=1) > 0.3)  # amplitude >= 0.5 -> std >= 0.35


def test_bad_sizes_raise():
    with pytest.raises(ValueError):
        chirps(-1, 10, np.random.default_rng(0))
    with pytest.raises(ValueError):
        sparse_spikes(2, 0, np.random.default_rng(0))
