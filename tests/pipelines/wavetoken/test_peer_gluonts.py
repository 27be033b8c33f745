"""WQL, MASE and seasonality of the wavetoken pipeline against gluonts itself.

The reference is the installed gluonts 0.17 (the ``peers`` extra) used as the Chronos benchmark
uses it (chronos-forecasting ``scripts/evaluation/evaluate.py``): a ``ListDataset`` split with
``split(offset=-H).generate_instances(H)``, ``SampleForecast`` objects and
``evaluate_forecasts(..., metrics=[MASE(), MeanWeightedSumQuantileLoss(levels)])`` with the
seasonality gluonts derives from each series' start period. gluonts stores targets as float32
(``ListDataset``) and averages the seasonal error in float32, so every input here is float32-exact
(:func:`f32`): both sides then see the same numbers. Ours: ``quantiles_from_samples``
-> ``weighted_quantile_loss`` and ``mase`` with the 0.5 quantile, and the pipeline's
``evaluation.score_forecasts`` on the same samples. Every comparison asserts a relative
difference <= 1e-6.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
import pytest

gluonts_split = pytest.importorskip("gluonts.dataset.split")

from gluonts.dataset.common import ListDataset  # noqa: E402
from gluonts.ev.metrics import MASE, MeanWeightedSumQuantileLoss  # noqa: E402
from gluonts.model.evaluation import evaluate_forecasts  # noqa: E402
from gluonts.model.forecast import SampleForecast  # noqa: E402
from gluonts.time_feature import get_seasonality  # noqa: E402

from icml25.pipelines.wavetoken import evaluation  # noqa: E402
from icml25.pipelines.wavetoken import metrics as fm  # noqa: E402
from icml25.pipelines.wavetoken.frames import EvalSet, quantiles_to_frame  # noqa: E402
from icml25.pipelines.wavetoken.real_data import load_dataset  # noqa: E402

LEVELS = list(fm.QUANTILE_LEVELS)
RTOL = 1e-6


def f32(values):
    """Round to float32 and back (gluonts' ``ListDataset`` keeps float32 targets)."""
    if isinstance(values, list):
        return [f32(v) for v in values]
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def rel_diff(ours: float, ref: float) -> float:
    return abs(ours - ref) / abs(ref)


def gluonts_scores(
    series: list[np.ndarray], horizon: int, samples: np.ndarray, freq: str, levels=LEVELS
) -> tuple[float, float]:
    """(WQL, MASE) of sample paths [n, S, H] by gluonts; series = history + future."""
    start = pd.Period("2001-01-01 00:00", freq=freq)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas deprecation notes for 'M', 'H', 'Y' ...
        dataset = ListDataset(
            [{"start": start, "target": s, "item_id": str(i)} for i, s in enumerate(series)],
            freq=freq,
        )
        _, template = gluonts_split.split(dataset, offset=-horizon)
        test_data = template.generate_instances(prediction_length=horizon, windows=1)
        forecasts = [
            SampleForecast(
                samples=samples[i],
                start_date=entry["start"] + len(entry["target"]),
                item_id=entry["item_id"],
            )
            for i, entry in enumerate(test_data.input)
        ]
        table = evaluate_forecasts(
            forecasts,
            test_data=test_data,
            metrics=[MASE(), MeanWeightedSumQuantileLoss(quantile_levels=levels)],
        )
    return (
        float(table["mean_weighted_sum_quantile_loss"].iloc[0]),
        float(table["MASE[0.5]"].iloc[0]),
    )


def our_scores(
    series: list[np.ndarray], horizon: int, samples: np.ndarray, freq: str, levels=LEVELS
) -> tuple[float, float]:
    histories = [s[:-horizon] for s in series]
    y = np.stack([s[-horizon:] for s in series])
    q = fm.quantiles_from_samples(samples, levels)
    median = q[:, levels.index(0.5), :]
    return (
        fm.weighted_quantile_loss(y, q, levels),
        fm.mase(y, median, histories, fm.seasonality(freq)),
    )


def pipeline_scores(
    series: list[np.ndarray], horizon: int, samples: np.ndarray, freq: str
) -> tuple[float, float]:
    """The same through the pipeline's forecast table and ``evaluation.score_forecasts``."""
    eval_set = EvalSet(
        "peer", "zero_shot", fm.seasonality(freq), horizon,
        [s[:-horizon] for s in series], np.stack([s[-horizon:] for s in series]),
    )
    table = quantiles_to_frame(
        "model", 0, "peer", fm.quantiles_from_samples(samples, LEVELS), LEVELS
    )
    scores = evaluation.score_forecasts([eval_set], [table], LEVELS)
    return float(scores["wql"].iloc[0]), float(scores["mase"].iloc[0])


def random_problem(seed: int, n: int, n_samples: int, horizon: int, season: int):
    """Series of varied lengths (some histories shorter than, or exactly, one season; one
    constant history) and noisy sample paths around a perturbed truth."""
    rng = np.random.default_rng(seed)
    series = []
    for i in range(n):
        length = int(rng.integers(max(2, season // 2), 4 * season + 40)) + horizon
        if i == 1:
            length = max(2, season // 2) + horizon  # history shorter than the season (-> s = 1)
        if i == 2:
            length = season + horizon  # history exactly one season long (no seasonal pair)
        level = rng.uniform(-50, 200)
        t = np.arange(length)
        y = level + 10 * np.sin(2 * np.pi * t / max(season, 2)) + np.cumsum(rng.normal(size=length))
        if i == 3:
            y[:-horizon] = 7.0  # constant history: seasonal error 0
        series.append(f32(y))
    truth = np.stack([s[-horizon:] for s in series])
    spread = rng.uniform(0.5, 5.0, size=(n, 1, 1))
    samples = truth[:, None, :] + rng.normal(0.3, 1.0, size=(n, n_samples, horizon)) * spread
    return series, f32(samples)


FREQS = ["M", "Q", "W", "D", "h", "30min", "B", "Y"]


@pytest.mark.parametrize(
    "freq",
    ["M", "ME", "MS", "Q", "QE", "QS", "QS-DEC", "W", "W-SUN", "W-MON", "D", "H", "h", "2h",
     "3h", "30min", "15min", "15T", "5min", "7min", "T", "min", "S", "s", "10s", "B", "2B", "Y",
     "YE", "YS", "A", "A-DEC", "AS", "500ms", "ms", "us", "2D", "2W", "2M", "6M", "3ME", "2Q",
     "4Q", "8Q", "SM", "BME", "BQE", "bh"],
)
def test_seasonality_equals_gluonts(freq):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            expected = get_seasonality(freq)
        finally:
            logging.disable(logging.NOTSET)
    assert fm.seasonality(freq) == expected


@pytest.mark.parametrize("n_samples", [20, 100])
@pytest.mark.parametrize("horizon", [6, 8, 12, 48])
@pytest.mark.parametrize("freq", FREQS)
def test_wql_and_mase_equal_gluonts_on_random_sample_forecasts(freq, horizon, n_samples):
    season = get_seasonality(freq)
    seed = 1000 * FREQS.index(freq) + 10 * horizon + n_samples
    series, samples = random_problem(seed, 30, n_samples, horizon, season)
    ref_wql, ref_mase = gluonts_scores(series, horizon, samples, freq)
    wql, mase = our_scores(series, horizon, samples, freq)
    assert np.isfinite(ref_wql) and np.isfinite(ref_mase)
    assert rel_diff(wql, ref_wql) <= RTOL
    assert rel_diff(mase, ref_mase) <= RTOL


@pytest.mark.parametrize("freq", ["M", "h", "Y"])
def test_pipeline_scoring_equals_gluonts(freq):
    series, samples = random_problem(11, 25, 100, 12, get_seasonality(freq))
    ref_wql, ref_mase = gluonts_scores(series, 12, samples, freq)
    wql, mase = pipeline_scores(series, 12, samples, freq)
    assert rel_diff(wql, ref_wql) <= RTOL and rel_diff(mase, ref_mase) <= RTOL


def test_chronos_levels_from_arange_pick_the_same_order_statistics():
    """Chronos passes np.arange(0.1, 1.0, 0.1) (0.30000000000000004 ...); same scores."""
    series, samples = random_problem(5, 20, 20, 8, 12)
    chronos_levels = [float(q) for q in np.arange(0.1, 1.0, 0.1)]
    ref_wql, ref_mase = gluonts_scores(series, 8, samples, "M", levels=chronos_levels)
    wql, mase = our_scores(series, 8, samples, "M")
    assert rel_diff(wql, ref_wql) <= RTOL and rel_diff(mase, ref_mase) <= RTOL


def test_short_histories_fall_back_like_gluonts():
    """Histories shorter than the season use lag 1; one season long, constant or a single point:
    gluonts masks the series and mase skips it — the same value."""
    rng = np.random.default_rng(3)
    horizon, freq = 6, "M"
    lengths = [3, 5, 11, 12, 13, 30, 1, 12]
    series = [f32(np.cumsum(rng.normal(size=h + horizon)) + 20) for h in lengths]
    series[-1][:-horizon] = 4.0  # constant history
    samples = f32(np.stack([s[-horizon:] for s in series])[:, None, :] + rng.normal(
        size=(len(series), 20, horizon)
    ))
    ref = gluonts_scores(series, horizon, samples, freq)
    ours = our_scores(series, horizon, samples, freq)
    assert rel_diff(ours[0], ref[0]) <= RTOL and rel_diff(ours[1], ref[1]) <= RTOL
    # the lag actually used: 1 below the season, undefined at exactly the season
    assert fm.seasonal_error(series[0][:-horizon], 12) == fm.seasonal_error(series[0][:-horizon], 1)
    assert np.isnan(fm.seasonal_error(series[3][:-horizon], 12))
    assert not np.isnan(fm.seasonal_error(series[4][:-horizon], 12))


def test_nan_in_histories_is_masked_like_gluonts():
    rng = np.random.default_rng(4)
    horizon, freq = 8, "Q"
    series = [f32(np.cumsum(rng.normal(size=60 + horizon))) for _ in range(10)]
    for s in series[:5]:
        s[rng.choice(60, size=9, replace=False)] = np.nan
    samples = f32(np.stack([s[-horizon:] for s in series])[:, None, :] + rng.normal(
        size=(10, 100, horizon)
    ))
    ref = gluonts_scores(series, horizon, samples, freq)
    ours = our_scores(series, horizon, samples, freq)
    assert rel_diff(ours[0], ref[0]) <= RTOL and rel_diff(ours[1], ref[1]) <= RTOL


@pytest.mark.parametrize("name", ["m1_yearly", "airline", "uschange", "taylor"])
def test_real_datasets_with_random_walk_samples_equal_gluonts(name):
    data = load_dataset(name)
    series = f32(data.series)
    h = data.horizon
    rng = np.random.default_rng(0)
    samples = []
    for s in series:  # random walk from the last observation, steps like the history's
        history = s[:-h]
        steps = np.diff(history[-200:]).std() if history.size > 2 else 1.0
        samples.append(history[-1] + np.cumsum(rng.normal(size=(100, h)) * steps, axis=1))
    samples = f32(np.stack(samples))
    freq = data.freq
    assert fm.seasonality(data.freq) == get_seasonality(freq) == data.season
    ref = gluonts_scores(series, h, samples, freq)
    ours = our_scores(series, h, samples, freq)
    pipe = pipeline_scores(series, h, samples, freq)
    for value in (ours, pipe):
        assert rel_diff(value[0], ref[0]) <= RTOL and rel_diff(value[1], ref[1]) <= RTOL


def test_m1_yearly_seasonal_naive_point_forecast_equals_gluonts():
    """A point forecast as S identical samples: WQL is then WAPE, MASE the Chronos anchor."""
    data = load_dataset("m1_yearly")
    series = f32(data.series)
    h = data.horizon
    naive = np.stack([np.full(h, s[:-h][-1]) for s in series])
    samples = np.repeat(naive[:, None, :], 20, axis=1)
    ref = gluonts_scores(series, h, samples, "Y")
    ours = our_scores(series, h, samples, "Y")
    assert rel_diff(ours[0], ref[0]) <= RTOL and rel_diff(ours[1], ref[1]) <= RTOL


def test_linear_interpolated_quantiles_would_not_match():
    """The comparison is sensitive: np.quantile's linear interpolation misses gluonts by far
    more than the tolerance (the disagreement the order-statistic rule removed)."""
    series, samples = random_problem(9, 30, 20, 12, 12)
    ref_wql, ref_mase = gluonts_scores(series, 12, samples, "M")
    y = np.stack([s[-12:] for s in series])
    linear = np.moveaxis(np.quantile(samples, LEVELS, axis=1), 0, 1)
    wql = fm.weighted_quantile_loss(y, linear, LEVELS)
    mase = fm.mase(y, linear[:, 4], [s[:-12] for s in series], 12)
    assert rel_diff(wql, ref_wql) > 100 * RTOL or rel_diff(mase, ref_mase) > 100 * RTOL
