"""The optional transformers T5 backend has our model's interface and sampling guarantees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from icml25.pipelines.wavetoken.forecaster import forecast
from icml25.pipelines.wavetoken.hf_t5 import HFT5Forecaster, build_model, load_model
from icml25.pipelines.wavetoken.model import Seq2SeqConfig
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer


def tiny(vocab: int = 64) -> Seq2SeqConfig:
    return Seq2SeqConfig(vocab_size=vocab, d_model=16, n_heads=2, n_encoder_layers=1,
                         n_decoder_layers=1, d_ff=32, dropout=0.0, position="t5_relative")


def test_loss_of_uniform_logits_is_log_vocab():
    torch.manual_seed(0)
    model = HFT5Forecaster(tiny(1024))
    with torch.no_grad():
        model.t5.shared.weight.zero_()  # tied: every logit 0
    ids = torch.randint(2, 1024, (3, 9))
    labels = torch.randint(2, 1024, (3, 5))
    labels[0, -2:] = -100
    loss = model.loss(ids, torch.ones_like(ids, dtype=torch.bool), labels)
    assert loss.item() == pytest.approx(np.log(1024), abs=1e-4)


def test_generate_shapes_no_specials_and_reproducible():
    torch.manual_seed(0)
    model = HFT5Forecaster(tiny())
    with torch.no_grad():  # make PAD and EOS the model's favourites: they must still never appear
        model.t5.shared.weight[:2] *= 50
    ids = torch.randint(2, 64, (2, 8))
    mask = torch.ones_like(ids, dtype=torch.bool)
    a = model.generate(ids, mask, 6, n_samples=5, generator=torch.Generator().manual_seed(1))
    b = model.generate(ids, mask, 6, n_samples=5, generator=torch.Generator().manual_seed(1))
    assert a.shape == (2, 5, 6)
    assert int(a.min()) >= 2
    torch.testing.assert_close(a, b)


def test_forecast_and_state_dict_roundtrip_through_either_backend():
    torch.manual_seed(0)
    config = tiny()
    model = build_model(config, "hf_t5")
    rebuilt = load_model(config.to_dict(), {k: v.clone() for k, v in model.state_dict().items()},
                         "hf_t5")
    tokenizer = WaveletTokenizer(vocab_size=64)
    contexts = np.cumsum(np.random.default_rng(0).normal(size=(3, 16)), axis=1)
    out = forecast(rebuilt, tokenizer, contexts, horizon=12, prediction_length=8, n_samples=4,
                   seed=3)
    assert out.shape == (3, 4, 12) and np.isfinite(out).all()
    with pytest.raises(ValueError, match="backend"):
        build_model(config, "jax")
