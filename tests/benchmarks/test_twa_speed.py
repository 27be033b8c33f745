"""Speed and memory of the twa pipeline (run with `make bench`; never part of `make test`).

- one finetuning step of the default CPU model for TWA (span-level UL) and for SFT, so the cost
  of the span bookkeeping is visible (steps per second in extra_info);
- greedy decoding throughput of the default model (sentences per second);
- the whole default run (`kedro run --pipeline=twa`, conf/base): wall time and peak RSS.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.twa.seq2seq import Seq2Seq, Seq2SeqConfig, greedy_translate
from icml25.pipelines.twa.toy_language import Vocab, make_lexicon, sample_source, translate
from icml25.pipelines.twa.training import Example, MethodConfig, _method_loss

SIZES = {"N": 60, "ADJ": 20, "V": 20, "ADV": 10, "P": 6, "CONJ": 3}


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    lex = make_lexicon(SIZES, 1.1, seed=0)
    vocab = Vocab(lex.vocabulary())
    cfg = Seq2SeqConfig(vocab_size=len(vocab), d_model=64, heads=4, enc_layers=2, dec_layers=2,
                        ff=128, dropout=0.1, max_len=48)
    rng = np.random.default_rng(0)
    srcs = [sample_source(rng, lex, 4, 14) for _ in range(256)]
    examples = [Example(vocab.encode(s), vocab.encode(translate(s, lex)), [(2, 4, 5.0)], 5.0)
                for s in srcs]
    return vocab, Seq2Seq(cfg), examples


@pytest.mark.benchmark(group="twa-finetune-step")
@pytest.mark.parametrize("kind", ["twa", "sft_all"])
def test_finetune_step(benchmark, setup, kind):
    vocab, model, examples = setup
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    method = MethodConfig(kind)

    def step():
        loss = _method_loss(model, method, examples[:32], vocab, None)
        opt.zero_grad()
        loss.backward()
        opt.step()

    benchmark(step)
    benchmark.extra_info["steps_per_second"] = 1 / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="twa-decode")
def test_greedy_decoding_throughput(benchmark, setup):
    _, model, examples = setup
    sources = [e.src for e in examples]
    hyps = benchmark(greedy_translate, model, sources, 256, 47)
    assert len(hyps) == len(sources)
    benchmark.extra_info["sentences_per_second"] = len(sources) / benchmark.stats.stats.mean


def test_default_run(default_run):
    default_run("twa")
