"""Speaker bank from offline TTS, split by speaker.

A "speaker" is a fixed synthesiser identity: engine + voice + variant + pitch + rate + a warp
factor (resampling by 0.92..1.08 shifts formants and pitch together; it is the only trait flite
takes besides its voice). Train and test speakers are disjoint identities: the test pool uses
espeak-ng variants, pitch values and a flite voice that no training speaker uses, so DER on the
test split is measured on speakers never seen in training.

Utterances are trimmed (20 ms frames below -40 dB re the maximum are cut at both ends),
RMS-normalised and stored as int16 bytes with their text and word count.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from icml25.core.speech import resample, synthesize

SAMPLE_RATE = 16000

#: Words of the simulated conversations (text is drawn from this list with the bank's seed).
CONVERSATION_WORDS = (
    "the", "a", "we", "you", "they", "it", "this", "that", "there", "here", "what", "when",
    "where", "how", "why", "who", "some", "many", "all", "any", "time", "day", "week", "year",
    "morning", "evening", "night", "people", "family", "friend", "house", "car", "road", "city",
    "river", "garden", "market", "office", "school", "window", "table", "paper", "music", "phone",
    "water", "coffee", "dinner", "lunch", "weather", "meeting", "project", "report", "answer",
    "question", "number", "picture", "story", "letter", "price", "plan", "think", "know", "want",
    "need", "like", "make", "take", "give", "find", "tell", "ask", "call", "bring", "carry",
    "keep", "leave", "move", "open", "close", "start", "finish", "build", "write", "read", "send",
    "pay", "learn", "watch", "walk", "drive", "cook", "visit", "good", "new", "old", "big",
    "small", "long", "short", "early", "late", "quick", "slow", "happy", "simple", "ready",
    "important", "really", "maybe", "often", "always", "never", "today", "tomorrow", "yesterday",
    "again", "already", "soon", "together",
)

#: The ASR stage's vocabulary: ten digits and fourteen command words.
ASR_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "yes", "no",
    "up", "down", "left", "right", "on", "off", "stop", "go", "start", "pause", "next", "back",
)


@dataclass(frozen=True)
class SpeakerSpec:
    """One TTS identity."""

    speaker: str
    split: str  # "train" or "test"
    engine: str
    voice: str  # espeak-ng voice with variant (en-us+f3) or flite voice (slt)
    pitch: int
    rate_wpm: int
    warp: float  # resampling factor applied after synthesis


def make_speakers(n_train: int, n_test: int, seed: int,
                  train_variants: Sequence[str], test_variants: Sequence[str],
                  train_pitches: Sequence[int], test_pitches: Sequence[int],
                  espeak_voices: Sequence[str], train_flite: Sequence[str],
                  test_flite: Sequence[str], flite_share: float = 0.2,
                  rate_range: tuple[int, int] = (130, 185),
                  warp_range: tuple[float, float] = (0.92, 1.08)) -> list[SpeakerSpec]:
    """Draw ``n_train`` + ``n_test`` distinct identities; the pools share no variant, pitch value
    or flite voice, and each pool has its own random stream (the test pool is the same for any
    ``n_train``)."""
    shared = (set(train_variants) & set(test_variants)) | (set(train_flite) & set(test_flite))
    if shared or set(train_pitches) & set(test_pitches):
        raise ValueError("train and test speaker traits must be disjoint, shared: "
                         f"{sorted(shared | (set(train_pitches) & set(test_pitches)), key=str)}")
    out: list[SpeakerSpec] = []
    seen: set[tuple] = set()
    for stream, (split, n, variants, pitches, flites) in enumerate((
            ("train", n_train, train_variants, train_pitches, train_flite),
            ("test", n_test, test_variants, test_pitches, test_flite))):
        # one random stream per pool: the test speakers do not change with ``n_train``, so runs
        # with different training pools are scored on the same unseen voices
        rng = np.random.default_rng([seed, stream])
        tries = 0
        while sum(s.split == split for s in out) < n:
            tries += 1
            if tries > 1000 * n:
                raise ValueError(f"cannot draw {n} distinct {split} speakers from the traits given")
            rate = int(rng.integers(rate_range[0], rate_range[1] + 1))
            warp = round(float(rng.uniform(*warp_range)), 3)
            if flites and rng.random() < flite_share:
                key = ("flite", str(rng.choice(flites)), 50, round(warp, 2))
                spec = SpeakerSpec("", split, "flite", key[1], 50, rate, warp)
            else:
                voice = f"{rng.choice(espeak_voices)}+{rng.choice(variants)}"
                pitch = int(rng.choice(pitches))
                key = ("espeak-ng", voice, pitch)
                spec = SpeakerSpec("", split, "espeak-ng", voice, pitch, rate, warp)
            if key in seen:
                continue
            seen.add(key)
            out.append(SpeakerSpec(f"{split}{sum(s.split == split for s in out):02d}",
                                   *list(asdict(spec).values())[1:]))
    return out


def trim_and_normalise(x: np.ndarray, sample_rate: int = SAMPLE_RATE, top_db: float = 40.0,
                       frame_s: float = 0.02, target_rms: float = 0.1) -> np.ndarray:
    """Cut leading/trailing 20 ms frames quieter than ``-top_db`` re the loudest frame; RMS-scale."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("utterance audio must be a non-empty finite 1-D array")
    hop = max(int(frame_s * sample_rate), 1)
    n = int(np.ceil(x.size / hop))
    padded = np.pad(x, (0, n * hop - x.size))
    energy = (padded.reshape(n, hop) ** 2).mean(axis=1)
    loud = np.flatnonzero(energy >= energy.max() * 10 ** (-top_db / 10))
    y = x[loud[0] * hop:min((loud[-1] + 1) * hop, x.size)]
    rms = float(np.sqrt((y ** 2).mean()))
    if rms <= 0:
        raise ValueError("utterance is silent after trimming")
    return (y * (target_rms / rms)).astype(np.float32)


