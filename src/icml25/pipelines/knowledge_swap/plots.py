"""Figures of the knowledge swap: accuracies through the stages and the LoRA-norm heat maps."""

from __future__ import annotations

from typing import Any

import numpy as np

COLOURS = {"retain": "C0", "forget": "C3", "learn": "C2"}


def plot_stage_accuracy(results: dict[str, list[dict[str, Any]]], variants: list[str],
                        setting: str = "") -> Any:
    """Acc_r / Acc_f / Acc_l (mean ± std over seeds) per epoch through the stages, one panel per
    variant; dashed lines mark the stage boundaries, epoch 0 is the pretrained start.
    ``setting`` (its forget and learn classes) goes into the title."""
    import matplotlib.pyplot as plt

    cols = min(4, len(variants))
    rows = -(-len(variants) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.2 * rows), sharey=True,
                             squeeze=False)
    for ax in axes.flat[len(variants):]:
        ax.set_visible(False)
    for ax, variant in zip(axes.flat, variants, strict=False):
        runs = results[variant]
        for name, colour in COLOURS.items():
            series = np.array([[r["acc"]["start"][name]] + [c[name] for c in r["curve"]]
                               for r in runs])
            t = np.arange(series.shape[1])
            mean, std = series.mean(axis=0), series.std(axis=0)
            ax.plot(t, mean, color=colour, lw=1.6, label=f"Acc {name}")
            ax.fill_between(t, mean - std, mean + std, color=colour, alpha=0.2)
        curve = runs[0]["curve"]
        for i in range(1, len(curve)):
            if curve[i]["stage"] != curve[i - 1]["stage"]:
                ax.axvline(i, color="0.6", lw=0.8, ls="--")
        stages = " → ".join(runs[0]["stages"])
        ax.set_title(f"{variant}\n({stages})", fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylim(-3, 103)
    for row in axes:
        row[0].set_ylabel("test accuracy (%)")
    axes[0][0].legend(fontsize=7, loc="center left")
    where = f", {setting}" if setting else ""
    fig.suptitle(f"knowledge_swap{where} — accuracies through the stages (mean ± std over "
                 "seeds)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_lora_norms(results: dict[str, list[dict[str, Any]]], variants: list[str],
                    setting: str = "") -> Any:
    """Per-block LoRA update norm ``sqrt(||s B A||²_fc1 + ||s B A||²_fc2)`` over time (blocks ×
    quarter epochs, first seed), one heat map per order; dashed line = stage boundary."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(variants), 1, figsize=(7.0, 1.9 * len(variants)),
                             squeeze=False)
    for ax, variant in zip(axes[:, 0], variants, strict=True):
        norms = results[variant][0]["norms"]
        values = np.linalg.norm(np.asarray(norms["values"]), axis=-1).T  # [blocks, time]
        time = np.asarray(norms["time"])
        image = ax.imshow(values, aspect="auto", origin="lower", cmap="viridis",
                          extent=(0, time[-1], -0.5, values.shape[0] - 0.5))
        stage = np.asarray(norms["stage"])
        for i in np.flatnonzero(np.diff(stage)):
            ax.axvline(time[i], color="white", lw=1.0, ls="--")
        ax.set_ylabel("block")
        ax.set_title(f"{variant}: {' → '.join(results[variant][0]['stages'])}", fontsize=9)
        fig.colorbar(image, ax=ax, pad=0.01)
    axes[-1, 0].set_xlabel("epoch")
    where = f", {setting}" if setting else ""
    fig.suptitle(f"knowledge_swap{where} — per-block LoRA update norm (seed "
                 f"{results[variants[0]][0]['seed']})", fontsize=10)
    fig.tight_layout()
    return fig
