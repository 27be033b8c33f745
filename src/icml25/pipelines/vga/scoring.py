"""Metrics of the vga pipeline from prediction tables (``docs/papers/vga.md``, "Metrics").

Every variant (trained models, pixel-free baselines, an MLLM) is scored from the same long
prediction table (variant, seed, task, layout, sample_id, label, pred; ``pred = -1`` is an
invalid answer, scored wrong). Metric names are identical across variants; a variant that does
not answer a task (``pixel_distance_lr`` outside shortest_path) gets NaN there.

- ``acc_<task>_<layout>``: accuracy on the held-out test graphs drawn in that layout;
- ``acc_<task>_train_layout`` / ``acc_<task>_test_layout`` and ``ood_gap_<task>`` = their
  difference (the paper's layout-shift gap);
- ``chance_dev_<task>``: |test-layout accuracy - 1/classes|;
- ``min_acc_node_count``: the control task's worst layout; ``min_acc_all``: worst task/layout;
- ``frac_positive_gap``: share of the path/cycle tasks with a positive gap;
- ``mean_acc_reasoning_test``: mean test-layout accuracy over those tasks;
- ``easier_worse_index`` (paper's "anomaly", our definition): acc(d=1) - acc(d=2) on
  shortest_path in its test layout; negative means the easier question is answered worse;
- ``n_middle_scores``: tasks of the paper whose test-layout accuracy is stuck between chance +
  10 points and 90 %; ``invalid_rate``: share of unparseable answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from icml25.pipelines.vga.graphs import TASK_CLASSES

NAN = float("nan")


def _acc(frame: pd.DataFrame) -> float:
    return float((frame["pred"] == frame["label"]).mean()) if len(frame) else NAN


def score_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Accuracy and count per (variant, seed, task, layout)."""
    if predictions.empty:
        raise ValueError("vga predictions are empty; nothing to score")
    grouped = predictions.groupby(["variant", "seed", "task", "layout"], sort=True)
    out = grouped.apply(lambda g: pd.Series({"accuracy": _acc(g), "n": len(g),
                                             "invalid": int((g["pred"] < 0).sum())}),
                        include_groups=False)
    return out.reset_index()


def metric_names(protocol: Mapping[str, Mapping[str, object]], gap_tasks: Sequence[str]) -> list:
    names = []
    for task, proto in protocol.items():
        names += [f"acc_{task}_{layout}" for layout in proto["eval_layouts"]]
        names += [f"acc_{task}_train_layout", f"acc_{task}_test_layout", f"ood_gap_{task}",
                  f"chance_dev_{task}"]
    names += ["min_acc_all", "invalid_rate", "n_middle_scores"]
    if "node_count" in protocol:
        names.append("min_acc_node_count")
    if gap_tasks:
        names += ["frac_positive_gap", "mean_acc_reasoning_test"]
    if "shortest_path" in protocol:
        names.append("easier_worse_index")
    return names


def seed_metrics(preds: pd.DataFrame, protocol: Mapping[str, Mapping[str, object]],
                 gap_tasks: Sequence[str]) -> dict[str, float]:
    """All metrics of one variant and seed."""
    out: dict[str, float] = {}
    all_acc = []
    middle = 0
    for task, proto in protocol.items():
        chance = 1.0 / len(TASK_CLASSES[task])
        by_layout = {}
        for layout in proto["eval_layouts"]:
            sel = preds[(preds["task"] == task) & (preds["layout"] == layout)]
            by_layout[layout] = _acc(sel)
            out[f"acc_{task}_{layout}"] = by_layout[layout]
            all_acc.append(by_layout[layout])
        train_acc = by_layout[proto["train_layout"]]
        test_acc = by_layout[proto["test_layout"]]
        out[f"acc_{task}_train_layout"] = train_acc
        out[f"acc_{task}_test_layout"] = test_acc
        out[f"ood_gap_{task}"] = train_acc - test_acc
        out[f"chance_dev_{task}"] = abs(test_acc - chance)
        if task != "node_count" and chance + 0.1 < test_acc < 0.9:
            middle += 1
    out["min_acc_all"] = float(np.min(all_acc)) if all_acc else NAN  # NaN if any is NaN
    out["invalid_rate"] = float((preds["pred"] < 0).mean()) if len(preds) else NAN
    out["n_middle_scores"] = float(middle)
    if "node_count" in protocol:
        out["min_acc_node_count"] = float(np.min(
            [out[f"acc_node_count_{lo}"] for lo in protocol["node_count"]["eval_layouts"]]))
    if gap_tasks:
        gaps = np.array([out[f"ood_gap_{t}"] for t in gap_tasks])
        out["frac_positive_gap"] = float(np.mean(gaps > 0)) if np.isfinite(gaps).all() else NAN
        out["mean_acc_reasoning_test"] = float(np.mean(
            [out[f"acc_{t}_test_layout"] for t in gap_tasks]))
    if "shortest_path" in protocol:
        sel = preds[(preds["task"] == "shortest_path")
                    & (preds["layout"] == protocol["shortest_path"]["test_layout"])]
        out["easier_worse_index"] = _acc(sel[sel["label"] == 0]) - _acc(sel[sel["label"] == 1])
    return out


