"""No bits gives the uninformed estimate; every estimate is a probability vector (a valid
density after the histogram decoder); the simplex projection against cvxpy."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.distributed_estimation import functions as F
from icml25.pipelines.distributed_estimation import protocols as P
from icml25.pipelines.distributed_estimation import theory
from icml25.pipelines.distributed_estimation.simulator import Point, simulate_sweep

BIT_LIMITED = [name for name in P.PROTOCOLS if name != "centralised"]


@pytest.mark.parametrize("name", BIT_LIMITED)
@pytest.mark.parametrize("a,n", [(8, 1), (16, 64), (64, 4)])
def test_zero_bits_give_the_uniform_estimate_and_empty_messages(name, a, n):
    p = np.random.default_rng(a + n).dirichlet(np.ones(a))
    res = P.PROTOCOLS[name](p, 50, n, 0, np.random.default_rng(0), p_bound=p.max())
    assert np.array_equal(res.p_hat, np.full(a, 1.0 / a))
    assert res.transcript.bits.shape == (50, 0) and res.transcript.max_bits == 0


def test_d1_uninformed_error_is_its_variance():
    # f̂ ≡ 1, so the error is ∫(0.5 cos 2πx)² = 1/8 (cell averages shrink it by sinc² of 2^-14)
    model = F.make_model("density", F.d1_cells())
    shrink = np.sinc(1 / F.FINE_CELLS) ** 2
    assert model.uninformed_ise() == pytest.approx(0.125 * shrink, rel=1e-9)


@pytest.mark.parametrize("model_name", ["density", "gaussian", "poisson"])
def test_zero_bit_runs_equal_the_uninformed_error_and_its_theory(model_name):
    model = F.make_model(model_name, F.d2_cells(0.5))
    protocols = ["layered", "full", "bf", "bf_recursive", "at", "at_noninteractive",
                 "forward", "hash1bit", "localquant"]
    frame = simulate_sweep("z", model, [Point(64, 4, 0)], [2, 8], protocols, [0, 1], 3,
                           progress=False)
    assert frame["applicable"].all() and (frame["bits_max"] == 0).all()
    # f̂ ≡ 1 (density) or ≡ (lo + hi)/2 (regression), whatever K
    f0 = 1.0 if model_name == "density" else (model.lo + model.hi) / 2
    expected = float(np.mean((model.f - f0) ** 2))
    assert np.allclose(frame["ise"], expected, rtol=1e-12)
    assert set(frame.loc[frame.protocol == "layered", "sub"]) == {"uninformed"}
    th = theory.theory_rate(model.bias, [2, 8], 64, 4, 0, regression=model.is_regression,
                            scale=model.scale, uninformed=model.uninformed_ise())
    assert th["regime"] == "uninformed" and th["r_th"] == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="uninformed"):
        theory.theory_rate(model.bias, [2, 8], 64, 4, 0)


@pytest.mark.parametrize("case", range(10))
def test_density_estimates_are_valid_densities_for_every_protocol(case):
    rng = np.random.default_rng(100 + case)
    model = F.make_model("density", F.d2_cells(0.5))
    k = int(2 ** rng.integers(1, 7))
    m, n, l_bits = int(rng.integers(20, 400)), int(2 ** rng.integers(0, 9)), int(
        rng.integers(1, 7))
    p = model.symbol_distribution(k)
    for name, protocol in P.PROTOCOLS.items():
        try:
            res = protocol(p, m, n, l_bits, np.random.default_rng(case), p_bound=model.p_bound(k))
        except P.NotApplicable:
            continue
        assert res.p_hat.min() >= 0 and res.p_hat.sum() == pytest.approx(1.0, abs=1e-12), name
        f_hat = np.repeat(model.decode(res.p_hat, k), F.FINE_CELLS // k)
        assert f_hat.min() >= 0 and f_hat.mean() == pytest.approx(1.0, abs=1e-12), name
        # the projection never moves the estimate away from the truth
        assert np.sum((res.p_hat - p) ** 2) <= np.sum((res.p_raw - p) ** 2) + 1e-15, name


def test_adaptive_protocol_needs_the_projection_at_small_n():
    # AT at n = 1 estimates each bin on its own; its raw output is far from a distribution
    model = F.make_model("density", F.d2_cells(0.5))
    p = model.symbol_distribution(16)
    res = P.at(p, 400, 1, 2, np.random.default_rng(0), p_bound=model.p_bound(16))
    assert abs(res.p_raw.sum() - 1) > 0.1
    assert res.p_hat.min() >= 0 and res.p_hat.sum() == pytest.approx(1.0, abs=1e-12)


def test_simplex_projection_matches_cvxpy():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(1)
    for size, scale in ((2, 1.0), (7, 0.3), (40, 0.05), (40, 2.0)):
        v = rng.normal(1 / size, scale, size)
        x = cp.Variable(size)
        cp.Problem(cp.Minimize(cp.sum_squares(x - v)), [x >= 0, cp.sum(x) == 1]).solve()
        assert np.allclose(P.project_simplex(v), x.value, atol=1e-6)
    inside = rng.dirichlet(np.ones(9))
    assert np.allclose(P.project_simplex(inside), inside, atol=1e-15)
    with pytest.raises(ValueError, match="NaN"):
        P.project_simplex(np.array([0.5, np.nan]))
