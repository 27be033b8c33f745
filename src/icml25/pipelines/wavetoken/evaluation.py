"""Scoring and aggregation of the wavetoken forecasts (spec "Metrics and anchors").

Per (variant, seed, dataset): WQL and MASE; per variant: the Chronos aggregate relative scores
(geometric mean of ratios to seasonal naive) over dataset groups, the synthetic sets' ratios and
the average rank. Plain pandas/numpy, usable without Kedro.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np
import pandas as pd

from icml25.pipelines.wavetoken import metrics as fm
from icml25.pipelines.wavetoken.frames import EvalSet, frame_to_quantiles

logger = logging.getLogger(__name__)

#: dataset groups of the aggregate scores; ``real`` is the claims' "real test sets"
GROUPS = {"real": ("in_domain", "zero_shot"), "in_domain": ("in_domain",),
          "zero_shot": ("zero_shot",)}


def score_forecasts(sets: Iterable[EvalSet], forecast_tables: Iterable[pd.DataFrame],
                    levels: list[float]) -> pd.DataFrame:
    """WQL and MASE of every (variant, seed, dataset) of the quantile-forecast tables."""
    by_name = {s.name: s for s in sets}
    rows = []
    for table in forecast_tables:
        for (variant, seed, dataset), g in table.groupby(["variant", "seed", "dataset"]):
            s = by_name[dataset]
            q = frame_to_quantiles(g, levels)
            median = q[:, levels.index(0.5), :]
            rows.append({
                "variant": variant, "seed": int(seed), "dataset": dataset, "group": s.group,
                "wql": fm.weighted_quantile_loss(s.futures, q, levels),
                "mase": fm.mase(s.futures, median, s.histories, s.season),
            })
    return pd.DataFrame(rows)


def summarise_metrics(scores: pd.DataFrame) -> dict[str, dict[str, list[float]]]:
    """Per variant, per-seed lists of every headline metric (identical names for all variants).

    ``agg_rel_<m>_<group>``: geometric mean over the group's datasets of the ratio to seasonal
    naive (:func:`~icml25.pipelines.wavetoken.metrics.aggregate_relative`, Chronos
    ``agg-relative-score.py``); ``rel_<m>_<dataset>`` for the synthetic sets;
    ``avg_rank_<m>_real``: mean rank over real datasets (seed-mean scores, 1 = best).
    """
    base = scores[scores["variant"] == "seasonal_naive"].groupby("dataset")[["wql", "mase"]].mean()
    undefined = base.index[~(np.isfinite(base).all(axis=1) & (base > 0).all(axis=1))]
    if len(undefined):
        logger.warning("wavetoken: relative scores undefined (left out of the aggregates) on %s",
                       sorted(undefined))
    out: dict[str, dict[str, list[float]]] = {}
    for (variant, _seed), g in scores.groupby(["variant", "seed"]):
        metrics = out.setdefault(variant, {})
        for m in ("wql", "mase"):
            for group, members in GROUPS.items():
                rows = g[g["group"].isin(members)]
                agg = fm.aggregate_relative({
                    variant: dict(zip(rows["dataset"], rows[m], strict=True)),
                    "seasonal_naive": base[m].to_dict(),
                })[variant]
                metrics.setdefault(f"agg_rel_{m}_{group}", []).append(agg)
            for _, row in g[g["group"].isin(("kernelsynth", "stress"))].iterrows():
                metrics.setdefault(f"rel_{m}_{row['dataset']}", []).append(
                    row[m] / base.loc[row["dataset"], m])
    real = scores[scores["group"].isin(GROUPS["real"])]
    for m in ("wql", "mase"):
        table = real.groupby(["dataset", "variant"])[m].mean().unstack("variant")
        ranks = fm.average_rank({v: table[v].to_dict() for v in table.columns})
        for variant, rank in ranks.items():
            out[variant][f"avg_rank_{m}_real"] = [rank]
    return out



def per_dataset_scores(scores: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """``{dataset: {variant: {"wql", "mase"}}}`` seed means, for ``metrics.json``."""
    table = scores.groupby(["dataset", "variant"])[["wql", "mase"]].mean()
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (dataset, variant), row in table.iterrows():
        out.setdefault(dataset, {})[variant] = {"wql": row["wql"], "mase": row["mase"]}
    return out
