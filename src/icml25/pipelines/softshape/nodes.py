"""Kedro nodes of the softshape pipeline: thin wrappers around the room's plain modules.

Each node validates ``params:softshape`` into :class:`SoftshapeParams`, does one step of the
pipeline and returns plain data (dicts of arrays, tables, state dicts).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_shards, shard_seeds
from icml25.pipelines.softshape.params import SoftshapeParams
from icml25.pipelines.softshape.ucr_data import LabelledSeries, load_ucr, make_cbf

if TYPE_CHECKING:
    from icml25.pipelines.softshape.classifiers import TrainSettings

mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

logger = logging.getLogger(__name__)
PIPELINE = "softshape"
#: the columns of a seed shard's empty result table (a shard with no seed)
RESULT_COLUMNS = ["variant", "dataset", "fold", "seed", "accuracy"]


def _params(params: dict[str, Any]) -> SoftshapeParams:
    return validate_parameters(SoftshapeParams, params, PIPELINE)


def _settings(p: SoftshapeParams, epochs: int | None = None, patience: int | None = None,
              warm_up: int | None = None, batch_mode: str | None = None) -> TrainSettings:
    from icml25.core.device import resolve_device
    from icml25.pipelines.softshape.classifiers import TrainSettings
    t = p.train
    return TrainSettings(
        epochs=epochs or t.epochs, warm_up=t.warm_up if warm_up is None else warm_up,
        lr=t.lr, weight_decay=t.weight_decay, batch_mode=batch_mode or t.batch_mode,
        large_batch=t.large_batch, patience=patience or t.patience,
        moe_loss_rate=p.model.moe_loss_rate, device=str(resolve_device(p.device)))


def _model_kwargs(p: SoftshapeParams) -> dict[str, Any]:
    m = p.model
    return {"emb_dim": m.emb_dim, "depth": m.depth, "sparse_rate": m.sparse_rate,
            "dropout": m.dropout, "router_init": m.router_init,
            "inception_filters": m.emb_dim // 4}


# ------------------------------------------------------------------------------------ data
def load_ucr_sets(params: dict[str, Any]) -> dict[str, LabelledSeries]:
    """The shipped UCR sets (original train/test merged, split flag kept); nothing downloaded."""
    p = _params(params)
    out = {}
    for name in p.datasets:
        out[name] = load_ucr(name)
        d = out[name]
        logger.info("softshape data: %s n=%d C=%d T=%d K=%d (%d original test)%s", name,
                    len(d.y), d.n_channels, d.X.shape[-1], d.n_classes,
                    int(d.original_test.sum()),
                    " variable length, NaN-padded" if d.variable_length else "")
    return out


def generate_cbf(params: dict[str, Any]) -> LabelledSeries | None:
    """The synthetic CBF set with its true event windows (``None`` when ``use_cbf`` is off)."""
    p = _params(params)
    if not p.use_cbf:
        return None
    c = p.cbf
    return make_cbf(c.n, c.length, np.random.default_rng(c.seed), c.test_fraction)


def prepare_folds(raw: dict[str, LabelledSeries], cbf: LabelledSeries | None,
                  params: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Folds (same for every method), NaN fill with training means, per-series z-norm, (m, q)."""
    from icml25.pipelines.softshape.experiment import prepare_dataset
    from icml25.pipelines.softshape.model import shape_size_and_stride
    p = _params(params)
    sets = {**raw, **({"CBF": cbf} if cbf is not None else {})}
    prepared = {}
    for name, data in sets.items():
        shape = p.model.shape_sizes.get(name, p.model.default_shape_size)
        m, q = shape_size_and_stride(data.X.shape[-1], shape, p.model.stride)
        prepared[name] = prepare_dataset(data, p.protocol.split, p.protocol.n_folds,
                                         p.protocol.folds_to_run, p.protocol.seed, m, q)
        f = prepared[name][0]
        logger.info("softshape folds: %s train/val/test %d/%d/%d, m=%d q=%d", name,
                    len(f["train"]), len(f["val"]), len(f["test"]), m, q)
    return prepared


# ---------------------------------------------------------------------------------- models
def train_softshape(prepared: dict[str, list[dict[str, Any]]], params: dict[str, Any],
                    shard: int = 0, n_shards: int = 1,
                    ) -> tuple[dict[str, Any], pd.DataFrame, dict[str, Any]]:
    """SoftShape on every data set and fold, once per seed of seed shard ``shard`` of
    ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`): models,
    result rows, test shape scores (of the shard's first seed). Every fit seeds itself."""
    from icml25.core.device import set_threads
    from icml25.pipelines.softshape.experiment import run_softshape_variant
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {}, pd.DataFrame(columns=RESULT_COLUMNS), {}
    set_threads(p.num_threads)
    rows, models, maps = run_softshape_variant(
        prepared, "softshape", p.all_datasets, seeds, _model_kwargs(p), _settings(p),
        progress=p.progress, keep_models=True)
    for r in rows:
        logger.info("softshape %s seed %d: acc %.3f (last epoch %.3f), %.1fs, expert load %s, "
                    "balance loss %.4f (test) %.4f (train, post-warm-up mean)", r["dataset"],
                    r["seed"], r["accuracy"], r["accuracy_last_epoch"], r["train_seconds"],
                    r["expert_load"], r["balance_loss_test"], r["balance_loss_train"])
    return models, pd.DataFrame(rows), maps