def speak(spec: SpeakerSpec, text: str, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """One trimmed, normalised utterance of ``text`` by ``spec``."""
    x = synthesize(text, voice=spec.voice, engine=spec.engine, rate_wpm=spec.rate_wpm,
                   pitch=spec.pitch, sample_rate=sample_rate)
    if spec.warp != 1.0:
        # play back at warp x speed: resample to sr/warp samples and read at sr
        # (a small rational ratio keeps the polyphase filter short)
        ratio = Fraction(spec.warp).limit_denominator(40)
        x = resample(x, ratio.numerator, ratio.denominator)
    return trim_and_normalise(x, sample_rate)


def to_bytes(x: np.ndarray) -> bytes:
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def from_bytes(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<i2").astype(np.float32) / 32767.0


def build_bank(speakers: Sequence[SpeakerSpec], n_utterances: int, words_range: tuple[int, int],
               seed: int, asr_words: bool, progress: bool = True, workers: int = 2) -> pd.DataFrame:
    """Utterance table: utterance, speaker, split, kind ('sentence'|'word'), text, n_words,
    audio (int16 bytes at 16 kHz), n_samples."""
    rng = np.random.default_rng(seed)
    jobs = []
    for spec in speakers:
        for i in range(n_utterances):
            n = int(rng.integers(words_range[0], words_range[1] + 1))
            jobs.append((spec, f"{spec.speaker}_s{i:02d}", "sentence",
                         " ".join(rng.choice(CONVERSATION_WORDS, size=n))))
        if asr_words:
            jobs += [(spec, f"{spec.speaker}_w_{w}", "word", w) for w in ASR_WORDS]
    rows = []
    # synthesis is a subprocess per utterance: two workers overlap their start-up; the texts are
    # fixed above, so the result does not depend on scheduling
    with ThreadPoolExecutor(max_workers=workers) as pool:
        audio = list(tqdm(pool.map(lambda job: speak(job[0], job[3]), jobs), total=len(jobs),
                          desc="sortformer: TTS speaker bank", disable=not progress,
                          mininterval=2))
    for (spec, utt, kind, text), x in zip(jobs, audio, strict=True):
        rows.append({"utterance": utt, "speaker": spec.speaker, "split": spec.split,
                     "kind": kind, "text": text, "n_words": len(text.split()),
                     "n_samples": int(x.size), "audio": to_bytes(x)})
    return pd.DataFrame(rows)
