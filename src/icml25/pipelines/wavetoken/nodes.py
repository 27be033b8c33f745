"""Kedro nodes of the wavetoken pipeline: thin wrappers around the method modules.

Each node validates its parameter tree (``params:wavetoken``) into :class:`WavetokenParams`,
does one step of the pipeline and returns plain tables, dicts or state dicts.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import shard_seeds
from icml25.pipelines.wavetoken.params import ABLATIONS, WavetokenParams
from icml25.pipelines.wavetoken.stress_sets import make_stress_sets
from icml25.pipelines.wavetoken.tsmixup import tsmixup

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
fm = lazy_module("icml25.pipelines.wavetoken.metrics")

logger = logging.getLogger(__name__)
PIPELINE = "wavetoken"


def _params(params: dict[str, Any]) -> WavetokenParams:
    return validate_parameters(WavetokenParams, params, PIPELINE)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict itself."""
    return partition() if callable(partition) else partition


# ------------------------------------------------------------------------------------ data
def load_real_series(params: dict[str, Any],
                     user_series: dict[str, Any] | None = None) -> pd.DataFrame:
    """The real series, one row per point: the shipped datasets (docs/papers/wavetoken.md,
    "Data") and any a user names (:mod:`icml25.pipelines.wavetoken.user_data`: a file in
    ``wavetoken.user_series`` or a loader in ``wavetoken.data.datasets``)."""
    from icml25.pipelines.wavetoken.frames import series_to_frame
    from icml25.pipelines.wavetoken.user_data import load_named_datasets
    p = _params(params)
    names = [(n, "in_domain") for n in p.data.in_domain]
    names += [(n, "zero_shot") for n in p.data.zero_shot]
    datasets = load_named_datasets(names, p.data.datasets, user_series)
    rows = []
    for ds in datasets:
        series = ds.series[: p.data.max_series_per_dataset]
        frame = series_to_frame({ds.name: series})
        frame["role"], frame["freq"] = ds.role, ds.freq
        frame["horizon"], frame["season"] = ds.horizon, ds.season
        rows.append(frame)
        logger.info("wavetoken data: %s (%s) %d series, H=%d, season=%d",
                    ds.name, ds.role, len(series), ds.horizon, ds.season)
    return pd.concat(rows, ignore_index=True)


def generate_kernelsynth(params: dict[str, Any]) -> pd.DataFrame:
    """KernelSynth GP series: ``train`` ones for pretraining, ``test`` ones held out."""
    from icml25.pipelines.wavetoken.frames import series_to_frame
    from icml25.pipelines.wavetoken.kernel_synth import sample_kernelsynth
    p = _params(params)
    ks = p.kernelsynth
    values = sample_kernelsynth(ks.n_train + ks.n_test, ks.length, np.random.default_rng(ks.seed),
                                n_jobs=ks.n_jobs)
    return series_to_frame({"train": values[: ks.n_train], "test": values[ks.n_train:]})


def generate_stress_sets(params: dict[str, Any]) -> pd.DataFrame:
    """Spikes, chirps and trend+season series of length context + horizon (paper Figure 1)."""
    from icml25.pipelines.wavetoken.frames import series_to_frame
    p = _params(params)
    length = p.context_length + p.prediction_length
    sets = make_stress_sets(p.stress.n_series, length, np.random.default_rng(p.stress.seed))
    return series_to_frame(sets)


