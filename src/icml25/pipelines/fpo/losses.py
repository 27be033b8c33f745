"""Preference losses of the fpo pipeline: FPO and the baselines DPO, SimPO, TDPO-1, TDPO-2
(the paper's section on FPO and its baselines). Every loss is ``−E log σ(u)``.

FPO (paper eqs. 10-11; official ``fpo.py`` of MikaStars39/FeatureAlignment, read for the loss)::

    u = β·(avg-logp_θ(y_w) − avg-logp_θ(y_l)) − γ_ref − α·(β·D(y_l) − sg(β·D(y_w)))
    γ_ref = β·(avg-logp_ref(y_w) − avg-logp_ref(y_l))            (cached offline)
    D(y) = (1/k)·Σ_{i∈I_k} (c̄_θ,i − c̄_ref,i)²,  I_k = topk(c̄_θ) ∪ topk(c̄_ref)

which equals the repository's ``logits = (margin_w − margin_l) − α(D_l − sg D_w)``,
``loss = −logsigmoid(β·logits)`` with ``margin = avg-logp_θ − avg-logp_ref``.
"""

from __future__ import annotations

from dataclasses import dataclass

from icml25.core.lazy_import import lazy_module

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")

METHODS = ("dpo", "simpo", "tdpo1", "tdpo2", "fpo")
#: Methods that run the reference model during training (their cost; FPO and SimPO do not).
NEEDS_REFERENCE = frozenset({"dpo", "tdpo1", "tdpo2"})


