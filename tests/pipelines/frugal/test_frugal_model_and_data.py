"""The LLaMA model, perplexity, corpus and pre-training helpers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from icml25.core.causal_lm import (
    LlamaConfig,
    LlamaLM,
    apply_rotary,
    mean_token_nll,
    perplexity,
    rotary_tables,
)
from icml25.pipelines.frugal import corpus
from icml25.pipelines.frugal.optimizers import split_parameters
from icml25.pipelines.frugal.params import ModelParams, OptimizerParams, TrainParams
from icml25.pipelines.frugal.pretraining import (
    check_token_ids,
    effective_rank,
    expected_state_floats,
    lr_lambda,
    pretrain,
    validation_windows,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _tiny(vocab: int = 32) -> LlamaLM:
    torch.manual_seed(0)
    return LlamaLM(LlamaConfig(vocab_size=vocab, d_model=16, n_layers=2, n_heads=2, d_ff=24,
                               max_seq_len=12))


def test_model_is_causal_and_shapes_are_right():
    model = _tiny().eval()
    ids = torch.randint(0, 32, (2, 10))
    out = model(ids)
    assert out.shape == (2, 10, 32)
    changed = ids.clone()
    changed[:, 6] = (changed[:, 6] + 1) % 32
    out2 = model(changed)
    assert torch.allclose(out[:, :6], out2[:, :6], atol=1e-6)  # the past ignores the future
    assert not torch.allclose(out[:, 6:], out2[:, 6:])


def test_rotary_scores_depend_on_relative_position_only():
    cos, sin = rotary_tables(8, 20)
    q, k = torch.randn(8), torch.randn(8)

    def score(i: int, j: int) -> float:
        return float(apply_rotary(q, cos[i], sin[i]) @ apply_rotary(k, cos[j], sin[j]))

    assert score(3, 1) == pytest.approx(score(12, 10), abs=1e-5)
    assert score(5, 5) == pytest.approx(float(q @ k), abs=1e-5)


def test_llama_parameter_split_has_seven_projectable_tensors_per_layer():
    model = LlamaLM(LlamaConfig(vocab_size=64, d_model=16, n_layers=4, n_heads=2, d_ff=24))
    reg, proj = split_parameters(model)
    assert len(proj) == 28
    assert {n for n, _ in reg} == {"embed_tokens.weight", "norm.weight", "lm_head.weight",
                                   *(f"layers.{i}.{k}.weight" for i in range(4)
                                     for k in ("input_norm", "post_attention_norm"))}


def test_bad_model_config_is_refused():
    with pytest.raises(ValueError, match="not divisible"):
        LlamaConfig(vocab_size=8, d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        _tiny()(torch.zeros(1, 13, dtype=torch.long))


def test_uniform_logits_give_perplexity_equal_to_vocab_size():
    """A model with zero logits has perplexity equal to the vocabulary size."""
    model = _tiny(vocab=50)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    windows = torch.randint(0, 50, (5, 11))
    assert perplexity(mean_token_nll(model, windows, batch_size=2)) == pytest.approx(50.0)


def test_markov_oracle_reaches_exp_entropy_rate():
    """The true bigram model's perplexity on a long sample is exp(H) within 5 %."""
    rng = np.random.default_rng(0)
    transition = corpus.markov_chain(64, 0.1, rng)
    h = corpus.entropy_rate(transition)
    path = corpus.sample_markov(transition, 60_000, rng)
    nll = -np.log(transition[path[:-1], path[1:]]).mean()
    assert math.exp(nll) == pytest.approx(math.exp(h), rel=0.05)
    pi = corpus.stationary_distribution(transition)
    assert np.allclose(pi @ transition, pi)
    assert 1.0 < math.exp(h) < 64


def test_a_trained_model_learns_the_markov_language():
    """A few hundred steps bring the LM well below the unigram perplexity, towards
    exp(H) (full convergence to within 5 % takes longer than a unit test)."""
    docs, h = corpus.synthetic_markov_docs(16, 0.1, 20, 400, seed=1)
    tok = corpus.train_tokenizer(docs, 0, "char")
    ids = corpus.encode_documents(tok, docs)
    vocab = corpus.vocab_size_of(tok)
    counts = np.bincount(ids, minlength=vocab) / len(ids)
    unigram_ppl = math.exp(-(counts[counts > 0] * np.log(counts[counts > 0])).sum())
    _, record = pretrain(
        ids[:7000], ids[7000:], vocab, ModelParams(d=32, layers=1, heads=2, ff=48, seq=16),
        TrainParams(steps=150, batch=16, warmup=10, eval_every=150, val_windows=32,
                    log_every=50),
        OptimizerParams(kind="frugal", role="method", lr=1e-2, density=0.25, update_gap=20),
        seed=0, device=torch.device("cpu"), progress=False)
    assert record["val_ppl"] < 0.8 * unigram_ppl
    assert record["val_ppl"] < 1.6 * math.exp(h)