def build_evaluation_sets(
    real: pd.DataFrame, kernelsynth: pd.DataFrame, stress: pd.DataFrame, params: dict[str, Any]
) -> pd.DataFrame:
    """Every test window: the last H points of each real series (Chronos protocol), held-out
    KernelSynth and the stress patterns (context = all but the last ``prediction_length``)."""
    from icml25.pipelines.wavetoken.frames import EvalSet, eval_sets_to_frame, frame_to_series
    from icml25.pipelines.wavetoken.real_data import SeriesDataset, train_test_split
    p = _params(params)
    sets: list[EvalSet] = []
    for (name, role), rows in real.groupby(["collection", "role"], sort=False):
        first = rows.iloc[0]
        horizon = int(first["horizon"])
        _, test = train_test_split(SeriesDataset(
            str(name), str(role), str(first["freq"]), horizon, int(first["season"]),
            frame_to_series(rows)))
        sets.append(EvalSet(str(name), str(role), int(first["season"]), horizon,
                            [h for h, _ in test], np.stack([f for _, f in test])))
    h = p.prediction_length
    synthetic = {"kernelsynth": frame_to_series(kernelsynth, "test")}
    synthetic |= {name: frame_to_series(stress, name) for name in stress["collection"].unique()}
    for name, series in synthetic.items():
        group = "kernelsynth" if name == "kernelsynth" else "stress"
        # synthetic series have no calendar: the naive normaliser uses season 1
        sets.append(EvalSet(name, group, 1, h, [s[:-h] for s in series],
                            np.stack([s[-h:] for s in series])))
    return eval_sets_to_frame(sets)


def build_training_corpus(
    real: pd.DataFrame, kernelsynth: pd.DataFrame, params: dict[str, Any]
) -> pd.DataFrame:
    """TSMixup over the in-domain training parts (never zero-shot data) + KernelSynth train."""
    from icml25.pipelines.wavetoken.frames import frame_to_series, series_to_frame
    p = _params(params)
    pool, weights = [], []
    for _, rows in real[real["role"] == "in_domain"].groupby("collection", sort=False):
        horizon = int(rows.iloc[0]["horizon"])
        parts = [s[:-horizon] for s in frame_to_series(rows) if len(s) > horizon]
        pool += parts
        # every dataset is equally likely, however many series it has (macrodata has 12)
        weights += [1.0 / len(parts)] * len(parts)
    if not pool:
        raise ValueError("wavetoken.data.in_domain: no in-domain training series to mix")
    mixes = tsmixup(pool, p.tsmixup.n_mixes, np.random.default_rng(p.tsmixup.seed),
                    k_max=p.tsmixup.k_max, min_length=p.tsmixup.min_length,
                    max_length=p.tsmixup.max_length, alpha=p.tsmixup.alpha, weights=weights)
    return series_to_frame({"tsmixup": mixes, "kernelsynth": frame_to_series(kernelsynth, "train")})


# -------------------------------------------------------------------------------- models
def train_variant(corpus: pd.DataFrame, params: dict[str, Any], variant: str, shard: int = 0,
                  n_shards: int = 1) -> dict[str, Any]:
    """Pretrain one tokenizer variant once per seed of shard ``shard`` of ``n_shards``
    (:func:`icml25.core.sweep.shard_seeds`); returns ``{seed_<s>: state dict + meta}``, empty
    when the shard has no seed.

    ``variant="ablations"`` trains every variant of ``wavetoken.ablations`` instead (keys
    ``<variant>_seed_<s>``; empty when the run selects none).
    """
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.wavetoken.frames import frame_to_series
    p = _params(params)
    names = p.ablations if variant == ABLATIONS else [variant]
    todo = [(v, seed) for v in names for seed in shard_seeds(p.seeds_of(v), shard, n_shards)]
    if not todo:
        return {}
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    mixes = frame_to_series(corpus, "tsmixup")
    kernelsynth = frame_to_series(corpus, "kernelsynth")
    models = {}
    for name, seed in todo:
        key = f"{name}_seed_{seed}" if variant == ABLATIONS else f"seed_{seed}"
        models[key] = _train_one(p, name, seed, mixes, kernelsynth, len(corpus), device)
    return models


