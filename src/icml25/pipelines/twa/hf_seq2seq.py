"""TWA and its baselines on real data: a local Hugging Face seq2seq checkpoint finetuned on MQM
annotations read from local TSV files (``docs/papers/twa.md``, "Data", real-data branch).

* :func:`load_seq2seq` — ``AutoModelForSeq2SeqLM`` and a *fast* tokenizer (character offsets are
  needed to place the ``<v>…</v>`` spans on tokens), ``local_files_only=True``: nothing is
  downloaded. ``transformers`` is imported only here.
* :func:`build_real_examples` — MQM records (:mod:`icml25.pipelines.twa.mqm_tsv`) to token ids and
  loss-weighted token spans: the target is tokenised with ``return_offsets_mapping``, a token lies
  in a span iff one of its non-whitespace characters does, the tokenizer's EOS is the last target
  token (special tokens have empty offsets, so no span covers them); zero-length spans (errors
  marked only on the source) carry no unlikelihood term and do not move the first-error position.
* :func:`token_logprobs` — ``log p(y_t | x, y_<t)`` (B x T) from the HF model, labels padded with
  -100 so the model builds its own decoder inputs (shift right with its decoder start token).
* :func:`finetune_real` — one method (SFT-all, Filter+SFT, DPO[+SFT], TWA, token-level UL, TWA with
  off-trajectory tokens, TWA-seq) with the *same* losses as the toy pipeline
  (:mod:`icml25.pipelines.twa.losses`), AdamW with linear warm-up then constant lr.
* :func:`heldout_scores` — what can be measured without MetricX/COMET (their checkpoints are not
  available offline): per-token NLL of held-out error-free outputs (lower = the model still
  produces good translations) and the mean log-probability of held-out error spans (lower = the
  model moved away from the annotated mistakes).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from icml25.pipelines.twa.annotator import MQM_WEIGHTS, error_weight, mqm_score
from icml25.pipelines.twa.losses import (
    build_batch,
    dpo_loss,
    sequence_ul_loss,
    sft_loss,
    twa_loss,
)
from icml25.pipelines.twa.mqm_tsv import MqmRecord, char_to_token_spans
from icml25.pipelines.twa.training import MethodConfig, NoTrainingData, training_data

logger = logging.getLogger(__name__)

IGNORE = -100


@dataclass(frozen=True)
class RealExample:
    """One annotated output of a real MT system: token ids (target ends with the tokenizer's
    EOS), loss-weighted token spans ``(start, end, weight)``, MQM score and where it came from."""

    src: list[int]
    tgt: list[int]
    spans: list[tuple[int, int, float]]
    mqm: float
    record: str


def load_seq2seq(path: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """A local seq2seq checkpoint directory (``config.json`` + weights + fast tokenizer)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"twa real.hf_model_path {path} has no config.json")
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"twa real.hf_model_path {path}: the tokenizer is not a fast tokenizer; "
                         "character offsets (return_offsets_mapping) are needed to place the "
                         "MQM spans on tokens")
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True)
    if not getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(f"twa real.hf_model_path {path} is not an encoder-decoder model")
    return model.to(device).eval(), tokenizer


def merge_rater_records(records: Sequence[MqmRecord], mode: str) -> list[MqmRecord]:
    """``per_rater``: one record per (output, rater), as read. ``union``: one record per output
    (system, segment) with the spans of all its raters (overlaps are merged by the loss with the
    max weight) and the raters' names joined; its MQM is the mean over raters (see
    :func:`record_mqm`)."""
    if mode == "per_rater":
        return list(records)
    if mode != "union":
        raise ValueError(f"merge_raters: got {mode!r}; expected 'per_rater' or 'union'")
    out: dict[tuple[str, str], MqmRecord] = {}
    for r in records:
        key = (r.system, r.seg_id)
        if key not in out:
            out[key] = MqmRecord(r.system, r.seg_id, r.rater, r.source, r.target, list(r.spans))
            continue
        m = out[key]
        if m.target != r.target or m.source != r.source:
            raise ValueError(f"MQM record (system {r.system}, segment {r.seg_id}): raters "
                             f"{m.rater} and {r.rater} annotated different texts")
        m.rater = f"{m.rater}+{r.rater}"
        m.spans.extend(r.spans)
    return list(out.values())


def record_mqm(record: MqmRecord) -> float:
    """MQM score of a record (weights 5 / 1 / 0.1 / 25); a union record averages its raters."""
    n_raters = record.rater.count("+") + 1
    return mqm_score([[s, e, sev, cat] for s, e, sev, cat in record.spans], MQM_WEIGHTS) / n_raters


