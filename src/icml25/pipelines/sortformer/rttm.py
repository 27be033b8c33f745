"""Reference segments, 80 ms label frames and RTTM text.

Frame k covers ``[k*frame_s, (k+1)*frame_s)``; it is active for a speaker when at least half of
its 10 ms sub-frames are covered by that speaker's speech: the mean of the eight sub-frames must
exceed 0.5 (a strict majority, so a frame half covered is inactive). Speaker columns are in
arrival order (first onset first). The same window rule turns frames back into segments, so
frames -> RTTM -> frames is the identity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

SUBFRAME_S = 0.01


@dataclass(frozen=True)
class Segment:
    """One speech turn: ``speaker`` talks in ``[start, start + duration)`` seconds."""

    start: float
    duration: float
    speaker: str

    @property
    def end(self) -> float:
        return self.start + self.duration


def validate_segments(segments: Iterable[Segment], where: str = "segments") -> list[Segment]:
    """Refuse negative/NaN starts or durations with a clear error."""
    out = list(segments)
    for i, seg in enumerate(out):
        if not (math.isfinite(seg.start) and math.isfinite(seg.duration)):
            raise ValueError(f"{where}[{i}] ({seg.speaker}): start/duration must be finite, "
                             f"got {seg.start}/{seg.duration}")
        if seg.duration < 0:
            raise ValueError(f"{where}[{i}] ({seg.speaker}): negative duration {seg.duration}")
        if seg.start < 0:
            raise ValueError(f"{where}[{i}] ({seg.speaker}): negative start {seg.start}")
    return out


def arrival_order(segments: Sequence[Segment]) -> list[str]:
    """Speakers sorted by their first onset (ties by name, so the order is deterministic)."""
    first: dict[str, float] = {}
    for seg in segments:
        if seg.duration > 0:
            first[seg.speaker] = min(first.get(seg.speaker, math.inf), seg.start)
    return sorted(first, key=lambda s: (first[s], s))


def segments_to_frames(segments: Sequence[Segment], n_frames: int, n_speakers: int = 4,
                       frame_s: float = 0.08, speakers: Sequence[str] | None = None,
                       strict: bool = True) -> np.ndarray:
    """(n_frames, n_speakers) 0/1 labels, columns in arrival order (or the given ``speakers``).

    ``strict``: a session with more speakers than outputs is an error; otherwise the late
    arrivals are dropped (as NeMo does for training data).
    """
    segments = validate_segments(segments)
    order = list(speakers) if speakers is not None else arrival_order(segments)
    if len(order) > n_speakers and strict:
        raise ValueError(f"session has {len(order)} speakers but the model has {n_speakers} "
                         "outputs")
    sub_per_frame = round(frame_s / SUBFRAME_S)
    n_sub = n_frames * sub_per_frame
    fine = np.zeros((n_sub, n_speakers), dtype=np.float32)
    for seg in segments:
        if seg.speaker not in order[:n_speakers]:
            continue
        col = order.index(seg.speaker)
        # 10 ms sub-frame i covers [i*10ms, (i+1)*10ms): mark those whose centre is inside
        a = math.ceil(seg.start / SUBFRAME_S - 0.5 - 1e-9)
        b = math.ceil(seg.end / SUBFRAME_S - 0.5 - 1e-9)
        fine[max(a, 0):min(b, n_sub), col] = 1.0
    frac = fine.reshape(n_frames, sub_per_frame, n_speakers).mean(axis=1)
    return (frac > 0.5 + 1e-9).astype(np.float32)


def frames_to_segments(frames: np.ndarray, frame_s: float = 0.08,
                       names: Sequence[str] | None = None) -> list[Segment]:
    """Runs of active frames per column -> segments ``[k0*frame_s, k1*frame_s)``."""
    frames = np.asarray(frames)
    if frames.ndim != 2:
        raise ValueError(f"frames must be (n_frames, n_speakers), got shape {frames.shape}")
    names = list(names) if names is not None else [f"spk{k}" for k in range(frames.shape[1])]
    out = []
    for k in range(frames.shape[1]):
        active = np.concatenate([[0], (frames[:, k] >= 0.5).astype(np.int8), [0]])
        edges = np.flatnonzero(np.diff(active))
        for s, e in zip(edges[::2], edges[1::2], strict=True):
            out.append(Segment(round(s * frame_s, 6), round((e - s) * frame_s, 6), names[k]))
    return sorted(out, key=lambda g: (g.start, g.speaker))


def write_rttm(segments: Sequence[Segment], session: str) -> str:
    """NIST RTTM lines (``SPEAKER <file> 1 <start> <dur> <NA> <NA> <spk> <NA> <NA>``)."""
    segments = validate_segments(segments)
    return "".join(f"SPEAKER {session} 1 {s.start:.3f} {s.duration:.3f} <NA> <NA> {s.speaker} "
                   "<NA> <NA>\n" for s in segments)


def read_rttm(text: str) -> dict[str, list[Segment]]:
    """Parse RTTM text into ``{session: [Segment]}``; malformed lines or negative durations raise."""
    sessions: dict[str, list[Segment]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith(";"):
            continue
        parts = line.split()
        if parts[0] != "SPEAKER" or len(parts) < 8:
            raise ValueError(f"RTTM line {n}: expected 'SPEAKER <file> <chan> <start> <dur> ... "
                             f"<speaker> ...', got {line!r}")
        try:
            start, dur = float(parts[3]), float(parts[4])
        except ValueError as err:
            raise ValueError(f"RTTM line {n}: start/duration are not numbers: {line!r}") from err
        if not math.isfinite(dur) or dur < 0:
            raise ValueError(f"RTTM line {n}: negative or invalid duration {parts[4]}")
        if not math.isfinite(start) or start < 0:
            raise ValueError(f"RTTM line {n}: negative or invalid start {parts[3]}")
        sessions.setdefault(parts[1], []).append(Segment(start, dur, parts[7]))
    return sessions