def _train_one(p: WavetokenParams, variant: str, seed: int, mixes: list, kernelsynth: list,
               corpus_rows: int, device: Any) -> dict[str, Any]:
    from icml25.core.device import seed_everything
    from icml25.pipelines.wavetoken.pretraining import (
        build_tokenizer,
        model_config,
        pretrain,
        run_key,
    )
    tok_params = p.variants[variant]
    tokenizer = build_tokenizer(tok_params, p.context_length)
    config = model_config(p.model, tokenizer.vocab_size, p.context_length, p.prediction_length)
    seed_everything(seed)
    key = run_key({"variant": tok_params.model_dump(), "model": p.model.model_dump(),
                   "train": p.train.model_dump(), "seed": seed, "C": p.context_length,
                   "H": p.prediction_length, "corpus_rows": corpus_rows})
    ckpt = Path(p.train.checkpoint_dir) / f"{variant}_seed{seed}_{key}"
    model, result = pretrain(
        mixes, kernelsynth, tokenizer, config, p.train, p.context_length,
        p.prediction_length, seed, device, checkpoint_dir=ckpt, progress=p.progress,
        desc=f"{variant} seed {seed}", backend=p.model.backend)
    logger.info("wavetoken %s seed %d: %d steps in %.1fs, final loss %.4f", variant, seed,
                result.steps_done, result.seconds, result.history[-1]["train_loss"]
                if result.history else float("nan"))
    return {
        "state_dict": model.state_dict(),
        "metadata": {"variant": variant, "seed": seed, "model_config": config.to_dict(),
                     "backend": p.model.backend, "context_length": p.context_length,
                     "prediction_length": p.prediction_length,
                     "tokenizer": tok_params.model_dump(), "history": result.history,
                     "train_seconds": result.seconds, "steps": result.steps_done},
    }


def forecast_variant(
    models: dict[str, Any], eval_sets: pd.DataFrame, params: dict[str, Any], variant: str
) -> pd.DataFrame:
    """Sample ``n_samples`` paths per test window with each seed's model; keep the quantiles
    (each model's own variant and tokenizer: the ``ablations`` group holds several)."""
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.wavetoken.forecaster import forecast
    from icml25.pipelines.wavetoken.frames import (
        context_matrix,
        frame_to_eval_sets,
        quantiles_to_frame,
    )
    from icml25.pipelines.wavetoken.hf_t5 import load_model
    from icml25.pipelines.wavetoken.pretraining import build_tokenizer
    p = _params(params)
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    sets = frame_to_eval_sets(eval_sets)
    frames = []
    bar = tqdm(total=len(models) * len(sets), desc=f"{variant} forecasts", disable=not p.progress,
               leave=False)
    for key in sorted(models):
        entry = _entry(models[key])
        meta = entry["metadata"]
        model = load_model(meta["model_config"], entry["state_dict"],
                           meta.get("backend", "torch")).to(device)
        name = meta["variant"]
        tokenizer = build_tokenizer(p.variants[name], p.context_length)
        for s in sets:
            bar.set_postfix(seed=meta["seed"], dataset=s.name)
            contexts = context_matrix(s.histories, p.context_length)
            samples = forecast(
                model, tokenizer, contexts, horizon=s.horizon,
                prediction_length=p.prediction_length, n_samples=p.sampling.n_samples,
                temperature=p.sampling.temperature, top_k=p.sampling.top_k,
                top_p=p.sampling.top_p, batch_size=p.sampling.batch_size, device=device,
                seed=int(meta["seed"]), progress=False)
            q = fm.quantiles_from_samples(samples, p.quantile_levels)
            frames.append(quantiles_to_frame(name, int(meta["seed"]), s.name, q,
                                             p.quantile_levels))
            bar.update()
    bar.close()
    if not frames:  # a seed shard with no seed
        return _no_forecasts()
    return pd.concat(frames, ignore_index=True)


def _no_forecasts() -> pd.DataFrame:
    return pd.DataFrame({"variant": pd.Series(dtype=object), "seed": pd.Series(dtype="int64"),
                         "dataset": pd.Series(dtype=object), "series": pd.Series(dtype="int64"),
                         "quantile": pd.Series(dtype="float64"),
                         "step": pd.Series(dtype="int64"), "value": pd.Series(dtype="float32")})


