"""Unit tests of training-window sampling (the Chronos training recipe)."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.wavetoken.windows import sample_training_windows


def ramp_series(lengths, offset=1000.0):
    """Series i = offset*i + 0, 1, 2, ...: every value names its series and position."""
    return [offset * i + np.arange(n, dtype=float) for i, n in enumerate(lengths)]


def locate(context, target, offset=1000.0):
    """(series index, cut) recovered from a ramp target."""
    first = target[0]
    return int(first // offset), int(first % offset)


def test_shapes_alignment_and_cut_bounds():
    series = ramp_series([40, 100, 7])  # the 7-point series is too short and skipped
    contexts, targets = sample_training_windows(
        series,
        n_windows=300,
        context_length=16,
        prediction_length=8,
        min_past=5,
        rng=np.random.default_rng(0),
        nan_injection_max=0.0,
    )
    assert contexts.shape == (300, 16)
    assert targets.shape == (300, 8)
    seen = set()
    for context, target in zip(contexts, targets, strict=True):
        idx, cut = locate(context, target)
        seen.add(idx)
        length = [40, 100][idx]
        assert 5 <= cut <= length - 8  # >= min_past before, H after
        np.testing.assert_array_equal(target, series[idx][cut : cut + 8])
        # context = the (up to) 16 points before the cut, left-padded with NaN
        past = series[idx][max(0, cut - 16) : cut]
        np.testing.assert_array_equal(context[16 - past.size :], past)
        assert np.isnan(context[: 16 - past.size]).all()
    assert seen == {0, 1}


def test_both_ends_of_the_cut_range_are_reachable_and_padding_happens():
    series = ramp_series([20])
    contexts, targets = sample_training_windows(
        series,
        n_windows=400,
        context_length=10,
        prediction_length=4,
        min_past=3,
        rng=np.random.default_rng(1),
        nan_injection_max=0.0,
    )
    cuts = {locate(c, t)[1] for c, t in zip(contexts, targets, strict=True)}
    assert cuts == set(range(3, 17))
    early = contexts[targets[:, 0] == 3]
    assert np.isnan(early[:, :7]).all() and not np.isnan(early[:, 7:]).any()


def test_series_are_drawn_uniformly():
    series = ramp_series([30, 300])  # uniform over series, not over time points
    _, targets = sample_training_windows(
        series,
        n_windows=2000,
        context_length=8,
        prediction_length=4,
        min_past=2,
        rng=np.random.default_rng(2),
        nan_injection_max=0.0,
    )
    share = np.mean(targets[:, 0] < 1000)
    assert 0.45 < share < 0.55


def test_nan_injection_rate_and_targets_untouched():
    series = [np.arange(500, dtype=float)]
    contexts, targets = sample_training_windows(
        series,
        n_windows=400,
        context_length=64,
        prediction_length=8,
        min_past=64,
        rng=np.random.default_rng(3),
        nan_injection_max=0.2,
    )
    rates = np.isnan(contexts).mean(axis=1)  # min_past = C: no padding, all NaNs are injected
    assert 0.07 < rates.mean() < 0.13  # E[U(0, 0.2)] = 0.1
    assert rates.max() < 0.35
    assert not np.isnan(targets).any()
    assert (~np.isnan(contexts)).any(axis=1).all()


def test_nan_injection_never_empties_a_context():
    series = [np.arange(12, dtype=float)]
    contexts, _ = sample_training_windows(
        series,
        n_windows=500,
        context_length=4,
        prediction_length=2,
        min_past=1,
        rng=np.random.default_rng(4),
        nan_injection_max=0.99,
    )
    assert (~np.isnan(contexts)).any(axis=1).all()


def test_windows_with_all_nan_context_are_redrawn():
    values = np.arange(30, dtype=float)
    values[:10] = np.nan
    contexts, targets = sample_training_windows(
        [values],
        n_windows=200,
        context_length=5,
        prediction_length=3,
        min_past=2,
        rng=np.random.default_rng(5),
        nan_injection_max=0.0,
    )
    assert (~np.isnan(contexts)).any(axis=1).all()
    assert (~np.isnan(targets)).any(axis=1).all()


def test_deterministic_for_a_seed():
    series = ramp_series([50, 60])
    kwargs = dict(n_windows=20, context_length=12, prediction_length=4, min_past=6)
    a = sample_training_windows(series, rng=np.random.default_rng(7), **kwargs)
    b = sample_training_windows(series, rng=np.random.default_rng(7), **kwargs)
    c = sample_training_windows(series, rng=np.random.default_rng(8), **kwargs)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])


def test_no_long_enough_series_raises_with_the_reason():
    with pytest.raises(ValueError, match=r"min_past \+ prediction_length = 10 \+ 8 = 18"):
        sample_training_windows(
            ramp_series([5, 17]),
            n_windows=3,
            context_length=8,
            prediction_length=8,
            min_past=10,
            rng=np.random.default_rng(0),
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_windows": 0}, "n_windows"),
        ({"context_length": -1}, "context_length"),
        ({"min_past": 0}, "min_past"),
        ({"nan_injection_max": 1.0}, "nan_injection_max"),
        ({"series": []}, "empty"),
        ({"series": [np.array([1.0, np.inf] * 20)]}, "inf"),
        ({"series": [np.ones((4, 10))]}, "1-D"),
        ({"rng": 0}, "rng"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(
        series=ramp_series([40]),
        n_windows=2,
        context_length=8,
        prediction_length=4,
        min_past=4,
        rng=np.random.default_rng(0),
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sample_training_windows(**args)