def build_real_examples(records: Sequence[MqmRecord], tokenizer: Any, weights: dict[str, float],
                        max_source_tokens: int, max_target_tokens: int) -> list[RealExample]:
    """Tokenise sources and targets and place the character spans on target tokens."""
    out = []
    for r in records:
        rid = f"(system {r.system}, segment {r.seg_id}, rater {r.rater})"
        for s, e, _, _ in r.spans:
            if not 0 <= s <= e <= len(r.target):
                raise ValueError(f"MQM record {rid}: character span [{s}, {e}) falls outside "
                                 f"its target of {len(r.target)} characters")
        if not r.target.strip():
            raise ValueError(f"MQM record {rid}: empty target")
        src = tokenizer(r.source, truncation=True, max_length=max_source_tokens)["input_ids"]
        enc = tokenizer(r.target, truncation=True, max_length=max_target_tokens,
                        return_offsets_mapping=True)
        tgt = list(enc["input_ids"])
        offsets = [tuple(o) for o in enc["offset_mapping"]]
        tok_spans = char_to_token_spans(r.target, offsets, r.spans)
        spans = [(s, e, error_weight(sev, cat, weights)) for s, e, sev, cat in tok_spans if e > s]
        out.append(RealExample(list(src), tgt, spans, record_mqm(r), rid))
    return out


def _pad(seqs: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    width = max(1, max(len(s) for s in seqs))
    out = torch.full((len(seqs), width), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(list(s), dtype=torch.long)
    return out


def token_logprobs(model: Any, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]],
                   pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logp, valid)``: B x T target-token log-probs (0 on padding) and the real-token mask."""
    device = next(model.parameters()).device
    ids = _pad(src, pad_id).to(device)
    labels = _pad(tgt, IGNORE).to(device)
    out = model(input_ids=ids, attention_mask=ids.ne(pad_id).long(), labels=labels)
    valid = labels.ne(IGNORE)
    logp = torch.log_softmax(out.logits.float(), dim=-1)
    logp = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return logp.masked_fill(~valid, 0.0), valid


def real_method_loss(model: Any, method: MethodConfig, items: list, pad_id: int,
                     ref: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """One batch's loss for ``method`` (the toy pipeline's loss functions, on HF log-probs)."""
    if method.kind == "dpo":
        if ref is None:
            raise ValueError("real_method_loss: DPO needs the reference log-probs")
        lp_w, v_w = token_logprobs(model, [p[0].src for p in items], [p[0].tgt for p in items],
                                   pad_id)
        lp_l, _ = token_logprobs(model, [p[1].src for p in items], [p[1].tgt for p in items],
                                 pad_id)
        return dpo_loss(lp_w.sum(-1), lp_l.sum(-1), ref[0], ref[1], method.beta,
                        method.sft_weight, v_w.sum(-1).float())
    logp, valid = token_logprobs(model, [e.src for e in items], [e.tgt for e in items], pad_id)
    if method.kind in ("sft_all", "filter_sft", "sft_ref"):
        return sft_loss(logp, valid)
    if method.kind == "twa_seq":
        weight = torch.tensor([min(e.mqm, 5.0) for e in items], dtype=logp.dtype,
                              device=logp.device)
        return sequence_ul_loss(logp, valid, weight, ul_scale=method.ul_scale,
                                clamp_eps=method.clamp_eps)
    if method.kind == "twa":
        batch = build_batch([len(e.tgt) for e in items], [e.spans for e in items],
                            logp.shape[1])
        batch = type(batch)(batch.span_index.to(logp.device), batch.span_weight,
                            batch.first_err.to(logp.device), batch.valid.to(logp.device))
        return twa_loss(logp, batch, ul_scale=method.ul_scale, granularity=method.granularity,
                        use_off_trajectory=method.use_off_trajectory,
                        clamp_eps=method.clamp_eps)
    raise ValueError(f"unknown method kind {method.kind!r}")


def _sequence_logprobs(model: Any, seqs: list[tuple[list[int], list[int]]], pad_id: int,
                       chunk: int = 32) -> torch.Tensor:
    vals = []
    with torch.no_grad():
        for k in range(0, len(seqs), chunk):
            part = seqs[k:k + chunk]
            lp, _ = token_logprobs(model, [s for s, _ in part], [t for _, t in part], pad_id)
            vals.append(lp.sum(-1).cpu())
    return torch.cat(vals) if vals else torch.zeros(0)


def finetune_real(base: Any, method: MethodConfig, examples: Sequence[RealExample], pad_id: int,
                  *, steps: int, batch: int, lr: float, warmup: float, seed: int,
                  max_pairs_per_source: int = 6, progress: bool = True,
                  desc: str = "finetune") -> tuple[Any, dict[str, Any]]:
    """Finetune a copy of ``base`` with one method; DPO's reference is the frozen ``base``."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    # NoTrainingData (a ValueError) when the filter or the DPO pairs are empty
    data = training_data(method, examples, max_pairs_per_source, rng)  # type: ignore[arg-type]
    ref = None
    if method.kind == "dpo":
        base.eval()
        ref = (_sequence_logprobs(base, [(w.src, w.tgt) for w, _ in data], pad_id),
               _sequence_logprobs(base, [(lo.src, lo.tgt) for _, lo in data], pad_id))
    model = copy.deepcopy(base)
    model.train()
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warm = round(warmup * steps)
    losses = []
    for step in tqdm(range(steps), desc=desc, disable=not progress, mininterval=2.0):
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, (step + 1) / max(1, warm))
        idx = rng.integers(0, len(data), size=min(batch, len(data)))
        r = None if ref is None else (ref[0][idx].to(device), ref[1][idx].to(device))
        loss = real_method_loss(model, method, [data[i] for i in idx], pad_id, r)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"twa real {desc}: loss is {loss.item()} at step {step}")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.item()))
    model.eval()
    return model, {"loss_first": losses[0], "loss_last": losses[-1], "n_train": len(data)}


