"""A small pre-LN Vision Transformer with LoRA adapters on its feed-forward layers.

The paper's parameterisation (official ``lora_pos="FFN"``): LoRA only on the two FFN linears
(``fc1``, ``fc2``) of every block, ``W' = W + s B A`` with ``A in R^{r x d_in}``,
``B in R^{d_out x r}``, ``s = lora_alpha / r``; before the swap ``A ~ kaiming_uniform(a = sqrt(50))`` and ``B = 0``
(the official code's ``reinitialize_lora_parameters``), so the adapted model starts equal to the
pretrained one. Only LoRA parameters train; the head is expanded to ``N_pre + N_l`` rows with the
old rows copied, the new rows ``xavier_uniform`` and new biases 0, and stays frozen. The
group-sparse penalty has one group per block (``G``, the structure penalty of the official code).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ViTConfig:
    image_size: int = 28
    patch: int = 7
    dim: int = 64
    depth: int = 4
    heads: int = 4
    mlp: int = 128
    n_classes: int = 10

    def __post_init__(self) -> None:
        if self.image_size % self.patch:
            raise ValueError(f"patch {self.patch} does not divide image_size {self.image_size}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = FeedForward(dim, mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class ViT(nn.Module):
    """CLS-token ViT on single-channel images in [0, 1] (normalised inside: mean = std = 0.5)."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n_patches = (cfg.image_size // cfg.patch) ** 2
        self.patch_embed = nn.Conv2d(1, cfg.dim, cfg.patch, cfg.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos = nn.Parameter(torch.randn(1, n_patches + 1, cfg.dim) * 0.02)
        self.blocks = nn.ModuleList(Block(cfg.dim, cfg.heads, cfg.mlp) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.n_classes)

    def features(self, images: torch.Tensor) -> torch.Tensor:
        x = (images.unsqueeze(1) - 0.5) / 0.5
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.norm(x[:, 0])

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images))


class LoRALinear(nn.Module):
    """``y = x W^T + b + s (x A^T) B^T`` around a frozen ``nn.Linear`` (loralib's ``Linear``
    without the merge-on-eval, so the base weights are never rewritten)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, init_a: float) -> None:
        super().__init__()
        self.base = base
        self.rank = rank
        self.scaling = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.init_a = init_a
        self.reset_lora()

    def reset_lora(self) -> None:
        """``A ~ kaiming_uniform(a=init_a)`` (fan_in = d_in), ``B = 0``."""
        nn.init.kaiming_uniform_(self.lora_A, a=self.init_a)
        nn.init.zeros_(self.lora_B)

    def delta_weight(self) -> torch.Tensor:
        """The low-rank update ``s B A`` (shape of the base weight)."""
        return self.scaling * self.lora_B @ self.lora_A

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scaling * F.linear(F.linear(x, self.lora_A), self.lora_B)


def expand_head(model: ViT, n_new: int, generator: torch.Generator | None = None) -> None:
    """Grow the head from ``N_pre`` to ``N_pre + n_new`` rows: old rows and biases copied, new rows
    ``xavier_uniform`` (on the new block, as the official code does), new biases 0."""
    if n_new < 1:
        raise ValueError(f"n_new: got {n_new}; expected at least one new class")
    old = model.head
    new = nn.Linear(old.in_features, old.out_features + n_new)
    with torch.no_grad():
        new.weight[: old.out_features] = old.weight
        new.bias[: old.out_features] = old.bias
        bound = math.sqrt(6.0 / (old.in_features + n_new))
        new.weight[old.out_features:] = (
            torch.rand(n_new, old.in_features, generator=generator) * 2 - 1) * bound
        new.bias[old.out_features:] = 0.0
    model.head = new
    model.cfg = ViTConfig(**{**model.cfg.to_dict(), "n_classes": new.out_features})


def add_lora(model: ViT, rank: int, alpha: float, init_a: float = math.sqrt(50)) -> None:
    """Wrap ``fc1`` and ``fc2`` of every block in a :class:`LoRALinear` (``lora_pos="FFN"``)."""
    for block in model.blocks:
        block.ffn.fc1 = LoRALinear(block.ffn.fc1, rank, alpha, init_a)
        block.ffn.fc2 = LoRALinear(block.ffn.fc2, rank, alpha, init_a)


def lora_modules(model: ViT) -> list[tuple[LoRALinear, LoRALinear]]:
    """``[(fc1, fc2)]`` per block; an error if the model carries no LoRA."""
    pairs = [(b.ffn.fc1, b.ffn.fc2) for b in model.blocks]
    if not all(isinstance(m, LoRALinear) for pair in pairs for m in pair):
        raise ValueError("model has no LoRA adapters; call add_lora first")
    return pairs


def lora_parameters(model: ViT) -> list[nn.Parameter]:
    return [p for pair in lora_modules(model) for m in pair for p in (m.lora_A, m.lora_B)]


def mark_only_lora_trainable(model: ViT, train_head: bool = False) -> list[nn.Parameter]:
    """Freeze everything but the LoRA matrices (and the head if ``train_head``); return the
    trainable parameters."""
    lora = {id(p) for p in lora_parameters(model)}
    head = {id(p) for p in model.head.parameters()} if train_head else set()
    for p in model.parameters():
        p.requires_grad_(id(p) in lora or id(p) in head)
    return [p for p in model.parameters() if p.requires_grad]


def group_sparse_penalty(model: ViT) -> torch.Tensor:
    """``G = sum_k || (A_fc1,k, B_fc1,k, A_fc2,k, B_fc2,k) ||_2`` (one group per block).

    ``torch.linalg.vector_norm`` of the concatenated group has a finite (zero) subgradient when a
    whole group is zero, where ``sqrt(sum(p**2))`` back-propagates NaN.
    """
    groups = [torch.cat([m.lora_A.flatten(), m.lora_B.flatten(), n.lora_A.flatten(),
                         n.lora_B.flatten()]) for m, n in lora_modules(model)]
    return torch.stack([torch.linalg.vector_norm(g) for g in groups]).sum()


@torch.no_grad()
def lora_update_norms(model: ViT) -> list[list[float]]:
    """Per block ``[||s B A||_F of fc1, of fc2]``: the diagnostic of the paper's knock-on
    feature hierarchy."""
    return [[float(torch.linalg.matrix_norm(m.delta_weight())) for m in pair]
            for pair in lora_modules(model)]


def build_vit(cfg: ViTConfig, seed: int) -> ViT:
    torch.manual_seed(seed)
    return ViT(cfg)


def model_from_state(cfg: dict, state_dict: dict[str, torch.Tensor]) -> ViT:
    """Rebuild a (LoRA-free) ViT from its config dict and state dict."""
    model = ViT(ViTConfig(**cfg))
    model.load_state_dict(state_dict)
    return model


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """argmax over all logits, in eval mode, batched."""
    was_training = model.training
    model.eval()
    out = [model(images[i:i + batch_size]).argmax(dim=1) for i in range(0, len(images), batch_size)]
    model.train(was_training)
    return torch.cat(out) if out else torch.empty(0, dtype=torch.long)


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Top-1 accuracy in percent."""
    if len(labels) == 0:
        raise ValueError("accuracy of an empty set is undefined")
    return float((predict(model, images) == labels).float().mean() * 100.0)
