"""Exact solvers of the vga tasks against brute force and known answers."""

from __future__ import annotations

from itertools import combinations, pairwise, permutations

import networkx as nx
import numpy as np
import pytest

from icml25.pipelines.vga.graphs import (
    GraphTaskError,
    check_task_sizes,
    distance_class,
    has_hamiltonian_cycle,
    has_hamiltonian_path,
    largest_chordless_cycle,
    solve,
)
from icml25.pipelines.vga.label_checks import (
    brute_hamiltonian,
    brute_isomorphic,
    brute_largest_induced_cycle,
)


def _int(graph: nx.Graph) -> nx.Graph:
    return nx.convert_node_labels_to_integers(graph)


def _perm_hamiltonian(graph: nx.Graph, cycle: bool) -> bool:
    """Every vertex order (n!), the most literal definition."""
    n = graph.number_of_nodes()
    if cycle and n < 3:
        return False
    for order in permutations(range(n)):
        if all(graph.has_edge(a, b) for a, b in pairwise(order)) and (
                not cycle or graph.has_edge(order[-1], order[0])):
            return True
    return False


def _subset_chordless(graph: nx.Graph) -> int | None:
    best = None
    for k in range(3, graph.number_of_nodes() + 1):
        for subset in combinations(graph.nodes, k):
            sub = graph.subgraph(subset)
            if all(d == 2 for _, d in sub.degree) and nx.is_connected(sub):
                best = k
    return best


def test_hamiltonian_dp_matches_all_permutations_on_50_random_graphs():
    rng = np.random.default_rng(0)
    seen = set()
    for i in range(50):
        n = int(rng.integers(3, 8))
        graph = nx.gnp_random_graph(n, float(rng.uniform(0.2, 0.7)), seed=i)
        path, cycle = _perm_hamiltonian(graph, False), _perm_hamiltonian(graph, True)
        assert has_hamiltonian_path(graph) == path
        assert has_hamiltonian_cycle(graph) == cycle
        assert brute_hamiltonian(graph, False) == path and brute_hamiltonian(graph, True) == cycle
        seen.add((path, cycle))
    assert len(seen) >= 3  # the sample covers yes/no cases of both questions


@pytest.mark.parametrize(("graph", "path", "cycle"), [
    (nx.petersen_graph(), True, False),
    (nx.cycle_graph(7), True, True),
    (nx.path_graph(6), True, False),
    (nx.star_graph(3), False, False),
    (nx.complete_graph(4), True, True),
    (_int(nx.grid_2d_graph(3, 3)), True, False),
    (nx.complete_bipartite_graph(3, 3), True, True),
])
def test_hamiltonian_known_answers(graph, path, cycle):
    assert has_hamiltonian_path(graph) is path
    assert has_hamiltonian_cycle(graph) is cycle


def test_largest_chordless_cycle_matches_subset_enumeration():
    rng = np.random.default_rng(1)
    for i in range(30):
        n = int(rng.integers(4, 10))
        graph = nx.gnp_random_graph(n, float(rng.uniform(0.2, 0.6)), seed=100 + i)
        expected = _subset_chordless(graph)
        assert largest_chordless_cycle(graph) == expected
        assert brute_largest_induced_cycle(graph) == expected


@pytest.mark.parametrize(("graph", "size"), [
    (nx.cycle_graph(6), 6), (nx.complete_graph(5), 3), (nx.complete_bipartite_graph(3, 3), 4),
    (_int(nx.grid_2d_graph(3, 3)), 8), (nx.wheel_graph(7), 6), (nx.petersen_graph(), 6),
    (nx.balanced_tree(2, 3), None),
])
def test_largest_chordless_cycle_known_answers(graph, size):
    assert largest_chordless_cycle(graph) == size


def test_chordless_task_rejects_forests_and_cycles_above_six():
    assert solve("chordless", nx.path_graph(8)) is None
    assert solve("chordless", nx.cycle_graph(7)) is None
    assert solve("chordless", nx.cycle_graph(6)) == 3  # class index of answer "6"


def test_brute_isomorphism_agrees_with_vf2():
    rng = np.random.default_rng(2)
    for i in range(40):
        a = nx.gnp_random_graph(7, 0.4, seed=i)
        b = nx.relabel_nodes(a, dict(enumerate(rng.permutation(7).tolist())))
        c = nx.gnp_random_graph(7, 0.4, seed=1000 + i)
        assert brute_isomorphic(a, b)
        assert brute_isomorphic(a, c) == nx.is_isomorphic(a, c)


def test_dp_refuses_more_than_twelve_nodes():
    with pytest.raises(GraphTaskError, match="13 nodes > 12"):
        has_hamiltonian_path(nx.path_graph(13))


@pytest.mark.parametrize("distance", [0, 5, -1])
def test_distance_outside_the_classes_is_rejected(distance):
    with pytest.raises(GraphTaskError, match="outside the classes 1-4"):
        distance_class(distance)
    assert solve("shortest_path", nx.path_graph(9), marked=(0, 5)) is None


def test_shortest_path_needs_two_distinct_marked_nodes():
    with pytest.raises(GraphTaskError, match="two distinct marked nodes"):
        solve("shortest_path", nx.path_graph(5), marked=(2, 2))


@pytest.mark.parametrize(("task", "n_nodes", "message"), [
    ("shortest_path", [4], "needs at least 5 nodes"),
    ("chordless", [4, 5], "needs at least 6 nodes"),
    ("iso_hard", [4], "needs at least 5 nodes"),
    ("node_count", [7, 8], r"must be exactly \[8, 9\]"),
    ("ham_path", [8, 13], "beyond the exact Hamiltonian solver"),
    ("tsp", [8], "unknown task"),
])
def test_graph_sizes_without_valid_instances_are_refused(task, n_nodes, message):
    with pytest.raises(GraphTaskError, match=message):
        check_task_sizes(task, n_nodes)
