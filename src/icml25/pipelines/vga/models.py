"""The two vision families the paper contrasts, small and trained from scratch: a
ConvNeXt-style CNN (Liu et al. 2022: depthwise 7x7 conv, LayerNorm, inverted MLP, residual) and
a ViT (Dosovitskiy et al. 2021: patch embedding, CLS token, pre-norm blocks) whose
learned 2-D position table is bilinearly interpolated to the input's patch grid, so the same
model reads 128 x 128 single drawings and 128 x 258 pairs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class CNNConfig:
    widths: tuple[int, ...] = (32, 64, 128, 256)
    depths: tuple[int, ...] = (1, 1, 2, 1)
    num_classes: int = 2

    def to_dict(self) -> dict:
        return {"kind": "cnn", **asdict(self)}


@dataclass(frozen=True)
class ViTConfig:
    image_size: int = 128
    patch: int = 8
    dim: int = 128
    depth: int = 4
    heads: int = 4
    mlp: int = 256
    num_classes: int = 2

    def to_dict(self) -> dict:
        return {"kind": "vit", **asdict(self)}


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    """depthwise 7x7 conv -> LayerNorm -> Linear(4C) -> GELU -> Linear(C) -> residual."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.fc1 = nn.Linear(channels, 4 * channels)
        self.fc2 = nn.Linear(4 * channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXtCNN(nn.Module):
    """Stem conv 4x4 stride 4, stages separated by LayerNorm + conv 2x2 stride 2, global average
    pool -> LayerNorm -> linear head."""

    def __init__(self, cfg: CNNConfig) -> None:
        super().__init__()
        if len(cfg.widths) != len(cfg.depths) or not cfg.widths:
            raise ValueError(f"cnn widths {cfg.widths} and depths {cfg.depths} must have the "
                             "same non-zero length")
        self.cfg = cfg
        layers: list[nn.Module] = [nn.Conv2d(1, cfg.widths[0], 4, stride=4),
                                   ChannelLayerNorm(cfg.widths[0])]
        for i, (width, depth) in enumerate(zip(cfg.widths, cfg.depths, strict=True)):
            if i:
                layers += [ChannelLayerNorm(cfg.widths[i - 1]),
                           nn.Conv2d(cfg.widths[i - 1], width, 2, stride=2)]
            layers += [ConvNeXtBlock(width) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(cfg.widths[-1])
        self.head = nn.Linear(cfg.widths[-1], cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.features(x).mean(dim=(2, 3))))


class ViTBlock(nn.Module):
    """Pre-norm transformer block: x + MHA(LN(x)); x + MLP(LN(x))."""

    def __init__(self, dim: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Patch embedding (conv, stride = patch), CLS token, learned 2-D position table
    (interpolated bilinearly to other grids), pre-norm blocks, LayerNorm, linear head on CLS."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        if cfg.dim % cfg.heads:
            raise ValueError(f"vit dim {cfg.dim} is not divisible by heads {cfg.heads}")
        if cfg.image_size % cfg.patch:
            raise ValueError(f"vit image_size {cfg.image_size} is not divisible by patch "
                             f"{cfg.patch}")
        self.cfg = cfg
        grid = cfg.image_size // cfg.patch
        self.embed = nn.Conv2d(1, cfg.dim, cfg.patch, stride=cfg.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos = nn.Parameter(torch.randn(1, cfg.dim, grid, grid) * 0.02)
        self.blocks = nn.ModuleList(ViTBlock(cfg.dim, cfg.heads, cfg.mlp)
                                    for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x)  # (B, D, gh, gw)
        gh, gw = tokens.shape[-2:]
        pos = self.pos
        if pos.shape[-2:] != (gh, gw):
            pos = F.interpolate(pos, size=(gh, gw), mode="bilinear", align_corners=False)
        tokens = (tokens + pos).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1)
        for block in self.blocks:
            tokens = block(tokens)
        return self.head(self.norm(tokens[:, 0]))


def build_model(kind: str, num_classes: int, **kwargs) -> nn.Module:
    """A fresh model of ``kind`` (``cnn`` or ``vit``) with ``num_classes`` outputs."""
    if kind == "cnn":
        return ConvNeXtCNN(CNNConfig(widths=tuple(kwargs["widths"]),
                                     depths=tuple(kwargs["depths"]), num_classes=num_classes))
    if kind == "vit":
        return ViT(ViTConfig(image_size=kwargs["image_size"], patch=kwargs["patch"],
                             dim=kwargs["dim"], depth=kwargs["depth"], heads=kwargs["heads"],
                             mlp=kwargs["mlp"], num_classes=num_classes))
    raise ValueError(f"unknown model kind {kind!r}; known: cnn, vit")
