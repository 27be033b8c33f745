"""Training, finetuning and evaluation of the toy translation systems (``docs/papers/twa.md``).

* :func:`train_translator` — trains an encoder-decoder from scratch on parallel pairs; with a dev
  set and ``target_error_free`` it calibrates the base model: a checkpoint every ``ckpt_every``
  steps and the first whose dev greedy error-free rate reaches the target is kept.
* :func:`finetune` — one method (SFT-all, Filter+SFT, DPO, TWA and its ablations) from the base
  model, identical step budget, AdamW with linear warm-up then constant learning rate; with a
  dev scorer it returns the dev-best checkpoint (scored every ``eval_every`` steps).
* :func:`evaluate_outputs` — oracle MQM (exact annotator), % error-free, chrF, chrF++, BLEU, TER
  (sacrebleu) and exact match of greedy test translations.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from icml25.pipelines.twa.annotator import annotate, mqm_score
from icml25.pipelines.twa.losses import (
    build_batch,
    dpo_loss,
    sequence_ul_loss,
    sft_loss,
    twa_loss,
)
from icml25.pipelines.twa.seq2seq import Seq2Seq, Seq2SeqConfig, greedy_translate, pad_batch
from icml25.pipelines.twa.toy_language import Lexicon, Vocab, detokenize


@dataclass(frozen=True)
class Example:
    """One finetuning target: source ids, output ids (no EOS), loss spans and its MQM label."""

    src: list[int]
    tgt: list[int]
    spans: list[tuple[int, int, float]]
    mqm: float


def _tensors(src: list[list[int]], tgt: list[list[int]], vocab: Vocab):
    s = pad_batch(src, vocab.pad)
    t_out = pad_batch([[*y, vocab.eos] for y in tgt], vocab.pad)
    t_in = pad_batch([[vocab.bos, *y] for y in tgt], vocab.pad)
    return s, t_in, t_out


def sequence_logprobs(model: Seq2Seq, src: list[list[int]], tgt: list[list[int]],
                      vocab: Vocab) -> torch.Tensor:
    """``log p(y | x)`` summed over the target tokens, EOS included."""
    s, t_in, t_out = _tensors(src, tgt, vocab)
    return model.token_logprobs(s, t_in, t_out).sum(-1)


def _schedule(opt: torch.optim.Optimizer, lr: float, warmup_steps: int, step: int) -> None:
    for g in opt.param_groups:
        g["lr"] = lr * min(1.0, (step + 1) / max(1, warmup_steps))


def error_free_rate(model: Seq2Seq, sources: list[list[str]], refs: list[list[str]],
                    vocab: Vocab) -> float:
    hyps = greedy_translate(model, [vocab.encode(s) for s in sources])
    return float(np.mean([vocab.decode(h) == r for h, r in zip(hyps, refs, strict=True)]))


def train_translator(cfg: Seq2SeqConfig, pairs: Sequence[tuple[list[str], list[str]]],
                     vocab: Vocab, *, steps: int, batch: int, lr: float, seed: int,
                     dev: Sequence[tuple[list[str], list[str]]] | None = None,
                     ckpt_every: int = 100, target_error_free: float | None = None,
                     progress: bool = True, desc: str = "train") -> tuple[dict, dict]:
    """Train from scratch; returns (state dict, info with the chosen step and dev history)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = Seq2Seq(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    src = [vocab.encode(s) for s, _ in pairs]
    tgt = [vocab.encode(t) for _, t in pairs]
    history: list[dict] = []
    chosen = None
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=2.0)
    for step in bar:
        idx = rng.integers(0, len(pairs), size=batch)
        s, t_in, t_out = _tensors([src[i] for i in idx], [tgt[i] for i in idx], vocab)
        loss = sft_loss(model.token_logprobs(s, t_in, t_out), t_out.ne(vocab.pad))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if dev is not None and target_error_free is not None and (step + 1) % ckpt_every == 0:
            rate = error_free_rate(model, [d[0] for d in dev], [d[1] for d in dev], vocab)
            history.append({"step": step + 1, "dev_error_free": rate, "loss": loss.item()})
            bar.set_postfix(dev_error_free=f"{rate:.2f}")
            if rate >= target_error_free:
                chosen = step + 1
                break
    info = {"steps": chosen or steps, "history": history,
            "reached_target": chosen is not None}
    return copy.deepcopy(model.state_dict()), info


