"""Diarizer shape/positions, sinusoidal kernels, SST, features and resampling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icml25.pipelines.sortformer.diarizer_training import OptimConfig, arrival_f1, train_diarizer
from icml25.pipelines.sortformer.features import log_mel, prepare_audio
from icml25.pipelines.sortformer.model import Diarizer, DiarizerConfig, output_frames
from icml25.pipelines.sortformer.msasr import (
    AsrConfig,
    SpeakerAwareAED,
    inject,
    speaker_kernels,
    sst_tokens,
    tokens_to_transcripts,
)

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = DiarizerConfig(n_mels=16, conv_channels=2, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                      dropout=0.0)


def test_kernel_rows_are_orthogonal_and_invertible():
    g = speaker_kernels(4, 144).double()
    assert torch.allclose(g @ g.T, 72 * torch.eye(4, dtype=torch.float64), atol=1e-6)
    p = torch.rand(1, 30, 4)
    a = torch.randn(1, 30, 144)
    injected = inject(a, p, g.float())
    recovered = torch.linalg.lstsq(g.T.float(), (injected - a / a.norm(dim=-1, keepdim=True))[0]
                                   .T).solution.T
    assert torch.allclose(recovered, p[0], atol=1e-4)
    assert torch.allclose(inject(a, torch.zeros_like(p), g.float()),
                          a / a.norm(dim=-1, keepdim=True))
    unit = speaker_kernels(4, 144, unit_rows=True)
    assert torch.allclose(unit.norm(dim=1), torch.ones(4))


@pytest.mark.parametrize("encoder", ["transformer", "conformer_lite"])
def test_model_output_shape_range_and_uses_positions(encoder):
    torch.manual_seed(0)
    cfg = DiarizerConfig(**{**TINY.to_dict(), "encoder": encoder})
    model = Diarizer(cfg).eval()
    x = torch.randn(2, 101, 16)
    p = model(x)
    assert p.shape == (2, output_frames(101), 4) == (2, 13, 4)
    assert float(p.min()) >= 0 and float(p.max()) <= 1
    rev = model(torch.flip(x, dims=[1]))
    assert not torch.allclose(torch.flip(rev, dims=[1]), p, atol=1e-5)


def test_padding_mask_makes_padding_irrelevant():
    torch.manual_seed(0)
    model = Diarizer(TINY).eval()
    x = torch.randn(1, 80, 16)
    padded = torch.cat([x, torch.randn(1, 40, 16)], dim=1)
    short = model(x, torch.tensor([10]))
    long = model(padded, torch.tensor([10]))[:, :10]
    # conv receptive fields reach one frame into the padding; compare the frames before it
    assert torch.allclose(short[:, :8], long[:, :8], atol=1e-5)


def test_training_lowers_the_loss_and_is_deterministic():
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((64, 16)).astype(np.float32) for _ in range(8)]
    labels = []
    for f in feats:
        y = np.zeros((8, 4), np.float32)
        y[:4, 0] = 1
        y[4:, 1] = 1
        f[:32, :8] += 2.0  # speaker 0's frames are louder in the low bands
        labels.append(y)
    optim = OptimConfig(lr=3e-3, warmup_steps=2, epochs=6, batch_size=4)
    m1, r1 = train_diarizer(feats, labels, "hybrid", TINY, optim, seed=0, progress=False)
    m2, _ = train_diarizer(feats, labels, "hybrid", TINY, optim, seed=0, progress=False)
    for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    losses = [h["train_loss"] for h in r1.history if "train_loss" in h]
    assert losses[-1] < losses[0]
    with pytest.raises(ValueError, match="loss"):
        train_diarizer(feats, labels, "softmax", TINY, optim, seed=0, progress=False)


def test_arrival_f1_tells_sorted_from_permuted_outputs():
    y = np.zeros((10, 4), np.float32)
    y[:5, 0] = 1
    y[5:, 1] = 1
    assert arrival_f1([y], [y]) == {"f1_ats": 1.0, "f1_pil": 1.0}
    swapped = y[:, [1, 0, 2, 3]]
    f = arrival_f1([swapped], [y])
    assert f["f1_pil"] == 1.0 and f["f1_ats"] == 0.0


def test_sst_tokens_and_transcripts():
    rows = pd.DataFrame({"speaker": ["b", "a", "b", "a"], "word": ["one", "two", "stop", "go"],
                         "start": [0.0, 0.5, 0.9, 1.2], "end": [0.4, 0.9, 1.3, 1.5]})
    tokens = sst_tokens(rows)
    assert tokens == ["<spk0>", "one", "<spk1>", "two", "<spk0>", "stop", "<spk1>", "go"]
    assert tokens_to_transcripts(tokens) == {"spk0": "one stop", "spk1": "two go"}


def test_asr_model_loss_and_greedy_decoding_shapes():
    torch.manual_seed(0)
    cfg = AsrConfig(n_mels=16, conv_channels=2, d_model=16, enc_layers=1, dec_layers=1,
                    n_heads=2, d_ff=32, dropout=0.0, max_tokens=5)
    model = SpeakerAwareAED(cfg).eval()
    x = torch.randn(2, 81, 16)
    lengths = torch.tensor([11, 9])
    p = torch.rand(2, 11, 4)
    tokens = torch.tensor([[1, 3, 10, 2], [1, 4, 11, 2]])
    assert torch.isfinite(model.loss(x, lengths, p, tokens))
    out = model.greedy(x, lengths, p)
    assert len(out) == 2 and all(len(o) <= 5 for o in out)


def test_features_resample_other_rates_and_refuse_bad_audio():
    t = np.arange(8000) / 8000
    x8k = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    assert prepare_audio(x8k, 8000).shape == (16000,)
    assert log_mel(x8k, 40, sample_rate=8000).shape == log_mel(prepare_audio(x8k, 8000), 40).shape
    with pytest.raises(ValueError, match="NaN"):
        log_mel(np.array([0.0, np.nan, 0.1] * 1000, np.float32))
    with pytest.raises(ValueError, match="empty"):
        log_mel(np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="mono"):
        log_mel(np.zeros((2, 100), np.float32))
