"""Synthetic stress sets: the patterns of the WaveToken paper's Figure 1.

docs/papers/wavetoken.md ("Data"): sparse spikes (flat noise + impulses every
``P ∈ [12, 40]``), chirps ``sin(2π(f₀t + ½κt²))`` with ``f₀ ∈ [0.005, 0.02]``,
``κ ∈ [1e-4, 4e-4]``, and trend + seasonality. (Held-out KernelSynth samples, the fourth set, come
from :func:`icml25.pipelines.wavetoken.kernel_synth.sample_kernelsynth`.)

Parameters the paper leaves open are module constants, chosen here and documented on each
function; every generator is ``(n_series, length, rng) -> float64 array [n_series, length]`` with
time ``t = 0 .. length - 1`` in steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# sparse spikes (our choices except the period range, 12-40)
SPIKE_PERIOD_RANGE = (12, 40)  # inclusive
SPIKE_HEIGHT_RANGE = (3.0, 10.0)
SPIKE_NOISE_STD = 0.1
# chirps (ranges of f0 and kappa fixed by the project; noise is our choice)
CHIRP_F0_RANGE = (0.005, 0.02)
CHIRP_KAPPA_RANGE = (1e-4, 4e-4)
CHIRP_NOISE_STD = 0.0
# trend + season (all our choices)
TREND_SLOPE_RANGE = (0.005, 0.02)  # |slope| per step, sign random
SEASON_PERIOD_RANGE = (12, 40)
SEASON_AMPLITUDE_RANGE = (0.5, 2.0)
TREND_NOISE_STD = 0.1


def _check(n_series: int, length: int) -> None:
    if n_series < 0 or length < 1:
        raise ValueError(f"need n_series >= 0 and length >= 1, got {n_series}, {length}")


def sparse_spikes(n_series: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """Flat N(0, 0.1²) noise plus one impulse every ``P`` steps.

    Per series: ``P ~ U{12..40}``, phase ``~ U{0..P-1}``, height ``~ U[3, 10]`` (ours; the
    same height for every spike of a series, so the pattern is strictly periodic).
    """
    _check(n_series, length)
    out = SPIKE_NOISE_STD * rng.standard_normal((n_series, length))
    t = np.arange(length)
    for i in range(n_series):
        period = int(rng.integers(SPIKE_PERIOD_RANGE[0], SPIKE_PERIOD_RANGE[1] + 1))
        phase = int(rng.integers(0, period))
        height = rng.uniform(*SPIKE_HEIGHT_RANGE)
        out[i, (t - phase) % period == 0] += height
    return out


def chirps(n_series: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """Linear chirps ``sin(2π(f₀t + ½κt²))``, ``f₀ ~ U[0.005, 0.02]``, ``κ ~ U[1e-4, 4e-4]``.

    The instantaneous frequency ``f₀ + κt`` passes the Nyquist frequency 0.5 after
    ``t ≈ (0.5 - f₀)/κ`` (≥ 1200 steps), so for long series the chirp aliases; the ranges are
    kept as they are. No noise (``CHIRP_NOISE_STD = 0``).
    """
    _check(n_series, length)
    t = np.arange(length, dtype=np.float64)
    f0 = rng.uniform(*CHIRP_F0_RANGE, size=(n_series, 1))
    kappa = rng.uniform(*CHIRP_KAPPA_RANGE, size=(n_series, 1))
    out = np.sin(2.0 * np.pi * (f0 * t + 0.5 * kappa * t**2))
    if CHIRP_NOISE_STD > 0:
        out = out + CHIRP_NOISE_STD * rng.standard_normal(out.shape)
    return out


def trend_season(n_series: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """Linear trend + sinusoidal season + noise (all ranges ours; the paper gives none).

    ``y_t = b·t + A·sin(2πt/P + φ) + ε_t`` with ``|b| ~ U[0.005, 0.02]`` (random sign),
    ``P ~ U{12..40}``, ``A ~ U[0.5, 2]``, ``φ ~ U[0, 2π)``, ``ε ~ N(0, 0.1²)``.
    """
    _check(n_series, length)
    t = np.arange(length, dtype=np.float64)
    slope = rng.uniform(*TREND_SLOPE_RANGE, size=(n_series, 1)) * rng.choice(
        [-1.0, 1.0], size=(n_series, 1)
    )
    period = rng.integers(SEASON_PERIOD_RANGE[0], SEASON_PERIOD_RANGE[1] + 1, size=(n_series, 1))
    amplitude = rng.uniform(*SEASON_AMPLITUDE_RANGE, size=(n_series, 1))
    phase = rng.uniform(0.0, 2.0 * np.pi, size=(n_series, 1))
    noise = TREND_NOISE_STD * rng.standard_normal((n_series, length))
    return slope * t + amplitude * np.sin(2.0 * np.pi * t / period + phase) + noise


STRESS_GENERATORS: dict[str, Callable[[int, int, np.random.Generator], np.ndarray]] = {
    "sparse_spikes": sparse_spikes,
    "chirps": chirps,
    "trend_season": trend_season,
}


def make_stress_sets(n_series: int, length: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """All stress sets, ``{name: array [n_series, length]}``, drawn in a fixed order from ``rng``."""
    return {name: generate(n_series, length, rng) for name, generate in STRESS_GENERATORS.items()}
