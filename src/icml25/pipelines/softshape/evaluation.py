"""The paper's metrics from the result rows: accuracy per data set, mean
accuracy, average rank, wins/ties/losses, Wilcoxon signed-rank p-value (>= 5 data sets),
train/inference time, expert load, the MoE balance loss and the CBF interpretability ratio
(on the sparsifying layer's scores).

Every variant reports the same metric names (NaN where a variant did not run on a set), as a
list over its seeds, which :mod:`icml25.core.claims` pairs seed by seed; ``dataset_units`` gives
the per-data-set tables for the claims that pair over data sets.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata, wilcoxon

SOFTSHAPE_FAMILY = ("softshape", "hard", "no_moe", "no_inception", "no_sparsify", "mean_pool")


def _per_seed(rows: pd.DataFrame, column: str, reduce: str = "mean") -> dict[int, float]:
    """{seed: value}: ``column`` averaged over folds (``mean``) or summed (``sum``)."""
    grouped = rows.groupby("seed")[column]
    out = grouped.mean() if reduce == "mean" else grouped.sum()
    return {int(k): float(v) for k, v in out.items()}


def _main_variants(results: pd.DataFrame) -> list[str]:
    return [v for v in results["variant"].unique()
            if v == "softshape" or v not in SOFTSHAPE_FAMILY]


def average_ranks(results: pd.DataFrame, datasets: list[str]) -> dict[str, float]:
    """Average rank (1 = best, ties averaged) of SoftShape and the baselines over the data sets,
    on the seed- and fold-mean accuracy. Ablations are not ranked."""
    main = _main_variants(results)
    acc = (results[results["variant"].isin(main)]
           .groupby(["dataset", "variant"])["accuracy"].mean().unstack())
    acc = acc.reindex(index=datasets, columns=main)
    complete = acc.dropna(axis=0)
    if complete.empty:
        return {v: float("nan") for v in main}
    ranks = np.vstack([rankdata(-row.to_numpy()) for _, row in complete.iterrows()])
    return {v: float(r) for v, r in zip(complete.columns, ranks.mean(axis=0), strict=True)}


def _mean_over(per_ds: dict[str, dict[int, float]], names: list[str],
               seeds: list[int]) -> list[float]:
    """Per seed: the mean accuracy over ``names`` (NaN if a set is missing for that seed)."""
    if not names:
        return [np.nan] * len(seeds)
    return [float(np.mean([per_ds[n].get(s, np.nan) for n in names])) for s in seeds]


def variant_metrics(results: pd.DataFrame, datasets: list[str], ablation_datasets: list[str],
                    seeds: list[int]) -> dict[str, dict[str, list[float]]]:
    """``{variant: {metric: [value per seed]}}`` with identical metric names for all."""
    ranks = average_ranks(results, datasets)
    metrics: dict[str, dict[str, list[float]]] = {}
    for variant, rows in results.groupby("variant", sort=False):
        run_seeds = sorted(int(s) for s in rows["seed"].unique())
        m: dict[str, list[float]] = {}
        per_ds = {}
        for name in datasets:
            d = rows[rows["dataset"] == name]
            values = _per_seed(d, "accuracy") if len(d) else {}
            per_ds[name] = values
            m[f"acc/{name}"] = [values.get(s, np.nan) for s in run_seeds]

        m["mean_acc"] = _mean_over(per_ds, datasets, run_seeds)
        m["mean_acc_ablation_sets"] = _mean_over(per_ds, ablation_datasets, run_seeds)
        m["avg_rank"] = [ranks.get(variant, np.nan)]
        for column in ("train_seconds", "infer_seconds"):
            sums = _per_seed(rows, column, "sum")
            m[column] = [sums[s] for s in run_seeds]
        if "expert_max_share" in rows and rows["expert_max_share"].notna().any():
            m["expert_max_share"] = list(_per_seed(rows, "expert_max_share").values())
        else:
            m["expert_max_share"] = [np.nan]
        # the MoE balance loss (aux = cv²(importance) + cv²(load), in [0, 2K]), mean over data
        # sets: on the test set and over the post-warm-up training epochs
        for metric, column in (("moe_balance_loss", "balance_loss_test"),
                               ("moe_balance_loss_train", "balance_loss_train")):
            if column in rows and rows[column].notna().any():
                m[metric] = list(_per_seed(rows, column).values())
            else:
                m[metric] = [np.nan]
        cbf = rows[rows["dataset"] == "CBF"]
        # cbf_score_ratio: the sparsifying layer's scores (the claim); layer 1 beside it
        for metric, column in (("cbf_score_ratio", "score_ratio"),
                               ("cbf_score_ratio_layer1", "score_ratio_layer1")):
            if column in rows and len(cbf) and cbf[column].notna().any():
                m[metric] = list(_per_seed(cbf, column).values())
            else:
                m[metric] = [np.nan]
        metrics[str(variant)] = m
    if "softshape" not in metrics:
        raise ValueError("evaluate: no SoftShape results")
    return metrics


def _wtl(a: pd.Series, b: pd.Series) -> dict[str, int]:
    diff = (a - b).dropna()
    return {"wins": int((diff > 1e-12).sum()), "ties": int((diff.abs() <= 1e-12).sum()),
            "losses": int((diff < -1e-12).sum())}


def summarise(results: pd.DataFrame, datasets: list[str]) -> dict[str, Any]:
    """The extra sections of ``metrics.json``: per-data-set table, SoftShape against each
    variant, Wilcoxon, expert load per data set, timings and model-selection facts."""
    acc = results.groupby(["dataset", "variant"])["accuracy"].agg(["mean", "std", "count"])
    per_dataset: dict[str, dict[str, Any]] = {}
    for (name, variant), row in acc.iterrows():
        per_dataset.setdefault(name, {})[variant] = {
            "mean": float(row["mean"]), "std": float(row["std"]) if row["count"] > 1 else 0.0,
            "n_runs": int(row["count"])}
    table = acc["mean"].unstack()
    versus: dict[str, Any] = {}
    if "softshape" in table:
        for other in table.columns:
            if other == "softshape":
                continue
            pair = table[["softshape", other]].dropna()
            entry: dict[str, Any] = _wtl(pair["softshape"], pair[other])
            entry["n_datasets"] = len(pair)
            entry["mean_difference"] = float((pair["softshape"] - pair[other]).mean()) \
                if len(pair) else float("nan")
            diffs = (pair["softshape"] - pair[other]).to_numpy()
            entry["wilcoxon_p"] = (float(wilcoxon(diffs).pvalue)
                                   if len(pair) >= 5 and np.any(diffs != 0) else None)
            versus[other] = entry
    load_summary: dict[str, Any] = {}
    soft = results[results["variant"] == "softshape"]
    for name, rows in soft.groupby("dataset", sort=False):
        loads = [json.loads(x) for x in rows["expert_load"]]
        shares = [np.asarray(x, dtype=float) / max(sum(x), 1) for x in loads]
        balance = (rows["balance_loss_test"].astype(float).tolist()
                   if "balance_loss_test" in rows else [])
        load_summary[str(name)] = {
            "per_run": loads,
            "balance_loss_per_run": balance,
            "mean_share": np.mean(shares, axis=0).tolist(),
            "runs_on_one_expert": int(sum(s.max() >= 1.0 for s in shares)),
            "n_runs": len(loads),
        }
    timing = (results.groupby(["dataset", "variant"])[["train_seconds", "infer_seconds"]]
              .mean().reset_index())
    timing_out: dict[str, Any] = {}
    for _, row in timing.iterrows():
        timing_out.setdefault(row["dataset"], {})[row["variant"]] = {
            "train_seconds": float(row["train_seconds"]),
            "infer_seconds": float(row["infer_seconds"])}
    selection = {}
    torch_rows = results[results["variant"].isin([*SOFTSHAPE_FAMILY, "fcn"])]
    for (name, variant), rows in torch_rows.groupby(["dataset", "variant"]):
        selection.setdefault(name, {})[variant] = {
            "accuracy_best_val": float(rows["accuracy"].mean()),
            "accuracy_last_epoch": float(rows["accuracy_last_epoch"].mean()),
            "best_epoch": rows["best_epoch"].astype(int).tolist(),
            "epochs_run": rows["epochs_run"].astype(int).tolist(),
        }
    return {"per_dataset": per_dataset, "softshape_vs": versus, "expert_load": load_summary,
            "timing": timing_out, "model_selection": selection, "datasets": datasets}


#: variants without a seed (fit once, on the first seed): see ``aeon_baselines.run_aeon``
DETERMINISTIC = ("nn_dtw",)


def dataset_units(results: pd.DataFrame, datasets: list[str], seeds: list[int]
                  ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per-data-set accuracies for claims that pair over data sets (``unit: dataset``):
    ``{variant: {"acc_by_dataset": {dataset: [accuracy per seed of seeds]}}}`` (fold mean).

    A deterministic variant (1-NN DTW, fit once) repeats its one accuracy for every seed, as it
    would be the same on each; a variant missing a data set or a seed gets no table (its claims
    then stop with a clear error instead of pairing different seeds).
    """
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for variant, rows in results.groupby("variant", sort=False):
        table: dict[str, list[float]] = {}
        for name in datasets:
            values = _per_seed(rows[rows["dataset"] == name], "accuracy")
            if variant in DETERMINISTIC and len(values) == 1:
                table[name] = [next(iter(values.values()))] * len(seeds)
            elif sorted(values) == sorted(seeds):
                table[name] = [values[s] for s in seeds]
        if len(table) == len(datasets):
            out[str(variant)] = {"acc_by_dataset": table}
    return out
