"""Sort Loss, permutation-invariant loss (PIL) and their hybrid (see ``docs/papers/sortformer.md``).

Reference ``Y`` in {0,1}^{B x T x K}, predictions ``P`` in [0,1]^{B x T x K}.

- Arrival time of reference speaker j: ``Psi(y_j) = min{t : y_{t,j} >= 0.5}``, ``T`` if silent.
- ATS target (Sort Loss): among the permutations whose permuted arrival times equal the sorted
  arrival times (more than one only for ties), the one maximising ``sum_t sum_k y_{t,pi(k)} p_{t,k}``.
- PIL target: the permutation over all K! maximising the same match score (NeMo's
  ``get_pil_targets`` rule), or the one with the smallest BCE (``pil_match="bce"``, the paper's
  definition).
- ``L_hybrid = alpha * L_sort + (1 - alpha) * L_PIL``, ``alpha = ats_weight/(ats_weight+pil_weight)``.

BCE is on probabilities, averaged over valid frames x K (padded frames excluded). Targets are
computed with predictions detached. Facts from NeMo ``asr_multispeaker_utils.get_ats_targets`` /
``get_pil_targets`` and ``sortformer_diar_models.py``; the code is written here.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import torch

_EPS = 1e-7


@lru_cache(maxsize=8)
def _permutations(k: int) -> torch.Tensor:
    return torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long)  # (K!, K)


def _valid_mask(y: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    b, t, _ = y.shape
    if lengths is None:
        return torch.ones(b, t, dtype=torch.bool, device=y.device)
    return torch.arange(t, device=y.device)[None, :] < lengths.to(y.device)[:, None]


def arrival_times(y: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """``Psi``: first frame with ``y >= 0.5`` per speaker, ``T`` (the cap) if it never speaks.

    ``y``: (B, T, K) -> (B, K) long.
    """
    b, t, k = y.shape
    active = (y >= 0.5) & _valid_mask(y, lengths)[:, :, None]
    frame = torch.arange(t, device=y.device)[None, :, None].expand(b, t, k)
    return torch.where(active, frame, torch.full_like(frame, t)).min(dim=1).values


def _permuted(y: torch.Tensor, perms: torch.Tensor) -> torch.Tensor:
    """(B, T, K) -> (B, P, T, K): every permutation of the speaker columns."""
    return y[:, :, perms].permute(0, 2, 1, 3)


def _match_scores(y: torch.Tensor, p: torch.Tensor, perms: torch.Tensor,
                  valid: torch.Tensor, rule: str) -> torch.Tensor:
    """(B, P) score to maximise for each permutation."""
    yp = _permuted(y, perms)  # (B, P, T, K)
    m = valid[:, None, :, None].to(p.dtype)
    if rule == "dot":
        return (yp * p[:, None] * m).sum(dim=(2, 3))
    if rule == "bce":
        q = p[:, None].clamp(_EPS, 1 - _EPS)
        bce = -(yp * q.log() + (1 - yp) * (1 - q).log())
        return -(bce * m).sum(dim=(2, 3))
    raise ValueError(f"pil_match: got {rule!r}; expected 'dot' or 'bce'")


def ats_targets(y: torch.Tensor, p: torch.Tensor, lengths: torch.Tensor | None = None
                ) -> torch.Tensor:
    """Arrival-time-sorted reference ``Y^ATS``, ties broken by the dot match."""
    _check(y, p)
    p = p.detach()
    perms = _permutations(y.shape[2]).to(y.device)
    valid = _valid_mask(y, lengths)
    psi = arrival_times(y, lengths)  # (B, K)
    sorted_psi = psi.sort(dim=1).values  # (B, K)
    permuted_psi = psi[:, perms]  # (B, P, K)
    admissible = (permuted_psi == sorted_psi[:, None, :]).all(dim=2)  # (B, P)
    scores = _match_scores(y, p, perms, valid, "dot")
    scores = torch.where(admissible, scores, torch.full_like(scores, -torch.inf))
    best = perms[scores.argmax(dim=1)]  # (B, K)
    return torch.gather(y, 2, best[:, None, :].expand_as(y))


def pil_targets(y: torch.Tensor, p: torch.Tensor, lengths: torch.Tensor | None = None,
                match: str = "dot") -> torch.Tensor:
    """Best-permutation reference ``Y^PIL`` over all K! permutations."""
    _check(y, p)
    p = p.detach()
    perms = _permutations(y.shape[2]).to(y.device)
    scores = _match_scores(y, p, perms, _valid_mask(y, lengths), match)
    best = perms[scores.argmax(dim=1)]
    return torch.gather(y, 2, best[:, None, :].expand_as(y))


def masked_bce(p: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor | None = None
               ) -> torch.Tensor:
    """Mean BCE over valid frames x K (padded frames excluded)."""
    valid = _valid_mask(target, lengths)[:, :, None].to(p.dtype)
    q = p.clamp(_EPS, 1 - _EPS)
    bce = -(target * q.log() + (1 - target) * (1 - q).log())
    return (bce * valid).sum() / (valid.sum() * p.shape[2]).clamp_min(1.0)


def sort_loss(p: torch.Tensor, y: torch.Tensor, lengths: torch.Tensor | None = None
              ) -> torch.Tensor:
    """``L_sort = BCE_mean(P, Y^ATS)``."""
    return masked_bce(p, ats_targets(y, p, lengths), lengths)


def pil_loss(p: torch.Tensor, y: torch.Tensor, lengths: torch.Tensor | None = None,
             match: str = "dot") -> torch.Tensor:
    """``L_PIL = BCE_mean(P, Y^PIL)``."""
    return masked_bce(p, pil_targets(y, p, lengths, match), lengths)


def hybrid_loss(p: torch.Tensor, y: torch.Tensor, lengths: torch.Tensor | None = None,
                ats_weight: float = 0.5, pil_weight: float = 0.5, match: str = "dot"
                ) -> torch.Tensor:
    """``alpha * L_sort + (1 - alpha) * L_PIL`` with ``alpha = ats_weight/(ats_weight+pil_weight)``;
    a zero weight skips that term (pure PIL or pure Sort)."""
    if ats_weight < 0 or pil_weight < 0 or ats_weight + pil_weight <= 0:
        raise ValueError(f"loss weights must be >= 0 with a positive sum, got ats={ats_weight}, "
                         f"pil={pil_weight}")
    alpha = ats_weight / (ats_weight + pil_weight)
    total = p.new_zeros(())
    if alpha > 0:
        total = total + alpha * sort_loss(p, y, lengths)
    if alpha < 1:
        total = total + (1 - alpha) * pil_loss(p, y, lengths, match)
    return total


def frame_f1(p: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor | None = None,
             threshold: float = 0.5) -> float:
    """Frame-level F1 of thresholded ``p`` against ``target`` (NeMo's ``f1_acc``), valid frames."""
    valid = _valid_mask(target, lengths)[:, :, None]
    pred = (p >= threshold) & valid
    ref = (target >= 0.5) & valid
    tp = (pred & ref).sum().item()
    fp = (pred & ~ref).sum().item()
    fn = (~pred & ref).sum().item()
    return 2 * tp / max(2 * tp + fp + fn, 1)


def _check(y: torch.Tensor, p: torch.Tensor) -> None:
    if y.shape != p.shape or y.dim() != 3:
        raise ValueError(f"targets {tuple(y.shape)} and predictions {tuple(p.shape)} must both be "
                         "(batch, frames, speakers)")
