"""Encoder-decoder: batched greedy decoding equals one-by-one decoding (spec test 11)."""

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
    with pytest.raises(ValueError, match="no training data"):
        finetune(model, MethodConfig("filter_sft"), ex, vocab, steps=1, batch=1, lr=1e-3,
                 warmup=0.0, seed=0, progress=False)


def test_paired_permutation_test():
    rng = np.random.default_rng(0)
    a = rng.normal(size=200)
    assert paired_permutation_p(a, a + 1.0, 500, 0) < 0.01
    assert paired_permutation_p(a, a, 500, 0) == 1.0
