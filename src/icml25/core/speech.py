"""Offline speech for the audio rooms (acorn, sortformer): Debian's espeak-ng and flite.

Both synthesisers run locally (``apt-get install espeak-ng flite``; ``.ci/run`` installs them),
so speech sources are generated on the machine instead of downloaded. espeak-ng speaks at
22,050 Hz and offers voice variants (``en+m3``, ``en+f2``, ...), rate and pitch; flite speaks at
16,000 Hz with its built-in voices (``slt``, ``rms``, ``awb``, ``kal``, ``kal16``). Speaker
identity in a simulated conversation comes from the engine, voice, variant, rate and pitch.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.io import wavfile
from scipy.signal import resample_poly

ENGINES = ("espeak-ng", "flite")


class SpeechError(RuntimeError):
    """A synthesiser is missing, refused its arguments or produced no audio."""


def _binary(engine: str) -> str:
    if engine not in ENGINES:
        raise SpeechError(f"unknown speech engine {engine!r}; choose one of {ENGINES}")
    path = shutil.which(engine)
    if path is None:
        raise SpeechError(f"{engine} is not installed (apt-get install {engine})")
    return path


@lru_cache(maxsize=1)
def espeak_voices() -> list[str]:
    """espeak-ng's language voices (e.g. ``en``, ``en-us``, ``de``); add ``+m1``..``+m7``,
    ``+f1``..``+f5`` and other variant names to any of them."""
    out = subprocess.run([_binary("espeak-ng"), "--voices"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [line.split()[1] for line in out.splitlines()[1:] if len(line.split()) > 1]


@lru_cache(maxsize=1)
def flite_voices() -> list[str]:
    """flite's built-in voices."""
    out = subprocess.run([_binary("flite"), "-lv"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    return out.split(":", 1)[-1].split()


def resample(x: np.ndarray, sr_from: int, sr_to: int) -> np.ndarray:
    """Polyphase resampling of a 1-D (or [..., time]) signal from ``sr_from`` to ``sr_to`` Hz."""
    if sr_from <= 0 or sr_to <= 0:
        raise ValueError(f"sample rates must be positive, got {sr_from} -> {sr_to}")
    x = np.asarray(x, dtype=np.float32)
    if sr_from == sr_to:
        return x.copy()
    ratio = Fraction(sr_to, sr_from)
    return resample_poly(x, ratio.numerator, ratio.denominator, axis=-1).astype(np.float32)


def synthesize(text: str, voice: str = "en", engine: str = "espeak-ng", rate_wpm: int = 160,
               pitch: int = 50, sample_rate: int = 16000, timeout_s: float = 60.0) -> np.ndarray:
    """Speak ``text`` and return mono float32 samples in [-1, 1] at ``sample_rate`` Hz.

    ``voice`` is an espeak-ng voice with an optional variant (``en+m3``) or a flite voice name
    (``slt``). ``rate_wpm`` (words per minute, 80..450) and ``pitch`` (0..99) apply to
    espeak-ng; flite ignores them. Deterministic: the same arguments give the same samples.
    """
    if not text or not text.strip():
        raise SpeechError("synthesize() got empty text")
    if not 80 <= rate_wpm <= 450:
        raise SpeechError(f"rate_wpm must be in 80..450, got {rate_wpm}")
    if not 0 <= pitch <= 99:
        raise SpeechError(f"pitch must be in 0..99, got {pitch}")
    binary = _binary(engine)
    if engine == "flite" and voice not in flite_voices():
        # flite silently falls back to its default voice; refuse instead
        raise SpeechError(f"flite has no voice {voice!r}; choose one of {flite_voices()}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "speech.wav"
        if engine == "espeak-ng":
            cmd = [binary, "-v", voice, "-s", str(int(rate_wpm)), "-p", str(int(pitch)),
                   "-w", str(out), "--", text]
        else:
            cmd = [binary, "-voice", voice, "-o", str(out), "-t", text]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 or not out.exists() or out.stat().st_size <= 44:
            raise SpeechError(f"{engine} failed for voice {voice!r}: "
                              f"{(proc.stderr or proc.stdout).strip()[:300]}")
        sr, samples = wavfile.read(out)
    samples = np.asarray(samples)
    if samples.ndim > 1:
        samples = samples.mean(axis=1)
    if np.issubdtype(samples.dtype, np.integer):
        samples = samples.astype(np.float32) / float(np.iinfo(samples.dtype).max)
    samples = samples.astype(np.float32)
    if samples.size == 0 or not np.any(samples):
        raise SpeechError(f"{engine} produced silence for voice {voice!r}")
    return resample(samples, int(sr), int(sample_rate))
