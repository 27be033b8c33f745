"""Table conversions, metric aggregation and the round-trip check of the wavetoken pipeline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from icml25.core.params import ParameterError, validate_parameters
from icml25.pipelines.wavetoken import metrics as fm
from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.evaluation import score_series, summarise_metrics, unit_metrics
from icml25.pipelines.wavetoken.frames import (
    EvalSet,
    eval_sets_to_frame,
    frame_to_eval_sets,
    frame_to_quantiles,
    frame_to_series,
    quantiles_to_frame,
    series_to_frame,
)
from icml25.pipelines.wavetoken.params import WavetokenParams
from icml25.pipelines.wavetoken.roundtrip import synthesis_gain, tokenizer_roundtrip_report
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer


def test_series_frame_roundtrip_keeps_ragged_lengths():
    data = {"a": [np.arange(3.0), np.arange(5.0)], "b": [np.ones(2)]}
    frame = series_to_frame(data)
    assert len(frame) == 10
    back = frame_to_series(frame, "a")
    assert [len(x) for x in back] == [3, 5]
    np.testing.assert_array_equal(back[1], np.arange(5.0))
    with pytest.raises(ValueError, match="lacks columns"):
        frame_to_series(frame.drop(columns="t"))


def test_eval_set_and_quantile_tables_roundtrip():
    s = EvalSet("x", "zero_shot", 4, 2, [np.arange(6.0), np.arange(9.0)],
                np.array([[1.0, 2.0], [3.0, 4.0]]))
    (back,) = frame_to_eval_sets(eval_sets_to_frame([s]))
    assert (back.name, back.group, back.season, back.horizon) == ("x", "zero_shot", 4, 2)
    np.testing.assert_array_equal(back.futures, s.futures)
    np.testing.assert_array_equal(back.histories[1], s.histories[1])
    levels = [0.1, 0.5, 0.9]
    q = np.random.default_rng(0).normal(size=(2, 3, 2))
    table = quantiles_to_frame("m", 0, "x", q, levels)
    np.testing.assert_array_equal(frame_to_quantiles(table, levels), q)
    with pytest.raises(ValueError, match="missing"):
        frame_to_quantiles(table.iloc[1:], levels)
    with pytest.raises(ValueError, match="empty"):
        frame_to_eval_sets(eval_sets_to_frame([s]).iloc[:0])


def _scores():
    rows = []
    for variant, factor in (("seasonal_naive", 1.0), ("a", 0.5), ("b", 2.0)):
        for seed in ((0, 1) if variant != "seasonal_naive" else (0,)):
            for dataset, group in (("d1", "in_domain"), ("d2", "zero_shot"),
                                   ("kernelsynth", "kernelsynth"), ("chirps", "stress")):
                base = {"d1": 0.2, "d2": 0.4, "kernelsynth": 1.0, "chirps": 0.8}[dataset]
                value = base * factor * (1 + 0.1 * seed)
                rows.append({"variant": variant, "seed": seed, "dataset": dataset,
                             "group": group, "wql": value, "mase": 2 * value})
    return pd.DataFrame(rows)


def test_summary_is_geometric_mean_of_ratios_with_identical_names():
    out = summarise_metrics(_scores())
    assert out["seasonal_naive"]["agg_rel_wql_real"] == [pytest.approx(1.0)]
    assert out["a"]["agg_rel_wql_real"] == [pytest.approx(0.5), pytest.approx(0.55)]
    assert out["b"]["rel_mase_chirps"] == [pytest.approx(2.0), pytest.approx(2.2)]
    assert out["a"]["agg_rel_wql_in_domain"][0] == pytest.approx(0.5)
    assert out["a"]["avg_rank_wql_real"] == [1.0] and out["b"]["avg_rank_wql_real"] == [3.0]
    names = {frozenset(m) for m in out.values()}
    assert len(names) == 1


def _series_scores(shares):
    return pd.DataFrame([{"variant": v, "seed": seed, "dataset": "chirps", "group": "stress",
                          "series": i, "wql_share": x}
                         for v, per_seed in shares.items() for seed, row in enumerate(per_seed)
                         for i, x in enumerate(row)])


def test_unit_metrics_are_log_ratios_per_dataset_and_shares_per_series():
    scores = _scores()
    shares = {"seasonal_naive": [[0.6, 1.0]], "a": [[0.2, 0.6], [0.3, 0.5]]}
    out = unit_metrics(scores, _series_scores(shares))
    logs = out["a"]["log_rel_wql_real"]
    assert set(logs) == {"d1", "d2"}  # real datasets only
    assert logs["d1"] == [pytest.approx(np.log(0.5)), pytest.approx(np.log(0.55))]
    # the mean over datasets of the log ratios is the log of the aggregate, seed by seed
    agg = summarise_metrics(scores)["a"]["agg_rel_wql_real"]
    for seed in (0, 1):
        assert np.mean([v[seed] for v in logs.values()]) == pytest.approx(np.log(agg[seed]))
    assert out["seasonal_naive"]["log_rel_mase_real"]["d2"] == [pytest.approx(0.0)]
    # series shares over seasonal naive's set WQL (0.8 for chirps in _scores)
    by_series = out["a"]["rel_wql_chirps_by_series"]
    assert by_series == {"series_0": [pytest.approx(0.25), pytest.approx(0.375)],
                         "series_1": [pytest.approx(0.75), pytest.approx(0.625)]}


def test_series_shares_average_to_the_set_wql():
    rng = np.random.default_rng(3)
    levels = [0.1, 0.5, 0.9]
    futures = rng.normal(5.0, 1.0, size=(4, 6))
    s = EvalSet("chirps", "stress", 1, 6, [np.arange(10.0)] * 4, futures)
    real = EvalSet("d1", "zero_shot", 1, 6, [np.arange(10.0)] * 4, futures)
    q = np.sort(rng.normal(5.0, 1.0, size=(4, 3, 6)), axis=1)
    tables = [pd.concat([quantiles_to_frame("m", 0, "chirps", q, levels),
                         quantiles_to_frame("m", 0, "d1", q, levels)])]
    out = score_series([s, real], tables, levels)
    assert set(out["dataset"]) == {"chirps"} and len(out) == 4  # synthetic sets only
    assert out["wql_share"].mean() == pytest.approx(fm.weighted_quantile_loss(futures, q, levels))


def test_synthesis_gain_known_values():
    assert synthesis_gain("haar", 1, 64) == pytest.approx(np.sqrt(2), abs=1e-3)
    assert synthesis_gain("bior2.2", 1, 64) == pytest.approx(2.121, abs=1e-3)
    assert synthesis_gain("db4", 1, 64) == pytest.approx(1.865, abs=1e-3)


@pytest.mark.parametrize("tokenizer", [WaveletTokenizer(vocab_size=1024),
                                       WaveletTokenizer(vocab_size=64, wavelet="db4", level=2),
                                       MeanScaleUniformBins(vocab_size=1024)])
def test_roundtrip_error_within_bound(tokenizer):
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.normal(size=(40, 64)), axis=1) + 10 * np.sin(np.arange(64) / 5)
    report = tokenizer_roundtrip_report(tokenizer, x)
    assert report["transform_roundtrip_max_error"] < 1e-9
    assert 0.2 < report["quantisation_error_over_bound"] <= 1.0
    assert report["clipped_series"] == 0


def test_roundtrip_check_rejects_incomplete_windows():
    with pytest.raises(ValueError, match="complete windows"):
        tokenizer_roundtrip_report(WaveletTokenizer(), np.full((2, 8), np.nan))


def test_parameter_model_rejects_bad_trees():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    tree = yaml.safe_load((root / "conf/base/parameters_wavetoken.yml").read_text())["wavetoken"]
    validate_parameters(WavetokenParams, tree, "wavetoken")
    bad = {**tree, "variants": {k: v for k, v in tree["variants"].items() if k != "wavetoken"}}
    with pytest.raises(ParameterError,
                       match=r"wavetoken\.variants: variants must define .*missing \['wavetoken'\]"):
        validate_parameters(WavetokenParams, bad, "wavetoken")
    both = {**tree, "data": {**tree["data"], "zero_shot": ["taylor"]}}
    with pytest.raises(ParameterError, match="both in_domain and zero_shot"):
        validate_parameters(WavetokenParams, both, "wavetoken")
    uneven = {**tree, "train": {**tree["train"], "batch_size": 30, "micro_batches": 4}}
    with pytest.raises(ParameterError, match="micro_batches 4 does not divide batch_size 30"):
        validate_parameters(WavetokenParams, uneven, "wavetoken")
    no_normaliser = {**tree, "baselines": {"models": ["naive"]}}
    with pytest.raises(ParameterError, match="seasonal_naive is required"):
        validate_parameters(WavetokenParams, no_normaliser, "wavetoken")
