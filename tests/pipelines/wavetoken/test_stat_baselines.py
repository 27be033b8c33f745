"""Statistical baselines (the paper's local models) and the M1-yearly known answer."""

import numpy as np
import pytest

from icml25.pipelines.wavetoken.stat_baselines import (
    DEFAULT_LEVELS,
    interval_levels,
    level_keys,
    run_statsforecast,
    seasonal_naive_point,
)


def test_seasonal_naive_repeats_last_season():
    history = np.arange(1.0, 11.0)  # 1..10
    np.testing.assert_array_equal(seasonal_naive_point(history, 7, 4), [7, 8, 9, 10, 7, 8, 9])
    np.testing.assert_array_equal(seasonal_naive_point(history, 3, 1), [10, 10, 10])
    # season >= history length -> season 1
    np.testing.assert_array_equal(seasonal_naive_point(history, 2, 10), [10, 10])
    np.testing.assert_array_equal(seasonal_naive_point(history, 2, 12), [10, 10])


def test_point_models_match_statsforecast_and_put_every_quantile_on_the_point():
    from statsforecast.models import SeasonalNaive

    rng = np.random.default_rng(0)
    histories = [rng.normal(size=n).cumsum() for n in (30, 45, 5)]
    out = run_statsforecast(histories, 6, 12, models=("seasonal_naive", "naive"))
    assert set(out) == {"seasonal_naive", "naive"}
    for name in out:
        assert out[name].shape == (3, 9, 6)
        assert np.all(out[name] == out[name][:, :1, :])  # all quantiles equal
    for i, h in enumerate(histories[:2]):
        expected = SeasonalNaive(season_length=12).forecast(y=h, h=6)["mean"]
        np.testing.assert_allclose(out["seasonal_naive"][i, 0], expected)
    np.testing.assert_array_equal(out["seasonal_naive"][2, 0], np.full(6, histories[2][-1]))
    np.testing.assert_array_equal(out["naive"][:, 0, :], [[h[-1]] * 6 for h in histories])


def test_level_mapping():
    assert level_keys(DEFAULT_LEVELS) == [
        "lo-80", "lo-60", "lo-40", "lo-20", "mean", "hi-20", "hi-40", "hi-60", "hi-80"
    ]
    assert interval_levels(DEFAULT_LEVELS) == [20, 40, 60, 80]
    with pytest.raises(ValueError):
        level_keys([0.0, 0.5])


def test_auto_models_shapes_monotone_and_median_is_mean():
    from statsforecast.models import AutoETS

    t = np.arange(96.0)
    rng = np.random.default_rng(1)
    histories = [10 + np.sin(2 * np.pi * t / 12) + 0.1 * rng.standard_normal(96) + k for k in (0, 5)]
    out = run_statsforecast(histories, 12, 12, models=("auto_ets", "auto_arima", "auto_theta"))
    for name, fc in out.items():
        assert fc.shape == (2, 9, 12) and np.isfinite(fc).all()
        assert np.all(np.diff(fc, axis=1) >= 0), name  # quantiles never cross
        assert np.all(fc[:, -1] - fc[:, 0] > 0), name  # a real interval, not a point
        assert out.n_fallbacks[name] == 0
    direct = AutoETS(season_length=12).forecast(y=histories[0], h=12, level=[80])
    np.testing.assert_allclose(out["auto_ets"][0, 4], direct["mean"])
    np.testing.assert_allclose(out["auto_ets"][0, 0], direct["lo-80"])
    np.testing.assert_allclose(out["auto_ets"][0, 8], direct["hi-80"])
    # seasonal pattern is forecast: the 12-step forecast correlates with the last season
    assert np.corrcoef(out["auto_ets"][0, 4], histories[0][-12:])[0, 1] > 0.9


def test_failure_falls_back_to_seasonal_naive(caplog):
    histories = [np.array([1.0, 2.0, 3.0]), 10 + np.sin(np.arange(60.0))]
    with caplog.at_level("WARNING"):
        out = run_statsforecast(histories, 4, 4, models=("seasonal_naive", "auto_ets"))
    assert out.n_fallbacks["auto_ets"] == 1  # AutoETS cannot fit 3 points
    np.testing.assert_array_equal(out["auto_ets"][0], out["seasonal_naive"][0])
    np.testing.assert_array_equal(out["auto_ets"][0, :, 0], np.full(9, 3.0))  # s = 4 >= 3 -> 1
    assert "auto_ets failed on 1 of 2 series" in caplog.text


def test_parallel_equals_serial():
    from joblib import parallel_config

    rng = np.random.default_rng(2)
    histories = [rng.normal(size=40).cumsum() for _ in range(5)]
    serial = run_statsforecast(histories, 5, 1, models=("auto_theta",))
    # threads: checks the chunking and the order of results without the cost of new processes
    with parallel_config(backend="threading"):
        parallel = run_statsforecast(histories, 5, 1, models=("auto_theta",), n_jobs=2)
    np.testing.assert_allclose(serial["auto_theta"], parallel["auto_theta"])


def test_bad_input_raises():
    with pytest.raises(ValueError, match="unknown baseline"):
        run_statsforecast([np.ones(5)], 2, 1, models=("prophet",))
    with pytest.raises(ValueError, match="non-finite"):
        run_statsforecast([np.array([1.0, np.nan])], 2, 1)
    with pytest.raises(ValueError):
        run_statsforecast([np.ones(5)], 0, 1)


def test_m1_yearly_naive_known_answer():
    """Chronos results CSV: naive on aeon's M1 yearly (181 series, H 6, s 1) -> MASE 4.8943, WQL 0.2093."""
    from icml25.pipelines.wavetoken.metrics import mase, weighted_quantile_loss
    from icml25.pipelines.wavetoken.real_data import load_dataset, train_test_split

    ds = load_dataset("m1_yearly")
    assert (len(ds.series), ds.horizon, ds.season) == (181, 6, 1)
    _, test = train_test_split(ds)
    histories = [h for h, _ in test]
    y = np.stack([f for _, f in test])
    fc = run_statsforecast(histories, ds.horizon, ds.season, models=("naive",))["naive"]
    assert fc.shape == (181, 9, 6)
    assert weighted_quantile_loss(y, fc, DEFAULT_LEVELS) == pytest.approx(0.2093, abs=1e-4)
    assert mase(y, fc[:, 4, :], histories, ds.season) == pytest.approx(4.8943, abs=1e-4)