def load_model(cfg: Seq2SeqConfig, state: dict) -> Seq2Seq:
    model = Seq2Seq(cfg)
    model.load_state_dict(state)
    return model


@dataclass(frozen=True)
class MethodConfig:
    """What one finetuning run optimises (see :mod:`icml25.pipelines.twa.losses`)."""

    kind: str  # sft_all | filter_sft | dpo | twa | twa_seq
    ul_scale: float = 1.0
    granularity: str = "span"
    use_off_trajectory: bool = False
    filter_threshold: float = 0.0
    beta: float = 0.1
    sft_weight: float = 0.0
    clamp_eps: float = 1e-6


def filter_examples(examples: Sequence[Example], threshold: float) -> list[Example]:
    """Filter+SFT's data: exactly the outputs with MQM <= threshold."""
    return [e for e in examples if e.mqm <= threshold]


def dpo_pairs(examples: Sequence[Example], max_pairs_per_source: int,
              rng: np.random.Generator) -> list[tuple[Example, Example]]:
    """All (better, worse) pairs of outputs of one source with MQM(y_w) < MQM(y_l), capped."""
    by_src: dict[tuple, list[Example]] = {}
    for e in examples:
        by_src.setdefault(tuple(e.src), []).append(e)
    pairs = []
    for outs in by_src.values():
        cand = [(w, lo) for w in outs for lo in outs if w.mqm < lo.mqm and w.tgt != lo.tgt]
        if len(cand) > max_pairs_per_source:
            keep = rng.choice(len(cand), size=max_pairs_per_source, replace=False)
            cand = [cand[i] for i in sorted(keep)]
        pairs += cand
    return pairs


class NoTrainingData(ValueError):
    """A method has nothing to train on (Filter+SFT: no output passes the filter; DPO: no
    source has two outputs with different MQM). The pipeline skips that variant, logs why, and
    its claims are judged ``inconclusive``."""


def training_data(method: MethodConfig, examples: Sequence[Example], max_pairs_per_source: int,
                  rng: np.random.Generator) -> list:
    """What ``method`` trains on: the examples, the filtered examples or the DPO pairs;
    :class:`NoTrainingData` (naming the method and why) when that is empty."""
    if not examples:
        raise NoTrainingData(f"{method.kind}: no annotated outputs to train on")
    if method.kind == "filter_sft":
        data = filter_examples(examples, method.filter_threshold)
        if not data:
            raise NoTrainingData(f"filter_sft: none of the {len(examples)} outputs has MQM <= "
                                 f"{method.filter_threshold:g} (finetune.filter_threshold)")
        return data
    if method.kind == "dpo":
        data = dpo_pairs(examples, max_pairs_per_source, rng)
        if not data:
            raise NoTrainingData(f"dpo: zero preference pairs among {len(examples)} outputs (no "
                                 "source has two different outputs with different MQM)")
        return data
    return list(examples)


def reference_logprobs(base: Seq2Seq, outputs: Sequence[Example], vocab: Vocab,
                       cache: dict) -> torch.Tensor:
    """``log pi_ref(y | x)`` of every output under the frozen ``base`` (no gradient), computed
    in batches of 256 for the outputs not yet in ``cache`` (keyed by source and output ids)."""
    keys = [(tuple(e.src), tuple(e.tgt)) for e in outputs]
    todo = list(dict.fromkeys(k for k in keys if k not in cache))
    was_training = base.training
    base.eval()
    with torch.no_grad():
        for i in range(0, len(todo), 256):
            chunk = todo[i:i + 256]
            vals = sequence_logprobs(base, [list(k[0]) for k in chunk],
                                     [list(k[1]) for k in chunk], vocab)
            cache.update(zip(chunk, vals.tolist(), strict=True))
    base.train(was_training)
    return torch.tensor([cache[k] for k in keys], dtype=torch.float32)


