"""R_th: branches, continuity at the boundaries, monotonicity, closed forms, slopes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.pipelines.distributed_estimation import functions as F
from icml25.pipelines.distributed_estimation import theory as T

GRID = [2**j for j in range(1, 10)]


@pytest.fixture(scope="module")
def bias_d2():
    f = F.d2_cells(0.5)
    return {k: F.haar_bias(f, k) for k in GRID}.__getitem__


def test_d_comm_branches_follow_the_table():
    m, l_bits = 1000, 2
    assert T.d_comm(m, 64, 16, l_bits) == (16 / (m * 64 * l_bits), "dense")
    d, branch = T.d_comm(m, 4, 16, l_bits)
    assert branch == "medium" and d == pytest.approx(math.log2(16 / 4) / (m * l_bits))
    assert T.d_comm(m, 4, 16, l_bits, "one_plus")[0] == pytest.approx(math.log2(5) / (m * l_bits))
    assert T.d_comm(m, 1, 64, l_bits) == (64 / (m * 4), "sparse")
    assert T.d_comm(m, 3, 2, 4) == (0.0, "full")  # counts: 2·⌈log2 4⌉ = 4 bits
    assert T.d_comm(m, 1, 16, 4) == (0.0, "full")  # one raw sample: ⌈log2 16⌉ = 4 bits


def test_continuous_medium_factor_meets_sparse_and_dense_rates():
    m, a = 500, 64
    for l_bits in (1, 2, 3, 4):
        n = a // 2**l_bits  # the sparse|medium boundary
        sparse = a / (m * n * 2**l_bits)
        assert T.d_comm(m, n, a, l_bits)[0] == pytest.approx(sparse)
    assert T.d_comm(m, a - 1, a, 2)[0] == pytest.approx(1 / (m * 2))  # = dense at n = A
    assert T.d_comm(m, a, a, 2)[0] == pytest.approx(1 / (m * 2))


@pytest.mark.parametrize("l_bits", [1, 2, 4, 8])
def test_rth_monotone_in_n_m_l(bias_d2, l_bits):
    r_n = [T.theory_rate(bias_d2, GRID, 4096, n, l_bits)["r_th"] for n in range(1, 1500, 3)]
    assert np.all(np.diff(r_n) <= 1e-15)
    r_m = [T.theory_rate(bias_d2, GRID, m, 4, l_bits)["r_th"] for m in range(8, 9000, 37)]
    assert np.all(np.diff(r_m) <= 1e-15)
    r_l = [T.theory_rate(bias_d2, GRID, 1024, 16, lb)["r_th"] for lb in range(1, 17)]
    assert np.all(np.diff(r_l) <= 1e-15)


def test_rth_continuous_across_each_regime_change(bias_d2):
    for l_bits in (1, 2, 4):
        prev = None
        for n in range(1, 2049):
            cur = T.theory_rate(bias_d2, GRID, 4096, n, l_bits)
            if prev is not None and cur["regime"] != prev["regime"]:
                assert prev["r_th"] / cur["r_th"] < 1.5
            prev = cur


def test_rth_boundaries_sit_below_the_closed_form_ones_at_moderate_m(bias_d2):
    exact = T.rth_boundaries(bias_d2, GRID, 4096, 2, 1024)
    closed = T.boundaries(4096, 2, 0.5)
    assert 1 <= exact["rth_n2_medium_dense"] < closed["n2_medium_dense"]
    k_th = T.theory_rate(bias_d2, GRID, 4096, int(exact["rth_n2_medium_dense"]), 2)["k_th"]
    assert exact["rth_n2_medium_dense"] >= k_th / 2  # dense starts near n = K_th


def test_closed_form_boundaries_of_the_default_sweep():
    b = T.boundaries(4096, 2, 0.5)
    assert b["n1_sparse_medium"] == pytest.approx(math.sqrt(8192) / 4)
    assert 22 < b["n1_sparse_medium"] < 23 and 90 < b["n2_medium_dense"] < 91
    s = 0.5
    for n in (1, 10, 50, 200):
        regime = T.closed_form_regime(4096, n, 2, s)
        assert regime == ("sparse" if n < 22.6 else "medium" if n < 90.5 else "dense")
    # closed-form rates are continuous at n1 and n2 up to the dropped constants
    n1, n2 = b["n1_sparse_medium"], b["n2_medium_dense"]
    for x in (n1, n2):
        lo = T.closed_form_rate(4096, x * 0.999, 2, s)
        hi = T.closed_form_rate(4096, x * 1.001, 2, s)
        assert 0.5 < lo / hi < 2


def test_n_equals_one_reduces_to_the_one_sample_rate():
    # n = 1: max{m^{-2s/(2s+1)}, (m 2^l)^{-s/(s+1)}} (closed forms, logs dropped)
    s, l_bits = 0.5, 2
    for m in (2**10, 2**16):
        expected = max(m ** (-2 * s / (2 * s + 1)), (m * 2**l_bits) ** (-s / (s + 1)))
        assert T.closed_form_rate(m, 1, l_bits, s) <= expected * 1.0001


def test_slope_fits():
    x = np.array([1, 2, 4, 8, 16.0])
    assert T.fit_slope(x, 3 * x**-0.5) == pytest.approx(-0.5)
    assert math.isnan(T.fit_slope([1.0], [1.0]))
    assert np.allclose(T.local_slopes(x, x**-1.0), -1.0)


def test_bad_smoothness_and_sizes_are_refused(bias_d2):
    for s in (0.0, 1.5, -1.0, float("nan")):
        with pytest.raises(ValueError, match="smoothness"):
            T.check_smoothness(s)
    with pytest.raises(ValueError, match="l=-1"):
        T.theory_rate(bias_d2, GRID, 100, 4, -1)
    with pytest.raises(ValueError, match="uninformed"):  # l = 0 needs the no-data error
        T.theory_rate(bias_d2, GRID, 100, 4, 0)
    assert T.closed_form_regime(100, 4, 0, 0.5) == "uninformed"
    assert math.isnan(T.closed_form_rate(100, 4, 0, 0.5))
    with pytest.raises(ValueError, match="no K"):
        T.admissible_k([64, 128], 1, 1)
