"""One experiment = every (data set, fold, seed) of one variant, as plain rows (no Kedro).

A *prepared* data set is a dict with the z-normalised series of one fold (``X``, (n, T)), the
labels, the fold's index arrays, the shape size and stride of the data set and, for CBF, the
true event windows. The runners return one row per (data set, fold, seed) with the test
accuracy and the timings; SoftShape rows add the expert load and, on sets with known windows,
the interpretability ratio. A prepared ``X`` is (n, T) for univariate sets and (n, C, T) for
multichannel ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from icml25.pipelines.softshape.aeon_baselines import fit_predict
from icml25.pipelines.softshape.classifiers import (
    TrainSettings,
    accuracy,
    fit_fcn,
    fit_softshape,
    predict_logits,
    softshape_outputs,
)
from icml25.pipelines.softshape.model import SoftShapeConfig, scores_to_time
from icml25.pipelines.softshape.ucr_data import (
    Fold,
    LabelledSeries,
    fill_and_normalise,
    make_folds,
)

#: SoftShapeConfig flags of each ablation (docs/papers/softshape.md, "Baselines").
ABLATION_FLAGS: dict[str, dict[str, Any]] = {
    "softshape": {},
    "hard": {"hard": True},
    "no_moe": {"use_moe": False},
    "no_inception": {"use_inception": False},
    "no_sparsify": {"sparse_rate": 0.0},
    "mean_pool": {"pooling": "mean"},
}


def prepare_fold(data: LabelledSeries, fold: Fold, shape_size: int, stride: int,
                 fold_id: int) -> dict[str, Any]:
    """Fill NaNs with the fold's training means, z-normalise; everything a model needs."""
    X = fill_and_normalise(data.X, fold.train).astype(np.float32)
    return {
        "name": data.name, "fold": fold_id, "X": X, "y": data.y, "classes": data.classes,
        "n_classes": data.n_classes, "train": fold.train, "val": fold.val, "test": fold.test,
        "shape_size": shape_size, "stride": stride, "windows": data.windows,
    }


def prepare_dataset(data: LabelledSeries, split: str, n_folds: int, folds_to_run: list[int],
                    seed: int, shape_size: int, stride: int) -> list[dict[str, Any]]:
    """Every requested fold of one set, prepared."""
    folds = make_folds(data, split, n_folds, folds_to_run, seed)
    ids = [0] if split == "original" else folds_to_run
    return [prepare_fold(data, f, shape_size, stride, i) for f, i in zip(folds, ids, strict=True)]


def window_score_ratio(time_scores: np.ndarray, windows: np.ndarray) -> float:
    """Mean score inside the true window [a, b] over the mean score outside it.

    Both means are taken per series (over the time steps that some shape covers) and then
    averaged over series; the ratio of the two averages is returned.
    """
    inside, outside = [], []
    t = np.arange(time_scores.shape[1])
    for row, (a, b) in zip(time_scores, windows, strict=True):
        covered = ~np.isnan(row)
        mask = (t >= a) & (t <= b)
        if (mask & covered).any() and (~mask & covered).any():
            inside.append(row[mask & covered].mean())
            outside.append(row[~mask & covered].mean())
    if not inside:
        return float("nan")
    return float(np.mean(inside) / np.mean(outside))


def _split(ds: dict[str, Any], part: str) -> tuple[np.ndarray, np.ndarray]:
    return ds["X"][ds[part]], ds["y"][ds[part]]