def test_stdlib_corpus_is_deterministic_and_split_is_disjoint():
    """The stdlib-docs corpus is the same on every build; after deduplication the three splits
    share no document and no text, and the split is a pure function of its seed."""
    texts = [corpus.join_documents(corpus.stdlib_docstrings(max_files=25)
                                   + corpus.pydoc_topics()) for _ in range(2)]
    metas = [corpus.corpus_meta(t, "stdlib_docs", 0) for t in texts]
    assert metas[0]["sha256"] == metas[1]["sha256"]
    docs = corpus.split_documents(texts[0])
    unique, removed = corpus.deduplicate(docs)
    # the stdlib repeats docstrings: some are removed, and what is left is unique
    assert removed > 0 and len(unique) + removed == len(docs)
    assert len({corpus.normalised(d) for d in unique}) == len(unique)
    with pytest.raises(ValueError, match="duplicate documents"):
        corpus.train_val_test_split(docs, 0.05, 0.05, seed=0)
    train, val, test = corpus.train_val_test_split(unique, 0.05, 0.05, seed=0)
    assert len(train) + len(val) + len(test) == len(unique) and val and test
    keys = [{corpus.normalised(d) for d in part} for part in (train, val, test)]
    assert not keys[0] & keys[1] and not keys[0] & keys[2] and not keys[1] & keys[2]
    assert len(val) == round(0.05 * len(unique)) == len(test)
    assert (train, val, test) == corpus.train_val_test_split(unique, 0.05, 0.05, seed=0)
    assert val != corpus.train_val_test_split(unique, 0.05, 0.05, seed=1)[1]


def test_deduplicate_keeps_first_occurrences_and_counts_the_rest():
    docs = ["Return the sum.  It is an int.", "Other text here.", "Return the sum. It is\nan int.",
            "Other text here.", "Third."]
    unique, removed = corpus.deduplicate(docs)
    assert unique == ["Return the sum.  It is an int.", "Other text here.", "Third."]
    assert removed == 2


def test_split_node_removes_duplicates_before_splitting():
    """A document copied across the corpus ends up in one split only; the record counts it."""
    from icml25.pipelines.frugal import nodes
    docs = [f"Document number {i} about module m{i % 7} and its functions." for i in range(60)]
    docs += docs[:9]  # nine copies
    conf = {**_test_conf(), "data": {"val_frac": 0.1, "test_frac": 0.1, "split_seed": 3}}
    train, val, test, meta = nodes.split_corpus(corpus.join_documents(docs), conf)
    parts = [set(corpus.split_documents(t)) for t in (train, val, test)]
    assert meta["n_docs"] == 69 and meta["n_duplicates_removed"] == 9 and meta["n_unique"] == 60
    assert (meta["n_train"], meta["n_val"], meta["n_test"]) == (48, 6, 6)
    assert sum(map(len, parts)) == 60 and not (parts[0] & parts[1] or parts[0] & parts[2]
                                               or parts[1] & parts[2])
    assert meta["sha256_test"] == corpus.text_sha256(test)


def _test_conf() -> dict:
    from omegaconf import OmegaConf
    root = Path(__file__).resolve().parents[3]
    merged = OmegaConf.merge(OmegaConf.load(root / "conf/base/parameters_frugal.yml"),
                             OmegaConf.load(root / "conf/test/parameters_frugal.yml"))
    return OmegaConf.to_container(merged)["frugal"]


def test_corpus_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        corpus.split_documents("  \n\x1e\n ")
    with pytest.raises(FileNotFoundError, match=r"python3\.11-doc"):
        corpus.deb_doc_sources(tmp_path / "missing")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.rst.txt").write_text("Some reStructuredText documentation.")
    assert corpus.deb_doc_sources(tmp_path) == ["Some reStructuredText documentation."]


def test_bpe_tokenizer_round_trips_and_ends_documents_with_eos():
    docs = ["Return the sum of two numbers.", "A second document, with other words."] * 5
    tok = corpus.train_tokenizer(docs, 300)
    ids = corpus.encode_documents(tok, docs[:2])
    from tokenizers import Tokenizer

    t = Tokenizer.from_str(tok)
    eos = t.token_to_id(corpus.EOS)
    assert (ids == eos).sum() == 2 and ids[-1] == eos
    first = ids[: int(np.argmax(ids == eos))]
    assert t.decode(first.tolist()) == docs[0]


