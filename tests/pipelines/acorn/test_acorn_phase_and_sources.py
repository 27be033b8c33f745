"""Relative (inter-channel) phase maps of the encoder, and the packaged real recordings.

The IPD maps are checked against an independent numpy STFT and against the closed form of a
delayed bin-centred tone; the packaged wavs (pysptk's CMU ARCTIC clip, amfm_decompy's sample)
are located without importing their packages and refused clearly when missing or corrupt.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.acorn import sources
from icml25.pipelines.acorn.encoder import (
    N_FFT,
    AcornModel,
    EncoderConfig,
    count_parameters,
    stft_features,
)
from icml25.pipelines.acorn.multitask import TaskData, predict, train_model

pytestmark = pytest.mark.usefixtures("one_thread")


def _numpy_stft(x: np.ndarray) -> np.ndarray:
    """Centred (reflect-padded) periodic-Hann STFT, n_fft 254, hop 160: (bins, frames)."""
    pad = N_FFT // 2
    xp = np.pad(x, pad, mode="reflect")
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    frames = [xp[i:i + N_FFT] * win for i in range(0, len(xp) - N_FFT + 1, 160)]
    return np.fft.rfft(np.stack(frames), axis=1).T


def test_relative_phase_is_the_inter_channel_phase_difference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 3200)).astype(np.float64)
    feats = stft_features(torch.from_numpy(x), dither=0.0, phase="relative").numpy()
    absolute = stft_features(torch.from_numpy(x), dither=0.0, phase="absolute").numpy()
    for b in range(2):
        x0, x1 = _numpy_stft(x[b, 0]), _numpy_stft(x[b, 1])
        ipd = np.angle(x1 * np.conj(x0))
        np.testing.assert_allclose(feats[b, 1, 1], np.sin(ipd), atol=1e-6)
        np.testing.assert_allclose(feats[b, 2, 1], np.cos(ipd), atol=1e-6)
        np.testing.assert_allclose(feats[b, 1, 0], np.sin(np.angle(x0)), atol=1e-6)
        np.testing.assert_allclose(feats[b, 2, 0], np.cos(np.angle(x0)), atol=1e-6)
    # the reference channel and the magnitudes are the same in both modes; the IPD map is
    # the product form sin(a - b) = sin a cos b - cos a sin b of the absolute maps
    np.testing.assert_array_equal(feats[:, :, 0], absolute[:, :, 0])
    np.testing.assert_array_equal(feats[:, 0], absolute[:, 0])
    s, c = absolute[:, 1], absolute[:, 2]
    np.testing.assert_allclose(feats[:, 1, 1], s[:, 1] * c[:, 0] - c[:, 1] * s[:, 0], atol=1e-6)
    np.testing.assert_allclose(feats[:, 2, 1], c[:, 1] * c[:, 0] + s[:, 1] * s[:, 0], atol=1e-6)


@pytest.mark.parametrize("tau", [1.0, 2.5, -4.25])
def test_delayed_bin_centred_tone_has_the_closed_form_ipd(tau):
    """x1(n) = x0(n − τ) for a tone on bin k0: with a periodic Hann window the STFT of each
    interior frame holds only the tone's own bin, so ∠X1(k0) − ∠X0(k0) = −2π k0 τ / 254."""
    k0, n = 20, np.arange(3200)
    pair = np.stack([np.cos(2 * np.pi * k0 * n / N_FFT),
                     np.cos(2 * np.pi * k0 * (n - tau) / N_FFT)])
    feats = stft_features(torch.from_numpy(pair[None]), dither=0.0).numpy()[0]
    expect = -2 * np.pi * k0 * tau / N_FFT
    interior = slice(2, -2)
    np.testing.assert_allclose(feats[1, 1, k0, interior], np.sin(expect), atol=1e-6)
    np.testing.assert_allclose(feats[2, 1, k0, interior], np.cos(expect), atol=1e-6)


def test_phase_modes_share_the_architecture_and_bad_mode_is_refused():
    rel = AcornModel(EncoderConfig(d=16, layers=1, heads=2, phase="relative"))
    ab = AcornModel(EncoderConfig(d=16, layers=1, heads=2, phase="absolute"))
    assert count_parameters(rel) == count_parameters(ab)
    with pytest.raises(ValueError, match="phase must be"):
        AcornModel(EncoderConfig(d=16, layers=1, heads=2, phase="pairwise"))
    with pytest.raises(ValueError, match="phase must be"):
        stft_features(torch.zeros(1, 2, 400), phase="pairwise")


def test_relative_phase_learns_left_right_that_magnitude_cannot_see():
    """Noise pairs delayed by ±3 samples (equal levels): the sign of the delay is learnable
    from the IPD maps; the magnitude-only encoder sees two identical spectra and stays near
    chance."""
    rng = np.random.default_rng(0)
    n = 96
    labels = rng.integers(0, 2, n).astype(float)
    s = rng.standard_normal((n, 1400))
    lag = np.where(labels == 1, 3, -3)
    audio = np.stack([np.stack([s[i, 100:1300], s[i, 100 - lag[i]:1300 - lag[i]]])
                      for i in range(n)]).astype(np.float32)
    data = {"los": TaskData(torch.from_numpy(audio), labels, np.zeros(n, dtype=int))}
    acc = {}
    for use_phase in (True, False):
        cfg = EncoderConfig(d=16, layers=1, heads=2, dropout=0.0, use_phase=use_phase)
        model, rec = train_model(cfg, data, data, epochs=8, batch_size=16, lr=3e-3,
                                 weight_decay=0.0, seed=0, augment=False)
        acc[use_phase] = float(np.mean(predict(model, data, rec["stats"])["los"] == labels))
    assert acc[True] >= 0.9
    assert acc[False] <= 0.75


def test_packaged_recordings_are_found_without_import_and_read():
    import sys

    paths = sources.packaged_wavs()
    assert set(paths) == {"pysptk:arctic_a0007.wav", "amfm_decompy:sample.wav"}
    for name, path in paths.items():
        x = sources.read_wav(path)
        seconds = sources.PACKAGED_WAVS[name.split(":")[0]][1]
        assert x.size == pytest.approx(seconds * sources.FS, rel=0.1)
        assert np.sqrt(np.mean(x ** 2)) == pytest.approx(1.0)
    assert "pysptk" not in sys.modules  # located, never imported (its import needs pkg_resources)


def test_missing_package_or_file_is_refused(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pysptk" else real(name, *a))
    with pytest.raises(sources.SourceFileError, match=r"use_packaged_wavs.*'pysptk'"):
        sources.packaged_wavs()
    monkeypatch.undo()
    monkeypatch.setitem(sources.PACKAGED_WAVS, "amfm_decompy", ("no_such.wav", 0.9))
    with pytest.raises(sources.SourceFileError, match=r"no_such\.wav is missing"):
        sources.packaged_wavs()


def test_corrupt_or_silent_wav_is_refused(tmp_path):
    from scipy.io import wavfile

    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not a RIFF file at all")
    with pytest.raises(sources.SourceFileError, match=r"junk\.wav: not a readable wav"):
        sources.read_wav(junk)
    silent = tmp_path / "silent.wav"
    wavfile.write(silent, 16000, np.zeros(8000, dtype=np.int16))
    with pytest.raises(sources.SourceFileError, match=r"silent\.wav: empty, silent"):
        sources.read_wav(silent)
    short = tmp_path / "short.wav"
    wavfile.write(short, 16000, np.ones(100, dtype=np.int16))
    with pytest.raises(sources.SourceFileError, match=r"short\.wav: 0\.006 s"):
        sources.read_wav(short)
