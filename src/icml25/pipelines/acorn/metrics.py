"""The paper's metrics and the derived physical errors.

BCA / TCA: accuracy of the LOS (binary) and multipath (3-class) answers; MAE_f: mean absolute
error of Δf% in percentage points; MAE_t: mean absolute TDoA error in samples; REP: mean
absolute relative range error in percent. Derived: speed MAE (m/s) via v̂ = −cΔ̂/(100 + Δ̂),
angle MAE (degrees) via θ̂ = arccos(clip(τ̂c/(d fs), ±1)), left/right accuracy.
"""

from __future__ import annotations

import numpy as np

from icml25.pipelines.acorn.channels import azimuth_from_tdoa, speed_from_shift

#: metric name per task: (name, higher is better)
TASK_METRICS = {"los": ("los_bca", True), "multipath": ("multipath_tca", True),
                "doppler": ("doppler_mae_f", False), "doa": ("doa_mae_t", False),
                "range": ("range_rep", False)}


def _check(pred: np.ndarray, true: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    pred, true = np.asarray(pred, dtype=float), np.asarray(true, dtype=float)
    if pred.shape != true.shape or pred.size == 0:
        raise ValueError(f"{name}: predictions {pred.shape} and labels {true.shape} must be "
                         "non-empty and of the same shape")
    if not np.all(np.isfinite(true)):
        raise ValueError(f"{name}: labels contain NaN or inf")
    return pred, true


def accuracy(pred: np.ndarray, true: np.ndarray) -> float:
    """BCA / TCA: fraction of exact class matches (a NaN prediction counts as wrong)."""
    pred, true = _check(pred, true, "accuracy")
    return float(np.mean(pred == true))


def mae(pred: np.ndarray, true: np.ndarray) -> float:
    """MAE_f / MAE_t: mean absolute error; NaN predictions are an error, not skipped."""
    pred, true = _check(pred, true, "mae")
    if not np.all(np.isfinite(pred)):
        raise ValueError("mae: predictions contain NaN or inf")
    return float(np.mean(np.abs(pred - true)))


def rep(pred: np.ndarray, true: np.ndarray) -> float:
    """REP = mean |D̂ − D|/D · 100."""
    pred, true = _check(pred, true, "rep")
    if np.any(true <= 0) or not np.all(np.isfinite(pred)):
        raise ValueError("rep: distances must be positive and predictions finite")
    return float(np.mean(np.abs(pred - true) / true) * 100.0)


def task_metrics(task: str, pred: np.ndarray, true: np.ndarray, spacing: float,
                 prefix: str = "") -> dict[str, float]:
    """The task's paper metric plus its derived physical errors."""
    name = prefix + TASK_METRICS[task][0]
    if task in ("los", "multipath"):
        return {name: accuracy(pred, true)}
    if task == "doppler":
        return {name: mae(pred, true),
                f"{prefix}doppler_mae_speed": mae(speed_from_shift(pred),
                                                  speed_from_shift(true))}
    if task == "doa":
        return {name: mae(pred, true),
                f"{prefix}doa_mae_deg": mae(azimuth_from_tdoa(pred, spacing),
                                            azimuth_from_tdoa(true, spacing)),
                f"{prefix}doa_lr_acc": accuracy(np.sign(pred), np.sign(true))}
    return {name: rep(pred, true)}
