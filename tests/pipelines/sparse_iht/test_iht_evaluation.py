"""The derived claim checks are computed from the tables, correctly, and can fail."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from icml25.pipelines.sparse_iht.evaluation import claim_metrics, variant_metrics

SEEDS = [0, 1, 2]


def _tables(gaps_2sp: dict[float, list[float]], gaps_itp: dict[float, list[float]]):
    rows = []
    for method, gaps in (("iht_2sp", gaps_2sp), ("iht_then_project", gaps_itp),
                         ("exact_iht", gaps_itp)):
        for ratio, per_seed in gaps.items():
            for seed, gap in zip(SEEDS, per_seed, strict=True):
                rows.append({"setting": "nonneg", "seed": seed, "k": int(ratio * 4),
                             "k_ratio": ratio, "method": method, "objective": 1.0 + gap,
                             "gap": gap, "recall": 1.0 if ratio > 1 else 0.5, "precision": 1.0,
                             "nnz": 4, "violation": 0.0, "max_violation": 0.0,
                             "iterations_to_tol": 10})
    synthetic = pd.DataFrame(rows)
    small = pd.DataFrame([{"setting": "nonneg", "seed": s, "k": 4, "k_ratio": r,
                           "method": "iht_2sp", "gap_best": g}
                          for r, g in ((1.0, 0.3), (2.0, 0.1)) for s in SEEDS])
    stochastic = pd.DataFrame({"seed": SEEDS, "rel_vs_equal_ifo": [0.01, -0.03, 0.05],
                               "rel_vs_full": [0.0] * 3, "ifo_ratio": [0.5] * 3,
                               "hsg_ifo": [100.0] * 3, "hsg_max_violation": [0.0] * 3})
    zeroth = pd.DataFrame([{"seed": s, "method": m, "excess_final": e, "excess_tail": e,
                            "support_excess_final": e, "support_excess_tail": e,
                            "queries": 10.0, "recall": 1.0, "max_violation": 0.0}
                           for s in SEEDS for m, e in (("hzo_ht_2sp", 0.001),
                                                       ("szoht_q10", 0.08),
                                                       ("szoht_q40", 0.02))])
    return synthetic, small, stochastic, zeroth


def _derived(gaps_2sp, gaps_itp):
    tables = _tables(gaps_2sp, gaps_itp)
    metrics = variant_metrics(*tables, SEEDS)
    return metrics, claim_metrics(metrics, *tables, SEEDS, relax_ratio=2.0, recall_ratio=2.0,
                                  szoht_q=[10, 40])


def test_derived_checks_follow_the_tables():
    metrics, derived = _derived({1.0: [3.0, 4.0, 5.0], 2.0: [-0.1, 0.2, -0.3]},
                                {1.0: [3.0, 4.0, 5.0], 2.0: [0.0, 0.1, 0.0]})
    assert metrics["iht_2sp"]["nonneg.k2.gap"] == [-0.1, 0.2, -0.3]
    assert math.isnan(metrics["hsg_ht_2sp"]["nonneg.k2.gap"][0])  # not applicable
    assert set(metrics["iht_2sp"]) == set(metrics["szoht_q40"])  # identical names
    assert derived["iht_2sp:trade_off"]["nonneg.median_gap_increases"] == 0
    assert derived["iht_2sp:trade_off"]["small.nonneg.median_gap_best_increases"] == 0
    assert derived["iht_2sp:vs_iht_then_project"]["nonneg.k2.le_iht_then_project"] == [
        1.0, 0.0, 1.0]
    assert derived["iht_2sp:median"]["nonneg.k2.gap"] == pytest.approx(-0.1)
    assert derived["iht_then_project:median"]["nonneg.k2.gap"] == pytest.approx(0.0)
    rel = (np.array([0.9, 1.2, 0.7]) - np.array([1.0, 1.1, 1.0])) / np.array([1.0, 1.1, 1.0])
    assert derived["iht_2sp:vs_exact_iht"]["nonneg.k2.median_abs_rel_diff"] == pytest.approx(
        np.median(np.abs(rel)))
    assert derived["szoht:plateau"]["excess_ratio_qmin_over_qmax"] == pytest.approx(4.0)
    assert derived["hsg_ht_2sp:vs_iht_2sp"]["median_abs_rel_vs_equal_ifo"] == pytest.approx(0.03)
    assert derived["2sp_methods"]["max_violation"] == [0.0, 0.0, 0.0]
    assert derived["2sp_methods"]["max_violation_all_seeds"] == 0.0
    # per seed, for the paired claims: the largest step of each seed's gap curve along k
    assert derived["iht_2sp:trade_off"]["nonneg.largest_gap_rise"] == pytest.approx(
        [-3.1, -3.8, -5.3])
    assert derived["iht_2sp:trade_off"]["small.nonneg.largest_gap_best_rise"] == pytest.approx(
        [-0.2] * 3)
    assert derived["szoht:plateau"]["excess_qmin_minus_2x_qmax"] == pytest.approx([0.04] * 3)


def test_a_rising_median_gap_is_counted():
    _, derived = _derived({1.0: [0.5, 0.5, 0.5], 2.0: [0.9, 0.8, 0.7]},
                          {1.0: [0.5, 0.5, 0.5], 2.0: [0.1, 0.1, 0.1]})
    assert derived["iht_2sp:trade_off"]["nonneg.median_gap_increases"] == 1
    assert derived["iht_2sp:trade_off"]["nonneg.largest_gap_rise"] == pytest.approx(
        [0.4, 0.3, 0.2])
    assert derived["iht_2sp:vs_iht_then_project"]["nonneg.k2.le_iht_then_project"] == [0.0] * 3
