"""Metrics and figures of the quantum_rl experiments (docs/papers/quantum_rl.md, "Metrics").

* cumulative (pseudo-)regret ``R(T)`` and ``R(T/10)``, the realised regret ``T rho* - sum r_t``, and the last-decade log-log slope
  ``d log R / d log t`` fitted on the checkpoints in ``[T/10, T]``;
* number of epochs, and its ratio to UCRL2's bound ``S A log2(8 T / (S A))`` (Jaksch et al. 2010,
  Prop. 18);
* confidence-set coverage: the fraction of (epoch, s, a) with ``N(s, a) > 0`` whose true row lies in
  the l1 ball (pairs never visited have the trivial radius and are not counted);
* throughput: environment steps per second of the whole agent loop, milliseconds per EVI call;
* estimator error vs ``n`` (mean over p of the mean absolute error) with fitted log-log slopes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from icml25.pipelines.quantum_rl.amplitude_estimation import loglog_slope

CURVE_COLUMNS = ("variant", "env", "seed", "t", "regret", "realised_regret")


def check_curves(curves: pd.DataFrame) -> None:
    """Refuse a regret table that is empty, lacks columns or holds NaN/inf (never a silent NaN)."""
    missing = [c for c in CURVE_COLUMNS if c not in curves.columns]
    if missing:
        raise ValueError(f"regret_curves: missing columns {missing}; expected {list(CURVE_COLUMNS)}")
    if curves.empty:
        raise ValueError("regret_curves: empty table; run_agents produced no runs")
    values = curves[["t", "regret", "realised_regret"]].to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("regret_curves: NaN or infinite values in t / regret")
    if (curves.t < 1).any():
        raise ValueError("regret_curves: checkpoints t must be >= 1")


def last_decade_slope(t: np.ndarray, regret: np.ndarray) -> float:
    """Slope of ``log R`` on ``log t`` over ``t in [T/10, T]``; NaN if some ``R <= 0`` there."""
    t, regret = np.asarray(t, float), np.asarray(regret, float)
    window = t >= t.max() / 10.0
    if window.sum() < 2 or np.any(regret[window] <= 0):
        return math.nan
    return loglog_slope(t[window], regret[window])


def epoch_bound(n_states: int, n_actions: int, horizon: int) -> float:
    """UCRL2's bound on the number of epochs, ``S A log2(8 T / (S A))`` (for ``T >= S A``)."""
    sa = n_states * n_actions
    return sa * math.log2(max(8.0 * horizon / sa, 2.0))


METRIC_STEMS = ("regret_T", "realised_regret_T", "regret_T10", "slope", "epochs", "epochs_over_bound", "coverage",
                "evi_ms", "steps_per_s")