def train_ablations(prepared: dict[str, list[dict[str, Any]]],
                    params: dict[str, Any], shard: int = 0, n_shards: int = 1) -> pd.DataFrame:
    """The configured ablations on their data sets (same code path, flags only), once per seed
    of seed shard ``shard`` of ``n_shards``."""
    from icml25.core.device import set_threads
    from icml25.pipelines.softshape.experiment import run_softshape_variant
    p = _params(params)
    rows = []
    seeds = shard_seeds(p.ablations.seeds or p.seeds, shard, n_shards)
    if seeds:
        set_threads(p.num_threads)
    for variant in p.ablations.variants if seeds else ():
        out, _, _ = run_softshape_variant(prepared, variant, p.ablations.datasets, seeds,
                                          _model_kwargs(p), _settings(p), progress=p.progress)
        rows += out
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=RESULT_COLUMNS)


def run_baselines(prepared: dict[str, list[dict[str, Any]]],
                  params: dict[str, Any], shard: int = 0, n_shards: int = 1) -> pd.DataFrame:
    """MiniRocket, Rocket and 1-NN DTW from aeon, and the FCN, on the same folds, once per seed
    of seed shard ``shard`` of ``n_shards``; the deterministic 1-NN DTW runs once, for the
    first seed, which shard 0 holds."""
    from icml25.core.device import set_threads
    from icml25.pipelines.softshape.experiment import run_aeon, run_fcn
    p = _params(params)
    set_threads(p.num_threads)
    rows = []
    for name in p.baselines.models:
        if name == "fcn":
            f = p.baselines.fcn
            settings = _settings(p, epochs=f.epochs, patience=f.patience, warm_up=0,
                                 batch_mode=f.batch_mode)
            seeds = shard_seeds(f.seeds or p.seeds, shard, n_shards)
            if seeds:
                rows += run_fcn(prepared, p.all_datasets, seeds, settings, p.progress)
        else:
            seeds = shard_seeds(p.seeds, shard, n_shards)
            if seeds and (name != "nn_dtw" or shard == 0):
                rows += run_aeon(prepared, name, p.all_datasets, seeds, p.baselines.n_jobs,
                                 p.progress, p.baselines.max_series)
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=RESULT_COLUMNS)


def _merge_rows(frames: tuple[pd.DataFrame, ...]) -> pd.DataFrame:
    """One table from the ``n`` seed shards' result rows, in the order one node looping over
    every seed writes them: each shard lists (variant, data set, fold) groups in the same order
    with its seeds ``seeds[k::n]`` inside, so row ``i`` of a group is row ``i // n`` of that
    group in shard ``i % n`` (:func:`icml25.core.sweep.interleave_shards`)."""
    n = len(frames)
    positions: dict[tuple[Any, ...], list[list[int]]] = {}
    for k, frame in enumerate(frames):
        for i, key in enumerate(zip(frame["variant"], frame["dataset"], frame["fold"],
                                    strict=True)):
            positions.setdefault(key, [[] for _ in range(n)])[k].append(i)
    order = [pos for per_shard in positions.values()
             for pos in interleave_shards([[(k, i) for i in rows]
                                           for k, rows in enumerate(per_shard)])]
    if not order:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    return pd.concat([frames[k].iloc[[i]] for k, i in order], ignore_index=True)


def _split_shards(n_shards: int, shards: tuple[Any, ...], groups: int) -> list[tuple[Any, ...]]:
    if len(shards) != groups * n_shards:
        raise ValueError(f"softshape: expected {groups} x {n_shards} seed-shard inputs, got "
                         f"{len(shards)}")
    return [tuple(shards[g * n_shards:(g + 1) * n_shards]) for g in range(groups)]


