"""Kedro nodes of the frugal pipeline: thin wrappers around the method modules.

Each node validates ``params:frugal`` into :class:`FrugalParams`, does one step of the
pipeline and returns plain text, arrays, dicts, tables or figures.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_shards, shard_seeds
from icml25.pipelines.frugal import corpus
from icml25.pipelines.frugal.params import VARIANTS, FrugalParams

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

logger = logging.getLogger(__name__)
PIPELINE = "frugal"

#: Metrics every variant reports (the MLflow compare view lines them up by these names); the
#: perplexities are on the test split, which no choice of the pipeline has seen.
METRICS = (
    "test_ppl", "test_nll", "state_floats", "state_floats_formula", "state_floats_rho_formula",
    "state_floats_formula_abs_error", "state_floats_rho_abs_error", "state_bytes",
    "persistent_memory_bytes", "cuda_peak_memory_bytes", "optimizer_step_ms", "train_step_ms",
    "update_rank_fraction", "train_seconds",
)


def _params(params: dict[str, Any]) -> FrugalParams:
    return validate_parameters(FrugalParams, params, PIPELINE)


# ------------------------------------------------------------------------------------ data
def build_corpus(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The offline English corpus (``frugal.data.source``) as one text, plus its provenance."""
    p = _params(params)
    d = p.data
    extra: dict[str, Any] = {}
    if d.source == "stdlib_docs":
        docs = corpus.stdlib_docstrings(min_chars=d.min_chars, max_files=d.max_files,
                                        progress=p.progress)
        n_docstrings = len(docs)
        docs += corpus.pydoc_topics()
        extra["n_docstrings"] = n_docstrings
    elif d.source == "python_doc_deb":
        docs = corpus.deb_doc_sources(d.deb_sources)
        if d.include_stdlib:
            docs += corpus.stdlib_docstrings(min_chars=d.min_chars, max_files=d.max_files,
                                             progress=p.progress)
    else:
        m = d.markov
        docs, entropy = corpus.synthetic_markov_docs(m.vocab, m.alpha, m.n_docs, m.doc_len,
                                                     m.seed)
        extra["entropy_rate_nats"] = entropy
        extra["optimal_ppl"] = math.exp(entropy)
    text = corpus.join_documents(docs)
    meta = corpus.corpus_meta(text, d.source, len(corpus.split_documents(text)), **extra)
    logger.info("frugal corpus %s: %d documents, %d chars, sha256 %s (Python %s)", d.source,
                meta["n_docs"], meta["n_chars"], meta["sha256"][:12], meta["python_version"])
    return text, meta


def split_corpus(text: str, params: dict[str, Any]) -> tuple[str, str, str, dict[str, Any]]:
    """Train / validation / test texts of the deduplicated documents, and the split's record.

    Repeated documents are removed first (:func:`corpus.deduplicate`), so no text is in two
    splits; validation (``frugal.data.val_frac``) chooses learning rates, test
    (``frugal.data.test_frac``) is what the results report.
    """
    p = _params(params)
    docs = corpus.split_documents(text)
    unique, removed = corpus.deduplicate(docs)
    train, val, test = corpus.train_val_test_split(unique, p.data.val_frac, p.data.test_frac,
                                                   p.data.split_seed)
    texts = [corpus.join_documents(part) for part in (train, val, test)]
    meta = {"n_docs": len(docs), "n_duplicates_removed": removed, "n_unique": len(unique),
            "n_train": len(train), "n_val": len(val), "n_test": len(test),
            "sha256_deduplicated": corpus.text_sha256(corpus.join_documents(unique)),
            **{f"sha256_{name}": corpus.text_sha256(t)
               for name, t in zip(("train", "val", "test"), texts, strict=True)}}
    logger.info("frugal split: %d documents, %d duplicates removed, %d / %d / %d train / val / "
                "test", len(docs), removed, len(train), len(val), len(test))
    return *texts, meta


