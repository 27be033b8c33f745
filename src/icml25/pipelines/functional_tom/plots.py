"""Figures of the functional_tom pipeline: literal ToM against functional regret."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

FIGURES = ("heatmap_literal_vs_functional.png", "tom_vs_regret.png", "cumulative_regret.png")
KEY_CELLS = (("paper", "ipd", "tft"), ("paper", "rps", "tft"), ("meta", "ipd", "tft"),
             ("meta", "rps", "tft"))


def _heatmaps(cells: pd.DataFrame):
    import matplotlib.pyplot as plt

    cells = cells[cells["suite"] != "llm"].copy()
    cells["cell"] = cells["suite"] + "/" + cells["game"] + "/" + cells["family"]
    agents = sorted(cells["agent"].unique())
    cols = sorted(cells["cell"].unique())
    fig, axes = plt.subplots(3, 1, figsize=(max(8, 0.55 * len(cols) + 3), 3 * 0.42 * len(agents)
                                             + 4), squeeze=False)
    panels = (("regret", "functional regret per step (colour: scaled per column)"),
              ("tom_accuracy", "literal ToM accuracy"),
              ("gap", "gap = regret - rationalised ToM regret (per step)"))
    for ax, (stat, title) in zip(axes[:, 0], panels, strict=True):
        table = cells.pivot_table(index="agent", columns="cell", values=stat).reindex(
            index=agents, columns=cols)
        values = table.to_numpy(float)
        if stat == "tom_accuracy":
            colour = values
        else:  # payoff scales differ across games: colour each column by its own range
            span = np.nanmax(np.abs(values), axis=0, keepdims=True)
            colour = values / np.where(span > 0, span, 1.0)
        ax.imshow(np.ma.masked_invalid(colour), aspect="auto",
                  cmap="viridis" if stat == "tom_accuracy" else "magma_r")
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="grey")
        ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(agents)), agents, fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def _colours(agents) -> dict[str, Any]:
    """One fixed colour per agent, the same in every panel."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab20")
    return {a: cmap(i % 20) for i, a in enumerate(sorted(agents))}


def _scatter(cells: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), squeeze=False)
    for ax, game in zip(axes[0], ("rps", "ibs", "ipd"), strict=True):
        sub = cells[(cells["game"] == game) & (cells["suite"] != "llm")]
        colours = _colours(cells["agent"].unique())
        for agent, g in sub.groupby("agent"):
            ax.scatter(100 * g["tom_accuracy"], g["regret"], label=agent, s=18,
                       color=colours[agent])
        ax.set_xlabel("literal ToM accuracy (%)")
        ax.set_ylabel("functional regret per step")
        ax.set_title(f"{game}: every partner family", fontsize=9)
    axes[0][-1].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig


def _cumulative(logs: pd.DataFrame, scenarios: pd.DataFrame, optimal: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(KEY_CELLS), figsize=(4 * len(KEY_CELLS), 3.4), squeeze=False)
    info = scenarios.merge(optimal[["scenario_id", "v_star"]], on="scenario_id")
    colours = _colours(logs["agent"].unique())
    for ax, (suite, game, family) in zip(axes[0], KEY_CELLS, strict=True):
        ids = info[(info["suite"] == suite) & (info["game"] == game) &
                   (info["family"] == family)]["scenario_id"]
        sub = logs[logs["scenario_id"].isin(ids)]
        for agent, g in sub.groupby("agent"):
            per_t = (g["r_star"] - g["r"]).groupby([g["scenario_id"], g["t"]]).sum()
            curve = per_t.groupby(level=0).cumsum().groupby(level=1).mean()
            ax.plot(curve.index, curve.to_numpy(), label=agent, lw=1, color=colours[agent])
        ax.set_title(f"{suite}: {game} vs {family}", fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("cumulative regret")
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def make_figures(cells: pd.DataFrame, logs: pd.DataFrame, scenarios: pd.DataFrame,
                 optimal: pd.DataFrame) -> dict[str, Any]:
    heat, scatter, cumulative = FIGURES
    return {heat: _heatmaps(cells), scatter: _scatter(cells),
            cumulative: _cumulative(logs, scenarios, optimal)}
