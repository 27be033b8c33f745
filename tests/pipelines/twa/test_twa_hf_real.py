"""The real-data path: local MQM TSV + a local HF seq2seq checkpoint (docs/papers/twa.md).

A tiny T5 is built from a config and a Unigram tokenizer is built here over a few sentences with the
``tokenizers`` library (SentencePiece-like "▁" word markers), so nothing is downloaded.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from icml25.pipelines.twa.hf_seq2seq import (
    build_real_examples,
    finetune_real,
    load_seq2seq,
    merge_rater_records,
    real_method_loss,
    record_mqm,
    token_logprobs,
)
from icml25.pipelines.twa.mqm_tsv import read_mqm_tsv
from icml25.pipelines.twa.training import MethodConfig

pytestmark = pytest.mark.usefixtures("one_thread")

WEIGHTS = {"major": 5.0, "minor": 1.0, "punct": 0.1, "nontranslation": 5.0}
HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity"
ROWS = [
    "sysA\td1\t1\t1\tr1\tthe big dog sleeps .\tder <v>Katze</v> groß schläft .\t"
    "Accuracy/Mistranslation\tMajor",
    "sysA\td1\t1\t1\tr1\tthe big dog sleeps .\tder Katze groß <v>schläft .</v>\t"
    "Fluency/Grammar\tMinor",
    "sysA\td1\t1\t1\tr2\tthe big dog sleeps .\tder Katze groß schläft .\tNo-error\tNo-error",
    "sysB\td1\t1\t1\tr1\tthe big dog sleeps .\tder Hund groß schläft .\tNo-error\tNo-error",
    "sysA\td1\t1\t2\tr1\tthe cat eats fish .\tdie Katze isst <v>Fleisch</v> .\t"
    "Accuracy/Mistranslation\tMajor",
    "sysB\td1\t1\t2\tr1\tthe cat eats fish .\tdie Katze isst Fisch .\tNo-error\tNo-error",
    "sysC\td1\t1\t2\tr1\tthe cat eats fish .\tcat cat cat\tNon-translation!\tMajor",
    "sysA\td1\t1\t3\tr1\ta dog runs .\tein Hund<v></v> .\tAccuracy/Omission\tMajor",
    "sysB\td1\t1\t3\tr1\ta dog runs .\tein Hund läuft .\tNo-error\tNo-error",
    "sysC\td1\t1\t3\tr1\ta dog runs .\tein Hund läuft<v>.</v>\tFluency/Punctuation\tMinor",
    "sysA\td1\t1\t4\tr1\tthe fish swims .\tder Fisch <v>läuft</v> .\tAccuracy/Mistranslation\t"
    "Major",
    "sysB\td1\t1\t4\tr1\tthe fish swims .\tder Fisch schwimmt .\tNo-error\tNo-error",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny T5 and a fast Unigram tokenizer over the fixture's sentences, saved locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    texts = [r.split("\t")[c].replace("<v>", "").replace("</v>", "") for r in ROWS
             for c in (5, 6)]
    # An explicit Unigram vocabulary (every word and punctuation mark with its "▁" marker, then
    # every character)
    # rather than UnigramTrainer, whose output varies from process to process: the finetuning
    # test below must see the same token ids on every run.
    words = sorted({"▁" + w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)})
    chars = sorted({c for t in texts for c in t if not c.isspace()} | {"▁"})
    pieces = ["<pad>", "</s>", "<unk>", *words, *(c for c in chars if c not in words)]
    vocab = [(p, 0.0 if k < 3 else -1.0 if p in words else -10.0) for k, p in enumerate(pieces)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>",
                                                       special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>")
    assert fast.pad_token_id == 0 and fast.eos_token_id == 1
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=len(fast), d_model=16, d_ff=32, d_kv=8, num_layers=1,
                   num_decoder_layers=1, num_heads=2, pad_token_id=0, eos_token_id=1,
                   decoder_start_token_id=0, dropout_rate=0.0)
    path = tmp_path_factory.mktemp("tiny_t5")
    T5ForConditionalGeneration(cfg).save_pretrained(str(path))
    fast.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def loaded(checkpoint):
    return load_seq2seq(checkpoint)


def _records():
    return read_mqm_tsv("\n".join([HEADER, *ROWS]))


def test_spans_land_on_the_marked_tokens(loaded):
    _, tokenizer = loaded
    records = _records()
    examples = build_real_examples(records, tokenizer, WEIGHTS, 64, 64)
    assert len(examples) == len(records) == 11
    for rec, ex in zip(records, examples, strict=True):
        assert ex.tgt[-1] == tokenizer.eos_token_id  # EOS is a target token, never in a span
        assert ex.tgt == tokenizer(rec.target)["input_ids"]
        char_spans = [(s, e) for s, e, *_ in rec.spans if e > s]
        assert len(ex.spans) == len(char_spans), rec
        for (s, e, _), (cs, ce) in zip(ex.spans, char_spans, strict=True):
            assert 0 <= s < e < len(ex.tgt)
            text = tokenizer.decode(ex.tgt[s:e])
            assert text.strip() == rec.target[cs:ce].strip()  # word-boundary spans: exact
    first = examples[0]  # "Katze" major (5) and "schläft ." minor (1)
    assert [w for *_, w in first.spans] == [5.0, 1.0]
    assert first.mqm == 6.0
    by_rec = {(r.system, r.seg_id): ex for r, ex in zip(records, examples, strict=True)}
    assert by_rec[("sysA", "3")].spans == []  # empty <v></v>: no UL term
    assert by_rec[("sysA", "3")].mqm == 5.0
    nt = by_rec[("sysC", "2")]
    assert nt.spans == [(0, len(nt.tgt) - 1, 5.0)] and nt.mqm == 25.0  # Non-translation
    assert by_rec[("sysC", "3")].spans[0][2] == 0.1  # minor punctuation


def test_merge_raters_union_keeps_every_rater_span_and_averages_mqm():
    records = _records()
    union = merge_rater_records(records, "union")
    assert len(union) == len(records) - 1  # (sysA, 1) had raters r1 and r2
    merged = next(r for r in union if (r.system, r.seg_id) == ("sysA", "1"))
    assert merged.rater == "r1+r2" and len(merged.spans) == 2
    assert record_mqm(merged) == pytest.approx(3.0)  # r1: 6, r2: 0
    assert merge_rater_records(records, "per_rater") == records
    bad = read_mqm_tsv("\n".join([HEADER, ROWS[0], ROWS[2].replace("schläft .", "schlief .")]))
    with pytest.raises(ValueError, match=r"system sysA, segment 1\): raters r1 and r2"):
        merge_rater_records(bad, "union")


def _shift_right(labels: torch.Tensor, start: int) -> torch.Tensor:
    dec = torch.full_like(labels, start)
    dec[:, 1:] = labels[:, :-1].clamp(min=0)
    return dec


def test_hf_losses_match_an_independent_computation(loaded):
    model, tokenizer = loaded
    examples = build_real_examples(_records(), tokenizer, WEIGHTS, 64, 64)
    items = examples[:6]
    # independent: explicit decoder inputs, python loops over tokens and spans
    with torch.no_grad():
        want_total, n_tok = 0.0, 0
        for e in items:
            src = torch.tensor([e.src])
            lab = torch.tensor([e.tgt])
            logits = model(input_ids=src, decoder_input_ids=_shift_right(lab, 0)).logits[0]
            lp = torch.log_softmax(logits.double(), -1)[range(len(e.tgt)), e.tgt]
            first = min((s for s, *_ in e.spans), default=len(e.tgt))
            inside = {t for s, t2, _ in e.spans for t in range(s, t2)}
            want_total += -sum(float(lp[t]) for t in range(first) if t not in inside)
            for s, t2, w in e.spans:
                want_total += -w * math.log(1 - math.exp(float(lp[s:t2].sum())))
            n_tok += len(e.tgt)
        got = real_method_loss(model, MethodConfig("twa"), items, tokenizer.pad_token_id)
        assert float(got) == pytest.approx(want_total / n_tok, rel=1e-4)
        # SFT: per-token mean cross-entropy on everything
        logp, valid = token_logprobs(model, [e.src for e in items], [e.tgt for e in items], 0)
        sft = real_method_loss(model, MethodConfig("sft_all"), items, 0)
        assert float(sft) == pytest.approx(float(-logp.sum() / valid.sum()), rel=1e-6)
        # DPO at initialisation (policy = reference): ln 2 per pair
        pairs = [(items[1], items[0]), (items[3], items[0])]
        ref = (logp[[1, 3]].sum(-1), logp[[0, 0]].sum(-1))
        dpo = real_method_loss(model, MethodConfig("dpo", beta=0.1), pairs, 0, ref)
        assert float(dpo) == pytest.approx(math.log(2), rel=1e-5)


def test_twa_finetuning_pushes_error_spans_down(loaded):
    """SFT on every output first makes the annotated mistakes likely (UL's gradient vanishes on
    spans that are already improbable); TWA from there pushes them back down while SFT-all
    keeps raising them."""
    model, tokenizer = loaded
    examples = build_real_examples(_records(), tokenizer, WEIGHTS, 64, 64)
    kw = {"batch": 11, "lr": 3e-2, "warmup": 0.0, "seed": 0, "progress": False}
    sft, _ = finetune_real(model, MethodConfig("sft_all"), examples, 0, steps=40, **kw)
    twa, info = finetune_real(sft, MethodConfig("twa"), examples, 0, steps=20, **kw)
    more_sft, _ = finetune_real(sft, MethodConfig("sft_all"), examples, 0, steps=20, **kw)
    assert info["n_train"] == 11
    with torch.no_grad():
        loss_before = float(real_method_loss(sft, MethodConfig("twa"), examples, 0))
        loss_after = float(real_method_loss(twa, MethodConfig("twa"), examples, 0))
    assert loss_after < loss_before  # the full-data TWA objective went down

    def span_logp(m):
        with torch.no_grad():
            lp, _ = token_logprobs(m, [e.src for e in examples], [e.tgt for e in examples], 0)
        spans = [float(lp[i, s:t].sum()) for i, e in enumerate(examples) for s, t, _ in e.spans]
        return sum(spans) / len(spans)

    before = span_logp(sft)
    assert before > -3.0  # SFT made the mistakes likely
    assert span_logp(twa) < before - 3.0  # TWA pushed them down
    assert span_logp(twa) < span_logp(more_sft) - 3.0  # unlike SFT-all from the same start
    assert span_logp(sft) == before  # finetuning works on a copy


def test_real_branch_runs_through_kedro(kedro_project, checkpoint):
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    tsv = kedro_project / "mqm.tsv"
    tsv.write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
    real = {"mqm_tsv_paths": [str(tsv)], "hf_model_path": str(checkpoint),
            "merge_raters": "union", "methods": ["sft_all", "filter_sft", "dpo", "twa",
                                                 "twa_token_ul", "twa_seq"],
            "device": "cpu", "steps": 3, "batch": 4, "lr": 1e-3, "heldout_fraction": 0.25}
    bootstrap_project(kedro_project)
    with KedroSession.create(project_path=kedro_project, env="test",
                             runtime_params={"twa": {"real": real}}) as session:
        session.run(pipeline_names=["twa"], tags=["real"])
    out = json.loads((kedro_project / "data/07_model_output/twa/real_results.json").read_text())
    assert out["enabled"] and out["merge_raters"] == "union"
    assert out["data"]["n_records"] == 10
    assert out["data"]["n_train"] + out["data"]["n_heldout"] == 10
    assert out["data"]["n_heldout"] > 0
    assert set(out["variants"]) == {"base", *real["methods"]}
    for name, scores in out["variants"].items():
        assert math.isfinite(scores["heldout_clean_nll"]), name
    for name in real["methods"]:
        assert (kedro_project / "data/06_models/twa/real" / name / "config.json").exists()
    reloaded, _ = load_seq2seq(kedro_project / "data/06_models/twa/real/twa")
    assert reloaded.config.d_model == 16
    # the toy branch did not run (only the node tagged "real")
    assert not (kedro_project / "data/01_raw/twa/corpus.parquet").exists()


def test_bad_real_inputs_are_rejected_naming_the_file_or_record(kedro_project, checkpoint,
                                                                tmp_path):
    from icml25.pipelines.twa.nodes import run_real

    bad = tmp_path / "bad.tsv"
    bad.write_text("\n".join([HEADER, ROWS[0].replace("Major", "Critical")]), encoding="utf-8")
    import yaml

    root = Path(__file__).resolve().parents[3]
    params = yaml.safe_load((root / "conf/base/parameters_twa.yml").read_text())["twa"]
    params["real"] |= {"mqm_tsv_paths": [str(bad)], "hf_model_path": str(checkpoint),
                       "device": "cpu"}
    with pytest.raises(ValueError, match=r"bad\.tsv: MQM TSV line 2 \(sysA, segment 1, rater "
                                         r"r1\): unknown severity 'Critical'"):
        run_real(params)
    not_fast = tmp_path / "no_model"
    not_fast.mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        load_seq2seq(not_fast)


def test_real_methods_without_training_data_are_skipped_with_the_reason(loaded, caplog):
    """Every output error-free (MQM 0): zero DPO pairs, so the real branch skips DPO (logged,
    recorded) and still trains the others."""
    import dataclasses
    import logging

    from icml25.pipelines.twa.hf_seq2seq import run_real_methods

    model, tokenizer = loaded
    records = [dataclasses.replace(r, spans=[]) for r in _records()]
    methods = {"sft_all": MethodConfig("sft_all"), "dpo": MethodConfig("dpo")}
    with caplog.at_level(logging.WARNING, logger="icml25.pipelines.twa.hf_seq2seq"):
        out = run_real_methods(model, tokenizer, records, methods, weights=WEIGHTS,
                               heldout_fraction=0.3, steps=1, batch=2, lr=1e-4, warmup=0.0,
                               seed=0, max_pairs_per_source=6, max_source_tokens=64,
                               max_target_tokens=64, save_dir=None, progress=False)
    assert "zero preference pairs" in out["skipped"]["dpo"]
    assert "sft_all" in out["variants"] and "dpo" not in out["variants"]
    assert "method dpo skipped" in caplog.text