def heldout_scores(model: Any, examples: Sequence[RealExample], pad_id: int,
                   chunk: int = 32) -> dict[str, float]:
    """Per-token NLL of held-out error-free outputs and mean log p of held-out error spans."""
    nll, n_tok, span_lp = 0.0, 0, []
    with torch.no_grad():
        for k in range(0, len(examples), chunk):
            part = list(examples[k:k + chunk])
            lp, valid = token_logprobs(model, [e.src for e in part], [e.tgt for e in part],
                                       pad_id)
            lp = lp.cpu()
            for row, v, e in zip(lp, valid.cpu(), part, strict=True):
                if not e.spans and e.mqm == 0:
                    nll -= float(row[v].sum())
                    n_tok += int(v.sum())
                span_lp += [float(row[s:t].sum()) for s, t, _ in e.spans]
    return {"heldout_clean_nll": nll / n_tok if n_tok else float("nan"),
            "heldout_span_logp": float(np.mean(span_lp)) if span_lp else float("nan")}


def run_real_methods(model: Any, tokenizer: Any, records: Sequence[MqmRecord],
                     methods: dict[str, MethodConfig], *, weights: dict[str, float],
                     heldout_fraction: float, steps: int, batch: int, lr: float, warmup: float,
                     seed: int, max_pairs_per_source: int, max_source_tokens: int,
                     max_target_tokens: int, save_dir: str | Path | None = None,
                     progress: bool = True) -> dict[str, Any]:
    """Every method finetuned from ``model`` on the training records, scored on held-out ones.

    The held-out part is a seeded random ``heldout_fraction`` of the *segments* (all systems and
    raters of a held-out segment are held out, so no source is seen in training). Finetuned
    models (and the tokenizer) are saved under ``save_dir/<method>`` when given.
    """
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        raise ValueError("twa real: the tokenizer has no pad token")
    examples = build_real_examples(records, tokenizer, weights, max_source_tokens,
                                   max_target_tokens)
    segs = sorted({r.seg_id for r in records})
    rng = np.random.default_rng(seed)
    n_held = round(heldout_fraction * len(segs))
    held = set(rng.permutation(segs)[:n_held].tolist()) if n_held else set()
    train = [e for e, r in zip(examples, records, strict=True) if r.seg_id not in held]
    heldout = [e for e, r in zip(examples, records, strict=True) if r.seg_id in held]
    if not train:
        raise ValueError("twa real: no training records left after holding out "
                         f"{heldout_fraction:.0%} of the segments")
    stats = {"n_records": len(examples), "n_train": len(train), "n_heldout": len(heldout),
             "n_spans": sum(len(e.spans) for e in examples),
             "error_free_share": float(np.mean([e.mqm == 0 for e in examples]))}
    variants: dict[str, dict[str, float]] = {"base": heldout_scores(model, heldout, pad_id)}
    skipped: dict[str, str] = {}
    for name, method in tqdm(methods.items(), desc="twa real methods", disable=not progress):
        try:
            tuned, info = finetune_real(model, method, train, pad_id, steps=steps, batch=batch,
                                        lr=lr, warmup=warmup, seed=seed,
                                        max_pairs_per_source=max_pairs_per_source,
                                        progress=False, desc=name)
        except NoTrainingData as err:
            skipped[name] = str(err)
            logger.warning("twa real: method %s skipped: %s", name, err)
            continue
        variants[name] = heldout_scores(tuned, heldout, pad_id) | info
        if save_dir is not None:
            out = Path(save_dir) / name
            tuned.save_pretrained(str(out))
            tokenizer.save_pretrained(str(out))
        del tuned
    return {"enabled": True, "data": stats, "variants": variants, "skipped": skipped}
