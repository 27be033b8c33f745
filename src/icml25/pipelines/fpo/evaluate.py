"""Judging policies with the known reward r* (``docs/papers/fpo.md``, "Metrics").

Win rates are exact under r* (win 1, tie 0.5) with 95 % bootstrap intervals over prompts; the
length-controlled win rate is the win probability a logistic regression on the length difference
predicts at zero length difference (the AlpacaEval-2-LC analogue,
:func:`length_controlled_win_rate`), with the raw win rate of length-matched pairs beside it; training accuracy, diversity, sequential KL
and feature drift to the reference are measured on held-out pairs and the policy's own samples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression

from icml25.core.causal_lm import LlamaLM
from icml25.pipelines.fpo.align import Pairs, pair_batch
from icml25.pipelines.fpo.lm import batch_sequences, forward
from icml25.pipelines.fpo.losses import (
    feature_discrepancy,
    masked_mean,
    pooled_features,
    sequential_kl,
    token_logps,
)
from icml25.pipelines.fpo.sae import SparseAutoencoder
from icml25.pipelines.fpo.world import EOS, PAD, World


def win_scores(r_a: np.ndarray, r_b: np.ndarray) -> np.ndarray:
    """Per-prompt score of A against B: 1 win, 0.5 tie, 0 loss."""
    r_a, r_b = np.asarray(r_a, float), np.asarray(r_b, float)
    return np.where(np.isclose(r_a, r_b, atol=1e-12), 0.5, (r_a > r_b).astype(float))


def bootstrap_ci(scores: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """95 % percentile interval of the mean over ``n_boot`` resamples of prompts."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(len(scores), size=(n_boot, len(scores)))
    means = scores[idx].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def length_controlled_win_rate(scores: np.ndarray, len_a: np.ndarray,
                               len_b: np.ndarray) -> float:
    """A's win probability against B at *zero* length difference.

    Estimator (as AlpacaEval-2's length-controlled win rate, for one pair of models): with
    ``Δ_i = len_a,i − len_b,i`` and ``s`` the standard deviation of the ``Δ_i``, fit

        P(A wins on prompt i) = σ(θ_0 + θ_1·tanh(Δ_i / s))

    by maximum likelihood (a tie is half a win and half a loss: two rows weighted 0.5; θ_1 nearly
    unpenalised, C = 1e6) and report σ(θ_0), the prediction at ``Δ = 0``: a policy that wins only
    by being longer (or shorter) gets 0.5. ``Δ`` is scaled, not centred; centring at the mean
    ``Δ`` would report the win probability at the *average* length difference, i.e. about the
    raw win rate, and control nothing. The tanh bounds the leverage of very unequal lengths.

    Special cases: every ``Δ_i = 0`` (already length-matched) -> the raw win rate; A always wins
    or always loses -> the raw win rate (1 or 0, whatever the lengths); the ``Δ_i`` all on one
    side of zero (no pair as long or with the sign reversed) -> NaN, since the win rate at zero
    length difference is then an extrapolation that the data cannot pin down.
    """
    scores = np.asarray(scores, float)
    diff = np.asarray(len_a, float) - np.asarray(len_b, float)
    if scores.shape != diff.shape or scores.ndim != 1 or not len(scores):
        raise ValueError(f"length_controlled_win_rate: scores {scores.shape} and length "
                         f"differences {diff.shape} must be equal non-empty vectors")
    if np.all(diff == 0):
        return float(scores.mean())
    if diff.min() > 0 or diff.max() < 0:
        return float("nan")
    z = np.tanh(diff / diff.std())
    X = np.concatenate([z, z])[:, None]
    y = np.concatenate([np.ones_like(z), np.zeros_like(z)])
    w = np.concatenate([scores, 1.0 - scores])
    if w[y == 1].sum() == 0 or w[y == 0].sum() == 0:
        return float(scores.mean())
    model = LogisticRegression(C=1e6, max_iter=1000)
    model.fit(X, y, sample_weight=w)
    return float(1.0 / (1.0 + np.exp(-model.intercept_[0])))