def fit_tokenizer(train_text: str, params: dict[str, Any]) -> str:
    """Byte-level BPE (or the character vocabulary of the Markov corpus) on the train split."""
    p = _params(params)
    return corpus.train_tokenizer(corpus.split_documents(train_text), p.tokenizer.vocab,
                                  p.tokenizer.kind)


def tokenize(tokenizer_json: str, train_text: str, val_text: str,
             test_text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous token streams (``<eos>`` after every document) of the three splits."""
    streams = tuple(corpus.encode_documents(tokenizer_json, corpus.split_documents(t))
                    for t in (train_text, val_text, test_text))
    logger.info("frugal tokens: %d train, %d validation, %d test (vocab %d)",
                *map(len, streams), corpus.vocab_size_of(tokenizer_json))
    return streams


# ---------------------------------------------------------------------- learning rates
def select_lr(train_ids: np.ndarray, val_ids: np.ndarray, tokenizer_json: str,
              params: dict[str, Any], variant: str) -> dict[str, Any]:
    """Train every setting of ``frugal.optimizers.<variant>.lr_grid`` on the selection seeds and
    rank them by the mean final perplexity on the *validation* split (never the test split).

    Returns ``{variant, lr_from, grid: [row per setting and seed], chosen: {lr, proj_lr_scale,
    inactive_lr_scale}}``; without a grid ``chosen`` is the configured setting and nothing is
    trained; with ``lr_from`` the choice is left to :func:`choose_settings`.
    """
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.frugal.pretraining import pretrain
    p = _params(params)
    cfg = p.optimizers[variant]
    out: dict[str, Any] = {"variant": variant, "lr_from": cfg.lr_from, "grid": [],
                           "chosen": _setting(cfg)}
    if cfg.lr_from is not None or not cfg.lr_grid:
        return out
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    vocab = corpus.vocab_size_of(tokenizer_json)
    means = []
    for point in cfg.lr_grid:
        trial = cfg.with_point(point)
        ppls = []
        for seed in p.selection.seeds:
            seed_everything(seed)
            _, rec = pretrain(train_ids, val_ids, vocab, p.model, p.train, trial, seed, device,
                              progress=p.progress, split="val",
                              desc=f"{variant} select lr {trial.lr:g} seed {seed}")
            ppls.append(rec["val_ppl"])
            out["grid"].append({**_setting(trial), "seed": seed, "val_ppl": rec["val_ppl"]})
            logger.info("frugal %s selection: lr %g (scales %g, %g) seed %d: val ppl %.3f",
                        variant, trial.lr, trial.proj_lr_scale, trial.inactive_lr_scale, seed,
                        rec["val_ppl"])
        finite = [v if math.isfinite(v) else math.inf for v in ppls]
        means.append(float(np.mean(finite)))
    best = int(np.argmin(means))  # first of equals; a diverged setting (inf) never wins
    out["chosen"] = _setting(cfg.with_point(cfg.lr_grid[best]))
    return out


def _setting(cfg) -> dict[str, float]:
    return {"lr": cfg.lr, "proj_lr_scale": cfg.proj_lr_scale,
            "inactive_lr_scale": cfg.inactive_lr_scale}


def choose_settings(params: dict[str, Any], *selections: dict[str, Any]) -> dict[str, Any]:
    """Every variant's optimiser configuration at its selected setting (``lr_from`` resolved),
    with the selection's grid: ``{variant: {optimizer, selected_by, grid}}``."""
    return _settings(_params(params), selections, log=True)


def _settings(p: FrugalParams, selections, log: bool = False) -> dict[str, Any]:
    by_variant = {sel["variant"]: sel for sel in selections}
    missing = sorted(set(p.optimizers) - set(by_variant))
    if missing:
        raise ValueError(f"frugal: no learning-rate selection for {missing}")
    settings = {}
    for variant, cfg in p.optimizers.items():
        sel = by_variant[variant]
        source = by_variant[cfg.lr_from] if cfg.lr_from else sel
        chosen = cfg.model_copy(update=source["chosen"])
        selected_by = (f"lr_from {cfg.lr_from}" if cfg.lr_from else
                       "validation" if cfg.lr_grid else "configured")
        settings[variant] = {"optimizer": chosen.model_dump(), "selected_by": selected_by,
                             "grid": source["grid"]}
        if log:
            logger.info("frugal %s: lr %g, proj_lr_scale %g, inactive_lr_scale %g (%s)",
                        variant, chosen.lr, chosen.proj_lr_scale, chosen.inactive_lr_scale,
                        selected_by)
    return settings


# -------------------------------------------------------------------------------- training
def pretrain_variant(train_ids: np.ndarray, test_ids: np.ndarray, tokenizer_json: str,
                     params: dict[str, Any], *selections: dict[str, Any], variant: str,
                     shard: int = 0, n_shards: int = 1) -> tuple[dict[str, Any], dict]:
    """Pre-train the model with one optimiser configuration, at the setting selected on the
    validation split (``selections``: every variant's :func:`select_lr`, since an ablation may
    take another variant's setting; :func:`choose_settings`), once per seed of shard ``shard``
    of ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`), and
    measure it on the test split.

    Returns the measurements ``{variant, shard, n_shards, runs: [record per seed]}`` and the
    trained models ``{seed_<s>: {state_dict, metadata}}``; both hold no seed when the shard has
    none. Each seed's run depends on that seed alone, so the shards may run in any order.
    """
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.frugal.params import OptimizerParams
    from icml25.pipelines.frugal.pretraining import pretrain
    p = _params(params)
    settings = _settings(p, selections)
    cfg = OptimizerParams.model_validate(settings[variant]["optimizer"])
    seeds = shard_seeds(p.seeds_of(variant), shard, n_shards)
    runs, models = [], {}
    if seeds:
        set_threads(p.num_threads)
        device = resolve_device(p.device)
        vocab = corpus.vocab_size_of(tokenizer_json)
    for seed in seeds:
        seed_everything(seed)
        model, record = pretrain(train_ids, test_ids, vocab, p.model, p.train, cfg, seed,
                                 device, progress=p.progress, desc=f"{variant} seed {seed}",
                                 split="test")
        logger.info("frugal %s seed %d: test ppl %.3f, state floats %d, %.1f s", variant, seed,
                    record["test_ppl"], record["state_floats"], record["train_seconds"])
        runs.append({"seed": seed, **record})
        models[f"seed_{seed}"] = {
            "state_dict": model.state_dict(),
            "metadata": {"variant": variant, "seed": seed, "model_config":
                         model.config.to_dict(), "optimizer": cfg.model_dump(),
                         "test_ppl": record["test_ppl"]},
        }
    return {"variant": variant, "role": cfg.role, "optimizer": cfg.model_dump(),
            "shard": shard, "n_shards": n_shards, "runs": runs}, models


def _merge_shards(shard_results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per variant, in the order the variants first appear, with the runs of its
    seed shards back in seed-list order: shard ``k`` of ``n`` holds ``seeds[k::n]``, so run ``i``
    of the variant is run ``i // n`` of shard ``i % n``."""
    by_variant: dict[str, dict[int, dict[str, Any]]] = {}
    for res in shard_results:
        shards = by_variant.setdefault(res["variant"], {})
        if res["shard"] in shards:
            raise ValueError(f"frugal: seed shard {res['shard']} of {res['variant']} given twice")
        shards[res["shard"]] = res
    merged = []
    for variant, shards in by_variant.items():
        n = shards[min(shards)]["n_shards"]
        if sorted(shards) != list(range(n)) or {r["n_shards"] for r in shards.values()} != {n}:
            raise ValueError(f"frugal: {variant} needs seed shards 0..{n - 1} of {n}, got "
                             f"{sorted(shards)}")
        runs = interleave_shards([shards[k]["runs"] for k in range(n)])
        first = shards[0]
        merged.append({"variant": variant, "role": first["role"],
                       "optimizer": first["optimizer"], "runs": runs})
    return merged


# ------------------------------------------------------------------------------ evaluation
def _per_seed_metrics(results: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    metrics: dict[str, dict[str, list[float]]] = {}
    for res in results:
        metrics[res["variant"]] = {
            m: [math.nan if r[m] is None else float(r[m]) for r in res["runs"]] for m in METRICS}
    # perplexity relative to full AdamW's on the same seed (the paper: FRUGAL "close to" AdamW);
    # NaN for a seed AdamW did not run
    adamw = next((res for res in results if res["variant"] == "adamw"), None)
    ref = ({r["seed"]: math.nan if r["test_ppl"] is None else float(r["test_ppl"])
            for r in adamw["runs"]} if adamw else {})
    for res in results:
        metrics[res["variant"]]["test_ppl_over_adamw"] = [
            v / ref.get(r["seed"], math.nan)
            for r, v in zip(res["runs"], metrics[res["variant"]]["test_ppl"], strict=True)]
    return metrics


def results_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per variant: seed means (and std) of the headline metrics."""
    rows = []
    for res in results:
        runs = res["runs"]
        ppl = np.array([r["test_ppl"] for r in runs], dtype=float)
        opt = res["optimizer"]
        rows.append({
            "variant": res["variant"], "role": res["role"], "kind": opt["kind"],
            "projector": opt["projector"] if opt["kind"] in ("frugal", "galore") else "",
            "density": opt["density"] if opt["kind"] in ("frugal", "galore", "badam") else 1.0,
            "lr": opt["lr"],
            "proj_lr": opt["lr"] * opt["proj_lr_scale"] if opt["kind"] in ("frugal", "galore")
            else opt["lr"],
            "n_seeds": len(runs),
            "test_ppl_mean": float(ppl.mean()),
            "test_ppl_std": float(ppl.std(ddof=1)) if len(ppl) > 1 else 0.0,
            "state_floats": float(np.mean([r["state_floats"] for r in runs])),
            "state_MB": float(np.mean([r["state_bytes"] for r in runs])) / 2**20,
            "optimizer_step_ms": float(np.median([r["optimizer_step_ms"] for r in runs])),
            "train_step_ms": float(np.median([r["train_step_ms"] for r in runs])),
            "update_rank_fraction": float(np.nanmean([r["update_rank_fraction"]
                                                      if r["update_rank_fraction"] is not None
                                                      else math.nan for r in runs])),
        })
    return pd.DataFrame(rows)


def compare(corpus_meta: dict[str, Any], split_meta: dict[str, Any], params: dict[str, Any],
            run_info: dict[str, Any], confidence: float,
            *results_and_selections: dict[str, Any]
            ) -> tuple[dict, dict, pd.DataFrame, dict[str, Any]]:
    """metrics.json, claims.json (paired by seed, one-sided bounds at ``confidence``), the
    results table and figures from every variant's seed shards (test split); the corpus hashes,
    the split and the learning-rate selection (validation split) go into metrics.json and
    MLflow."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    selections = [r for r in results_and_selections if "chosen" in r]
    settings = _settings(p, selections, log=True)
    results = _merge_shards([r for r in results_and_selections if "chosen" not in r])
    metrics = _per_seed_metrics(results)
    table = results_table(results)
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], metrics, run_info,
                           p.seeds, title="FRUGAL (ICML 2025)",
                           figures=["figures/test_ppl_curves.png",
                                    "figures/ppl_vs_state_memory.png"],
                           confidence=confidence,
                           seeds_of={res["variant"]: [r["seed"] for r in res["runs"]]
                                     for res in results})
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra={
        "corpus": {**corpus_meta, "split": split_meta},
        "curves": {res["variant"]: {str(r["seed"]): r["curve"] for r in res["runs"]}
                   for res in results},
        "lr": {res["variant"]: res["optimizer"]["lr"] for res in results},
        "lr_selection": {"split": "val", "seeds": list(p.selection.seeds), "variants": {
            v: {"selected_by": s["selected_by"],
                "chosen": {k: s["optimizer"][k] for k in ("lr", "proj_lr_scale",
                                                         "inactive_lr_scale")},
                "grid": s["grid"]} for v, s in settings.items()}},
    })
    figures = _figures(results, table)
    if mlflow.active_run() is not None:
        _log_corpus(corpus_meta, split_meta)
        means = seed_means(metrics)
        roles = {res["variant"]: res["role"] for res in results}
        run_params = {res["variant"]: {**res["optimizer"],
                                       "selected_by": settings[res["variant"]]["selected_by"]}
                      for res in results}
        run_ids = log_variants(PIPELINE, means, roles, params_by_variant=run_params)
        log_claim_counts(claims)
        _log_curves(results, run_ids)
    return report, claims, table, figures


