"""SoftShape (Liu et al., ICML 2025, arXiv 2505.06892) in plain torch.

The network follows the authors' reference implementation (github.com/qianlima-lab/SoftShape,
``models/SoftShapeModel.py``), read for facts only; every line here is our own. Step numbers
refer to docs/papers/softshape.md ("The method"):

- shape embedding: ``Conv1d(C_in, D, m, stride q)`` + zero-initialised positional table + dropout
  (step 2);
- one score head ``g(u) = sigmoid(w2ᵀ tanh(W1 u + b1) + b2)`` shared by all layers (step 3);
- soft shape sparsification: keep the ``ceil(rho·N)`` top-scored shapes (in temporal order, each
  times its score) and merge the rest, score-weighted, into one extra shape (step 6);
- intra-shape learning: a top-1 mixture of ``K`` experts with a zero-initialised router and the
  ``cv²`` balance loss (step 7); inter-shape learning: an Inception module along the shape
  sequence (step 8);
- head: score-weighted mean of per-shape logits (step 9).

Ablation flags (docs/papers/softshape.md, "Baselines"): ``hard`` (no merged shape), ``use_moe``, ``use_inception``,
``sparse_rate = 0`` (no sparsification), ``pooling = "mean"`` (no score weighting at the head).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class SoftShapeConfig:
    """Architecture of one SoftShape network (the reference code's defaults)."""

    seq_len: int
    shape_size: int
    stride: int
    n_classes: int
    in_channels: int = 1
    emb_dim: int = 128
    depth: int = 2
    sparse_rate: float = 0.5
    dropout: float = 0.15
    hard: bool = False
    use_moe: bool = True
    use_inception: bool = True
    pooling: Literal["score", "mean"] = "score"
    router_init: Literal["zeros", "normal"] = "zeros"
    inception_filters: int = 32

    def __post_init__(self) -> None:
        if self.n_classes < 2:
            raise ValueError(f"n_classes: got {self.n_classes}; a classifier needs >= 2 classes")
        if self.shape_size < 1 or self.stride < 1:
            raise ValueError(f"shape_size {self.shape_size} and stride {self.stride} must be >= 1")
        if self.n_tokens < 2:
            raise ValueError(
                f"shape_size {self.shape_size} with stride {self.stride} gives {self.n_tokens} "
                f"shape(s) for length {self.seq_len}; need >= 2 (shape_size <= seq_len - stride)")
        if 4 * self.inception_filters != self.emb_dim:
            raise ValueError(f"emb_dim {self.emb_dim} must equal 4 * inception_filters "
                             f"({self.inception_filters}): the shared expert's output is added "
                             "to the shapes")
        if not 0.0 <= self.sparse_rate < 1.0:
            raise ValueError(f"sparse_rate: got {self.sparse_rate}; expected 0 <= rate < 1")

    @property
    def n_tokens(self) -> int:
        """M = floor((T - m) / q) + 1 shapes (no padding)."""
        if self.shape_size > self.seq_len:
            return 0
        return (self.seq_len - self.shape_size) // self.stride + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shape_size_and_stride(seq_len: int, shape: int | float, stride: int = 4) -> tuple[int, int]:
    """The official rule for (m, q): ``shape`` is a fixed size (int) or a ratio of T (float < 1).

    q := min(q, m); when m comes from a ratio and m <= q, q := min(2, m) (step 2).
    """
    if isinstance(shape, float) and not shape.is_integer():
        if not 0.0 < shape < 1.0:
            raise ValueError(f"shape ratio: got {shape}; expected 0 < ratio < 1")
        m = max(1, int(shape * seq_len))
        q = min(stride, m)
        if m <= q:
            q = min(2, m)
    else:
        m = int(shape)
        q = min(stride, m)
    if m < 1 or m > seq_len - q:
        raise ValueError(f"shape size {m} does not fit series of length {seq_len} with stride "
                         f"{q}: need 1 <= m <= T - q so that there are >= 2 shapes")
    return m, q


class RMSNorm(nn.Module):
    """RMSN(u) = gamma * sqrt(D) * u / max(||u||_2, 1e-12) (the reference code's variant)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return F.normalize(u, dim=-1, eps=1e-12) * self.scale * self.gamma


class ScoreHead(nn.Module):
    """g(u) = sigmoid(w2ᵀ tanh(W1 u + b1) + b2), W1 in R^{8xD}: one score in (0, 1) per shape."""

    def __init__(self, dim: int, hidden: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(torch.tanh(self.fc1(u)))).squeeze(-1)


def cv_squared(x: torch.Tensor) -> torch.Tensor:
    """Squared coefficient of variation Var_unbiased(x) / (mean(x)^2 + 1e-10); 0 for one entry."""
    if x.numel() <= 1:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    x = x.float()
    return x.var(unbiased=True) / (x.mean() ** 2 + 1e-10)


class Expert(nn.Module):
    """expert(z) = W_b Dropout(GELU(W_a z + a)) + b  (D -> D -> D)."""

    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.gelu(self.fc1(z))))


class TopOneMoE(nn.Module):
    """Intra-shape learning: a top-1 mixture of ``n_experts`` experts (step 7).

    p = softmax(z W_g); e* = argmax p; gate = p_e* / (p_e* + 1e-6);
    out = GELU(RMSN(z + gate * expert_e*(z))); aux = cv²(importance) + cv²(load).
    """

    def __init__(self, dim: int, n_experts: int, dropout: float, router_init: str = "zeros"):
        super().__init__()
        self.n_experts = n_experts
        self.w_gate = nn.Parameter(torch.zeros(dim, n_experts))
        if router_init == "normal":
            nn.init.normal_(self.w_gate, std=0.02)
        elif router_init != "zeros":
            raise ValueError(f"router_init: got {router_init!r}; expected 'zeros' or 'normal'")
        self.experts = nn.ModuleList(Expert(dim, dropout) for _ in range(n_experts))
        self.norm = RMSNorm(dim)

    def route(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Flat tokens (n, D) -> (expert index (n,), gate (n,), aux loss)."""
        probs = torch.softmax(z @ self.w_gate, dim=-1)
        top_p, top_i = torch.topk(probs, 1, dim=-1)
        top_p, top_i = top_p.squeeze(-1), top_i.squeeze(-1)
        gate = top_p / (top_p + 1e-6)
        gates = torch.zeros_like(probs).scatter(1, top_i.unsqueeze(-1), gate.unsqueeze(-1))
        importance = gates.sum(0)
        load = (gates > 0).sum(0).to(z.dtype)
        return top_i, gate, cv_squared(importance) + cv_squared(load)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """z (B, N, D) -> (output (B, N, D), aux loss, load per expert (E,))."""
        b, n, d = z.shape
        flat = z.reshape(b * n, d)
        index, gate, aux = self.route(flat)
        mixed = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows = (index == e).nonzero(as_tuple=True)[0]
            if rows.numel():
                mixed = mixed.index_add(0, rows, gate[rows, None] * expert(flat[rows]))
        out = F.gelu(self.norm(flat + mixed)).reshape(b, n, d)
        load = torch.bincount(index, minlength=self.n_experts)
        return out, aux, load


class InceptionModule(nn.Module):
    """Inter-shape learning (step 8): InceptionTime module along the shape sequence.

    bottleneck Conv1d(D->nf, 1) -> Conv1d(nf->nf, k) for k in (39, 19, 9), 'same' padding, plus
    MaxPool1d(3, 1, 1) -> Conv1d(D->nf, 1); concat (4 nf channels) -> InstanceNorm1d -> GELU.
    """

    def __init__(self, dim: int, nf: int = 32, kernel: int = 40) -> None:
        super().__init__()
        ks = [kernel // 2**i for i in range(3)]
        ks = [k if k % 2 else k - 1 for k in ks]  # 40, 20, 10 made odd
        self.kernel_sizes = tuple(ks)
        self.bottleneck = nn.Conv1d(dim, nf, 1, bias=False)
        self.convs = nn.ModuleList(nn.Conv1d(nf, nf, k, padding="same", bias=False) for k in ks)
        self.pool = nn.MaxPool1d(3, stride=1, padding=1)
        self.pool_conv = nn.Conv1d(dim, nf, 1, bias=False)
        self.norm = nn.InstanceNorm1d(4 * nf)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, D, N) -> (B, 4 nf, N)."""
        b = self.bottleneck(x)
        out = torch.cat([conv(b) for conv in self.convs] + [self.pool_conv(self.pool(x))], dim=1)
        return F.gelu(self.norm(out))


def soft_sparsify(
    u: torch.Tensor, s: torch.Tensor, remain: float, hard: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft shape sparsification (step 6).

    Args:
        u: shapes (B, N, D); s: their scores (B, N); remain: rho in (0, 1].
        hard: drop the merged shape (classic hard sparsification).

    Returns:
        v: (B, k+1, D) = [s_i u_i for the k = ceil(rho N) top-scored i in temporal order;
        sum_{j not kept} s_j u_j] (no last row when ``hard``), and the kept indices (B, k).
    """
    n = u.shape[1]
    k = min(n, math.ceil(remain * n))
    top = torch.topk(s, k, dim=1).indices
    kept_idx, _ = torch.sort(top, dim=1)
    weighted = s.unsqueeze(-1) * u
    kept = torch.gather(weighted, 1, kept_idx.unsqueeze(-1).expand(-1, -1, u.shape[2]))
    if hard:
        return kept, kept_idx
    mask = torch.ones_like(s, dtype=torch.bool).scatter(1, kept_idx, False)  # True = merged
    merged = (weighted * mask.unsqueeze(-1)).sum(dim=1, keepdim=True)
    return torch.cat([kept, merged], dim=1), kept_idx


@dataclass
class ForwardInfo:
    """What one forward pass exposes besides the logits (interpretability, expert load)."""

    scores: list[torch.Tensor]  # per layer: scores before sparsification (B, N_l)
    kept: list[torch.Tensor | None]  # per layer: kept indices (B, k) or None
    final_scores: torch.Tensor  # s_end (B, N_L)
    load: torch.Tensor  # tokens per expert, summed over the MoE calls (E,)


class SoftShape(nn.Module):
    """The SoftShape network: ``forward(x, warm) -> (logits, aux, info)``; x is (B, C_in, T)."""

    def __init__(self, config: SoftShapeConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        d = c.emb_dim
        self.embed = nn.Conv1d(c.in_channels, d, c.shape_size, stride=c.stride)
        self.pos = nn.Parameter(torch.zeros(c.n_tokens, d))
        self.drop = nn.Dropout(c.dropout)
        self.score = ScoreHead(d)
        self.norm1 = nn.ModuleList(RMSNorm(d) for _ in range(c.depth))
        self.norm2 = nn.ModuleList(RMSNorm(d) for _ in range(c.depth))
        self.inception = nn.ModuleList(
            InceptionModule(d, c.inception_filters) for _ in range(c.depth)
        ) if c.use_inception else None
        self.moe = TopOneMoE(d, c.n_classes, c.dropout, c.router_init) if c.use_moe else None
        self.head = nn.Linear(d, c.n_classes)
        self.sparse_rates = torch.linspace(0.0, c.sparse_rate, c.depth).tolist()
        self.apply(_init_linear)

    @property
    def sparsifying_layer(self) -> int | None:
        """Index of the first layer that sparsifies after warm-up (rho_l < 1), or None.

        With the default schedule (L = 2, rates [0, 0.5]) it is layer 2 (index 1): the layer
        whose scores pick the kept shapes and weight the merged one (step 6). No layer before
        it drops or merges a shape, so its scores still map one-to-one to input positions.
        """
        for layer, rate in enumerate(self.sparse_rates):
            if rate > 0.0:
                return layer
        return None

    def remain_ratios(self, warm: bool) -> list[float]:
        """rho_l = 1 - linspace(0, sparse_rate, L); all 1 during warm-up (step 5)."""
        return [1.0] * self.config.depth if warm else [1.0 - r for r in self.sparse_rates]

    def forward(
        self, x: torch.Tensor, warm: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, ForwardInfo]:
        c = self.config
        if x.ndim != 3 or x.shape[1] != c.in_channels or x.shape[2] != c.seq_len:
            raise ValueError(f"input: got shape {tuple(x.shape)}; expected (B, {c.in_channels}, "
                             f"{c.seq_len})")
        h = self.drop(self.embed(x).transpose(1, 2) + self.pos)
        aux = x.new_zeros(())
        load = torch.zeros(c.n_classes, dtype=torch.long, device=x.device)
        scores, kept_all = [], []
        s_end = None
        for layer, remain in enumerate(self.remain_ratios(warm)):
            u = self.norm1[layer](h)
            s = self.score(u)
            scores.append(s)
            if remain < 1.0:
                v, kept = soft_sparsify(u, s, remain, hard=c.hard)
                z = self.norm2[layer](v)
                out = v
                if self.moe is not None:
                    moe_out, moe_aux, moe_load = self.moe(z)
                    out = out + moe_out
                    aux = aux + moe_aux
                    load = load + moe_load
            else:
                v, kept = s.unsqueeze(-1) * u, None
                z = self.norm2[layer](v)
                out = v
            kept_all.append(kept)
            if self.inception is not None:
                out = out + self.inception[layer](z.transpose(1, 2)).transpose(1, 2)
            if layer == c.depth - 1:
                out = self.drop(out)
                s_end = self.score(out)  # final scores, before the GELU
            h = F.gelu(out)
        token_logits = self.head(h)  # (B, N_L, K)
        if c.pooling == "score":
            logits = (s_end.unsqueeze(-1) * token_logits).mean(dim=1)
        else:
            logits = token_logits.mean(dim=1)
        return logits, aux, ForwardInfo(scores, kept_all, s_end, load)


def _init_linear(module: nn.Module) -> None:
    """Every nn.Linear: trunc_normal(std 0.02), bias 0 (step 11); convs keep defaults."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def scores_to_time(scores: torch.Tensor, seq_len: int, shape_size: int,
                   stride: int) -> torch.Tensor:
    """Shape scores (B, M) -> per-time-step scores (B, T): the mean over the shapes covering t.

    Time steps that no shape covers (the tail after the last full window) get NaN.
    """
    b, m = scores.shape
    total = scores.new_zeros(b, seq_len)
    count = scores.new_zeros(seq_len)
    for p in range(m):
        total[:, p * stride: p * stride + shape_size] += scores[:, p: p + 1]
        count[p * stride: p * stride + shape_size] += 1
    out = total / count.clamp(min=1)
    out[:, count == 0] = float("nan")
    return out


class FCN(nn.Module):
    """The plain deep baseline (Wang et al. 2017): three Conv-BN-ReLU blocks (128/256/128,
    kernels 8/5/3, 'same' padding), global average pooling, linear classifier."""

    def __init__(self, in_channels: int, n_classes: int,
                 channels: tuple[int, int, int] = (128, 256, 128),
                 kernels: tuple[int, int, int] = (8, 5, 3)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_channels
        for ch, k in zip(channels, kernels, strict=True):
            layers += [nn.Conv1d(prev, ch, k, padding="same"), nn.BatchNorm1d(ch), nn.ReLU()]
            prev = ch
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(prev, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean(dim=-1))
