"""Encoder-decoder: incremental decoding equals the full decoder, batched greedy decoding
equals one-by-one decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.twa.seq2seq import Seq2Seq, Seq2SeqConfig, greedy_translate, pad_batch
from icml25.pipelines.twa.toy_language import Vocab, make_lexicon, sample_source, translate
from icml25.pipelines.twa.training import (
    MethodConfig,
    finetune,
    paired_permutation_p,
    sequence_logprobs,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup():
    lex = make_lexicon({"N": 20, "ADJ": 6, "V": 6, "ADV": 4, "P": 3, "CONJ": 2}, 1.1, seed=1)
    vocab = Vocab(lex.vocabulary())
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(vocab_size=len(vocab), d_model=32, heads=4, enc_layers=1, dec_layers=1,
                        ff=64, dropout=0.0, max_len=48)
    return lex, vocab, Seq2Seq(cfg).eval()


def test_batched_greedy_equals_one_by_one(setup):
    lex, vocab, model = setup
    rng = np.random.default_rng(0)
    sources = [vocab.encode(sample_source(rng, lex, 4, 18)) for _ in range(50)]
    batched = greedy_translate(model, sources, batch_size=50, max_new=20)
    single = [model.generate(pad_batch([s], vocab.pad), 20)[0] for s in sources]
    assert batched == single
    assert len({len(s) for s in sources}) > 5  # mixed lengths, so padding is exercised


def _full_prefix_generate(model, src, max_new, temperature=0.0, generator=None):
    """Reference decoding: the whole prefix through Seq2Seq.decode at every step."""
    memory, pad = model.encode(src)
    ys = torch.full((src.shape[0], 1), model.cfg.bos_id, dtype=torch.long)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_new):
        logits = model.decode(memory, pad, ys)[:, -1]
        if temperature <= 0:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1,
                                    generator=generator).squeeze(-1)
        nxt = nxt.masked_fill(done, model.cfg.pad_id)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt.eq(model.cfg.eos_id)
    return ys[:, 1:]


@pytest.mark.parametrize("layers", [1, 3])
def test_incremental_decoding_equals_the_full_decoder(setup, layers):
    lex, vocab, _ = setup
    torch.manual_seed(layers)
    cfg = Seq2SeqConfig(vocab_size=len(vocab), d_model=32, heads=4, enc_layers=layers,
                        dec_layers=layers, ff=64, dropout=0.0, max_len=48)
    model = Seq2Seq(cfg).eval()
    rng = np.random.default_rng(3)
    src = pad_batch([vocab.encode(sample_source(rng, lex, 4, 18)) for _ in range(6)], vocab.pad)
    assert src.eq(vocab.pad).any()  # padded sources: the cross-attention mask is exercised
    with torch.no_grad():
        ref = _full_prefix_generate(model, src, 30)
        memory, pad = model.encode(src)
        cache = model.start_cache(memory, 30)
        rows = torch.arange(6)
        tgt = torch.cat([torch.full((6, 1), cfg.bos_id), ref], 1)
        full = model.decode(memory, pad, tgt[:, :30])
        for t in range(30):
            step = model.decode_step(cache, rows, pad, tgt[:, t], t)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=1e-5)
        # greedy (with rows dropped as they finish) and sampled generation give the reference's
        # tokens; the reference never drops rows, so its tokens after EOS are padding
        out = model.generate(src, 30)
        expect = [[t for t in row.tolist()] for row in ref]
        for o, e in zip(out, expect, strict=True):
            cut = next((i for i, t in enumerate(e) if t in (cfg.eos_id, cfg.pad_id)), len(e))
            assert o == e[:cut]
        sampled = model.generate(src, 30, temperature=0.8,
                                 generator=torch.Generator().manual_seed(5))
        ref_s = _full_prefix_generate(model, src, 30, 0.8, torch.Generator().manual_seed(5))
        for o, e in zip(sampled, ref_s.tolist(), strict=True):
            cut = next((i for i, t in enumerate(e) if t in (cfg.eos_id, cfg.pad_id)), len(e))
            assert o == e[:cut]


def test_padding_does_not_change_log_probs(setup):
    lex, vocab, model = setup
    rng = np.random.default_rng(1)
    pairs = [sample_source(rng, lex, 4, 18) for _ in range(6)]
    src = [vocab.encode(s) for s in pairs]
    tgt = [vocab.encode(translate(s, lex)) for s in pairs]
    together = sequence_logprobs(model, src, tgt, vocab)
    alone = torch.cat([sequence_logprobs(model, [s], [t], vocab) for s, t in zip(src, tgt,
                                                                                 strict=True)])
    assert torch.allclose(together, alone, atol=1e-5)


def test_filter_sft_with_no_clean_output_is_a_clear_error(setup):
    _, vocab, model = setup
    from icml25.pipelines.twa.training import Example
    ex = [Example([5, 6], [7], [(0, 1, 5.0)], 5.0)]
    with pytest.raises(ValueError, match="filter_sft: none of the 1 outputs has MQM <= 0"):
        finetune(model, MethodConfig("filter_sft"), ex, vocab, steps=1, batch=1, lr=1e-3,
                 warmup=0.0, seed=0, progress=False)


def test_paired_permutation_test():
    rng = np.random.default_rng(0)
    a = rng.normal(size=200)
    assert paired_permutation_p(a, a + 1.0, 500, 0) < 0.01
    assert paired_permutation_p(a, a, 500, 0) == 1.0


def test_finetune_returns_the_dev_best_checkpoint(setup):
    """Checkpoints scored every eval_every steps and at the last; the best one is returned."""
    lex, vocab, model = setup
    from icml25.pipelines.twa.training import Example
    rng = np.random.default_rng(2)
    srcs = [sample_source(rng, lex, 4, 8) for _ in range(16)]
    ex = [Example(vocab.encode(s), vocab.encode(translate(s, lex)), [], 0.0) for s in srcs]
    scores = iter([3.0, 1.0, 2.0, 5.0])  # dev scores at steps 2, 4, 6, 7
    seen = {}

    def dev_score(m):
        seen[len(seen)] = {k: v.clone() for k, v in m.state_dict().items()}
        return next(scores)

    tuned, info = finetune(model, MethodConfig("sft_all"), ex, vocab, steps=7, batch=4, lr=1e-2,
                           warmup=0.0, seed=0, progress=False, dev_score=dev_score,
                           eval_every=2)
    assert [s for s, _ in info["dev_curve"]] == [2, 4, 6, 7]
    assert info["best_step"] == 4 and info["best_dev"] == 1.0
    best = seen[1]
    assert all(torch.equal(v, best[k]) for k, v in tuned.state_dict().items())
    assert not all(torch.equal(v, seen[3][k]) for k, v in tuned.state_dict().items())


def test_omission_spans_follow_the_real_mqm_convention_or_the_gap_token(setup):
    """source_side: an omission becomes a zero-length span (no UL, first error unmoved);
    gap_token: it stays on the token emitted at the gap. A bad record is named."""
    import json

    import pandas as pd

    from icml25.pipelines.twa.nodes import build_examples

    _, vocab, _ = setup
    words = [w for w in vocab.tokens if not w.startswith("<")][:5]
    row = {"src_idx": 3, "system": "other_0_greedy", "src": " ".join(words[:3]),
           "hyp": " ".join(words[:4]), "mqm": 6.0, "exact_mqm": 6.0,
           "spans": json.dumps([[1, 2, "major", "Accuracy/Omission"],
                                [3, 4, "minor", "Fluency/Grammar"]]),
           "exact_spans": json.dumps([[1, 2, "major", "Accuracy/Omission"]])}
    table = pd.DataFrame([row])
    gap, _ = build_examples(table, vocab, {"major": 5.0, "minor": 1.0, "punct": 0.1,
                                           "nontranslation": 5.0}, "gap_token")
    src_side, _ = build_examples(table, vocab, {"major": 5.0, "minor": 1.0, "punct": 0.1,
                                                "nontranslation": 5.0}, "source_side")
    assert gap[0].spans == [(1, 2, 5.0), (3, 4, 1.0)]
    assert src_side[0].spans == [(1, 1, 5.0), (3, 4, 1.0)]
    bad = table.assign(spans=json.dumps([[2, 9, "major", "Accuracy/Mistranslation"]]))
    with pytest.raises(ValueError, match=r"annotation 0 \(system other_0_greedy, source 3\).*"
                                         "falls outside the output"):
        build_examples(bad, vocab, {"major": 5.0, "minor": 1.0, "punct": 0.1,
                                    "nontranslation": 5.0})