def forecast_pretrained(eval_sets: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Zero-shot forecasts of a local Chronos checkpoint (``wavetoken.pretrained.path``, a
    Hugging Face folder such as a download of ``amazon/chronos-t5-small``) on every test window,
    as the variant ``wavetoken.pretrained.name``; an empty table when no path is set. The
    checkpoint keeps its own context length, vocabulary and block length; the run's sampling
    settings apply. Nothing is downloaded."""
    p = _params(params)
    if p.pretrained.path is None:
        return _no_forecasts()
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.wavetoken.forecaster import forecast
    from icml25.pipelines.wavetoken.frames import (
        context_matrix,
        frame_to_eval_sets,
        quantiles_to_frame,
    )
    from icml25.pipelines.wavetoken.pretrained import load_chronos_checkpoint
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    model, tokenizer, chronos = load_chronos_checkpoint(p.pretrained.path)
    model = model.to(device)
    frames = []
    for s in tqdm(frame_to_eval_sets(eval_sets), desc=f"{p.pretrained.name} forecasts",
                  disable=not p.progress, leave=False):
        samples = forecast(
            model, tokenizer, context_matrix(s.histories, chronos.context_length),
            horizon=s.horizon, prediction_length=chronos.prediction_length,
            n_samples=p.pretrained.n_samples or p.sampling.n_samples,
            temperature=p.sampling.temperature, top_k=p.sampling.top_k, top_p=p.sampling.top_p,
            batch_size=p.pretrained.batch_size, device=device, seed=0, progress=False)
        q = fm.quantiles_from_samples(samples, p.quantile_levels)
        frames.append(quantiles_to_frame(p.pretrained.name, 0, s.name, q, p.quantile_levels))
    logger.info("wavetoken: %s forecast %d sets from %s", p.pretrained.name, len(frames),
                p.pretrained.path)
    return pd.concat(frames, ignore_index=True)


def forecast_stat_baselines(eval_sets: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Seasonal naive, naive, AutoETS, AutoARIMA, AutoTheta (statsforecast) on every window."""
    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets, quantiles_to_frame
    from icml25.pipelines.wavetoken.stat_baselines import run_statsforecast
    p = _params(params)
    frames = []
    sets = frame_to_eval_sets(eval_sets)
    for s in tqdm(sets, desc="statistical baselines", disable=not p.progress, leave=False):
        out = run_statsforecast(s.histories, s.horizon, s.season,
                                models=tuple(p.baselines.models), levels=tuple(p.quantile_levels),
                                max_history=p.baselines.max_history)
        for model, q in out.items():
            frames.append(quantiles_to_frame(model, 0, s.name, q, p.quantile_levels))
    return pd.concat(frames, ignore_index=True)


def check_tokenizers(eval_sets: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Round-trip errors of every tokenizer on the evaluation contexts (claim (a))."""
    from icml25.pipelines.wavetoken.frames import context_matrix, frame_to_eval_sets
    from icml25.pipelines.wavetoken.pretraining import build_tokenizer
    from icml25.pipelines.wavetoken.roundtrip import tokenizer_roundtrip_report
    p = _params(params)
    contexts = [context_matrix(s.histories, p.context_length)
                for s in frame_to_eval_sets(eval_sets)]
    full = np.concatenate(contexts)
    full = full[~np.isnan(full).any(axis=1)]  # the bound is stated for complete windows
    return {v: tokenizer_roundtrip_report(build_tokenizer(p.variants[v], p.context_length), full)
            for v in p.run_variants}


# ---------------------------------------------------------------------------- evaluation
def evaluate_forecasts(eval_sets: pd.DataFrame, params: dict[str, Any],
                       *forecast_tables: pd.DataFrame) -> pd.DataFrame:
    """WQL and MASE of every (variant, seed, dataset) (docs/papers/wavetoken.md, "Metrics")."""
    from icml25.pipelines.wavetoken.evaluation import score_forecasts
    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets
    p = _params(params)
    return score_forecasts(frame_to_eval_sets(eval_sets), forecast_tables, p.quantile_levels)


def evaluate_series(eval_sets: pd.DataFrame, params: dict[str, Any],
                    *forecast_tables: pd.DataFrame) -> pd.DataFrame:
    """Each synthetic series' share of its set's WQL, per (variant, seed): the units that the
    KernelSynth and stress-pattern claims pair over."""
    from icml25.pipelines.wavetoken.evaluation import score_series
    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets
    p = _params(params)
    return score_series(frame_to_eval_sets(eval_sets), forecast_tables, p.quantile_levels)


def judge_claims(
    scores: pd.DataFrame, series_scores: pd.DataFrame, roundtrip: dict[str, Any],
    params: dict[str, Any], run_info: dict[str, Any], confidence: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own scores; MLflow child runs.

    Real-data claims pair over datasets (``log_rel_<m>_real``), synthetic ones over series
    (``rel_wql_<set>_by_series``), see :func:`~icml25.pipelines.wavetoken.evaluation.unit_metrics`;
    MLflow gets the per-seed aggregates only.
    """
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    from icml25.pipelines.wavetoken.evaluation import (
        per_dataset_scores,
        summarise_metrics,
        unit_metrics,
    )
    p = _params(params)
    metrics = summarise_metrics(scores)
    units = unit_metrics(scores, series_scores)
    variant_metrics: dict[str, Any] = {v: {**m, **units.get(v, {})} for v, m in metrics.items()}
    claim_metrics = {**variant_metrics, **{f"tokenizer:{v}": r for v, r in roundtrip.items()}}
    plotted = set(scores["dataset"])
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], claim_metrics,
                           run_info, p.seeds, title="WaveToken (ICML 2025)",
                           figures=[f"figures/{name}.png" for name in p.plots if name in plotted],
                           confidence=confidence,
                           seeds_of={v: p.seeds_of(v) for v in p.run_variants})
    report = metrics_report(PIPELINE, variant_metrics, run_info, p.seeds,
                            extra={"tokenizer_roundtrip": roundtrip,
                                   "per_dataset": per_dataset_scores(scores)})
    if mlflow.active_run() is not None:
        roles = {v: p.variants[v].role if v in p.variants else "baseline" for v in metrics}
        means = seed_means(metrics)
        # per-dataset seed means next to the aggregates, so the compare view lines them up
        for dataset, by_variant in per_dataset_scores(scores).items():
            for v, values in by_variant.items():
                means[v] |= {f"{m}_{dataset}": float(values[m]) for m in ("wql", "mase")}
        variant_params = {v: {"kind": "statsforecast", "model": v, "season": "by frequency",
                              "max_history": p.baselines.max_history} for v in p.baselines.models}
        variant_params |= {v: p.variants[v].model_dump() for v in p.variants}
        log_variants(PIPELINE, means, roles, params_by_variant=variant_params, nan_ok=True)
        log_claim_counts(claims)
    return report, claims


