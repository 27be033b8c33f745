"""Pixel-free references (``docs/papers/vga.md``, "Baselines").

- ``majority``: the most frequent training class (ties to the lowest class index);
- ``chance``: uniformly random answers, seeded;
- ``oracle``: the exact solver run on the true graph (VF2, bitmask DP, BFS, chordless cycles);
  it must score 100 % and so doubles as a guard on the stored labels;
- ``graph_stat_lr``: logistic regression on graph statistics (n, m, degree histogram, leaves,
  min degree; for pairs both graphs and their difference): shows which labels leak through
  local statistics; on iso_hard the degree sequences match by construction, so it is at chance;
- ``pixel_distance_lr``: shortest_path only; multinomial logistic regression on the pixel
  distance between the two marked squares, fit on the training layout and scored on every
  layout: the layout-specific shortcut the benchmark is built to expose.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from icml25.pipelines.vga.generator import instance_graphs
from icml25.pipelines.vga.graphs import TASK_CLASSES, pair_statistics, solve

BASELINES = ("majority", "chance", "oracle", "graph_stat_lr", "pixel_distance_lr")
PRED_COLUMNS = ("variant", "seed", "task", "layout", "sample_id", "label", "pred")


def _test_rows(images: pd.DataFrame, task: str) -> pd.DataFrame:
    return images[(images["task"] == task) & (images["split"] == "test")][
        ["sample_id", "layout", "label"]]


def _frame(variant: str, seed: int, task: str, rows: pd.DataFrame, pred) -> pd.DataFrame:
    return pd.DataFrame({"variant": variant, "seed": seed, "task": task,
                         "layout": rows["layout"].to_numpy(),
                         "sample_id": rows["sample_id"].to_numpy(),
                         "label": rows["label"].to_numpy().astype(int),
                         "pred": np.asarray(pred, dtype=int)})


def _fit_lr(x: np.ndarray, y: np.ndarray, c: float, seed: int):
    if len(np.unique(y)) < 2:
        raise ValueError("logistic-regression baseline: the training labels have one class")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000,
                                                               random_state=seed))
    return model.fit(x, y)


def marked_pixel_distance(pos_json: str, marked_json: str) -> float:
    """Euclidean pixel distance between the two marked nodes of a drawing."""
    pos = np.asarray(json.loads(pos_json), dtype=float)
    s, t = json.loads(marked_json)
    return float(np.linalg.norm(pos[s] - pos[t]))


def baseline_predictions(
    graphs: pd.DataFrame,
    layouts: pd.DataFrame,
    images: pd.DataFrame,
    seeds: Sequence[int],
    lr_c: float = 1.0,
) -> pd.DataFrame:
    """Test-set predictions of every baseline, task, evaluation layout and seed."""
    frames = []
    by_id = graphs.set_index("sample_id")
    for task in graphs["task"].unique():
        classes = len(TASK_CLASSES[task])
        rows = _test_rows(images, task)
        if rows.empty:
            raise ValueError(f"vga images: task {task} has no test images")
        train = graphs[(graphs["task"] == task) & (graphs["split"] == "train")]
        test_graphs = by_id.loc[rows["sample_id"]].reset_index()

        # oracle: recompute every label with the exact solver from the stored graph
        oracle = []
        for rec in test_graphs.to_dict("records"):
            graph, partner, marked = instance_graphs(rec)
            answer = solve(task, graph, marked=marked, partner=partner)
            oracle.append(-1 if answer is None else answer)

        counts = np.bincount(train["label"].to_numpy().astype(int), minlength=classes)
        majority = int(np.argmax(counts))

        def stats(frame: pd.DataFrame) -> np.ndarray:
            feats = []
            for rec in frame.to_dict("records"):
                graph, partner, _ = instance_graphs(rec)
                feats.append(pair_statistics(graph, partner))
            return np.array(feats)

        x_train, y_train = stats(train), train["label"].to_numpy().astype(int)
        x_test = stats(test_graphs)

        pix = None
        if task == "shortest_path":
            lay = layouts.set_index(["sample_id", "layout"])
            # each training graph as it was drawn (its one training layout)
            drawn = layouts[layouts["split"] == "train"].set_index("sample_id")
            d_train = np.array([[marked_pixel_distance(drawn.loc[sid, "pos_json"], m)]
                                for sid, m in zip(train["sample_id"], train["marked_json"],
                                                  strict=True)])
            d_test = np.array([[marked_pixel_distance(lay.loc[(sid, lo), "pos_json"],
                                                      by_id.loc[sid, "marked_json"])]
                               for sid, lo in zip(rows["sample_id"], rows["layout"],
                                                  strict=True)])
            pix = (d_train, d_test)

        for seed in seeds:
            rng = np.random.default_rng(np.random.SeedSequence([seed, classes, len(rows)]))
            frames.append(_frame("majority", seed, task, rows, np.full(len(rows), majority)))
            frames.append(_frame("chance", seed, task, rows,
                                 rng.integers(0, classes, size=len(rows))))
            frames.append(_frame("oracle", seed, task, rows, oracle))
            frames.append(_frame("graph_stat_lr", seed, task, rows,
                                 _fit_lr(x_train, y_train, lr_c, seed).predict(x_test)))
            if pix is not None:
                frames.append(_frame("pixel_distance_lr", seed, task, rows,
                                     _fit_lr(pix[0], y_train, lr_c, seed).predict(pix[1])))
    return pd.concat(frames, ignore_index=True)[list(PRED_COLUMNS)]
