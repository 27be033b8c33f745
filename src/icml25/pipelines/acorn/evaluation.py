"""Scoring of every variant's predictions with the paper's metrics (spec ``acorn.md`` §2)."""

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
    return metric.endswith(("_bca", "_tca", "_acc"))


def score_predictions(meta: pd.DataFrame, preds: pd.DataFrame, spacing: float,
                      seeds: Sequence[int]) -> pd.DataFrame:
    """One row (variant, seed, metric, value) per metric of every variant and seed.

    Deterministic baselines (classical DSP, prior) are scored once (seed 0); ``best_trivial``
    is, per seed, the better of the prior and that seed's random predictor on each metric.
    """
    if preds.empty:
        raise ValueError("acorn evaluation: no predictions to score")
    labels = meta.set_index("item")["label"]
    rows = []
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