def log_training_curves(params: dict[str, Any], *models: dict[str, Any]) -> None:
    """Loss curves of every variant and seed as MLflow child runs (``train_loss`` by step)."""
    from icml25.core.tracking import log_metrics, variant_run
    if mlflow.active_run() is None:
        return
    p = _params(params)
    for bundle in models:
        for key in sorted(bundle):
            meta = _entry(bundle[key])["metadata"]
            variant = meta["variant"]
            with variant_run(variant, run_name=f"{variant}/training/seed {meta['seed']}",
                             role=p.variants[variant].role, pipeline=PIPELINE,
                             params={"seed": meta["seed"], "steps": meta["steps"],
                                     "train_seconds": round(meta["train_seconds"], 1)}):
                for entry in meta["history"]:
                    log_metrics({"train_loss": entry["train_loss"]}, step=int(entry["step"]))


def register_model(models: dict[str, Any], eval_sets: pd.DataFrame,
                   params: dict[str, Any]) -> None:
    """Register the method's first-seed model in MLflow (pyfunc with signature and example)."""
    from icml25.core.datasets import TorchModelDataset
    from icml25.core.tracking import variant_run
    from icml25.pipelines.wavetoken.frames import context_matrix, frame_to_eval_sets
    from icml25.pipelines.wavetoken.serving import log_registered_model
    if mlflow.active_run() is None:
        logger.info("wavetoken: no active MLflow run; model not registered")
        return
    p = _params(params)
    key = sorted(models)[0]
    entry = _entry(models[key])
    first = frame_to_eval_sets(eval_sets)[0]
    example = context_matrix(first.histories[:2], p.context_length)
    with tempfile.TemporaryDirectory() as tmp, variant_run(
        "wavetoken", run_name="wavetoken/registered model", role="method", pipeline=PIPELINE,
        params={"seed": entry["metadata"]["seed"]},
    ):
        path = Path(tmp) / f"{key}.safetensors"
        TorchModelDataset(filepath=str(path)).save(entry)
        uri = log_registered_model(path, example, PIPELINE)
    logger.info("wavetoken: registered %s as MLflow model %r", uri, PIPELINE)


