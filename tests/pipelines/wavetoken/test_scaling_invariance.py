"""Standard (z-)scaling: affine equivariance, and constant contexts forecast as the constant.

``tokenizer.location_scale(..., "standard")``: loc = mean, scale = population std, except for a
constant context (std <= 1e-7 of max|x|, NaNs ignored), whose scale is 1e-10 of its magnitude
(1e-30 when it is all zeros), so that whatever ids a model samples the decoded paths equal the
constant. ``"mean"`` (Chronos) scaling is not touched.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.forecaster import forecast
from icml25.pipelines.wavetoken.tokenizer import (
    CONSTANT_RTOL,
    TokenizerState,
    location_scale,
    standard_location_scale,
)
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer

CONSTANTS = [0.0, 1e-3, -5.0, 1e6]
WAVELET_CONFIGS = [
    {"wavelet": "bior2.2", "level": 1},
    {"wavelet": "haar", "level": 3},
    {"wavelet": "db4", "level": 2, "threshold": "fdrc"},
]


def tokenizers():
    return [WaveletTokenizer(**cfg) for cfg in WAVELET_CONFIGS] + [
        MeanScaleUniformBins(scaling="standard")
    ]


def close_to(values, constant, tol=1e-6):
    """Max deviation from the constant, relative (absolute for 0), is below ``tol``."""
    deviation = np.abs(np.asarray(values) - constant)
    return float(deviation.max()) <= tol * (abs(constant) if constant != 0 else 1.0)


def adversarial_ids(tok, n, n_tokens, rng):
    """Any ids a model could emit: uniform over the whole vocabulary, the two end bins, and an
    alternating end-bin pattern (which maximises wavelet synthesis)."""
    v = tok.vocab_size
    rand = rng.integers(0, v, size=(n, 8, n_tokens))
    low = np.full((n, 1, n_tokens), 2)
    high = np.full((n, 1, n_tokens), v - 2)
    alt = np.tile([v - 2, 2], n_tokens // 2)[None, None, :].repeat(n, axis=0)
    return np.concatenate([rand, low, high, alt, alt[..., ::-1].copy()], axis=1)


def walk_plus_season(rng, n, length):
    t = np.arange(length)
    walk = np.cumsum(rng.normal(size=(n, length)), axis=1)
    season = 3.0 * np.sin(2 * np.pi * t / rng.integers(6, 30, size=(n, 1)))
    level = rng.uniform(-50, 50, size=(n, 1))
    return level + rng.uniform(0.1, 20, size=(n, 1)) * (walk + season)


# ------------------------------------------------------------------------ location_scale
@pytest.mark.parametrize("c", CONSTANTS)
def test_constant_context_gets_tiny_scale_and_exact_loc(c):
    x = np.full((3, 32), c)
    x[1, :7] = np.nan  # shorter history
    x[2, [3, 10, 11]] = np.nan  # missing values
    loc, scale, constant = standard_location_scale(x)
    np.testing.assert_array_equal(loc, c)  # exactly
    expected = 1e-10 * abs(c) if c != 0 else 1e-30
    np.testing.assert_allclose(scale, expected, rtol=1e-15)
    assert constant.all()
    np.testing.assert_array_equal(location_scale(x, "standard")[1], scale)


def test_constant_tolerance_boundary_and_ordinary_rows():
    rng = np.random.default_rng(0)
    base = 7.0 + rng.standard_normal(64)
    base = (base - base.mean()) / base.std()  # population std exactly ~1
    below = 7.0 + 0.5 * CONSTANT_RTOL * 7.0 * base
    above = 7.0 + 2.0 * CONSTANT_RTOL * 7.0 * base
    loc, scale, constant = standard_location_scale(np.stack([below, above, 7.0 + base]))
    np.testing.assert_array_equal(constant, [True, False, False])
    np.testing.assert_allclose(scale[0], 1e-10 * np.abs(below).max(), rtol=1e-15)
    np.testing.assert_allclose(scale[1:], [2 * CONSTANT_RTOL * 7.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(loc, 7.0, rtol=1e-12)


def test_mean_scaling_is_unchanged():
    x = np.array([[0.0, 0.0, 0.0], [1e-3, 1e-3, 1e-3], [-2.0, np.nan, 4.0]])
    loc, scale = location_scale(x, "mean")
    np.testing.assert_array_equal(loc, 0.0)
    np.testing.assert_allclose(scale, [1.0, 1e-3, 3.0], rtol=1e-15)


# --------------------------------------------------------- decoded paths of constant contexts
@pytest.mark.parametrize("c", CONSTANTS)
@pytest.mark.parametrize("tok", tokenizers(), ids=lambda t: t.name)
def test_constant_context_decodes_to_constant_whatever_the_ids(tok, c):
    rng = np.random.default_rng(1)
    context = np.full((2, 64), c)
    context[1, :9] = np.nan
    ids, _, state = tok.context_input(context)
    zero_id = int(tok.quantize(np.array([0.0]))[0])
    assert np.all(ids[0, :-1] == zero_id)
    sampled = adversarial_ids(tok, 2, tok.num_target_tokens(16), rng)
    decoded = tok.output_transform(sampled, state)
    assert close_to(decoded, c)
    # much tighter than required: max|centre| * synthesis gain (<= 4 here) * 1e-10 relative
    assert close_to(decoded, c, tol=15 * 4 * (1e-10 if c != 0 else 1e-30))
    if isinstance(tok, WaveletTokenizer):  # (Chronos' float32 bin centres are not exactly 0)
        # the zero token decodes to the constant exactly
        assert np.all(tok.output_transform(np.full((2, 1, 16), zero_id), state) == c)
    # a scale of 1 in absolute units (the rule this replaces) does not have the property
    unit = TokenizerState(loc=state.loc, scale=np.ones(2), n_tokens=state.n_tokens)
    assert np.abs(tok.output_transform(sampled, unit) - c).max() > 10.0


@pytest.mark.parametrize("tok", tokenizers(), ids=lambda t: t.name)
def test_near_constant_contexts(tok):
    """Constants carrying float64 rounding noise (std ~1e-14) forecast the constant too."""
    rng = np.random.default_rng(2)
    t = np.arange(64) * 0.1
    rows = [
        (1.0 + t) - t,  # rounding of an add/subtract, std ~1e-16
        1.0 + 1e-14 * rng.standard_normal(64),
        1e-3 + 1e-14 * rng.standard_normal(64),
        -5.0 + 1e-14 * rng.standard_normal(64),
        1e-14 * rng.standard_normal(64),  # ripple around 0: z-scaled, but 1e-14 in size
    ]
    constants = [1.0, 1.0, 1e-3, -5.0, 0.0]
    context = np.stack(rows)
    assert (context[:4].std(axis=1) > 0).all()
    _, scale, constant = standard_location_scale(context)
    np.testing.assert_array_equal(constant, [True, True, True, True, False])
    assert np.all(scale[:4] <= 1e-9 * np.abs(constants[:4]))
    ids, _, state = tok.context_input(context)
    if isinstance(tok, WaveletTokenizer):  # constant rows tokenize to the 0 centre
        zero_id = int(tok.quantize(np.array([0.0]))[0])
        assert np.all(ids[:4, :-1] == zero_id)
    decoded = tok.output_transform(adversarial_ids(tok, 5, 16, rng), state)
    for i, c in enumerate(constants):
        assert close_to(decoded[i], c), (i, np.abs(decoded[i] - c).max())


class _UniformIdModel:
    """A model stub that samples every id of the value range uniformly."""

    def generate(self, input_ids, attention_mask, n_tokens, n_samples, temperature, top_k,
                 top_p, generator):
        return torch.randint(2, 1023, (input_ids.shape[0], n_samples, n_tokens),
                             generator=generator)


class _EndBinModel:
    """A model stub emitting the alternating end-bin pattern: the largest decoded excursion."""

    def generate(self, input_ids, attention_mask, n_tokens, n_samples, temperature, top_k,
                 top_p, generator):
        pattern = torch.tensor([1022, 2] * (n_tokens // 2))
        return pattern.expand(input_ids.shape[0], n_samples, n_tokens).clone()


@pytest.mark.parametrize("model", [_UniformIdModel(), _EndBinModel()], ids=["uniform", "ends"])
def test_constant_forecasts_stay_constant_over_rollouts(model):
    """Six rolled-out blocks: the median fed back keeps the context constant."""
    tok = WaveletTokenizer()
    contexts = np.array([[c] * 64 for c in CONSTANTS])
    out = forecast(model, tok, contexts, horizon=6 * 32, prediction_length=32, n_samples=10)
    for i, c in enumerate(CONSTANTS):
        assert close_to(out[i], c), (c, np.abs(out[i] - c).max())


def test_labels_far_from_a_tiny_constant_do_not_overflow():
    tok = WaveletTokenizer()
    _, _, state = tok.context_input(np.full((1, 16), 1e-300))
    labels = tok.label_input(np.array([[1e10] * 8 + [-1e300] * 8]), state)
    assert labels[0, :-1].min() >= 2 and labels[0, :-1].max() <= tok.vocab_size - 2
    assert labels[0, 0] == tok.vocab_size - 2


# ------------------------------------------------------------------------ affine equivariance
@pytest.mark.parametrize("a, b", [(3.7, -12.5), (1e-3, 1e3), (1e4, 0.0), (0.25, 1e5)])
@pytest.mark.parametrize("tok", tokenizers(), ids=lambda t: t.name)
def test_affine_equivariance_on_random_contexts(tok, a, b):
    rng = np.random.default_rng(3)
    x = walk_plus_season(rng, 48, 64)
    x[:6, :13] = np.nan  # shorter histories
    x[6:12, [5, 20, 21, 40]] = np.nan  # missing values
    y = walk_plus_season(rng, 48, 16)
    ids, mask, state = tok.context_input(x)
    ids2, mask2, state2 = tok.context_input(a * x + b)
    np.testing.assert_array_equal(ids, ids2)
    np.testing.assert_array_equal(mask, mask2)
    np.testing.assert_allclose(state2.loc, a * state.loc + b, rtol=1e-12, atol=1e-12 * abs(b))
    # (a x + b) carries rounding of order eps * |b|, relative to a * sigma up to ~1e-10 here
    np.testing.assert_allclose(state2.scale, a * state.scale, rtol=1e-9)
    np.testing.assert_array_equal(tok.label_input(y, state), tok.label_input(a * y + b, state2))
    sampled = rng.integers(2, tok.vocab_size - 1, size=(48, 4, 16))
    np.testing.assert_allclose(
        tok.output_transform(sampled, state2),
        a * tok.output_transform(sampled, state) + b,
        rtol=1e-9,
        atol=1e-9 * (abs(b) + a),
    )


@pytest.mark.parametrize("c", CONSTANTS)
def test_affine_maps_of_a_constant_give_the_same_ids(c):
    tok = WaveletTokenizer()
    ids = tok.context_input(np.full((1, 32), c))[0]
    for a, b in [(2.0, 3.0), (1e-6, -1.0), (1e6, 0.0)]:
        ids2, _, state2 = tok.context_input(np.full((1, 32), a * c + b))
        np.testing.assert_array_equal(ids, ids2)
        assert state2.loc[0] == a * c + b
