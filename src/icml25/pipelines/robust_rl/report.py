"""Metrics and figures of the robust_rl study (docs/papers/robust_rl.md, "Metrics").

Metric names are ``<env>/<set>/<quantity>`` for the tabular study; per-seed values are lists
(claims pair them by seed). ``slope`` and ``gap_ratio_Nmax_Nmin`` describe the seed-mean curve
(one number, for tables and figures); the claims use their per-seed forms ``seed_slope`` and
``gap_Nmax_minus_0.1_gap_Nmin`` (negative on average exactly when the mean gap at the largest N
is below 10 % of the mean gap at the smallest N).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from icml25.pipelines.robust_rl.tabular_study import REDUCTION, loglog_slope


def _per_seed(frame: pd.DataFrame, column: str) -> list[float]:
    return frame.sort_values("seed")[column].astype(float).tolist()


def tabular_metrics(gaps: pd.DataFrame, truth: dict[str, Any], eps: Sequence[float],
                    slope_floor: float = 1e-4) -> dict[str, dict[str, Any]]:
    """Per method: gap at every N, at the largest N (absolute, relative to g*, over 3 eps for the
    reductions), log-log slope of the mean gap, the ratio of the mean gap at the largest and the
    smallest N (and both per seed, for the paired claims), and the gains of the policies at the
    largest N. A method that does not run on a
    set (Q-learning on TV) reports NaN there so every method has the same metric names."""
    if gaps.empty:
        raise ValueError("robust_rl: the gap table is empty")
    methods = list(dict.fromkeys(gaps["method"]))
    metrics: dict[str, dict[str, Any]] = {m: {} for m in methods}
    reductions = {REDUCTION.format(eps=e): e for e in eps}
    for (env, set_label), block in gaps.groupby(["env", "set"], sort=False):
        key = f"{env}/{set_label}"
        g_star = truth[env][set_label]["g_star"]
        grid = sorted(block["N"].unique())
        n_min, n_max = grid[0], grid[-1]
        for method in methods:
            rows = block[block["method"] == method]
            out = metrics[method]
            if rows.empty:
                names = [f"gap_N{n}" for n in grid] + [
                    "gap_Nmax", "rel_gap_Nmax", "robust_gain_Nmax", "nominal_gain_Nmax",
                    "sampled_gain_min_Nmax", "slope", "gap_ratio_Nmax_Nmin", "seed_slope",
                    "gap_Nmax_minus_0.1_gap_Nmin"]
                out.update({f"{key}/{n}": math.nan for n in names})
                continue
            means = rows.groupby("N")["gap"].mean()
            for n in grid:
                out[f"{key}/gap_N{n}"] = _per_seed(rows[rows["N"] == n], "gap")
            last = rows[rows["N"] == n_max]
            out[f"{key}/gap_Nmax"] = _per_seed(last, "gap")
            out[f"{key}/rel_gap_Nmax"] = (last.sort_values("seed")["gap"] / g_star).tolist()
            out[f"{key}/robust_gain_Nmax"] = _per_seed(last, "robust_gain")
            out[f"{key}/nominal_gain_Nmax"] = _per_seed(last, "nominal_gain")
            out[f"{key}/sampled_gain_min_Nmax"] = _per_seed(last, "sampled_gain_min")
            out[f"{key}/slope"] = loglog_slope(np.array(grid), means.loc[grid].to_numpy(),
                                               slope_floor)
            out[f"{key}/gap_ratio_Nmax_Nmin"] = (float(means[n_max] / means[n_min])
                                                 if means[n_min] > 0 else math.nan)
            by_seed = rows.pivot_table(index="seed", columns="N", values="gap").sort_index()
            out[f"{key}/seed_slope"] = [loglog_slope(np.array(grid), by_seed.loc[s, grid]
                                                     .to_numpy(), slope_floor)
                                        for s in by_seed.index]
            out[f"{key}/gap_Nmax_minus_0.1_gap_Nmin"] = (by_seed[n_max]
                                                         - 0.1 * by_seed[n_min]).tolist()
            if method in reductions:
                out[f"{key}/gap_Nmax_over_3eps"] = (last.sort_values("seed")["gap"]
                                                    / (3.0 * reductions[method])).tolist()
    return metrics


def fa_linear_metrics(trace: pd.DataFrame, summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per learner (per-seed lists): final exact robust and nominal gains of the greedy policy,
    its robust gap, and the parameter change over the last evaluation window relative to the
    parameter norm (a diagnostic only: it shrinks with the step size whether or not the learner
    converges; convergence is judged by :func:`onehot_metrics`) and the fewest updates of any
    pair. Rows of the one-hot check (``study == "onehot"``) are left to :func:`onehot_metrics`."""
    if "study" in trace.columns:
        trace = trace[trace["study"] == "features"]
    if trace.empty:
        raise ValueError("robust_rl: the linear-FA trace is empty")
    out = {}
    for variant, rows in trace.groupby("variant", sort=False):
        final = rows.loc[rows.groupby("seed")["step"].idxmax()].sort_values("seed")
        out[str(variant)] = {
            "final_robust_gain": final["robust_gain"].tolist(),
            "final_nominal_gain": final["nominal_gain"].tolist(),
            "final_robust_gap": final["robust_gap"].tolist(),
            "theta_rel_change_last_window": (final["theta_change"]
                                             / final["theta_norm"].clip(lower=1e-12)).tolist(),
            "final_min_visits": final["min_visits"].astype(float).tolist(),
            "gamma": float(final["gamma"].iloc[0]),
            "g_star": float(summary["g_star"]),
        }
    return out


