"""Swap test, speech-free probes and sessions of five or more speakers (labels and metrics)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from icml25.pipelines.sortformer.features import log_mel
from icml25.pipelines.sortformer.nodes import (
    _scores,
    _swap_pairs,
    arrival_gap_s,
    read_wav,
    swap_order_rate,
    swap_scores,
)
from icml25.pipelines.sortformer.postprocessing import PostProcessing
from icml25.pipelines.sortformer.rttm import arrival_order
from icml25.pipelines.sortformer.simulator import (
    SimConfig,
    probe_clip,
    session_labels,
    session_segments,
    simulate_split,
    swap_first_turns,
)

SPEAKERS = list("abcdefg")


@pytest.fixture(scope="module")
def bank() -> tuple[pd.DataFrame, dict[str, float]]:
    rng = np.random.default_rng(1)
    rows = [{"utterance": f"{s}_{i}", "speaker": s, "kind": "sentence",
             "n_samples": int(rng.uniform(0.6, 1.5) * 16000)} for s in SPEAKERS for i in range(6)]
    frame = pd.DataFrame(rows)
    return frame, {r.utterance: r.n_samples / 16000 for r in frame.itertuples()}


def test_swap_exchanges_the_first_two_arrivals_and_nothing_else(bank):
    utt, durations = bank
    cfg = SimConfig(duration_s=8.0, count_weights=(0.0, 0.5, 0.5))
    sessions = simulate_split(utt, SPEAKERS, 12, cfg, 3, "swap")
    for name, g in sessions.groupby("session"):
        twin = swap_first_turns(g, durations)
        a, b = arrival_order(session_segments(g)), arrival_order(session_segments(twin))
        assert b[:2] == a[1::-1] and b[2:] == a[2:], name
        assert twin["session"].iloc[0] == f"{name}_swapped"
        changed = (twin[["start", "end"]].to_numpy() != g[["start", "end"]].to_numpy()).any(1)
        assert changed.sum() == 2  # the two first turns
        ya, yb = session_labels(g), session_labels(twin)
        assert ya.shape == yb.shape and ya[:, 2:].sum() == pytest.approx(yb[:, 2:].sum())
        if g["speaker"].nunique() >= 3:  # first=1: the second and third arrivals change places
            later = swap_first_turns(g, durations, "_swapped1", first=1)
            c = arrival_order(session_segments(later))
            assert c[0] == a[0] and c[1:3] == a[2:0:-1] and c[3:] == a[3:], name
            assert g["speaker"].nunique() == 3  # count_weights stop at 3 speakers
            with pytest.raises(ValueError, match=r"arrivals 2 and 3 needs >= 4 speakers"):
                swap_first_turns(g, durations, first=2)
    with pytest.raises(ValueError, match="needs >= 2 speakers"):
        one = simulate_split(utt, SPEAKERS, 1, SimConfig(duration_s=4.0, count_weights=(1.0,)),
                             0, "x")
        swap_first_turns(one, durations)


def test_swap_order_rate_counts_pairs_where_both_follow_arrival_order():
    y = np.zeros((10, 3), np.float32)
    y[:5, 0] = 1
    y[5:, 1] = 1
    good, flipped = y.copy(), y[:, [1, 0, 2]]
    assert swap_order_rate([good, good], [y, y], [good, flipped], [y, y]) == 0.5
    assert swap_order_rate([flipped], [y], [good], [y]) == 0.0
    with pytest.raises(ValueError, match="no session pairs"):
        swap_order_rate([], [], [], [])


def _two_speakers(n: int, on_a: int, on_b: int) -> np.ndarray:
    y = np.zeros((n, 4), np.float32)
    y[on_a:on_a + 8, 0] = 1
    y[on_b:on_b + 8, 1] = 1
    return y


def test_arrival_gap_is_the_onset_difference_of_the_first_two_columns():
    assert arrival_gap_s(_two_speakers(40, 3, 5), 0.08) == pytest.approx(0.16)
    assert arrival_gap_s(_two_speakers(40, 0, 20), 0.08) == pytest.approx(1.6)
    with pytest.raises(ValueError, match="two speakers"):
        arrival_gap_s(_two_speakers(40, 0, 20)[:, :1], 0.08)
    one = _two_speakers(40, 0, 20)
    one[:, 1] = 0
    with pytest.raises(ValueError, match="two speakers"):
        arrival_gap_s(one, 0.08)


def test_swap_scores_split_the_pairs_by_onset_gap_and_keep_each_outcome():
    """Three pairs, first onsets 0.16, 0.4 and 1.6 s apart (near_gap_s 0.8: two near, one
    far). The model passes the first and the far pair and fails the second (its twin's channels
    are flipped): overall 2/3, near 1/2, far 1/1, and each pair's outcome under its name."""
    ya = [_two_speakers(40, 3, 5), _two_speakers(40, 0, 5), _two_speakers(40, 0, 20)]
    yb = [y[:, [1, 0, 2, 3]] for y in ya]  # the twins: the first two arrivals exchanged
    pa = [y.copy() for y in ya]
    pb = [yb[0], yb[1][:, [1, 0, 2, 3]], yb[2]]
    features = {"swap": {"names": ["s0", "s1", "s2"], "labels": ya},
                "swap_twin": {"names": ["s0_swapped", "s1_swapped", "s2_swapped"], "labels": yb}}
    out = swap_scores([pa, pb], features, near_gap_s=0.8, frame_s=0.08)
    assert out["swap_order_rate"] == pytest.approx(2 / 3)
    assert out["swap_order_rate_near"] == pytest.approx(0.5)
    assert out["swap_order_rate_far"] == 1.0
    assert out["swap_n_near"] == 2
    assert json.loads(out["swap_pairs"]) == {"s0": 1, "s1": 0, "s2": 1}
    assert swap_order_rate(pa, ya, pb, yb) == out["swap_order_rate"]
    far_only = swap_scores([pa, pb], features, near_gap_s=0.1, frame_s=0.08)
    assert np.isnan(far_only["swap_order_rate_near"]) and far_only["swap_n_near"] == 0


