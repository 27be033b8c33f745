"""TWA's loss, its ablations and the baselines' losses (the paper's method; ``docs/papers/twa.md``).

Per example (sum form), with ``S_j = sum_{t in [s_j, e_j)} log p(y_t | x, y_<t)``::

    L_TWA = sum_{t < t*, t not in any span} -log p(y_t)  +  lambda_UL * sum_j w_j * UL_j
    UL_j  = -log(1 - exp(S_j))                      (span level)
          = sum_{t in span j} -log(1 - p(y_t))      (token-level ablation, weight w_j per token)
    t*    = min_j s_j  (no spans: every token, EOS included, gets cross-entropy)

``use_off_trajectory=True`` gives cross-entropy to every non-error token (also after ``t*``).
``log(1 - e^S)`` is ``log(-expm1(S))`` with ``S <= log(1 - eps)``, never a product of
probabilities. Batch reduction: the summed terms divided by the number of target tokens
(the project's choice; the paper does not say), or the plain sum (``reduction="sum"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class AnnotatedBatch:
    """Target-side tensors of a batch of annotated outputs (B examples, T target positions).

    ``span_index[b, t]``: global id of the span containing target position ``t`` or -1;
    ``span_weight[k]``: the loss weight of span ``k``; ``first_err[b]``: ``t*`` (``T`` when the
    output has no span); ``valid[b, t]``: a real target token (EOS included, padding excluded).
    """

    span_index: torch.Tensor
    span_weight: torch.Tensor
    first_err: torch.Tensor
    valid: torch.Tensor


def build_batch(lengths: list[int], spans: list[list[tuple[int, int, float]]],
                width: int) -> AnnotatedBatch:
    """Collate span annotations ``(start, end, weight)`` (target-token indices, EOS = length-1).

    Overlapping spans of one output are merged with the max weight; zero-length
    spans carry no UL term and do not move ``t*``.
    """
    b = len(lengths)
    span_index = torch.full((b, width), -1, dtype=torch.long)
    first_err = torch.full((b,), width, dtype=torch.long)
    valid = torch.zeros((b, width), dtype=torch.bool)
    weights: list[float] = []
    for i, (n, sp) in enumerate(zip(lengths, spans, strict=True)):
        valid[i, :n] = True
        merged: list[list[float]] = []
        for s, e, w in sorted((s, e, w) for s, e, w in sp if e > s):
            if not (s >= 0 and e <= n):
                raise ValueError(f"span [{s}, {e}) outside output {i} of {n} target tokens")
            if merged and s < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
                merged[-1][2] = max(merged[-1][2], w)
            else:
                merged.append([s, e, w])
        for s, e, w in merged:
            span_index[i, int(s):int(e)] = len(weights)
            weights.append(float(w))
        if merged:
            first_err[i] = int(merged[0][0])
    return AnnotatedBatch(span_index, torch.tensor(weights, dtype=torch.float64), first_err,
                          valid)


def _log1mexp(s: torch.Tensor, eps: float) -> torch.Tensor:
    """``log(1 - exp(s))`` for ``s <= 0``, stable, with ``s`` clamped to ``log(1 - eps)``."""
    return torch.log(-torch.expm1(s.clamp(max=math.log1p(-eps))))


def twa_loss(logp: torch.Tensor, batch: AnnotatedBatch, *, ul_scale: float = 1.0,
             granularity: str = "span", use_off_trajectory: bool = False,
             clamp_eps: float = 1e-6, reduction: str = "mean_tokens") -> torch.Tensor:
    """The TWA loss of token log-probs ``logp`` (B x T) under the batch's annotations."""
    if granularity not in ("span", "token"):
        raise ValueError(f"granularity: got {granularity!r}; expected 'span' or 'token'")
    in_span = batch.span_index.ge(0)
    ce_mask = batch.valid & ~in_span
    if not use_off_trajectory:
        pos = torch.arange(logp.shape[1], device=logp.device)
        ce_mask &= pos[None, :] < batch.first_err[:, None]
    ce = -(logp * ce_mask).sum()
    ul = logp.new_zeros(())
    if bool(in_span.any()):
        ids = batch.span_index[in_span]
        w = batch.span_weight.to(logp)  # dtype and device of the log-probs
        if granularity == "span":
            s = logp.new_zeros(len(w)).index_add(0, ids, logp[in_span])
            ul = -(w * _log1mexp(s, clamp_eps)).sum()
        else:
            ul = -(w[ids] * _log1mexp(logp[in_span], clamp_eps)).sum()
    total = ce + ul_scale * ul
    return _reduce(total, batch.valid, reduction)


def sequence_ul_loss(logp: torch.Tensor, valid: torch.Tensor, seq_weight: torch.Tensor, *,
                     ul_scale: float = 1.0, clamp_eps: float = 1e-6,
                     reduction: str = "mean_tokens") -> torch.Tensor:
    """TWA-seq (the project's reconstruction of the paper's sequence-level ablation): outputs
    with ``seq_weight == 0`` get cross-entropy on all tokens; the others one UL term over the
    whole sequence with their weight (``min(MQM, 5)``)."""
    clean = seq_weight.le(0)
    ce = -(logp * (valid & clean[:, None])).sum()
    s = (logp * valid).sum(-1)
    ul = -(seq_weight * _log1mexp(s, clamp_eps) * (~clean)).sum()
    return _reduce(ce + ul_scale * ul, valid, reduction)


def sft_loss(logp: torch.Tensor, valid: torch.Tensor,
             reduction: str = "mean_tokens") -> torch.Tensor:
    """Cross-entropy on every target token (EOS included)."""
    return _reduce(-(logp * valid).sum(), valid, reduction)


def dpo_loss(pol_w: torch.Tensor, pol_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor,
             beta: float, sft_weight: float = 0.0,
             len_w: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over pairs of ``-log sigmoid(beta [(pi_w - ref_w) - (pi_l - ref_l)])`` plus
    ``sft_weight * CE(y_w) / |y_w|`` (the DPO+SFT variant); inputs are sequence log-probs."""
    loss = -F.logsigmoid(beta * ((pol_w - ref_w) - (pol_l - ref_l)))
    if sft_weight:
        if len_w is None:
            raise ValueError("dpo_loss: sft_weight needs len_w (the chosen outputs' lengths)")
        loss = loss + sft_weight * (-pol_w / len_w)
    return loss.mean()


def _reduce(total: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "sum":
        return total
    if reduction == "mean_tokens":
        return total / valid.sum().clamp(min=1)
    raise ValueError(f"reduction: got {reduction!r}; expected 'sum' or 'mean_tokens'")
