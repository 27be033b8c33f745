"""Preference data, FPO's offline reference cache and the alignment loop (``docs/papers/fpo.md``).

One loop trains every method on identical batches: chosen and rejected responses go through the
policy in one forward pass; DPO and TDPO also run the frozen reference (their cost); FPO reads
the reference's margin and pooled SAE features from the offline cache and runs no reference
(the paper's point); SimPO needs no reference at all.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from icml25.core.causal_lm import LlamaLM
from icml25.pipelines.fpo.lm import forward, full_batch, generate
from icml25.pipelines.fpo.losses import (
    NEEDS_REFERENCE,
    PairStats,
    feature_discrepancy,
    margin_u,
    masked_mean,
    masked_sum,
    padded_mean_features,
    pooled_features,
    preference_loss,
    sequential_kl,
    token_logps,
)
from icml25.pipelines.fpo.sae import SparseAutoencoder
from icml25.pipelines.fpo.world import EOS, PAD, Prompt, World, reward


@dataclass
class Pairs:
    """Preference pairs as token ids (prompt, chosen, rejected) with the prompts' metadata."""

    prompts: list[Prompt]
    prompt_ids: list[list[int]]
    chosen: list[list[int]]
    rejected: list[list[int]]
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompt_ids)


def clean_pairs(prompts: list[Prompt], prompt_ids: list[list[int]], chosen: list[list[int]],
                rejected: list[list[int]], max_seq_len: int, eos_id: int) -> Pairs:
    """Drop, and count, pairs that must never be trained on: identical chosen and rejected,
    an empty response (nothing but ``<eos>``), or a prompt + response longer than the context."""
    keep: list[int] = []
    skipped = {"identical": 0, "empty_response": 0, "too_long": 0}
    for i, (p, w, r) in enumerate(zip(prompt_ids, chosen, rejected, strict=True)):
        if w == r:
            skipped["identical"] += 1
        elif not [t for t in w if t != eos_id] or not [t for t in r if t != eos_id]:
            skipped["empty_response"] += 1
        elif len(p) + max(len(w), len(r)) > max_seq_len:
            skipped["too_long"] += 1
        else:
            keep.append(i)
    return Pairs([prompts[i] for i in keep], [prompt_ids[i] for i in keep],
                 [chosen[i] for i in keep], [rejected[i] for i in keep], skipped)


def make_pairs(model: LlamaLM, world: World, prompts: list[Prompt], n_samples: int,
               temperature: float, max_new: int, min_gap: float, bt_noise_tau: float,
               seed: int, max_seq_len: int, progress: bool = True) -> Pairs:
    """UltraFeedback-binarized style pairs: ``n_samples`` SFT samples per prompt, chosen = the
    argmax of r*, rejected = uniform among the others; pairs with an r* gap below ``min_gap``
    are dropped; with ``bt_noise_tau > 0`` a label flips with probability ``1 − σ(Δr*/τ)``."""
    rng = np.random.default_rng(seed)
    pids = [world.ids(p.tokens()) for p in prompts]
    samples = [generate(model, pids, world, max_new, temperature, seed * 31 + j,
                        progress=progress, desc=f"fpo preference samples {j + 1}/{n_samples}")
               for j in range(n_samples)]
    keep_p, keep_ids, ch, rj = [], [], [], []
    small_gap = 0
    for i, p in enumerate(prompts):
        cand = [samples[j][i] for j in range(n_samples)]
        r = np.array([reward(world, p, world.words(c)) for c in cand])
        best = int(np.argmax(r))
        others = [j for j in range(n_samples) if j != best]
        other = int(rng.choice(others))
        gap = r[best] - r[other]
        if gap < min_gap:
            small_gap += 1
            continue
        w, r = cand[best], cand[other]
        if bt_noise_tau > 0 and rng.random() > 1.0 / (1.0 + np.exp(-gap / bt_noise_tau)):
            w, r = r, w
        keep_p.append(p)
        keep_ids.append(pids[i])
        ch.append(w)
        rj.append(r)
    pairs = clean_pairs(keep_p, keep_ids, ch, rj, max_seq_len, world.index[EOS])
    pairs.skipped["small_gap"] = small_gap
    return pairs


