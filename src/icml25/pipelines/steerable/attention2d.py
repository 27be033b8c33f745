"""The steerable transformer encoder in 2D (Kundu & Kondor 2025, Sec. 4).

Tokens are the N = H*W positions of a field ``[B, M, D, H, W]``; queries, keys and values are
formed frequency by frequency with complex matrices, the attention score of head h is the
modulus of ``A_ij = sum_m sum_d conj(q_i) (k_j + P_K[r_ij] E_ij^m)`` (rotation invariant), the
values stay in their frequency, and the relative positional terms use the circular harmonics
``E_ij^m = exp(-i m theta(p_i - p_j))`` of the token displacement times learned weights indexed
by the distance class ``r_ij``. The positional weights are created here, from the known token
grid, so they train (the official prototype creates them lazily after the optimiser).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icml25.pipelines.steerable.harmonics import (
    SteerableConfigError,
    check_band_limit,
    complex_randn,
    relative_harmonics,
)
from icml25.pipelines.steerable.layers2d import FrequencyNorm, NormNonlinearity, modulus, scale


class FrequencyLinear(nn.Module):
    """``y^m = W[m] x^m`` with one complex matrix per frequency (shared over tokens)."""

    def __init__(self, in_dim: int, out_dim: int, freq_cutoff: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(complex_randn(freq_cutoff, out_dim, in_dim,
                                                 std=1 / math.sqrt(in_dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[B, N, M, D_in]`` -> ``[B, N, M, D_out]``."""
        return torch.einsum("mod,bnmd->bnmo", self.weight, x)


class SteerableAttention(nn.Module):
    """Multi-head steerable self-attention with relative circular-harmonic positions."""

    def __init__(self, dim: int, heads: int, freq_cutoff: int, grid: tuple[int, int],
                 positional: bool = True) -> None:
        super().__init__()
        M = check_band_limit(freq_cutoff)
        if dim % heads:
            raise SteerableConfigError(f"transformer dim {dim} is not divisible by heads {heads}")
        self.dim, self.heads, self.dq, self.freq_cutoff = dim, heads, dim // heads, M
        self.q = FrequencyLinear(dim, dim, M)
        self.k = FrequencyLinear(dim, dim, M)
        self.v = FrequencyLinear(dim, dim, M)
        self.o = FrequencyLinear(dim, dim, M)
        self.grid = tuple(grid)
        self.positional = positional
        E, r_index, n_dist = relative_harmonics(grid[0], grid[1], M)
        self.n_dist = n_dist
        self.register_buffer("E", E, persistent=False)  # [M, N, N]
        self.register_buffer("r_index", r_index, persistent=False)  # [N, N]
        if positional:
            # index 0 (i = j) is a fixed zero, prepended in positional_terms()
            self.pos_k = nn.Parameter(complex_randn(M, heads, self.dq, n_dist, std=0.1))
            self.pos_v = nn.Parameter(complex_randn(M, heads, self.dq, n_dist, std=0.1))

    def positional_terms(self, table: torch.Tensor) -> torch.Tensor:
        """``P[m, h, d, r_ij] * E_ij^m`` as ``[M, h, dq, N, N]`` (zero on the diagonal)."""
        zero = torch.zeros(*table.shape[:-1], 1, dtype=table.dtype, device=table.device)
        full = torch.cat([zero, table], -1)  # r = 0 stays exactly zero
        return full[..., self.r_index] * self.E[:, None, None]

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Complex scores ``A[b, h, i, j]`` for tokens ``x: [B, N, M, D]``."""
        q, k = self._split(self.q(x)), self._split(self.k(x))
        A = torch.einsum("bimhd,bjmhd->bhij", q.conj(), k)
        if self.positional:
            A = A + torch.einsum("bimhd,mhdij->bhij", q.conj(), self.positional_terms(self.pos_k))
        return A

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, M, _ = x.shape
        return x.reshape(b, n, M, self.heads, self.dq)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, M, D = x.shape
        if (n, M, D) != (self.grid[0] * self.grid[1], self.freq_cutoff, self.dim):
            raise SteerableConfigError(
                f"steerable attention: expected tokens [B, {self.grid[0] * self.grid[1]}, "
                f"{self.freq_cutoff}, {self.dim}], got {tuple(x.shape)}")
        att = torch.softmax(modulus(self.scores(x)) / math.sqrt(self.dq), dim=-1)
        # real weights times complex values: contract the interleaved real/imaginary parts
        v = torch.view_as_real(self._split(self.v(x)))
        out = torch.einsum("bhij,bjmhdc->bimhdc", att, v)
        if self.positional:
            pv = torch.view_as_real(self.positional_terms(self.pos_v))
            out = out + torch.einsum("bhij,mhdijc->bimhdc", att, pv)
        return self.o(torch.view_as_complex(out.contiguous()).reshape(b, n, M, D))


class SteerableEncoderBlock(nn.Module):
    """Pre-norm block ``x + MHSA(norm x)``, then ``x + FFN(norm x)`` with
    ``FFN(x)^m = W2[m] normGELU(W1[m] x^m)`` (hidden width ``ff_mult * D``).

    ``layer_scale``: ``None`` is the plain residual of the official code; a number ``s`` puts a
    learned real gain per channel, initialised at ``s``, on each residual branch (LayerScale,
    Touvron et al. 2021, "Going deeper with image transformers"). A real gain per channel
    multiplies every frequency of that channel alike, so the block stays equivariant; a small
    ``s`` starts the block close to the identity, i.e. close to the steerable CNN without it.
    """

    def __init__(self, dim: int, heads: int, freq_cutoff: int, grid: tuple[int, int],
                 positional: bool = True, ff_mult: int = 4,
                 layer_scale: float | None = None) -> None:
        super().__init__()
        self.gamma1 = self.gamma2 = None
        if layer_scale is not None:
            self.gamma1 = nn.Parameter(torch.full((dim,), float(layer_scale)))
            self.gamma2 = nn.Parameter(torch.full((dim,), float(layer_scale)))
        self.norm1 = FrequencyNorm(freq_dim=2)
        self.attn = SteerableAttention(dim, heads, freq_cutoff, grid, positional)
        self.norm2 = FrequencyNorm(freq_dim=2)
        self.ff1 = FrequencyLinear(dim, ff_mult * dim, freq_cutoff)
        self.act = NormNonlinearity(ff_mult * dim, freq_cutoff, "gelu")
        self.ff2 = FrequencyLinear(ff_mult * dim, dim, freq_cutoff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attn(self.norm1(x))
        x = x + (a if self.gamma1 is None else scale(a, self.gamma1))
        f = self.ff2(self.act(self.ff1(self.norm2(x))))
        return x + (f if self.gamma2 is None else scale(f, self.gamma2))


class SteerableTransformerEncoder(nn.Module):
    """``layers`` blocks then a final frequency norm, on a field ``[B, M, D, H, W]``."""

    def __init__(self, dim: int, heads: int, layers: int, freq_cutoff: int,
                 grid: tuple[int, int], positional: bool = True, ff_mult: int = 4,
                 layer_scale: float | None = None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            SteerableEncoderBlock(dim, heads, freq_cutoff, grid, positional, ff_mult, layer_scale)
            for _ in range(layers))
        self.norm = FrequencyNorm(freq_dim=2)

    def forward(self, field: torch.Tensor) -> torch.Tensor:
        b, M, D, H, W = field.shape
        x = field.permute(0, 3, 4, 1, 2).reshape(b, H * W, M, D)  # tokens in row-major order
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return x.reshape(b, H, W, M, D).permute(0, 3, 4, 1, 2)
