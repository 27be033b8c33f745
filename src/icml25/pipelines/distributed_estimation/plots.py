"""Figures: error against n / m / l with the theory curve, the phase diagram, K_opt, bits used.

R_th is drawn rescaled by one fitted
constant (the geometric mean of envelope / R_th over the sweep); boundaries are dashed lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd

from icml25.pipelines.distributed_estimation import theory
from icml25.pipelines.distributed_estimation.functions import TrueModel

matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLE = {"layered": ("k", "o", "-"), "envelope": ("0.4", "", ":"), "bf": ("C0", "s", "--"),
         "bf_recursive": ("C9", "v", "--"), "at": ("C1", "^", "--"),
         "at_noninteractive": ("C5", "<", ":"), "full": ("C6", "D", ":"),
         "centralised": ("C2", "*", "-"), "forward": ("C3", "x", "-."),
         "hash1bit": ("C4", "+", "-."), "localquant": ("C8", "d", "-."),
         "layered_theory_k": ("0.6", "o", ":")}
REGIME_COLOURS = {"sparse": "#cfe2f3", "medium": "#fff2cc", "dense": "#d9ead3",
                  "ultra_dense": "#ead1dc", "centralised": "#eeeeee",
                  "uninformed": "#ffffff"}


def _rate_panel(ax, part: pd.DataFrame, axis: str, bounds: pd.DataFrame, title: str,
                protocols: Sequence[str]) -> None:
    for protocol in protocols:
        g = part[part["protocol"] == protocol].sort_values(axis)
        if g.empty:
            continue
        colour, marker, line = STYLE.get(protocol, ("0.5", ".", "-"))
        err = np.vstack([g["ise"] - g["ci_lo"], g["ci_hi"] - g["ise"]]).clip(min=0)
        ax.errorbar(g[axis], g["ise"], yerr=err, color=colour, marker=marker, ls=line, ms=4,
                    lw=1.2, capsize=2, label=protocol)
    env = part[part["protocol"] == "envelope"].sort_values(axis)
    if len(env):
        const = float(np.exp(np.mean(np.log(env["ise"] / env["r_th"]))))
        ax.plot(env[axis], const * env["r_th"], color="r", lw=2, alpha=0.6,
                label=f"R_th × {const:.2f}")
    if axis == "n" and len(bounds):
        b = bounds.iloc[0]
        for key, lab, colour, style in (
                ("n1_sparse_medium", "n1", "r", "--"), ("n2_medium_dense", "n2", "r", "--"),
                ("rth_n2_medium_dense", "n2 of R_th", "0.4", ":")):
            value = b.get(key, np.nan)
            if np.isfinite(value) and value > 0:
                ax.axvline(value, color=colour, ls=style, lw=1)
                ax.text(value, ax.get_ylim()[1], lab, color=colour, va="top", ha="left",
                        fontsize=7)
    if axis != "l":  # bits on a linear axis, so that l = 0 (the uninformed estimate) shows
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(axis)
    ax.set_ylabel("ISE (oracle K, mean ± 95% CI)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")


def _phase_diagram(curves: pd.DataFrame, name: str, sweep: Mapping, model: TrueModel,
                   k_grid: Sequence[int], c_v: float, s: float, medium_log: str):
    m = sweep["m"][0]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    log_n = np.linspace(np.log2(min(sweep["n"])) - 0.5, np.log2(max(sweep["n"])) + 0.5, 90)
    ls = np.arange(1, max(sweep["l"]) + 1)
    bias = {k: model.bias(k) for k in k_grid}
    names = list(REGIME_COLOURS)
    image = np.zeros((ls.size, log_n.size))
    for i, l_bits in enumerate(ls):
        for j, x in enumerate(log_n):
            n = max(1, round(2**x))
            image[i, j] = names.index(theory.theory_rate(bias.__getitem__, k_grid, m, n,
                                                         int(l_bits), c_v=c_v,
                                                         medium_log=medium_log)["regime"])
    cmap = matplotlib.colors.ListedColormap(list(REGIME_COLOURS.values()))
    ax.imshow(image, origin="lower", aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5,
              extent=(log_n[0], log_n[-1], 0.5, ls[-1] + 0.5))
    n1 = [np.log2(theory.boundaries(m, int(lb), s)["n1_sparse_medium"]) for lb in ls]
    n2 = [np.log2(theory.boundaries(m, int(lb), s)["n2_medium_dense"]) for lb in ls]
    ax.plot(n1, ls, "b--", lw=1.5, label="closed-form n1 (sparse|medium)")
    ax.plot(n2, ls, "g--", lw=1.5, label="closed-form n2 (medium|dense)")
    part = curves[(curves["sweep"] == name) & (curves["protocol"] == "envelope")]
    marks = {"bf": "s", "at": "^", "full": "D"}
    for sub, g in part.groupby("sub"):
        ax.scatter(np.log2(g["n"]), g["l"], marker=marks.get(sub, "o"), c="k", s=30,
                   label=f"measured best: {sub}", zorder=3)
    for l_bits, g in part.groupby("l"):
        g = g.sort_values("n")
        slopes = theory.local_slopes(g["n"], g["ise"])
        for x, slope in zip(np.log2(g["n"]), slopes, strict=True):
            ax.annotate(f"{slope:+.2f}", (x, l_bits), textcoords="offset points", xytext=(0, 6),
                        ha="center", fontsize=6)
    handles = [matplotlib.patches.Patch(color=REGIME_COLOURS[r], label=f"R_th regime: {r}")
               for r in names if (image == names.index(r)).any()]
    ax.legend(handles=handles + ax.get_legend_handles_labels()[0], fontsize=6,
              loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel("log2 n (samples per terminal)")
    ax.set_ylabel("l (bits per terminal)")
    ax.set_title(f"Phase diagram at m={m}: theory regions, measured winner and local slope",
                 fontsize=9)
    return fig


def make_figures(curves: pd.DataFrame, theory_rates: pd.DataFrame, bounds: pd.DataFrame,
                 models: Mapping[tuple[str, str], TrueModel], sweeps: Mapping[str, Mapping],
                 k_grid: Sequence[int], c_v: float, medium_log: str = "continuous") -> dict:
    figs = {}
    main = ["layered", "envelope", "bf", "at", "centralised", "forward", "hash1bit",
            "localquant", "at_noninteractive", "bf_recursive"]
    regression = []
    for name, sw in sweeps.items():
        part = curves[curves["sweep"] == name]
        b = bounds[bounds["sweep"] == name]
        if sw["role"] in ("n_sweep", "m_sweep", "l_sweep"):
            fig, ax = plt.subplots(figsize=(7, 4.5))
            fixed = ", ".join(f"{k}={sw[k][0]}" for k in ("m", "n", "l") if k != sw["axis"])
            _rate_panel(ax, part, sw["axis"], b, f"{name}: {sw['function']}, {fixed}", main)
            ax.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
            figs[f"{name}.png"] = fig
        elif sw["role"] == "regression":
            regression.append(name)
        elif sw["role"] == "phase":
            s = float(theory_rates.loc[theory_rates["sweep"] == name, "s"].iloc[0])
            figs["phase_diagram.png"] = _phase_diagram(
                curves, name, sw, models[(sw["function"], sw["model"])], k_grid, c_v, s, medium_log)
    if regression:
        fig, axes = plt.subplots(1, len(regression), figsize=(3.6 * len(regression), 3.6),
                                 squeeze=False)
        for ax, name in zip(axes[0], regression, strict=True):
            part = curves[curves["sweep"] == name]
            _rate_panel(ax, part, "n", bounds[bounds["sweep"] == name],
                        f"{name} ({sweeps[name]['model']})", ["layered", "envelope",
                                                              "bf", "at", "centralised"])
        axes[0][0].legend(fontsize=6)
        fig.tight_layout()
        figs["regression.png"] = fig
    n_sweeps = [n for n, sw in sweeps.items() if sw["role"] == "n_sweep"]
    if n_sweeps:
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, name in enumerate(n_sweeps):
            lay = curves[(curves["sweep"] == name) & (curves["protocol"] == "layered")]
            lay = lay.sort_values("n")
            ax.plot(lay["n"], lay["K"], f"C{i}o-", label=f"{name}: oracle K (layered)")
            ax.plot(lay["n"], lay["k_th"], f"C{i}s--", label=f"{name}: theory K")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("n")
        ax.set_ylabel("K")
        ax.legend(fontsize=7)
        ax.set_title("Histogram size: empirical argmin against the argmin of R_th", fontsize=9)
        figs["k_opt.png"] = fig
    used = curves[curves["bits_max"].notna() & ~curves["protocol"].isin(["envelope"])
                  & (curves["l"] > 0)]
    if len(used):
        frac = (used["bits_max"] / used["l"]).groupby(used["protocol"]).max().sort_values()
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.barh(frac.index, frac.values, color="C0")
        ax.axvline(1.0, color="r", ls="--", label="budget l")
        ax.set_xlabel("max bits in any message / l")
        ax.legend(fontsize=7)
        ax.set_title("Bits actually serialised per message", fontsize=9)
        fig.tight_layout()
        figs["bits_per_message.png"] = fig
    return figs
