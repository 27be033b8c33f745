"""The 3D classifiers compared on rotated synthetic voxel shapes (``docs/papers/steerable.md``,
"Data"; official ModelNet10 model, read for facts only): the SE(3)-
steerable CNN, the same CNN with the steerable transformer encoder (the paper's method) and a
plain 3D CNN.

Every model maps voxel grids ``[B, 1, G, G, G]`` (or ``[B, G, G, G]``) to class logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from icml25.pipelines.steerable.attention3d import SteerableTransformerEncoder3d
from icml25.pipelines.steerable.harmonics import SteerableConfigError
from icml25.pipelines.steerable.harmonics3d import check_degree
from icml25.pipelines.steerable.layers3d import (
    CGNonlinearity3d,
    FieldBatchNorm3d,
    SteerableConv3d,
    avg_pool3d_field,
    frequency_norm3d,
    norm_flatten3d,
)


def check_voxels(voxels: torch.Tensor, grid: int) -> torch.Tensor:
    """Refuse input that is not a finite real batch ``[B, 1, G, G, G]`` (or ``[B, G, G, G]``);
    returns the 5-D view. A ``meta`` tensor is checked for shape and dtype only."""
    x = voxels[:, None] if voxels.ndim == 4 else voxels
    if x.ndim != 5 or x.shape[1] != 1 or tuple(x.shape[-3:]) != (grid,) * 3:
        raise SteerableConfigError(
            f"voxels: expected a batch [B, 1, {grid}, {grid}, {grid}], got {tuple(voxels.shape)}")
    if torch.is_complex(x) or (not x.is_meta and not torch.isfinite(x).all()):
        raise SteerableConfigError("voxels: expected finite real occupancy values")
    return x


@dataclass(frozen=True)
class SteerableNet3dConfig:
    grid: int = 16
    n_classes: int = 8
    max_degree: int = 1
    kernel_size: int = 3
    n_radius: int = 1
    widths: tuple[int, ...] = (4, 8)
    head_hidden: int = 32
    dropout: float = 0.3
    transformer_layers: int = 0
    transformer_heads: int = 2
    positional: bool = True
    ff_mult: int = 2
    norm: str = "batch"


class SteerableNet3d(nn.Module):
    """conv (Type 1) -> pool -> norm -> CG -> norm -> [conv (Type 2) -> pool -> norm]... ->
    (optionally) the steerable transformer encoder on the final map's tokens -> invariant
    read-out (norm of each degree) -> MLP head. Every conv is followed by a 2x2x2 average pool,
    so the final map has side ``grid / 2^len(widths)``."""

    def __init__(self, cfg: SteerableNet3dConfig) -> None:
        super().__init__()
        L = check_degree(cfg.max_degree)
        side = cfg.grid
        for _ in cfg.widths:
            if side % 2:
                raise SteerableConfigError(f"grid {cfg.grid}: a 2x2x2 pool meets an odd map "
                                           f"({side}); exact equivariance needs even sides")
            side //= 2
        self.cfg, self.side = cfg, side
        self.convs = nn.ModuleList()
        c_in, l_in = 1, 0
        for width in cfg.widths:
            self.convs.append(SteerableConv3d(c_in, width, l_in, L, cfg.kernel_size,
                                              cfg.n_radius, filter_degree=L))
            c_in, l_in = width, L
        self.cg = CGNonlinearity3d(cfg.widths[0], L)
        if cfg.norm not in ("batch", "frequency"):
            raise SteerableConfigError(f"norm: got {cfg.norm!r}; expected batch or frequency")
        # one norm after each conv and one after the nonlinearity
        self.norms = nn.ModuleList(
            FieldBatchNorm3d(w, L) if cfg.norm == "batch" else nn.Identity()
            for w in (*cfg.widths, cfg.widths[0]))
        self.encoder = None
        if cfg.transformer_layers > 0:
            self.encoder = SteerableTransformerEncoder3d(
                c_in, cfg.transformer_heads, cfg.transformer_layers, L, side, cfg.positional,
                cfg.ff_mult)
        self.head = nn.Sequential(
            nn.Linear((L + 1) * c_in, cfg.head_hidden), nn.BatchNorm1d(cfg.head_hidden),
            nn.ELU(), nn.Dropout(cfg.dropout), nn.Linear(cfg.head_hidden, cfg.n_classes))

    def conv_features(self, voxels: torch.Tensor) -> torch.Tensor:
        x = check_voxels(voxels, self.cfg.grid)
        for i, conv in enumerate(self.convs):
            # pool first: the norms and the quadratic nonlinearity then run on 8x fewer voxels
            x = self._norm(i, avg_pool3d_field(conv(x)))
            if i == 0:
                x = self._norm(len(self.convs), self.cg(x))
        return x

    def _norm(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """``norm: frequency`` = the official per-position "SE3BatchNorm";
        ``batch`` = :class:`FieldBatchNorm3d`."""
        return frequency_norm3d(x) if self.cfg.norm == "frequency" else self.norms[i](x)

    def features(self, voxels: torch.Tensor) -> torch.Tensor:
        x = self.conv_features(voxels)
        return x if self.encoder is None else self.encoder(x)

    def forward(self, voxels: torch.Tensor) -> torch.Tensor:
        return self.head(norm_flatten3d(self.features(voxels), self.cfg.max_degree))


class PlainCNN3d(nn.Module):
    """Baseline ``cnn3d``: conv3d (3^3) -> BatchNorm -> ReLU -> 2x2x2 max pool per width,
    global average pool, linear."""

    def __init__(self, widths: tuple[int, ...] = (8, 16), n_classes: int = 8,
                 grid: int = 16) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 1
        for width in widths:
            layers += [nn.Conv3d(c_in, width, 3, padding=1), nn.BatchNorm3d(width), nn.ReLU(),
                       nn.MaxPool3d(2)]
            c_in = width
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c_in, n_classes)
        self.grid = grid

    def forward(self, voxels: torch.Tensor) -> torch.Tensor:
        x = check_voxels(voxels, self.grid)
        return self.fc(self.body(x).mean(dim=(-3, -2, -1)))
