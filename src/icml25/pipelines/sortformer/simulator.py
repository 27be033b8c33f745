"""Simulated multi-speaker conversations from the TTS speaker bank (the session simulator).

A session of length L: the number of speakers n ~ Categorical(count_weights) over {1..4}; the
first n turns visit the n speakers in random order (this fixes the arrival order), later turns
switch speaker with probability ``p_switch``; the next onset is the previous turn's end plus a gap
that is ``-U(overlap_range)`` (an overlap, only at a speaker change) with probability
``p_overlap`` and ``Exp(silence_mean)`` otherwise. Onsets never precede the previous onset
(+``min_lead_s``), so the k-th speaker to talk is the k-th label column. Per-speaker gain
+-``gain_db``; a room impulse response per speaker position (synthetic exponential decay, or a
pyroomacoustics ShoeBox in the paper config); white or pink noise at SNR ~ U(snr_range).

Sessions are metadata (one row per segment); audio is rendered on the fly from it, so the same
seed gives bit-identical audio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.signal import fftconvolve

from icml25.pipelines.sortformer.rttm import Segment, segments_to_frames, write_rttm

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class SimConfig:
    """Knobs of the session simulator (``sortformer.sim`` parameters)."""

    duration_s: float = 8.0
    count_weights: tuple[float, ...] = (0.1, 0.3, 0.3, 0.3)
    p_switch: float = 0.85
    p_overlap: float = 0.4
    overlap_range: tuple[float, float] = (0.2, 1.0)
    silence_mean_s: float = 0.2
    min_lead_s: float = 0.2
    gain_db: float = 3.0
    snr_range: tuple[float, float] = (15.0, 40.0)
    rir: str = "synthetic"  # none | synthetic | shoebox
    rt60_range: tuple[float, float] = (0.2, 0.6)


def simulate_split(utterances: pd.DataFrame, speakers: Sequence[str], n_sessions: int,
                   cfg: SimConfig, seed: int, split: str) -> pd.DataFrame:
    """Session metadata: one row per segment (session, split, seed, n_speakers, duration_s, snr_db,
    noise, rt60, speaker, utterance, start, end, gain_db)."""
    if not speakers:
        raise ValueError(f"split {split}: no speakers to simulate sessions with")
    sentences = utterances[utterances["kind"] == "sentence"]
    by_speaker = {s: g for s, g in sentences.groupby("speaker")}
    missing = [s for s in speakers if s not in by_speaker]
    if missing:
        raise ValueError(f"split {split}: speakers {missing} have no sentence utterances")
    weights = np.asarray(cfg.count_weights, dtype=float)
    max_n = min(len(weights), len(speakers))
    weights = weights[:max_n] / weights[:max_n].sum()
    rows = []
    for i in range(n_sessions):
        sseed = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
        rng = np.random.default_rng(sseed)
        n = int(rng.choice(np.arange(1, max_n + 1), p=weights))
        order = [str(s) for s in rng.choice(list(speakers), size=n, replace=False)]
        session = f"{split}_{i:04d}"
        gains = {s: float(rng.uniform(-cfg.gain_db, cfg.gain_db)) for s in order}
        snr = float(rng.uniform(*cfg.snr_range))
        noise = str(rng.choice(["white", "pink"]))
        rt60 = float(rng.uniform(*cfg.rt60_range))
        for seg in _turns(rng, order, by_speaker, cfg):
            rows.append({"session": session, "split": split, "seed": sseed, "n_speakers": n,
                         "duration_s": cfg.duration_s, "snr_db": snr, "noise": noise,
                         "rt60": rt60, "rir": cfg.rir, **seg, "gain_db": gains[seg["speaker"]]})
    return pd.DataFrame(rows)


def _turns(rng: np.random.Generator, order: list[str], by_speaker: Mapping[str, pd.DataFrame],
           cfg: SimConfig) -> list[dict]:
    L, n = cfg.duration_s, len(order)
    out: list[dict] = []
    last_end: dict[str, float] = {}
    prev_onset, prev_end, last = -np.inf, 0.0, None
    turn = 0
    while True:
        if turn < n:
            spk = order[turn]
        elif n > 1 and rng.random() < cfg.p_switch:
            spk = str(rng.choice([s for s in order if s != last]))
        else:
            spk = last
        utt = by_speaker[spk].iloc[int(rng.integers(len(by_speaker[spk])))]
        dur = utt["n_samples"] / SAMPLE_RATE
        if turn == 0:
            onset = float(rng.exponential(cfg.silence_mean_s))
        else:
            if spk != last and rng.random() < cfg.p_overlap:
                gap = -float(rng.uniform(*cfg.overlap_range))
            else:
                gap = float(rng.exponential(cfg.silence_mean_s))
            onset = max(prev_end + gap, prev_onset + cfg.min_lead_s, last_end.get(spk, 0.0))
            if turn < n:  # every requested speaker must get a turn inside the session
                onset = min(onset, L - 1.0)
                onset = max(onset, prev_onset + 0.5 * cfg.min_lead_s)
        if onset >= L - 0.1 or (turn >= n and onset >= L - 0.3):
            break
        end = min(onset + dur, L)
        out.append({"speaker": spk, "utterance": utt["utterance"], "start": round(onset, 3),
                    "end": round(end, 3)})
        prev_onset, prev_end, last = onset, onset + dur, spk
        last_end[spk] = onset + dur
        turn += 1
    return out


def session_segments(rows: pd.DataFrame) -> list[Segment]:
    return [Segment(float(r.start), float(r.end - r.start), str(r.speaker))
            for r in rows.itertuples()]


def session_labels(rows: pd.DataFrame, n_speakers: int = 4, frame_s: float = 0.08) -> np.ndarray:
    """(frames, K) arrival-ordered labels of one session (rows of one session)."""
    n_frames = round(float(rows["duration_s"].iloc[0]) / frame_s)
    return segments_to_frames(session_segments(rows), n_frames, n_speakers, frame_s)


def session_rttm(sessions: pd.DataFrame) -> str:
    return "".join(write_rttm(session_segments(g), name)
                   for name, g in sessions.groupby("session", sort=True))


def _rir(rng: np.random.Generator, rt60: float, kind: str, sr: int) -> np.ndarray | None:
    if kind == "none":
        return None
    if kind == "synthetic":
        n = int(rt60 * sr)
        t = np.arange(n) / sr
        tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)  # -60 dB at rt60
        tail[: int(0.0025 * sr)] = 0.0
        drr_db = rng.uniform(0.0, 8.0)
        tail *= np.sqrt(10 ** (-drr_db / 10) / max((tail ** 2).sum(), 1e-12))
        tail[0] = 1.0
        return tail.astype(np.float32)
    if kind == "shoebox":
        import pyroomacoustics as pra

        room_dim = rng.uniform([4.0, 4.0, 2.6], [8.0, 7.0, 3.2])
        absorption, max_order = pra.inverse_sabine(rt60, room_dim)
        room = pra.ShoeBox(room_dim, fs=sr, materials=pra.Material(absorption),
                           max_order=min(max_order, 12))
        room.add_source(rng.uniform([0.5, 0.5, 1.2], room_dim - [0.5, 0.5, 1.0]))
        room.add_microphone(room_dim / 2 + [0.1, 0.0, -0.5])
        room.compute_rir()
        h = np.asarray(room.rir[0][0], dtype=np.float32)
        return h / np.abs(h).max()
    raise ValueError(f"rir: got {kind!r}; expected none, synthetic or shoebox")


def _noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    white = rng.standard_normal(n)
    if kind == "white":
        return white
    spec = np.fft.rfft(white)
    f = np.arange(spec.size, dtype=float)
    f[0] = 1.0
    return np.fft.irfft(spec / np.sqrt(f), n)


def render_session(rows: pd.DataFrame, audio: Mapping[str, np.ndarray],
                   sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Mix one session's segments (gain, per-speaker RIR, noise at the drawn SNR) -> float32."""
    first = rows.iloc[0]
    rng = np.random.default_rng(int(first["seed"]) + 7)
    n = round(float(first["duration_s"]) * sample_rate)
    mix = np.zeros(n, dtype=np.float64)
    rirs: dict[str, np.ndarray | None] = {}
    for r in rows.itertuples():
        if r.speaker not in rirs:
            rirs[r.speaker] = _rir(rng, float(r.rt60), str(r.rir), sample_rate)
        a = round(r.start * sample_rate)
        x = np.asarray(audio[r.utterance], dtype=np.float64)[: max(n - a, 0)]
        x = x * 10 ** (r.gain_db / 20)
        h = rirs[r.speaker]
        if h is not None:
            x = fftconvolve(x, h)[: max(n - a, 0)]
        mix[a:a + x.size] += x
    speech_power = float((mix ** 2).mean())
    noise = _noise(rng, n, str(first["noise"]))
    noise *= np.sqrt(speech_power / 10 ** (float(first["snr_db"]) / 10)
                     / max(float((noise ** 2).mean()), 1e-12))
    return (mix + noise).astype(np.float32)


