"""The synthetic world's reward, the SAE and FPO's offline reference cache."""

import numpy as np
import pytest
import torch

from icml25.pipelines.fpo.align import LossSettings, Pairs, cache_reference, clean_pairs, pair_stats
from icml25.pipelines.fpo.lm import build_model, forward, full_batch, generate
from icml25.pipelines.fpo.sae import SparseAutoencoder, train_sae
from icml25.pipelines.fpo.world import (
    EOS,
    LEGAL,
    Prompt,
    legal_bigrams,
    make_world,
    reward,
    reward_parts,
    sample_prompt,
    write_response,
)

pytestmark = pytest.mark.usefixtures("one_thread")
WORLD = make_world()


def test_vocabulary_is_about_300_tokens_with_every_category():
    assert 250 <= WORLD.vocab_size <= 320          # a vocabulary of about 300 tokens
    cats = set(WORLD.category.values())
    assert {"control", "tag", "det", "mod", "noun", "verb", "adv", "period"} == cats
    assert len(WORLD.of_topic(3, "noun")) + len(WORLD.of_topic(3, "verb")) == 20
    assert ("n0_0", "v5_1") in legal_bigrams(WORLD) and ("v0_0", "n0_1") not in legal_bigrams(
        WORLD)


def test_reward_of_a_hand_written_response():
    prompt = Prompt(topic=2, tone=1, length="short", words=("n2_0", "n2_1"))
    # 12 tokens: the pos0 n2_0 v2_0 a neg1 n5_3 . the n2_1 v2_1 . + <eos>
    response = ["the", "pos0", "n2_0", "v2_0", "a", "neg1", "n5_3", ".", "the", "n2_1", "v2_1",
                ".", EOS]
    parts = reward_parts(WORLD, prompt, response)
    assert parts.topic == pytest.approx(4 / 5)            # n2_0 v2_0 n2_1 v2_1 of 5 content
    assert parts.tone == pytest.approx(1 * (1 - 1) / (2 + 1))
    assert parts.length == pytest.approx(0.5)             # exactly 12 tokens
    assert parts.repetition == pytest.approx(0.0)
    assert parts.ungrammatical == pytest.approx(0.0)
    assert parts.no_eos == 0.0
    assert reward(WORLD, prompt, response) == pytest.approx(0.8 + 0.0 + 0.5)
    # no <eos> and an ungrammatical bigram (verb -> verb): both penalised
    bad = ["the", "n2_0", "v2_0", "v2_1", "."]
    parts = reward_parts(WORLD, prompt, bad)
    assert parts.no_eos == 1.0 and parts.ungrammatical == pytest.approx(1 / 5)


def test_a_good_response_beats_its_shuffled_version_and_rewards_stay_in_range():
    rng = np.random.default_rng(0)
    worse = 0
    for _ in range(50):
        prompt = sample_prompt(WORLD, rng)
        good = write_response(WORLD, prompt, rng, p_follow=1.0)
        shuffled = [*list(rng.permutation(good[:-1])), EOS]
        r_good, r_shuf = reward(WORLD, prompt, good), reward(WORLD, prompt, shuffled)
        assert -4.0 <= r_good <= 2.5 and -4.0 <= r_shuf <= 2.5
        worse += r_shuf < r_good
    assert worse >= 48


def test_the_writer_is_grammatical():
    rng = np.random.default_rng(1)
    for _ in range(30):
        prompt = sample_prompt(WORLD, rng)
        assert reward_parts(WORLD, prompt, write_response(WORLD, prompt, rng, 0.6)
                            ).ungrammatical == 0.0
    assert ("period", "eos") in LEGAL


def test_sae_recovers_a_planted_sparse_dictionary():
    g = torch.Generator().manual_seed(0)
    d, m, n = 16, 64, 6000
    atoms = torch.randn(d, m, generator=g)
    atoms = atoms / atoms.norm(dim=0, keepdim=True)
    codes = torch.zeros(n, m)
    active = torch.stack([torch.randperm(m, generator=g)[:3] for _ in range(n)])
    codes.scatter_(1, active, torch.rand(n, 3, generator=g) + 0.5)
    acts = codes @ atoms.t()
    # a top-k SAE with the planted sparsity recovers the atoms themselves
    sae, stats = train_sae(acts, m, steps=2000, seed=0, kind="topk", k_sae=3, lr=3e-3,
                           batch_size=256, center=False, progress=False)
    cos = (sae.W_dec.t() @ atoms).abs()          # [m learned, m true], unit columns
    assert (cos.max(0).values > 0.9).float().mean() >= 0.9
    assert stats.l0 <= 3
    # the ReLU + L1 SAE reconstructs the data
    _, stats = train_sae(acts, m, steps=1000, seed=0, l1=3e-3, lr=3e-3, batch_size=256,
                         progress=False)
    assert stats.fvu < 0.05 and stats.dead_fraction < 0.5


