"""A LLaMA-style causal language model (RMSNorm, rotary positions, SwiGLU, untied head).

The LLaMA architecture (Touvron et al., 2023) at any size, as the papers that pretrain or finetune
small causal LMs use it (frugal pretrains it with each optimiser; the GaLore/FRUGAL LLaMA
configurations are instances): pre-norm decoder blocks ``x + Attn(RMSNorm(x))`` and
``x + SwiGLU(RMSNorm(x))`` with bias-free linear layers, rotary position embeddings on queries and
keys (Su et al., RoFormer, rotate-half form as in LLaMA), a final RMSNorm and an untied output
(logits) layer. Nothing here depends on a paper, an optimiser or Kedro.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of the model; ``d_ff`` is the SwiGLU hidden width (LLaMA: about 8/3·d)."""

    vocab_size: int
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 176
    max_seq_len: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    tie_embeddings: bool = False
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: got {value!r}; expected a positive integer")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("rotary embeddings need an even head dimension "
                             f"(d_model/n_heads = {self.d_model // self.n_heads})")

    def to_dict(self) -> dict:
        return asdict(self)


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) · g`` (Zhang & Sennrich 2019), computed in float32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * self.weight.float()).to(x.dtype)


def rotary_tables(head_dim: int, seq_len: int, theta: float = 10000.0,
                  device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables, shape ``(seq_len, head_dim)``: frequency ``theta^(-2i/head_dim)``."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(seq_len, device=device).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs ``(x_i, x_{i+d/2})`` by position-dependent angles (LLaMA's rotate-half)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: list[torch.Tensor] | None = None) -> torch.Tensor:
        """``cache``: this layer's ``[keys, values]`` of earlier positions (empty list to start
        one); the new keys and values are appended. With a non-empty cache only one new
        position per call is supported (incremental decoding)."""
        b, t, d = x.shape
        shape = (b, t, self.n_heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        causal = True
        if cache is not None:
            if cache:
                if t != 1:
                    raise ValueError("a filled KV cache takes one new position per call")
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
                causal = False  # the single new query may attend to every cached position
            cache[:] = [k, v]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) · up(x))`` (Shazeer 2020), the LLaMA MLP."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.input_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: list[torch.Tensor] | None = None) -> torch.Tensor:
        x = x + self.self_attn(self.input_norm(x), cos, sin, cache)
        return x + self.mlp(self.post_attention_norm(x))


class LlamaLM(nn.Module):
    """Causal LM: ``forward(ids) -> logits`` of shape ``(batch, seq, vocab)``.

    Parameter names follow LLaMA's (``embed_tokens``, ``layers.<i>.self_attn.q_proj``, ...,
    ``norm``, ``lm_head``) so optimisers can split them by name.
    """

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rotary_tables(cfg.d_model // cfg.n_heads, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.init_std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.config.max_seq_len:
            raise ValueError(f"sequence length {t} exceeds max_seq_len {self.config.max_seq_len}")
        x = self.embed_tokens(ids)
        cos, sin = self.rope_cos[:t].to(x.dtype), self.rope_sin[:t].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))

    def forward_cached(self, ids: torch.Tensor, cache: list[list[torch.Tensor]]) -> torch.Tensor:
        """Incremental decoding: logits of the new positions ``ids`` given ``cache`` (one
        ``[keys, values]`` list per layer, filled in place). Start with ``new_cache()`` and the
        whole prompt, then feed one token per call; the logits equal those of :meth:`forward` on
        the full sequence."""
        if len(cache) != len(self.layers):
            raise ValueError(f"cache has {len(cache)} layers; the model has {len(self.layers)}")
        start = cache[0][0].shape[2] if cache[0] else 0
        t = ids.shape[1]
        if start + t > self.config.max_seq_len:
            raise ValueError(f"sequence length {start + t} exceeds max_seq_len "
                             f"{self.config.max_seq_len}")
        x = self.embed_tokens(ids)
        cos = self.rope_cos[start:start + t].to(x.dtype)
        sin = self.rope_sin[start:start + t].to(x.dtype)
        for layer, layer_cache in zip(self.layers, cache, strict=True):
            x = layer(x, cos, sin, layer_cache)
        return self.lm_head(self.norm(x))

    def new_cache(self) -> list[list[torch.Tensor]]:
        """An empty KV cache for :meth:`forward_cached`."""
        return [[] for _ in self.layers]

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of windows ``ids`` (``(batch, seq + 1)``)."""
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                               ids[:, 1:].reshape(-1))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


@torch.no_grad()
def mean_token_nll(model: nn.Module, windows: torch.Tensor, batch_size: int = 64) -> float:
    """Mean next-token negative log-likelihood (nats) over every target token of ``windows``.

    ``windows``: ``(n, seq + 1)`` token ids; perplexity is ``exp`` of the result.
    """
    if windows.ndim != 2 or windows.shape[0] == 0 or windows.shape[1] < 2:
        raise ValueError(f"windows: expected a non-empty (n, seq+1) array, got {tuple(windows.shape)}")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    device = next(model.parameters()).device
    for start in range(0, windows.shape[0], batch_size):
        chunk = windows[start:start + batch_size].to(device)
        logits = model(chunk[:, :-1]).float()
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                              reduction="sum")
        total += float(nll)
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def perplexity(mean_nll: float) -> float:
    """``exp(mean NLL)``; overflow maps to ``inf`` rather than an exception."""
    try:
        return math.exp(mean_nll)
    except OverflowError:
        return math.inf
