"""The small Sortformer-style diarizer (see ``docs/papers/sortformer.md``).

log-mel -> three Conv2d(3x3, stride 2, ReLU) (x8 -> 80 ms frames) -> Linear -> + sinusoidal
absolute positions -> pre-LN Transformer encoder (or ``conformer_lite`` blocks: MHSA + depthwise
conv k=9 + FFN) with a key-padding mask -> head ReLU, Linear(d, d), ReLU, Linear(d, K) -> sigmoid.
Positions are required: self-attention alone is permutation-equivariant in time and could not
tell who spoke first. Head init: xavier-uniform, bias 0.01 (as NeMo).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class DiarizerConfig:
    n_mels: int = 80
    conv_channels: int = 16
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 512
    dropout: float = 0.1
    n_speakers: int = 4
    encoder: str = "transformer"  # transformer | conformer_lite

    def to_dict(self) -> dict:
        return asdict(self)


def sinusoidal_positions(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div[: d // 2])
    return pe


class ConvSubsampling(nn.Module):
    """(B, T, n_mels) -> (B, ceil(T/8), d_model)."""

    def __init__(self, n_mels: int, channels: int, d_model: int) -> None:
        super().__init__()
        layers = []
        for i in range(3):
            layers += [nn.Conv2d(1 if i == 0 else channels, channels, 3, stride=2, padding=1),
                       nn.ReLU()]
        self.conv = nn.Sequential(*layers)
        freq = n_mels
        for _ in range(3):
            freq = (freq - 1) // 2 + 1
        self.out = nn.Linear(channels * freq, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x[:, None])  # (B, C, T', F')
        b, c, t, f = h.shape
        return self.out(h.permute(0, 2, 1, 3).reshape(b, t, c * f))


class ConformerLiteBlock(nn.Module):
    """Pre-LN block: MHSA, depthwise conv (k=9), FFN; residual around each."""

    def __init__(self, d: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
        self.dw = nn.Conv1d(d, d, 9, padding=4, groups=d)
        self.pw = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, d_ff), nn.SiLU(), nn.Dropout(dropout),
                                nn.Linear(d_ff, d))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.drop(self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0])
        h = self.ln2(x)
        if pad is not None:
            h = h.masked_fill(pad[:, :, None], 0.0)
        x = x + self.drop(self.pw(torch.nn.functional.silu(self.dw(h.transpose(1, 2))
                                                           .transpose(1, 2))))
        return x + self.drop(self.ff(self.ln3(x)))


class Diarizer(nn.Module):
    """Frame-level multi-label speaker activity: (B, T_feat, n_mels) -> (B, ceil(T/8), K)."""

    def __init__(self, cfg: DiarizerConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise ValueError(f"d_model {cfg.d_model} must be divisible by n_heads {cfg.n_heads}")
        self.cfg = cfg
        self.front = ConvSubsampling(cfg.n_mels, cfg.conv_channels, cfg.d_model)
        if cfg.encoder == "transformer":
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout,
                                           batch_first=True, norm_first=True)
                for _ in range(cfg.n_layers))
        elif cfg.encoder == "conformer_lite":
            self.layers = nn.ModuleList(
                ConformerLiteBlock(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout)
                for _ in range(cfg.n_layers))
        else:
            raise ValueError(f"encoder: got {cfg.encoder!r}; expected transformer|conformer_lite")
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(cfg.d_model, cfg.d_model), nn.ReLU(),
                                  nn.Linear(cfg.d_model, cfg.n_speakers))
        for m in self.head:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.constant_(m.bias, 0.01)

    def encode(self, feats: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        h = self.front(feats)
        h = h + sinusoidal_positions(h.shape[1], h.shape[2]).to(h)
        pad = None
        if lengths is not None:
            pad = torch.arange(h.shape[1], device=h.device)[None] >= lengths.to(h.device)[:, None]
        for layer in self.layers:
            if isinstance(layer, nn.TransformerEncoderLayer):
                h = layer(h, src_key_padding_mask=pad)
            else:
                h = layer(h, pad)
        return self.norm(h)

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Probabilities (B, ceil(T_feat/8), K); ``lengths`` counts output frames."""
        return torch.sigmoid(self.head(self.encode(feats, lengths)))


def output_frames(n_feat_frames: int) -> int:
    n = n_feat_frames
    for _ in range(3):
        n = (n - 1) // 2 + 1
    return n
