"""Per-channel post-processing of speaker probabilities (TS-VAD style, as the paper's inference).

For each output channel: hysteresis binarisation (a segment starts when p >= onset and ends when
p < offset), pad each segment by ``pad_onset`` before and ``pad_offset`` after, fill gaps shorter
than ``min_duration_off``, drop segments shorter than ``min_duration_on``. Frame k covers
``[k*frame_s, (k+1)*frame_s)``. Knob names follow NeMo's post-processing YAML (trust the names,
not its comments). ``random_search`` tunes the six knobs on validation DER.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from icml25.pipelines.sortformer.rttm import Segment


@dataclass(frozen=True)
class PostProcessing:
    onset: float = 0.5
    offset: float = 0.5
    pad_onset: float = 0.0
    pad_offset: float = 0.0
    min_duration_on: float = 0.0
    min_duration_off: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def hysteresis(p: np.ndarray, onset: float, offset: float) -> list[tuple[int, int]]:
    """Frame runs ``[start, end)`` of one probability track."""
    runs, start = [], None
    for k, v in enumerate(np.asarray(p, dtype=float)):
        if start is None and v >= onset:
            start = k
        elif start is not None and v < offset:
            runs.append((start, k))
            start = None
    if start is not None:
        runs.append((start, len(p)))
    return runs


def channel_segments(p: np.ndarray, pp: PostProcessing, frame_s: float = 0.08,
                     duration_s: float | None = None) -> list[tuple[float, float]]:
    """Post-processed ``(start, end)`` seconds of one channel."""
    limit = duration_s if duration_s is not None else len(p) * frame_s
    segs = [(max(0.0, a * frame_s - pp.pad_onset), min(limit, b * frame_s + pp.pad_offset))
            for a, b in hysteresis(p, pp.onset, pp.offset)]
    merged: list[list[float]] = []
    for a, b in segs:
        if merged and a - merged[-1][1] < pp.min_duration_off:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(round(a, 4), round(b, 4)) for a, b in merged if b - a >= pp.min_duration_on]


def probabilities_to_segments(probs: np.ndarray, pp: PostProcessing, frame_s: float = 0.08,
                              duration_s: float | None = None) -> list[Segment]:
    """(frames, K) probabilities -> segments labelled ``spk0``..``spk{K-1}`` (NeMo's channel names)."""
    probs = np.asarray(probs)
    if probs.ndim != 2 or not np.all(np.isfinite(probs)):
        raise ValueError(f"probabilities must be a finite (frames, K) array, got {probs.shape}")
    out = []
    for k in range(probs.shape[1]):
        out += [Segment(a, b - a, f"spk{k}")
                for a, b in channel_segments(probs[:, k], pp, frame_s, duration_s)]
    return sorted(out, key=lambda s: (s.start, s.speaker))


def random_search(score: Callable[[PostProcessing], float], n_trials: int, seed: int,
                  include: Sequence[PostProcessing] = (PostProcessing(),)
                  ) -> tuple[PostProcessing, float]:
    """Lowest ``score`` over the ``include`` settings and ``n_trials`` random draws."""
    rng = np.random.default_rng(seed)
    candidates = list(include)
    for _ in range(n_trials):
        candidates.append(PostProcessing(
            onset=round(float(rng.uniform(0.3, 0.8)), 3),
            offset=round(float(rng.uniform(0.3, 0.8)), 3),
            pad_onset=round(float(rng.uniform(0.0, 0.2)), 3),
            pad_offset=round(float(rng.uniform(0.0, 0.2)), 3),
            min_duration_on=round(float(rng.uniform(0.0, 0.4)), 3),
            min_duration_off=round(float(rng.uniform(0.0, 0.4)), 3)))
    scores = [score(c) for c in candidates]
    best = int(np.argmin(scores))
    return candidates[best], float(scores[best])