def finetune(base: Seq2Seq, method: MethodConfig, examples: Sequence[Example], vocab: Vocab, *,
             steps: int, batch: int, lr: float, warmup: float, seed: int,
             max_pairs_per_source: int = 6, progress: bool = True, desc: str = "finetune",
             dev_score: Callable[[Seq2Seq], float] | None = None,
             eval_every: int | None = None,
             ref_cache: dict | None = None) -> tuple[Seq2Seq, dict]:
    """Finetune a copy of ``base`` with one method; returns the model and its history.

    DPO's reference log-probs come from the frozen ``base``; ``ref_cache`` (a dict kept by
    the caller for one base model) stores them per output, so each is computed once across runs.
    With ``dev_score`` (lower is better, e.g. dev oracle MQM) the model is scored every
    ``eval_every`` steps and at the last step, and the best-scoring checkpoint is returned (every
    method is reported at its dev-selected checkpoint, not its last step).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = copy.deepcopy(base)
    model.train()
    data = training_data(method, examples, max_pairs_per_source, rng)
    ref_w = ref_l = None
    if method.kind == "dpo":
        cache = {} if ref_cache is None else ref_cache
        ref_w = reference_logprobs(base, [p[0] for p in data], vocab, cache)
        ref_l = reference_logprobs(base, [p[1] for p in data], vocab, cache)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warm = round(warmup * steps)
    losses: list[float] = []
    curve: list[tuple[int, float]] = []
    best: tuple[float, int, dict] | None = None
    for step in tqdm(range(steps), desc=desc, disable=not progress, mininterval=2.0):
        _schedule(opt, lr, warm, step)
        idx = rng.integers(0, len(data), size=batch)
        loss = _method_loss(model, method, [data[i] for i in idx], vocab,
                            None if ref_w is None else (ref_w[idx], ref_l[idx]))
        if not bool(torch.isfinite(loss)):
            raise FloatingPointError(f"finetune {desc}: loss {loss.item()!r} at step {step + 1} "
                                     f"(lr {lr:g}); lower the learning rate")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        last = step + 1 == steps
        if dev_score is not None and (last or (eval_every and (step + 1) % eval_every == 0)):
            model.eval()
            score = float(dev_score(model))
            model.train()
            curve.append((step + 1, score))
            if best is None or score < best[0]:
                best = (score, step + 1, copy.deepcopy(model.state_dict()))
    info: dict = {"loss": losses, "n_train": len(data), "best_step": steps, "dev_curve": curve}
    if best is not None:
        model.load_state_dict(best[2])
        info |= {"best_step": best[1], "best_dev": best[0]}
    model.eval()
    return model, info


def _method_loss(model: Seq2Seq, method: MethodConfig, items: list, vocab: Vocab,
                 ref: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    if method.kind == "dpo":
        assert ref is not None
        w = sequence_logprobs(model, [p[0].src for p in items], [p[0].tgt for p in items], vocab)
        lo = sequence_logprobs(model, [p[1].src for p in items], [p[1].tgt for p in items], vocab)
        len_w = torch.tensor([len(p[0].tgt) + 1 for p in items], dtype=torch.float32)
        return dpo_loss(w, lo, ref[0], ref[1], method.beta, method.sft_weight, len_w)
    s, t_in, t_out = _tensors([e.src for e in items], [e.tgt for e in items], vocab)
    logp = model.token_logprobs(s, t_in, t_out)
    valid = t_out.ne(vocab.pad)
    if method.kind in ("sft_all", "filter_sft"):
        return sft_loss(logp, valid)
    if method.kind == "twa_seq":
        weight = torch.tensor([min(e.mqm, 5.0) for e in items], dtype=torch.float32)
        return sequence_ul_loss(logp, valid, weight, ul_scale=method.ul_scale,
                                clamp_eps=method.clamp_eps)
    if method.kind == "twa":
        batch = build_batch([len(e.tgt) + 1 for e in items], [e.spans for e in items],
                            t_out.shape[1])
        return twa_loss(logp, batch, ul_scale=method.ul_scale, granularity=method.granularity,
                        use_off_trajectory=method.use_off_trajectory,
                        clamp_eps=method.clamp_eps)
    raise ValueError(f"unknown method kind {method.kind!r}")


def evaluate_outputs(hyps: list[list[str]], refs: list[list[str]], lex: Lexicon,
                     max_errors: int = 5) -> tuple[dict[str, float], np.ndarray]:
    """Oracle MQM and the sacrebleu scores of decoded outputs; also per-segment MQM."""
    import sacrebleu

    seg = np.array([mqm_score(annotate(h, r, lex, max_errors))
                    for h, r in zip(hyps, refs, strict=True)])
    hyp_txt = [detokenize(h) for h in hyps]
    ref_txt = [[detokenize(r) for r in refs]]
    metrics = {
        "oracle_mqm": float(seg.mean()),
        "error_free": float(np.mean(seg == 0) * 100),
        "exact_match": float(np.mean([h == r for h, r in zip(hyps, refs, strict=True)]) * 100),
        "chrf": float(sacrebleu.CHRF().corpus_score(hyp_txt, ref_txt).score),
        "chrf_pp": float(sacrebleu.CHRF(word_order=2).corpus_score(hyp_txt, ref_txt).score),
        # force: silences the "looks tokenized" warning ("." is a word here); scores unchanged
        "bleu": float(sacrebleu.BLEU(force=True).corpus_score(hyp_txt, ref_txt).score),
        "ter": float(sacrebleu.TER().corpus_score(hyp_txt, ref_txt).score),
    }
    return metrics, seg


def within_span_change(model: Seq2Seq, base: Seq2Seq, examples: Sequence[Example],
                       exact_wrong: Sequence[set[int]], vocab: Vocab) -> dict[str, float]:
    """Mean change of ``log p`` (model - base) of tokens inside the *training* (noisy) spans,
    split into truly wrong tokens (inside an exact error span) and truly correct ones (the
    within-span diagnostic of ``docs/papers/twa.md``, "Metrics")."""
    d_wrong: list[float] = []
    d_right: list[float] = []
    with torch.no_grad():
        for k in range(0, len(examples), 256):
            chunk = examples[k:k + 256]
            s, t_in, t_out = _tensors([e.src for e in chunk], [e.tgt for e in chunk], vocab)
            delta = (model.token_logprobs(s, t_in, t_out)
                     - base.token_logprobs(s, t_in, t_out)).numpy()
            for row, e, wrong in zip(delta, chunk, exact_wrong[k:k + 256], strict=True):
                for s0, e0, _ in e.spans:
                    for t in range(s0, e0):
                        (d_wrong if t in wrong else d_right).append(float(row[t]))
    return {"inspan_wrong_dlogp": float(np.mean(d_wrong)) if d_wrong else float("nan"),
            "inspan_correct_dlogp": float(np.mean(d_right)) if d_right else float("nan")}


def paired_permutation_p(a: np.ndarray, b: np.ndarray, n_perm: int, seed: int) -> float:
    """Two-sided paired permutation test (random sign flips of the per-segment differences)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size == 0:
        return float("nan")
    rng = np.random.default_rng(seed)
    obs = abs(d.mean())
    signs = rng.choice([-1.0, 1.0], size=(n_perm, d.size))
    null = np.abs((signs * d).mean(axis=1))
    return float((1 + np.sum(null >= obs - 1e-12)) / (n_perm + 1))