def test_swap_pairs_gather_each_pair_over_the_seeds_in_seed_order():
    table = pd.DataFrame([
        {"variant": "sort", "seed": 1, "split": "test", "swap_pairs": '{"s0": 0, "s1": 1}'},
        {"variant": "sort", "seed": 0, "split": "test", "swap_pairs": '{"s0": 1, "s1": 1}'},
        {"variant": "sort", "seed": 0, "split": "test_inpool", "swap_pairs": '{"s0": 0, "s1": 0}'},
    ])
    assert _swap_pairs(table) == {"sort": {"swap_order_rate": {"s0": [1.0, 0.0],
                                                               "s1": [1.0, 1.0]}}}
    assert _swap_pairs(table.drop(columns="swap_pairs")) == {}


def test_swap_test_scores_an_arrival_ordered_model_1_and_a_voice_fixed_model_0(bank):
    """On simulated sessions and their swapped twins: a diarizer whose channel k is the k-th
    arrival (the reference itself, with some blur) passes every pair; one whose channels are
    tied to voices (channel = the speaker's rank by name, whatever the order of arrival) passes
    none, because in one session of each pair its first two channels follow the voices and not
    the arrivals."""
    utt, durations = bank
    cfg = SimConfig(duration_s=8.0, count_weights=(0.0, 0.4, 0.3, 0.3))
    sessions = simulate_split(utt, SPEAKERS, 16, cfg, 5, "swap")
    ordered, fixed, labels = ([], []), ([], []), ([], [])
    for _, g in sessions.groupby("session", sort=True):
        for side, rows in enumerate((g, swap_first_turns(g, durations))):
            y = session_labels(rows)
            arrival = arrival_order(session_segments(rows))
            by_voice = sorted(arrival)  # channel c plays the voice that sorts c-th by name
            labels[side].append(y)
            ordered[side].append(np.clip(0.8 * y + 0.1, 0.0, 1.0))
            fixed[side].append(np.stack([y[:, arrival.index(s)] if s in arrival else 0 * y[:, 0]
                                         for s in by_voice]
                                        + [0 * y[:, 0]] * (4 - len(by_voice)), axis=1))
    assert swap_order_rate(ordered[0], labels[0], ordered[1], labels[1]) == 1.0
    assert swap_order_rate(fixed[0], labels[0], fixed[1], labels[1]) == 0.0
    # all-silent output matches nothing: channel 0 "wins" both columns by tie, which fails
    silent = [np.zeros_like(y) for y in labels[0]]
    assert swap_order_rate(silent, labels[0], silent, labels[0]) == 0.0


def test_probes_are_speech_free_and_leveled():
    assert not probe_clip("silence", 1.0, -20.0, 0).any()
    for kind in ("white", "pink"):
        x = probe_clip(kind, 2.0, -30.0, 1)
        assert 20 * np.log10(np.sqrt((x.astype(np.float64) ** 2).mean())) == pytest.approx(-30.0)
        assert np.isfinite(log_mel(x, 16)).all()
    assert np.isfinite(log_mel(probe_clip("silence", 1.0, 0.0, 0), 16)).all()
    with pytest.raises(ValueError, match="probe kind"):
        probe_clip("babble", 1.0, -30.0, 0)


def test_five_and_six_speaker_sessions_get_labels_and_metrics(bank):
    utt, _ = bank
    for k in (5, 6):
        cfg = SimConfig(duration_s=14.0, count_weights=(0,) * (k - 1) + (1.0,), p_overlap=0.5)
        sessions = simulate_split(utt, SPEAKERS, 3, cfg, k, "test")
        labels, names = [], []
        for name, g in sessions.groupby("session"):
            assert g["speaker"].nunique() == k
            y = session_labels(g, k, 0.08)
            assert y.shape == (175, k) and (y.sum(0) > 0).all()
            first = [int(np.flatnonzero(y[:, j])[0]) for j in range(k)]
            assert first == sorted(first)  # columns in arrival order
            labels.append(y)
            names.append(name)
        noisy = [np.clip(y * 0.9 + 0.05, 0, 1) for y in labels]
        s = _scores(noisy, labels, names, sessions, PostProcessing(), 0.08)
        assert s["f1_ats"] > 0.9 and s["der_c0"] < 0.1 and s["count_accuracy"] == 1.0
        assert np.isfinite(s["f1_gap_overlap"]) and s["f1_gap_overlap"] >= 0.0
        with pytest.raises(ValueError, match=f"{k} speakers but the model has 4 outputs"):
            session_labels(sessions[sessions["session"] == names[0]], 4, 0.08)


def test_read_wav_refuses_what_is_not_audio(tmp_path):
    bad = tmp_path / "x.wav"
    bad.write_text("not audio")
    with pytest.raises(ValueError, match=r"audio_check\.path: cannot read"):
        read_wav(str(bad))


def test_clustering_baseline_takes_speech_free_clips():
    """Its VAD is relative to the loudest frame, so noise and even digital silence count as speech
    (one speaker); the windows' identical embeddings no longer stop the cosine clustering."""
    from icml25.pipelines.sortformer.clustering import cluster_diarize
    for kind in ("silence", "white"):
        f = cluster_diarize(probe_clip(kind, 4.0, -40.0, 0), threshold=0.5)
        assert f.shape[0] == 50 and f.sum(axis=1).max() <= 1.0
