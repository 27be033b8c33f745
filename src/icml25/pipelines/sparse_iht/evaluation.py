"""From the experiment tables to per-variant metrics and the claim checks.

``variant_metrics`` gives every variant the same metric names (per-seed lists; NaN where a
metric does not apply) so MLflow lines them up. ``claim_metrics`` adds derived checks under
``<variant>:<check>`` keys: per-seed values the claims pair by seed (largest rise of a seed's gap
curve, per-seed wins, relative differences, plateau contrasts), plus the medians, seed fractions
and monotonicity counts of the seed-median curves for the report. Every number comes from the
run's own tables.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

FIRST_ORDER = ("iht_2sp", "iht_then_project", "exact_iht", "iht_2sp_warm", "lasso",
               "lasso_refit", "omp_project", "dense_reference")
SMALL = ("iht_2sp", "iht_then_project", "exact_iht")
#: Variants whose every iterate must lie in B0(k) ∩ Γ (the 2SP methods).
TWO_STEP = ("iht_2sp", "iht_2sp_warm", "hsg_ht_2sp", "hzo_ht_2sp")
ROLES = {"iht_2sp": "method", "hsg_ht_2sp": "method", "hzo_ht_2sp": "method",
         "iht_2sp_warm": "ablation"}
#: What each variant is, logged as MLflow params of its child run.
DESCRIPTIONS = {
    "iht_2sp": {"projection": "2SP: Π_Γ(H_k(·))", "gradient": "full", "step": "1/L"},
    "iht_then_project": {"projection": "H_k, one 2SP at the end", "gradient": "full",
                         "step": "1/L"},
    "exact_iht": {"projection": "exact onto B0(k) ∩ Γ (closed form)", "gradient": "full",
                  "step": "1/L"},
    "iht_2sp_warm": {"projection": "2SP", "gradient": "full", "step": "1/L",
                     "start": "dense constrained reference"},
    "lasso": {"solver": "sklearn lasso_path", "support": "largest with <= k non-zeros",
              "feasible": "2SP"},
    "lasso_refit": {"solver": "sklearn lasso_path + cvxpy CLARABEL refit with Γ"},
    "omp_project": {"solver": "sklearn OrthogonalMatchingPursuit", "feasible": "2SP"},
    "dense_reference": {"projection": "Π_Γ (no sparsity)", "gradient": "full", "step": "1/L"},
    "hsg_ht_2sp": {"projection": "2SP", "gradient": "mini-batch, b_t = min(n, ceil(b0 tau^t))",
                   "step": "1/max(L, L_batch)"},
    "hzo_ht_2sp": {"projection": "2SP", "gradient": "zeroth order, q_t = ceil(q0 rho_q^t)",
                   "step": "q_t/((q_t + d) L)"},
    "exhaustive_best": {"solver": "every subset of at most k assets, closed-form KKT points",
                        "used_in": "index tracking (R*)"},
}
#: Index-tracking metrics (``index.<dataset>.k<k>.<metric>``).
INDEX_METRICS = ("objective", "gap_best", "te_in", "te_out", "nnz")


def ratio_key(ratio: float) -> str:
    return f"k{ratio:g}"


def _per_seed(frame: pd.DataFrame, column: str, seeds: list[int]) -> list[float]:
    values = frame.set_index("seed")[column].reindex(seeds)
    return [float(v) for v in values]


REAL_METRICS = {"breast_cancer": ("train_objective", "test_objective", "test_accuracy"),
                "diabetes": ("train_objective", "test_objective")}


def variant_metrics(synthetic: pd.DataFrame, small: pd.DataFrame, stochastic: pd.DataFrame,
                    zeroth: pd.DataFrame, seeds: list[int],
                    real: pd.DataFrame | None = None, index: pd.DataFrame | None = None,
                    index_real: pd.DataFrame | None = None) -> dict[str, dict[str, list[float]]]:
    """``{variant: {metric: per-seed values}}`` with identical metric names for every variant.

    Index tracking on generated markets gives per-seed values; on real prices (one
    deterministic instance per index, seed -1) a single value per metric."""
    nan = [math.nan] * len(seeds)
    settings = list(dict.fromkeys(synthetic["setting"]))
    ratios = sorted(synthetic["k_ratio"].dropna().unique())
    small_settings = list(dict.fromkeys(small["setting"]))
    small_ratios = sorted(small["k_ratio"].unique())
    zo_variants = list(dict.fromkeys(zeroth["method"]))
    tracking = pd.concat([f for f in (index, index_real) if f is not None and len(f)],
                         ignore_index=True) if any(
        f is not None and len(f) for f in (index, index_real)) else pd.DataFrame()
    extra = [m for m in dict.fromkeys(tracking.get("method", [])) if m not in FIRST_ORDER]
    variants = [*FIRST_ORDER, *extra, "hsg_ht_2sp", *zo_variants]
    out: dict[str, dict[str, list[float]]] = {v: {} for v in variants}

    for v in variants:
        metrics = out[v]
        rows = synthetic[synthetic["method"] == v]
        for s in settings:
            for r in ratios:
                at = rows[(rows["setting"] == s)
                          & ((rows["k_ratio"] == r) | rows["k_ratio"].isna())]
                for m in ("gap", "recall", "precision", "nnz", "violation",
                          "iterations_to_tol"):
                    metrics[f"{s}.{ratio_key(r)}.{m}"] = (
                        _per_seed(at, m, seeds) if len(at) else nan)
        small_rows = small[small["method"] == v]
        for s in small_settings:
            for r in small_ratios:
                at = small_rows[(small_rows["setting"] == s) & (small_rows["k_ratio"] == r)]
                metrics[f"small.{s}.{ratio_key(r)}.gap_best"] = (
                    _per_seed(at, "gap_best", seeds) if len(at) else nan)
        metrics["max_violation"] = (
            list(rows.groupby("seed")["max_violation"].max().reindex(seeds).astype(float))
            if len(rows) else nan)
        for key in ("rel_vs_equal_ifo", "rel_vs_full", "ifo_ratio", "hsg_ifo"):
            metrics[f"stochastic.{key}"] = (_per_seed(stochastic, key, seeds)
                                            if v == "hsg_ht_2sp" else nan)
        zrows = zeroth[zeroth["method"] == v]
        for key in ("excess_final", "excess_tail", "support_excess_final",
                    "support_excess_tail", "queries", "recall"):
            metrics[f"zo.{key}"] = _per_seed(zrows, key, seeds) if len(zrows) else nan
        if real is not None and len(real):
            for dataset, names in REAL_METRICS.items():
                at_set = real[(real["dataset"] == dataset)]
                for k in sorted(at_set["k"].unique()):
                    at = at_set[(at_set["k"] == k) & (at_set["method"] == v)]
                    for m in names:
                        metrics[f"{dataset}.k{k}.{m}"] = _per_seed(at, m, seeds) if len(at) else nan
        for dataset in dict.fromkeys(tracking.get("dataset", [])):
            at_set = tracking[tracking["dataset"] == dataset]
            unit = seeds if (at_set["seed"] != -1).all() else [-1]
            for k in sorted(at_set["k"].unique()):
                at = at_set[(at_set["k"] == k) & (at_set["method"] == v)]
                for m in INDEX_METRICS:
                    metrics[f"index.{dataset}.k{k}.{m}"] = (
                        _per_seed(at, m, unit) if len(at) else [math.nan] * len(unit))
        if v == "hsg_ht_2sp":
            metrics["max_violation"] = _per_seed(stochastic, "hsg_max_violation", seeds)
        elif len(zrows):
            metrics["max_violation"] = _per_seed(zrows, "max_violation", seeds)
    return out


def _median_by_ratio(frame: pd.DataFrame, method: str, setting: str, column: str) -> pd.Series:
    rows = frame[(frame["method"] == method) & (frame["setting"] == setting)]
    return rows.groupby("k_ratio")[column].median().sort_index()


def _increases(series: pd.Series) -> int:
    """How many times a sequence rises from one k ratio to the next (0: monotone falling)."""
    return int(np.sum(np.diff(series.to_numpy()) > 0))


def _largest_rise(frame: pd.DataFrame, method: str, setting: str, column: str,
                  seeds: list[int]) -> list[float]:
    """Per seed: the largest step ``gap(k_{j+1}) - gap(k_j)`` along the k grid (< 0: the seed's
    gap falls at every step of the grid)."""
    rows = frame[(frame["method"] == method) & (frame["setting"] == setting)]
    table = rows.pivot_table(index="seed", columns="k_ratio", values=column).sort_index(axis=1)
    rise = np.diff(table.to_numpy(dtype=float), axis=1).max(axis=1)
    return [float(v) for v in pd.Series(rise, index=table.index).reindex(seeds)]


def claim_metrics(metrics: dict[str, dict[str, list[float]]], synthetic: pd.DataFrame,
                  small: pd.DataFrame, stochastic: pd.DataFrame, zeroth: pd.DataFrame,
                  seeds: list[int], relax_ratio: float, recall_ratio: float,
                  szoht_q: list[int]) -> dict[str, dict]:
    """The variant metrics plus the derived checks the claims are judged on."""
    out: dict[str, dict] = {v: dict(m) for v, m in metrics.items()}
    settings = list(dict.fromkeys(synthetic["setting"]))
    rk = ratio_key(relax_ratio)

    trade = {}
    for s in settings:
        med = _median_by_ratio(synthetic, "iht_2sp", s, "gap")
        trade[f"{s}.median_gap_increases"] = _increases(med)
        trade[f"{s}.largest_gap_rise"] = _largest_rise(synthetic, "iht_2sp", s, "gap", seeds)
        rows = synthetic[(synthetic["method"] == "iht_2sp") & (synthetic["setting"] == s)
                         & (synthetic["k_ratio"] == recall_ratio)]
        trade[f"{s}.recall_{ratio_key(recall_ratio)}"] = _per_seed(rows, "recall", seeds)
    for s in dict.fromkeys(small["setting"]):
        med = _median_by_ratio(small, "iht_2sp", s, "gap_best")
        trade[f"small.{s}.median_gap_best_increases"] = _increases(med)
        trade[f"small.{s}.largest_gap_best_rise"] = _largest_rise(small, "iht_2sp", s,
                                                                   "gap_best", seeds)
    out["iht_2sp:trade_off"] = trade

    versus, exact, medians = {}, {}, {m: {} for m in FIRST_ORDER}
    for s in settings:
        rows = synthetic[(synthetic["setting"] == s) & (synthetic["k_ratio"] == relax_ratio)]
        obj = rows.pivot(index="seed", columns="method", values="objective").reindex(seeds)
        versus[f"{s}.{rk}.le_iht_then_project"] = [
            float(a <= b) for a, b in zip(obj["iht_2sp"], obj["iht_then_project"], strict=True)]
        diff = (obj["iht_2sp"] - obj["exact_iht"]) / obj["exact_iht"]
        exact[f"{s}.{rk}.median_abs_rel_diff"] = float(np.median(np.abs(diff)))
        exact[f"{s}.{rk}.rel_diff"] = [float(x) for x in diff]
        for m in FIRST_ORDER:
            at = synthetic[(synthetic["setting"] == s) & (synthetic["method"] == m)
                           & ((synthetic["k_ratio"] == relax_ratio) | synthetic["k_ratio"].isna())]
            medians[m][f"{s}.{rk}.gap"] = float(at["gap"].median())
    out["iht_2sp:vs_iht_then_project"] = versus
    out["iht_2sp:vs_exact_iht"] = exact
    for m, values in medians.items():
        out[f"{m}:median"] = values

    per_seed_violation = [
        float(np.nanmax([metrics[v]["max_violation"][i] for v in TWO_STEP if v in metrics]))
        for i in range(len(seeds))]
    # the feasibility claim is "every iterate, every seed": the worst seed, one number
    out["2sp_methods"] = {"max_violation": per_seed_violation,
                          "max_violation_all_seeds": float(np.max(per_seed_violation))}

    q_lo, q_hi = min(szoht_q), max(szoht_q)

    def ratio(metric: str) -> float:
        lo = float(np.mean(metrics[f"szoht_q{q_lo}"][metric]))
        hi = float(np.mean(metrics[f"szoht_q{q_hi}"][metric]))
        return lo / hi if hi > 0 else math.inf

    def contrast(metric: str) -> list[float]:
        """Per seed: plateau at q_min minus 2 x plateau at q_max (> 0 on average exactly when
        the ratio of the seed means exceeds 2)."""
        lo = np.asarray(metrics[f"szoht_q{q_lo}"][metric], dtype=float)
        hi = np.asarray(metrics[f"szoht_q{q_hi}"][metric], dtype=float)
        return [float(x) for x in lo - 2.0 * hi]

    out["szoht:plateau"] = {
        "excess_ratio_qmin_over_qmax": ratio("zo.excess_tail"),
        "support_excess_ratio_qmin_over_qmax": ratio("zo.support_excess_tail"),
        "excess_qmin_minus_2x_qmax": contrast("zo.excess_tail"),
        "support_excess_qmin_minus_2x_qmax": contrast("zo.support_excess_tail"),
        "q_ratio": q_hi / q_lo,
    }
    # HZO's end point against SZOHT's plateau at the largest q, on the same measure
    out["hzo_ht_2sp:end"] = {"zo.support_excess": metrics["hzo_ht_2sp"]["zo.support_excess_final"],
                             "zo.excess": metrics["hzo_ht_2sp"]["zo.excess_final"]}
    out["szoht_qmax:plateau"] = {
        "zo.support_excess": metrics[f"szoht_q{q_hi}"]["zo.support_excess_tail"],
        "zo.excess": metrics[f"szoht_q{q_hi}"]["zo.excess_tail"]}
    rel = np.asarray(metrics["hsg_ht_2sp"]["stochastic.rel_vs_equal_ifo"], dtype=float)
    out["hsg_ht_2sp:vs_iht_2sp"] = {"median_abs_rel_vs_equal_ifo": float(np.median(np.abs(rel)))}
    return out
