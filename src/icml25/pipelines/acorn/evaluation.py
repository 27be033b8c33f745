"""Scoring of every variant's predictions with the paper's metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from icml25.pipelines.acorn.metrics import task_metrics

SPLIT_PREFIX = {"test": "", "t2": "t2_", "ood": "ood_"}
ROLES = {"acorn_phase": "method", "magnitude_only": "baseline", "classical_dsp": "baseline",
         "prior": "baseline", "random": "baseline", "best_trivial": "baseline"}
#: the trivial predictors whose per-metric best forms ``best_trivial``
TRIVIAL = ("prior", "random")
RATIO = "ratio:acorn_phase/magnitude_only"


def higher_is_better(metric: str) -> bool:
    from icml25.pipelines.acorn.symmetry import HIGHER
    return metric.endswith(("_bca", "_tca", "_acc")) or metric in HIGHER


def score_predictions(meta: pd.DataFrame, preds: pd.DataFrame, spacing: float,
                      seeds: Sequence[int], max_tdoa: float | None = None) -> pd.DataFrame:
    """One row (variant, seed, metric, value) per metric of every variant and seed.

    Deterministic baselines (classical DSP, prior) are scored once (seed 0); ``best_trivial``
    is, per seed, the better of the prior and that seed's random predictor on each metric.
    The learned variants' predictions on transformed test clips (splits ``sym_*``) and on the
    mirrored Doppler scenes (split ``mirror``) give the symmetry metrics of
    :func:`icml25.pipelines.acorn.symmetry.symmetry_metrics` (``max_tdoa``: the array's
    largest |TDoA| in samples, default d·fs/c).
    """
    from icml25.pipelines.acorn.channels import FS, SPEED_OF_SOUND
    from icml25.pipelines.acorn.symmetry import symmetry_metrics
    if preds.empty:
        raise ValueError("acorn evaluation: no predictions to score")
    if max_tdoa is None:
        max_tdoa = spacing * FS / SPEED_OF_SOUND
    labels = meta.set_index("item")["label"]
    rows = []
    extra = ~preds["split"].isin(list(SPLIT_PREFIX))
    for (variant, seed), group in preds.groupby(["variant", "seed"], sort=True):
        if not extra.loc[group.index].any():
            continue
        for metric, value in symmetry_metrics(meta, group, max_tdoa).items():
            rows.append({"variant": variant, "seed": int(seed), "metric": metric,
                         "value": value})
    preds = preds[~extra]
    for (variant, seed, split, task), group in preds.groupby(
            ["variant", "seed", "split", "task"], sort=True):
        true = labels.loc[group["item"].to_numpy()].to_numpy(dtype=float)
        pred = group["pred"].to_numpy(dtype=float)
        if not np.all(np.isfinite(pred)):
            raise ValueError(f"acorn evaluation: {variant} seed {seed} predicted NaN/inf on "
                             f"{split}/{task}")
        for metric, value in task_metrics(task, pred, true, spacing,
                                          SPLIT_PREFIX[split]).items():
            rows.append({"variant": variant, "seed": int(seed), "metric": metric,
                         "value": value})
    scores = pd.DataFrame(rows)
    best = []
    prior = scores[scores["variant"] == "prior"].set_index("metric")["value"]
    for seed in seeds:
        rand = scores[(scores["variant"] == "random") & (scores["seed"] == seed)]
        for metric, value in zip(rand["metric"], rand["value"], strict=True):
            pick = max if higher_is_better(metric) else min
            best.append({"variant": "best_trivial", "seed": int(seed), "metric": metric,
                         "value": pick(value, prior[metric])})
    return pd.concat([scores, pd.DataFrame(best)], ignore_index=True)


def summarise(scores: pd.DataFrame) -> dict[str, dict[str, list[float]]]:
    """``{variant: {metric: [value per seed]}}`` (seed order)."""
    out: dict[str, dict[str, list[float]]] = {}
    for (variant, metric), group in scores.sort_values("seed").groupby(["variant", "metric"]):
        out.setdefault(str(variant), {})[str(metric)] = group["value"].astype(float).tolist()
    return out


def derived_variants(metrics: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Per-seed ratios of the phase encoder's errors to the magnitude-only encoder's (for
    relative claims such as "≥ 25% lower DoA error")."""
    phase, mag = metrics.get("acorn_phase"), metrics.get("magnitude_only")
    if not phase or not mag:
        return {}
    ratios = {m: (np.asarray(phase[m]) / np.maximum(np.asarray(mag[m]), 1e-12)).tolist()
              for m in phase if m in mag and not higher_is_better(m)}
    return {RATIO: ratios}


