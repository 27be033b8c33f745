"""Figures of the steerable pipeline: accuracy against rotation angle (the issue's figure) and
the invariance error of the logits against the rotation angle."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

STYLE = {"steer_tf": ("C3", "-"), "steer_cnn": ("C0", "-"), "cnn": ("C2", "--"),
         "steer_tf_3d": ("C3", "-"), "steer_cnn_3d": ("C0", "-"), "cnn_3d": ("C2", "--"),
         "vit": ("C1", "--"), "steer_tf_nopos": ("C4", ":"), "cnn_aug": ("C2", ":"),
         "vit_aug": ("C1", ":")}


def plot_accuracy_by_angle(scores: pd.DataFrame, n_bins: int, max_angle: float = 360,
                           what: str = "test digit"):
    """Seed-mean test accuracy per angle bin, one panel per protocol."""
    protocols = sorted(scores["protocol"].unique())
    fig, axes = plt.subplots(1, len(protocols), figsize=(5.2 * len(protocols), 3.6),
                             squeeze=False, sharey=True)
    centres = (np.arange(n_bins) + 0.5) * max_angle / n_bins
    for ax, protocol in zip(axes[0], protocols, strict=True):
        sub = scores[(scores["protocol"] == protocol) & scores["metric"].str.match(r"acc_bin\d")]
        for variant, rows in sub.groupby("variant", sort=False):
            mean = rows.groupby("metric")["value"].mean().sort_index().to_numpy()
            colour, ls = STYLE.get(variant, ("k", "-"))
            ax.plot(centres[: len(mean)], 100 * mean, ls, color=colour, marker="o", ms=3,
                    label=variant)
        ax.set_title(f"protocol {protocol}")
        ax.set_xlabel(f"rotation angle of the {what} (degrees)")
        ax.set_xticks(np.arange(0, max_angle + 1, 60 if max_angle > 180 else 30))
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("test accuracy (%)")
    axes[0, -1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def plot_invariance_by_angle(scores: pd.DataFrame):
    """Relative change of the logits when the input is rotated: 90-degree multiples are exact
    grid rotations, the others interpolated (first protocol, seed mean, log scale)."""
    protocol = sorted(scores["protocol"].unique())[0]
    sub = scores[scores["protocol"] == protocol]
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    for variant, rows in sub.groupby("variant", sort=False):
        means = rows.groupby("metric")["value"].mean()
        points = [(float(m[8:-3]), v) for m, v in means.items()
                  if m.startswith("inv_err_") and m.endswith("deg")]
        points.sort()
        colour, ls = STYLE.get(variant, ("k", "-"))
        ax.semilogy([a for a, _ in points], [max(v, 1e-9) for _, v in points], ls,
                    color=colour, marker="o", ms=3, label=variant)
        # exact grid rotations (max over 90, 180, 270 degrees): a separate marker, not joined
        ax.semilogy([90.0], [max(means["inv_err_rot90"], 1e-9)], "*", color=colour, ms=9)
    ax.set_xlabel("rotation angle (degrees); star at 90 = exact grid rotations")
    ax.set_ylabel("max |f(gx) - f(x)| / max |f(x)|")
    ax.set_title(f"logit invariance error ({protocol})")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
