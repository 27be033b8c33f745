"""Kedro nodes of the twa pipeline: thin wrappers around the method modules.

corpus (lexicon + parallel splits) -> base model (calibrated) and the "other" systems -> their
outputs on the finetuning sources, annotated by the oracle annotator (noisy labels for training,
exact labels hidden for evaluation) -> every method finetuned from the base model per seed and
evaluated on test / test-hard -> metrics, claims, figures.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_shards, shard_seeds
from icml25.pipelines.twa.annotator import (
    MQM_WEIGHTS,
    NON_TRANSLATION,
    OMISSION,
    add_noise,
    annotate,
    corrupt,
    error_weight,
    mqm_score,
    validate_annotation,
)
from icml25.pipelines.twa.params import TwaParams
from icml25.pipelines.twa.toy_language import (
    Lexicon,
    Vocab,
    make_lexicon,
    sample_source,
    translate,
)

if TYPE_CHECKING:
    from icml25.pipelines.twa.seq2seq import Seq2Seq, Seq2SeqConfig
    from icml25.pipelines.twa.training import Example, MethodConfig

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
torch = lazy_module("torch")

logger = logging.getLogger(__name__)
PIPELINE = "twa"
SPLITS = ("base_train", "ft", "dev", "test", "test_hard")


def _params(params: dict[str, Any]) -> TwaParams:
    return validate_parameters(TwaParams, params, PIPELINE)


def _toks(text: str) -> list[str]:
    return text.split(" ") if text else []


# ------------------------------------------------------------------------------------ data
def make_corpus(params: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame]:
    """The lexicon and the disjoint parallel splits (source, reference T(x))."""
    p = _params(params)
    lex = make_lexicon(p.lang.sizes(), p.lang.zipf, p.seed)
    rng = np.random.default_rng(p.seed + 1)
    d = p.data
    plan = [("base_train", d.n_base_pairs, d.min_len, d.max_len),
            ("ft", d.n_ft_sources, d.min_len, d.max_len),
            ("dev", d.n_dev, d.min_len, d.max_len),
            ("test", d.n_test, d.min_len, d.max_len),
            ("test_hard", d.n_test_hard, d.hard_min_len, d.hard_max_len)]
    seen: set[tuple[str, ...]] = set()
    rows = []
    for split, n, lo, hi in plan:
        made, tries = 0, 0
        while made < n:
            tries += 1
            if tries > 50 * n + 1000:
                raise ValueError(f"twa.data: cannot draw {n} distinct {split} sentences of "
                                 f"{lo}..{hi} words from this lexicon; enlarge twa.lang")
            src = sample_source(rng, lex, lo, hi)
            if tuple(src) in seen:
                continue
            seen.add(tuple(src))
            rows.append({"split": split, "src": " ".join(src),
                         "ref": " ".join(translate(src, lex))})
            made += 1
    return lex.to_json(), pd.DataFrame(rows)


def _split(corpus: pd.DataFrame, split: str) -> list[tuple[list[str], list[str]]]:
    part = corpus[corpus["split"] == split]
    return [(_toks(s), _toks(r)) for s, r in zip(part["src"], part["ref"], strict=True)]


def _config(p: TwaParams, vocab: Vocab) -> Seq2SeqConfig:
    from icml25.pipelines.twa.seq2seq import Seq2SeqConfig
    m = p.model
    return Seq2SeqConfig(vocab_size=len(vocab), d_model=m.d_model, heads=m.heads,
                         enc_layers=m.enc_layers, dec_layers=m.dec_layers, ff=m.ff,
                         dropout=m.dropout, max_len=m.max_len, pad_id=vocab.pad,
                         bos_id=vocab.bos, eos_id=vocab.eos)


def _check_corpus(corpus: pd.DataFrame) -> None:
    if corpus.empty or not {"split", "src", "ref"} <= set(corpus.columns):
        raise ValueError("twa corpus: expected a non-empty table with columns split, src, ref")
    missing = [s for s in SPLITS[:4] if not (corpus["split"] == s).any()]
    if missing:
        raise ValueError(f"twa corpus: splits {missing} are empty")


def train_systems(lexicon: dict[str, Any], corpus: pd.DataFrame,
                  params: dict[str, Any]) -> dict[str, Any]:
    """The calibrated base model and the other systems, in one state-dict bundle."""
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.twa.training import train_translator
    p = _params(params)
    set_threads(p.num_threads)
    seed_everything(p.seed)
    _check_corpus(corpus)
    lex = Lexicon.from_json(lexicon)
    vocab = Vocab(lex.vocabulary())
    cfg = _config(p, vocab)
    pairs = _split(corpus, "base_train")
    dev = _split(corpus, "dev")
    m = p.model
    base, info = train_translator(cfg, pairs, vocab, steps=m.base_steps, batch=m.batch, lr=m.lr,
                                  seed=p.seed, dev=dev, ckpt_every=m.ckpt_every,
                                  target_error_free=m.target_error_free, progress=p.progress,
                                  desc="twa base model")
    if not info["reached_target"]:
        logger.warning("twa: base model never reached dev error-free %.2f in %d steps; "
                       "using the last checkpoint", m.target_error_free, m.base_steps)
    state = {f"base.{k}": v for k, v in base.items()}
    others = []
    for k, budget in enumerate(p.systems.other_budgets):
        rng = np.random.default_rng(p.seed + 100 + k)
        idx = rng.permutation(len(pairs))[: max(1, int(budget * len(pairs)))]
        sd, oinfo = train_translator(cfg, [pairs[i] for i in idx], vocab, steps=info["steps"],
                                     batch=m.batch, lr=m.lr, seed=p.seed + 100 + k,
                                     progress=p.progress, desc=f"twa other system {k}")
        state |= {f"other_{k}.{name}": v for name, v in sd.items()}
        others.append({"budget": budget, "steps": oinfo["steps"]})
    return {"state_dict": state,
            "metadata": {"config": cfg.to_dict(), "base": info, "others": others}}


def _model(bundle: dict[str, Any], name: str) -> Seq2Seq:
    from icml25.pipelines.twa.seq2seq import Seq2Seq, Seq2SeqConfig
    cfg = Seq2SeqConfig(**bundle["metadata"]["config"])
    prefix = f"{name}."
    state = {k[len(prefix):]: v for k, v in bundle["state_dict"].items() if k.startswith(prefix)}
    if not state:
        raise ValueError(f"twa systems bundle has no model {name!r}")
    model = Seq2Seq(cfg)
    model.load_state_dict(state)
    model.eval()
    return model


def make_annotated(lexicon: dict[str, Any], corpus: pd.DataFrame, systems: dict[str, Any],
                   params: dict[str, Any]) -> pd.DataFrame:
    """Outputs of systems other than the finetuned model, annotated MQM-style.

    ``spans``/``mqm``: the noisy annotation (training labels); ``exact_spans``/``exact_mqm``:
    the exact annotation, hidden from training and used only for the within-span analysis.
    """
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.twa.seq2seq import greedy_translate, pad_batch
    p = _params(params)
    set_threads(p.num_threads)
    seed_everything(p.seed)
    lex = Lexicon.from_json(lexicon)
    vocab = Vocab(lex.vocabulary())
    ft = _split(corpus, "ft")
    src_ids = [vocab.encode(s) for s, _ in ft]
    outputs: dict[str, list[list[str]]] = {}
    for k in range(len(p.systems.other_budgets)):
        model = _model(systems, f"other_{k}")
        outputs[f"other_{k}_greedy"] = [vocab.decode(h) for h in greedy_translate(
            model, src_ids, p.eval.batch, max_new=p.model.max_len - 1)]
        if k == 0:
            gen = torch.Generator().manual_seed(p.seed + 7)
            sampled = []
            for i in range(0, len(src_ids), p.eval.batch):
                batch = pad_batch(src_ids[i:i + p.eval.batch], vocab.pad)
                sampled += model.generate(batch, p.model.max_len - 1,
                                          temperature=p.systems.temperature, generator=gen)
            outputs["other_0_sampled"] = [vocab.decode(h) for h in sampled]
    rng = np.random.default_rng(p.seed + 11)
    lo, hi = p.systems.corrupt_errors
    outputs["corrupted_reference"] = [corrupt(r, lex, rng, int(rng.integers(lo, hi + 1)))
                                      for _, r in ft]
    a = p.annotator
    rows = []
    for system, hyps in outputs.items():
        for i, ((src, ref), hyp) in enumerate(zip(ft, hyps, strict=True)):
            exact = annotate(hyp, ref, lex, a.max_errors)
            noisy = add_noise(exact, hyp, rng, a.p_widen, a.p_miss)
            rows.append({"src_idx": i, "system": system, "src": " ".join(src),
                         "hyp": " ".join(hyp),
                         "spans": json.dumps([e.to_list() for e in noisy]),
                         "exact_spans": json.dumps([e.to_list() for e in exact]),
                         "mqm": mqm_score(noisy), "exact_mqm": mqm_score(exact)})
    return pd.DataFrame(rows)


def build_examples(annotated: pd.DataFrame, vocab: Vocab, weights: dict[str, float],
                   omission_spans: str = "gap_token") -> tuple[list[Example], list[set[int]]]:
    """Training examples with loss-weighted spans, after checking every annotation record.

    ``omission_spans``: ``gap_token`` keeps an omission on the hypothesis token emitted at the
    gap (the ablation ``twa_omission_gap``); ``source_side`` makes it a zero-length span as in the
    real MQM files, where annotators mark omissions on the source: no UL term, ``t*`` unmoved.
    """
    from icml25.pipelines.twa.training import Example
    if omission_spans not in ("gap_token", "source_side"):
        raise ValueError(f"omission_spans: got {omission_spans!r}; expected 'gap_token' or "
                         "'source_side'")
    need = {"src_idx", "system", "src", "hyp", "spans", "exact_spans", "mqm"}
    if annotated.empty or not need <= set(annotated.columns):
        raise ValueError(f"twa annotated outputs: expected a non-empty table with columns "
                         f"{sorted(need)}")
    if annotated["mqm"].isna().any():
        bad = annotated.index[annotated["mqm"].isna()][0]
        raise ValueError(f"twa annotated outputs: record {bad} has a NaN MQM score")
    examples, wrong = [], []
    for row in annotated.itertuples():
        rid = f"{row.Index} (system {row.system}, source {row.src_idx})"
        hyp = _toks(row.hyp)
        spans = json.loads(row.spans)
        validate_annotation(rid, len(hyp), spans)
        exact = json.loads(row.exact_spans)
        validate_annotation(rid, len(hyp), exact)
        examples.append(Example(
            src=vocab.encode(_toks(row.src)), tgt=vocab.encode(hyp),
            spans=[(s, s if cat == OMISSION and omission_spans == "source_side" else e,
                    error_weight(sev, cat, weights)) for s, e, sev, cat in spans],
            mqm=float(row.mqm)))
        wrong.append({t for s, e, _, cat in exact if cat != NON_TRANSLATION
                      for t in range(s, e)})
    return examples, wrong


# ------------------------------------------------------------------------------- methods
def _families(p: TwaParams) -> list[tuple[str, str, list[tuple[str, MethodConfig]]]]:
    """The tuned variants: (name, training data, hyperparameter grid without the lr).

    Every variant is also tuned over ``finetune.lr``; ``refs`` trains on the references of the
    finetuning sources (SFT-ref), ``ann+refs`` on the annotated outputs plus the references as
    error-free outputs (the paper's "with references" setting).
    """
    from icml25.pipelines.twa.training import MethodConfig
    eps = p.loss.clamp_eps
    thr = p.finetune.filter_threshold
    fam = [("sft_all", "ann", [("", MethodConfig("sft_all"))]),
           ("filter_sft", "ann", [("", MethodConfig("filter_sft", filter_threshold=thr))])]
    if p.finetune.with_references:
        fam.append(("sft_ref", "refs", [("", MethodConfig("sft_all"))]))
    for w in p.dpo.sft_weight:
        fam.append((f"dpo_sft{w:g}", "ann",
                    [(f"beta={b:g}", MethodConfig("dpo", beta=b, sft_weight=w))
                     for b in p.dpo.beta]))
    for lam in p.loss.ul_scale:
        fam.append((f"twa_l{lam:g}", "ann", [("", MethodConfig("twa", lam, clamp_eps=eps))]))
    return fam


def _ablations(p: TwaParams, lam: float) -> list[tuple[str, str, MethodConfig, str]]:
    """TWA's ablations: one switch changed, the lr of the TWA variant they are compared with.

    (name, training data, method, the TWA variant whose dev-selected lr they use).
    """
    from icml25.pipelines.twa.training import MethodConfig
    eps = p.loss.clamp_eps
    twa = f"twa_l{lam:g}"
    out = [("twa_token_ul_l1", "ann", MethodConfig("twa", 1.0, "token", clamp_eps=eps), "twa_l1"),
           ("twa_token_ul", "ann", MethodConfig("twa", lam, "token", clamp_eps=eps), twa),
           ("twa_offtraj", "ann", MethodConfig("twa", lam, use_off_trajectory=True,
                                               clamp_eps=eps), twa),
           ("twa_seq", "ann", MethodConfig("twa_seq", ul_scale=lam, clamp_eps=eps), twa)]
    out.append((f"twa_omission_{_other_omission(p).split('_')[0]}", "ann_flip",
                MethodConfig("twa", lam, clamp_eps=eps), twa))
    if p.finetune.with_references:
        out.append(("twa_with_refs", "ann+refs", MethodConfig("twa", lam, clamp_eps=eps), twa))
    return out


def _other_omission(p: TwaParams) -> str:
    return "gap_token" if p.loss.omission_spans == "source_side" else "source_side"


def _reference_examples(corpus: pd.DataFrame, vocab: Vocab) -> list[Example]:
    from icml25.pipelines.twa.training import Example
    return [Example(vocab.encode(s), vocab.encode(r), [], 0.0) for s, r in _split(corpus, "ft")]


class _Methods:
    """What every step of the method study shares: the examples, the evaluation sets, the base
    model, and finetuning / evaluation of one model (TWA and the paper's baselines)."""

    def __init__(self, lexicon: dict[str, Any], corpus: pd.DataFrame, systems: dict[str, Any],
                 annotated: pd.DataFrame, p: TwaParams) -> None:
        self.p = p
        self.lex = Lexicon.from_json(lexicon)
        self.vocab = Vocab(self.lex.vocabulary())
        weights = p.loss.weights.model_dump()
        examples, wrong = build_examples(annotated, self.vocab, weights, p.loss.omission_spans)
        flipped, _ = build_examples(annotated, self.vocab, weights, _other_omission(p))
        refs = _reference_examples(corpus, self.vocab)
        self.data = {"ann": examples, "refs": refs, "ann+refs": examples + refs,
                     "ann_flip": flipped}
        self.base = _model(systems, "base")
        sets = {name: _split(corpus, name) for name in ("dev", "test", "test_hard")}
        self.sets = {k: v for k, v in sets.items() if v}
        diag_idx = [i for i, e in enumerate(examples) if e.spans][:500]
        self.diag_ex = [examples[i] for i in diag_idx]
        self.diag_wrong = [wrong[i] for i in diag_idx]
        self.ref_cache: dict = {}  # DPO reference log-probs under the base model, per output
        self.bar = None

    def decode_eval(self, model: Seq2Seq, name: str) -> tuple[dict[str, float], np.ndarray]:
        from icml25.pipelines.twa.seq2seq import greedy_translate
        from icml25.pipelines.twa.training import evaluate_outputs
        p, pairs = self.p, self.sets[name]
        hyps = greedy_translate(model, [self.vocab.encode(s) for s, _ in pairs], p.eval.batch,
                                max_new=p.model.max_len - 1)
        return evaluate_outputs([self.vocab.decode(h) for h in hyps], [r for _, r in pairs],
                                self.lex, p.annotator.max_errors)

    def dev_mqm(self, model: Seq2Seq) -> float:
        return self.decode_eval(model, "dev")[0]["oracle_mqm"]

    def evaluate(self, model: Seq2Seq) -> tuple[dict[str, float], np.ndarray]:
        from icml25.pipelines.twa.training import within_span_change
        out: dict[str, float] = {}
        seg = np.zeros(0)
        for name in self.sets:
            metrics, segs = self.decode_eval(model, name)
            out |= {f"{name}_{k}": v for k, v in metrics.items()}
            if name == "test":
                seg = segs
        out |= within_span_change(model, self.base, self.diag_ex, self.diag_wrong, self.vocab)
        return out, seg

    def train(self, name: str, kind: str, method: MethodConfig, lr: float, seed: int
              ) -> tuple[Seq2Seq, dict]:
        from icml25.pipelines.twa.training import finetune
        f = self.p.finetune
        model, info = finetune(self.base, method, self.data[kind], self.vocab, steps=f.steps,
                               batch=f.batch, lr=lr, warmup=f.warmup, seed=seed,
                               max_pairs_per_source=self.p.dpo.max_pairs_per_source,
                               progress=False, desc=name, dev_score=self.dev_mqm,
                               eval_every=f.eval_every, ref_cache=self.ref_cache)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(seed=seed, method=name, lr=lr)
        return model, info


def select_methods(lexicon: dict[str, Any], corpus: pd.DataFrame, systems: dict[str, Any],
                   annotated: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Tune every method on the first seed, upstream of the seed shards.

    Selection on dev oracle MQM only, as the paper tuned every method: on the first seed each
    variant's grid (lr x beta for DPO; lr for the others; lambda_UL is a variant of its own) is
    searched, and every run keeps its dev-best checkpoint (scored every ``eval_every`` steps).
    ``twa`` is the best lambda_UL variant, ``dpo`` the best SFT-weight variant. A variant with
    nothing to train on (DPO with zero preference pairs, Filter+SFT with no output under the
    threshold) is skipped with a logged warning and recorded in ``skipped``; its metrics are NaN
    and the claims that name it are ``inconclusive`` (:func:`merge_methods`). The selected
    runs are the first seed's models, so they are evaluated here (no seed is trained twice);
    :func:`run_method_seeds` reruns the other seeds at the selected hyperparameters.
    """
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.twa.training import NoTrainingData
    p = _params(params)
    set_threads(p.num_threads)
    m = _Methods(lexicon, corpus, systems, annotated, p)
    f = p.finetune
    families = _families(p)
    n_grid = sum(len(g) for _, _, g in families) * len(f.lr)
    n_abl = len(_ablations(p, p.loss.ul_scale[0]))
    m.bar = tqdm(total=n_grid + n_abl, desc="twa finetune methods (selection, first seed)",
                 disable=not p.progress)
    seed0 = p.seeds[0]
    seed_everything(seed0)
    chosen: dict[str, dict[str, Any]] = {}  # name -> kind, method, lr, label, dev, step
    models0: dict[str, Seq2Seq] = {}
    grid_log: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}  # variant -> why it was not trained
    for name, kind, grid in families:
        for label, method in grid:
            for lr in f.lr:
                if name in skipped:
                    m.bar.update(1)
                    continue
                try:
                    model, info = m.train(name, kind, method, lr, seed0)
                except NoTrainingData as err:
                    skipped[name] = str(err)
                    logger.warning("twa: variant %s skipped, its claims are inconclusive: %s",
                                   name, err)
                    m.bar.update(1)
                    continue
                grid_log.append({"variant": name, "hparams": label, "lr": lr,
                                 "dev_oracle_mqm": info["best_dev"],
                                 "best_step": info["best_step"], "dev_curve": info["dev_curve"]})
                if name not in chosen or info["best_dev"] < chosen[name]["dev"]:
                    chosen[name] = {"kind": kind, "method": method, "lr": lr, "hparams": label,
                                    "dev": info["best_dev"], "step": info["best_step"]}
                    models0[name] = model
    lam = min(p.loss.ul_scale, key=lambda v: chosen[f"twa_l{v:g}"]["dev"])
    dpo_ws = [v for v in p.dpo.sft_weight if f"dpo_sft{v:g}" in chosen]
    dpo_w = min(dpo_ws, key=lambda v: chosen[f"dpo_sft{v:g}"]["dev"]) if dpo_ws else None
    if dpo_w is None:
        skipped["dpo"] = next(v for k, v in skipped.items() if k.startswith("dpo_sft"))
    for name, kind, method, like in _ablations(p, lam):
        lr = chosen[like]["lr"]
        model, info = m.train(name, kind, method, lr, seed0)
        grid_log.append({"variant": name, "hparams": f"lr of {like}", "lr": lr,
                         "dev_oracle_mqm": info["best_dev"], "best_step": info["best_step"],
                         "dev_curve": info["dev_curve"]})
        chosen[name] = {"kind": kind, "method": method, "lr": lr, "hparams": f"lr of {like}",
                        "dev": info["best_dev"], "step": info["best_step"]}
        models0[name] = model
    m.bar.close()
    base_metrics, base_seg = m.evaluate(m.base)
    seed_everything(seed0)
    first = {name: m.evaluate(models0.pop(name)) for name in chosen}
    return {"chosen": chosen, "ul_scale": lam, "sft_weight": dpo_w, "grid": grid_log,
            "skipped": skipped,
            "base": (base_metrics, base_seg), "seeds": {seed0: first},
            "base_info": systems["metadata"]["base"], "others": systems["metadata"]["others"]}


def run_method_seeds(lexicon: dict[str, Any], corpus: pd.DataFrame, systems: dict[str, Any],
                     annotated: pd.DataFrame, selection: dict[str, Any],
                     params: dict[str, Any], shard: int = 0, n_shards: int = 1
                     ) -> dict[int, dict[str, Any]]:
    """Every selected configuration finetuned and evaluated for the seeds of shard ``shard`` of
    ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`):
    ``{seed: {variant: (metrics, test segments)}}``. The first seed's runs are the selection's
    (:func:`select_methods`); every other seed starts from :func:`seed_everything` and trains
    the variants in selection order, as one loop over the seeds would; a seed past the first
    ``ablation_seeds`` trains only the variants a claim names (:func:`seed_variants`). Seeds
    vary the finetuning (batch order, dropout); data, base model and the other systems come
    from ``twa.seed``."""
    from icml25.core.device import seed_everything, set_threads
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    first = selection["seeds"]
    out: dict[int, dict[str, Any]] = {s: first[s] for s in seeds if s in first}
    todo = [s for s in seeds if s not in first]
    if not todo:
        return out
    set_threads(p.num_threads)
    m = _Methods(lexicon, corpus, systems, annotated, p)
    chosen = selection["chosen"]
    plan = {seed: seed_variants(p, selection, seed) for seed in todo}
    m.bar = tqdm(total=sum(len(v) for v in plan.values()),
                 desc=f"twa finetune methods (seed shard {shard})", disable=not p.progress)
    for seed in todo:
        seed_everything(seed)
        results = {}
        for name in plan[seed]:
            cfg = chosen[name]
            model, _ = m.train(name, cfg["kind"], cfg["method"], cfg["lr"], seed)
            results[name] = m.evaluate(model)
        out[seed] = results
    m.bar.close()
    return {s: out[s] for s in seeds}


def claim_variants(p: TwaParams, selection: dict[str, Any]) -> list[str]:
    """The trained variants the claims compare, in selection order: every claim's method and
    baseline, ``twa`` and ``dpo`` resolved to their selected variants."""
    alias = {"twa": f"twa_l{selection['ul_scale']:g}"}
    if selection["sft_weight"] is not None:
        alias["dpo"] = f"dpo_sft{selection['sft_weight']:g}"
    named = {alias.get(v, v) for c in p.claims for v in (c.method, c.baseline) if v}
    named |= set(alias.values())  # every seed's twa and dpo rows
    return [v for v in selection["chosen"] if v in named]


def seed_variants(p: TwaParams, selection: dict[str, Any], seed: int) -> list[str]:
    """What seed ``seed`` trains: every selected variant on the first ``ablation_seeds`` seeds
    (all seeds when it is None), only the claims' variants on the others."""
    k = len(p.seeds) if p.ablation_seeds is None else p.ablation_seeds
    if seed in p.seeds[:k]:
        return list(selection["chosen"])
    return claim_variants(p, selection)


def merge_methods(selection: dict[str, Any], params: dict[str, Any],
                  *shard_results: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The method study's results from the selection and every seed shard: per variant the
    per-seed metrics in seed-list order (shard ``k`` of ``n`` holds ``seeds[k::n]``,
    :func:`icml25.core.sweep.interleave_shards`), the paired permutation p-value against TWA,
    the test segments, the selected hyperparameters and the selection grid."""
    from icml25.pipelines.twa.training import paired_permutation_p
    p = _params(params)
    per_seed = interleave_shards([list(r.items()) for r in shard_results])
    found = [int(seed) for seed, _ in per_seed]
    if found != list(p.seeds):
        raise ValueError(f"twa: the seed shards hold seeds {found}, params:twa.seeds is "
                         f"{p.seeds}; re-run the seed shards")
    chosen = selection["chosen"]
    lam, dpo_w = selection["ul_scale"], selection["sft_weight"]
    skipped: dict[str, str] = dict(selection.get("skipped", {}))
    variants: dict[str, dict[str, list[float]]] = {}
    segments: dict[str, list[list[float]]] = {}
    seeds_of: dict[str, list[int]] = {}
    for seed, runs in per_seed:
        expected = seed_variants(p, selection, int(seed))
        if list(runs) != expected:
            raise ValueError(f"twa: seed {seed}'s runs are {list(runs)}, the selection and "
                             f"twa.ablation_seeds ask for {expected}; re-run the seed shards")
        results = {"base": selection["base"], **runs}
        results["twa"] = results[f"twa_l{lam:g}"]
        if dpo_w is not None:
            results["dpo"] = results[f"dpo_sft{dpo_w:g}"]
        twa_metrics, twa_seg = results["twa"]
        for name in skipped:  # not trained: NaN metrics, so its claims are inconclusive
            results[name] = ({k: float("nan") for k in twa_metrics},
                             np.full(len(twa_seg), np.nan))
        for name, (metrics, seg) in results.items():
            store = variants.setdefault(name, {})
            for k, v in metrics.items():
                store.setdefault(k, []).append(float(v))
            store.setdefault("test_p_vs_twa", []).append(
                float("nan") if name in skipped
                else paired_permutation_p(twa_seg, seg, p.eval.n_perm, seed))
            segments.setdefault(name, []).append(np.asarray(seg).tolist())
            seeds_of.setdefault(name, []).append(int(seed))
    selected = {name: {"lr": c["lr"], "hparams": c["hparams"], "dev_oracle_mqm": c["dev"],
                       "best_step": c["step"]} for name, c in chosen.items()}
    selected |= {"twa": {"ul_scale": lam, "variant": f"twa_l{lam:g}"},
                 "dpo": ({"sft_weight": dpo_w, "variant": f"dpo_sft{dpo_w:g}"}
                         if dpo_w is not None else {"skipped": skipped["dpo"]})}
    return {"variants": variants, "segments": segments, "seeds_of": seeds_of,
            "selected": selected, "skipped": skipped, "grid": selection["grid"],
            "base_info": selection["base_info"], "others": selection["others"]}


# ------------------------------------------------------------------------------ reporting
ROLES = {"twa": "method", "base": "baseline", "sft_all": "baseline", "filter_sft": "baseline",
         "dpo": "baseline", "sft_ref": "baseline"}


def _data_stats(annotated: pd.DataFrame) -> dict[str, Any]:
    """Share of error-free outputs per system and where the first error sits."""
    first_rel, empty_prefix = [], 0
    for hyp, spans in zip(annotated["hyp"], annotated["spans"], strict=True):
        sp = json.loads(spans)
        if sp:
            first = min(s for s, *_ in sp)
            first_rel.append(first / (len(_toks(hyp)) + 1))
            empty_prefix += first == 0
    n_err = max(1, len(first_rel))
    return {
        "error_free_share": float((annotated["mqm"] == 0).mean()),
        "error_free_share_exact": float((annotated["exact_mqm"] == 0).mean()),
        "error_free_by_system": annotated.groupby("system")["exact_mqm"].apply(
            lambda s: float((s == 0).mean())).to_dict(),
        "mean_mqm_by_system": annotated.groupby("system")["exact_mqm"].mean().to_dict(),
        "first_error_relative_position_hist": np.histogram(
            first_rel, bins=10, range=(0, 1))[0].tolist(),
        "empty_ce_prefix_share_of_erroneous": empty_prefix / n_err,
        "n_outputs": len(annotated),
    }


# metrics whose per-sentence values the results carry (``results["segments"]``): a claim with
# ``unit: sentence`` on one of these pairs the variants over the test sentences
SENTENCE_METRICS = {"test_oracle_mqm"}


def claim_metrics(results: dict[str, Any], claims: list[dict[str, Any]]) -> dict[str, Any]:
    """The metrics the claims are judged on: the per-seed metrics, except that a metric a claim
    pairs over test sentences (``unit: sentence``) becomes ``{sentence: [per-seed values]}``
    from the per-segment test scores (whose mean over sentences is that seed's metric)."""
    by_sentence = set()
    for c in claims:
        if c.get("unit") is None:
            continue
        if c["unit"] != "sentence" or c["metric"] not in SENTENCE_METRICS:
            raise ValueError(f"twa: claim {c['claim']!r} pairs {c['metric']!r} over "
                             f"{c['unit']!r}; only unit 'sentence' on {sorted(SENTENCE_METRICS)}")
        by_sentence.add(c["metric"])
    plain = [c["metric"] for c in claims if c.get("unit") is None]
    if by_sentence & set(plain):
        raise ValueError(f"twa: {sorted(by_sentence & set(plain))} judged both per sentence and "
                         "per seed; give every claim on it unit: sentence")
    out: dict[str, Any] = {}
    for variant, values in results["variants"].items():
        out[variant] = dict(values)
        if by_sentence:
            seg = np.asarray(results["segments"][variant], dtype=float)  # seeds x sentences
            per = {f"s{i:04d}": seg[:, i].tolist() for i in range(seg.shape[1])}
            for metric in by_sentence:
                out[variant][metric] = per
    return out


def judge_claims(results: dict[str, Any], annotated: pd.DataFrame, params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float = 0.90
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own metrics; MLflow child runs.

    Oracle MQM claims with ``unit: sentence`` pair the variants over the test sentences (each
    sentence's MQM averaged over the seeds); every other claim pairs over the seeds.
    """
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    metrics = results["variants"]
    specs = [c.model_dump() for c in p.claims]
    claims = claims_report(PIPELINE, specs, claim_metrics(results, specs), run_info,
                           p.seeds, title="TWA: finetuning MT with span-level error annotations",
                           figures=["figures/test_oracle_mqm.png", "figures/within_span.png"],
                           confidence=confidence,
                           seeds_of=results.get("seeds_of") or {v: p.seeds for v in metrics})
    skipped = results.get("skipped", {})
    for c in claims["claims"]:
        why = [f"{v} was not trained ({skipped[v]})" for v in (c["method"], c["baseline"])
               if v in skipped]
        if why:  # NaN metrics: the engine already judged it inconclusive
            c["reason"] = "; ".join(why)
    extra = {"data": _data_stats(annotated), "selected": results["selected"],
             "skipped": skipped, "within_span": within_span_summary(metrics),
             "seeds_of": results.get("seeds_of", {v: list(p.seeds) for v in metrics}),
             "base_model": results["base_info"], "other_systems": results["others"],
             "mqm_weights": MQM_WEIGHTS}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra=extra)
    if mlflow.active_run() is not None:
        roles = {v: ROLES.get(v, "ablation") for v in metrics}
        means = seed_means(metrics)
        log_variants(PIPELINE, means, roles)
        log_claim_counts(claims)
    return report, claims


# the within-span diagnostic is reported for these variants (those that ran)
WITHIN_SPAN_VARIANTS = ("twa", "twa_token_ul", "twa_l1", "twa_token_ul_l1", "twa_offtraj",
                        "twa_seq", "sft_all", "filter_sft", "dpo")


def within_span_summary(variants: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """The within-span diagnostic beside the verdicts: per variant, the mean (and std, and the
    per-seed values) over seeds of the change of log p, against the base model, of the truly
    wrong and the truly correct tokens inside the noisy training spans, their difference
    (wrong - correct: negative when the variant singles out the wrong tokens, the point of
    span-level UL), and whether the wrong tokens went down at all."""
    out: dict[str, Any] = {}
    for v in WITHIN_SPAN_VARIANTS:
        if v not in variants or "inspan_wrong_dlogp" not in variants[v]:
            continue
        wrong = np.asarray(variants[v]["inspan_wrong_dlogp"], float)
        right = np.asarray(variants[v]["inspan_correct_dlogp"], float)
        if np.isnan(wrong).all():
            continue
        gap = wrong - right
        out[v] = {"wrong_dlogp_mean": float(np.mean(wrong)),
                  "wrong_dlogp_std": float(np.std(wrong, ddof=1)) if wrong.size > 1 else 0.0,
                  "correct_dlogp_mean": float(np.mean(right)),
                  "correct_dlogp_std": float(np.std(right, ddof=1)) if right.size > 1 else 0.0,
                  "wrong_minus_correct_mean": float(np.mean(gap)),
                  "wrong_minus_correct_per_seed": gap.tolist(),
                  "wrong_pushed_down": bool(np.mean(wrong) < 0),
                  "wrong_pushed_down_seeds": int(np.sum(wrong < 0)),
                  "n_seeds": int(wrong.size)}
    return out


def plot_results(results: dict[str, Any]) -> dict[str, Any]:
    """Test oracle MQM per variant (mean and std over seeds) and the within-span diagnostic."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = {v: m for v, m in results["variants"].items()
                if not np.isnan(m["test_oracle_mqm"]).all()}  # skipped variants: no bar
    names = sorted(variants, key=lambda v: np.mean(variants[v]["test_oracle_mqm"]))
    fig1, ax = plt.subplots(figsize=(8, 3.5))
    means = [np.mean(variants[v]["test_oracle_mqm"]) for v in names]
    stds = [np.std(variants[v]["test_oracle_mqm"]) for v in names]
    colors = ["tab:red" if v == "twa" else "tab:gray" for v in names]
    ax.bar(names, means, yerr=stds, color=colors)
    ax.set_ylabel("test oracle MQM (lower is better)")
    ax.tick_params(axis="x", rotation=60)
    fig1.tight_layout()
    fig2, ax2 = plt.subplots(figsize=(6, 3.5))
    show = [v for v in ("twa", "twa_token_ul", "twa_l1", "twa_token_ul_l1", "sft_all")
            if v in variants]
    x = np.arange(len(show))
    for k, key in enumerate(("inspan_wrong_dlogp", "inspan_correct_dlogp")):
        ax2.bar(x + 0.4 * k, [np.nanmean(variants[v][key]) for v in show], width=0.4,
                label=key.replace("inspan_", "").replace("_dlogp", " tokens"))
    ax2.set_xticks(x + 0.2, show, rotation=30)
    ax2.set_ylabel("mean change of log p in training spans")
    ax2.legend()
    fig2.tight_layout()
    return {"test_oracle_mqm.png": fig1, "within_span.png": fig2}


# ------------------------------------------------------------------------- real-data branch
def run_real(params: dict[str, Any]) -> dict[str, Any]:
    """The real-data branch (``docs/papers/twa.md``): local MQM TSV file(s) + a local HF seq2seq
    checkpoint; every configured method finetuned from it and scored on held-out segments.

    Off (``{"enabled": false}``) unless ``twa.real.mqm_tsv_paths`` is set. Run it alone with
    ``kedro run --pipeline=twa --tags=real``.
    """
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.core.tracking import log_metrics
    from icml25.pipelines.twa.hf_seq2seq import load_seq2seq, merge_rater_records, run_real_methods
    from icml25.pipelines.twa.mqm_tsv import read_mqm_tsv
    from icml25.pipelines.twa.training import MethodConfig

    p = _params(params)
    r = p.real
    if not r.enabled:
        return {"enabled": False}
    set_threads(p.num_threads)
    seed_everything(p.seed)
    records = []
    for path in r.mqm_tsv_paths:
        try:
            records += read_mqm_tsv(Path(path).read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
    if not records:
        raise ValueError(f"twa.real.mqm_tsv_paths {r.mqm_tsv_paths}: no annotated outputs")
    records = merge_rater_records(records, r.merge_raters)
    model, tokenizer = load_seq2seq(r.hf_model_path, str(resolve_device(r.device)))
    eps = p.loss.clamp_eps
    lam = r.ul_scale
    catalog = {
        "sft_all": MethodConfig("sft_all"),
        "filter_sft": MethodConfig("filter_sft", filter_threshold=p.finetune.filter_threshold),
        "dpo": MethodConfig("dpo", beta=r.dpo_beta, sft_weight=r.dpo_sft_weight),
        "twa": MethodConfig("twa", lam, clamp_eps=eps),
        "twa_token_ul": MethodConfig("twa", lam, "token", clamp_eps=eps),
        "twa_offtraj": MethodConfig("twa", lam, use_off_trajectory=True, clamp_eps=eps),
        "twa_seq": MethodConfig("twa_seq", ul_scale=lam, clamp_eps=eps),
    }
    out = run_real_methods(
        model, tokenizer, records, {m: catalog[m] for m in r.methods},
        weights=p.loss.weights.model_dump(), heldout_fraction=r.heldout_fraction,
        steps=r.steps, batch=r.batch, lr=r.lr, warmup=r.warmup, seed=p.seed,
        max_pairs_per_source=p.dpo.max_pairs_per_source,
        max_source_tokens=r.max_source_tokens, max_target_tokens=r.max_target_tokens,
        save_dir=r.save_dir, progress=p.progress)
    out |= {"mqm_tsv_paths": list(r.mqm_tsv_paths), "hf_model_path": r.hf_model_path,
            "merge_raters": r.merge_raters}
    if mlflow.active_run() is not None:
        log_metrics({f"real_{v}_{k}": float(x) for v, m in out["variants"].items()
                     for k, x in m.items() if isinstance(x, (int, float))})
    return out
