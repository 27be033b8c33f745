"""The certification cascade of CTBench, at CPU scale: per test sample, natural
prediction → IBP → CROWN-IBP → full (plain) CROWN (on a random stratified subset) → PGD attack.
Test images must lie in the data domain [0, 1] (refused otherwise, naming the samples).

A sample is *certified* if it is classified correctly and any stage proves every margin
``z_y − z_j`` positive over ``B(x)``; it is *PGD-robust* if no PGD iterate is misclassified.
Soundness makes ``certified ⊆ PGD-robust ⊆ correct`` per sample; the table records all three so
the pipeline can count violations instead of assuming them away.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from icml25.pipelines.ctbench.attacks import pgd_attack
from icml25.pipelines.ctbench.bounds import (
    check_domain,
    check_finite,
    crown,
    crown_ibp,
    ibp,
    input_box,
    margin_spec,
    network_ops,
)


def stratified_subset(labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """``size`` indices drawn class by class (never "the first N": splits are class-sorted)."""
    labels = np.asarray(labels)
    if size >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    per = {c: np.flatnonzero(labels == c) for c in classes}
    take = {c: int(np.floor(size * len(per[c]) / len(labels))) for c in classes}
    left = size - sum(take.values())
    for c in rng.permutation(classes)[:left]:
        take[c] += 1
    chosen = [rng.choice(per[c], size=min(take[c], len(per[c])), replace=False) for c in classes]
    return np.sort(np.concatenate(chosen))


def relu_states(model: nn.Sequential, x: Tensor, eps: float, batch_size: int = 500
                ) -> dict[str, float]:
    """Fractions of dead (u ≤ 0), unstable and active (l ≥ 0) ReLUs under the IBP bounds of the
    ε-box, over all samples and neurons (CTBench's ``relu_loop`` statistics)."""
    ops = network_ops(model, tuple(x.shape[1:]))
    dead = unstable = active = 0
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            lower, upper = input_box(x[start:start + batch_size], eps)
            for lo, hi in ibp(ops, lower, upper).relu_bounds:
                d, a = hi <= 0, lo >= 0
                dead += int(d.sum())
                active += int(a.sum())
                unstable += int((~(d | a)).sum())
    total = max(dead + unstable + active, 1)
    return {"relu_dead": dead / total, "relu_unstable": unstable / total,
            "relu_active": active / total}


def certify(model: nn.Sequential, x: Tensor, y: Tensor, eps: float, num_classes: int, *,
            pgd_steps: int, pgd_restarts: int, crown_index: np.ndarray, crown_chunk: int = 8,
            batch_size: int = 250, seed: int = 0, progress: bool = True, desc: str = ""
            ) -> pd.DataFrame:
    """One row per sample: ``correct, pgd_robust, ibp, crown_ibp, crown`` (crown NaN outside
    ``crown_index``), the lowest margin bound of each stage, ``certified`` and timings."""
    check_finite(x, "test images")
    check_domain(x, "test images")  # before any work: a clipped box would not contain them
    model.eval()
    ops = network_ops(model, tuple(x.shape[1:]))
    n = len(x)
    rows = {k: np.zeros(n) for k in ("ibp_margin", "crown_ibp_margin")}
    correct = np.zeros(n, dtype=bool)
    pgd_ok = np.zeros(n, dtype=bool)
    timing = {"ibp": 0.0, "crown_ibp": 0.0, "crown": 0.0, "pgd": 0.0}
    gen = torch.Generator(device=x.device).manual_seed(seed)
    batches = range(0, n, batch_size)
    bar = tqdm(total=len(batches) + 1, desc=desc or "certify", disable=not progress, leave=False)
    for start in batches:
        sl = slice(start, start + batch_size)
        xb, yb = x[sl], y[sl]
        lower, upper = input_box(xb, eps)
        spec = margin_spec(yb, num_classes)
        with torch.no_grad():
            correct[sl] = (model(xb).argmax(1) == yb).cpu().numpy()
            t0 = time.perf_counter()
            rows["ibp_margin"][sl] = ibp(ops, lower, upper, spec).lower.min(1).values.cpu().numpy()
            t1 = time.perf_counter()
            rows["crown_ibp_margin"][sl] = crown_ibp(ops, lower, upper, spec)[0].min(1
                                                                                     ).values.cpu().numpy()
            t2 = time.perf_counter()
        timing["ibp"] += t1 - t0
        timing["crown_ibp"] += t2 - t1
        t3 = time.perf_counter()
        res = pgd_attack(model, xb, yb, lower, upper, steps=pgd_steps, restarts=pgd_restarts,
                         generator=gen)
        timing["pgd"] += time.perf_counter() - t3
        pgd_ok[sl] = (~res.broken).cpu().numpy()
        bar.update()
    crown_margin = np.full(n, np.nan)
    idx = np.asarray(crown_index, dtype=int)
    if idx.size:
        t4 = time.perf_counter()
        xs, ys = x[idx], y[idx]
        lower, upper = input_box(xs, eps)
        with torch.no_grad():
            lows, _, _ = crown(ops, lower, upper, margin_spec(ys, num_classes), chunk=crown_chunk)
        crown_margin[idx] = lows.min(1).values.cpu().numpy()
        timing["crown"] = time.perf_counter() - t4
    bar.update()
    bar.close()
    table = pd.DataFrame({
        "sample": np.arange(n), "label": y.cpu().numpy(), "correct": correct, "pgd_robust": pgd_ok,
        "ibp_margin": rows["ibp_margin"], "crown_ibp_margin": rows["crown_ibp_margin"],
        "crown_margin": crown_margin,
    })
    table["ibp"] = correct & (table["ibp_margin"] > 0)
    table["crown_ibp"] = correct & (table["crown_ibp_margin"] > 0)
    table["in_crown_subset"] = ~np.isnan(crown_margin)
    table["crown"] = correct & (np.nan_to_num(crown_margin, nan=-np.inf) > 0)
    table["certified"] = table["ibp"] | table["crown_ibp"] | table["crown"]
    table.attrs["timing"] = timing
    for k, v in timing.items():
        table[f"seconds_{k}"] = v / max(n if k != "crown" else idx.size, 1)
    return table


def summarize(table: pd.DataFrame) -> dict[str, float]:
    """Accuracies in percent from a certification table (and ordering violations, counts)."""
    sub = table[table["in_crown_subset"]]
    pct = lambda s: 100.0 * float(s.mean()) if len(s) else float("nan")  # noqa: E731
    return {
        "nat_acc": pct(table["correct"]),
        "pgd_acc": pct(table["pgd_robust"]),
        "cert_acc": pct(table["certified"]),
        "cert_ibp_acc": pct(table["ibp"]),
        "cert_crown_ibp_acc": pct(table["crown_ibp"]),
        "cert_ibp_or_crown_ibp_acc": pct(table["ibp"] | table["crown_ibp"]),
        "cert_crown_subset_acc": pct(sub["crown"]),
        "cert_ibp_subset_acc": pct(sub["ibp"]),
        "ordering_violations": float(((table["certified"] & ~table["pgd_robust"])
                                      | (table["pgd_robust"] & ~table["correct"])).sum()),
    }
