"""A direction-of-arrival readout that respects delays by construction (our addition;
``docs/papers/acorn.md``, "Delays built in").

The TDoA is a property of the *relative* timing of the two channels, so a pure delay of the
recording must leave it unchanged and delaying channel 2 by δ samples must move it by exactly δ.
A readout of a Transformer's task token has neither property built in (the STFT frame grid, the
clip edges and the sinusoidal positions all move with the signal). This head reads the
cross-channel correlation over lags instead:

1. the cross-spectrum R(f) = X₂(f)·conj X₁(f) of the clip zero-padded to 2N (so its inverse is
   the *linear* cross-correlation, as in GCC-PHAT), generalised phase transform R / |R|^β with a
   learned β ∈ (0, 1) (β = 1 is GCC-PHAT), scaled by its mean modulus so the level of the clip
   does not matter;
2. K learned non-negative frequency weightings w_k(f) (softplus of a coarse grid over 0..fs/2,
   linearly interpolated to the bins) give K band correlations r_k(ℓ) = IDFT(w_k·R̃)(ℓ) at the
   lags |ℓ| ≤ W + h (W the read-out window, h the reach of the lag CNN);
3. a small convolution network over lags maps them to one score per lag |ℓ| ≤ W,
   s = T·(mean_k r_k + CNN(r)) (the CNN's last layer starts at 0, so training starts from a soft
   GCC-PHAT; T is a learned temperature);
4. the read-out is the soft-argmax over the window, τ̂ = Σ_{|ℓ|≤W} ℓ·softmax(s)(ℓ).

Why this is exact. Let the clip carry its content with enough silence at its ends that a shift
loses no sample (a zero-filled delay that drops nothing). Delaying both channels by any s then
multiplies X₁ and X₂ (2N-point DFTs) by the same e^{−2πifs/2N}: R, every r_k, s and τ̂ are
unchanged. Delaying channel 2 alone by δ multiplies R by e^{−2πifδ/2N} and leaves |R| as it
was, so r_k(ℓ) → r_k(ℓ − δ) at every lag; the convolutions commute with that shift, so
s(ℓ) → s(ℓ − δ) for |ℓ| ≤ W, and τ̂ → τ̂ + δ exactly up to the softmax mass that the shift moves
across the window's edges ±W (nil for a peak well inside the window). Both hold to float
rounding for every weight value, trained or not. A delay that drops samples at the clip's end
(the run's symmetry metrics) changes the content and holds only approximately.

The window W (16 samples by default, beyond the array's 9.33) is the range prior; the swap
antisymmetrisation in :class:`~icml25.pipelines.acorn.encoder.AcornModel` keeps both properties,
and the estimate is clamped to ±d·fs/c at prediction time only.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LagDoAHead(nn.Module):
    """TDoA (samples; positive: channel 2 arrives later) from a learned generalised
    cross-correlation with a soft-argmax over the lags |ℓ| ≤ ``window`` (module docstring)."""

    def __init__(self, bands: int = 4, grid: int = 32, channels: int = 8, kernel: int = 5,
                 temperature: float = 50.0, window: int = 16) -> None:
        super().__init__()
        if bands < 1 or grid < 2 or channels < 1 or kernel < 1 or kernel % 2 == 0 or window < 1:
            raise ValueError(f"LagDoAHead needs bands >= 1, grid >= 2, channels >= 1, an odd "
                             f"kernel and window >= 1, got bands={bands}, grid={grid}, "
                             f"channels={channels}, kernel={kernel}, window={window}")
        self.window = window
        if temperature <= 0:
            raise ValueError(f"LagDoAHead temperature must be positive, got {temperature}")
        # band k starts emphasising the k-th K-th of the spectrum (softplus(±2) = 2.13 / 0.13)
        init = torch.full((bands, grid), -2.0)
        for k in range(bands):
            init[k, k * grid // bands:(k + 1) * grid // bands] = 2.0
        self.band_logits = nn.Parameter(init)
        self.beta_logit = nn.Parameter(torch.tensor(3.0))  # β = sigmoid(3) = 0.95
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)))
        self.reach = kernel // 2  # lags the CNN reads beyond the window on each side
        self.lag_net = nn.Sequential(nn.Conv1d(bands, channels, kernel), nn.GELU(),
                                     nn.Conv1d(channels, 1, 1))
        nn.init.zeros_(self.lag_net[-1].weight)
        nn.init.zeros_(self.lag_net[-1].bias)

    def band_weights(self, n_bins: int) -> torch.Tensor:
        """(K, n_bins) non-negative frequency weightings on the DFT bins 0..N/2."""
        w = nn.functional.softplus(self.band_logits)[None]
        return nn.functional.interpolate(w, size=n_bins, mode="linear", align_corners=True)[0]

    def correlations(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) audio → (B, K, 2(W + h) + 1) band correlations r_k(ℓ) at the lags
        ℓ = −W − h .. W + h (W the window, h the CNN's reach), from the linear (2N-point,
        zero-padded) cross-correlation."""
        if audio.dim() != 3 or audio.shape[1] != 2:
            raise ValueError(f"LagDoAHead needs two-channel audio (batch, 2, samples), got shape "
                             f"{tuple(audio.shape)}")
        n = audio.shape[-1]
        m = self.window + self.reach
        if m >= n:
            raise ValueError(f"LagDoAHead window {self.window} + reach {self.reach} needs clips "
                             f"longer than {m} samples, got {n}")
        spec = torch.fft.rfft(audio, n=2 * n, dim=-1)
        cross = spec[:, 1] * spec[:, 0].conj()
        mag = cross.abs()
        beta = torch.sigmoid(self.beta_logit)
        floor = 1e-6 * mag.mean(dim=-1, keepdim=True) + 1e-30
        cross = cross / (mag + floor).pow(beta)
        cross = cross / (cross.abs().mean(dim=-1, keepdim=True) + 1e-30)
        w = self.band_weights(cross.shape[-1])
        corr = torch.fft.irfft(cross[:, None, :] * w[None], n=2 * n, dim=-1)
        corr = torch.cat([corr[..., -m:], corr[..., :m + 1]], dim=-1)  # lags −m .. m
        # a pure delay then peaks at ≈ 1 in every band (irfft divides by 2N; ≈ Σw/N per unit)
        return corr * (n / w.sum(dim=-1))[None, :, None]

    def scores(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 2W + 1) lag scores s(ℓ), ℓ = −W .. W (before the softmax)."""
        corr = self.correlations(audio)
        h = self.reach
        s = corr[:, :, h:corr.shape[-1] - h].mean(dim=1) + self.lag_net(corr)[:, 0]
        return self.log_temperature.exp() * s

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 2, N) audio → (B,) TDoA estimate in samples, in [−W, W]."""
        s = self.scores(audio)
        lags = torch.arange(-self.window, self.window + 1, device=s.device, dtype=s.dtype)
        return (torch.softmax(s, dim=-1) * lags).sum(-1)