def test_topk_sae_keeps_exactly_k_features():
    sae = SparseAutoencoder(8, 32, kind="topk", k_sae=4)
    c = sae.encode(torch.randn(10, 8))
    assert ((c > 0).sum(-1) <= 4).all()
    with pytest.raises(ValueError, match=r"fpo\.sae\.kind"):
        SparseAutoencoder(8, 32, kind="jumprelu")


def _tiny_pairs(n=6):
    rng = np.random.default_rng(2)
    prompts = [sample_prompt(WORLD, rng) for _ in range(n)]
    pids = [WORLD.ids(p.tokens()) for p in prompts]
    ch = [WORLD.ids([*write_response(WORLD, p, rng, 1.0)[:12], EOS]) for p in prompts]
    rj = [WORLD.ids([*write_response(WORLD, p, rng, 0.0)[:9], EOS]) for p in prompts]
    return clean_pairs(prompts, pids, ch, rj, 64, WORLD.index[EOS])


def test_offline_cache_equals_the_reference_on_the_fly():
    torch.manual_seed(0)
    ref = build_model(WORLD, 16, 2, 2, 32, 64).eval()
    sae = SparseAutoencoder(16, 24)
    pairs = _tiny_pairs()
    cache = cache_reference(ref, sae, pairs, WORLD, layer=2, batch_size=4)
    for i in range(len(pairs)):
        for resp, avg, feat in ((pairs.chosen[i], cache.avg_w[i], cache.feat_w[i]),
                                (pairs.rejected[i], cache.avg_l[i], cache.feat_l[i])):
            ids = torch.tensor([pairs.prompt_ids[i] + resp])
            logits, h = forward(ref, ids, 2)
            n_p = len(pairs.prompt_ids[i])
            lp = torch.log_softmax(logits[0, n_p - 1:-1], -1).gather(
                1, ids[0, n_p:, None]).mean()
            assert float((lp - avg).abs()) < 1e-6
            feats = sae.encode(h[0, n_p:]).mean(0)          # the response tokens' positions
            assert float((feats - feat).abs().max()) < 1e-6


def test_full_batch_masks_mark_the_response():
    ids, logit_mask, token_mask = full_batch([[1, 2, 3], [4, 5]], [[6, 7], [8, 9, 10]], 0)
    assert ids.tolist() == [[1, 2, 3, 6, 7], [4, 5, 8, 9, 10]]
    assert token_mask.tolist() == [[0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]
    assert logit_mask.tolist() == [[0, 0, 1, 1], [0, 1, 1, 1]]


def test_fpo_pair_stats_at_initialisation_give_zero_discrepancy_and_grad_flows():
    torch.manual_seed(0)
    ref = build_model(WORLD, 16, 2, 2, 32, 64).eval()
    sae = SparseAutoencoder(16, 24)
    for q in sae.parameters():
        q.requires_grad_(False)
    pairs = _tiny_pairs()
    cache = cache_reference(ref, sae, pairs, WORLD, layer=2)
    policy = build_model(WORLD, 16, 2, 2, 32, 64)
    policy.load_state_dict(ref.state_dict())
    s = pair_stats("fpo", policy, None, sae, cache, pairs, range(len(pairs)), WORLD, 2,
                   LossSettings(beta=0.1, k=4))
    assert float(s.d_w.abs().max()) < 1e-10 and float(s.d_l.abs().max()) < 1e-10
    (s.avg_w.sum() + s.d_l.sum()).backward()
    assert policy.layers[0].mlp.up_proj.weight.grad is not None
    assert all(q.grad is None for q in sae.parameters())


def test_bad_pairs_are_counted_and_skipped():
    rng = np.random.default_rng(3)
    prompts = [sample_prompt(WORLD, rng) for _ in range(4)]
    pids = [WORLD.ids(p.tokens()) for p in prompts]
    good = WORLD.ids(["the", "n0_1", "v0_1", ".", EOS])
    other = WORLD.ids(["a", "n1_1", "v1_1", ".", EOS])
    long = WORLD.ids(["the", "n0_1", "v0_1", "."] * 20 + [EOS])
    pairs = clean_pairs(prompts, pids, [good, good, [WORLD.index[EOS]], long],
                        [other, good, other, other], max_seq_len=64, eos_id=WORLD.index[EOS])
    assert len(pairs) == 1
    assert pairs.skipped == {"identical": 1, "empty_response": 1, "too_long": 1}
    assert isinstance(pairs, Pairs)


def test_generation_is_seeded_and_greedy_is_deterministic():
    torch.manual_seed(0)
    model = build_model(WORLD, 16, 2, 2, 32, 64)
    rng = np.random.default_rng(4)
    pids = [WORLD.ids(sample_prompt(WORLD, rng).tokens()) for _ in range(7)]
    a = generate(model, pids, WORLD, 10, 0.8, seed=5)
    assert a == generate(model, pids, WORLD, 10, 0.8, seed=5)
    assert a != generate(model, pids, WORLD, 10, 0.8, seed=6)
    assert generate(model, pids, WORLD, 10, 0.0, seed=1) == generate(model, pids, WORLD, 10,
                                                                        0.0, seed=2)
    assert all(len(x) <= 10 for x in a)
