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

Bad input fails before anything is summed: NaN (or positive) log-probs at real target positions
(``check_logprobs``: NaN logits), NaN/inf/negative span weights, reversed spans and spans outside
the output (``build_batch``), an empty DPO batch. Overlapping spans are not an error: they are
merged into one span with the max weight (``merge_spans``), the rule ``validate_annotation``
documents for annotation records.
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


def merge_spans(spans: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """Overlapping spans of one output merged into one, with the max of the merged weights.

    The one rule for overlaps (``build_batch`` for the loss; ``validate_annotation`` accepts
    overlapping annotation spans because of it): ``[s1, e1)`` and ``[s2, e2)`` with
    ``s2 < e1`` become ``[s1, max(e1, e2))``; touching spans (``s2 == e1``) stay apart, each with
    its own UL term. Zero-length spans are dropped (no UL term, ``t*`` unmoved).
    """
    merged: list[list[float]] = []
    for s, e, w in sorted((s, e, w) for s, e, w in spans if e > s):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
            merged[-1][2] = max(merged[-1][2], w)
        else:
            merged.append([s, e, w])
    return [(int(s), int(e), float(w)) for s, e, w in merged]


def build_batch(lengths: list[int], spans: list[list[tuple[int, int, float]]],
                width: int, names: list[str] | None = None) -> AnnotatedBatch:
    """Collate span annotations ``(start, end, weight)`` (target-token indices, EOS = length-1).

    Overlapping spans of one output are merged with the max weight (:func:`merge_spans`);
    zero-length spans carry no UL term and do not move ``t*``. A reversed span
    (``end < start``), a span outside the output, or a weight that is negative, NaN or infinite
    is a ``ValueError`` naming the output (``names[i]``, else its index in the batch) and the
    span, before anything is computed.
    """
    b = len(lengths)
    if len(spans) != b or (names is not None and len(names) != b):
        raise ValueError(f"build_batch: {b} lengths, {len(spans)} span lists"
                         + ("" if names is None else f", {len(names)} names"))
    span_index = torch.full((b, width), -1, dtype=torch.long)
    first_err = torch.full((b,), width, dtype=torch.long)
    valid = torch.zeros((b, width), dtype=torch.bool)
    weights: list[float] = []
    for i, (n, sp) in enumerate(zip(lengths, spans, strict=True)):
        item = f"output {names[i]!r}" if names is not None else f"output {i} of the batch"
        if not 0 < n <= width:
            raise ValueError(f"build_batch: {item} has {n} target tokens; expected 1..{width}")
        for span in sp:
            if len(span) != 3:
                raise ValueError(f"build_batch: {item}: span {span!r} is not (start, end, weight)")
            s, e, w = span
            if e < s:
                raise ValueError(f"build_batch: {item}: span {span!r} is reversed "
                                 f"(end {e} < start {s})")
            if not (s >= 0 and e <= n):
                raise ValueError(f"build_batch: {item}: span [{s}, {e}) outside its {n} target "
                                 "tokens (EOS included)")
            if not math.isfinite(w) or w < 0:
                raise ValueError(f"build_batch: {item}: span {span!r} has weight {w!r}; a span "
                                 "weight must be finite and >= 0")
        valid[i, :n] = True
        merged = merge_spans(sp)
        for s, e, w in merged:
            span_index[i, s:e] = len(weights)
            weights.append(w)
        if merged:
            first_err[i] = merged[0][0]
    return AnnotatedBatch(span_index, torch.tensor(weights, dtype=torch.float64), first_err,
                          valid)


def check_logprobs(logp: torch.Tensor, valid: torch.Tensor, where: str) -> None:
    """Fail fast on NaN (or +inf / positive) log-probs at real target positions.

    NaN logits reach the losses as NaN log-probs and would give a NaN loss and NaN gradients
    that AdamW writes into every parameter; the error names the first bad (output, position).
    Padding positions are not checked: the losses mask them with ``torch.where``, so whatever
    they hold cannot reach the loss.
    """
    if logp.shape != valid.shape:
        raise ValueError(f"{where}: log-probs of shape {tuple(logp.shape)}, mask of shape "
                         f"{tuple(valid.shape)}")
    bad = valid & ~(logp <= 0)  # NaN compares False; log-probs are never positive
    if bool(bad.any()):
        i, t = (int(v) for v in bad.nonzero()[0])
        raise FloatingPointError(
            f"{where}: log-prob {float(logp[i, t].detach())!r} at output {i}, target position {t} "
            f"({int(bad.sum())} such positions); NaN/inf logits or a diverged model")


def _masked_sum(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, logp, torch.zeros((), dtype=logp.dtype, device=logp.device)).sum()


def _log1mexp(s: torch.Tensor, eps: float) -> torch.Tensor:
    """``log(1 - exp(s))`` for ``s <= 0``, stable, with ``s`` clamped to ``log(1 - eps)``."""
    return torch.log(-torch.expm1(s.clamp(max=math.log1p(-eps))))


def twa_loss(logp: torch.Tensor, batch: AnnotatedBatch, *, ul_scale: float = 1.0,
             granularity: str = "span", use_off_trajectory: bool = False,
             clamp_eps: float = 1e-6, reduction: str = "mean_tokens") -> torch.Tensor:
    """The TWA loss of token log-probs ``logp`` (B x T) under the batch's annotations."""
    if granularity not in ("span", "token"):
        raise ValueError(f"granularity: got {granularity!r}; expected 'span' or 'token'")
    check_logprobs(logp, batch.valid, "twa_loss")
    w_all = batch.span_weight
    if w_all.numel() and not bool((torch.isfinite(w_all) & w_all.ge(0)).all()):
        k = int((~(torch.isfinite(w_all) & w_all.ge(0))).nonzero()[0])
        raise ValueError(f"twa_loss: span {k} of the batch has weight {float(w_all[k])!r}; "
                         "span weights must be finite and >= 0")
    in_span = batch.span_index.ge(0)
    ce_mask = batch.valid & ~in_span
    if not use_off_trajectory:
        pos = torch.arange(logp.shape[1], device=logp.device)
        ce_mask &= pos[None, :] < batch.first_err[:, None]
    ce = -_masked_sum(logp, ce_mask)
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
    check_logprobs(logp, valid, "sequence_ul_loss")
    if not bool(torch.isfinite(seq_weight).all()) or bool(seq_weight.lt(0).any()):
        raise ValueError(f"sequence_ul_loss: sequence weights {seq_weight.tolist()} must be "
                         "finite and >= 0")
    clean = seq_weight.le(0)
    ce = -_masked_sum(logp, valid & clean[:, None])
    s = torch.where(valid, logp, torch.zeros((), dtype=logp.dtype)).sum(-1)
    ul = -(seq_weight * _log1mexp(s, clamp_eps) * (~clean)).sum()
    return _reduce(ce + ul_scale * ul, valid, reduction)


def sft_loss(logp: torch.Tensor, valid: torch.Tensor,
             reduction: str = "mean_tokens") -> torch.Tensor:
    """Cross-entropy on every target token (EOS included)."""
    check_logprobs(logp, valid, "sft_loss")
    return _reduce(-_masked_sum(logp, valid), valid, reduction)


def dpo_loss(pol_w: torch.Tensor, pol_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor,
             beta: float, sft_weight: float = 0.0,
             len_w: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over pairs of ``-log sigmoid(beta [(pi_w - ref_w) - (pi_l - ref_l)])`` plus
    ``sft_weight * CE(y_w) / |y_w|`` (the DPO+SFT variant); inputs are sequence log-probs."""
    if pol_w.numel() == 0:
        raise ValueError("dpo_loss: no preference pairs")
    for name, v in (("pol_w", pol_w), ("pol_l", pol_l), ("ref_w", ref_w), ("ref_l", ref_l)):
        ok = torch.isfinite(v) & (v <= 0)
        if not bool(ok.all()):
            raise FloatingPointError(f"dpo_loss: {name} holds {v[~ok][:3].tolist()}; "
                                     "sequence log-probs must be finite and <= 0")
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
