"""Data, folds and preprocessing of the softshape room, including refusals of bad input."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.softshape.ucr_data import (
    build_dataset,
    fill_and_normalise,
    load_ucr,
    make_cbf,
    make_folds,
    nan_pad,
)


def _toy(n_per_class=(30, 30, 40), T=20, seed=0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.full(k, str(c)) for c, k in enumerate(n_per_class)])
    X = rng.normal(size=(len(y), T))
    half = len(y) // 2
    order = rng.permutation(len(y))
    tr, te = order[:half], order[half:]
    return build_dataset("toy", X[tr], y[tr], X[te], y[te])


def test_cv_folds_are_disjoint_cover_everything_and_are_stratified():
    data = _toy()
    folds = make_folds(data, "cv", 5, [0, 1, 2, 3, 4], seed=0)
    tests = np.concatenate([f.test for f in folds])
    assert sorted(tests.tolist()) == list(range(len(data.y)))  # each sample tested once
    n = len(data.y)
    for f in folds:
        assert not set(f.train) & set(f.val) and not set(f.train) & set(f.test)
        assert not set(f.val) & set(f.test)
        assert len(f.train) + len(f.val) + len(f.test) == n
        assert len(f.train) / n == pytest.approx(0.6, abs=0.02)
        assert len(f.val) / n == pytest.approx(0.2, abs=0.02)
        for part in (f.train, f.val, f.test):  # class shares within 5 points of the whole
            shares = np.bincount(data.y[part], minlength=3) / len(part)
            np.testing.assert_allclose(shares, [0.3, 0.3, 0.4], atol=0.05)
    again = make_folds(data, "cv", 5, [2], seed=0)[0]
    assert np.array_equal(again.test, folds[2].test)  # same seed, same folds for all methods


def test_original_split_keeps_the_ucr_test_part():
    data = _toy()
    (fold,) = make_folds(data, "original", 5, [0], seed=0)
    assert np.array_equal(fold.test, np.flatnonzero(data.original_test))
    assert len(fold.val) == pytest.approx(len(fold.train) / 3, abs=2)


def test_znorm_constant_series_and_no_leakage_of_test_values():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(6, 10))
    X[4] = 7.0
    X[0, 3] = X[5, 2] = np.nan
    train = np.array([0, 1, 2, 3])
    out = fill_and_normalise(X, train)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[[0, 1, 2, 3, 5]].mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(out[[0, 1, 2, 3, 5]].std(axis=1), 1, atol=1e-12)
    assert np.all(out[4] == 0)
    filled = X.copy()
    filled[0, 3] = np.nanmean(X[train, 3])  # training-fold column mean
    expected0 = (filled[0] - filled[0].mean()) / filled[0].std()
    np.testing.assert_allclose(out[0], expected0)
    X2 = X.copy()
    X2[4:] = rng.normal(size=(2, 10)) * 100  # change the test rows only
    X2[5, 2] = np.nan
    np.testing.assert_array_equal(fill_and_normalise(X2, train)[train], out[train])
    allnan = X.copy()
    allnan[:, 5] = np.nan
    assert np.isfinite(fill_and_normalise(allnan, train)).all()  # all-NaN column -> 1e-6


def test_variable_length_series_are_nan_padded():
    X, variable = nan_pad([np.ones(3), np.arange(5.0)])
    assert variable and X.shape == (2, 5) and np.isnan(X[0, 3:]).all()
    with pytest.raises(ValueError, match="empty"):
        nan_pad([np.ones(3), np.array([])])


def test_bad_data_is_refused_with_clear_errors():
    X = np.random.default_rng(0).normal(size=(8, 12))
    y = np.array(["a", "b"] * 4)
    with pytest.raises(ValueError, match="different channel counts"):
        build_dataset("mixed", X.reshape(8, 1, 12).repeat(3, 1), y,
                      X[:2].reshape(2, 1, 12).repeat(2, 1), y[:2])
    with pytest.raises(ValueError, match="1 class"):
        build_dataset("one", X, np.array(["a"] * 8), X[:2], np.array(["a", "a"]))
    with pytest.raises(ValueError, match=r"test classes \['c'\] never occur"):
        build_dataset("unseen", X, y, X[:2], np.array(["a", "c"]))
    bad = X.copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match="all NaN"):
        build_dataset("nan", bad, y, X[:2], y[:2])
    bad[2] = np.inf
    with pytest.raises(ValueError, match="inf"):
        build_dataset("inf", bad, y, X[:2], y[:2])
    with pytest.raises(ValueError, match="empty train"):
        build_dataset("empty", X[:0], y[:0], X[:2], y[:2])
    with pytest.raises(ValueError, match="non-empty"):
        fill_and_normalise(np.zeros((0, 5)), np.array([0]))


def test_shipped_ucr_sets_load_offline_and_unshipped_ones_are_refused():
    gp = load_ucr("GunPoint")
    assert gp.X.shape == (200, 150) and int(gp.original_test.sum()) == 150
    assert gp.n_classes == 2 and not np.isnan(gp.X).any()
    with pytest.raises(ValueError, match="not shipped"):
        load_ucr("Coffee")
    wii = load_ucr("PickupGestureWiimoteZ")  # variable length -> NaN-padded
    assert wii.variable_length and np.isnan(wii.X).any()
    (fold,) = make_folds(wii, "original", 5, [0], 0)
    assert np.isfinite(fill_and_normalise(wii.X, fold.train)).all()


def test_cbf_has_balanced_classes_and_true_windows():
    data = make_cbf(90, 128, np.random.default_rng(0))
    assert np.bincount(data.y).tolist() == [30, 30, 30]
    a, b = data.windows.T
    assert (a >= 16).all() and (a <= 32).all() and (b - a >= 32).all() and (b <= 127).all()
    t = np.arange(128)
    inside = np.array([x[(t >= lo) & (t <= hi)].mean() for x, (lo, hi) in
                       zip(data.X, data.windows, strict=True)])
    assert inside[data.y == 0].mean() > 4  # cylinder: plateau of height 6 + eta
    with pytest.raises(ValueError, match=r"cbf\.n"):
        make_cbf(3, 128, np.random.default_rng(0))


def test_multichannel_sets_load_as_n_c_t_and_are_filled_and_normalised_per_channel():
    bm = load_ucr("BasicMotions")  # UEA set shipped inside aeon: 6 channels, 40/40, T 100
    assert bm.X.shape == (80, 6, 100) and bm.n_channels == 6 and bm.n_classes == 4
    assert int(bm.original_test.sum()) == 40 and not bm.variable_length
    (fold,) = make_folds(bm, "original", 5, [0], 0)
    Z = fill_and_normalise(bm.X, fold.train)
    np.testing.assert_allclose(Z.mean(axis=-1), 0, atol=1e-6)
    assert np.all(np.isclose(Z.std(axis=-1), 1, atol=1e-6) | np.isclose(Z.std(axis=-1), 0))
    jv = load_ucr("JapaneseVowels")  # 12 channels, variable length 7..29 -> NaN-padded
    assert jv.X.ndim == 3 and jv.X.shape[1] == 12 and jv.variable_length
    assert np.isnan(jv.X).any()
    (fold,) = make_folds(jv, "original", 5, [0], 0)
    assert np.isfinite(fill_and_normalise(jv.X, fold.train)).all()


def test_multichannel_nan_fill_uses_training_means_of_each_channel_and_step():
    X = np.arange(2 * 2 * 3, dtype=float).reshape(2, 2, 3) + 1.0
    X = np.concatenate([X, np.full((1, 2, 3), np.nan)])  # series 2: all NaN, filled
    X[2, 1, 0] = 100.0
    out = fill_and_normalise(X, np.array([0, 1]))
    filled = np.array(X)
    filled[2, 0] = X[:2, 0].mean(axis=0)
    filled[2, 1, 1:] = X[:2, 1, 1:].mean(axis=0)
    z = (filled - filled.mean(-1, keepdims=True)) / filled.std(-1, keepdims=True)
    np.testing.assert_allclose(out, z)


def test_ragged_multichannel_series_are_padded_on_the_time_axis():
    X, variable = nan_pad([np.ones((3, 4)), np.ones((3, 6))])
    assert variable and X.shape == (2, 3, 6) and np.isnan(X[0, :, 4:]).all()
    assert not np.isnan(X[1]).any()