# ---------------------------------------------------------------------------------- plots

def plot_forecasts(eval_sets: pd.DataFrame, params: dict[str, Any], metrics: dict[str, Any],
                   *forecast_tables: pd.DataFrame) -> dict[str, Any]:
    """Forecast figures (context, truth, median, 10-90% band of series 0, first seed).

    One figure per plotted set comparing the method with its main baselines (saved to
    ``figures/<set>.png``, shown in the scorecard), and one per variant over all plotted sets,
    attached as ``forecasts.png`` to that variant's MLflow child run so the compare view lines
    them up. ``metrics`` is taken only so this node runs after the child runs exist.
    """
    from icml25.core.tracking import variant_run_ids
    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets, frame_to_quantiles
    from icml25.pipelines.wavetoken.plots import plot_panel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _params(params)
    sets = {s.name: s for s in frame_to_eval_sets(eval_sets)}
    table = pd.concat(forecast_tables, ignore_index=True)
    table = table[table["seed"] == table.groupby("variant")["seed"].transform("min")]
    first = table[table["series"] == 0].assign(series=0)
    quantiles = {(v, d): frame_to_quantiles(g, p.quantile_levels)[0]
                 for (v, d), g in first.groupby(["variant", "dataset"])}
    plotted = [n for n in p.plots if n in sets]
    models = [m for m in ("wavetoken", "chronos_bins_1024", "auto_ets", "seasonal_naive")
              if m in set(table["variant"])]
    figures = {}
    for name in plotted:
        fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.2), sharey=True,
                                 squeeze=False)
        for ax, model in zip(axes[0], models, strict=True):
            plot_panel(ax, sets[name], quantiles[(model, name)], p.quantile_levels, model)
        axes[0][0].legend(fontsize=7, loc="upper left")
        fig.suptitle(f"wavetoken — {name} (series 0)", fontsize=11)
        fig.tight_layout()
        figures[f"{name}.png"] = fig
    if mlflow.active_run() is not None and plotted:
        for variant, run_id in variant_run_ids(PIPELINE).items():
            if any((variant, name) not in quantiles for name in plotted):
                continue  # a variant without forecasts of every plotted set
            fig, axes = plt.subplots(1, len(plotted), figsize=(3.6 * len(plotted), 3.0),
                                     squeeze=False)
            for ax, name in zip(axes[0], plotted, strict=True):
                plot_panel(ax, sets[name], quantiles[(variant, name)], p.quantile_levels, name)
            fig.suptitle(f"{variant} (series 0, first seed)", fontsize=11)
            fig.tight_layout()
            mlflow.MlflowClient().log_figure(run_id, fig, "forecasts.png")
            plt.close(fig)
    return figures