def variant_metrics(curves: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame,
                    variants: list[str], envs: Mapping[str, tuple[int, int]],
                    seeds_of: Mapping[str, list[int]]) -> dict[str, dict[str, list[float]]]:
    """Per-seed metrics ``{variant: {f"{stem}_{env}": [value per seed]}}``, same names for all.

    A variant that did not run on an environment (or a metric that does not apply, such as the
    coverage of the oracle) gets ``[nan]``.
    """
    out: dict[str, dict[str, list[float]]] = {}
    for variant in variants:
        metrics: dict[str, list[float]] = {}
        for env, (S, A) in envs.items():
            vals: dict[str, list[float]] = {stem: [] for stem in METRIC_STEMS}
            for seed in seeds_of[variant]:
                c = curves[(curves.variant == variant) & (curves.env == env) & (curves.seed == seed)]
                if c.empty:
                    continue
                c = c.sort_values("t")
                T = int(c.t.max())
                vals["regret_T"].append(float(c.regret.iloc[-1]))
                vals["realised_regret_T"].append(float(c.realised_regret.iloc[-1]))
                t10 = c[c.t <= T // 10]
                vals["regret_T10"].append(float(t10.regret.iloc[-1]) if len(t10) else math.nan)
                vals["slope"].append(last_decade_slope(c.t.to_numpy(), c.regret.to_numpy()))
                e = epochs[(epochs.variant == variant) & (epochs.env == env)
                           & (epochs.seed == seed)]
                run = runs[(runs.variant == variant) & (runs.env == env) & (runs.seed == seed)]
                if e.empty:
                    for stem in ("epochs", "epochs_over_bound", "coverage", "evi_ms"):
                        vals[stem].append(math.nan)
                else:
                    vals["epochs"].append(float(len(e)))
                    vals["epochs_over_bound"].append(len(e) / epoch_bound(S, A, T))
                    visited = e.visited_pairs.sum()
                    vals["coverage"].append(float(e.covered_pairs.sum() / visited)
                                            if visited else math.nan)
                    vals["evi_ms"].append(1e3 * float(e.evi_seconds.mean()))
                vals["steps_per_s"].append(float(T / run.wall_seconds.iloc[0]))
            for stem, values in vals.items():
                metrics[f"{stem}_{env}"] = values or [math.nan]
        out[variant] = metrics
    return out


def estimator_slopes(table: pd.DataFrame) -> dict[str, dict[str, float | list[float]]]:
    """``{"estimator:<method>": {"error_slope": s, "error_at_max_n": e, "error_slope_per_seed":
    [s per seed]}}`` from the error table.

    The error is first averaged over the p-values (AE errors are a staircase in n for a single p);
    ``error_slope`` and ``error_at_max_n`` pool every seed's table, ``error_slope_per_seed`` fits
    each seed's table on its own (the claims pair over these). A table without a ``seed`` column
    counts as one seed.
    """
    if "seed" not in table.columns:
        table = table.assign(seed=0)
    out = {}
    for method, g in table.groupby("method"):
        mean = g.groupby("n").error.mean()
        per_seed = []
        for _, one in g.groupby("seed", sort=False):
            seed_mean = one.groupby("n").error.mean()
            per_seed.append(loglog_slope(seed_mean.index.to_numpy(), seed_mean.to_numpy()))
        out[f"estimator:{method}"] = {
            "error_slope": loglog_slope(mean.index.to_numpy(), mean.to_numpy()),
            "error_at_max_n": float(mean.iloc[-1]),
            "error_slope_per_seed": per_seed,
        }
    return out


# ---------------------------------------------------------------------------------- figures
def regret_figure(curves: pd.DataFrame, env: str, rho_star: float, variants: list[str],
                  subtitle: str = ""):
    """Cumulative regret (mean ± std over seeds) of ``variants`` against t, log-log (symlog y,
    so that the oracle's regret, which fluctuates around 0, stays visible)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    sub = curves[curves.env == env]
    for variant in variants:
        g = sub[sub.variant == variant]
        if g.empty:
            continue
        stats = g.groupby("t").regret.agg(["mean", "std"]).fillna(0.0)
        t = stats.index.to_numpy()
        ax.plot(t, stats["mean"], label=variant, lw=1.6)
        ax.fill_between(t, stats["mean"] - stats["std"], stats["mean"] + stats["std"], alpha=0.15)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=10.0)
    ax.set_xlabel("step t")
    ax.set_ylabel("cumulative regret R(t)")
    ax.set_title(f"{env} (rho* = {rho_star:.4f}){subtitle}; mean ± std over seeds", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def estimator_figure(table: pd.DataFrame, slopes: Mapping[str, Mapping[str, float]]):
    """Mean |p_hat - p| against n for both estimators, with the fitted slopes in the legend."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    for method, g in table.groupby("method"):
        mean = g.groupby("n").error.mean()
        slope = slopes[f"estimator:{method}"]["error_slope"]
        ax.loglog(mean.index, mean.to_numpy(), "o-", label=f"{method} (slope {slope:.2f})")
    ax.set_xlabel("samples / oracle calls n")
    ax.set_ylabel("mean |estimate - p| (avg over p)")
    ax.set_title("Mean estimation: quantum (median-of-K AE) vs classical")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def constants_figure(summary: pd.DataFrame, env: str, delta: float):
    """R(T) and coverage (with the 1 - delta line) of the optimistic agents against the radius
    constant c."""
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    for family, g in summary.groupby("family"):
        g = g.sort_values("c")
        ax1.errorbar(g.c, g.regret_T, yerr=g.regret_T_std, marker="o", label=family, capsize=3)
        ax2.plot(g.c, g.coverage, marker="o", label=family)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("radius constant c")
    ax1.set_ylabel("R(T)")
    ax2.axhline(1.0 - delta, color="grey", ls="--", lw=1, label=f"1 - delta = {1 - delta:g}")
    ax2.set_xscale("log")
    ax2.set_xlabel("radius constant c")
    ax2.set_ylabel("coverage")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{env}: effect of the radius constant")
    fig.tight_layout()
    return fig


def per_mdp_comparison(metrics: Mapping[str, Mapping[str, list[float]]], method: str,
                       others: list[str], envs: list[str]) -> dict[str, dict[str, float]]:
    """Where the method's regret advantage holds: per environment, the method's mean regret at
    ``T`` and, against every variant of ``others`` that ran there, the mean paired difference
    ``R_method(T) - R_other(T)`` over the seeds both ran and the fraction of those seeds on which
    the method's regret is lower (1.0: lower on every seed). A variant that did not run on an
    environment is left out of it."""
    out: dict[str, dict[str, float]] = {}
    for env in envs:
        key = f"regret_T_{env}"
        mine = np.asarray(metrics[method][key], dtype=float)
        if not np.isfinite(mine).any():
            continue
        row = {"regret_T.method": float(np.nanmean(mine))}
        for other in others:
            theirs = np.asarray(metrics[other][key], dtype=float)
            both = np.isfinite(mine) & np.isfinite(theirs) if theirs.shape == mine.shape else None
            if both is None or not both.any():
                continue
            diff = mine[both] - theirs[both]
            row[f"regret_T_minus.{other}"] = float(diff.mean())
            row[f"seeds_lower_than.{other}"] = float((diff < 0).mean())
        out[env] = row
    return out


def mlflow_summary(optimal: Mapping[str, Mapping[str, Any]], circuit: Mapping[str, Any],
                   per_mdp: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The pipeline-run metrics beside the claim counts: ``rho_star.<env>`` (RVI) and
    ``rho_star_lp.<env>`` (occupancy LP), the circuit check (``circuit.skipped``,
    ``circuit.max_tv`` and ``circuit.case_<i>.tv`` per circuit) and every per-MDP comparison of
    :func:`per_mdp_comparison` as ``per_mdp.<env>.<name>``."""
    out: dict[str, float] = {}
    for env, opt in optimal.items():
        out[f"rho_star.{env}"] = float(opt["rho_star"])
        out[f"rho_star_lp.{env}"] = float(opt["rho_star_lp"])
    skipped = bool(circuit.get("skipped", True))
    out["circuit.skipped"] = float(skipped)
    if not skipped:
        out["circuit.max_tv"] = float(circuit["max_tv"])
        for i, case in enumerate(circuit.get("cases", [])):
            out[f"circuit.case_{i}.tv"] = float(case["tv"])
    for env, row in per_mdp.items():
        for name, value in row.items():
            out[f"per_mdp.{env}.{name}"] = float(value)
    return out