def session_stats(sessions: pd.DataFrame, resolution_s: float = 0.01) -> dict[str, float]:
    """Measured overlap ratio (time with >= 2 speakers / speech time), silence ratio (time with
    nobody / session time) and the speaker-count histogram."""
    overlap = speech = silence = total = 0.0
    counts: dict[str, int] = {}
    for _, g in sessions.groupby("session"):
        n = round(float(g["duration_s"].iloc[0]) / resolution_s)
        active = np.zeros(n, dtype=np.int32)
        for r in g.itertuples():
            a, b = round(r.start / resolution_s), round(r.end / resolution_s)
            active[a:b] += 1  # one speaker's own turns never overlap
        overlap += float((active >= 2).sum())
        speech += float((active >= 1).sum())
        silence += float((active == 0).sum())
        total += n
        k = str(g["speaker"].nunique())
        counts[k] = counts.get(k, 0) + 1
    return {"overlap_ratio": overlap / max(speech, 1.0), "silence_ratio": silence / max(total, 1.0),
            "n_sessions": int(sessions["session"].nunique()),
            **{f"sessions_with_{k}_speakers": v for k, v in sorted(counts.items())}}


def swap_first_turns(rows: pd.DataFrame, durations: Mapping[str, float], suffix: str = "_swapped",
                     first: int = 0) -> pd.DataFrame:
    """The session with the first turns of its first two speakers exchanged in time.

    Speaker A (first onset ``t_A``) and B (first onset ``t_B > t_A``): B's first utterance now
    starts at ``t_A`` and A's at ``t_B``; every other turn, the gains, RIRs and noise are kept
    (rows keep their order, so rendering draws the same RIR for the same speaker). B becomes the
    first arrival and A the second: an arrival-order diarizer must exchange its first two
    channels. ``first`` = k swaps the k-th and (k+1)-th arrivals instead (0-based; 0 = the first
    two). ``durations`` gives each utterance's length in seconds. Sessions with fewer than
    ``first + 2`` speakers are refused.
    """
    rows = rows.copy()
    order = rows.sort_values(["start", "speaker"])
    speakers = list(dict.fromkeys(order["speaker"]))
    if first < 0 or len(speakers) < first + 2:
        raise ValueError(f"session {rows['session'].iloc[0]}: the swap of arrivals {first} and "
                         f"{first + 1} needs >= {first + 2} speakers")
    ia = order.index[order["speaker"] == speakers[first]][0]
    ib = order.index[order["speaker"] == speakers[first + 1]][0]
    ta, tb = float(rows.at[ia, "start"]), float(rows.at[ib, "start"])
    length = float(rows["duration_s"].iloc[0])
    for i, t in ((ia, tb), (ib, ta)):
        rows.at[i, "start"] = round(t, 3)
        rows.at[i, "end"] = round(min(t + durations[rows.at[i, "utterance"]], length), 3)
    rows["session"] = rows["session"] + suffix
    return rows


def probe_clip(kind: str, duration_s: float, level_db: float, seed: int,
               sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A clip without speech: ``silence`` (digital zeros), ``white`` or ``pink`` noise at an RMS
    of ``level_db`` dB full scale."""
    n = round(duration_s * sample_rate)
    if kind == "silence":
        return np.zeros(n, dtype=np.float32)
    if kind not in ("white", "pink"):
        raise ValueError(f"probe kind: got {kind!r}; expected silence, white or pink")
    x = _noise(np.random.default_rng(seed), n, kind)
    x *= 10 ** (level_db / 20) / max(float(np.sqrt((x ** 2).mean())), 1e-12)
    return x.astype(np.float32)
