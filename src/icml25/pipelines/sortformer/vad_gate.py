"""A speech-activity gate on the diarizer's frame posteriors: band SNR above a noise floor.

The diarizer sees peak- and mean/variance-normalised log-mels, so a recording of pure noise or
digital silence reaches it with the same contrast as speech and it can fire on it. The gate
restores the information normalisation removes. For each 80 ms output frame it measures how far
the frame's spectrum rises above the recording's own stationary noise floor, band by band:

    E[t, b]  = mean power of mel band b over the 10 ms hops of frame t
    N[b]     = the ``floor_quantile`` quantile of E[:, b] over the recording's frames
    s[t]     = 10 log10( mean_b (E[t, b] + eps) / (N[b] + eps) )   (dB)

``s`` is the frame's a-posteriori SNR against a per-band minimum-statistics noise estimate
(in the spirit of Martin's minimum statistics, IEEE TSAP 2001, and the spectral-divergence VADs
of Ramirez et al., Speech Communication 2004). Each band is normalised by its own floor, so the
statistic does not depend on the noise level or colour: on stationary noise of any spectrum
(white, pink) it stays at the small offset between a band's mean and its low quantile, and on
digital silence it is exactly 0 dB, while speech raises the bands it occupies by the SNR. Frames
with ``s < threshold_db`` get probability 0 in every channel before the post-processing rules.
Non-stationary noise (babble, music) is out of its scope: that is the diarizer's job.
"""

from __future__ import annotations

import numpy as np
import torch

from icml25.pipelines.sortformer.features import SAMPLE_RATE, mel_filterbank, prepare_audio

#: absolute band-power floor (|STFT|^2 units), far below -100 dB full scale: keeps digital
#: silence at a ratio of exactly 1 (0 dB) instead of 0/0
EPS = 1e-10
HOP_S = 0.01


def band_snr_db(x: np.ndarray, n_frames: int | None = None, frame_s: float = 0.08,
                n_bands: int = 24, floor_quantile: float = 0.1,
                sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """(n_frames,) band SNR ``s`` in dB of each ``frame_s`` frame of one recording (module
    docstring); ``n_frames`` defaults to ``round(duration / frame_s)``."""
    if not 0.0 <= floor_quantile < 1.0:
        raise ValueError(f"floor_quantile must be in [0, 1), got {floor_quantile}")
    if n_bands < 1:
        raise ValueError(f"n_bands must be >= 1, got {n_bands}")
    sub = round(frame_s / HOP_S)
    if sub < 1 or abs(sub * HOP_S - frame_s) > 1e-9:
        raise ValueError(f"frame_s must be a multiple of {HOP_S} s, got {frame_s}")
    x = prepare_audio(x, sample_rate)
    if n_frames is None:
        n_frames = max(1, round(len(x) / SAMPLE_RATE / frame_s))
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    win, hop = int(0.025 * SAMPLE_RATE), int(HOP_S * SAMPLE_RATE)
    wav = torch.from_numpy(x.astype(np.float64))
    if wav.numel() < win:
        wav = torch.nn.functional.pad(wav, (0, win - wav.numel()))
    spec = torch.stft(wav, n_fft=512, hop_length=hop, win_length=win,
                      window=torch.hann_window(win, dtype=torch.float64), center=True,
                      return_complex=True)
    band = ((spec.abs() ** 2).T @ mel_filterbank(n_bands).double()).numpy()  # (hops, bands)
    need = n_frames * sub
    if band.shape[0] < need:  # the last frame may reach past the audio: repeat the last hop
        band = np.concatenate([band, np.repeat(band[-1:], need - band.shape[0], axis=0)])
    frame = band[:need].reshape(n_frames, sub, n_bands).mean(axis=1)  # (frames, bands)
    floor = np.quantile(frame, floor_quantile, axis=0)
    ratio = (frame + EPS) / (floor[None] + EPS)
    return (10.0 * np.log10(ratio.mean(axis=1))).astype(np.float32)


def gate_probabilities(probs: np.ndarray, snr_db: np.ndarray, threshold_db: float
                       ) -> np.ndarray:
    """``probs`` (frames, K) with every channel set to 0 in the frames whose band SNR is below
    ``threshold_db``; ``snr_db`` must have one value per frame."""
    probs = np.asarray(probs)
    snr_db = np.asarray(snr_db)
    if probs.ndim != 2 or snr_db.shape != (probs.shape[0],):
        raise ValueError(f"VAD gate: {probs.shape[0] if probs.ndim else 0} probability frames "
                         f"but band SNR of shape {snr_db.shape}")
    if not np.all(np.isfinite(snr_db)):
        raise ValueError("VAD gate: band SNR must be finite")
    return np.where((snr_db >= threshold_db)[:, None], probs, 0.0).astype(probs.dtype)
