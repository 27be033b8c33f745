"""Classical signal-processing baselines (not in the paper,
but strong and needed for an honest comparison): GCC-PHAT for the TDoA, a template-sum FFT peak
for the Doppler shift of a catalogue source, a matched filter for FMCW range, and logistic
regression on blind features for LOS and multipath."""

from __future__ import annotations

import numpy as np
from scipy.signal import hilbert
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from icml25.pipelines.acorn import channels as ch
from icml25.pipelines.acorn.scenes import RANGE_EMIT_AT
from icml25.pipelines.acorn.sources import TonalSource

FS = ch.FS


def _parabolic(y: np.ndarray, k: int) -> float:
    """Sub-sample offset of the peak at ``k`` from a parabola through its neighbours."""
    if k <= 0 or k >= y.size - 1:
        return 0.0
    a, b, c = y[k - 1], y[k], y[k + 1]
    den = a - 2 * b + c
    return float(0.5 * (a - c) / den) if den != 0 else 0.0


def gcc_phat(x1: np.ndarray, x2: np.ndarray, max_lag: float, interp: int = 16
             ) -> tuple[float, float]:
    """TDoA of ``x2`` relative to ``x1`` in samples (positive: x2 arrives later) by the
    generalised cross-correlation with phase transform (Knapp & Carter 1976), ``interp``-times
    interpolated, searched within ±``max_lag``; returns (tdoa, peak-to-sidelobe ratio)."""
    n = x1.size + x2.size
    cross = np.fft.rfft(x2, n) * np.conj(np.fft.rfft(x1, n))
    cross /= np.abs(cross) + 1e-12
    cc = np.fft.irfft(cross, n * interp)
    m = int(np.ceil(max_lag * interp))
    cc = np.concatenate([cc[-m:], cc[:m + 1]])
    k = int(np.argmax(cc))
    tdoa = (k - m + _parabolic(cc, k)) / interp
    side = np.delete(np.abs(cc), slice(max(0, k - interp), k + interp + 1))
    psr = float(cc[k] / (np.mean(side) + 1e-12)) if side.size else 0.0
    return float(tdoa), psr


def doppler_fft_peak(y: np.ndarray, source: TonalSource, pad: int = 8,
                     search: tuple[float, float] = (0.8, 1.25)) -> float:
    """Δ̂% of a catalogue source: the frequency scale α maximising the weighted sum of the
    zero-padded (×``pad``) Hann spectrum at α·f_k over the source's partials, refined by a
    parabola; Δ̂ = 100(α̂ − 1). ``y`` may hold several channels (their spectra are summed)."""
    y = np.atleast_2d(y)
    n = y.shape[-1]
    nfft = pad * n
    spec = np.abs(np.fft.rfft(y * np.hanning(n), nfft, axis=-1)).sum(axis=0)
    freqs = np.arange(spec.size) * FS / nfft
    top = max(source.partials)
    step = 0.25 * (FS / nfft) / top
    alphas = np.arange(search[0], search[1] + step, step)
    score = np.zeros_like(alphas)
    for f, a in zip(source.partials, source.amplitudes, strict=True):
        if f * search[1] < FS / 2:
            score += a * np.interp(alphas * f, freqs, spec)
    k = int(np.argmax(score))
    alpha = alphas[k] + _parabolic(score, k) * step
    return float(100.0 * (alpha - 1.0))


def matched_filter_range(y: np.ndarray, probe: np.ndarray | None = None,
                         min_delay: int = 20) -> float:
    """Reflector distance D̂ = c τ̂/2 from the strongest matched-filter envelope peak at least
    ``min_delay`` samples after the emission (the leakage window; the nearest reflector, 0.3 m,
    is 28 samples away)."""
    probe = ch.fmcw_chirp() if probe is None else probe
    y = np.atleast_2d(y).mean(axis=0)
    corr = np.correlate(y, probe, mode="full")[probe.size - 1:]  # lag 0 = emission at sample 0
    env = np.abs(hilbert(corr))
    start = RANGE_EMIT_AT + min_delay
    k = start + int(np.argmax(env[start:]))
    lag = k + _parabolic(env, k) - RANGE_EMIT_AT
    return float(ch.SPEED_OF_SOUND * lag / FS / 2.0)


def blind_features(y: np.ndarray, spacing: float) -> np.ndarray:
    """Blind LOS/multipath features of a 2-channel clip: GCC-PHAT peak-to-sidelobe ratio,
    envelope kurtosis, quiet/loud frame energy ratio, spectral slope, fastest energy decay,
    inter-channel magnitude-squared coherence (300–3500 Hz)."""
    y = np.asarray(y, dtype=float)
    _, psr = gcc_phat(y[0], y[1], spacing * FS / ch.SPEED_OF_SOUND + 1, interp=4)
    env = np.abs(hilbert(y, axis=-1))
    z = (env - env.mean(axis=-1, keepdims=True)) / (env.std(axis=-1, keepdims=True) + 1e-12)
    kurt = float(np.mean(z ** 4))
    frame = 160
    nf = y.shape[-1] // frame
    e = np.mean(y[:, :nf * frame].reshape(2, nf, frame) ** 2, axis=(0, 2)) + 1e-12
    e_db = 10 * np.log10(e)
    srt = np.sort(e_db)
    q = max(1, nf // 5)
    late_early = float(np.mean(srt[:q]) - np.mean(srt[-q:]))
    decay = float(np.min(np.diff(e_db))) if nf > 1 else 0.0
    spec = np.abs(np.fft.rfft(y * np.hanning(y.shape[-1]), axis=-1)) ** 2
    freqs = np.fft.rfftfreq(y.shape[-1], 1 / FS)
    band = (freqs > 100) & (freqs < 7000)
    slope = float(np.polyfit(np.log10(freqs[band]), 10 * np.log10(spec.sum(0)[band] + 1e-20),
                             1)[0])
    seg = 256
    ns = y.shape[-1] // seg
    s = np.fft.rfft(y[:, :ns * seg].reshape(2, ns, seg) * np.hanning(seg), axis=-1)
    sxy = np.mean(s[0] * np.conj(s[1]), axis=0)
    sxx, syy = np.mean(np.abs(s[0]) ** 2, axis=0), np.mean(np.abs(s[1]) ** 2, axis=0)
    f = np.fft.rfftfreq(seg, 1 / FS)
    sel = (f > 300) & (f < 3500)
    coh = float(np.mean(np.abs(sxy[sel]) ** 2 / (sxx[sel] * syy[sel] + 1e-20)))
    return np.array([np.log(max(psr, 0.0) + 1e-6), np.log(kurt + 1e-12), late_early, decay,
                     slope, coh])


def fit_blind_classifier(features: np.ndarray, labels: np.ndarray, seed: int = 0):
    """Standardised logistic regression (scikit-learn) on blind features."""
    if features.ndim != 2 or len(features) != len(labels) or not np.all(np.isfinite(features)):
        raise ValueError("blind features must be a finite (n, k) array aligned with the labels")
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
    return model.fit(features, labels.astype(int))
