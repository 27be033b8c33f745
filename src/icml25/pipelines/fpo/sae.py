"""A sparse autoencoder on a causal LM's residual stream (the paper's SAEs, eqs. 5-6).

``c = ReLU(W_enc (h − b_dec) + b_enc)``, ``ĥ = W_dec c + b_dec`` (paper eq. 5-6), trained on
``‖h − ĥ‖² + λ‖c‖₁`` with Adam and the decoder's columns renormalised to unit norm after every
step. ``kind: topk`` keeps the ``k_sae`` largest pre-activations instead (no λ to tune). With
``l1: auto``, λ is adapted multiplicatively during training until the mean L0 (active features per
token) lies in ``target_l0``. Reported: fraction of variance unexplained (FVU), mean L0 and the
fraction of dead features (never active on the held-out activations).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm


class SparseAutoencoder(nn.Module):
    def __init__(self, d: int, m: int, kind: str = "relu_l1", k_sae: int = 16) -> None:
        super().__init__()
        if kind not in ("relu_l1", "topk"):
            raise ValueError(f"fpo.sae.kind: got {kind!r}; expected relu_l1 or topk")
        if kind == "topk" and not 1 <= k_sae <= m:
            raise ValueError(f"fpo.sae.k_sae: got {k_sae}; expected 1..{m}")
        self.d, self.m, self.kind, self.k_sae = d, m, kind, k_sae
        w = torch.randn(d, m) / np.sqrt(d)
        w = w / w.norm(dim=0, keepdim=True)
        self.W_dec = nn.Parameter(w)
        self.W_enc = nn.Parameter(w.t().contiguous())
        self.b_enc = nn.Parameter(torch.zeros(m))
        self.b_dec = nn.Parameter(torch.zeros(d))

    def encode(self, h: torch.Tensor) -> torch.Tensor:
        pre = (h - self.b_dec) @ self.W_enc.t() + self.b_enc
        if self.kind == "topk":
            top = pre.topk(self.k_sae, dim=-1)
            return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
        return torch.relu(pre)

    def decode(self, c: torch.Tensor) -> torch.Tensor:
        return c @ self.W_dec.t() + self.b_dec

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.encode(h)
        return self.decode(c), c

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        self.W_dec.div_(self.W_dec.norm(dim=0, keepdim=True).clamp_min(1e-8))

    def config(self) -> dict:
        return {"d": self.d, "m": self.m, "kind": self.kind, "k_sae": self.k_sae}


@dataclass
class SAEStats:
    fvu: float
    l0: float
    dead_fraction: float
    l1_coefficient: float
    steps: int


@torch.no_grad()
def sae_stats(sae: SparseAutoencoder, acts: torch.Tensor, l1: float, steps: int) -> SAEStats:
    h_hat, c = sae(acts)
    fvu = float(((acts - h_hat) ** 2).sum() / ((acts - acts.mean(0)) ** 2).sum())
    active = c > 0
    return SAEStats(fvu=fvu, l0=float(active.sum(-1).float().mean()),
                    dead_fraction=float((~active.any(0)).float().mean()), l1_coefficient=l1,
                    steps=steps)


def train_sae(acts: torch.Tensor, m: int, steps: int, seed: int, kind: str = "relu_l1",
              k_sae: int = 16, l1: float | None = None,
              target_l0: tuple[float, float] = (8.0, 32.0), lr: float = 1e-3,
              batch_size: int = 512, holdout: float = 0.1, center: bool = True,
              progress: bool = True) -> tuple[SparseAutoencoder, SAEStats]:
    """Train an SAE on activations ``[N, d]``; ``l1=None`` adapts λ towards ``target_l0``.
    A ``holdout`` share of the activations is kept aside for the reported statistics;
    ``center`` initialises the decoder bias at the activations' mean (else at 0)."""
    if acts.ndim != 2 or acts.shape[0] < 10:
        raise ValueError(f"SAE training needs at least 10 activation vectors [N, d], got "
                         f"{tuple(acts.shape)}")
    if not torch.isfinite(acts).all():
        raise ValueError("SAE training activations contain NaN or inf")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    perm = torch.randperm(acts.shape[0], generator=gen)
    n_hold = max(1, int(holdout * acts.shape[0]))
    held, train = acts[perm[:n_hold]], acts[perm[n_hold:]]
    sae = SparseAutoencoder(acts.shape[1], m, kind, k_sae)
    with torch.no_grad():
        sae.b_dec.copy_(train.mean(0) if center else torch.zeros_like(sae.b_dec))
    opt = torch.optim.Adam(sae.parameters(), lr=lr)
    lam = 1e-3 if l1 is None else float(l1)
    for step in tqdm(range(steps), desc="fpo SAE", disable=not progress, leave=False):
        idx = torch.randint(train.shape[0], (min(batch_size, train.shape[0]),), generator=gen)
        h = train[idx]
        h_hat, c = sae(h)
        loss = ((h - h_hat) ** 2).sum(-1).mean()
        if kind == "relu_l1":
            loss = loss + lam * c.abs().sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sae.normalise_decoder()
        if kind == "relu_l1" and l1 is None and step % 50 == 49:
            l0 = float((c > 0).sum(-1).float().mean())
            if l0 > target_l0[1]:
                lam *= 1.3
            elif l0 < target_l0[0]:
                lam /= 1.3
    return sae, sae_stats(sae, held, lam, steps)
