"""The simulator: determinism, layered rows, bit accounting and oracle-K curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from icml25.pipelines.distributed_estimation import analysis, theory
from icml25.pipelines.distributed_estimation.functions import d2_cells, make_model
from icml25.pipelines.distributed_estimation.simulator import Point, simulate_sweep

PROTOCOLS = ["layered", "centralised", "full", "bf", "at", "forward", "hash1bit", "localquant",
             "at_noninteractive", "bf_recursive"]


@pytest.fixture(scope="module")
def frame():
    model = make_model("density", d2_cells(0.5))
    points = [Point(128, n, 2) for n in (1, 4, 32)]
    return simulate_sweep("t", model, points, [2, 4, 8], PROTOCOLS, [0, 1], 7, progress=False)


def test_simulation_is_deterministic_for_a_fixed_seed(frame):
    model = make_model("density", d2_cells(0.5))
    again = simulate_sweep("t", model, [Point(128, n, 2) for n in (1, 4, 32)], [2, 4, 8],
                           PROTOCOLS, [0, 1], 7, progress=False)
    cols = [c for c in frame.columns if c != "seconds"]
    pd.testing.assert_frame_equal(frame[cols], again[cols])
    other = simulate_sweep("t", model, [Point(128, 4, 2)], [4], ["bf"], [0], 8, progress=False)
    same = frame[(frame.protocol == "bf") & (frame.n == 4) & (frame.K == 4) & (frame.rep == 0)]
    assert other["ise"].iloc[0] != same["ise"].iloc[0]


def test_layered_rows_reuse_the_sub_protocol_chosen_by_regime(frame):
    lay = frame[frame.protocol == "layered"]
    assert len(lay) == 3 * 3 * 2
    for row in lay.itertuples():
        expected = "full" if row.n == 1 and row.K <= 4 else ("bf" if row.n < row.A else "at")
        assert row.sub == expected
        sub = frame[(frame.protocol == row.sub) & (frame.n == row.n) & (frame.K == row.K)
                    & (frame.rep == row.rep)]
        assert sub["ise"].iloc[0] == row.ise


def test_bits_are_within_budget_and_not_applicable_runs_are_marked(frame):
    used = frame[frame.applicable & frame.bits_max.notna()]
    assert (used.bits_max <= used.l).all() and (used.bits_mean <= used.l).all()
    assert frame.loc[frame.protocol == "centralised", "bits_max"].isna().all()
    na = frame[~frame.applicable]
    assert set(na.protocol) <= {"full", "forward"} and na.ise.isna().all()


def test_oracle_curves_pick_the_best_k_and_compute_ratios(frame):
    model = make_model("density", d2_cells(0.5))
    th = pd.DataFrame([{"sweep": "t", "model": "density", "m": 128, "n": n, "l": 2, "s": 0.5,
                        **theory.theory_rate(model.bias, [2, 4, 8], 128, n, 2),
                        "closed_regime": theory.closed_form_regime(128, n, 2, 0.5)}
                       for n in (1, 4, 32)])
    curves = analysis.oracle_curves(frame, th)
    bf = curves[(curves.protocol == "bf") & (curves.n == 4)].iloc[0]
    means = frame[(frame.protocol == "bf") & (frame.n == 4)].groupby("K")["ise"].mean()
    assert means.idxmin() == bf.K and bf.ise == pytest.approx(means.min())
    assert bf.ci_lo <= bf.ise <= bf.ci_hi
    env = curves[curves.protocol == "envelope"].set_index("n")
    sub = curves[curves.protocol.isin(["bf", "at", "full"])].groupby("n")["ise"].min()
    assert np.allclose(env.loc[sub.index, "ise"], sub)
    assert np.allclose(curves["ratio"], curves["ise"] / curves["r_th"])


def test_crossover_interpolates_the_sign_change():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    bf = np.array([1.0, 1.0, 1.0, 1.0])
    at = np.array([4.0, 2.0, 0.5, 0.25])  # log(bf/at): -1.39, -0.69, 0.69, 1.39
    assert analysis.crossover(x, bf, at) == pytest.approx(np.sqrt(8.0))  # log-midpoint of 2, 4
    at = np.array([4.0, 1.0, 0.5, 0.25])  # equal at x = 2
    assert analysis.crossover(x, bf, at) == pytest.approx(2.0)
    assert np.isnan(analysis.crossover(x, bf, bf * 2))