def onehot_metrics(trace: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per learner of the one-hot check (per-seed lists): the final ``||Q - Q*||_inf``, absolute
    (``onehot_q_error``) and relative to ``||Q*||_inf`` (``onehot_q_rel_error``, the convergence
    measure), the worst relative error over the last 10% of training (``onehot_q_rel_error_last
    _window_max``: the evaluations after 90% of the steps), the parameter change of the last
    window relative to the norm (the old measure, beside it) and the fewest updates of a pair."""
    rows_all = trace[trace["study"] == "onehot"] if "study" in trace.columns else trace.iloc[:0]
    if rows_all.empty:
        raise ValueError("robust_rl: the one-hot check's trace is empty")
    out = {}
    for variant, rows in rows_all.groupby("variant", sort=False):
        final = rows.loc[rows.groupby("seed")["step"].idxmax()].sort_values("seed")
        tail = rows[rows["step"] >= 0.9 * rows.groupby("seed")["step"].transform("max")]
        out[str(variant)] = {
            "onehot_q_error": final["q_error"].tolist(),
            "onehot_q_rel_error": final["q_rel_error"].tolist(),
            "onehot_q_rel_error_last_window_max": tail.groupby("seed")["q_rel_error"].max()
            .sort_index().tolist(),
            "onehot_theta_rel_change_last_window": (final["theta_change"] / final["theta_norm"]
                                                    .clip(lower=1e-12)).tolist(),
            "onehot_min_visits": final["min_visits"].astype(float).tolist(),
        }
    return out


def discount_summary(gaps: pd.DataFrame, truth: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per (env, set, eps) of the tabular reductions: the span estimates ``H_hat`` over the
    empirical models (min, mean, max), the raw discounts ``1 - eps / H_hat`` and the planning
    (clamped) discounts (min, mean), how many of the models had their discount clamped, and the
    true span ``Sp(h*)`` of the nominal model's robust bias."""
    red = gaps[gaps["method"].str.startswith("reduction_eps")]
    out = {}
    for (env, set_label, eps), rows in red.groupby(["env", "set", "eps"], sort=False):
        clamped = (rows["gamma"] != rows["gamma_raw"])
        out[f"{env}/{set_label}/eps{eps:g}"] = {
            "H_hat_min": float(rows["H_hat"].min()), "H_hat_mean": float(rows["H_hat"].mean()),
            "H_hat_max": float(rows["H_hat"].max()),
            "gamma_raw_min": float(rows["gamma_raw"].min()),
            "gamma_raw_mean": float(rows["gamma_raw"].mean()),
            "gamma_min": float(rows["gamma"].min()), "gamma_mean": float(rows["gamma"].mean()),
            "clamped_models": int(clamped.sum()), "models": len(rows),
            "true_span": float(truth[env][set_label]["span_h_star"]),
        }
    return out


def dqn_metrics(evals: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per DQN variant (per-seed lists): nominal cell, worst cell and mean over the test grid."""
    if evals.empty:
        raise ValueError("robust_rl: the CartPole evaluation is empty")
    out = {}
    for variant, rows in evals.groupby("variant", sort=False):
        nominal = rows[(rows["length_scale"] == 1) & (rows["masspole_scale"] == 1)
                       & (rows["force_scale"] == 1) & (rows["action_noise"] == 0)]
        by_seed = rows.groupby("seed")["avg_reward"]
        out[str(variant)] = {
            "nominal_avg_reward": (nominal.sort_values("seed")["avg_reward"].tolist()
                                   if len(nominal) else [math.nan]),
            "worst_cell_avg_reward": by_seed.min().sort_index().tolist(),
            "grid_mean_avg_reward": by_seed.mean().sort_index().tolist(),
        }
    return out


# --------------------------------------------------------------------------------- figures
def plot_gap_vs_n(gaps: pd.DataFrame, truth: dict[str, Any]):
    """Robust optimality gap against samples per (s, a), log-log, one panel per (env, set)."""
    import matplotlib.pyplot as plt

    blocks = list(gaps.groupby(["env", "set"], sort=False))
    fig, axes = plt.subplots(1, len(blocks), figsize=(4.4 * len(blocks), 3.6), squeeze=False)
    for ax, ((env, set_label), block) in zip(axes[0], blocks, strict=True):
        for method, rows in block.groupby("method", sort=False):
            stats = rows.groupby("N")["gap"].agg(["mean", "std"])
            floor = 1e-5  # a zero gap is drawn at the floor of the log axis
            ax.errorbar(stats.index, np.maximum(stats["mean"], floor), yerr=stats["std"],
                        marker="o", ms=3, capsize=2, label=method)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("samples per (s, a), N")
        ax.set_title(f"{env} {set_label} (g* = {truth[env][set_label]['g_star']:.3f})",
                     fontsize=9)
    axes[0][0].set_ylabel("robust gap g* - g^pi")
    fullest = max(axes[0], key=lambda ax: len(ax.get_lines()))
    fullest.legend(fontsize=6)  # the panel that shows every method
    fig.tight_layout()
    return fig


def plot_gap_vs_eps(gaps: pd.DataFrame, eps: Sequence[float]):
    """Reduction gap at the largest N against eps, with the 3 eps bound."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 3.6))
    n_max = gaps["N"].max()
    for (env, set_label), block in gaps[gaps["N"] == n_max].groupby(["env", "set"], sort=False):
        values = [block[block["method"] == REDUCTION.format(eps=e)]["gap"].mean() for e in eps]
        ax.plot(eps, values, marker="o", label=f"{env} {set_label}")
    grid = np.linspace(min(eps), max(eps), 20)
    ax.plot(grid, 3 * grid, "k--", label="3 eps")
    ax.set_xlabel("eps")
    ax.set_ylabel(f"reduction gap at N = {n_max}")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def plot_fa_linear(trace: pd.DataFrame):
    """Exact robust gain of the greedy policy and parameter change over training."""
    import matplotlib.pyplot as plt

    if "study" in trace.columns:
        trace = trace[trace["study"] == "features"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for variant, rows in trace.groupby("variant", sort=False):
        stats = rows.groupby("step").agg(gain=("robust_gain", "mean"),
                                         change=("theta_change", "mean"))
        axes[0].plot(stats.index, stats["gain"], marker="o", ms=3, label=variant)
        axes[1].plot(stats.index, stats["change"], marker="o", ms=3, label=variant)
    axes[0].set_ylabel("robust gain of greedy policy")
    axes[1].set_ylabel("||theta_k - theta_(k - window)||")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_cartpole(evals: pd.DataFrame):
    """Average reward per test cell (sorted by the robust DQN's value), mean over seeds."""
    import matplotlib.pyplot as plt

    cols = ["length_scale", "masspole_scale", "force_scale", "action_noise"]
    table = evals.groupby(["variant", *cols])["avg_reward"].mean().unstack("variant")
    table = table.sort_values(table.columns[0])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for variant in table.columns:
        ax.plot(np.arange(len(table)), table[variant].to_numpy(), marker=".", label=variant)
    ax.set_xlabel("test cell (sorted)")
    ax.set_ylabel("average reward")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
