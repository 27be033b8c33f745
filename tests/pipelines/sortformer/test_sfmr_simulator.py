"""Speaker bank and session simulator (overlap/silence ratios, disjoint speakers, determinism)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from icml25.pipelines.sortformer.rttm import arrival_order, read_rttm, segments_to_frames
from icml25.pipelines.sortformer.simulator import (
    SimConfig,
    render_session,
    session_labels,
    session_rttm,
    session_segments,
    session_stats,
    simulate_split,
)
from icml25.pipelines.sortformer.speaker_bank import (
    build_bank,
    make_speakers,
    trim_and_normalise,
)

SPEAKERS = list("abcdefgh")


@pytest.fixture(scope="module")
def fake_bank(noise_bank) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Sentence 'utterances' of 1.1-2.4 s (noise bursts): the simulator needs only lengths."""
    return noise_bank(SPEAKERS, 8, (1.1, 2.4))


def test_measured_overlap_and_silence_are_near_targets(fake_bank):
    sessions = simulate_split(fake_bank[0], SPEAKERS, 50, SimConfig(), seed=0, split="train")
    stats = session_stats(sessions)
    assert abs(stats["overlap_ratio"] - 0.12) <= 0.05
    assert abs(stats["silence_ratio"] - 0.10) <= 0.05


def test_requested_speaker_counts_and_arrival_order(fake_bank):
    sessions = simulate_split(fake_bank[0], SPEAKERS, 40, SimConfig(), seed=1, split="test")
    rttm = read_rttm(session_rttm(sessions))
    for name, g in sessions.groupby("session"):
        assert g["speaker"].nunique() == g["n_speakers"].iloc[0]
        labels = session_labels(g)
        first = [np.flatnonzero(labels[:, k])[0] for k in range(4) if labels[:, k].any()]
        assert first == sorted(first)  # column order = first-onset order
        order = arrival_order(rttm[name])
        assert np.array_equal(segments_to_frames(rttm[name], labels.shape[0], 4, speakers=order),
                              labels)
        assert order == arrival_order(session_segments(g))


def test_same_seed_same_audio(fake_bank):
    utts, audio = fake_bank
    a = simulate_split(utts, SPEAKERS, 3, SimConfig(), seed=5, split="val")
    b = simulate_split(utts, SPEAKERS, 3, SimConfig(), seed=5, split="val")
    pd.testing.assert_frame_equal(a, b)
    g = a[a["session"] == a["session"].iloc[0]]
    x1, x2 = render_session(g, audio), render_session(g, audio)
    assert np.array_equal(x1, x2) and x1.shape == (int(SimConfig().duration_s * 16000),)
    c = simulate_split(utts, SPEAKERS, 3, SimConfig(), seed=6, split="val")
    assert not a[["start", "end"]].equals(c[["start", "end"]])


def test_train_and_test_speakers_share_no_trait():
    specs = make_speakers(6, 3, 0, ["m1", "f1"], ["m5", "f4"], [30, 40], [60, 70],
                          ["en-us"], ["awb"], ["slt"])
    train = [s for s in specs if s.split == "train"]
    test = [s for s in specs if s.split == "test"]
    assert len(train) == 6 and len(test) == 3
    assert not {s.voice for s in train} & {s.voice for s in test}
    with pytest.raises(ValueError, match="disjoint"):
        make_speakers(2, 2, 0, ["m1"], ["m1"], [30], [60], ["en-us"], [], [])


def test_tts_bank_trims_and_is_deterministic():
    specs = make_speakers(1, 1, 0, ["m1"], ["f4"], [40], [70], ["en-us"], [], [],
                          flite_share=0.0)
    a = build_bank(specs, 1, (2, 3), seed=0, asr_words=False, progress=False)
    b = build_bank(specs, 1, (2, 3), seed=0, asr_words=False, progress=False)
    assert a.equals(b) and len(a) == 2
    assert (a["n_samples"] > 0.3 * 16000).all()
    x = np.concatenate([np.zeros(8000), np.ones(1600) * 0.5, np.zeros(8000)]).astype(np.float32)
    y = trim_and_normalise(x)
    assert 1600 <= y.size <= 1600 + 2 * 320
    assert np.sqrt((y ** 2).mean()) == pytest.approx(0.1, rel=0.05)