def _log_corpus(corpus_meta: dict[str, Any], split_meta: dict[str, Any]) -> None:
    """The corpus's provenance on the pipeline's MLflow run: the SHA-256 of the corpus text and
    of the deduplicated documents and each split, the Python version that built it (the
    stdlib corpus changes across patch releases) and the duplicates removed."""
    mlflow.set_tags({
        "frugal.corpus.source": corpus_meta["source"],
        "frugal.corpus.python_version": corpus_meta["python_version"],
        "frugal.corpus.sha256": corpus_meta["sha256"],
        **{f"frugal.corpus.{k}": v for k, v in split_meta.items() if k.startswith("sha256_")},
    })
    mlflow.log_metrics({f"frugal.corpus.{k}": float(split_meta[k])
                        for k in ("n_docs", "n_duplicates_removed", "n_train", "n_val",
                                  "n_test")})


def _log_curves(results: list[dict[str, Any]], run_ids: dict[str, str]) -> None:
    """Training curves into each variant's child run, one series per seed
    (``curve/test_ppl/seed_<s>``, ``curve/train_loss/seed_<s>`` by step), in one batch each."""
    from mlflow.entities import Metric

    client = mlflow.MlflowClient()
    now = int(time.time() * 1000)
    for res in results:
        batch = []
        for run in res["runs"]:
            for point in run["curve"]:
                for key in ("test_ppl", "train_loss"):
                    value = point[key]
                    if value is not None and math.isfinite(value):
                        batch.append(Metric(f"curve/{key}/seed_{run['seed']}", float(value),
                                            now, int(point["step"])))
        for start in range(0, len(batch), 1000):  # MLflow's batch limit
            client.log_batch(run_ids[res["variant"]], metrics=batch[start:start + 1000])