def token_logps(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log π(y_t | ·)`` of every target token: ``[B, T]`` from logits ``[B, T, V]``."""
    return torch.gather(F.log_softmax(logits.float(), dim=-1), 2, targets.unsqueeze(-1)).squeeze(-1)


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum(-1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the response tokens (``mask`` 1) of ``x [B, T]``; prompt and padding ignored."""
    return masked_sum(x, mask) / mask.sum(-1).clamp_min(1)


def sequential_kl(ref_logits: torch.Tensor, logits: torch.Tensor,
                  mask: torch.Tensor) -> torch.Tensor:
    """``Σ_{t∈resp} KL(π_ref(·|x, y_<t) ‖ π_θ(·|x, y_<t))`` per sequence (TDPO), ``[B]``."""
    ref = F.log_softmax(ref_logits.float(), dim=-1)
    pol = F.log_softmax(logits.float(), dim=-1)
    kl = (ref.exp() * (ref - pol)).sum(-1)
    return masked_sum(kl, mask)


def pooled_features(codes: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``c̄ = (1/|y|)·Σ_{t∈resp} c_t``: masked mean of SAE codes ``[B, T, m]`` -> ``[B, m]``."""
    w = mask.unsqueeze(-1).to(codes.dtype)
    return (codes * w).sum(1) / w.sum(1).clamp_min(1)


def padded_mean_features(codes: torch.Tensor, logit_mask: torch.Tensor) -> torch.Tensor:
    """The official repository's pooling (``fpo.py``, ``pooling: padded_mean``): the codes of
    the positions ``[:, :-1]`` whose *next* token is a response token (``logit_mask``, the mask
    of the log-probs) are kept, all others zeroed, and the sum is divided by the padded length
    ``T − 1`` of the batch (``.mean(dim=1)``), not by the response length: ``[B, T, m]`` ->
    ``[B, m]``. It differs from :func:`pooled_features` by a one-position shift (the last prompt
    token in, the last response token out) and by a batch-dependent scale ``|y| / (T − 1)``."""
    if codes.shape[1] != logit_mask.shape[1] + 1:
        raise ValueError(f"padded_mean pooling: codes cover {codes.shape[1]} positions, the "
                         f"logit mask {logit_mask.shape[1]}; expected one more position of codes")
    return (codes[:, :-1] * logit_mask.unsqueeze(-1).to(codes.dtype)).mean(1)


def feature_discrepancy(policy: torch.Tensor, reference: torch.Tensor, k: int,
                        union: bool = True) -> torch.Tensor:
    """``D_FPO`` per sequence, ``[B]`` from pooled features ``[B, m]`` (paper eq. 10).

    ``union``: ``I_k = topk(c̄_θ) ∪ topk(c̄_ref)`` (the paper); otherwise ``topk(c̄_θ)`` only (the
    official code). The sum over ``I_k`` is divided by ``k`` in both cases, as in eq. 10.
    """
    if not 1 <= k <= policy.shape[-1]:
        raise ValueError(f"fpo.loss.fpo.k: got {k}; expected 1..{policy.shape[-1]} (SAE width)")
    chosen = torch.zeros_like(policy, dtype=torch.bool)
    chosen.scatter_(1, policy.detach().topk(k, dim=-1).indices, True)
    if union:
        chosen.scatter_(1, reference.topk(k, dim=-1).indices, True)
    return ((policy - reference) ** 2 * chosen).sum(-1) / k


@dataclass
class PairStats:
    """What the losses need for a batch of pairs (chosen ``w``, rejected ``l``), each ``[B]``.

    ``sum_*``/``avg_*``: summed / length-averaged response log-probs of the policy; ``ref_*``:
    the same for the reference (None when not computed); ``kl_*``: sequential KL to the
    reference; ``d_*``: FPO feature discrepancies; ``gamma_ref``: FPO's cached margin.
    """

    sum_w: torch.Tensor
    sum_l: torch.Tensor
    avg_w: torch.Tensor
    avg_l: torch.Tensor
    ref_sum_w: torch.Tensor | None = None
    ref_sum_l: torch.Tensor | None = None
    kl_w: torch.Tensor | None = None
    kl_l: torch.Tensor | None = None
    d_w: torch.Tensor | None = None
    d_l: torch.Tensor | None = None
    gamma_ref: torch.Tensor | None = None


def _need(value: torch.Tensor | None, what: str, method: str) -> torch.Tensor:
    if value is None:
        raise ValueError(f"{method} loss needs {what}")
    return value


def margin_u(method: str, s: PairStats, beta: float, alpha: float = 0.5, gamma: float = 0.5,
             stopgrad: bool = True) -> torch.Tensor:
    """The argument ``u`` of ``−log σ(u)`` for ``method`` (``docs/papers/fpo.md``, "The method")."""
    def sg(x: torch.Tensor) -> torch.Tensor:
        return x.detach() if stopgrad else x

    if method in ("dpo", "tdpo1", "tdpo2"):
        ratio = ((s.sum_w - _need(s.ref_sum_w, "reference log-probs", method))
                 - (s.sum_l - _need(s.ref_sum_l, "reference log-probs", method)))
        u = beta * ratio
        if method == "tdpo1":
            u = u - beta * (_need(s.kl_l, "sequential KL", method)
                            - _need(s.kl_w, "sequential KL", method))
        elif method == "tdpo2":
            u = u - alpha * (beta * _need(s.kl_l, "sequential KL", method)
                             - sg(beta * _need(s.kl_w, "sequential KL", method)))
        return u
    if method == "simpo":
        # the official SimPO repository multiplies the target margin γ by β
        return beta * (s.avg_w - s.avg_l) - beta * gamma
    if method == "fpo":
        lpd = beta * s.avg_w - beta * s.avg_l
        delta = alpha * (beta * _need(s.d_l, "feature discrepancies", method)
                         - sg(beta * _need(s.d_w, "feature discrepancies", method)))
        return lpd - _need(s.gamma_ref, "the cached reference margin", method) - delta
    raise ValueError(f"unknown preference method {method!r}; choose one of {METHODS}")


def preference_loss(u: torch.Tensor) -> torch.Tensor:
    """``−E log σ(u)``."""
    return -F.logsigmoid(u).mean()