def length_matched_win_rate(scores: np.ndarray, len_a: np.ndarray, len_b: np.ndarray,
                            tol: int) -> tuple[float, int]:
    """Raw win rate over the prompts whose two responses differ in length by at most ``tol``
    tokens, and their number (NaN, 0 when there are none): a model-free check of
    :func:`length_controlled_win_rate` on the subset where length cannot explain the result."""
    scores = np.asarray(scores, float)
    keep = np.abs(np.asarray(len_a, float) - np.asarray(len_b, float)) <= tol
    return (float(scores[keep].mean()) if keep.any() else float("nan")), int(keep.sum())


@torch.no_grad()
def pair_accuracy(policy: LlamaLM, pairs: Pairs, world: World, batch_size: int = 64) -> float:
    """Share of held-out pairs whose chosen response has the higher average token log-prob."""
    pad = world.index[PAD]
    hits = []
    for s in range(0, len(pairs), batch_size):
        idx = list(range(s, min(s + batch_size, len(pairs))))
        ids, mask, _ = pair_batch(pairs, idx, pad)
        avg = masked_mean(token_logps(policy(ids)[:, :-1], ids[:, 1:]), mask)
        n = len(idx)
        hits.append((avg[:n] > avg[n:]).float())
    return float(torch.cat(hits).mean())


@torch.no_grad()
def drift(policy: LlamaLM, ref: LlamaLM, sae: SparseAutoencoder, pairs: Pairs, world: World,
          layer: int, k: int, batch_size: int = 64) -> dict[str, float]:
    """Sequential KL to the reference and FPO's feature MSE (union top-k) on chosen and rejected
    responses of held-out pairs, and their margins (rejected − chosen; paper Figs. 3-4)."""
    pad = world.index[PAD]
    kl_w, kl_l, d_w, d_l = [], [], [], []
    for s in range(0, len(pairs), batch_size):
        idx = list(range(s, min(s + batch_size, len(pairs))))
        ids, mask, token_mask = pair_batch(pairs, idx, pad)
        logits, h = forward(policy, ids, layer)
        ref_logits, ref_h = forward(ref, ids, layer)
        kl = sequential_kl(ref_logits[:, :-1], logits[:, :-1], mask)
        d = feature_discrepancy(pooled_features(sae.encode(h), token_mask),
                                pooled_features(sae.encode(ref_h), token_mask), k, union=True)
        n = len(idx)
        kl_w.append(kl[:n])
        kl_l.append(kl[n:])
        d_w.append(d[:n])
        d_l.append(d[n:])
    kw, kl_, dw, dl = (float(torch.cat(x).mean()) for x in (kl_w, kl_l, d_w, d_l))
    return {"seq_kl_chosen": kw, "seq_kl_rejected": kl_, "seq_kl": 0.5 * (kw + kl_),
            "seq_kl_margin": kl_ - kw, "feature_mse_chosen": dw, "feature_mse_rejected": dl,
            "feature_mse": 0.5 * (dw + dl), "feature_mse_margin": dl - dw}


@torch.no_grad()
def diversity(policy: LlamaLM, prompt_ids: Sequence[Sequence[int]],
              responses: Sequence[Sequence[int]], world: World) -> dict[str, float]:
    """Mean per-token entropy of the policy's predictive distribution on its own responses and
    distinct-2 (unique bigrams / bigrams) over those responses."""
    pad = world.index[PAD]
    keep = [i for i, r in enumerate(responses) if r]
    inputs, _, mask = batch_sequences([prompt_ids[i] for i in keep],
                                      [responses[i] for i in keep], pad)
    logp = F.log_softmax(policy(inputs).float(), -1)
    ent = -(logp.exp() * logp).sum(-1)
    entropy = float((ent * mask).sum() / mask.sum())
    eos = world.index[EOS]
    bigrams = [tuple(b) for r in responses
               for b in zip([t for t in r if t != eos][:-1], [t for t in r if t != eos][1:],
                            strict=True)]
    distinct2 = len(set(bigrams)) / len(bigrams) if bigrams else 0.0
    return {"entropy": entropy, "distinct_2": distinct2}
