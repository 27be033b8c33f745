"""The two vision families the paper contrasts, small and trained from scratch: a
ConvNeXt-style CNN (Liu et al. 2022: depthwise 7x7 conv, LayerNorm, inverted MLP, residual) and
a ViT (Dosovitskiy et al. 2021: patch embedding, CLS token, pre-norm blocks) whose
learned 2-D position table is bilinearly interpolated to the input's patch grid, so the same
model reads 128 x 128 single drawings and 128 x 258 pairs.

Both take three options the CPU defaults use (``conf/base``; ``docs/papers/vga.md``): a
full-resolution 3x3 conv stem before the patchify layer (``conv_stem`` channels), the pooling of
the read-out (``pool``: the CLS token, the mean or the sum of the feature map / patch tokens) and
the normalisation before the head (``head_norm``: LayerNorm as in the papers, BatchNorm, none).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

#: Global poolings of the feature map / patch tokens (sum = mean x number of positions: a
#: read-out that keeps how much of a feature the image holds, e.g. how many nodes).
POOLS = ("mean", "sum")
#: Normalisations of the pooled read-out. LayerNorm (the papers' choice) normalises each image's
#: feature vector by its own scale, which removes a uniform growth of the features with the
#: number of drawn objects; BatchNorm standardises each feature over the batch and keeps it.
HEAD_NORMS = ("layer", "batch", "none")


def head_norm(kind: str, dim: int) -> nn.Module:
    """The normalisation before the linear head."""
    if kind == "layer":
        return nn.LayerNorm(dim)
    if kind == "batch":
        return nn.BatchNorm1d(dim)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"head_norm {kind!r} is not one of {list(HEAD_NORMS)}")


def pixel_stem(channels: int) -> nn.Sequential:
    """A convolutional stem at full resolution (after Xiao et al. 2021, "Early convolutions
    help transformers see better"): one 3x3 convolution with BatchNorm and GELU before the
    patchify layer. It lets the network threshold single pixels (a black node disk against a
    grey 1-pixel edge) before they are averaged into patches, which a linear patchify cannot."""
    return nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels),
                         nn.GELU())


@dataclass(frozen=True)
class CNNConfig:
    widths: tuple[int, ...] = (32, 64, 128, 256)
    depths: tuple[int, ...] = (1, 1, 2, 1)
    num_classes: int = 2
    stem: int = 4            # stem patch size and stride (ConvNeXt: 4)
    pool: str = "mean"       # global pooling: mean (ConvNeXt) or sum (mean x H x W)
    head_norm: str = "layer"  # on the pooled features: layer (ConvNeXt), batch or none
    conv_stem: int = 0       # channels of a full-resolution 3x3 conv stem (0 = none)

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
    pool: str = "cls"        # read-out: the CLS token, or the mean / sum of the patch tokens
    head_norm: str = "layer"  # before the head: layer (ViT), batch or none
    conv_stem: int = 0       # channels of a full-resolution 3x3 conv stem (0 = none)

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
        if cfg.pool not in POOLS:
            raise ValueError(f"cnn pool {cfg.pool!r} is not one of {list(POOLS)}")
        layers: list[nn.Module] = [pixel_stem(cfg.conv_stem)] if cfg.conv_stem else []
        layers += [nn.Conv2d(cfg.conv_stem or 1, cfg.widths[0], cfg.stem, stride=cfg.stem),
                   ChannelLayerNorm(cfg.widths[0])]
        for i, (width, depth) in enumerate(zip(cfg.widths, cfg.depths, strict=True)):
            if i:
                layers += [ChannelLayerNorm(cfg.widths[i - 1]),
                           nn.Conv2d(cfg.widths[i - 1], width, 2, stride=2)]
            layers += [ConvNeXtBlock(width) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.norm = head_norm(cfg.head_norm, cfg.widths[-1])
        self.head = nn.Linear(cfg.widths[-1], cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.features(x)
        pooled = f.mean(dim=(2, 3)) if self.cfg.pool == "mean" else f.sum(dim=(2, 3))
        return self.head(self.norm(pooled))


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
        self.stem = pixel_stem(cfg.conv_stem) if cfg.conv_stem else nn.Identity()
        self.embed = nn.Conv2d(cfg.conv_stem or 1, cfg.dim, cfg.patch, stride=cfg.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos = nn.Parameter(torch.randn(1, cfg.dim, grid, grid) * 0.02)
        self.blocks = nn.ModuleList(ViTBlock(cfg.dim, cfg.heads, cfg.mlp)
                                    for _ in range(cfg.depth))
        if cfg.pool not in ("cls", *POOLS):
            raise ValueError(f"vit pool {cfg.pool!r} is not one of {['cls', *POOLS]}")
        self.norm = head_norm(cfg.head_norm, cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(self.stem(x))  # (B, D, gh, gw)
        gh, gw = tokens.shape[-2:]
        pos = self.pos
        if pos.shape[-2:] != (gh, gw):
            pos = F.interpolate(pos, size=(gh, gw), mode="bilinear", align_corners=False)
        tokens = (tokens + pos).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1)
        for block in self.blocks:
            tokens = block(tokens)
        if self.cfg.pool == "cls":
            return self.head(self.norm(tokens[:, 0]))
        patches = tokens[:, 1:]
        pooled = patches.mean(dim=1) if self.cfg.pool == "mean" else patches.sum(dim=1)
        return self.head(self.norm(pooled))


def build_model(kind: str, num_classes: int, **kwargs) -> nn.Module:
    """A fresh model of ``kind`` (``cnn`` or ``vit``) with ``num_classes`` outputs."""
    if kind == "cnn":
        return ConvNeXtCNN(CNNConfig(widths=tuple(kwargs["widths"]),
                                     depths=tuple(kwargs["depths"]), num_classes=num_classes,
                                     stem=kwargs.get("stem", 4),
                                     pool=kwargs.get("pool", "mean"),
                                     head_norm=kwargs.get("head_norm", "layer"),
                                     conv_stem=kwargs.get("conv_stem", 0)))
    if kind == "vit":
        return ViT(ViTConfig(image_size=kwargs["image_size"], patch=kwargs["patch"],
                             dim=kwargs["dim"], depth=kwargs["depth"], heads=kwargs["heads"],
                             mlp=kwargs["mlp"], num_classes=num_classes,
                             pool=kwargs.get("pool", "cls"),
                             head_norm=kwargs.get("head_norm", "layer"),
                             conv_stem=kwargs.get("conv_stem", 0)))
    raise ValueError(f"unknown model kind {kind!r}; known: cnn, vit")