def run_softshape_variant(
    prepared: dict[str, list[dict[str, Any]]], variant: str, datasets: Iterable[str],
    seeds: list[int], model_kwargs: dict[str, Any], settings: TrainSettings,
    progress: bool = True, keep_models: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Train and test SoftShape (or one ablation) on every fold and seed.

    Returns rows, ``{key: {"state_dict", "metadata"}}`` models (when ``keep_models``) and the
    test-set shape scores of the first fold and seed per data set (for the figures).
    """
    flags = {**model_kwargs, **ABLATION_FLAGS[variant]}
    jobs = [(ds, seed) for name in datasets for ds in prepared[name] for seed in seeds]
    rows, models, score_maps = [], {}, {}
    bar = tqdm(jobs, desc=f"softshape {variant}", disable=not progress, leave=False)
    for ds, seed in bar:
        bar.set_postfix(dataset=ds["name"], fold=ds["fold"], seed=seed)
        X_tr, y_tr = _split(ds, "train")
        X_va, y_va = _split(ds, "val")
        X_te, y_te = _split(ds, "test")
        X = ds["X"]
        config = SoftShapeConfig(seq_len=X.shape[-1], shape_size=ds["shape_size"],
                                 stride=ds["stride"], n_classes=ds["n_classes"],
                                 in_channels=1 if X.ndim == 2 else X.shape[1], **flags)
        fit = fit_softshape(X_tr, y_tr, X_va, y_va, config, settings, seed, len(ds["y"]),
                            progress=progress, desc=f"{variant} {ds['name']} s{seed}")
        out = softshape_outputs(fit.model, X_te, warm=fit.best_in_warm_up)
        best_state = {k: v.clone() for k, v in fit.model.state_dict().items()}
        fit.model.load_state_dict(fit.last_state)
        last_pred = predict_logits(fit.model, X_te, warm=False).argmax(-1).numpy()
        fit.model.load_state_dict(best_state)
        ratio = ratio1 = float("nan")
        if ds["windows"] is not None:
            windows = ds["windows"][ds["test"]]
            args = (X.shape[-1], config.shape_size, config.stride)
            if out.scores is not None:  # the sparsifying layer's scores (the claim's)
                ratio = window_score_ratio(
                    scores_to_time(torch.as_tensor(out.scores), *args).numpy(), windows)
            ratio1 = window_score_ratio(scores_to_time(
                torch.as_tensor(out.first_layer_scores), *args).numpy(), windows)
        load = out.expert_load.astype(int)
        post_warm = fit.balance_loss[settings.warm_up:]
        rows.append({
            "variant": variant, "dataset": ds["name"], "fold": ds["fold"], "seed": seed,
            "accuracy": accuracy(out.predictions, y_te),
            "accuracy_last_epoch": accuracy(last_pred, y_te),
            "train_seconds": fit.train_seconds, "infer_seconds": out.seconds,
            "best_epoch": fit.best_epoch, "epochs_run": fit.epochs_run,
            "best_in_warm_up": fit.best_in_warm_up,
            "expert_load": json.dumps(load.tolist()),
            "expert_max_share": float(load.max() / load.sum()) if load.sum() else float("nan"),
            "score_ratio": ratio, "score_ratio_layer1": ratio1,
            # the MoE balance loss: on the test set (post-warm-up routing), its mean over the
            # post-warm-up training epochs, and every epoch's value (0 in the warm-up)
            "balance_loss_test": out.balance_loss if config.use_moe else float("nan"),
            "balance_loss_train": (float(np.mean(post_warm)) if config.use_moe and post_warm
                                   else float("nan")),
            "balance_loss_curve": json.dumps(fit.balance_loss if config.use_moe else []),
            "n_train": len(y_tr), "n_val": len(y_va), "n_test": len(y_te),
            "shape_size": config.shape_size, "stride": config.stride,
            "n_shapes": config.n_tokens,
        })
        key = f"{ds['name']}_fold{ds['fold']}_seed{seed}"
        if keep_models:
            models[key] = {"state_dict": fit.model.state_dict(), "metadata": {
                "variant": variant, "dataset": ds["name"], "fold": ds["fold"], "seed": seed,
                "config": config.to_dict(), "best_in_warm_up": fit.best_in_warm_up,
                "history": fit.history}}
        if ds["name"] not in score_maps:
            score_maps[ds["name"]] = {"scores": out.scores, "test": ds["test"],
                                      "layer1_scores": out.first_layer_scores,
                                      "sparsifying_layer": fit.model.sparsifying_layer,
                                      "shape_size": config.shape_size, "stride": config.stride,
                                      "predictions": out.predictions, "seed": seed,
                                      "fold": ds["fold"]}
    bar.close()
    return rows, models, score_maps


def run_fcn(prepared: dict[str, list[dict[str, Any]]], datasets: Iterable[str],
            seeds: list[int], settings: TrainSettings, progress: bool = True,
            ) -> list[dict[str, Any]]:
    """The FCN baseline on the same folds, with the same loop and model selection."""
    jobs = [(ds, seed) for name in datasets for ds in prepared[name] for seed in seeds]
    rows = []
    for ds, seed in tqdm(jobs, desc="fcn", disable=not progress, leave=False):
        X_tr, y_tr = _split(ds, "train")
        X_va, y_va = _split(ds, "val")
        X_te, y_te = _split(ds, "test")
        fit = fit_fcn(X_tr, y_tr, X_va, y_va, ds["n_classes"], settings, seed, len(ds["y"]),
                      progress=progress, desc=f"fcn {ds['name']} s{seed}")
        start = time.perf_counter()
        pred = predict_logits(fit.model, X_te).argmax(-1).numpy()
        seconds = time.perf_counter() - start
        fit.model.load_state_dict(fit.last_state)
        last = predict_logits(fit.model, X_te).argmax(-1).numpy()
        rows.append({"variant": "fcn", "dataset": ds["name"], "fold": ds["fold"], "seed": seed,
                     "accuracy": accuracy(pred, y_te), "accuracy_last_epoch": accuracy(last, y_te),
                     "train_seconds": fit.train_seconds, "infer_seconds": seconds,
                     "best_epoch": fit.best_epoch, "epochs_run": fit.epochs_run})
    return rows


def run_aeon(prepared: dict[str, list[dict[str, Any]]], name: str, datasets: Iterable[str],
             seeds: list[int], n_jobs: int = 1, progress: bool = True,
             max_series: int | None = None) -> list[dict[str, Any]]:
    """An aeon baseline, fitted on the fold's train+val part (it selects no model), tested on
    the same test part as SoftShape. 1-NN DTW is deterministic: it runs once (first seed).

    ``max_series`` keeps that many fit and test series of the fold, drawn without replacement
    (generator seeded by the fold, so every baseline sees the same subset): the CPU dry run's
    count cut. Every row records how many series it fitted and scored (``n_fit``, ``n_test``)."""
    run_seeds = seeds[:1] if name == "nn_dtw" else seeds
    jobs = [(ds, seed) for n in datasets for ds in prepared[n] for seed in run_seeds]
    rows = []
    for ds, seed in tqdm(jobs, desc=name, disable=not progress, leave=False):
        fit_idx = _at_most(np.concatenate([ds["train"], ds["val"]]), max_series, ds["fold"])
        test_idx = _at_most(np.asarray(ds["test"]), max_series, ds["fold"])
        X_te, y_te = ds["X"][test_idx], ds["y"][test_idx]
        out = fit_predict(name, ds["X"][fit_idx], ds["y"][fit_idx], X_te, seed, n_jobs)
        rows.append({"variant": name, "dataset": ds["name"], "fold": ds["fold"], "seed": seed,
                     "accuracy": accuracy(out.predictions, y_te),
                     "train_seconds": out.train_seconds, "infer_seconds": out.infer_seconds,
                     "n_fit": len(fit_idx), "n_test": len(test_idx)})
    return rows


def _at_most(idx: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    """``idx`` itself when it has at most ``n`` entries (or ``n`` is None), else ``n`` of them
    drawn without replacement, kept in their original order."""
    if n is None or len(idx) <= n:
        return idx
    keep = np.random.default_rng(seed).choice(len(idx), size=n, replace=False)
    return idx[np.sort(keep)]
