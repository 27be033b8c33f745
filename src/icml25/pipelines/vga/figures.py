"""Figures of the vga pipeline: example instances with labels and model answers, and accuracy
per task in the training and the test layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icml25.pipelines.vga.graphs import TASK_CLASSES
from icml25.pipelines.vga.render import from_png


def examples_figure(images: pd.DataFrame, predictions: pd.DataFrame,
                    protocol: Mapping[str, Mapping], per_task: int,
                    models: Sequence[str] = ("cnn", "vit"), seed: int = 0) -> plt.Figure:
    """Rows: tasks; columns: the same test graphs in the training layout, then in the test
    layout; titles: true answer and each model's answer (first seed)."""
    tasks = list(protocol)
    fig, axes = plt.subplots(len(tasks), 2 * per_task,
                             figsize=(2.0 * 2 * per_task, 2.3 * len(tasks)), squeeze=False)
    preds = predictions[predictions["seed"] == seed].set_index(["variant", "sample_id", "layout"])
    for r, task in enumerate(tasks):
        names = TASK_CLASSES[task]
        proto = protocol[task]
        test = images[(images["task"] == task) & (images["split"] == "test")]
        ids = sorted(test["sample_id"].unique(), key=lambda s: int(s.rsplit("/", 1)[1]))[:per_task]
        for half, layout in enumerate((proto["train_layout"], proto["test_layout"])):
            for c, sid in enumerate(ids):
                ax = axes[r, half * per_task + c]
                ax.axis("off")
                row = test[(test["sample_id"] == sid) & (test["layout"] == layout)]
                if row.empty:
                    continue
                ax.imshow(from_png(row["png"].iloc[0]), cmap="gray", vmin=0, vmax=255)
                answers = []
                for m in models:
                    key = (m, sid, layout)
                    if key in preds.index:
                        p = int(preds.loc[key, "pred"])
                        answers.append(f"{m}:{names[p] if p >= 0 else '?'}")
                ax.set_title(f"{task} [{layout}]\ny={names[int(row['label'].iloc[0])]} "
                             + " ".join(answers), fontsize=7)
    fig.tight_layout()
    return fig


def accuracy_figure(metrics: Mapping[str, Mapping[str, Sequence[float]]],
                    protocol: Mapping[str, Mapping],
                    variants: Sequence[str] = ("cnn", "vit", "graph_stat_lr")) -> plt.Figure:
    """Mean test accuracy per task: training layout (solid) vs test layout (hatched), with
    chance (dashed)."""
    tasks = list(protocol)
    variants = [v for v in variants if v in metrics]
    fig, ax = plt.subplots(figsize=(1.6 * len(tasks) + 2, 3.6))
    width = 0.8 / max(1, 2 * len(variants))
    x = np.arange(len(tasks))
    for i, v in enumerate(variants):
        for j, which in enumerate(("train_layout", "test_layout")):
            vals = [np.nanmean(np.asarray(metrics[v][f"acc_{t}_{which}"], dtype=float))
                    for t in tasks]
            ax.bar(x + (2 * i + j - len(variants)) * width + width / 2, vals, width,
                   label=f"{v} ({which.replace('_', ' ')})", hatch="//" if j else None,
                   color=f"C{i}", alpha=0.9 if j == 0 else 0.55)
    for k, t in enumerate(tasks):
        chance = 1 / len(TASK_CLASSES[t])
        ax.plot([k - 0.45, k + 0.45], [chance, chance], "k--", lw=1)
    ax.set_xticks(x, [f"{t}\n{protocol[t]['train_layout']}->{protocol[t]['test_layout']}"
                      for t in tasks], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig
