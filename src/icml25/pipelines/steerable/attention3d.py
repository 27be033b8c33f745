"""The steerable transformer encoder in 3D (Kundu & Kondor 2025, Sec. 4, in 3D; official
``SE3MultiSelfAttention``, read for facts only).

Tokens are the N = X*Y*Z positions of a field ``[B, (L+1)^2, D, X, Y, Z]`` (real spherical-
harmonic basis, :mod:`harmonics3d`). Queries, keys and values are formed degree by degree with
real matrices ``W[l]`` acting on the channels and shared over the 2l+1 components; the score of
head h is ``|A_ij|`` with

    A_ij = sum_l sum_m sum_d q_i^{l,m,d} (k_j^{l,m,d} + P_K[l, h, d, r_ij] Y_l^m(dir(p_i - p_j)))
           / sqrt(sum_l (2l+1) dq),

invariant because ``sum_m a_m b_m`` is invariant under the orthogonal ``D_l``; values stay in
their degree and receive ``P_V[l, h, :, r_ij] Y_l(dir)``. The positional tables are created
here from the known token grid (so they train), with the r = 0 entry a fixed zero.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from icml25.pipelines.steerable.harmonics import SteerableConfigError
from icml25.pipelines.steerable.harmonics3d import (
    check_degree,
    degree_of_component,
    n_components,
    real_sph_harm_all,
)
from icml25.pipelines.steerable.layers3d import NormNonlinearity3d, frequency_norm3d


def grid_geometry3d(size: int, max_degree: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Relative geometry of the tokens of a ``size^3`` grid (row-major order): the distance
    class ``r[i, j]`` (rank of ``|p_i - p_j|^2`` among the distinct values, 0 only for i = j),
    ``Y[k, i, j]`` = packed real harmonics of the direction of ``p_i - p_j`` (0 for i = j) and
    R, the number of distinct nonzero distances."""
    pos = np.stack(np.meshgrid(*[np.arange(size)] * 3, indexing="ij"), -1).reshape(-1, 3)
    delta = (pos[:, None, :] - pos[None, :, :]).astype(float)
    sq = (delta**2).sum(-1).astype(np.int64)
    distinct = np.unique(sq)
    r_index = np.searchsorted(distinct, sq)
    Y = np.moveaxis(real_sph_harm_all(max_degree, delta), -1, 0)
    Y[:, r_index == 0] = 0.0
    return r_index, Y, int(len(distinct) - 1)


class DegreeLinear(nn.Module):
    """``y^l = W[l] x^l`` on the channels, shared over the 2l+1 components of degree l."""

    def __init__(self, in_dim: int, out_dim: int, max_degree: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_degree + 1, out_dim, in_dim)
                                   / math.sqrt(in_dim))
        self.register_buffer("deg", torch.from_numpy(degree_of_component(max_degree)),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[B, N, K, D_in]`` -> ``[B, N, K, D_out]``."""
        return torch.einsum("kod,bnkd->bnko", self.weight[self.deg], x)


class SteerableAttention3d(nn.Module):
    """Multi-head steerable self-attention on a cubic token grid with spherical-harmonic
    relative positions."""

    def __init__(self, dim: int, heads: int, max_degree: int, grid: int,
                 positional: bool = True) -> None:
        super().__init__()
        L = check_degree(max_degree)
        if dim % heads:
            raise SteerableConfigError(f"transformer dim {dim} is not divisible by heads {heads}")
        self.dim, self.heads, self.dq, self.max_degree, self.grid = dim, heads, dim // heads, L, grid
        self.scale = math.sqrt(sum((2 * ell + 1) * self.dq for ell in range(L + 1)))
        self.q, self.k = DegreeLinear(dim, dim, L), DegreeLinear(dim, dim, L)
        self.v, self.o = DegreeLinear(dim, dim, L), DegreeLinear(dim, dim, L)
        r_index, Y, n_dist = grid_geometry3d(grid, L)
        self.n_dist, self.positional = n_dist, positional
        self.register_buffer("r_index", torch.from_numpy(r_index), persistent=False)
        self.register_buffer("Y", torch.from_numpy(Y.astype(np.float32)), persistent=False)
        self.register_buffer("deg", torch.from_numpy(degree_of_component(L)), persistent=False)
        if positional:
            self.pos_k = nn.Parameter(0.1 * torch.randn(L + 1, heads, self.dq, n_dist))
            self.pos_v = nn.Parameter(0.1 * torch.randn(L + 1, heads, self.dq, n_dist))

    def positional_terms(self, table: torch.Tensor) -> torch.Tensor:
        """``P[l(k), h, d, r_ij] Y_k(dir_ij)`` as ``[K, h, dq, N, N]`` (zero on the diagonal)."""
        zero = torch.zeros(*table.shape[:-1], 1, dtype=table.dtype, device=table.device)
        full = torch.cat([zero, table], -1)[self.deg]  # [K, h, dq, R+1]
        return full[..., self.r_index] * self.Y[:, None, None]

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, k, _ = x.shape
        return x.reshape(b, n, k, self.heads, self.dq)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self._split(self.q(x)), self._split(self.k(x))
        A = torch.einsum("bikhd,bjkhd->bhij", q, k)
        if self.positional:
            A = A + torch.einsum("bikhd,khdij->bhij", q, self.positional_terms(self.pos_k))
        return A / self.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, k, d = x.shape
        if (n, k, d) != (self.grid**3, n_components(self.max_degree), self.dim):
            raise SteerableConfigError(
                f"steerable attention 3d: expected tokens [B, {self.grid**3}, "
                f"{n_components(self.max_degree)}, {self.dim}], got {tuple(x.shape)}")
        att = torch.softmax(self.scores(x).abs(), dim=-1)
        out = torch.einsum("bhij,bjkhd->bikhd", att, self._split(self.v(x)))
        if self.positional:
            out = out + torch.einsum("bhij,khdij->bikhd", att, self.positional_terms(self.pos_v))
        return self.o(out.reshape(b, n, k, d))


class SteerableEncoderBlock3d(nn.Module):
    """Pre-norm block ``x + MHSA(norm x)``, then ``x + FFN(norm x)`` with
    ``FFN(x)^l = W2[l] normGELU(W1[l] x^l)``."""

    def __init__(self, dim: int, heads: int, max_degree: int, grid: int,
                 positional: bool = True, ff_mult: int = 4) -> None:
        super().__init__()
        self.attn = SteerableAttention3d(dim, heads, max_degree, grid, positional)
        self.ff1 = DegreeLinear(dim, ff_mult * dim, max_degree)
        self.act = NormNonlinearity3d(ff_mult * dim, max_degree)
        self.ff2 = DegreeLinear(ff_mult * dim, dim, max_degree)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(frequency_norm3d(x, comp_dim=2))
        return x + self.ff2(self.act(self.ff1(frequency_norm3d(x, comp_dim=2))))


class SteerableTransformerEncoder3d(nn.Module):
    """``layers`` blocks then a final norm, on a field ``[B, (L+1)^2, D, X, X, X]``."""

    def __init__(self, dim: int, heads: int, layers: int, max_degree: int, grid: int,
                 positional: bool = True, ff_mult: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            SteerableEncoderBlock3d(dim, heads, max_degree, grid, positional, ff_mult)
            for _ in range(layers))

    def forward(self, field: torch.Tensor) -> torch.Tensor:
        b, k, d, X, Y, Z = field.shape
        x = field.permute(0, 3, 4, 5, 1, 2).reshape(b, X * Y * Z, k, d)
        for block in self.blocks:
            x = block(x)
        x = frequency_norm3d(x, comp_dim=2)
        return x.reshape(b, X, Y, Z, k, d).permute(0, 4, 5, 1, 2, 3)
