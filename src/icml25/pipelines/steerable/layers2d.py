"""Fourier-space SE(2)-steerable layers on circular-harmonic feature fields.

A feature map is a complex tensor ``F[b, m, c, x, y]`` (m = 0..M-1, the frequencies kept; the
negative ones are the conjugates of a real signal's and are not stored). Every layer here maps
fields that rotate as ``(g_a F)[m](p) = exp(-i m a) F[m](R_a^{-1} p)`` to fields that rotate the
same way (steerable convolutions, nonlinearities, normalisation, pooling and the invariant
head of Kundu & Kondor 2025, Sec. 3; official code ``Steerable/nn/SE2*``, read for facts only).
Under the 90-degree rotations of the pixel grid the equivariance is exact
up to float rounding; other angles are exact only in the continuum.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml25.pipelines.steerable.harmonics import (
    SteerableConfigError,
    check_band_limit,
    complex_randn,
    filter_basis,
)

EPS = 1e-4


def modulus(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``|x|`` with a finite gradient at 0 (``sqrt(re^2 + im^2 + eps)``)."""
    return torch.sqrt(x.real.square() + x.imag.square() + eps)


def scale(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``x * s`` for complex ``x`` and real ``s`` without promoting ``s`` to complex (a real
    multiply of the interleaved real/imaginary parts: about 3x cheaper on the CPU)."""
    return torch.view_as_complex(torch.view_as_real(x) * s.unsqueeze(-1))


def check_field(x: torch.Tensor, freq_cutoff: int, channels: int, name: str) -> None:
    """Refuse a tensor that is not a ``[B, M, C, H, W]`` complex field of this layer."""
    if not torch.is_complex(x) or x.ndim != 5 or x.shape[1] != freq_cutoff \
            or x.shape[2] != channels:
        raise SteerableConfigError(
            f"{name}: expected a complex field [B, M={freq_cutoff}, C={channels}, H, W], got "
            f"{'complex' if torch.is_complex(x) else x.dtype} {tuple(x.shape)}")


def _complex_conv(x: torch.Tensor, kernel: torch.Tensor, stride: int, padding) -> torch.Tensor:
    """Complex correlation ``x * kernel`` as one real conv on stacked real/imaginary parts."""
    kr, ki = kernel.real, kernel.imag
    weight = torch.cat([torch.cat([kr, -ki], 1), torch.cat([ki, kr], 1)], 0)
    out = F.conv2d(torch.cat([x.real, x.imag], 1), weight, stride=stride, padding=padding)
    half = out.shape[1] // 2
    return torch.complex(out[:, :half], out[:, half:])


class SteerableConv2d(nn.Module):
    """Steerable convolution with the circular-harmonic basis ``psi_{rho,n}``.

    ``kind="type1"``: real (scalar) input channels ``[B, C_in, H, W]`` to M frequencies,
    ``out[m, o] = sum_{c, rho} w[m, o, c, rho] (psi_{rho, m} corr in[c])``.
    ``kind="type2"``: M frequencies in and out; output frequency l hears input frequency m
    through filter frequency n = l - m (the SO(2) Clebsch-Gordan selection rule),
    ``out[l, o] = sum_{m, c, rho} w[l, o, m, c, rho] (psi_{rho, l-m} corr in[m, c])``;
    ``filter_freqs="nonneg"`` keeps only n >= 0 (official code), ``"signed"`` all of them.
    The complex kernel is assembled from basis and weights on every forward pass, then one
    convolution runs. Weights are complex normal with std ``1/sqrt(fan_in)`` (the official unit
    normal overflows activations at these widths).
    """

    def __init__(self, in_channels: int, out_channels: int, freq_cutoff: int, kernel_size: int,
                 n_radius: int = 2, kind: Literal["type1", "type2"] = "type2",
                 filter_freqs: Literal["signed", "nonneg"] = "signed",
                 padding: Literal["same", "valid"] = "same") -> None:
        super().__init__()
        M = check_band_limit(freq_cutoff)
        if kind not in ("type1", "type2"):
            raise SteerableConfigError(f"kind: got {kind!r}; expected type1 or type2")
        if filter_freqs not in ("signed", "nonneg"):
            raise SteerableConfigError(f"filter_freqs: got {filter_freqs!r}; "
                                       "expected signed or nonneg")
        if padding not in ("same", "valid"):
            raise SteerableConfigError(f"padding: got {padding!r}; expected same or valid")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.freq_cutoff, self.kind, self.kernel_size = M, kind, kernel_size
        self.padding = kernel_size // 2 if padding == "same" else 0
        if kind == "type1":
            basis = filter_basis(kernel_size, n_radius, np.arange(M))  # [M, R, k, k]
            fan_in = in_channels * n_radius
            self.weight = nn.Parameter(complex_randn(M, out_channels, in_channels, n_radius,
                                                     std=1 / math.sqrt(fan_in)))
            self.register_buffer("basis", basis, persistent=False)
        else:
            freqs = np.arange(-(M - 1), M)
            full = filter_basis(kernel_size, n_radius, freqs)  # [2M-1, R, k, k]
            lm = np.arange(M)[:, None] - np.arange(M)[None, :]  # n = l - m
            selected = full[torch.from_numpy(lm + M - 1)]  # [M(l), M(m), R, k, k]
            mask = torch.ones(M, M) if filter_freqs == "signed" else \
                torch.from_numpy((lm >= 0).astype(np.float32))
            selected = selected * mask[:, :, None, None, None]
            fan_in = in_channels * n_radius * int(mask.sum().item()) / M
            self.weight = nn.Parameter(complex_randn(M, out_channels, M, in_channels, n_radius,
                                                     std=1 / math.sqrt(fan_in)))
            self.register_buffer("basis", selected, persistent=False)

    def kernel(self) -> torch.Tensor:
        """The assembled complex kernel ``[M*C_out, (M*)C_in, k, k]``."""
        k = self.kernel_size
        if self.kind == "type1":
            K = torch.einsum("mocr,mrxy->mocxy", self.weight, self.basis)
            return K.reshape(self.freq_cutoff * self.out_channels, self.in_channels, k, k)
        K = torch.einsum("lomcr,lmrxy->lomcxy", self.weight, self.basis)
        return K.reshape(self.freq_cutoff * self.out_channels,
                         self.freq_cutoff * self.in_channels, k, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K = self.kernel()
        if self.kind == "type1":
            if x.ndim != 4 or torch.is_complex(x) or x.shape[1] != self.in_channels:
                raise SteerableConfigError(
                    f"type1 conv: expected real input [B, C={self.in_channels}, H, W], got "
                    f"{x.dtype} {tuple(x.shape)}")
            out = F.conv2d(x, torch.cat([K.real, K.imag], 0), padding=self.padding)
            half = out.shape[1] // 2
            out = torch.complex(out[:, :half], out[:, half:])
        else:
            check_field(x, self.freq_cutoff, self.in_channels, "type2 conv")
            b, M, C, H, W = x.shape
            out = _complex_conv(x.reshape(b, M * C, H, W), K, 1, self.padding)
        b, _, H, W = out.shape
        return out.reshape(b, self.freq_cutoff, self.out_channels, H, W)


class CGNonlinearity(nn.Module):
    """Quadratic Clebsch-Gordan nonlinearity ``out[l, c] = sum_{m+n=l} w[l, m, c] F[m] F[n]``.

    Pairs are unordered (m <= n). ``wrap=False`` keeps only m + n < M (exact SO(2));
    ``wrap=True`` matches m + n modulo M like the official code, which is exact only for
    rotations by multiples of 2 pi / M.
    """

    def __init__(self, channels: int, freq_cutoff: int, wrap: bool = False) -> None:
        super().__init__()
        M = check_band_limit(freq_cutoff)
        pairs = [(m, n) for m in range(M) for n in range(m, M)
                 if wrap or m + n < M]
        self.freq_cutoff, self.channels = M, channels
        self.register_buffer("m_idx", torch.tensor([p[0] for p in pairs]), persistent=False)
        self.register_buffer("n_idx", torch.tensor([p[1] for p in pairs]), persistent=False)
        target = torch.zeros(M, len(pairs))
        for k, (m, n) in enumerate(pairs):
            target[(m + n) % M, k] = 1.0
        self.register_buffer("target", target.to(torch.complex64), persistent=False)
        self.m_of = [p[0] for p in pairs]
        self.n_of = [p[1] for p in pairs]
        self.pairs_of = [[k for k, (m, n) in enumerate(pairs) if (m + n) % M == out]
                         for out in range(M)]
        per_l = target.sum(1).clamp(min=1)
        std = 1 / torch.sqrt(per_l[(torch.tensor([p[0] + p[1] for p in pairs]) % M)])
        w = complex_randn(len(pairs), channels, std=1.0) * std[:, None]
        self.weight = nn.Parameter(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_field(x, self.freq_cutoff, self.channels, "CG nonlinearity")
        # each output frequency sums its own few pairs (sparse form of
        # sum_p target[l, p] w[p, c] F[m_p] F[n_p]; an einsum over all pairs copies a lot)
        outs = []
        for pairs in self.pairs_of:
            if not pairs:
                outs.append(torch.zeros_like(x[:, 0]))
                continue
            term = None
            for p in pairs:
                t = x[:, self.m_of[p]] * x[:, self.n_of[p]] * self.weight[p][None, :, None, None]
                term = t if term is None else term + t
            outs.append(term)
        return torch.stack(outs, 1)


class FourierReLU(nn.Module):
    """Fourier-space pointwise nonlinearity (official ``SE2NonLinearity``): inverse DFT to
    ``n_angle`` samples on the circle, ReLU on real and imaginary parts, DFT back, keep m < M.
    Exact for rotations by multiples of ``2 pi / n_angle``."""

    def __init__(self, freq_cutoff: int, n_angle: int = 40) -> None:
        super().__init__()
        M = check_band_limit(freq_cutoff)
        if n_angle < 2 * M - 1:
            raise SteerableConfigError(f"n_angle: got {n_angle}; expected >= 2M-1 = {2 * M - 1} "
                                       "samples to resolve the band limit")
        phi = 2 * np.pi * np.arange(n_angle) / n_angle
        m = np.arange(M)
        inv = np.exp(1j * np.outer(phi, m))  # f(phi) = sum_m F[m] e^{i m phi}
        fwd = np.exp(-1j * np.outer(m, phi)) / n_angle
        self.freq_cutoff = M
        self.register_buffer("inv", torch.from_numpy(inv.astype(np.complex64)), persistent=False)
        self.register_buffer("fwd", torch.from_numpy(fwd.astype(np.complex64)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        samples = torch.einsum("am,bmchw->bachw", self.inv, x)
        samples = torch.complex(F.relu(samples.real), F.relu(samples.imag))
        return torch.einsum("ma,bachw->bmchw", self.fwd, samples)


class NormNonlinearity(nn.Module):
    """``F * s(|F| + 1e-4 + b[m, c]) / (|F| + 1e-4)``: acts on moduli only, hence exactly
    equivariant. ``s`` is GELU (transformer FFN) or ReLU; ``b`` is a learned real bias per
    (m, c). The 1e-4 enters the activation's argument as well as the denominator, as in the
    authors' layer, so the gain is ``s(r) / r`` of the shifted modulus ``r = |F| + 1e-4``."""

    def __init__(self, channels: int, freq_cutoff: int,
                 activation: Literal["gelu", "relu"] = "gelu") -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(freq_cutoff, channels))
        self.act = F.gelu if activation == "gelu" else F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[..., M, C]`` (token layout) or ``[B, M, C, H, W]`` (map layout)."""
        r = modulus(x)
        bias = self.bias if x.ndim != 5 else self.bias[:, :, None, None]
        shifted = r + EPS
        return scale(x, self.act(shifted + bias) / shifted)


class FrequencyNorm(nn.Module):
    """"SE2BatchNorm" of the official code: divide every (b, c, position) by the L2 norm over
    frequencies, ``F / (||F[:, :, c, p]||_m + 1e-4)``; no statistics, so exactly equivariant."""

    def __init__(self, freq_dim: int = 1) -> None:
        super().__init__()
        self.freq_dim = freq_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = torch.sqrt((x.real.square() + x.imag.square()).sum(self.freq_dim, keepdim=True)
                          + 1e-12)
        return scale(x, 1.0 / (norm + EPS))


def complex_avg_pool(x: torch.Tensor, size: int = 2) -> torch.Tensor:
    """Average pooling of real and imaginary parts separately on a ``[B, M, C, H, W]`` field
    (rot90-exact when H and W are divisible by ``size``)."""
    b, M, C, H, W = x.shape
    if H % size or W % size:
        raise SteerableConfigError(f"avg pool {size}: map {H}x{W} is not divisible by {size}; "
                                   "odd sizes break exact rotation equivariance")
    flat = x.reshape(b, M * C, H, W)
    pooled = torch.complex(F.avg_pool2d(flat.real, size), F.avg_pool2d(flat.imag, size))
    return pooled.reshape(b, M, C, H // size, W // size)


def norm_flatten(x: torch.Tensor) -> torch.Tensor:
    """Invariant read-out ("SE2NormFlatten"): mean over positions, then L2 norm over m."""
    mean = x.mean(dim=(-2, -1))  # [B, M, C]
    return torch.sqrt((mean.real.square() + mean.imag.square()).sum(1) + 1e-12)


def invariant_gap(x: torch.Tensor) -> torch.Tensor:
    """Translation- and rotation-invariant read-out: the L2 norm over frequencies at every
    position (an invariant scalar map ``[B, C, H, W]``), then its mean over positions
    ``[B, C]``. A shift of the field permutes the positions and a rotation permutes them and
    changes only the phases, so both leave the result unchanged."""
    norms = torch.sqrt((x.real.square() + x.imag.square()).sum(1) + 1e-12)  # [B, C, H, W]
    return norms.mean(dim=(-2, -1))


def rotate_field(x: torch.Tensor, k: int = 1) -> torch.Tensor:
    """The group action of ``k`` quarter turns on a ``[B, M, C, H, W]`` field:
    ``torch.rot90`` of the map times the phase ``exp(-i m k pi / 2)``."""
    M = x.shape[1]
    phase = torch.exp(-1j * torch.arange(M, dtype=torch.float32) * (k * math.pi / 2))
    return torch.rot90(x, k, dims=(-2, -1)) * phase.to(x.dtype)[None, :, None, None, None]
