"""Dry sound sources for the channel simulator (``docs/papers/acorn.md``, "Data").

The paper convolves simulated channels with AudioSet clips; nothing is downloaded here, so the
source bank holds offline speech (Debian espeak-ng and flite through :mod:`icml25.core.speech`),
the real CMU ARCTIC / sample clips shipped inside the pysptk and amfm_decompy wheels,
and synthetic families generated with numpy. Doppler items use a fixed catalogue of named tonal
sources with known rest frequencies (without a known rest spectrum a constant-speed shift is
not identifiable).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.io import wavfile

from icml25.core.speech import resample, synthesize

logger = logging.getLogger(__name__)
FS = 16_000

SENTENCES = (
    "The train to the coast leaves from platform four at noon.",
    "Please close the window before the rain starts again.",
    "A small boat drifted slowly along the quiet river.",
    "The museum opens early on the first day of every month.",
    "Seven yellow birds sat on the fence behind the barn.",
    "He forgot his umbrella in the back of the taxi.",
    "Our meeting moved to the large room on the second floor.",
    "The bakery on the corner sells fresh bread every morning.",
    "She measured the length of the table with a wooden ruler.",
    "Turn left at the bridge and follow the road to the hill.",
    "The children built a tall tower out of colourful blocks.",
    "A cold wind blew across the empty parking lot.",
    "The orchestra tuned their instruments before the concert.",
    "Bring two batteries and a torch for the night walk.",
    "The kettle whistled loudly in the kitchen downstairs.",
    "Every spring the garden fills with bright red tulips.",
    "The pilot announced a short delay because of fog.",
    "Numbers on the old clock were painted in gold.",
    "We planted three apple trees near the stone wall.",
    "The library keeps maps of the city from long ago.",
    "Thunder rolled over the valley late in the evening.",
    "A quiet voice answered the phone after six rings.",
    "The recipe needs flour, sugar, butter and two eggs.",
    "Wind turbines turned slowly on the distant ridge.",
    "The engineer checked every bolt on the steel frame.",
    "Footsteps echoed down the long marble hallway.",
    "Fresh snow covered the road to the mountain cabin.",
    "The dog barked twice and ran towards the gate.",
    "Lunch will be served in the garden if it stays dry.",
    "The bus stopped at the market and three people got off.",
    "Light from the lighthouse swept across the dark sea.",
    "Her bicycle had a silver bell and a basket in front.",
    "The scientist wrote the results in a blue notebook.",
    "Waves crashed against the rocks below the cliff.",
    "The radio played an old song about the harbour.",
    "Please speak clearly into the microphone on the desk.",
    "The clock tower rang the hour across the square.",
    "A paper plane glided over the heads of the students.",
    "The farmer counted forty sheep in the lower field.",
    "Sunlight filled the room through the open curtains.",
)

ESPEAK_VARIANTS = tuple([f"m{i}" for i in range(1, 8)] + [f"f{i}" for i in range(1, 6)])
FLITE_VOICES = ("kal16", "awb", "rms", "slt")


@dataclass(frozen=True)
class TonalSource:
    """A named catalogue source: partial frequencies (Hz at rest) and amplitudes."""

    name: str
    partials: tuple[float, ...]
    amplitudes: tuple[float, ...]

    @property
    def rest_hz(self) -> float:
        return self.partials[0]


#: The fixed Doppler catalogue (6 named sources with known rest frequencies).
TONAL_CATALOGUE = (
    TonalSource("beacon", (1000.0,), (1.0,)),
    TonalSource("horn", (440.0, 880.0, 1320.0), (1.0, 0.5, 0.25)),
    TonalSource("two-tone horn", (400.0, 500.0), (1.0, 1.0)),
    TonalSource("whistle", (2000.0,), (1.0,)),
    TonalSource("engine", tuple(60.0 * h for h in range(1, 21)),
                tuple(float(h) ** -1.0 for h in range(1, 21))),
    TonalSource("bell", (800.0, 1600.0 * 1.03, 2400.0 * 1.07), (1.0, 0.6, 0.35)),
)

SYNTHETIC_FAMILIES = ("tone", "engine", "two_tone", "siren", "chirp", "noise", "burst",
                      "bird")


def render_tonal(source: TonalSource, n: int, rng: np.random.Generator,
                 fs: int = FS) -> np.ndarray:
    """``n`` samples of a catalogue source at rest, random partial phases, unit RMS."""
    t = np.arange(n) / fs
    x = np.zeros(n)
    for f, a in zip(source.partials, source.amplitudes, strict=True):
        if f < fs / 2:
            x += a * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
    return x / (np.sqrt(np.mean(x ** 2)) + 1e-12)


def synthetic_source(family: str, n: int, rng: np.random.Generator, fs: int = FS) -> np.ndarray:
    """One item of a synthetic family, unit RMS."""
    t = np.arange(n) / fs
    if family == "tone":
        x = np.sin(2 * np.pi * rng.uniform(200, 3000) * t + rng.uniform(0, 2 * np.pi))
    elif family == "engine":
        f0, alpha = rng.uniform(25, 150), rng.uniform(0.5, 1.5)
        x = sum(h ** -alpha * np.sin(2 * np.pi * h * f0 * t + rng.uniform(0, 2 * np.pi))
                for h in range(1, 21) if h * f0 < fs / 2)
        x = x * (1.0 + 0.3 * np.sin(2 * np.pi * rng.uniform(2, 8) * t))
    elif family == "two_tone":
        f = rng.uniform(300, 700)
        x = np.sin(2 * np.pi * f * t) + np.sin(2 * np.pi * f * 1.25 * t)
    elif family == "siren":
        fc, rate = rng.uniform(600, 1400), rng.uniform(0.5, 3.0)
        inst = fc + 0.3 * fc * np.sin(2 * np.pi * rate * t)
        x = np.sin(2 * np.pi * np.cumsum(inst) / fs)
    elif family == "chirp":
        f0, f1 = sorted(rng.uniform(200, 4000, size=2))
        dur = n / fs
        if rng.random() < 0.5:
            phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / dur * t ** 2)
        else:
            k = (f1 / f0) ** (1 / dur)
            phase = 2 * np.pi * f0 * (k ** t - 1) / np.log(k)
        x = np.sin(phase)
    elif family == "noise":
        spec = np.fft.rfft(rng.standard_normal(n))
        f = np.maximum(np.arange(spec.size), 1.0)
        x = np.fft.irfft(spec / f ** (rng.choice([0.0, 0.5, 1.0])), n)  # white, pink, brown
    elif family == "burst":
        x = np.zeros(n)
        for start in rng.integers(0, n, size=rng.integers(3, 9)):
            length = min(n - start, int(rng.uniform(0.01, 0.08) * fs))
            x[start:start + length] += (rng.standard_normal(length)
                                        * np.exp(-np.arange(length) / (0.2 * length + 1)))
    elif family == "bird":
        x = np.zeros(n)
        for start in rng.integers(0, max(1, n - 2000), size=rng.integers(3, 8)):
            length = min(n - start, int(rng.uniform(0.03, 0.12) * fs))
            tt = np.arange(length) / fs
            f = rng.uniform(2000, 5000) + rng.uniform(-1500, 1500) * tt / tt[-1]
            x[start:start + length] += np.sin(2 * np.pi * np.cumsum(f) / fs) * np.hanning(length)
    else:
        raise ValueError(f"unknown synthetic family {family!r}; known: {SYNTHETIC_FAMILIES}")
    x = np.asarray(x, dtype=float)
    return x / (np.sqrt(np.mean(x ** 2)) + 1e-12)


def trim_silence(x: np.ndarray, threshold_db: float = -40.0, frame: int = 320) -> np.ndarray:
    """Drop leading and trailing frames quieter than ``threshold_db`` below the loudest one."""
    n = x.size // frame
    if n == 0:
        return x
    rms = np.sqrt(np.mean(x[:n * frame].reshape(n, frame) ** 2, axis=1)) + 1e-12
    loud = np.flatnonzero(20 * np.log10(rms / rms.max()) > threshold_db)
    return x[loud[0] * frame:(loud[-1] + 1) * frame]


def speech_plan(n_utterances: int, engines: list[str], seed: int) -> pd.DataFrame:
    """Which sentence, engine, voice, rate and pitch each utterance uses (seeded)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_utterances):
        engine = engines[i % len(engines)]
        if engine == "espeak-ng":
            voice = f"en-us+{ESPEAK_VARIANTS[rng.integers(len(ESPEAK_VARIANTS))]}"
        else:
            voice = FLITE_VOICES[rng.integers(len(FLITE_VOICES))]
        rows.append({"utterance": i, "engine": engine, "voice": voice,
                     "text": SENTENCES[rng.integers(len(SENTENCES))],
                     "rate_wpm": int(rng.integers(130, 191)),
                     "pitch": int(rng.integers(20, 81))})
    return pd.DataFrame(rows)


