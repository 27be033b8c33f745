"""U surrounds every global minimiser: a landscape with two global minima."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.sgd_hitting import exact_solver as ex
from icml25.pipelines.sgd_hitting.critical_points import find_critical_points
from icml25.pipelines.sgd_hitting.landscapes import Target, three_well
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw
from icml25.pipelines.sgd_hitting.predictions import (
    cost_matrix,
    minima_graph,
    predict,
    start_and_target,
)
from icml25.pipelines.sgd_hitting.scaling_fits import scaling_fit

# symmetric three wells: global minima at ±1.9618 (equal depth), a spurious well at 0
TWIN = three_well([-2.0, 0.0, 2.0], [1.3, 0.55, 1.3], 0.5, 0.05)
ETAS = [0.1, 0.085, 0.07]


@pytest.fixture(scope="module")
def graph():
    return minima_graph(TWIN, find_critical_points(TWIN))


def _slope(target, x0):
    noise = NoiseLaw("gaussian", (1.0,))
    means = [ex.solve_mean(TWIN, noise, eta, target, x0, ex.default_spacing(noise, eta),
                           walls=(-4.5, 4.5)) for eta in ETAS]
    return scaling_fit(ETAS, means)


def test_both_global_minima_are_targets_and_u_surrounds_each(graph):
    assert len(graph.targets) == 2
    for kind in ("ball", "halfline"):
        x0, idx, target = start_and_target(TWIN, graph, None, 1, {"kind": kind, "radius": 0.25})
        assert idx == 1
        for k in graph.targets:
            xg = graph.minima[k].x[0]
            inside = target.contains((np.array([xg, xg - 0.2, xg + 0.2]),))
            assert inside.all(), (kind, xg)
        assert not target.contains((np.array([x0[0]]),))[0]


@pytest.mark.parametrize("kind", ["ball", "halfline"])
def test_measured_slope_matches_the_energy_with_two_global_minima(graph, kind):
    noise = NoiseLaw("gaussian", (1.0,))
    costs, _ = cost_matrix(TWIN, graph, noise)
    energy = predict(TWIN, graph, costs, costs, 1, noise)["w_graph"]
    # the middle well's exit cost 2Δf/σ², either way down
    assert energy == pytest.approx(2 * (find_critical_points(TWIN)[1].f - graph.minima[1].f),
                                   rel=1e-6)
    x0, _, target = start_and_target(TWIN, graph, None, 1, {"kind": kind, "radius": 0.25})
    fit = _slope(target, x0[0])
    assert fit["r2"] > 0.999
    assert fit["slope"] == pytest.approx(energy, rel=0.02)


def test_a_target_around_one_global_minimum_only_misses_the_energy(graph):
    """What the check above guards against: U around the left minimum alone makes the chains
    that fall right climb back out of the other global well (cost 1.84 instead of 0.73)."""
    one = Target("left_of", threshold=graph.minima[0].x[0] + 0.25)
    fit = _slope(one, graph.minima[1].x[0])
    assert fit["slope"] > 2 * 0.7341


def test_ball_union_in_two_dimensions():
    target = Target("ball", centers=((0.0, 0.0), (1.7, -0.9)), radius=0.25)
    pts = (np.array([0.1, 1.7, 0.9, np.inf, np.nan]), np.array([0.0, -0.8, 0.0, 0.0, 0.0]))
    assert target.contains(pts).tolist() == [True, True, False, False, False]
    assert Target("ball", center=(1.0,), radius=0.1).centers == ((1.0,),)
    with pytest.raises(ValueError, match="center"):
        Target("ball", radius=0.1)


def test_half_lines_never_contain_non_finite_points():
    for target in (Target("right_of", threshold=1.0), Target("left_of", threshold=-1.0),
                   Target("outside", threshold=1.0, threshold_low=-1.0)):
        assert not target.contains((np.array([np.inf, -np.inf, np.nan]),)).any()
