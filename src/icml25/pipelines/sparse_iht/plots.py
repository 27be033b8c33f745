"""Figures of the sparse_iht run: the sparsity-relaxation trade-off, objective curves against
iterations / sample gradients / function queries, and support recovery."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

LABELS = {"iht_2sp": "IHT-2SP", "iht_then_project": "IHT-then-project",
          "exact_iht": "exact-projection IHT", "iht_2sp_warm": "IHT-2SP (warm start)",
          "lasso": "lasso", "lasso_refit": "lasso + refit", "omp_project": "OMP + 2SP",
          "hsg_ht_2sp": "HSG-HT-2SP", "hzo_ht_2sp": "HZO-HT-2SP",
          "dense_reference": "dense (no sparsity)", "exhaustive_best": "exhaustive optimum R*"}


def _label(method: str) -> str:
    return LABELS.get(method, method.replace("szoht_q", "SZOHT q="))


def tradeoff_figure(synthetic: pd.DataFrame, small: pd.DataFrame) -> plt.Figure:
    settings = list(dict.fromkeys(synthetic["setting"]))
    fig, axes = plt.subplots(2, len(settings) + 1, figsize=(4 * (len(settings) + 1), 7),
                             squeeze=False)
    methods = ["iht_2sp", "iht_then_project", "exact_iht", "lasso_refit", "omp_project"]
    for j, s in enumerate(settings):
        rows = synthetic[synthetic["setting"] == s]
        for m in methods:
            at = rows[rows["method"] == m].groupby("k_ratio")
            axes[0, j].plot(at["gap"].median(), marker="o", label=_label(m))
            axes[1, j].plot(at["recall"].median(), marker="o", label=_label(m))
        ref = "oracle" if rows["binding"].iloc[0] else "truth"
        axes[0, j].set_title(f"{s} (gap vs {ref})")
        axes[0, j].axhline(0, color="grey", lw=0.8)
        axes[0, j].set_ylabel("median relative gap")
        axes[1, j].set_ylabel("median support recall")
        axes[1, j].set_xlabel("k / k̄")
    for s in dict.fromkeys(small["setting"]):
        rows = small[small["setting"] == s]
        for m in dict.fromkeys(rows["method"]):
            at = rows[rows["method"] == m].groupby("k_ratio")["gap_best"].median()
            axes[0, -1].plot(at, marker="o", label=f"{_label(m)} [{s}]")
    axes[0, -1].set_title("small instances: gap vs best k̄-sparse (exhaustive)")
    axes[0, -1].axhline(0, color="grey", lw=0.8)
    axes[0, -1].legend(fontsize=6)
    axes[1, -1].axis("off")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def curves_figure(traces: pd.DataFrame, stoch_traces: pd.DataFrame) -> plt.Figure:
    settings = list(dict.fromkeys(traces["setting"]))
    fig, axes = plt.subplots(2, len(settings) + 1, figsize=(4 * (len(settings) + 1), 6.6),
                             squeeze=False)
    for j, s in enumerate(settings):
        rows = traces[traces["setting"] == s]
        for m in dict.fromkeys(rows["method"]):
            at = rows[rows["method"] == m].groupby("iteration")
            med = at["gap"].median()
            axes[0, j].plot(med.index, med.to_numpy(), label=_label(m))
            worst = at["violation"].max()
            axes[1, j].plot(worst.index, worst.to_numpy(), label=_label(m))
        axes[0, j].set_title(f"{s}, k = {int(rows['k'].iloc[0])}")
        axes[0, j].set_ylabel("median relative gap")
        axes[0, j].set_yscale("symlog", linthresh=1e-2)
        axes[1, j].set_xlabel("iteration")
        axes[1, j].set_ylabel("max violation of B0(k) ∩ Γ over seeds")
        axes[1, j].set_yscale("symlog", linthresh=1e-3)
    axes[1, -1].axis("off")
    ax = axes[0, -1]
    for m in dict.fromkeys(stoch_traces["method"]):
        rows = stoch_traces[stoch_traces["method"] == m]
        grid = np.linspace(0, rows["ifo"].max(), 300)
        curves = [np.interp(grid, g["ifo"], g["gap"]) for _, g in rows.groupby("seed")]
        ax.plot(grid, np.median(curves, axis=0), label=_label(m))
    ax.set_xlabel("sample gradients (IFO)")
    ax.set_ylabel("median relative gap")
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.set_title("stochastic vs deterministic")
    ax.legend(fontsize=7)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def zeroth_order_figure(zo_traces: pd.DataFrame) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for m in dict.fromkeys(zo_traces["method"]):
        ax = axes[1] if m.endswith(":support_excess") else axes[0]
        rows = zo_traces[zo_traces["method"] == m]
        top = rows.groupby("seed")["queries"].max().min()
        grid = np.geomspace(max(rows["queries"][rows["queries"] > 0].min(), 1), top, 200)
        curves = [np.interp(grid, g["queries"], g["excess"]) for _, g in rows.groupby("seed")]
        ax.plot(grid, np.median(curves, axis=0), label=_label(m.split(":")[0]))
    axes[0].set_title("excess over first-order IHT-2SP")
    axes[1].set_title("excess over the best point on the iterate's support")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("function queries")
        ax.axhline(0, color="grey", lw=0.8)
        ax.legend(fontsize=7)
    axes[0].set_yscale("symlog", linthresh=1e-2)
    axes[1].set_yscale("log")
    fig.tight_layout()
    return fig


def support_figure(synthetic: pd.DataFrame) -> plt.Figure:
    rows = synthetic[synthetic["k_ratio"].notna()]
    table = rows.groupby(["method", "k_ratio"])["recall"].mean().unstack("k_ratio")
    fig, ax = plt.subplots(figsize=(6, 3.8))
    im = ax.imshow(table.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(table.shape[1]), [f"{r:g}" for r in table.columns])
    ax.set_yticks(range(table.shape[0]), [_label(m) for m in table.index])
    ax.set_xlabel("k / k̄")
    ax.set_title("mean support recall (all settings and seeds)")
    for (i, j), v in np.ndenumerate(table.to_numpy()):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def real_data_figure(real: pd.DataFrame) -> plt.Figure:
    panels = [("breast_cancer", "train_objective", "train log-loss"),
              ("breast_cancer", "test_accuracy", "test accuracy"),
              ("diabetes", "train_objective", "train objective ½·MSE"),
              ("diabetes", "test_objective", "test ½·MSE")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for ax, (dataset, metric, title) in zip(axes, panels, strict=True):
        rows = real[real["dataset"] == dataset]
        table = rows.groupby(["k", "method"])[metric].mean().unstack("method")
        methods = list(table.columns)
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            ax.bar(np.arange(len(table)) + i * width, table[m].to_numpy(), width, label=_label(m))
        ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, [f"k={k}" for k in table.index])
        ax.set_title(f"{dataset}: {title}")
        lo, hi = np.nanmin(table.to_numpy()), np.nanmax(table.to_numpy())
        ax.set_ylim(lo - 0.1 * (hi - lo + 1e-12), hi + 0.1 * (hi - lo + 1e-12))
    axes[0].legend(fontsize=6)
    axes[2].legend(fontsize=6)
    fig.tight_layout()
    return fig


TRACKED = ("iht_2sp", "iht_2sp_warm", "iht_then_project", "exact_iht", "lasso_refit",
           "omp_project", "exhaustive_best", "dense_reference")


def index_tracking_figure(index: pd.DataFrame, index_real: pd.DataFrame) -> plt.Figure:
    """Gap to the exhaustive optimum R* against k (generated markets, median and range over
    seeds), and the out-of-sample annualised tracking error per method on each real index."""
    real_sets = list(dict.fromkeys(index_real["dataset"])) if len(index_real) else []
    fig, axes = plt.subplots(1, 1 + len(real_sets), figsize=(4.6 * (1 + len(real_sets)), 3.8),
                             squeeze=False)
    ax = axes[0, 0]
    for m in TRACKED:
        if m in ("exhaustive_best", "dense_reference"):
            continue
        rows = index[index["method"] == m].groupby("k")["gap_best"]
        ks = rows.median().index.to_numpy()
        ax.plot(ks, rows.median().to_numpy(), marker="o", label=_label(m))
        ax.fill_between(ks, rows.min().to_numpy(), rows.max().to_numpy(), alpha=0.12)
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.set_xlabel("k (assets held)")
    ax.set_ylabel("(R - R*) / R*, in sample")
    ax.set_title("generated markets: gap to the exhaustive optimum")
    ax.legend(fontsize=6)
    for ax, name in zip(axes[0, 1:], real_sets, strict=True):
        rows = index_real[index_real["dataset"] == name]
        table = rows.pivot_table(index="k", columns="method", values="te_out")
        methods = [m for m in TRACKED if m in table.columns]
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            ax.bar(np.arange(len(table)) + i * width, table[m].to_numpy(), width, label=_label(m))
        ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, [f"k={k}" for k in table.index])
        ax.set_ylim(0, 1.5 * np.nanmax(table.to_numpy()))  # room for the legend above the bars
        ax.set_ylabel("annualised tracking error, test window")
        ax.set_title(f"{name}: out of sample")
    if real_sets:
        axes[0, 1].legend(fontsize=6, ncol=2, loc="upper center")
    fig.tight_layout()
    return fig