def pair_batch(pairs: Pairs, idx: Sequence[int], pad: int):
    """:func:`~icml25.pipelines.fpo.lm.full_batch` of the chosen responses of pairs ``idx``
    followed by their rejected responses (one forward pass for both)."""
    prompts = [pairs.prompt_ids[i] for i in idx]
    responses = [pairs.chosen[i] for i in idx] + [pairs.rejected[i] for i in idx]
    return full_batch(prompts + prompts, responses, pad)


#: Bytes of SHA-256 kept per pair and field (prompt, chosen, rejected) in the cache.
DIGEST_BYTES = 8
FIELDS = ("prompt", "chosen", "rejected")


def digests_of(prompt_ids: Sequence[Sequence[int]], chosen: Sequence[Sequence[int]],
               rejected: Sequence[Sequence[int]]) -> torch.Tensor:
    """``[N, 3, 8]`` uint8: the first 8 bytes of the SHA-256 of each pair's prompt, chosen and
    rejected token ids (little-endian int64), in order."""
    rows = []
    for fields in zip(prompt_ids, chosen, rejected, strict=True):
        rows.append([list(hashlib.sha256(np.asarray(f, dtype="<i8").tobytes()).digest()
                          [:DIGEST_BYTES]) for f in fields])
    return torch.tensor(rows, dtype=torch.uint8).reshape(len(rows), len(FIELDS), DIGEST_BYTES)


def pair_digests(pairs: Pairs) -> torch.Tensor:
    """:func:`digests_of` the pairs' prompt, chosen and rejected ids."""
    return digests_of(pairs.prompt_ids, pairs.chosen, pairs.rejected)


