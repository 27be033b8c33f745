"""Forecast figures of the wavetoken pipeline (the paper's Figure-1 style panels)."""

from __future__ import annotations

from typing import Any

import numpy as np

from icml25.pipelines.wavetoken.frames import EvalSet


def plot_panel(ax: Any, s: EvalSet, q: np.ndarray, levels: list[float], title: str) -> None:
    """Context tail, truth, median and the outer quantile band of series 0 of ``s``."""
    history = s.histories[0][-3 * s.horizon:]
    observed = np.concatenate([history, s.futures[0]])
    span = observed.max() - observed.min() or 1.0
    t_fut = np.arange(s.horizon)
    lo, hi = levels.index(min(levels)), levels.index(max(levels))
    ax.plot(np.arange(-len(history), 0), history, color="0.35", lw=1, label="context")
    ax.plot(t_fut, s.futures[0], color="black", lw=1.2, label="truth")
    ax.plot(t_fut, q[levels.index(0.5)], color="C0", lw=1.5, label="median")
    ax.fill_between(t_fut, q[lo], q[hi], color="C0", alpha=0.25,
                    label=f"{min(levels):.0%}-{max(levels):.0%}")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(observed.min() - span, observed.max() + span)  # wild samples don't flatten it
    ax.axvline(0, color="0.7", lw=0.8, ls="--")