def _figures(results: list[dict[str, Any]], table: pd.DataFrame) -> dict[str, Any]:
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for res in results:
        curves = [[pt["test_ppl"] for pt in r["curve"] if pt["test_ppl"] is not None
                   and not math.isnan(pt["test_ppl"])] for r in res["runs"]]
        steps = [pt["step"] for pt in res["runs"][0]["curve"]
                 if pt["test_ppl"] is not None and not math.isnan(pt["test_ppl"])]
        n = min(len(c) for c in curves)
        if n == 0:
            continue
        mean = np.mean([c[:n] for c in curves], axis=0)
        ax.plot(steps[:n], mean, marker="o", ms=3, label=res["variant"])
    ax.set_xlabel("step")
    ax.set_ylabel("test perplexity (seed mean)")
    ax.set_yscale("log")
    ax.set_title("frugal — test perplexity")
    ax.legend(fontsize=7)
    fig.tight_layout()

    fig2, ax2 = plt.subplots(figsize=(6.4, 4.0))
    for _, row in table.iterrows():
        ax2.errorbar(row["state_floats"], row["test_ppl_mean"], yerr=row["test_ppl_std"],
                     fmt="o", capsize=3)
        ax2.annotate(row["variant"], (row["state_floats"], row["test_ppl_mean"]), fontsize=7,
                     xytext=(4, 4), textcoords="offset points")
    ax2.set_xlabel("optimiser state (floats, counted)")
    ax2.set_ylabel("final test perplexity")
    ax2.set_title("frugal — perplexity vs optimiser memory")
    fig2.tight_layout()
    return {"test_ppl_curves.png": fig, "ppl_vs_state_memory.png": fig2}


__all__ = ["VARIANTS", "build_corpus", "choose_settings", "compare", "fit_tokenizer",
           "pretrain_variant", "select_lr", "split_corpus", "tokenize"]
