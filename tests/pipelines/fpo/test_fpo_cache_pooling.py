"""FPO's reference cache refuses other pairs than its own, and the official repository's pooling
(``pooling: padded_mean``) matches its formula, written here from the definition."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from pydantic import ValidationError

from icml25.core.datasets import TorchModelDataset
from icml25.pipelines.fpo.align import (
    LossSettings,
    Pairs,
    ReferenceCache,
    cache_reference,
    clean_pairs,
    pair_digests,
    pair_stats,
    pairs_sha256,
)
from icml25.pipelines.fpo.lm import build_model, forward, full_batch
from icml25.pipelines.fpo.losses import padded_mean_features
from icml25.pipelines.fpo.nodes import _aligner, _params, cache_reference_node
from icml25.pipelines.fpo.params import FPOLoss
from icml25.pipelines.fpo.sae import SparseAutoencoder
from icml25.pipelines.fpo.world import EOS, PAD, make_world, sample_prompt, write_response

pytestmark = pytest.mark.usefixtures("one_thread")
WORLD = make_world()
ROOT = Path(__file__).resolve().parents[3]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_fpo.yml").read_text())["fpo"]


def _pairs(n=6, seed=2):
    rng = np.random.default_rng(seed)
    prompts = [sample_prompt(WORLD, rng) for _ in range(n)]
    pids = [WORLD.ids(p.tokens()) for p in prompts]
    # responses of different lengths, so that batches are padded
    ch = [WORLD.ids([*write_response(WORLD, p, rng, 1.0)[:6 + 2 * i], EOS])
          for i, p in enumerate(prompts)]
    rj = [WORLD.ids([*write_response(WORLD, p, rng, 0.0)[:12 - i], EOS])
          for i, p in enumerate(prompts)]
    return clean_pairs(prompts, pids, ch, rj, 64, WORLD.index[EOS])


def _copy(pairs: Pairs) -> Pairs:
    return Pairs(list(pairs.prompts), [list(x) for x in pairs.prompt_ids],
                 [list(x) for x in pairs.chosen], [list(x) for x in pairs.rejected])


def _models(d=16):
    torch.manual_seed(0)
    ref = build_model(WORLD, d, 2, 2, 32, 64).eval()
    sae = SparseAutoencoder(d, 24)
    for q in sae.parameters():
        q.requires_grad_(False)
    return ref, sae


# ------------------------------------------------------------------ the cache's pair hash

def test_the_cache_accepts_its_own_pairs_and_refuses_others_of_the_same_count():
    ref, sae = _models()
    pairs = _pairs()
    cache = cache_reference(ref, sae, pairs, WORLD, layer=2, batch_size=4)
    cache.check_pairs(pairs)
    cache.check_pairs(_copy(pairs))                      # equal content, other objects

    other = _copy(pairs)
    other.chosen[2], other.chosen[3] = other.chosen[3], other.chosen[2]
    with pytest.raises(ValueError, match=r"my_cache\.safetensors: .*2 of 6 pairs differ: "
                                         r"pair 2: chosen; pair 3: chosen"):
        cache.check_pairs(other, "my_cache.safetensors")

    other = _copy(pairs)
    other.prompt_ids[0] = [*other.prompt_ids[0][:-1], other.prompt_ids[0][-1] + 1]
    other.rejected[5] = other.rejected[5][1:]
    with pytest.raises(ValueError, match=r"pair 0: prompt; pair 5: rejected"):
        cache.check_pairs(other)

    reordered = _copy(pairs)
    for name in ("prompt_ids", "chosen", "rejected"):
        getattr(reordered, name).reverse()
    with pytest.raises(ValueError, match="6 of 6 pairs differ"):
        cache.check_pairs(reordered)

    fewer = _copy(pairs)
    for name in ("prompt_ids", "chosen", "rejected"):
        del getattr(fewer, name)[-1]
    with pytest.raises(ValueError, match="holds 6 pairs but the training set has 5"):
        cache.check_pairs(fewer)

    old = ReferenceCache(cache.avg_w, cache.avg_l, cache.feat_w, cache.feat_l)
    with pytest.raises(ValueError, match="stores no hash of its pairs"):
        old.check_pairs(pairs)


def test_the_pair_hash_is_a_sha256_of_every_field():
    pairs = _pairs()
    d = pair_digests(pairs)
    assert d.shape == (6, 3, 8) and d.dtype == torch.uint8
    want = hashlib.sha256(np.asarray(pairs.chosen[4], dtype="<i8").tobytes()).digest()[:8]
    assert bytes(d[4, 1].tolist()) == want
    assert pairs_sha256(d) == hashlib.sha256(d.numpy().tobytes()).hexdigest()


def _frame(pairs: Pairs) -> pd.DataFrame:
    return pd.DataFrame([{"split": "train", "topic": p.topic, "tone": p.tone, "length": p.length,
                          "words": " ".join(p.words), "chosen": " ".join(WORLD.words(w)),
                          "rejected": " ".join(WORLD.words(r))}
                         for p, w, r in zip(pairs.prompts, pairs.chosen, pairs.rejected,
                                            strict=True)]
                        + [{"split": "dev", "topic": pairs.prompts[0].topic,
                            "tone": pairs.prompts[0].tone, "length": pairs.prompts[0].length,
                            "words": " ".join(pairs.prompts[0].words),
                            "chosen": " ".join(WORLD.words(pairs.chosen[0])),
                            "rejected": " ".join(WORLD.words(pairs.rejected[0]))}])


def test_the_nodes_store_the_hash_and_alignment_refuses_a_cache_of_other_pairs(tmp_path):
    p = _params(copy.deepcopy(PARAMS))
    m = p.model
    sft = {"state_dict": build_model(WORLD, m.d_model, m.n_layers, m.n_heads, m.d_ff,
                                     m.max_seq_len).state_dict()}
    sae = SparseAutoencoder(m.d_model, p.sae.m)
    sae_state = {"state_dict": sae.state_dict(), "metadata": {"config": sae.config()}}
    pairs = _pairs()
    frame = _frame(pairs)
    # through the catalog's dataset type: the digests and the hash survive saving
    ds = TorchModelDataset(str(tmp_path / "reference_cache.safetensors"))
    ds.save(cache_reference_node(sft, sae_state, frame, copy.deepcopy(PARAMS)))
    cache_state = ds.load()
    assert cache_state["metadata"]["pairs_sha256"] == pairs_sha256(pair_digests(pairs))
    _aligner(sft, sae_state, cache_state, frame, p, "fpo")   # its own pairs: accepted

    swapped = frame.copy()
    swapped.loc[1, "rejected"], swapped.loc[4, "rejected"] = (frame.loc[4, "rejected"],
                                                              frame.loc[1, "rejected"])
    with pytest.raises(ValueError, match=r"fpo\.reference_cache .*pair 1: rejected; "
                                         r"pair 4: rejected.*re-run cache_reference"):
        _aligner(sft, sae_state, cache_state, swapped, p, "fpo")


# --------------------------------------------------------------- the official pooling

def _official_pooling(codes: torch.Tensor, prompts, responses) -> torch.Tensor:
    """The repository's ``fpo.py`` from its definition: labels are the input ids with prompt and
    padding set to -100; ``loss_mask = labels[:, 1:] != -100``; the features ``fm[:, :-1]`` are
    multiplied by the mask and averaged over dim 1 (all ``T − 1`` positions)."""
    b, t, m = codes.shape
    out = torch.zeros(b, m, dtype=codes.dtype)
    for i in range(b):
        start, end = len(prompts[i]), len(prompts[i]) + len(responses[i])
        for pos in range(t - 1):
            if start <= pos + 1 < end:          # label pos + 1 is a response token
                out[i] += codes[i, pos]
    return out / (t - 1)


def test_padded_mean_pooling_matches_the_official_formula():
    torch.manual_seed(1)
    prompts, responses = [[1, 2, 3], [4, 5], [6, 7, 8, 9]], [[6, 7], [8, 9, 10, 11], [3]]
    ids, logit_mask, _ = full_batch(prompts, responses, 0)
    codes = torch.rand(3, ids.shape[1], 5)
    got = padded_mean_features(codes, logit_mask)
    assert torch.allclose(got, _official_pooling(codes, prompts, responses), atol=1e-7)
    with pytest.raises(ValueError, match="padded_mean pooling"):
        padded_mean_features(codes[:, :-1], logit_mask)


@pytest.mark.parametrize("union", [False, True])
def test_padded_mean_fpo_discrepancy_from_the_cache_equals_the_official_online_one(union):
    ref, sae = _models()
    pairs = _pairs()
    cache = cache_reference(ref, sae, pairs, WORLD, layer=2, batch_size=4)
    policy = copy.deepcopy(ref)
    with torch.no_grad():
        for q in policy.parameters():
            q.add_(0.05 * torch.randn_like(q))
    k = 4
    settings = LossSettings(beta=0.1, k=k, union_topk=union, pooling="padded_mean")
    idx = [1, 3, 4]    # a batch whose padded length differs from the cache's batches
    s = pair_stats("fpo", policy, None, sae, cache, pairs, idx, WORLD, 2, settings)
    prompts = [pairs.prompt_ids[i] for i in idx] * 2
    responses = [pairs.chosen[i] for i in idx] + [pairs.rejected[i] for i in idx]
    ids, _, _ = full_batch(prompts, responses, WORLD.index[PAD])
    with torch.no_grad():
        pi = _official_pooling(sae.encode(forward(policy, ids, 2)[1]), prompts, responses)
        rf = _official_pooling(sae.encode(forward(ref, ids, 2)[1]), prompts, responses)
    want = []
    for a, b in zip(pi, rf, strict=True):
        top = set(torch.topk(a, k).indices.tolist())
        if union:
            top |= set(torch.topk(b, k).indices.tolist())
        sel = sorted(top)
        want.append(float(((a[sel] - b[sel]) ** 2).sum()) / k)   # official: .mean() over k
    got = torch.cat([s.d_w, s.d_l]).detach()
    assert max(want) > 1e-8                                   # the policy has moved
    assert np.allclose(got.numpy(), want, rtol=1e-5, atol=1e-9)
    # and it is not the paper's pooling
    masked = pair_stats("fpo", policy, None, sae, cache, pairs, idx, WORLD, 2,
                        LossSettings(beta=0.1, k=k, union_topk=union))
    assert not np.allclose(torch.cat([masked.d_w, masked.d_l]).detach().numpy(), want,
                           rtol=1e-3)


def test_pooling_is_validated():
    with pytest.raises(ValidationError, match="pooling"):
        FPOLoss(beta=0.1, alpha=0.5, k=4, pooling="mean")
    assert FPOLoss(beta=0.1, alpha=0.5, k=4).pooling == "masked_mean"