def _item_errors(task: str, pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Per-item terms whose mean is the task's paper metric (:mod:`.metrics`): 0/1 correctness
    (BCA / TCA), absolute error (MAE_f, MAE_t), absolute relative error in % (REP)."""
    if task in ("los", "multipath"):
        return (pred == true).astype(float)
    if task == "range":
        return np.abs(pred - true) / true * 100.0
    return np.abs(pred - true)


def item_scores(meta: pd.DataFrame, preds: pd.DataFrame, scores: pd.DataFrame,
                seeds: Sequence[int]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per test item and seed, the term of each task's paper metric, for claims that pair over
    test items (``unit: item``): ``{variant: {items_<metric>: {item: [value per seed]}}}``.

    Every variant carries one value per seed of ``seeds``: a deterministic baseline scored once
    (classical DSP, prior) repeats its value (it would answer the same on every seed), and
    ``best_trivial`` takes, per seed and metric, the items of whichever of prior / that seed's
    random predictor :func:`score_predictions` picked. The item mean of each seed equals the
    seed's metric.
    """
    from icml25.pipelines.acorn.metrics import TASK_METRICS

    labels = meta.set_index("item")["label"]
    test = preds[preds["split"] == "test"]
    per: dict[tuple[str, str], dict[int, pd.Series]] = {}
    for (variant, seed, task), group in test.groupby(["variant", "seed", "task"], sort=True):
        true = labels.loc[group["item"].to_numpy()].to_numpy(dtype=float)
        err = _item_errors(task, group["pred"].to_numpy(dtype=float), true)
        per.setdefault((str(variant), TASK_METRICS[task][0]), {})[int(seed)] = pd.Series(
            err, index=group["item"].astype(str).to_numpy())
    seeds = [int(s) for s in seeds]
    out: dict[str, dict[str, dict[str, list[float]]]] = {}

    def put(variant: str, metric: str, by_seed: list[pd.Series]) -> None:
        table = pd.concat(by_seed, axis=1)
        out.setdefault(variant, {})[f"items_{metric}"] = {
            str(k): [float(v) for v in row] for k, row in zip(table.index, table.to_numpy(),
                                                             strict=True)}

    for (variant, metric), by_seed in per.items():
        if sorted(by_seed) == seeds:
            put(variant, metric, [by_seed[s] for s in seeds])
        elif len(by_seed) == 1:  # deterministic baseline, scored once
            (only,) = by_seed.values()
            put(variant, metric, [only] * len(seeds))
    best = scores[scores["variant"] == "best_trivial"]
    rand = scores[scores["variant"] == "random"]
    for metric in {m for (_v, m) in per}:
        if ("prior", metric) not in per or ("random", metric) not in per:
            continue
        (prior_items,) = per[("prior", metric)].values()
        picked = []
        for seed in seeds:
            b = best[(best["seed"] == seed) & (best["metric"] == metric)]["value"]
            r = rand[(rand["seed"] == seed) & (rand["metric"] == metric)]["value"]
            use_random = len(b) and len(r) and float(b.iloc[0]) == float(r.iloc[0])
            picked.append(per[("random", metric)][seed] if use_random else prior_items)
        put("best_trivial", metric, picked)
    return out
