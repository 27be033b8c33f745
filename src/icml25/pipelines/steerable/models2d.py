"""The 2D classifiers compared on rotated digits (``docs/papers/steerable.md``,
"Baselines"): the steerable CNN, the steerable CNN with the steerable transformer encoder (the
paper's method), a plain CNN and a CNN-stem vision transformer.

Every model maps real images ``[B, 1, H, W]`` to class logits ``[B, n_classes]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from icml25.pipelines.steerable.attention2d import SteerableTransformerEncoder
from icml25.pipelines.steerable.harmonics import SteerableConfigError, check_band_limit
from icml25.pipelines.steerable.layers2d import (
    CGNonlinearity,
    FourierReLU,
    FrequencyNorm,
    NormNonlinearity,
    SteerableConv2d,
    complex_avg_pool,
    invariant_gap,
    norm_flatten,
)

Nonlinearity = Literal["cg", "fourier_relu", "norm_relu"]
#: ``valid``: the authors' read-out, a valid conv whose kernel covers the whole final map
#: (one output position), then the norm over frequencies: invariant to rotations about the
#: image centre only. ``gap``: a same-padded steerable conv, the norm over frequencies at
#: every position, then the global average over positions: invariant to rotations and
#: (up to pooling and border effects) to translations.
Readout = Literal["valid", "gap"]
READOUTS = ("valid", "gap")


@dataclass(frozen=True)
class SteerableNetConfig:
    """Shape of the steerable CNN (official RotMNIST model, widths and pools configurable)."""

    image_size: int = 28
    n_classes: int = 10
    freq_cutoff: int = 4
    n_radius: int = 2
    kernel_size: int = 5
    widths: tuple[int, ...] = (8, 16, 16, 32)
    pool_after: tuple[int, ...] = (1, 3)
    nonlinear_after: tuple[int, ...] = (0, 2)
    nonlinearity: Nonlinearity = "cg"
    cg_wrap: bool = False
    n_angle: int = 40
    filter_freqs: Literal["signed", "nonneg"] = "signed"
    final_channels: int = 64
    head_hidden: int = 128
    dropout: float = 0.3
    transformer_layers: int = 0
    transformer_heads: int = 4
    positional: bool = True
    ff_mult: int = 4
    layer_scale: float | None = None
    readout: Readout = "valid"
    extra: dict = field(default_factory=dict)

    def final_map(self) -> int:
        """Side of the map after the pools (the encoder's token grid, the last conv's kernel)."""
        size = self.image_size
        for _ in self.pool_after:
            if size % 2:
                raise SteerableConfigError(
                    f"image size {self.image_size}: a 2x2 pool meets an odd map ({size}); "
                    "rotation equivariance needs even sizes at every pool")
            size //= 2
        return size


class SteerableNet(nn.Module):
    """conv(T1) -> [norm, nonlinearity, norm] -> conv(T2) ... with 2x2 pools, then (optionally)
    the steerable transformer encoder on the final map's tokens, the read-out (``readout``:
    ``valid`` = a valid conv that covers the whole map, 1x1 output, and the norm over
    frequencies; ``gap`` = a same-padded conv, the norm over frequencies at every position and
    the global average over positions) and an MLP head."""

    def __init__(self, cfg: SteerableNetConfig) -> None:
        super().__init__()
        M = check_band_limit(cfg.freq_cutoff)
        if any(i >= len(cfg.widths) for i in (*cfg.pool_after, *cfg.nonlinear_after)):
            raise SteerableConfigError("pool_after / nonlinear_after name a conv that does not "
                                       f"exist (there are {len(cfg.widths)})")
        if cfg.readout not in READOUTS:
            raise SteerableConfigError(f"readout: got {cfg.readout!r}; expected one of "
                                       f"{READOUTS}")
        self.cfg = cfg
        side = cfg.final_map()
        if side % 2 == 0:
            raise SteerableConfigError(f"final map {side}x{side} is even: the last conv needs "
                                       "an odd kernel centred on the rotation centre")
        self.convs = nn.ModuleList()
        self.nonlins = nn.ModuleDict()
        c_in = 1
        for i, width in enumerate(cfg.widths):
            self.convs.append(SteerableConv2d(
                c_in, width, M, cfg.kernel_size, cfg.n_radius, "type1" if i == 0 else "type2",
                cfg.filter_freqs))
            if i in cfg.nonlinear_after:
                self.nonlins[str(i)] = self._nonlinearity(width)
            c_in = width
        self.norm = FrequencyNorm()
        self.encoder = None
        if cfg.transformer_layers > 0:
            self.encoder = SteerableTransformerEncoder(
                c_in, cfg.transformer_heads, cfg.transformer_layers, M, (side, side),
                cfg.positional, cfg.ff_mult, cfg.layer_scale)
        if cfg.readout == "valid":
            self.final = SteerableConv2d(c_in, cfg.final_channels, M, side, cfg.n_radius,
                                         "type2", cfg.filter_freqs, padding="valid")
        else:
            self.final = SteerableConv2d(c_in, cfg.final_channels, M, cfg.kernel_size,
                                         cfg.n_radius, "type2", cfg.filter_freqs,
                                         padding="same")
        self.head = nn.Sequential(
            nn.Linear(cfg.final_channels, cfg.head_hidden), nn.BatchNorm1d(cfg.head_hidden),
            nn.ELU(), nn.Dropout(cfg.dropout), nn.Linear(cfg.head_hidden, cfg.n_classes))

    def _nonlinearity(self, width: int) -> nn.Module:
        cfg = self.cfg
        if cfg.nonlinearity == "cg":
            return CGNonlinearity(width, cfg.freq_cutoff, cfg.cg_wrap)
        if cfg.nonlinearity == "fourier_relu":
            return FourierReLU(cfg.freq_cutoff, cfg.n_angle)
        return NormNonlinearity(width, cfg.freq_cutoff, "relu")

    def conv_features(self, images: torch.Tensor) -> torch.Tensor:
        """The equivariant field of the conv stack ``[B, M, C, side, side]`` (encoder input)."""
        check_images(images, self.cfg.image_size)
        x = images
        for i, conv in enumerate(self.convs):
            x = self.norm(conv(x))
            if str(i) in self.nonlins:
                x = self.norm(self.nonlins[str(i)](x))
            if i in self.cfg.pool_after:
                x = complex_avg_pool(x)
        return x

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """The equivariant field entering the last conv (after the encoder, if any)."""
        x = self.conv_features(images)
        return x if self.encoder is None else self.encoder(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        out = self.final(self.features(images))
        pooled = norm_flatten(out) if self.cfg.readout == "valid" else invariant_gap(out)
        return self.head(pooled)


class PlainCNN(nn.Module):
    """Baseline ``cnn``: conv 1->c1->c2->c3 (3x3), BatchNorm, ReLU, 2x2 pools, global average
    pool, linear."""

    def __init__(self, widths: tuple[int, ...] = (32, 64, 64), n_classes: int = 10,
                 image_size: int = 28) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 1
        for i, width in enumerate(widths):
            layers += [nn.Conv2d(c_in, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            if i < len(widths) - 1:
                layers.append(nn.MaxPool2d(2))
            c_in = width
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c_in, n_classes)
        self.image_size = image_size

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_images(images, self.image_size)
        return self.fc(self.body(images).mean(dim=(-2, -1)))


class CNNViT(nn.Module):
    """Baseline ``vit`` (official comparison model): conv 1->c k5, ReLU, conv c->d k4 stride 4
    (7x7 tokens), BatchNorm, ``nn.TransformerEncoder``, flatten, linear."""

    def __init__(self, stem: int = 64, dim: int = 128, heads: int = 8, ff: int = 256,
                 layers: int = 4, dropout: float = 0.1, n_classes: int = 10,
                 image_size: int = 28) -> None:
        super().__init__()
        if image_size % 4:
            raise SteerableConfigError(f"vit: image size {image_size} not divisible by 4")
        self.stem = nn.Sequential(nn.Conv2d(1, stem, 5, padding=2), nn.ReLU(),
                                  nn.Conv2d(stem, dim, 4, stride=4), nn.BatchNorm2d(dim))
        layer = nn.TransformerEncoderLayer(dim, heads, ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.fc = nn.Linear(dim * (image_size // 4) ** 2, n_classes)
        self.image_size = image_size

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_images(images, self.image_size)
        tokens = self.stem(images).flatten(2).transpose(1, 2)  # [B, 49, d]
        return self.fc(self.encoder(tokens).flatten(1))


def check_images(images: torch.Tensor, size: int) -> None:
    """Refuse input that is not a finite real batch ``[B, 1, size, size]``. A ``meta`` tensor
    (shapes without values: the paper-scale dry run counts FLOPs on it) is checked for shape
    and dtype only."""
    if images.ndim != 4 or images.shape[1] != 1 or tuple(images.shape[-2:]) != (size, size):
        raise SteerableConfigError(
            f"images: expected a batch [B, 1, {size}, {size}], got {tuple(images.shape)}")
    if torch.is_complex(images) or (not images.is_meta and not torch.isfinite(images).all()):
        raise SteerableConfigError("images: expected finite real pixel values")


def count_parameters(model: nn.Module) -> int:
    """Real parameter count (a complex weight counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())
