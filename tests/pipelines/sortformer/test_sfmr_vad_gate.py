"""The band-SNR speech gate on the posteriors (vad_gate.py): speech-free clips give no segments,
speech in noise keeps its segments, and the statistic ignores the noise's level and colour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from icml25.pipelines.sortformer.postprocessing import PostProcessing, probabilities_to_segments
from icml25.pipelines.sortformer.simulator import probe_clip
from icml25.pipelines.sortformer.vad_gate import band_snr_db, gate_probabilities

SR = 16000
BURSTS = [(1.0, 2.52), (3.52, 4.4)]  # seconds of "speech" in the synthetic clip


def _base_gate() -> dict:
    conf = Path(__file__).parents[3] / "conf/base/parameters_sortformer.yml"
    return yaml.safe_load(conf.read_text())["sortformer"]["postprocessing"]["vad_gate"]


GATE = _base_gate()


def _snr(x: np.ndarray, n_frames: int | None = None) -> np.ndarray:
    return band_snr_db(x, n_frames, 0.08, GATE["n_bands"], GATE["floor_quantile"])


def _voiced(n: int, rng: np.random.Generator) -> np.ndarray:
    """A speech-like signal: a harmonic complex (f0 110-140 Hz, harmonics to 4 kHz, 1/k
    amplitudes) with a 4 Hz syllabic envelope."""
    t = np.arange(n) / SR
    f0 = 125 + 15 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(np.sin(k * phase + rng.uniform(0, 2 * np.pi)) / k for k in range(1, 32))
    return x * (0.55 + 0.45 * np.sin(2 * np.pi * 4 * t))


def _speech_in_noise(kind: str, snr_db: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros(round(6.0 * SR))
    for a, b in BURSTS:
        x[round(a * SR):round(b * SR)] = _voiced(round((b - a) * SR), rng)
    speech_power = float(np.mean(np.concatenate(
        [x[round(a * SR):round(b * SR)] for a, b in BURSTS]) ** 2))
    noise = probe_clip(kind, 6.0, 0.0, seed + 1).astype(np.float64)
    noise *= np.sqrt(speech_power / 10 ** (snr_db / 10) / np.mean(noise ** 2))
    return (0.1 * (x + noise)).astype(np.float32)


def _always_on(n_frames: int) -> np.ndarray:
    """A diarizer that fires on everything (what the models did on some noise probes)."""
    probs = np.full((n_frames, 4), 0.05, np.float32)
    probs[:, 0] = 0.9
    return probs


@pytest.mark.parametrize("kind", ["silence", "white", "pink"])
@pytest.mark.parametrize("level_db", [-70.0, -50.0, -20.0, -3.0])
def test_speech_free_clips_give_no_segments(kind, level_db):
    for seed in range(3):
        clip = probe_clip(kind, 15.0, level_db, seed)
        snr = _snr(clip)
        assert snr.shape == (round(15.0 / 0.08),)
        assert snr.max() < GATE["threshold_db"], (kind, level_db, seed, snr.max())
        probs = _always_on(snr.size)
        assert probabilities_to_segments(probs, PostProcessing(), 0.08, 15.0)  # ungated: fires
        gated = gate_probabilities(probs, snr, GATE["threshold_db"])
        assert probabilities_to_segments(gated, PostProcessing(), 0.08, 15.0) == []
    if kind == "silence":  # digital zeros: every band exactly at its floor
        assert np.array_equal(_snr(probe_clip(kind, 2.0, level_db, 0)), np.zeros(25, np.float32))


# 15 dB: the simulator's lowest SNR (sim.snr_range); the 4 Hz envelope's troughs are 20 dB down
@pytest.mark.parametrize(("kind", "snr_db"), [("white", 15.0), ("pink", 15.0), ("white", 30.0)])
def test_speech_in_noise_keeps_its_segments(kind, snr_db):
    x = _speech_in_noise(kind, snr_db)
    snr = _snr(x)
    frames = np.arange(snr.size) * 0.08
    inside = np.zeros(snr.size, bool)
    near = np.zeros(snr.size, bool)
    for a, b in BURSTS:
        inside |= (frames >= a) & (frames + 0.08 <= b)
        near |= (frames + 0.08 > a - 0.08) & (frames < b + 0.08)
    assert snr[inside].min() >= GATE["threshold_db"] + 2.0  # clear of the threshold
    assert snr[~near].max() < GATE["threshold_db"]          # the pauses are noise
    gated = gate_probabilities(_always_on(snr.size), snr, GATE["threshold_db"])
    segs = probabilities_to_segments(gated, PostProcessing(), 0.08, 6.0)
    assert [s.speaker for s in segs] == ["spk0", "spk0"]
    for s, (a, b) in zip(segs, BURSTS, strict=True):
        assert abs(s.start - a) <= 0.08 + 1e-9 and abs(s.end - b) <= 0.08 + 1e-9, (s, a, b)


def test_band_snr_ignores_the_recording_level():
    x = _speech_in_noise("pink", 15.0)
    ref = _snr(x)
    for gain in (1e-3, 3.0):
        assert np.allclose(_snr((x * gain).astype(np.float32)), ref, atol=0.05)


def test_band_snr_frames_follow_the_requested_count_and_the_sample_rate():
    x = _speech_in_noise("white", 20.0)
    assert _snr(x).shape == (75,)
    assert _snr(x, 76).shape == (76,)  # one frame past the audio: repeats the last hop
    from icml25.core.speech import resample
    x8 = resample(x, SR, 8000)
    s8 = band_snr_db(x8, 75, 0.08, GATE["n_bands"], GATE["floor_quantile"], sample_rate=8000)
    assert ((s8 >= GATE["threshold_db"]) == (_snr(x) >= GATE["threshold_db"])).mean() > 0.9


def test_gate_zeroes_only_the_gated_frames():
    rng = np.random.default_rng(0)
    probs = rng.uniform(size=(6, 3)).astype(np.float32)
    snr = np.array([0.0, 5.0, 3.99, 4.0, 20.0, -1.0], np.float32)
    out = gate_probabilities(probs, snr, 4.0)
    keep = snr >= 4.0
    assert np.array_equal(out[keep], probs[keep]) and not out[~keep].any()
    assert out.dtype == probs.dtype


def test_bad_gate_input_is_refused():
    with pytest.raises(ValueError, match="VAD gate"):
        gate_probabilities(np.zeros((5, 4)), np.zeros(6), 4.0)
    with pytest.raises(ValueError, match="finite"):
        gate_probabilities(np.zeros((2, 4)), np.array([1.0, np.nan]), 4.0)
    with pytest.raises(ValueError, match="floor_quantile"):
        band_snr_db(np.zeros(1600, np.float32), floor_quantile=1.0)
    with pytest.raises(ValueError, match="frame_s"):
        band_snr_db(np.zeros(1600, np.float32), frame_s=0.085)
    with pytest.raises(ValueError, match="NaN"):
        band_snr_db(np.full(1600, np.nan, np.float32))
