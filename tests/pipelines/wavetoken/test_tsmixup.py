"""TSMixup (Chronos paper, Algorithm 1)."""

import numpy as np
import pytest

from icml25.pipelines.wavetoken.tsmixup import mean_abs_scale, tsmixup


def _pool():
    rng = np.random.default_rng(0)
    return [100 + rng.standard_normal(3000), rng.uniform(1, 5, 500), 10 * np.arange(1, 801.0)]


def test_lengths_and_reproducible():
    pool = _pool()
    mixes = tsmixup(pool, 50, np.random.default_rng(1), min_length=128, max_length=2048)
    again = tsmixup(pool, 50, np.random.default_rng(1), min_length=128, max_length=2048)
    assert len(mixes) == 50
    for m, a in zip(mixes, again, strict=True):
        np.testing.assert_array_equal(m, a)
        # l ~ U{128..2048}, clipped to the shortest chosen series (500 or 800 points)
        assert 128 <= m.size <= 2048 or m.size in (500, 800)
        assert np.isfinite(m).all()
    assert len({m.size for m in mixes}) > 5


def test_single_series_is_mean_abs_scaled_window():
    x = np.arange(1.0, 201.0)
    (mix,) = tsmixup([x], 1, np.random.default_rng(2), k_max=1, min_length=50, max_length=50)
    assert mix.size == 50
    # k = 1: the Dirichlet weight is 1 and the mix is a window divided by its mean |value|
    assert np.abs(mix).mean() == pytest.approx(1.0)
    matches = [
        s for s in range(151) if np.allclose(mix, x[s : s + 50] / np.abs(x[s : s + 50]).mean())
    ]
    assert len(matches) == 1


def test_mix_is_convex_combination_of_scaled_windows():
    # constant series scale to exactly 1 (or -1): any convex mix of them equals the weights' sum
    pool = [np.full(300, 7.0), np.full(300, 0.5), np.full(300, 1e6)]
    for m in tsmixup(pool, 20, np.random.default_rng(3), min_length=128, max_length=256):
        np.testing.assert_allclose(m, 1.0)
    mixes = tsmixup(
        [np.full(300, 2.0), np.full(300, -3.0)], 200, np.random.default_rng(4), k_max=3,
        min_length=128, max_length=128,
    )
    values = np.array([m[0] for m in mixes])
    assert np.all(values >= -1.0 - 1e-12) and np.all(values <= 1.0 + 1e-12)
    assert np.ptp(values) > 0.5  # genuinely mixed, not always one series
    assert any(np.ptp(m) == 0 for m in mixes)


def test_zero_series_scale_is_one():
    np.testing.assert_array_equal(mean_abs_scale(np.zeros(5)), np.zeros(5))
    np.testing.assert_allclose(mean_abs_scale(np.array([1.0, -3.0])), [0.5, -1.5])


def test_short_series_clip_and_floor():
    pool = [np.arange(1.0, 41.0), np.arange(1.0, 11.0)]  # 10 points < floor 16: dropped
    mixes = tsmixup(pool, 10, np.random.default_rng(5))
    assert all(m.size == 40 for m in mixes)
    with pytest.raises(ValueError, match="min_series_length"):
        tsmixup([np.arange(10.0)], 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least one series"):
        tsmixup([], 1, np.random.default_rng(0))
    with pytest.raises(ValueError):
        tsmixup(pool, 1, np.random.default_rng(0), min_length=200, max_length=100)
    with pytest.raises(ValueError):
        tsmixup(pool, 1, np.random.default_rng(0), alpha=0)


def test_weights_select_series():
    pool = [np.full(200, 1.0), np.linspace(1, 2, 200)]
    mixes = tsmixup(pool, 10, np.random.default_rng(6), weights=[1.0, 0.0], max_length=150)
    for m in mixes:
        np.testing.assert_allclose(m, 1.0)
    with pytest.raises(ValueError, match="weights"):
        tsmixup(pool, 1, np.random.default_rng(0), weights=[1.0])
