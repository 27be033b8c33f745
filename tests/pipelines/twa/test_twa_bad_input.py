"""Bad input to twa's losses, annotation checks and method study: a clear error naming the
item, or a documented handling (overlapping spans merged; a method with no training data
skipped, its claims inconclusive)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from icml25.pipelines.twa import nodes
from icml25.pipelines.twa.annotator import validate_annotation
from icml25.pipelines.twa.losses import (
    AnnotatedBatch,
    build_batch,
    dpo_loss,
    merge_spans,
    sequence_ul_loss,
    sft_loss,
    twa_loss,
)
from icml25.pipelines.twa.toy_language import SPECIALS, Vocab

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[3]


def _logp(b: int, t: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, t, 5, generator=g, dtype=torch.float64)
    return torch.log_softmax(logits, -1)[..., 0]


# ------------------------------------------------------------------------- build_batch
@pytest.mark.parametrize("spans, words", [
    ([(3, 1, 1.0)], "is reversed (end 1 < start 3)"),
    ([(1, 2, -1.0)], "has weight -1.0"),
    ([(1, 2, float("nan"))], "has weight nan"),
    ([(1, 2, float("inf"))], "has weight inf"),
    ([(2, 7, 1.0)], "outside its 5 target tokens"),
    ([(-1, 1, 1.0)], "outside its 5 target tokens"),
    ([(1, 2)], "is not (start, end, weight)"),
])
def test_build_batch_refuses_bad_spans_naming_the_output(spans, words):
    with pytest.raises(ValueError) as err:
        build_batch([4, 5], [[(0, 1, 1.0)], spans], 6, names=["rec-a", "rec-b"])
    assert "'rec-b'" in str(err.value) and words in str(err.value), str(err.value)
    with pytest.raises(ValueError, match="output 1 of the batch"):  # no names: the index
        build_batch([4, 5], [[], spans], 6)


def test_build_batch_refuses_lengths_beyond_the_width():
    with pytest.raises(ValueError, match="output 0 of the batch has 7 target tokens"):
        build_batch([7], [[]], 6)


def test_zero_length_spans_are_no_error_and_no_term():
    batch = build_batch([5], [[(2, 2, 5.0)]], 5)
    assert batch.span_weight.numel() == 0 and batch.first_err.tolist() == [5]


# --------------------------------------------------------------------------- NaN guards
def test_nan_logits_fail_fast_naming_output_and_position():
    logits = torch.zeros(2, 4, 3, dtype=torch.float64, requires_grad=True)
    bad = logits.detach().clone()
    bad[1, 2, 0] = float("nan")
    logp = torch.log_softmax(bad, -1)[..., 0]
    batch = build_batch([4, 4], [[], [(1, 2, 1.0)]], 4)
    for loss in (lambda: twa_loss(logp, batch), lambda: sft_loss(logp, batch.valid),
                 lambda: sequence_ul_loss(logp, batch.valid, torch.tensor([0.0, 1.0]))):
        with pytest.raises(FloatingPointError, match="at output 1, target position 2"):
            loss()
    # the same NaN in a padding position is not read: the loss equals the clean one
    batch_pad = build_batch([4, 2], [[], [(1, 2, 1.0)]], 4)
    clean = torch.log_softmax(torch.zeros(2, 4, 3, dtype=torch.float64), -1)[..., 0]
    assert float(twa_loss(logp, batch_pad)) == float(twa_loss(clean, batch_pad))
    assert math.isfinite(float(sft_loss(logp, batch_pad.valid)))


def test_nan_span_weight_fails_fast_in_the_loss():
    batch = build_batch([4], [[(1, 3, 1.0)]], 4)
    bad = AnnotatedBatch(batch.span_index, torch.tensor([float("nan")], dtype=torch.float64),
                         batch.first_err, batch.valid)
    with pytest.raises(ValueError, match="span 0 of the batch has weight nan"):
        twa_loss(_logp(1, 4), bad)
    with pytest.raises(ValueError, match="sequence weights"):
        sequence_ul_loss(_logp(1, 4), batch.valid, torch.tensor([float("nan")]))


def test_dpo_loss_refuses_empty_batches_and_nan_log_probs():
    with pytest.raises(ValueError, match="no preference pairs"):
        dpo_loss(*(torch.zeros(0),) * 4, beta=0.1)
    w = torch.tensor([-1.0, float("nan")])
    with pytest.raises(FloatingPointError, match="pol_w holds"):
        dpo_loss(w, w - 1, w, w - 1, beta=0.1)


# ---------------------------------------------------------------------- overlapping spans
def test_overlapping_spans_pass_validation_and_the_loss_merges_them():
    """One rule on both sides: validate_annotation accepts the overlap, build_batch merges it
    into one span with the max weight, so the loss equals the loss of the merged span."""
    spans = [[1, 3, "minor", "Fluency/Grammar"], [2, 4, "major", "Accuracy/Mistranslation"]]
    validate_annotation("record 3", 5, spans)  # no error
    assert merge_spans([(1, 3, 1.0), (2, 4, 5.0)]) == [(1, 4, 5.0)]
    assert merge_spans([(1, 2, 1.0), (2, 3, 5.0)]) == [(1, 2, 1.0), (2, 3, 5.0)]  # touching
    logp = _logp(1, 6)
    overlapping = twa_loss(logp, build_batch([6], [[(1, 3, 1.0), (2, 4, 5.0)]], 6))
    merged = twa_loss(logp, build_batch([6], [[(1, 4, 5.0)]], 6))
    assert float(overlapping) == float(merged)


@pytest.mark.parametrize("span, words", [
    ([3, 1, "major", "X"], "is reversed"),
    ([2, 2, "minor", "X"], "is empty"),
])
def test_validate_annotation_refuses_reversed_and_empty_spans(span, words):
    with pytest.raises(ValueError, match=f"annotation record 9: .*{words}"):
        validate_annotation("record 9", 5, [span])


def test_build_examples_accepts_overlapping_records_and_the_batch_merges_them():
    vocab = Vocab([*SPECIALS, "a", "b", "c", "d"])
    spans = [[0, 2, "minor", "Fluency/Grammar"], [1, 3, "major", "Accuracy/Mistranslation"]]
    table = pd.DataFrame([{"src_idx": 0, "system": "s", "src": "a b", "hyp": "a b c d",
                           "spans": json.dumps(spans), "exact_spans": json.dumps(spans[:1]),
                           "mqm": 6.0}])
    examples, wrong = nodes.build_examples(table, vocab, {"major": 5.0, "minor": 1.0,
                                                          "punct": 0.1, "nontranslation": 5.0})
    batch = build_batch([5], [examples[0].spans], 5)
    assert batch.span_index[0].tolist() == [0, 0, 0, -1, -1]
    assert batch.span_weight.tolist() == [5.0]
    assert wrong == [{0, 1}]


# ------------------------------------------------------------------ no training data
def _test_params() -> dict:
    base = yaml.safe_load((ROOT / "conf/base/parameters_twa.yml").read_text())["twa"]
    test = yaml.safe_load((ROOT / "conf/test/parameters_twa.yml").read_text())["twa"]
    return base | test


def test_finetune_with_zero_dpo_pairs_raises_no_training_data_not_a_torch_error():
    from icml25.pipelines.twa.seq2seq import Seq2Seq, Seq2SeqConfig
    from icml25.pipelines.twa.training import Example, MethodConfig, NoTrainingData, finetune

    vocab = Vocab([*SPECIALS, "a", "b"])
    cfg = Seq2SeqConfig(vocab_size=len(vocab), d_model=8, heads=2, enc_layers=1, dec_layers=1,
                        ff=16, dropout=0.0, max_len=8, pad_id=vocab.pad, bos_id=vocab.bos,
                        eos_id=vocab.eos)
    base = Seq2Seq(cfg)
    same = [Example([4], [4], [], 1.0), Example([4], [5], [(0, 1, 1.0)], 1.0)]  # equal MQM
    with pytest.raises(NoTrainingData, match="dpo: zero preference pairs"):
        finetune(base, MethodConfig("dpo"), same, vocab, steps=2, batch=2, lr=1e-3,
                 warmup=0.0, seed=0, progress=False)
    with pytest.raises(NoTrainingData, match="filter_sft: none of the 2 outputs"):
        finetune(base, MethodConfig("filter_sft"), same, vocab, steps=2, batch=2, lr=1e-3,
                 warmup=0.0, seed=0, progress=False)
    nan_model = Seq2Seq(cfg)
    with torch.no_grad():
        next(nan_model.parameters()).fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="sft_loss: log-prob nan"):
        finetune(nan_model, MethodConfig("sft_all"), same, vocab, steps=2, batch=2, lr=1e-3,
                 warmup=0.0, seed=0, progress=False)


def test_zero_dpo_pairs_skip_dpo_with_a_logged_reason_and_inconclusive_claims(caplog):
    params = _test_params()
    params["finetune"] = params["finetune"] | {"lr": [1.0e-3]}  # one grid point: seconds
    lexicon, corpus = nodes.make_corpus(params)
    systems = nodes.train_systems(lexicon, corpus, params)
    annotated = nodes.make_annotated(lexicon, corpus, systems, params)
    annotated["mqm"] = 0.0  # every output of a source equally good: no preference pair
    with caplog.at_level(logging.WARNING, logger="icml25.pipelines.twa.nodes"):
        selection = nodes.select_methods(lexicon, corpus, systems, annotated, params)
    assert set(selection["skipped"]) == {"dpo_sft0", "dpo_sft1", "dpo"}
    assert "zero preference pairs" in selection["skipped"]["dpo"]
    assert "variant dpo_sft0 skipped" in caplog.text and "zero preference pairs" in caplog.text
    assert not any(name.startswith("dpo") for name in selection["chosen"])
    runs = nodes.run_method_seeds(lexicon, corpus, systems, annotated, selection, params)
    results = nodes.merge_methods(selection, params, runs)
    assert np.isnan(results["variants"]["dpo"]["test_oracle_mqm"]).all()
    assert "zero preference pairs" in results["selected"]["dpo"]["skipped"]
    report, claims = nodes.judge_claims(results, annotated, params, {"env": "test"})
    dpo_claims = [c for c in claims["claims"] if "dpo" in (c["method"], c["baseline"])]
    assert dpo_claims
    for c in dpo_claims:
        assert c["verdict"] == "inconclusive" and not c["holds"]
        assert "dpo was not trained" in c["reason"] and "zero preference pairs" in c["reason"]
    others = [c for c in claims["claims"] if c not in dpo_claims]
    assert all(c["verdict"] in ("holds", "fails", "inconclusive") for c in others)
    assert report["skipped"]["dpo"] == selection["skipped"]["dpo"]
    assert "dpo" not in report["within_span"] and "twa" in report["within_span"]
    figs = nodes.plot_results(results)  # the skipped variant gets no bar, no error
    assert set(figs) == {"test_oracle_mqm.png", "within_span.png"}
