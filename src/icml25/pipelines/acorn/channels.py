"""ACORN's component-level channel simulator (paper arXiv 2506.08524 §3; ``docs/papers/acorn.md``).

The received signal at microphone m is ``y_m(t) = Σ_i α_i s(t − τ_i,m) + (R_m ⊛ s)(t) + n_m(t)``:
a line-of-sight tap, early reflections, an exponentially decaying reverberation tail in six
octave bands and additive noise, each switchable. A moving source is rendered as a time-varying
delay evaluated at the emission time. Everything is plain numpy/scipy; c = 343 m/s, fs = 16 kHz.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SPEED_OF_SOUND = 343.0
FS = 16_000
OCTAVE_CENTRES = (125.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0)
#: T60 of band b relative to the broadband T60 (the band shape is the project's choice).
OCTAVE_T60_SHAPE = (1.3, 1.15, 1.0, 0.9, 0.75, 0.6)


class SceneError(ValueError):
    """A physically impossible scene (source outside the room, supersonic source, ...)."""


# --------------------------------------------------------------------- interpolation
def _window_sinc(x: np.ndarray, half_width: float) -> np.ndarray:
    """Hann-windowed sinc kernel value at offsets ``x`` (samples), zero for |x| >= half_width."""
    w = np.where(np.abs(x) < half_width, 0.5 * (1.0 + np.cos(np.pi * x / half_width)), 0.0)
    return np.sinc(x) * w


def add_tap(h: np.ndarray, delay: float, gain: float, taps: int = 33) -> None:
    """Add ``gain · δ(n − delay)`` to the impulse response ``h`` in place (fractional ``delay``
    in samples) as a Hann-windowed sinc of ``taps`` taps."""
    half = taps // 2
    centre = int(np.floor(delay))
    idx = np.arange(centre - half, centre + half + 2)
    keep = (idx >= 0) & (idx < h.shape[-1])
    h[idx[keep]] += gain * _window_sinc(idx[keep] - delay, half + 1.0)


def fractional_delay(x: np.ndarray, delay: float) -> np.ndarray:
    """Delay ``x`` by ``delay`` samples (any real number) with an FFT phase ramp on a zero-padded
    copy; exact for band-limited signals away from the edges."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    pad = int(np.ceil(abs(delay))) + 64
    nfft = 1 << int(np.ceil(np.log2(n + 2 * pad)))
    buf = np.zeros(nfft)
    buf[pad:pad + n] = x
    spec = np.fft.rfft(buf)
    k = np.arange(spec.size)
    spec *= np.exp(-2j * np.pi * k * delay / nfft)
    if nfft % 2 == 0:
        spec[-1] = spec[-1].real  # the Nyquist bin of a real signal stays real
    return np.fft.irfft(spec, nfft)[pad:pad + n]


