"""A direction-of-arrival readout that respects delays by construction (our addition;
``docs/papers/acorn.md``, "Physics built in").

The TDoA is a property of the *relative* timing of the two channels, so a pure delay of the
recording must leave it unchanged and delaying channel 2 by δ samples must move it by exactly δ.
A readout that reads a Transformer's task token has neither property built in (the STFT frame
grid, the zero-filled clip edges and the sinusoidal positions all move with the signal). This
head reads the cross-channel correlation over lags instead:

1. the whole-clip cross-spectrum R(f) = X₂(f)·conj X₁(f) (DFT of length N, the clip length),
   generalised phase transform R / |R|^β with a learned β ∈ (0, 1) (β = 1 is GCC-PHAT), scaled
   by its mean modulus so the level of the clip does not matter;
2. K learned non-negative frequency weightings w_k(f) (softplus of a coarse grid over 0..fs/2,
   linearly interpolated to the N/2+1 bins) give K band correlations
   r_k(ℓ) = IDFT(w_k·R̃)(ℓ) / mean_f w_k(f) on the circular lag axis ℓ = 0..N−1;
3. a small circular convolution network over lags maps them to one score s(ℓ)
   (``s = T·(mean_k r_k + CNN(r))``, the CNN's last layer starts at 0, so training starts from a
   soft GCC-PHAT; T is a learned temperature);
4. the lag-equivariant read-out is the circular mean of p = softmax(s):
   τ̂ = N/(2π)·arg Σ_ℓ p(ℓ)·e^{2πiℓ/N}.

Why this is exact. A circular shift of both channels by any s multiplies X₁ and X₂ by the same
e^{−2πifs/N}, so R, every r_k, s, p and τ̂ are unchanged. A circular shift of channel 2 alone by
δ multiplies R by e^{−2πifδ/N} and |R| not at all, so r_k(ℓ) → r_k(ℓ − δ); circular
convolutions commute with that shift, softmax permutes with it, and the circular mean then turns
by 2πδ/N: τ̂ → τ̂ + δ exactly (modulo N, which never matters for |τ̂| ≪ N/2). Both hold to float
rounding for every weight value, trained or not. For a zero-filled delay (a real recording
started late) they hold up to the N − |δ| samples the two versions share.

The circular mean over all N lags cannot use the array's range prior |τ| ≤ d·fs/c (that would
depend on the absolute lag); :class:`~icml25.pipelines.acorn.encoder.AcornModel` clamps the
estimate to that range at prediction time only, which keeps the equivariance wherever the
estimate lies inside the physical range.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LagDoAHead(nn.Module):
    """TDoA (samples; positive: channel 2 arrives later) from a learned generalised
    cross-correlation with a circular soft-argmax over lags (module docstring)."""

    def __init__(self, bands: int = 4, grid: int = 32, channels: int = 8, kernel: int = 5,
                 temperature: float = 50.0) -> None:
        super().__init__()
        if bands < 1 or grid < 2 or channels < 1 or kernel < 1 or kernel % 2 == 0:
            raise ValueError(f"LagDoAHead needs bands >= 1, grid >= 2, channels >= 1 and an odd "
                             f"kernel, got bands={bands}, grid={grid}, channels={channels}, "
                             f"kernel={kernel}")
        if temperature <= 0:
            raise ValueError(f"LagDoAHead temperature must be positive, got {temperature}")
        # band k starts emphasising the k-th K-th of the spectrum (softplus(±2) = 2.13 / 0.13)
        init = torch.full((bands, grid), -2.0)
        for k in range(bands):
            init[k, k * grid // bands:(k + 1) * grid // bands] = 2.0
        self.band_logits = nn.Parameter(init)
        self.beta_logit = nn.Parameter(torch.tensor(3.0))  # β = sigmoid(3) = 0.95
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)))
        pad = kernel // 2
        self.lag_net = nn.Sequential(
            nn.Conv1d(bands, channels, kernel, padding=pad, padding_mode="circular"), nn.GELU(),
            nn.Conv1d(channels, 1, 1))
        nn.init.zeros_(self.lag_net[-1].weight)
        nn.init.zeros_(self.lag_net[-1].bias)

    def band_weights(self, n_bins: int) -> torch.Tensor:
        """(K, n_bins) non-negative frequency weightings on the DFT bins 0..N/2."""
        w = nn.functional.softplus(self.band_logits)[None]
        return nn.functional.interpolate(w, size=n_bins, mode="linear", align_corners=True)[0]

    def correlations(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) audio → (B, K, N) band correlations r_k(ℓ) on the circular lags 0..N−1."""
        if audio.dim() != 3 or audio.shape[1] != 2:
            raise ValueError(f"LagDoAHead needs two-channel audio (batch, 2, samples), got shape "
                             f"{tuple(audio.shape)}")
        n = audio.shape[-1]
        spec = torch.fft.rfft(audio, dim=-1)
        cross = spec[:, 1] * spec[:, 0].conj()
        mag = cross.abs()
        beta = torch.sigmoid(self.beta_logit)
        floor = 1e-6 * mag.mean(dim=-1, keepdim=True) + 1e-30
        cross = cross / (mag + floor).pow(beta)
        cross = cross / (cross.abs().mean(dim=-1, keepdim=True) + 1e-30)
        w = self.band_weights(cross.shape[-1])
        corr = torch.fft.irfft(cross[:, None, :] * w[None], n=n, dim=-1)
        # a pure delay then peaks at ≈ 1 in every band (irfft divides by N; ≈ 2·Σw/N per unit)
        return corr * (n / (2.0 * w.sum(dim=-1)))[None, :, None]

    def scores(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, N) lag scores s(ℓ) (before the softmax)."""
        corr = self.correlations(audio)
        s = corr.mean(dim=1) + self.lag_net(corr)[:, 0]
        return self.log_temperature.exp() * s

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) audio → (B,) TDoA estimate in samples, in (−N/2, N/2]."""
        s = self.scores(audio)
        n = s.shape[-1]
        p = torch.softmax(s, dim=-1)
        ang = 2.0 * math.pi * torch.arange(n, device=s.device, dtype=s.dtype) / n
        return torch.atan2((p * ang.sin()).sum(-1), (p * ang.cos()).sum(-1)) * (n / (2 * math.pi))
