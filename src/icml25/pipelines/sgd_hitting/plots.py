"""Figures of the sgd_hitting pipeline (matplotlib, Agg backend)."""

from __future__ import annotations

import math
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from icml25.pipelines.sgd_hitting import experiments as xp
from icml25.pipelines.sgd_hitting.params import SgdHittingParams
from icml25.pipelines.sgd_hitting.predictions import VARIANTS

matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLE = {"w_graph": ("k", "-"), "gaussian_approx": ("tab:blue", "--"),
         "first_barrier": ("tab:orange", ":"), "sum_barriers": ("tab:green", "-."),
         "largest_barrier": ("tab:red", (0, (5, 2))), "eyring_kramers": ("tab:purple", ":")}


def _grid(n: int) -> tuple[Any, np.ndarray]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    return fig, axes.ravel()


def landscapes_figure(p: SgdHittingParams, points: pd.DataFrame,
                      costs: dict[str, Any]) -> Any:
    names = list(p.landscapes)
    fig, axes = _grid(len(names))
    for ax, name in zip(axes, names, strict=False):
        land = xp.landscape_of(p, name)
        pts = points[points["landscape"] == name]
        if land.dim == 1:
            lo, hi = land.box[0]
            xs = np.linspace(lo, hi, 800)
            ax.plot(xs, np.asarray(land.f((xs,), np)), "k-", lw=1)
            for kind, marker in (("minimum", "o"), ("maximum", "^")):
                sel = pts[pts["kind"] == kind]
                ax.plot(sel["x"], sel["f"], marker, ms=5, label=kind)
            ax.set_xlabel("x")
            ax.set_ylabel("f")
        else:
            (x0, x1), (y0, y1) = land.box
            gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
            z = np.asarray(land.f((gx, gy), np))
            levels = np.quantile(z, np.linspace(0.0, 0.6, 25))
            ax.contour(gx, gy, z, levels=np.unique(levels), linewidths=0.6, cmap="viridis")
            for kind, marker in (("minimum", "o"), ("saddle", "x"), ("maximum", "^")):
                sel = pts[pts["kind"] == kind]
                if len(sel) < 50:
                    ax.plot(sel["x"], sel["y"], marker, ms=5, label=kind)
            for entry in costs.values():
                if entry["landscape"] != name:
                    continue
                for path in entry["paths"]:
                    arr = np.asarray(path["path"], float)
                    ax.plot(arr[:, 0], arr[:, 1], lw=1.2,
                            label=f"gMAM σ={entry['scale']} {path['from']}→{path['to']}")
            ax.set_xlabel("x")
            ax.set_ylabel("y")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=5)
    fig.suptitle("Landscapes, critical points and minimum-action paths", fontsize=10)
    fig.tight_layout()
    return fig


def fits_figure(p: SgdHittingParams, energies: dict[str, Any], fits: dict[str, Any]) -> Any:
    names = list(p.experiments)
    fig, axes = _grid(len(names))
    for ax, name in zip(axes, names, strict=False):
        runs = fits[name]["fits"]
        xs_all, ys_all = [], []
        for k, f in enumerate(runs):
            x = 1 / np.asarray(f["etas"], float)
            y = np.log(np.asarray(f["etas"], float) * np.asarray(f["means"], float))
            ax.plot(x, y, "o", ms=3, color="0.3", label="measured" if k == 0 else None)
            xs_all.append(x)
            ys_all.append(y)
            med = np.asarray([np.nan if m is None else m for m in f["medians"]], float)
            if np.isfinite(med).any():
                ax.plot(x, np.log(np.asarray(f["etas"], float) * med), "s", ms=2.5,
                        color="tab:cyan", label="median" if k == 0 else None)
        x = np.concatenate(xs_all)
        y = np.concatenate(ys_all)
        ok = np.isfinite(y)
        if ok.sum() >= 2:
            xc, yc = x[ok].mean(), y[ok].mean()
            grid = np.linspace(x[ok].min(), x[ok].max(), 10)
            for v in VARIANTS:
                slope = energies[name].get(v)
                if slope is None or not math.isfinite(slope):
                    continue
                color, ls = STYLE[v]
                ax.plot(grid, yc + slope * (grid - xc), color=color, ls=ls, lw=1,
                        label=f"{v} {slope:.3g}")
        ax.set_title(f"{name} (measured slope {np.nanmean([r['slope'] or np.nan for r in runs]):.3g})",
                     fontsize=8)
        ax.set_xlabel("1/η")
        ax.set_ylabel("log(η τ)")
        ax.legend(fontsize=5)
    fig.suptitle("log(η · mean hitting time) against 1/η; lines: predicted slopes", fontsize=10)
    fig.tight_layout()
    return fig


