"""Unit tests of the wavetoken sampling loop (sampling shape, rollout)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.wavetoken.forecaster import forecast
from icml25.pipelines.wavetoken.model import Seq2SeqConfig, Seq2SeqForecaster
from icml25.pipelines.wavetoken.tokenizer import TokenizerState


class IntegerTokenizer:
    """A fake ``ForecastTokenizer``: value v <-> id OFFSET + round(v), no scaling.

    Leading NaNs become PAD (mask False); interior NaNs are not needed by these tests.
    """

    OFFSET = 502  # id of value 0; ids 2 .. 1023 cover values -500 .. 521
    vocab_size = 1024
    pad_id = 0
    eos_id = 1
    name = "integer"

    def num_target_tokens(self, horizon: int) -> int:
        return int(horizon)

    def context_input(self, context):
        x = np.asarray(context, dtype=np.float64)
        observed = ~np.isnan(x)
        ids = np.where(observed, self.OFFSET + np.round(np.nan_to_num(x)), self.pad_id)
        ids = np.clip(ids, 0, self.vocab_size - 1).astype(np.int64)
        n = x.shape[0]
        ids = np.concatenate([ids, np.full((n, 1), self.eos_id)], axis=1)
        mask = np.concatenate([observed, np.ones((n, 1), dtype=bool)], axis=1)
        state = TokenizerState(loc=np.zeros(n), scale=np.ones(n), n_tokens=observed.sum(axis=1))
        return ids, mask, state

    def label_input(self, target, state):
        ids, _, _ = self.context_input(target)
        return ids

    def output_transform(self, ids, state):
        return np.asarray(ids, dtype=np.float64) - self.OFFSET


class CountingUpModel:
    """A stub with ``generate``: sample s of a series continues its last value v as
    v + s + 1, v + s + 2, ... (known answer for the rollout and its median feedback)."""

    def __init__(self):
        self.calls = []

    def generate(
        self, input_ids, attention_mask, n_tokens, n_samples, temperature, top_k, top_p, generator
    ):
        self.calls.append(tuple(input_ids.shape))
        last = input_ids[:, -2]  # the token before EOS
        steps = torch.arange(1, n_tokens + 1)
        shift = torch.arange(n_samples)
        return last[:, None, None] + shift[None, :, None] + steps[None, None, :]


class ConstantTokenModel:
    """A stub with ``generate`` that always emits one id (e.g. the quantiser's zero centre)."""

    def __init__(self, token: int):
        self.token = token

    def generate(
        self, input_ids, attention_mask, n_tokens, n_samples, temperature, top_k, top_p, generator
    ):
        return torch.full((input_ids.shape[0], n_samples, n_tokens), self.token, dtype=torch.long)


def tiny_model(vocab_size: int = 1024) -> Seq2SeqForecaster:
    torch.manual_seed(0)
    config = Seq2SeqConfig(
        vocab_size=vocab_size,
        d_model=16,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=32,
        max_context_tokens=33,
        max_target_tokens=17,
    )
    return Seq2SeqForecaster(config)


def test_every_horizon_from_1_to_200_returns_exactly_that_many_steps():
    contexts = np.zeros((2, 10))
    for horizon in range(1, 201):
        out = forecast(
            CountingUpModel(),
            IntegerTokenizer(),
            contexts,
            horizon=horizon,
            prediction_length=8,
            n_samples=1,
        )
        assert out.shape == (2, 1, horizon)
        # one sample counts up 1, 2, 3, ... across blocks: the median fed back is the block
        np.testing.assert_array_equal(out[:, 0], np.tile(np.arange(1, horizon + 1), (2, 1)))


def test_rollout_feeds_back_the_lower_median_and_keeps_the_context_width():
    model = CountingUpModel()
    contexts = np.array([[np.nan, np.nan, 0.0, 0.0, 5.0], [1.0, 1.0, 1.0, 1.0, 10.0]])
    out = forecast(
        model, IntegerTokenizer(), contexts, horizon=10, prediction_length=4, n_samples=4
    )
    assert out.shape == (2, 4, 10)
    last = np.array([5.0, 10.0])[:, None]
    s = np.arange(4)[None, :]
    # block 1: v + s + step; its lower median (torch, Chronos) over s = 0..3 is v + 1 + step
    np.testing.assert_array_equal(out[:, :, 0], last + s + 1)
    np.testing.assert_array_equal(out[:, :, 3], last + s + 4)
    # block 2 continues from the median's last value v + 5 (numpy's median would give v + 5.5)
    np.testing.assert_array_equal(out[:, :, 4], last + 5 + s + 1)
    # block 3 from v + 5 + 5, truncated to the 2 steps still wanted
    np.testing.assert_array_equal(out[:, :, 9], last + 10 + s + 2)
    # three blocks, one batch, and the context always keeps its 5 columns (+ EOS)
    assert model.calls == [(2, 6), (2, 6), (2, 6)]


def test_batches_cover_every_series():
    model = CountingUpModel()
    contexts = np.arange(7, dtype=float)[:, None] * np.ones((7, 4))
    out = forecast(
        model,
        IntegerTokenizer(),
        contexts,
        horizon=3,
        prediction_length=4,
        n_samples=2,
        batch_size=3,
        progress=True,
    )
    assert [c[0] for c in model.calls] == [3, 3, 1]
    np.testing.assert_array_equal(out[:, 0, 0], np.arange(7) + 1)


@pytest.mark.parametrize(
    ("contexts", "match"),
    [
        (np.array([[1.0, np.inf, 2.0]]), "inf"),
        (np.array([[1.0, 2.0], [-np.inf, 1.0]]), "inf"),
        (np.zeros((0, 5)), "empty"),
        (np.zeros((3, 0)), "empty"),
        (np.zeros(5), "2-D"),
        (np.array([[np.nan, np.nan]]), "no observed"),
    ],
)
def test_bad_contexts_raise(contexts, match):
    with pytest.raises(ValueError, match=match):
        forecast(CountingUpModel(), IntegerTokenizer(), contexts, horizon=2, prediction_length=4)


@pytest.mark.parametrize("horizon", [0, -3, 2.5, True])
def test_bad_horizon_raises(horizon):
    with pytest.raises(ValueError, match="horizon"):
        forecast(
            CountingUpModel(),
            IntegerTokenizer(),
            np.zeros((1, 4)),
            horizon=horizon,
            prediction_length=4,
        )


def test_real_model_is_deterministic_for_a_seed_and_restores_train_mode():
    model = tiny_model()
    model.train()
    rng = np.random.default_rng(0)
    contexts = rng.integers(-20, 20, size=(5, 16)).astype(float)
    contexts[1, :6] = np.nan  # shorter history
    kwargs = dict(horizon=20, prediction_length=8, n_samples=6, batch_size=2)
    first = forecast(model, IntegerTokenizer(), contexts, seed=3, **kwargs)
    again = forecast(model, IntegerTokenizer(), contexts, seed=3, **kwargs)
    other = forecast(model, IntegerTokenizer(), contexts, seed=4, **kwargs)
    assert first.shape == (5, 6, 20)
    assert np.isfinite(first).all()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert model.training


# ---------------------------------------------------------------------- real WaveletTokenizer
def test_wavelet_tokenizer_constant_series_forecasts_the_constant_exactly():
    from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer

    tokenizer = WaveletTokenizer(vocab_size=1024, wavelet="bior2.2", level=1)
    zero_id = int(tokenizer.quantize(np.array([0.0]))[0])
    contexts = np.array([[7.25] * 32, [np.nan] * 10 + [-3.0] * 22, [0.0] * 32])
    out = forecast(
        ConstantTokenModel(zero_id),
        tokenizer,
        contexts,
        horizon=40,
        prediction_length=16,
        n_samples=5,
    )
    assert out.shape == (3, 5, 40)
    expected = np.array([7.25, -3.0, 0.0])[:, None, None]
    np.testing.assert_array_equal(out, np.broadcast_to(expected, out.shape))


def test_wavelet_tokenizer_rollout_with_the_real_model():
    from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer

    tokenizer = WaveletTokenizer(vocab_size=1024, wavelet="bior2.2", level=1)
    t = np.arange(32)
    contexts = np.stack([np.sin(t / 3.0), 5 + 0.1 * t])
    contexts[1, :9] = np.nan  # 23 observed points: the tokenizer keeps the last 22
    out = forecast(tiny_model(), tokenizer, contexts, horizon=37, prediction_length=16, n_samples=4)
    assert out.shape == (2, 4, 37)
    assert np.isfinite(out).all()


def test_bin_tokenizer_with_the_real_model():
    from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins

    tokenizer = MeanScaleUniformBins(vocab_size=1024)
    contexts = np.abs(np.random.default_rng(1).normal(size=(3, 32))) + 1
    out = forecast(tiny_model(), tokenizer, contexts, horizon=5, prediction_length=16, n_samples=3)
    assert out.shape == (3, 3, 5)
    assert np.isfinite(out).all()
