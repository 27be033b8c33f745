"""The length-controlled win rate: a win probability at zero length difference.

A policy that wins only by being longer (the padding "length hack") must score 0.5 controlled,
a genuine quality gap must survive the control, and the fit must be the maximum-likelihood
logistic regression written here from its definition.
"""

import numpy as np
import pytest
from scipy.optimize import minimize

from icml25.pipelines.fpo.evaluate import length_controlled_win_rate, length_matched_win_rate


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _padded_lengths(rng, n, low=-3, high=12):
    """Base responses of random length; one side padded by ``pad`` tokens (A when pad > 0, B
    when pad < 0): the two responses differ only in length."""
    base = rng.integers(8, 30, n)
    pad = rng.integers(low, high, n)
    return base + np.maximum(pad, 0), base + np.maximum(-pad, 0)


def test_padding_hack_with_a_judge_that_only_counts_length_scores_one_half():
    rng = np.random.default_rng(0)
    len_a, len_b = _padded_lengths(rng, 600)
    scores = np.where(len_a > len_b, 1.0, np.where(len_a == len_b, 0.5, 0.0))
    assert scores.mean() > 0.75                 # the raw win rate is fooled by the padding
    assert length_controlled_win_rate(scores, len_a, len_b) == pytest.approx(0.5, abs=0.02)


def test_padding_hack_with_a_noisy_length_biased_judge_scores_one_half():
    rng = np.random.default_rng(1)
    len_a, len_b = _padded_lengths(rng, 20000)
    diff = (len_a - len_b).astype(float)
    p_win = _sigmoid(2.0 * np.tanh(diff / diff.std()))   # no quality difference at all
    scores = (rng.random(len(diff)) < p_win).astype(float)
    assert scores.mean() > 0.65
    assert length_controlled_win_rate(scores, len_a, len_b) == pytest.approx(0.5, abs=0.02)


@pytest.mark.parametrize("length_effect", [0.0, 1.5, -1.5])
def test_a_genuine_quality_gap_survives_the_length_control(length_effect):
    rng = np.random.default_rng(2)
    len_a, len_b = _padded_lengths(rng, 20000)
    diff = (len_a - len_b).astype(float)
    p_win = _sigmoid(np.log(0.7 / 0.3) + length_effect * np.tanh(diff / diff.std()))
    scores = (rng.random(len(diff)) < p_win).astype(float)
    if length_effect:
        assert abs(scores.mean() - 0.7) > 0.05  # length moves the raw rate away from 0.7
    assert length_controlled_win_rate(scores, len_a, len_b) == pytest.approx(0.7, abs=0.015)


def test_the_fit_is_the_weighted_maximum_likelihood_of_its_definition():
    rng = np.random.default_rng(3)
    n = 300
    len_a, len_b = rng.integers(5, 40, n), rng.integers(5, 40, n)
    diff = (len_a - len_b).astype(float)
    scores = rng.choice([0.0, 0.5, 1.0], size=n, p=[0.35, 0.2, 0.45])
    x = np.tanh(diff / diff.std())

    def nll(theta):
        eta = theta[0] + theta[1] * x
        # a tie is half a win and half a loss
        return -(scores * -np.logaddexp(0, -eta) + (1 - scores) * -np.logaddexp(0, eta)).sum()

    theta = minimize(nll, np.zeros(2), method="BFGS", options={"gtol": 1e-10}).x
    assert length_controlled_win_rate(scores, len_a, len_b) == pytest.approx(
        _sigmoid(theta[0]), abs=1e-4)


def test_special_cases_and_bad_input():
    scores = np.array([1.0, 0.5, 0.0, 1.0])
    same = np.array([10, 12, 9, 20])
    # equal lengths everywhere: already length-matched, the raw rate
    assert length_controlled_win_rate(scores, same, same) == pytest.approx(scores.mean())
    # every A longer: the rate at zero length difference is not identified
    assert np.isnan(length_controlled_win_rate(scores, same + 3, same))
    assert np.isnan(length_controlled_win_rate(scores, same, same + np.array([1, 2, 3, 4])))
    # A wins everywhere, whatever the lengths
    assert length_controlled_win_rate(np.ones(4), same, same[::-1]) == 1.0
    with pytest.raises(ValueError, match="length_controlled_win_rate"):
        length_controlled_win_rate(scores, same[:3], same[:3])


def test_length_matched_win_rate_keeps_only_close_lengths():
    scores = np.array([1.0, 0.0, 0.5, 1.0, 1.0])
    len_a = np.array([10, 10, 10, 20, 30])
    len_b = np.array([10, 12, 11, 10, 10])
    assert length_matched_win_rate(scores, len_a, len_b, 2) == (pytest.approx(0.5), 3)
    assert length_matched_win_rate(scores, len_a, len_b, 0) == (1.0, 1)
    rate, n = length_matched_win_rate(scores, len_a + 50, len_b, 2)
    assert np.isnan(rate) and n == 0
