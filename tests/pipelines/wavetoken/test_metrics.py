"""Unit tests of the wavetoken forecast metrics (docs/papers/wavetoken.md, "Metrics")."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest

from icml25.pipelines.wavetoken.metrics import (
    QUANTILE_LEVELS,
    aggregate_relative,
    average_rank,
    mase,
    quantiles_from_samples,
    seasonal_error,
    seasonality,
    weighted_quantile_loss,
)

LEVELS = list(QUANTILE_LEVELS)


def point_as_quantiles(point: np.ndarray, n_levels: int = 9) -> np.ndarray:
    return np.repeat(point[:, None, :], n_levels, axis=1)


# --------------------------------------------------------------------------------- quantiles
def test_quantiles_from_samples_are_gluonts_order_statistics():
    samples = np.arange(1.0, 6.0)[None, :, None].repeat(2, axis=2)  # [1, 5, 2]
    q = quantiles_from_samples(samples, [0.1, 0.5, 0.9])
    assert q.shape == (1, 3, 2)
    # ranks round(4 q) = 0, 2, 4 of the sorted samples (linear interpolation gave 1.4, 3.0, 4.6)
    np.testing.assert_array_equal(q[0, :, 0], [1.0, 3.0, 5.0])
    # ties at half ranks round to even, as np.round / Python's round: S = 6, (S-1) q = 0.5, 2.5
    six = np.array([60.0, 10.0, 50.0, 20.0, 40.0, 30.0])[None, :, None]
    np.testing.assert_array_equal(quantiles_from_samples(six, [0.1, 0.5])[0, :, 0], [10.0, 30.0])
    # against an element-by-element rule in plain Python (sorted + round), unsorted samples
    rng = np.random.default_rng(0)
    for n_samples in (20, 21, 100):
        s = rng.normal(size=(3, n_samples, 5))
        got = quantiles_from_samples(s)
        for i in range(3):
            for t in range(5):
                column = sorted(float(v) for v in s[i, :, t])
                expected = [column[round((n_samples - 1) * level)] for level in LEVELS]
                assert got[i, :, t].tolist() == expected
        # every value is one of the samples (no interpolation)
        assert np.all((got[:, :, None, :] == s[:, None, :, :]).any(axis=2))


def test_quantiles_from_samples_rejects_bad_input():
    with pytest.raises(ValueError, match="samples"):
        quantiles_from_samples(np.ones((2, 3)))
    with pytest.raises(ValueError, match="samples"):
        quantiles_from_samples(np.full((1, 2, 3), np.nan))
    with pytest.raises(ValueError, match="levels"):
        quantiles_from_samples(np.ones((1, 2, 3)), [0.0, 0.5])


# ----------------------------------------------------------------------------------- WQL
def test_wql_known_answers():
    y = np.array([[1.0, 2.0]])
    assert weighted_quantile_loss(y, point_as_quantiles(y), LEVELS) == 0.0
    zeros = np.zeros((1, 9, 2))
    assert weighted_quantile_loss(y, zeros, LEVELS) == pytest.approx(1.0)  # mean_q 2q
    # single level by hand: 2 * |(2 - 1) * (0 - 0.5)| / 2 = 0.5
    assert weighted_quantile_loss([[2.0]], [[[1.0]]], [0.5]) == pytest.approx(0.5)
    # over-forecast at q = 0.9: 2 * |(1 - 3) * (1 - 0.9)| / 1 = 0.4
    assert weighted_quantile_loss([[1.0]], [[[3.0]]], [0.9]) == pytest.approx(0.4)


def test_wql_of_a_point_forecast_is_wape():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(7, 12)) * 5 + 3
    point = y + rng.normal(size=y.shape)
    wape = np.abs(y - point).sum() / np.abs(y).sum()
    assert weighted_quantile_loss(y, point_as_quantiles(point), LEVELS) == pytest.approx(wape)


def test_wql_sums_over_the_dataset_before_dividing():
    y = np.array([[1.0], [100.0]])
    fc = np.array([[[0.0]], [[100.0]]])
    # per-series ratios would be (1, 0) -> mean 0.5; dataset-level: 2*0.5*1 / 101
    assert weighted_quantile_loss(y, fc, [0.5]) == pytest.approx(1.0 / 101)


def test_wql_matches_an_explicit_loop():
    rng = np.random.default_rng(2)
    y = rng.normal(size=(3, 5))
    fc = np.sort(rng.normal(size=(3, 9, 5)), axis=1)
    total = 0.0
    for k, q in enumerate(LEVELS):
        num = 0.0
        for i in range(3):
            for t in range(5):
                e = y[i, t] - fc[i, k, t]
                num += 2 * abs(e * ((y[i, t] <= fc[i, k, t]) - q))
        total += num / np.abs(y).sum()
    assert weighted_quantile_loss(y, fc, LEVELS) == pytest.approx(total / 9)


def test_wql_rejects_bad_input():
    y = np.ones((2, 3))
    fc = np.ones((2, 9, 3))
    with pytest.raises(ValueError, match="q_forecast"):
        weighted_quantile_loss(y, np.ones((2, 8, 3)), LEVELS)
    with pytest.raises(ValueError, match="y contains NaN"):
        weighted_quantile_loss(np.array([[1.0, np.nan, 1.0], [1, 1, 1]]), fc, LEVELS)
    with pytest.raises(ValueError, match="y is empty"):
        weighted_quantile_loss(np.ones((0, 3)), np.ones((0, 9, 3)), LEVELS)
    with pytest.raises(ValueError, match="q_forecast contains NaN"):
        weighted_quantile_loss(y, np.full((2, 9, 3), np.nan), LEVELS)
    with pytest.raises(ValueError, match="levels"):
        weighted_quantile_loss(y, fc, [1.5] * 9)
    with pytest.warns(UserWarning, match="sum \\|y\\| = 0"):
        assert math.isnan(weighted_quantile_loss(np.zeros((2, 3)), fc, LEVELS))


# ---------------------------------------------------------------------------------- MASE
def test_mase_known_answer():
    assert mase([[5.0]], [[6.0]], [np.array([1.0, 2.0, 3.0, 4.0])], season=1) == 1.0


def test_mase_seasonal_lag_and_fallback():
    hist = np.array([1.0, 3.0, 2.0, 4.0, 3.0, 5.0])
    assert seasonal_error(hist, 2) == 1.0
    assert mase([[7.0]], [[5.0]], [hist], season=2) == 2.0
    short = np.array([1.0, 2.0, 4.0])
    assert seasonal_error(short, 12) == 1.5  # s > len -> s = 1 (gluonts)
    assert seasonal_error(short, 4) == 1.5
    assert math.isnan(seasonal_error(short, 3))  # s == len: no seasonal pair (gluonts masks it)
    assert seasonal_error(short, 2) == 3.0
    assert mase([[7.0], [4.0]], [[5.0], [5.0]], [hist, short], season=3) == pytest.approx(
        2.0 / seasonal_error(hist, 3)
    )  # the one-season history is skipped
    with pytest.raises(ValueError, match="season"):
        seasonal_error(short, 0)
    assert seasonal_error(np.array([1.0, np.nan, 3.0, 6.0]), 1) == 3.0  # NaN pairs dropped


def test_mase_is_a_mean_of_per_series_ratios_and_skips_zero_denominators(caplog):
    y = np.array([[2.0, 2.0], [10.0, 10.0], [0.0, 0.0]])
    median = np.array([[1.0, 1.0], [10.0, 14.0], [5.0, 5.0]])
    histories = [np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 4.0]), np.array([3.0, 3.0])]
    with caplog.at_level(logging.INFO, logger="icml25.pipelines.wavetoken.metrics"):
        value = mase(y, median, histories, season=1)
    assert value == pytest.approx((1.0 + 1.0) / 2)  # series 3 (flat history) skipped
    assert "skipped 1 of 3" in caplog.text


def test_mase_all_skipped_is_nan_with_warning():
    with pytest.warns(UserWarning, match="every series"):
        assert math.isnan(mase([[1.0]], [[2.0]], [np.array([4.0, 4.0, 4.0])], season=1))
    with pytest.warns(UserWarning, match="every series"):
        assert math.isnan(mase([[1.0]], [[2.0]], [np.array([4.0])], season=1))


def test_mase_rejects_bad_input():
    h = [np.arange(5.0)]
    with pytest.raises(ValueError, match="median shape"):
        mase([[1.0, 2.0]], [[1.0]], h, season=1)
    with pytest.raises(ValueError, match="histories has 1 series but y has 2"):
        mase(np.ones((2, 2)), np.ones((2, 2)), h, season=1)
    with pytest.raises(ValueError, match="season"):
        mase([[1.0]], [[1.0]], h, season=0)
    with pytest.raises(ValueError, match="y contains NaN"):
        mase([[np.nan]], [[1.0]], h, season=1)
    with pytest.raises(ValueError, match="y is empty"):
        mase(np.ones((0, 1)), np.ones((0, 1)), [], season=1)


# --------------------------------------------------------------------------- seasonality
@pytest.mark.parametrize(
    ("freq", "expected"),
    [
        ("h", 24),
        ("H", 24),
        ("2h", 12),
        ("5h", 1),
        ("30min", 48),
        ("30T", 48),
        ("15min", 96),
        ("min", 1440),
        ("s", 3600),
        ("D", 1),
        ("2D", 1),
        ("W", 1),
        ("W-SUN", 1),
        ("M", 12),
        ("ME", 12),
        ("MS", 12),
        ("Q", 4),
        ("QE-DEC", 4),
        ("QS", 4),
        ("Y", 1),
        ("A", 1),
        ("YE", 1),
        ("B", 5),
        ("not-a-frequency", 1),
    ],
)
def test_seasonality_follows_gluonts(freq, expected):
    assert seasonality(freq) == expected


def test_seasonality_rejects_non_strings():
    with pytest.raises(ValueError, match="freq"):
        seasonality("")


# --------------------------------------------------------------------------- aggregation
def test_seasonal_naive_against_itself_aggregates_to_one():
    rng = np.random.default_rng(3)
    season, h = 12, 12
    series = [
        np.sin(np.arange(120) * 2 * np.pi / 12) * 10 + 50 + rng.normal(size=120) for _ in range(5)
    ]
    histories = [s[:-h] for s in series]
    y = np.stack([s[-h:] for s in series])
    snaive = np.stack([hist[-season:][np.arange(h) % season] for hist in histories])
    np.testing.assert_array_equal(snaive[0], histories[0][-12:])  # repeats the last season
    scores = {
        "seasonal_naive": {
            "toy": weighted_quantile_loss(y, point_as_quantiles(snaive), LEVELS),
            "toy_mase": mase(y, snaive, histories, season),
        }
    }
    assert aggregate_relative(scores) == {"seasonal_naive": 1.0}


def test_aggregate_relative_geometric_mean_and_skips(caplog):
    scores = {
        "seasonal_naive": {"a": 2.0, "b": 1.0, "c": 0.0, "d": float("nan"), "e": 3.0},
        "model": {"a": 1.0, "b": 2.0, "c": 0.5, "d": 1.0, "f": 9.0},  # ratios 0.5, 2
        "better": {"a": 0.5, "b": 1.0},  # ratios 0.25, 1 -> 0.5
    }
    with caplog.at_level(logging.INFO, logger="icml25.pipelines.wavetoken.metrics"):
        out = aggregate_relative(scores)
    assert out["seasonal_naive"] == pytest.approx(1.0)
    assert out["model"] == pytest.approx(1.0)
    assert out["better"] == pytest.approx(0.5)
    assert "skips datasets" in caplog.text and "'c'" in caplog.text


def test_aggregate_relative_errors_and_empty_overlap():
    with pytest.raises(ValueError, match="baseline"):
        aggregate_relative({"model": {"a": 1.0}})
    with pytest.raises(ValueError, match="scores"):
        aggregate_relative({})
    with pytest.raises(ValueError, match="non-negative"):
        aggregate_relative({"seasonal_naive": {"a": 1.0}, "m": {"a": -1.0}})
    with pytest.warns(UserWarning, match="no dataset usable"):
        out = aggregate_relative({"seasonal_naive": {"a": 1.0}, "m": {"b": 1.0}})
    assert math.isnan(out["m"])
    assert aggregate_relative({"naive": {"a": 2.0}, "m": {"a": 1.0}}, baseline="naive")["m"] == 0.5


def test_average_rank_with_ties():
    scores = {
        "A": {"d1": 1.0, "d2": 2.0},
        "B": {"d1": 1.0, "d2": 3.0},
        "C": {"d1": 3.0, "d2": 1.0, "d3": 0.0},  # d3 not scored by everyone: skipped
    }
    assert average_rank(scores) == pytest.approx({"A": 1.75, "B": 2.25, "C": 2.0})


def test_average_rank_without_common_dataset_is_nan():
    with pytest.warns(UserWarning, match="no dataset"):
        out = average_rank({"A": {"d1": 1.0}, "B": {"d2": 1.0}})
    assert all(math.isnan(v) for v in out.values())


# ----------------------------------------------------------------- integration known answer
def test_naive_on_m1_yearly_matches_the_chronos_results():
    """Chronos anchor: naive (s = 1) on aeon's M1 yearly, last 6 points -> MASE 4.8943, WQL 0.2093."""
    aeon_datasets = pytest.importorskip("aeon.datasets")
    path = (
        Path(aeon_datasets.__file__).parent / "data" / "m1_yearly_dataset" / "m1_yearly_dataset.tsf"
    )
    if not path.exists():
        pytest.skip("aeon's M1 yearly file is not shipped with this aeon version")
    frame, _ = aeon_datasets.load_from_tsf_file(str(path))
    series = [np.asarray(v, dtype=np.float64) for v in frame["series_value"]]
    assert len(series) == 181
    h = 6
    histories = [s[:-h] for s in series]
    y = np.stack([s[-h:] for s in series])
    naive = np.stack([np.full(h, hist[-1]) for hist in histories])
    assert mase(y, naive, histories, seasonality("Y")) == pytest.approx(4.8943, abs=1e-4)
    wql = weighted_quantile_loss(y, point_as_quantiles(naive), LEVELS)
    assert wql == pytest.approx(0.2093, abs=1e-4)
