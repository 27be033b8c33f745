"""Metrics of the softshape room on hand-made result rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from icml25.pipelines.softshape.evaluation import average_ranks, summarise, variant_metrics
from icml25.pipelines.softshape.experiment import window_score_ratio


def _rows():
    rows = []
    acc = {("softshape", "A"): [0.9, 0.8], ("softshape", "B"): [0.7, 0.7],
           ("mini_rocket", "A"): [1.0, 1.0], ("mini_rocket", "B"): [0.7, 0.7],
           ("hard", "A"): [0.6, 0.6]}
    for (variant, ds), values in acc.items():
        for seed, a in enumerate(values):
            rows.append({"variant": variant, "dataset": ds, "fold": 0, "seed": seed,
                         "accuracy": a, "accuracy_last_epoch": a, "train_seconds": 1.0,
                         "infer_seconds": 0.5, "best_epoch": 3, "epochs_run": 4,
                         "expert_load": json.dumps([3, 1]) if variant != "mini_rocket"
                         else None,
                         "expert_max_share": 0.75 if variant != "mini_rocket" else np.nan,
                         "score_ratio": np.nan})
    return pd.DataFrame(rows)


def test_average_rank_with_ties():
    ranks = average_ranks(_rows(), ["A", "B"])
    assert ranks == {"softshape": pytest.approx((2 + 1.5) / 2),
                     "mini_rocket": pytest.approx((1 + 1.5) / 2)}


def test_variant_metrics_share_names_and_mark_missing_sets():
    m = variant_metrics(_rows(), ["A", "B"], ["A"], [0, 1])
    assert {frozenset(v) for v in m.values()} == {frozenset(m["softshape"])}
    assert m["softshape"]["acc/A"] == [0.9, 0.8]
    assert m["softshape"]["mean_acc"] == pytest.approx([0.8, 0.75])
    assert np.isnan(m["hard"]["acc/B"][0]) and np.isnan(m["hard"]["mean_acc"][0])
    assert m["hard"]["mean_acc_ablation_sets"] == [0.6, 0.6]
    assert m["softshape"]["train_seconds"] == [2.0, 2.0]  # summed over data sets per seed
    assert np.isnan(m["mini_rocket"]["expert_max_share"][0])


def test_summary_counts_wins_and_expert_collapse():
    s = summarise(_rows(), ["A", "B"])
    assert s["softshape_vs"]["mini_rocket"] == {"wins": 0, "ties": 1, "losses": 1,
                                                "n_datasets": 2,
                                                "mean_difference": pytest.approx(-0.075),
                                                "wilcoxon_p": None}
    assert s["expert_load"]["A"]["mean_share"] == [0.75, 0.25]
    assert s["expert_load"]["A"]["runs_on_one_expert"] == 0


def test_window_score_ratio_known_answer():
    scores = np.full((2, 10), 0.2)
    scores[:, 3:6] = 0.6  # inside [3, 5]
    scores[1, 9] = np.nan  # an uncovered tail step is ignored
    windows = np.array([[3, 5], [3, 5]])
    assert window_score_ratio(scores, windows) == pytest.approx(3.0)