def synthesize_plan(plan: pd.DataFrame, progress: bool = False) -> list[np.ndarray]:
    """Speak every planned utterance; silence trimmed, unit RMS, float32 at 16 kHz."""
    from tqdm.auto import tqdm

    out = []
    for row in tqdm(plan.itertuples(), total=len(plan), desc="acorn speech", disable=not progress,
                    leave=False):
        x = synthesize(row.text, voice=row.voice, engine=row.engine, rate_wpm=row.rate_wpm,
                       pitch=row.pitch, sample_rate=FS).astype(np.float64)
        x = trim_silence(x)
        out.append((x / (np.sqrt(np.mean(x ** 2)) + 1e-12)).astype(np.float32))
    return out


#: Real recordings shipped inside PyPI wheels: package → file inside it, and its expected
#: duration (CMU ARCTIC a0007, 4.0 s; amfm_decompy's sample, 0.9 s).
PACKAGED_WAVS = {"pysptk": ("example_audio_data/arctic_a0007.wav", 4.0),
                 "amfm_decompy": ("sample.wav", 0.9)}


class SourceFileError(ValueError):
    """A packaged recording the source catalogue needs is missing or unreadable."""


def packaged_wav_path(package: str) -> Path:
    """Where ``package``'s wheel keeps its recording, found with ``importlib.util.find_spec``
    (pysptk's own import needs pkg_resources, so the package is never imported)."""
    relative = PACKAGED_WAVS[package][0]
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SourceFileError(
            f"acorn.sources.use_packaged_wavs: package {package!r} is not installed, so its "
            f"recording {relative} is missing; install it (it is a project dependency) or set "
            f"acorn.sources.use_packaged_wavs: false")
    path = Path(spec.origin).parent / relative
    if not path.is_file():
        raise SourceFileError(
            f"acorn.sources.use_packaged_wavs: {package} is installed but {path} is missing; "
            f"reinstall {package} or set acorn.sources.use_packaged_wavs: false")
    return path


