"""Scoring and aggregation of the wavetoken forecasts (docs/papers/wavetoken.md, "Metrics").

Per (variant, seed, dataset): WQL and MASE; per variant: the Chronos aggregate relative scores
(geometric mean of ratios to seasonal naive) over dataset groups, the synthetic sets' ratios and
the average rank. For the claims, the same scores per unit (:func:`unit_metrics`): per real
dataset the log ratio to seasonal naive, per synthetic series its share of the set's relative
WQL. Plain pandas/numpy, usable without Kedro.
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
#: groups whose claims pair over series (synthetic sets: independent draws of one generator)
SERIES_GROUPS = ("kernelsynth", "stress")


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


def score_series(sets: Iterable[EvalSet], forecast_tables: Iterable[pd.DataFrame],
                 levels: list[float], groups: tuple[str, ...] = SERIES_GROUPS) -> pd.DataFrame:
    """Each series' share of its set's WQL, for the sets of ``groups``.

    ``wql_share`` of series ``i`` of a set of ``n`` = ``n · mean_q 2 Σ_t |(y - ŷ_q)(1{y ≤ ŷ_q} - q)|
    / Σ_{all series, t} |y|``: the mean of the shares over the set's series is the set's WQL
    exactly (:func:`~icml25.pipelines.wavetoken.metrics.weighted_quantile_loss`), so a claim can
    pair over series and still speak about the set's WQL.
    """
    by_name = {s.name: s for s in sets if s.group in groups}
    q = np.asarray(levels, dtype=np.float64)
    rows = []
    for table in forecast_tables:
        for (variant, seed, dataset), g in table.groupby(["variant", "seed", "dataset"]):
            s = by_name.get(dataset)
            if s is None:
                continue
            fc = frame_to_quantiles(g, levels)
            y = np.asarray(s.futures, dtype=np.float64)[:, None, :]
            loss = 2.0 * np.abs((y - fc) * ((y <= fc).astype(np.float64) - q[None, :, None]))
            denom = float(np.abs(s.futures).sum())
            share = (loss.sum(axis=2).mean(axis=1) * len(s.futures) / denom if denom > 0
                     else np.full(len(s.futures), np.nan))
            rows += [{"variant": variant, "seed": int(seed), "dataset": dataset,
                      "group": s.group, "series": i, "wql_share": float(v)}
                     for i, v in enumerate(share)]
    return pd.DataFrame(rows, columns=["variant", "seed", "dataset", "group", "series",
                                       "wql_share"])


def unit_metrics(scores: pd.DataFrame, series_scores: pd.DataFrame
                 ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per variant, per-unit per-seed values of the claim metrics (``{unit: [per-seed]}``).

    ``log_rel_<m>_real``: per real dataset, ``log(score / seasonal naive's score)``; the mean
    over datasets is ``log agg_rel_<m>_real`` (the same datasets: those with a defined ratio).
    ``rel_wql_<set>_by_series``: per synthetic series, its WQL share
    (:func:`score_series`) over seasonal naive's WQL of the set; the mean over series is
    ``rel_wql_<set>``. Seeds in ascending order.
    """
    base = scores[scores["variant"] == "seasonal_naive"].groupby("dataset")[["wql", "mase"]].mean()
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    real = scores[scores["group"].isin(GROUPS["real"])].sort_values(["variant", "seed"])
    for m in ("wql", "mase"):
        ok = base.index[np.isfinite(base[m]) & (base[m] > 0)]
        for (variant, dataset), g in real[real["dataset"].isin(ok)].groupby(
                ["variant", "dataset"]):
            values = g[m].to_numpy(dtype=np.float64) / base.loc[dataset, m]
            with np.errstate(divide="ignore", invalid="ignore"):
                logs = np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)
            out.setdefault(variant, {}).setdefault(f"log_rel_{m}_real", {})[str(dataset)] = [
                float(v) for v in logs]
    series = series_scores.sort_values(["variant", "seed", "series"])
    for (variant, dataset, i), g in series.groupby(["variant", "dataset", "series"]):
        b = base["wql"].get(dataset, np.nan)
        rel = (g["wql_share"].to_numpy(dtype=np.float64) / b if np.isfinite(b) and b > 0
               else np.full(len(g), np.nan))
        out.setdefault(variant, {}).setdefault(f"rel_wql_{dataset}_by_series", {})[
            f"series_{int(i)}"] = [float(v) for v in rel]
    return out


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