def histograms_figure(p: SgdHittingParams, mc_times: pd.DataFrame) -> Any:
    names = [n for n, e in p.experiments.items() if e.solver == "mc"]
    fig, axes = _grid(max(len(names), 1))
    for ax, name in zip(axes, names, strict=False):
        rows = mc_times[(mc_times["experiment"] == name) & (mc_times["seed"] == p.seeds[0])]
        eta = rows["eta"].min()
        g = rows[rows["eta"] == eta]
        tau, cens = g["tau"].to_numpy(float), g["censored"].to_numpy(bool)
        from icml25.pipelines.sgd_hitting.monte_carlo import censored_mean

        m = censored_mean(tau, cens)
        u = tau[~cens] / m
        ax.hist(u, bins=40, density=True, alpha=0.6, label=f"τ/mean, η={eta:g}")
        grid = np.linspace(0, max(u.max(initial=1.0), 1.0), 200)
        # density of Exp(1) conditioned on τ/mean below the largest observed hit
        ax.plot(grid, np.exp(-grid) / max(-np.expm1(-grid.max()), 1e-12), "k-", lw=1,
                label="Exp(1) (truncated)")
        ax.set_title(name, fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle("Hitting times over their mean against Exp(1)", fontsize=10)
    fig.tight_layout()
    return fig


def bars_figure(p: SgdHittingParams, energies: dict[str, Any], fits: dict[str, Any],
                names: list[str], title: str) -> Any:
    fig, ax = plt.subplots(figsize=(1.6 + 1.6 * len(names), 3.4))
    x = np.arange(len(names))
    measured = [[r[p.experiments[n].compare] for r in fits[n]["fits"]] for n in names]
    ax.bar(x - 0.2, [np.nanmean(np.asarray(m, float)) for m in measured], 0.35,
           yerr=[np.nanstd(np.asarray(m, float)) for m in measured], label="measured")
    ax.bar(x + 0.2, [energies[n]["w_graph"] for n in names], 0.35, label="E (W-graph)")
    ax.plot(x + 0.2, [energies[n]["gaussian_approx"] for n in names], "D", color="tab:red",
            label="Gaussian approx.")
    ax.set_xticks(x, names, fontsize=7, rotation=15)
    ax.set_ylabel("slope of log(ητ) in 1/η")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def build_figures(p: SgdHittingParams, points: pd.DataFrame, costs: dict[str, Any],
                  energies: dict[str, Any], fits: dict[str, Any],
                  mc_times: pd.DataFrame) -> dict[str, Any]:
    figs = {"landscapes": landscapes_figure(p, points, costs),
            "scaling_fits": fits_figure(p, energies, fits)}
    if len(mc_times):
        figs["hitting_time_histograms"] = histograms_figure(p, mc_times)
    if p.derived.noise_order:
        figs["slopes_by_noise"] = bars_figure(p, energies, fits, p.derived.noise_order,
                                              "Slope by noise law (unit variance)")
    batch = [*(p.derived.batch_ratio or ()), *(p.derived.batch_ratio_exact or ())]
    if batch:
        figs["slopes_by_batch"] = bars_figure(p, energies, fits, batch,
                                              "Slope by mini-batch size b")
    return figs
