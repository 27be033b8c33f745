"""Figures of the acorn pipeline: example clips with their labels, error against conditions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icml25.pipelines.acorn.encoder import HOP, N_FFT
from icml25.pipelines.acorn.qa import TASKS

FS = 16_000


def _stft(x: np.ndarray) -> np.ndarray:
    win = np.hanning(N_FFT)
    frames = [x[i:i + N_FFT] * win for i in range(0, x.size - N_FFT, HOP)]
    return np.fft.rfft(np.asarray(frames), axis=-1).T


def plot_examples(meta: pd.DataFrame, clips: dict[str, np.ndarray], n: int = 5) -> plt.Figure:
    """One test clip per task: log-magnitude spectrogram of mic 1 and the inter-channel phase
    difference ∠X₂ − ∠X₁ (where DoA lives), titled with the item's answer (its label)."""
    split = "test" if "test" in clips else next(iter(clips))
    rows = meta[meta["split"] == split].reset_index(drop=True)
    tasks = [t for t in TASKS if (rows["task"] == t).any()][:n]
    fig, axes = plt.subplots(2, len(tasks), figsize=(3.4 * len(tasks), 5.2), squeeze=False)
    for j, task in enumerate(tasks):
        i = int(np.flatnonzero(rows["task"].to_numpy() == task)[0])
        x = clips[split][i].astype(np.float64)
        s1, s2 = _stft(x[0]), _stft(x[1])
        ext = [0, x.shape[-1] / FS, 0, FS / 2000]
        axes[0][j].imshow(20 * np.log10(np.abs(s1) + 1e-6), origin="lower", aspect="auto",
                          extent=ext, cmap="magma")
        axes[1][j].imshow(np.angle(s2 * np.conj(s1)), origin="lower", aspect="auto",
                          extent=ext, cmap="twilight", vmin=-np.pi, vmax=np.pi)
        axes[0][j].set_title(f"{task}: {rows.loc[i, 'answer']}", fontsize=7, wrap=True)
        axes[1][j].set_xlabel("time (s)")
    axes[0][0].set_ylabel("|X| mic 1 — kHz")
    axes[1][0].set_ylabel("∠X₂−∠X₁ — kHz")
    fig.suptitle("acorn: simulated clips with their physical labels", fontsize=10)
    fig.tight_layout()
    return fig


def plot_error_vs_condition(meta: pd.DataFrame, preds: pd.DataFrame) -> plt.Figure:
    """Mean absolute error on the test split against SNR (DoA, range) and |v| (Doppler)."""
    test = preds[preds["split"] == "test"].merge(
        meta[["item", "label", "snr_db", "v"]], on="item", how="left")
    panels = [("doa", "snr_db", "|TDoA error| (samples)"),
              ("range", "snr_db", "relative range error (%)"),
              ("doppler", "v", "|Δf error| (points)")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, (task, cond, ylabel) in zip(axes, panels, strict=True):
        sub = test[test["task"] == task]
        if sub.empty:
            continue
        x = np.abs(sub[cond].to_numpy(dtype=float))
        err = np.abs(sub["pred"] - sub["label"]).to_numpy()
        if task == "range":
            err = err / sub["label"].to_numpy() * 100
        edges = np.quantile(x, np.linspace(0, 1, 6))
        centres = 0.5 * (edges[1:] + edges[:-1])
        for variant, g in sub.assign(err=err, x=x).groupby("variant"):
            idx = np.clip(np.searchsorted(edges, g["x"], side="right") - 1, 0, 4)
            means = [g["err"].to_numpy()[idx == k].mean() if np.any(idx == k) else np.nan
                     for k in range(5)]
            ax.plot(centres, means, marker="o", label=variant)
        ax.set_xlabel("|v| (m/s)" if cond == "v" else "SNR (dB)")
        ax.set_ylabel(ylabel)
        ax.set_yscale("log")
        ax.set_title(task)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
