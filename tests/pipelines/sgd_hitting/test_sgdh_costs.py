"""Large-deviation costs: HJ quasi-potentials in 1-D and gMAM in 2-D against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.pipelines.sgd_hitting.critical_points import find_critical_points
from icml25.pipelines.sgd_hitting.landscapes import (
    Landscape,
    camel,
    sine_neuron,
    tilted_double_well,
)
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw, OutsideTheoryError
from icml25.pipelines.sgd_hitting.transition_costs import (
    gmam,
    momentum_root,
    quasi_potential_1d,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _points(landscape):
    pts = find_critical_points(landscape)
    return ([p for p in pts if p.kind == "minimum"], [p for p in pts if p.kind != "minimum"])


@pytest.mark.parametrize("sigma", [1.0, 0.7])
def test_gaussian_hj_integral_is_twice_the_barrier_over_variance(sigma):
    land = tilted_double_well(0.1)
    (m_left, m_right), (top,) = _points(land)
    for m in (m_left, m_right):
        cost = quasi_potential_1d(land, NoiseLaw("gaussian", (sigma,)), m.x[0], top.x[0])
        assert cost == pytest.approx(2 * (top.f - m.f) / sigma**2, rel=1e-6)


def test_rademacher_root_exists_iff_slope_below_the_noise_bound():
    def h_minus(p):
        return NoiseLaw("rademacher").log_mgf(-p)

    for slope in (0.3, 0.9, -0.5, -0.99):
        p = momentum_root(h_minus, slope, 1.0)
        assert math.isfinite(p) and np.sign(p) == np.sign(slope)
        assert h_minus(p) == pytest.approx(p * slope, abs=1e-10)
    for slope in (1.0, 1.5, -2.0):
        assert math.isinf(momentum_root(h_minus, slope, 1.0))


def test_bounded_noise_cannot_climb_a_well_steeper_than_its_range():
    # f = 0.8 x² has |f'| up to 1.6 on [0, 1]: Rademacher ±1 cannot push against it
    steep = Landscape("steep", 1, lambda c, xp: 0.8 * c[0] ** 2, lambda c, xp: (1.6 * c[0],),
                      lambda p: np.array([[1.6]]), ((-3.0, 3.0),))
    assert math.isinf(quasi_potential_1d(steep, NoiseLaw("rademacher"), 0.0, 1.0))
    assert math.isfinite(quasi_potential_1d(steep, NoiseLaw("rademacher"), 0.0, 0.5))
    assert math.isfinite(quasi_potential_1d(steep, NoiseLaw("gaussian"), 0.0, 1.0))


def test_costs_on_l1_follow_the_noise_law_at_equal_variance():
    land = tilted_double_well(0.1)
    (m_left, _), (top,) = _points(land)
    costs = {k: quasi_potential_1d(land, NoiseLaw(k), m_left.x[0], top.x[0])
             for k in ("gaussian", "rademacher", "centred_exp")}
    # reference: 0.31533 < 0.32766 < 0.44793 (computed while this room was designed)
    assert costs["gaussian"] < costs["rademacher"] < costs["centred_exp"]
    assert costs["rademacher"] == pytest.approx(0.32766, rel=1e-4)
    assert costs["centred_exp"] == pytest.approx(0.44793, rel=1e-4)


def test_asymmetric_noise_gives_direction_dependent_costs():
    """Mirroring the landscape x → -x must swap the roles of the exponential's two tails."""
    land = tilted_double_well(0.0)
    (m_left, m_right), (top,) = _points(land)
    exp = NoiseLaw("centred_exp")
    up_right = quasi_potential_1d(land, exp, m_left.x[0], top.x[0])
    up_left = quasi_potential_1d(land, exp, m_right.x[0], top.x[0])
    assert up_right > up_left  # pushing right needs Z < 0, bounded below by -1
    gauss = NoiseLaw("gaussian")
    assert quasi_potential_1d(land, gauss, m_left.x[0], top.x[0]) == pytest.approx(
        quasi_potential_1d(land, gauss, m_right.x[0], top.x[0]), rel=1e-9)


@pytest.mark.parametrize("b", [2, 4])
def test_minibatch_cost_scales_exactly_with_batch_size(b):
    land = sine_neuron()
    minima, others = _points(land)
    spurious = next(m for m in minima if abs(m.x[0] - 3.258) < 0.01)
    barrier = next(p for p in others if abs(p.x[0] - 2.536) < 0.01)
    v1 = quasi_potential_1d(land, NoiseLaw("minibatch", batch=1), spurious.x[0], barrier.x[0])
    vb = quasi_potential_1d(land, NoiseLaw("minibatch", batch=b), spurious.x[0], barrier.x[0])
    assert vb / v1 == pytest.approx(b, rel=1e-6)
    assert v1 == pytest.approx(0.20267, rel=1e-3)
    gauss = quasi_potential_1d(land, NoiseLaw("minibatch", batch=1), spurious.x[0],
                               barrier.x[0], gaussian_approx=True)
    assert gauss == pytest.approx(0.19198, rel=1e-3)


def test_student_t_noise_is_outside_the_theory():
    land = tilted_double_well(0.1)
    with pytest.raises(OutsideTheoryError, match="no finite moment generating function"):
        quasi_potential_1d(land, NoiseLaw("student_t"), -0.9, -0.1)


def test_gmam_reproduces_the_isotropic_closed_form_and_converges_in_n():
    land = camel()
    pts = find_critical_points(land, 625)
    m = next(p for p in pts if p.kind == "minimum" and p.x[0] > 1)
    s = next(p for p in pts if p.kind == "saddle" and p.x[0] > 0)
    exact = 2 * (s.f - m.f)
    coarse, path = gmam(land, np.array(m.x), np.zeros(2), np.eye(2), n_nodes=100, rounds=8,
                        via=np.array(s.x))
    fine, _ = gmam(land, np.array(m.x), np.zeros(2), np.eye(2), n_nodes=200, rounds=8,
                   via=np.array(s.x))
    assert coarse == pytest.approx(exact, rel=5e-3)
    assert fine == pytest.approx(exact, rel=5e-3)
    assert abs(fine - coarse) / fine < 5e-3
    assert np.allclose(path[0], m.x) and np.allclose(path[-1], 0.0)
    # the path crosses the saddle
    assert np.min(np.linalg.norm(path - np.array(s.x), axis=1)) < 0.05


def test_gmam_anisotropic_noise_costs_depend_on_orientation():
    land = camel()
    m = np.array([1.747552, -0.873776])
    s = np.array([1.070542, -0.535271])
    a, _ = gmam(land, m, np.zeros(2), np.diag([2.25, 0.25]), n_nodes=100, rounds=8, via=s)
    b, _ = gmam(land, m, np.zeros(2), np.diag([0.25, 2.25]), n_nodes=100, rounds=8, via=s)
    assert a == pytest.approx(0.5736, rel=1e-2)
    assert b == pytest.approx(2.3495, rel=1e-2)
