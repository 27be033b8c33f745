"""W-graph energies against hand-solved cases and the finite Markov chain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.pipelines.sgd_hitting import w_graphs
from icml25.pipelines.sgd_hitting.critical_points import find_critical_points
from icml25.pipelines.sgd_hitting.landscapes import three_well
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw
from icml25.pipelines.sgd_hitting.predictions import cost_matrix, minima_graph, predict

INF = math.inf


def test_two_states_energy_is_the_single_cost():
    assert w_graphs.energy([[INF, 0.37], [0.9, INF]], [1], 0) == pytest.approx(0.37)
    assert w_graphs.energy([[INF, 0.37], [0.9, INF]], [1], 1) == 0.0


def test_graph_enumeration_rejects_cycles():
    costs = np.array([[INF, 1.0, 5.0], [1.0, INF, 5.0], [INF, INF, INF]])
    # 0 and 1 must not point at each other: the best {2}-graph is 0→1 (1), 1→2 (5) or sym.
    assert w_graphs.min_graph_cost(costs, [2]) == pytest.approx(6.0)


@pytest.fixture(scope="module")
def l2():
    land = three_well([-2.0, 0.0, 2.0], [0.9, 0.55, 1.3], 0.5, 0.05)
    graph = minima_graph(land, find_critical_points(land))
    costs, _ = cost_matrix(land, graph, NoiseLaw("gaussian"))
    return land, graph, costs


def test_l2_costs_and_energies_match_the_reference_values(l2):
    _, graph, costs = l2
    assert graph.targets == [2]
    assert costs[0, 1] == pytest.approx(1.1225, abs=1e-3)
    assert costs[1, 0] == pytest.approx(0.8126, abs=1e-3)
    assert costs[1, 2] == pytest.approx(0.7339, abs=1e-3)
    assert costs[2, 1] == pytest.approx(1.8404, abs=1e-3)
    assert w_graphs.energy(costs, [2], 0) == pytest.approx(1.1225, abs=1e-3)
    assert w_graphs.energy(costs, [2], 1) == pytest.approx(1.0438, abs=1e-3)
    # E(middle) = cost of the rare excursion: exit left, then climb out of the deep well
    assert w_graphs.energy(costs, [2], 1) == pytest.approx(
        costs[0, 1] - (costs[1, 0] - costs[1, 2]), abs=1e-12)


@pytest.mark.parametrize("start", [0, 1])
def test_finite_markov_chain_extrapolates_to_the_w_graph_energy(l2, start):
    _, _, costs = l2
    e = w_graphs.energy(costs, [2], start)
    assert w_graphs.markov_chain_energy(costs, [2], start, (0.02, 0.01)) == pytest.approx(
        e, rel=0.02)


def test_random_graphs_markov_chain_matches_w_graph():
    rng = np.random.default_rng(3)
    for _ in range(3):
        n = 5
        costs = rng.uniform(0.2, 1.5, (n, n))
        costs[rng.random((n, n)) < 0.3] = INF
        np.fill_diagonal(costs, INF)
        costs[:, 0] = np.where(np.arange(n) == 0, INF, rng.uniform(0.2, 1.5, n))  # reach W
        e = w_graphs.energy(costs, [0], 3)
        mc = w_graphs.markov_chain_energy(costs, [0], 3, (0.01, 0.005))
        assert mc == pytest.approx(e, rel=0.02, abs=0.01)


def test_path_predictions_fail_where_the_path_misleads(l2):
    land, graph, costs = l2
    pred = predict(land, graph, costs, costs, 1, NoiseLaw("gaussian"))
    assert pred["first_barrier"] == pytest.approx(0.7339, abs=1e-3)
    assert pred["largest_barrier"] == pytest.approx(0.7339, abs=1e-3)
    assert pred["w_graph"] > pred["first_barrier"] * 1.3
    assert pred["markov_chain_energy"] == pytest.approx(pred["w_graph"], rel=0.02)


def test_bad_cost_matrices_are_refused():
    with pytest.raises(ValueError, match="square"):
        w_graphs.energy([[INF, 1.0]], [0], 0)
    with pytest.raises(ValueError, match="non-negative"):
        w_graphs.energy([[INF, -1.0], [1.0, INF]], [1], 0)
    with pytest.raises(ValueError, match="non-negative"):
        w_graphs.energy([[INF, float("nan")], [1.0, INF]], [1], 0)
