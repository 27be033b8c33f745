"""Figures of the softshape room: accuracy per data set, expert load, and the learned shape
scores mapped back to time (the paper's interpretability figure)."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from icml25.pipelines.softshape.model import scores_to_time


def accuracy_figure(report: dict[str, Any]):
    """Grouped bars: test accuracy (mean over folds and seeds) per data set and variant."""
    per = report["per_dataset"]
    names = list(per)
    variants = sorted({v for d in per.values() for v in d},
                      key=lambda v: (v != "softshape", v))
    fig, ax = plt.subplots(figsize=(2.6 + 1.5 * len(names), 3.4))
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        vals = [per[n].get(v, {}).get("mean", np.nan) for n in names]
        errs = [per[n].get(v, {}).get("std", 0.0) for n in names]
        ax.bar(np.arange(len(names)) + i * width, vals, width, yerr=errs, label=v, capsize=2)
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylim(0.4, 1.02)
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("softshape: accuracy per data set (mean ± std over seeds)", fontsize=10)
    fig.tight_layout()
    return fig


def expert_load_figure(report: dict[str, Any]):
    """Share of test tokens routed to each expert, per data set (mean over seeds)."""
    loads = report["expert_load"]
    fig, axes = plt.subplots(1, max(len(loads), 1), figsize=(2.6 * max(len(loads), 1), 2.6),
                             squeeze=False)
    for ax, (name, load) in zip(axes[0], loads.items(), strict=False):
        share = load["mean_share"]
        ax.bar(np.arange(len(share)), share, color="tab:purple")
        ax.set_ylim(0, 1)
        ax.set_xticks(np.arange(len(share)))
        ax.set_xlabel("expert")
        ax.set_title(f"{name}\n{load['runs_on_one_expert']}/{load['n_runs']} runs on one "
                     "expert", fontsize=8)
    axes[0][0].set_ylabel("share of tokens")
    fig.suptitle("MoE expert load on the test set (top-1 router)", fontsize=10)
    fig.tight_layout()
    return fig


def score_figure(ds: dict[str, Any], score_map: dict[str, Any], per_class: int = 2):
    """Test series with their shape scores averaged over the windows covering each t: the
    sparsifying layer's scores (solid), layer 1's (dashed); for sets with known windows (CBF)
    the true event [a, b] is shaded. Multichannel series show their first channel."""
    test = score_map["test"]
    X, y = ds["X"][test], ds["y"][test]
    if X.ndim == 3:
        X = X[:, 0, :]
    args = (X.shape[1], score_map["shape_size"], score_map["stride"])
    scores = None
    if score_map.get("scores") is not None:
        scores = scores_to_time(torch.as_tensor(score_map["scores"]), *args).numpy()
    layer1 = scores_to_time(torch.as_tensor(score_map["layer1_scores"]), *args).numpy()
    picks = [i for c in range(ds["n_classes"]) for i in np.flatnonzero(y == c)[:per_class]]
    picks = picks[:8]
    fig, axes = plt.subplots(len(picks), 1, figsize=(7, 1.3 * len(picks)), sharex=True,
                             squeeze=False)
    t = np.arange(X.shape[1])
    for ax, i in zip(axes[:, 0], picks, strict=True):
        ax.plot(t, X[i], color="black", lw=0.8)
        twin = ax.twinx()
        if scores is not None:
            twin.plot(t, scores[i], color="tab:red", lw=1.2)
        twin.plot(t, layer1[i], color="tab:orange", lw=0.9, ls="--")
        twin.set_ylim(0, 1)
        twin.tick_params(labelsize=6)
        if ds["windows"] is not None:
            a, b = ds["windows"][test][i]
            ax.axvspan(a, b, color="tab:blue", alpha=0.15)
        ax.set_ylabel(ds["classes"][y[i]], fontsize=7)
        ax.tick_params(labelsize=6)
    axes[-1, 0].set_xlabel("t")
    layer = score_map.get("sparsifying_layer")
    title = (f"{ds['name']}: sparsifying layer {layer + 1} shape scores (red; layer 1 dashed)"
             if layer is not None else f"{ds['name']}: layer-1 shape scores (dashed)")
    fig.suptitle(title + " over test series"
                 + ("; true event window shaded" if ds["windows"] is not None else ""),
                 fontsize=9)
    fig.tight_layout()
    return fig