def sinc_interpolate(s: np.ndarray, positions: np.ndarray, taps: int = 16) -> np.ndarray:
    """Band-limited value of ``s`` at fractional sample ``positions`` (Hann-windowed sinc of
    ``taps`` taps; zero outside the signal). Used by the Doppler renderer."""
    s = np.asarray(s, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    base = np.floor(positions).astype(np.int64)
    offsets = np.arange(-taps // 2 + 1, taps // 2 + 1)
    idx = base[:, None] + offsets[None, :]
    valid = (idx >= 0) & (idx < s.size)
    values = np.where(valid, s[np.clip(idx, 0, s.size - 1)], 0.0)
    kernel = _window_sinc(positions[:, None] - idx, taps / 2.0)
    return np.sum(values * kernel, axis=1)


# ----------------------------------------------------------------------------- Doppler
def doppler_shift_percent(v: float | np.ndarray, c: float = SPEED_OF_SOUND) -> np.ndarray:
    """Label Δf% = 100(f'/f − 1) = −100 v/(c + v) of a source receding at radial speed v
    (emission-time model)."""
    return -100.0 * np.asarray(v, dtype=float) / (c + np.asarray(v, dtype=float))


def speed_from_shift(shift_percent: float | np.ndarray, c: float = SPEED_OF_SOUND) -> np.ndarray:
    """Inverse of :func:`doppler_shift_percent`: v = −c Δ/(100 + Δ)."""
    d = np.asarray(shift_percent, dtype=float)
    return -c * d / (100.0 + d)


def check_speed(v: float, c: float = SPEED_OF_SOUND) -> None:
    """Refuse a source moving at or above the speed of sound (the emission time is undefined)."""
    if not np.isfinite(v) or abs(v) >= c:
        raise SceneError(f"source speed {v} m/s is at or above the speed of sound ({c} m/s); "
                         "the moving-source model needs |v| < c")


def render_moving_source(s: np.ndarray, v: float, d0: float, n_out: int, fs: int = FS,
                         c: float = SPEED_OF_SOUND, start: float = 0.0, t0: float = 0.0,
                         taps: int = 16) -> np.ndarray:
    """``y(t) = s(u)/d(u)`` with ``d(u) = d0 + v u`` and emission time ``u = (t − d0/c)/(1 + v/c)``
    (the emission-time model), for receiver times ``t = t0 + k/fs``. Sample 0 of ``s`` is emitted at
    ``u = −start`` (the source sounds before the clip). Band-limited interpolation of ``s``."""
    check_speed(v, c)
    if d0 <= 0:
        raise SceneError(f"source distance d0 must be positive, got {d0}")
    t = t0 + np.arange(n_out) / fs
    u = (t - d0 / c) / (1.0 + v / c)
    d = d0 + v * u
    if np.any(d <= 0):
        raise SceneError("the moving source passes through the microphone within the clip")
    return sinc_interpolate(s, (u + start) * fs, taps) / d


# ---------------------------------------------------------------------------- geometry
@dataclass(frozen=True)
class Room:
    """An axis-aligned shoebox [0, L] × [0, W] × [0, H] in metres."""

    size: tuple[float, float, float]

    def __post_init__(self) -> None:
        if len(self.size) != 3 or min(self.size) <= 0 or not np.all(np.isfinite(self.size)):
            raise SceneError(f"room size must be three positive numbers, got {self.size}")

    def contains(self, point: np.ndarray, margin: float = 0.0) -> bool:
        p = np.asarray(point, dtype=float)
        return bool(np.all(p >= margin) and np.all(p <= np.asarray(self.size) - margin))


def linear_array(centre: np.ndarray, spacing: float, n_mics: int = 2) -> np.ndarray:
    """Microphones on a line parallel to x, mic 1 at the left (−x), shape (n_mics, 3)."""
    if spacing <= 0:
        raise SceneError(f"microphone spacing must be positive, got {spacing}")
    offsets = (np.arange(n_mics) - (n_mics - 1) / 2.0) * spacing
    mics = np.repeat(np.asarray(centre, dtype=float)[None, :], n_mics, axis=0)
    mics[:, 0] += offsets
    return mics


def check_scene(room: Room, source: np.ndarray, mics: np.ndarray) -> None:
    """Refuse a source outside the room, an array wider than the room, or mics outside it
    (issue 22, "Bad input")."""
    mics = np.atleast_2d(np.asarray(mics, dtype=float))
    extent = mics.max(axis=0) - mics.min(axis=0)
    if np.any(extent >= np.asarray(room.size)):
        raise SceneError(f"microphone array extent {extent.round(3).tolist()} m is as wide as or "
                         f"wider than the room {list(room.size)} m")
    for m, mic in enumerate(mics):
        if not room.contains(mic):
            raise SceneError(f"microphone {m + 1} at {mic.round(3).tolist()} is outside the room "
                             f"{list(room.size)} m")
    if not room.contains(source):
        raise SceneError(f"source at {np.asarray(source).round(3).tolist()} is outside the room "
                         f"{list(room.size)} m")


def source_position(centre: np.ndarray, distance: float, azimuth_deg: float) -> np.ndarray:
    """A source at ``distance`` from the array centre, azimuth measured from −x (towards mic 1),
    in the array's horizontal plane."""
    th = np.deg2rad(azimuth_deg)
    return np.asarray(centre, dtype=float) + distance * np.array([-np.cos(th), np.sin(th), 0.0])


def tdoa_samples(source: np.ndarray, mics: np.ndarray, fs: int = FS,
                 c: float = SPEED_OF_SOUND) -> float:
    """Label TDoA = (|src − mic2| − |src − mic1|)/c · fs; positive ⇒ the source is on the left."""
    r = np.linalg.norm(np.asarray(mics, dtype=float) - np.asarray(source, dtype=float), axis=1)
    return float((r[1] - r[0]) / c * fs)


def azimuth_from_tdoa(tdoa: np.ndarray, spacing: float, fs: int = FS,
                      c: float = SPEED_OF_SOUND) -> np.ndarray:
    """Far-field angle θ̂ = arccos(clip(τ̂ c/(d fs), ±1)) in degrees."""
    return np.rad2deg(np.arccos(np.clip(np.asarray(tdoa) * c / (spacing * fs), -1.0, 1.0)))


@lru_cache(maxsize=8)
def _image_lattice(max_order: int) -> tuple[np.ndarray, np.ndarray]:
    """Lattice indices n and parities p of all images with 1 <= order <= ``max_order``."""
    r = np.arange(-max_order, max_order + 1)
    n = np.stack(np.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 1, 3)
    p = np.stack(np.meshgrid([0, 1], [0, 1], [0, 1], indexing="ij"), -1).reshape(1, -1, 3)
    n, p = np.broadcast_arrays(n, p)
    n, p = n.reshape(-1, 3), p.reshape(-1, 3)
    order = np.sum(np.abs(n - p) + np.abs(n), axis=1)
    keep = (order >= 1) & (order <= max_order)
    return n[keep], p[keep]


def image_sources(room: Room, source: np.ndarray, max_order: int = 2) -> np.ndarray:
    """Image positions of ``source`` in the shoebox up to reflection order ``max_order``
    (Allen & Berkley 1979: image = (1 − 2p)·src + 2n·size, order Σ|n − p| + |n|), order 0
    excluded; shape (n, 3)."""
    n, p = _image_lattice(int(max_order))
    return (1 - 2 * p) * np.asarray(source, dtype=float) + 2 * n * np.asarray(room.size)


# ------------------------------------------------------------------------- components
@lru_cache(maxsize=16)
def _octave_gains(n: int, fs: int) -> np.ndarray:
    """|H_b(f)|² of the six 4th-order Butterworth octave band-passes on an ``n``-point rfft grid:
    zero-phase (forward-backward) filtering in the frequency domain."""
    from scipy.signal import butter, sosfreqz
    nyq = fs / 2.0
    freqs = np.fft.rfftfreq(n, 1.0 / fs)
    gains = []
    for fc in OCTAVE_CENTRES:
        lo, hi = fc / np.sqrt(2.0), min(fc * np.sqrt(2.0), 0.99 * nyq)
        sos = butter(4, [lo / nyq, hi / nyq], btype="bandpass", output="sos")
        _, resp = sosfreqz(sos, worN=freqs, fs=fs)
        gains.append(np.abs(resp) ** 2)
    return np.stack(gains)


def reverb_tail(n: int, t60: float, onset: float, rng: np.random.Generator, fs: int = FS,
                ramp_s: float = 0.005) -> np.ndarray:
    """Six-band exponentially decaying noise tail R(τ): octave band b of white noise
    (4th-order Butterworth, zero-phase) decays as 10^(−3(τ−τ_mix)/T60_b) after ``onset``
    (seconds, τ_mix), with a raised-cosine 5 ms onset."""
    if t60 <= 0:
        raise SceneError(f"T60 must be positive, got {t60}")
    nfft = 2 * n  # room for the filters' ringing without wrap-round
    noise = np.fft.rfft(rng.standard_normal(nfft))
    bands = np.fft.irfft(noise[None, :] * _octave_gains(nfft, fs), nfft, axis=-1)[:, :n]
    tau = np.arange(n) / fs - onset
    ramp = 0.5 * (1.0 - np.cos(np.pi * np.clip(tau / ramp_s, 0.0, 1.0)))
    t60_b = t60 * np.asarray(OCTAVE_T60_SHAPE)[:, None]
    decay = 10.0 ** (-3.0 * np.maximum(tau, 0.0)[None, :] / t60_b)
    return np.sum(bands * decay, axis=0) * ramp


def energy_decay_t60(h: np.ndarray, fs: int = FS, lo_db: float = -5.0,
                     hi_db: float = -25.0) -> float:
    """T60 from the Schroeder backward-integrated energy decay, fitted between ``lo_db`` and
    ``hi_db`` and extrapolated to −60 dB."""
    energy = np.cumsum((np.asarray(h, dtype=float) ** 2)[::-1])[::-1]
    if energy[0] <= 0:
        return float("nan")
    edc = 10.0 * np.log10(np.maximum(energy / energy[0], 1e-30))
    sel = (edc <= lo_db) & (edc >= hi_db)
    if sel.sum() < 10:
        return float("nan")
    t = np.arange(h.size)[sel] / fs
    slope = np.polyfit(t, edc[sel], 1)[0]
    return float(-60.0 / slope)


def obstruct(h_direct: np.ndarray, attenuation_db: float, cutoff_hz: float,
             fs: int = FS) -> np.ndarray:
    """Diffraction round an obstacle: attenuate the direct path and low-pass it (2nd-order
    Butterworth, causal) — the project's NLOS model (the paper's is not stated)."""
    from scipy.signal import butter, sosfilt
    sos = butter(2, cutoff_hz / (fs / 2.0), btype="lowpass", output="sos")
    return sosfilt(sos, h_direct) * 10.0 ** (-attenuation_db / 20.0)


def add_noise(y: np.ndarray, snr_db: float, rng: np.random.Generator, colour: str = "white",
              reference_power: float | None = None) -> np.ndarray:
    """Add white or pink noise at ``snr_db`` relative to the mean power of ``y`` (all channels)
    or to ``reference_power``."""
    power = float(np.mean(y ** 2)) if reference_power is None else reference_power
    noise = rng.standard_normal(y.shape)
    if colour == "pink":
        spec = np.fft.rfft(noise, axis=-1)
        f = np.arange(spec.shape[-1], dtype=float)
        f[0] = 1.0
        noise = np.fft.irfft(spec / np.sqrt(f), y.shape[-1], axis=-1)
    elif colour != "white":
        raise SceneError(f"noise colour must be 'white' or 'pink', got {colour!r}")
    noise /= np.sqrt(np.mean(noise ** 2)) + 1e-12
    return y + noise * np.sqrt(power * 10.0 ** (-snr_db / 10.0))


def direct_to_reverberant_db(h_direct: np.ndarray, h_rest: np.ndarray) -> float:
    """DRR = 10 log10(E_direct / E_rest) of a CIR split into direct and remaining parts."""
    return float(10.0 * np.log10(np.sum(h_direct ** 2) / max(np.sum(h_rest ** 2), 1e-30)))


def convolve_clip(s: np.ndarray, h: np.ndarray, n_out: int) -> np.ndarray:
    """Steady-state clip of ``s ⊛ h`` (one row of ``h`` per mic): ``s`` must hold
    ``n_out + len(h)`` samples; output sample t sees source samples up to t + len(h)."""
    from scipy.signal import fftconvolve

    h = np.atleast_2d(h)
    need = n_out + h.shape[-1]
    if s.size < need:
        raise SceneError(f"source segment has {s.size} samples; {need} needed")
    full = fftconvolve(s[None, :need], h, axes=-1)
    return full[:, h.shape[-1]:h.shape[-1] + n_out]


# ---------------------------------------------------------------------------- ranging
def fmcw_chirp(f0: float = 2000.0, f1: float = 6000.0, duration: float = 0.04,
               fs: int = FS) -> np.ndarray:
    """The known probe: a Hann-tapered linear chirp f0 → f1 (the project's choice)."""
    n = round(duration * fs)
    t = np.arange(n) / fs
    phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / duration * t ** 2)
    return np.sin(phase) * np.hanning(n)


def echo_delay_samples(distance: float, fs: int = FS, c: float = SPEED_OF_SOUND) -> float:
    """Round-trip delay 2D/c of a reflector at ``distance`` metres, in samples."""
    return 2.0 * distance / c * fs