# ----------------------------------------------------------------------------- evaluation
def evaluate(params: dict[str, Any], run_info: dict[str, Any], confidence: float,
             *shards: pd.DataFrame, n_shards: int = 1
             ) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """Per-data-set table, ``metrics.json`` and ``claims.json`` from the run's own results
    (``n_shards`` seed shards each of the method's, the ablations' and the baselines' rows, in
    that order); each variant as an MLflow child run with the same metric names; expert load
    logged. Claims are judged at ``confidence`` (``params:claims_confidence``); per-seed
    metrics pair over seeds, ``acc_by_dataset`` over the data sets (``unit: dataset``)."""
    from icml25.core.tracking import (
        log_claim_counts,
        log_metrics,
        log_variants,
        seed_means,
        variant_run,
    )
    from icml25.pipelines.softshape.evaluation import (
        DETERMINISTIC,
        dataset_units,
        summarise,
        variant_metrics,
    )
    p = _params(params)
    method, ablations, baselines = (_merge_rows(g) for g in _split_shards(n_shards, shards, 3))
    results = pd.concat([t for t in (method, ablations, baselines) if len(t)],
                        ignore_index=True)
    metrics = variant_metrics(results, p.all_datasets, p.ablations.datasets, p.seeds)
    units = dataset_units(results, p.all_datasets, list(p.seeds))
    judged = {v: {**m, **units.get(v, {})} for v, m in metrics.items()}
    summary = summarise(results, p.all_datasets)
    claims = claims_report(
        PIPELINE, [c.model_dump() for c in p.claims], judged, run_info, p.seeds,
        title="SoftShape: soft sparse shapes for time-series classification (ICML 2025)",
        figures=["figures/accuracy.png", "figures/scores_CBF.png", "figures/expert_load.png"],
        confidence=confidence,
        seeds_of={v: sorted(int(s) for s in g["seed"].unique())
                  for v, g in results.groupby("variant", sort=False)
                  if v not in DETERMINISTIC})
    report = metrics_report(PIPELINE, judged, run_info, p.seeds, extra=summary)
    if mlflow.active_run() is not None:
        roles = {v: ("method" if v == "softshape" else
                     "ablation" if v in p.ablations.variants else "baseline") for v in metrics}
        means = seed_means(metrics)
        cfg = {"softshape": {**p.model.model_dump(), **p.train.model_dump()}}
        cfg |= {v: {"ablation": v, **p.model.model_dump()} for v in p.ablations.variants}
        cfg |= {v: {"library": "aeon 1.6", "model": v} for v in p.baselines.models if v != "fcn"}
        cfg |= {"fcn": p.baselines.fcn.model_dump()}
        log_variants(PIPELINE, means, roles, params_by_variant=cfg)
        with variant_run("softshape", run_name="softshape/expert load", role="method",
                         pipeline=PIPELINE, params={"router_init": p.model.router_init}):
            for name, load in summary["expert_load"].items():
                shares = np.asarray(load["mean_share"], dtype=float)
                log_metrics({f"expert_share/{name}/e{e}": s for e, s in enumerate(shares)})
                log_metrics({f"expert_max_share/{name}": float(shares.max())})
        _log_balance_curves(method, variant_run, log_metrics)
        log_claim_counts(claims)
    return summary_table(results), report, claims


def _log_balance_curves(method: pd.DataFrame, variant_run, log_metrics) -> None:
    """The MoE balance loss of every training epoch (0 in the warm-up, where the MoE is not
    called), one curve per data set and seed, as the child run ``softshape/balance loss``."""
    if "balance_loss_curve" not in method:
        return
    import time

    from mlflow.entities import Metric

    from icml25.core.tracking import metric_key
    with variant_run("softshape", run_name="softshape/balance loss", role="method",
                     pipeline=PIPELINE) as run:
        now = int(time.time() * 1000)
        points = []
        for _, row in method.iterrows():
            curve = json.loads(row["balance_loss_curve"]) if isinstance(
                row["balance_loss_curve"], str) else []
            key = metric_key(f"balance_loss/{row['dataset']}/fold{row['fold']}/"
                             f"seed{row['seed']}")
            points += [Metric(key, float(v), now, epoch)
                       for epoch, v in enumerate(curve, start=1) if np.isfinite(v)]
            if np.isfinite(row["balance_loss_test"]):
                log_metrics({f"balance_loss_test/{row['dataset']}/fold{row['fold']}/"
                             f"seed{row['seed']}": float(row["balance_loss_test"])})
        client = mlflow.tracking.MlflowClient()
        for start in range(0, len(points), 1000):  # one batch per 1000 points (MLflow's cap)
            client.log_batch(run.info.run_id, metrics=points[start: start + 1000])


def summary_table(results: pd.DataFrame) -> pd.DataFrame:
    """Data set x variant accuracy (mean over folds and seeds), the CSV report."""
    table = results.groupby(["dataset", "variant"])["accuracy"].agg(["mean", "std", "count"])
    return table.reset_index()


def plot_figures(prepared: dict[str, list[dict[str, Any]]], metrics: dict[str, Any],
                 params: dict[str, Any], *score_map_shards: dict[str, Any]) -> dict[str, Any]:
    """Accuracy bars, the expert load, and the learned shape scores over test series (the
    paper's interpretability figure; CBF with the true event window shaded) of the first fold
    and seed, which seed shard 0 holds."""
    from icml25.pipelines.softshape.plots import accuracy_figure, expert_load_figure, score_figure
    p = _params(params)
    score_maps: dict[str, Any] = {}
    for maps in score_map_shards:
        for name, scores in maps.items():
            score_maps.setdefault(name, scores)
    figures = {"accuracy.png": accuracy_figure(metrics),
               "expert_load.png": expert_load_figure(metrics)}
    for name in p.plot_datasets:
        if name in score_maps:
            ds = prepared[name][0]
            figures[f"scores_{name}.png"] = score_figure(ds, score_maps[name])
    return figures