def test_token_ids_are_checked():
    with pytest.raises(ValueError, match="outside"):
        check_token_ids(np.array([1, 2, 99]), 50, "train token ids")
    with pytest.raises(ValueError, match="non-empty 1-D"):
        check_token_ids(np.zeros((2, 2), dtype=int), 50, "train token ids")
    with pytest.raises(ValueError, match="integer"):
        check_token_ids(np.array([0.5, np.nan]), 50, "validation token ids")
    with pytest.raises(ValueError, match="shorter than one window"):
        validation_windows(np.arange(5), 8, 10)


def test_schedule_warms_up_then_decays_to_the_floor():
    f = lr_lambda(100, 10, 0.1)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0) and f(100) == pytest.approx(0.1)
    assert all(f(k) >= f(k + 1) - 1e-12 for k in range(10, 100))


def test_effective_rank_counts_significant_singular_values():
    a = torch.randn(10, 3) @ torch.randn(3, 8)
    assert effective_rank(a, 1e-3) == 3
    assert effective_rank(torch.zeros(4, 4), 1e-3) == 0


def test_expected_state_formula_matches_headline_formula_when_blocks_align():
    model = LlamaLM(LlamaConfig(vocab_size=64, d_model=16, n_layers=4, n_heads=2, d_ff=24))
    cfg = OptimizerParams(kind="frugal", role="method", lr=1e-3, density=0.25)
    f = expected_state_floats(model, cfg)
    assert f["formula_floats"] == f["rho_floats"]
    assert f["n_regular"] + f["n_projectable"] == model.num_parameters()


def test_pretrain_measures_every_optimizer_kind():
    """Smoke test without Kedro: a few steps of each kind; counted state = formula."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 40, 3000).astype(np.int32)
    model = ModelParams(d=16, layers=4, heads=2, ff=24, seq=8)
    train = TrainParams(steps=6, batch=4, warmup=1, eval_every=3, val_windows=4, log_every=2)
    configs = [
        OptimizerParams(kind="adamw", role="baseline", lr=1e-3),
        OptimizerParams(kind="signsgd", role="baseline", lr=1e-3),
        OptimizerParams(kind="badam", role="baseline", lr=1e-3, update_gap=2),
        OptimizerParams(kind="galore", role="baseline", lr=1e-3, projector="svd",
                        state_free="no", state_on_refresh="keep", update_gap=2),
        *(OptimizerParams(kind="frugal", role="method", lr=1e-3, projector=proj, update_gap=2)
          for proj in ("block", "svd", "random", "randperm", "randk")),
        OptimizerParams(kind="frugal", role="ablation", lr=1e-3, proj_logits=True,
                        update_gap=2),
    ]
    for cfg in configs:
        _, rec = pretrain(ids[:2500], ids[2500:], 40, model, train, cfg, 0,
                          torch.device("cpu"), progress=False)
        assert math.isfinite(rec["val_ppl"]), cfg
        assert rec["state_floats_formula_abs_error"] == 0, cfg
        assert len(rec["curve"]) == 4 and rec["optimizer_step_ms"] > 0  # steps 2, 3, 4, 6


def test_optimizer_params_validation():
    with pytest.raises(ValueError, match="density"):
        OptimizerParams(kind="frugal", role="method", lr=1e-3, density=1.2)
    with pytest.raises(ValueError, match="update_gap"):
        OptimizerParams(kind="frugal", role="method", lr=1e-3, update_gap=0)
    with pytest.raises(ValueError, match="need projector: block"):
        OptimizerParams(kind="frugal", role="method", lr=1e-3, projector="svd",
                        proj_logits=True)
    with pytest.raises(ValueError, match="exclude each other"):
        OptimizerParams(kind="adamw", role="baseline", lr=1e-3, lr_grid=[1e-3],
                        lr_from="frugal_block_025")
    with pytest.raises(ValueError, match=r"lr_grid\.0\.lr"):
        OptimizerParams(kind="adamw", role="baseline", lr=1e-3, lr_grid=[-1.0])
    point = OptimizerParams(kind="frugal", role="method", lr=1e-3, proj_lr_scale=0.1,
                            lr_grid=[2e-2, {"lr": 3e-2, "proj_lr_scale": 0.3}])
    assert point.lr_grid[0].lr == 2e-2 and point.lr_grid[0].proj_lr_scale is None
    moved = point.with_point(point.lr_grid[0])
    assert (moved.lr, moved.proj_lr_scale) == (2e-2, 0.1)
    moved = point.with_point(point.lr_grid[1])
    assert (moved.lr, moved.proj_lr_scale) == (3e-2, 0.3)
    assert isinstance(nn.Linear(2, 2), nn.Module)
