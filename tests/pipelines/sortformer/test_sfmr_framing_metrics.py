"""Framing and RTTM round trip, DER with pyannote, cpWER, post-processing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from icml25.pipelines.sortformer.postprocessing import (
    PostProcessing,
    channel_segments,
    hysteresis,
    probabilities_to_segments,
    random_search,
)
from icml25.pipelines.sortformer.rttm import (
    Segment,
    frames_to_segments,
    read_rttm,
    segments_to_frames,
    write_rttm,
)
from icml25.pipelines.sortformer.scoring import cp_errors, cpwer, der, der_components


def test_segment_to_frames_majority_rule():
    frames = segments_to_frames([Segment(0.0, 0.36, "A")], n_frames=6, n_speakers=4)
    assert frames[:, 0].tolist() == [1, 1, 1, 1, 0, 0]  # frame 4: 0.32-0.36 is half: inactive
    assert frames[:, 1:].sum() == 0
    assert segments_to_frames([Segment(0.0, 0.37, "A")], 6)[4, 0] == 1


def test_frames_rttm_frames_round_trip():
    rng = np.random.default_rng(0)
    frames = (rng.random((50, 3)) > 0.6).astype(np.float32)
    frames[0, 0] = 1  # column order = arrival order
    frames[:3, 1] = 0
    frames[3, 1] = 1
    frames[:6, 2] = 0
    frames[6, 2] = 1
    segs = frames_to_segments(frames, 0.08, names=["a", "b", "c"])
    parsed = read_rttm(write_rttm(segs, "s1"))["s1"]
    back = segments_to_frames(parsed, 50, 3)
    assert np.array_equal(back, frames)


def test_columns_follow_arrival_order():
    segs = [Segment(2.0, 1.0, "late"), Segment(0.5, 1.0, "early")]
    frames = segments_to_frames(segs, 50, 4)
    assert frames[:, 0].argmax() < frames[:, 1].argmax()


def test_bad_rttm_and_too_many_speakers_are_refused():
    with pytest.raises(ValueError, match="negative or invalid duration"):
        read_rttm("SPEAKER s1 1 0.50 -0.20 <NA> <NA> A <NA> <NA>\n")
    with pytest.raises(ValueError, match="RTTM line 1"):
        read_rttm("SPEAKER s1 1\n")
    with pytest.raises(ValueError, match="negative duration"):
        segments_to_frames([Segment(1.0, -0.5, "A")], 20)
    with pytest.raises(ValueError, match="5 speakers but the model has 4 outputs"):
        segments_to_frames([Segment(i, 0.5, f"s{i}") for i in range(5)], 100, 4)


def test_der_known_answers_and_relabelling():
    ref = [Segment(0, 10, "A"), Segment(10, 10, "B")]
    hyp = [Segment(0, 10.5, "x"), Segment(10.5, 9.5, "y")]
    assert der(ref, hyp, 20.0, 0.0) == pytest.approx(0.025)
    assert der(ref, hyp, 20.0, 0.25) == pytest.approx(0.25 / 19)
    relabelled = [Segment(s.start, s.duration, {"x": "q", "y": "p"}[s.speaker]) for s in hyp]
    assert der(ref, relabelled, 20.0, 0.0) == pytest.approx(0.025)


def test_der_counts_overlap_and_components():
    ref = [Segment(0, 4, "A"), Segment(2, 4, "B")]  # 2 s overlap, 8 s of speech
    hyp = [Segment(0, 4, "x")]
    d = der_components([ref], [hyp], [6.0], 0.0)
    assert d["miss"] == pytest.approx(4 / 8) and d["der"] == pytest.approx(4 / 8)
    assert d["false_alarm"] == 0 and d["confusion"] == 0


def test_cpwer_known_answer_and_brute_force():
    assert cpwer([{"A": "one two three", "B": "four five"}],
                 [{"x": "four five", "y": "one two tree"}]) == pytest.approx(0.2)
    assert cp_errors({"A": "a b"}, {"x": "a", "y": "b c"}) == (3, 2)
    # an extra hypothesis speaker is matched to an empty reference: all its words are insertions
    ref, hyp = {"A": "a b c"}, {"x": "a b", "y": "c"}
    assert cp_errors(ref, hyp)[0] == min(
        1 + 1, 3 + 2)  # (A->x: 1 deletion; y inserted: 1) vs (A->y: 2 del; x: 2 ins)
    assert len(list(itertools.permutations(range(2)))) == 2


def test_hysteresis_and_postprocessing_on_a_hand_made_track():
    p = np.array([0.1, 0.7, 0.6, 0.45, 0.3, 0.1, 0.8, 0.1, 0.1, 0.9, 0.9, 0.9, 0.2])
    assert hysteresis(p, onset=0.65, offset=0.4) == [(1, 4), (6, 7), (9, 12)]
    pp = PostProcessing(onset=0.65, offset=0.4, pad_onset=0.0, pad_offset=0.0,
                        min_duration_on=0.1, min_duration_off=0.0)
    # the one-frame (0.08 s) segment at frame 6 is dropped by min_duration_on
    assert channel_segments(p, pp) == [(0.08, 0.32), (0.72, 0.96)]
    pp2 = PostProcessing(onset=0.65, offset=0.4, pad_onset=0.04, pad_offset=0.0,
                         min_duration_on=0.0, min_duration_off=0.2)
    # padded runs (0.04, 0.32), (0.44, 0.56), (0.68, 0.96): both 0.12 s gaps are filled
    assert channel_segments(p, pp2) == [(0.04, 0.96)]
    pp3 = PostProcessing(onset=0.65, offset=0.4, pad_onset=0.04, pad_offset=0.0,
                         min_duration_on=0.0, min_duration_off=0.1)
    assert channel_segments(p, pp3) == [(0.04, 0.32), (0.44, 0.56), (0.68, 0.96)]
    segs = probabilities_to_segments(np.stack([p, np.zeros_like(p)], 1), pp)
    assert {s.speaker for s in segs} == {"spk0"}


def test_random_search_returns_the_best_candidate():
    best, score = random_search(lambda c: abs(c.onset - 0.55), n_trials=30, seed=0)
    assert score == pytest.approx(abs(best.onset - 0.55))
    assert score <= 0.05