def variant_metrics(predictions: pd.DataFrame, protocol: Mapping[str, Mapping[str, object]],
                    gap_tasks: Sequence[str]) -> dict[str, dict[str, list[float]]]:
    """``{variant: {metric: [value per seed]}}`` with the same metric names for every variant."""
    if predictions.empty:
        raise ValueError("vga predictions are empty; nothing to score")
    names = metric_names(protocol, gap_tasks)
    metrics: dict[str, dict[str, list[float]]] = {}
    for variant, frame in predictions.groupby("variant", sort=False):
        per_seed = [seed_metrics(g, protocol, gap_tasks)
                    for _, g in frame.groupby("seed", sort=True)]
        metrics[str(variant)] = {name: [m[name] for m in per_seed] for name in names}
    return metrics


def confusion_matrices(predictions: pd.DataFrame) -> dict:
    """``{variant: {task: {layout: K x K counts summed over seeds}}}`` (rows = true class);
    invalid answers are counted in an extra last column."""
    out: dict = {}
    for (variant, task, layout), g in predictions.groupby(["variant", "task", "layout"]):
        k = len(TASK_CLASSES[task])
        mat = np.zeros((k, k + 1), dtype=int)
        for y, p in zip(g["label"], g["pred"], strict=True):
            mat[int(y), int(p) if p >= 0 else k] += 1
        out.setdefault(variant, {}).setdefault(task, {})[layout] = mat.tolist()
    return out


def per_class_accuracy(predictions: pd.DataFrame) -> dict:
    """``{variant: {task: {layout: {answer: accuracy}}}}`` pooled over seeds."""
    out: dict = {}
    for (variant, task, layout), g in predictions.groupby(["variant", "task", "layout"]):
        names = TASK_CLASSES[task]
        out.setdefault(variant, {}).setdefault(task, {})[layout] = {
            names[c]: _acc(g[g["label"] == c]) for c in range(len(names))}
    return out


def item_metrics(predictions: pd.DataFrame, protocol: Mapping[str, Mapping[str, object]],
                 gap_tasks: Sequence[str]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per-item correctness for the claims that pair over test graphs (units = ``sample_id``).

    ``{variant: {metric: {sample_id: [0/1 per seed]}}}`` with ``items_<task>_test_layout`` (each
    task's test graphs in its test layout) and ``items_reasoning_test_layout`` (the test graphs
    of every ``gap_tasks`` task in its test layout, pooled). A variant gets a metric only where
    it answered every seed's items of those tasks (the MLLM's sample, ``pixel_distance_lr``
    outside shortest_path get none).
    """
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for variant, frame in predictions.groupby("variant", sort=False):
        seeds = sorted(frame["seed"].unique())
        tables: dict[str, dict[str, list[float]]] = {}
        for task, proto in protocol.items():
            sel = frame[(frame["task"] == task) & (frame["layout"] == proto["test_layout"])]
            if sel.empty:
                continue
            wide = (sel.assign(correct=(sel["pred"] == sel["label"]).astype(float))
                    .pivot_table(index="sample_id", columns="seed", values="correct",
                                 aggfunc="mean"))
            if list(wide.columns) != seeds or wide.isna().any().any():
                continue
            tables[f"items_{task}_test_layout"] = {
                str(k): [float(v) for v in row] for k, row in zip(wide.index, wide.to_numpy(),
                                                                 strict=True)}
        pooled = [f"items_{t}_test_layout" for t in gap_tasks]
        if gap_tasks and all(name in tables for name in pooled):
            tables["items_reasoning_test_layout"] = {
                k: v for name in pooled for k, v in tables[name].items()}
        out[str(variant)] = tables
    return out
