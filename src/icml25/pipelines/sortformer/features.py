"""Log-mel features of the diarizer and the ASR encoder (the official front end's framing).

Audio peak-normalised (``x / (max|x| + 1e-3)``) at 16 kHz; 25 ms Hann window, 10 ms hop,
n_fft 512, HTK mel filterbank, log, per-utterance per-feature normalisation. Audio at another
sample rate is resampled first. Written with ``torch.stft`` (torchaudio is not available).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from icml25.core.speech import resample

SAMPLE_RATE = 16000


@lru_cache(maxsize=4)
def mel_filterbank(n_mels: int, n_fft: int = 512, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """(n_fft//2+1, n_mels) triangular HTK-mel filters between 0 Hz and Nyquist."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    freqs = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(0, hz_to_mel(sample_rate / 2), n_mels + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None] - lower) / (centre - lower)
    down = (upper - freqs[None]) / (upper - centre)
    fb = np.maximum(0.0, np.minimum(up, down)).T
    return torch.tensor(fb, dtype=torch.float32)


def prepare_audio(x: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at 16 kHz; other rates are resampled; NaN/inf/empty/2-D audio is refused."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"audio must be mono 1-D samples, got shape {x.shape}")
    if x.size == 0:
        raise ValueError("audio is empty")
    if not np.all(np.isfinite(x)):
        raise ValueError("audio contains NaN or infinite samples")
    if sample_rate != SAMPLE_RATE:
        x = resample(x, int(sample_rate), SAMPLE_RATE)
    return x


def log_mel(x: np.ndarray, n_mels: int = 80, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """(frames, n_mels) normalised log-mel of one recording; frame i starts at i*10 ms."""
    x = prepare_audio(x, sample_rate)
    x = x / (np.abs(x).max() + 1e-3)
    wav = torch.from_numpy(x)
    win = int(0.025 * SAMPLE_RATE)
    hop = int(0.010 * SAMPLE_RATE)
    if wav.numel() < win:
        wav = torch.nn.functional.pad(wav, (0, win - wav.numel()))
    spec = torch.stft(wav, n_fft=512, hop_length=hop, win_length=win,
                      window=torch.hann_window(win), center=True, return_complex=True)
    power = spec.abs() ** 2  # (freq, frames)
    mel = torch.log(power.T @ mel_filterbank(n_mels) + 1e-6)
    mel = (mel - mel.mean(dim=0)) / (mel.std(dim=0) + 1e-5)
    return mel.numpy().astype(np.float32)