def check_digests(stored: torch.Tensor | None, want: torch.Tensor, name: str) -> None:
    """Refuse cached values whose pair digests ``stored`` are not ``want`` (the digests of the
    pairs they are about to be used with): the count, then every pair's fields; the error names
    ``name`` and the first pairs and fields that differ."""
    if stored is None:
        raise ValueError(f"{name}: the reference cache stores no hash of its pairs (written by "
                         "an older version); re-run cache_reference")
    if len(stored) != len(want):
        raise ValueError(f"{name}: the reference cache holds {len(stored)} pairs but the "
                         f"training set has {len(want)}; re-run cache_reference")
    if pairs_sha256(want) == pairs_sha256(stored):
        return
    differ = (want != stored).any(-1)  # [N, 3]
    rows = differ.any(-1).nonzero().flatten().tolist()
    shown = "; ".join(
        f"pair {i}: " + ", ".join(f for f, d in zip(FIELDS, differ[i].tolist(), strict=True)
                                  if d)
        for i in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    raise ValueError(f"{name}: the reference cache was computed on other pairs than the "
                     f"training set ({len(rows)} of {len(want)} pairs differ: {shown}{more}; "
                     f"cache hash {pairs_sha256(stored)[:12]}, training pairs "
                     f"{pairs_sha256(want)[:12]}); re-run cache_reference")


def pairs_sha256(digests: torch.Tensor) -> str:
    """One hex SHA-256 over the per-pair digests (order and count included)."""
    return hashlib.sha256(digests.numpy().tobytes()).hexdigest()


@dataclass
class ReferenceCache:
    """FPO's offline reference quantities per pair: length-averaged log-probs of chosen and
    rejected, their pooled SAE features ``[N, m]`` (``ref_cache: full``; masked mean over the
    response tokens, the paper's pooling), the sums of their SAE codes over the positions that
    predict a response token (``fsum_*``, what the official repository's ``padded_mean`` pooling
    divides by a training batch's padded length) and the digests of the pairs they were computed
    on (``digests``, :func:`pair_digests`)."""

    avg_w: torch.Tensor
    avg_l: torch.Tensor
    feat_w: torch.Tensor
    feat_l: torch.Tensor
    fsum_w: torch.Tensor | None = None
    fsum_l: torch.Tensor | None = None
    digests: torch.Tensor | None = None

    def gamma_ref(self, beta: float, idx: torch.Tensor) -> torch.Tensor:
        return beta * (self.avg_w[idx] - self.avg_l[idx])

    def check_pairs(self, pairs: Pairs, name: str = "fpo.reference_cache") -> None:
        """Refuse a cache computed on other pairs than ``pairs`` (:func:`check_digests`)."""
        check_digests(self.digests, pair_digests(pairs), name)


@torch.no_grad()
def cache_reference(ref: LlamaLM, sae: SparseAutoencoder, pairs: Pairs, world: World,
                    layer: int, batch_size: int = 64) -> ReferenceCache:
    """Two passes of the frozen SFT model over the pairs (no gradient), once, before training."""
    ref.eval()
    pad = world.index[PAD]
    avg_w, avg_l, feat_w, feat_l, fsum_w, fsum_l = [], [], [], [], [], []
    for s in range(0, len(pairs), batch_size):
        idx = list(range(s, min(s + batch_size, len(pairs))))
        ids, mask, token_mask = pair_batch(pairs, idx, pad)
        logits, h = forward(ref, ids, layer)
        avg = masked_mean(token_logps(logits[:, :-1], ids[:, 1:]), mask)
        codes = sae.encode(h.float())
        feats = pooled_features(codes, token_mask)
        fsum = (codes[:, :-1] * mask.unsqueeze(-1)).sum(1)
        n = len(idx)
        avg_w.append(avg[:n])
        avg_l.append(avg[n:])
        feat_w.append(feats[:n])
        feat_l.append(feats[n:])
        fsum_w.append(fsum[:n])
        fsum_l.append(fsum[n:])
    return ReferenceCache(torch.cat(avg_w), torch.cat(avg_l), torch.cat(feat_w),
                          torch.cat(feat_l), torch.cat(fsum_w), torch.cat(fsum_l),
                          pair_digests(pairs))


@dataclass(frozen=True)
class LossSettings:
    beta: float
    alpha: float = 0.5
    gamma: float = 0.5
    k: int = 16
    union_topk: bool = True
    stopgrad: bool = True
    pooling: str = "masked_mean"


def pair_stats(method: str, policy: LlamaLM, ref: LlamaLM | None, sae: SparseAutoencoder | None,
               cache: ReferenceCache | None, pairs: Pairs, idx: Sequence[int], world: World,
               layer: int, settings: LossSettings) -> PairStats:
    """Everything ``method``'s loss needs for the pairs ``idx`` (policy forward with gradient)."""
    pad = world.index[PAD]
    ids, mask, token_mask = pair_batch(pairs, idx, pad)
    n = len(idx)
    logits, h = forward(policy, ids, layer if method == "fpo" else None)
    logits = logits[:, :-1]
    lp = token_logps(logits, ids[:, 1:])
    sums, avgs = masked_sum(lp, mask), masked_mean(lp, mask)
    stats = PairStats(sum_w=sums[:n], sum_l=sums[n:], avg_w=avgs[:n], avg_l=avgs[n:])
    if method in NEEDS_REFERENCE:
        if ref is None:
            raise ValueError(f"{method} needs the reference model")
        with torch.no_grad():
            ref_logits = ref(ids)[:, :-1]
        ref_sums = masked_sum(token_logps(ref_logits, ids[:, 1:]), mask)
        stats.ref_sum_w, stats.ref_sum_l = ref_sums[:n], ref_sums[n:]
        if method in ("tdpo1", "tdpo2"):
            kl = sequential_kl(ref_logits, logits, mask)
            stats.kl_w, stats.kl_l = kl[:n], kl[n:]
    if method == "fpo":
        if sae is None or cache is None:
            raise ValueError("fpo needs the SAE and the offline reference cache")
        t_idx = torch.as_tensor(list(idx))
        if settings.pooling == "masked_mean":
            feats = pooled_features(sae.encode(h), token_mask)
            ref_w, ref_l = cache.feat_w[t_idx], cache.feat_l[t_idx]
        elif settings.pooling == "padded_mean":
            if cache.fsum_w is None or cache.fsum_l is None:
                raise ValueError("fpo.loss.fpo.pooling padded_mean needs the code sums of the "
                                 "reference cache; re-run cache_reference")
            feats = padded_mean_features(sae.encode(h), mask)
            # the reference pooled as the official code pools it in this very batch
            ref_w = cache.fsum_w[t_idx] / mask.shape[1]
            ref_l = cache.fsum_l[t_idx] / mask.shape[1]
        else:
            raise ValueError(f"fpo.loss.fpo.pooling: got {settings.pooling!r}; expected "
                             "masked_mean or padded_mean")
        stats.d_w = feature_discrepancy(feats[:n], ref_w, settings.k, settings.union_topk)
        stats.d_l = feature_discrepancy(feats[n:], ref_l, settings.k, settings.union_topk)
        stats.gamma_ref = cache.gamma_ref(settings.beta, t_idx)
    return stats


@dataclass
class AlignResult:
    policy: LlamaLM
    history: list[dict[str, float]]
    step_ms: float
    saved_bytes: int
    ref_forwards_per_step: int


def align(method: str, sft: LlamaLM, sae: SparseAutoencoder | None,
          cache: ReferenceCache | None, pairs: Pairs, world: World, layer: int,
          settings: LossSettings, lr: float, epochs: int, batch_size: int, warmup: float,
          seed: int, progress: bool = True, desc: str = "") -> AlignResult:
    """Train a copy of the SFT model with ``method``'s loss; Adam, linear warm-up over the first
    ``warmup`` share of steps, then a constant learning rate.

    Also measured: mean wall time per step (after two warm-up steps) and the peak bytes autograd
    saved for the backward pass in one step (the activation memory a GPU would hold)."""
    policy = copy.deepcopy(sft)
    policy.train()
    ref = sft if method in NEEDS_REFERENCE else None
    if sae is not None:
        for p in sae.parameters():
            p.requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    steps_per_epoch = max(1, len(pairs) // batch_size)
    total = epochs * steps_per_epoch
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    warm = max(1, int(warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    history: list[dict[str, float]] = []
    times: list[float] = []
    peak_saved = 0
    bar = tqdm(total=total, desc=desc or f"fpo align {method}", disable=not progress,
               leave=False)
    for _ in range(epochs):
        order = torch.randperm(len(pairs), generator=gen).tolist()
        for b in range(steps_per_epoch):
            idx = order[b * batch_size:(b + 1) * batch_size]
            saved = [0]

            def pack(t: torch.Tensor, saved=saved) -> torch.Tensor:
                saved[0] += t.numel() * t.element_size()
                return t

            start = time.perf_counter()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                stats = pair_stats(method, policy, ref, sae, cache, pairs, idx, world, layer,
                                   settings)
                u = margin_u(method, stats, settings.beta, settings.alpha, settings.gamma,
                             settings.stopgrad)
                loss = preference_loss(u)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            sched.step()
            times.append(time.perf_counter() - start)
            peak_saved = max(peak_saved, saved[0])
            if not torch.isfinite(loss):
                raise FloatingPointError(f"fpo {method}: loss became {float(loss.detach())} at step "
                                         f"{len(history)} (lr {lr}); lower the learning rate")
            history.append({"step": len(history), "loss": float(loss.detach()),
                            "reward_accuracy": float((u > 0).float().mean())})
            bar.update()
    bar.close()
    policy.eval()
    step_ms = 1000 * float(np.mean(times[2:] if len(times) > 4 else times))
    return AlignResult(policy, history, step_ms, peak_saved,
                       1 if method in NEEDS_REFERENCE else 0)


def mean_reward(policy: LlamaLM, world: World, prompts: list[Prompt], max_new: int,
                seed: int) -> float:
    """Mean r* of greedy responses (the dev criterion of the learning-rate grid)."""
    pids = [world.ids(p.tokens()) for p in prompts]
    outs = generate(policy, pids, world, max_new, 0.0, seed)
    return float(np.mean([reward(world, p, world.words(o)) for p, o in
                          zip(prompts, outs, strict=True)]))