def packaged_wavs() -> dict[str, Path]:
    """Real recordings shipped inside installed wheels: CMU ARCTIC ``arctic_a0007.wav`` in
    pysptk, ``sample.wav`` in amfm_decompy. Raises :class:`SourceFileError` if one is missing."""
    return {f"{package}:{Path(rel).name}": packaged_wav_path(package)
            for package, (rel, _) in PACKAGED_WAVS.items()}


def read_wav(path: Path, min_seconds: float = 0.05) -> np.ndarray:
    """A wav file as unit-RMS float at 16 kHz (mono); a corrupt, empty, silent, non-finite or
    too short file raises :class:`SourceFileError` naming the file."""
    try:
        sr, x = wavfile.read(path)
    except (OSError, ValueError, EOFError) as err:
        raise SourceFileError(f"{path}: not a readable wav file ({err})") from err
    x = np.asarray(x, dtype=np.float64)
    if x.ndim > 1:
        x = x.mean(axis=1)
    if x.size == 0 or not np.all(np.isfinite(x)) or not np.any(x):
        raise SourceFileError(f"{path}: empty, silent or non-finite audio")
    if x.size < min_seconds * sr:
        raise SourceFileError(f"{path}: {x.size / sr:.3f} s of audio, need at least "
                              f"{min_seconds} s")
    x = resample(x, int(sr), FS).astype(np.float64)
    return x / np.sqrt(np.mean(x ** 2))


def split_labels(n: int, fractions: tuple[float, float, float], rng: np.random.Generator
                 ) -> np.ndarray:
    """Assign ``n`` items to train/val/test with the given fractions (each split ≥ 1 item)."""
    if n < 3:
        raise ValueError(f"need at least 3 source items to form disjoint splits, got {n}")
    counts = np.maximum(1, np.round(np.asarray(fractions) * n).astype(int))
    counts[0] = n - counts[1] - counts[2]
    labels = np.repeat(np.array(["train", "val", "test"]), counts)
    return labels[rng.permutation(n)]
