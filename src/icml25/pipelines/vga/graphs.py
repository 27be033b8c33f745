"""Graphs of the Visual Graph Arena tasks and their exact labels (``docs/papers/vga.md``).

Babaiee et al., "Visual Graph Arena" (ICML 2025, arXiv:2506.06242) pose six reasoning questions
about small planar graphs: isomorphism (easy and hard), Hamiltonian path, Hamiltonian cycle,
shortest-path distance between two marked nodes and the size of the largest chordless cycle.
Here each question has an exact solver that reads the graph, never the picture:

- Hamiltonian path / cycle: a Held-Karp style bitmask dynamic programme
  (``reach[mask]`` = bitset of end vertices of simple paths covering exactly ``mask``);
- isomorphism: VF2 (``nx.is_isomorphic``);
- shortest path: breadth-first search;
- largest chordless (induced) cycle: the maximum over ``nx.chordless_cycles``.

``node_count`` (8 or 9 nodes) is this project's perceptual control task, not one of the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icml25.core.lazy_import import lazy_module

nx = lazy_module("networkx")

#: The largest graph the Hamiltonian DP accepts (its cost is 2^n * n^2).
MAX_DP_NODES = 12

#: Every task, with its answer set (class index -> answer word used in prompts and reports).
TASK_CLASSES: dict[str, tuple[str, ...]] = {
    "iso_easy": ("no", "yes"),
    "iso_hard": ("no", "yes"),
    "ham_path": ("no", "yes"),
    "ham_cycle": ("no", "yes"),
    "shortest_path": ("1", "2", "3", "4"),
    "chordless": ("3", "4", "5", "6"),
    "node_count": ("8", "9"),
}
TASKS = tuple(TASK_CLASSES)
PAIR_TASKS = ("iso_easy", "iso_hard")

#: Smallest node count for which a task has instances of every class (checked in params and at
#: generation): distance 4 needs 5 nodes on a path, a chordless 6-cycle needs 6 nodes, and a
#: connected graph with a non-isomorphic partner of the same degree sequence needs 5
#: (checked against the graph atlas).
MIN_NODES_FOR_ALL_CLASSES = {
    "iso_easy": 4, "iso_hard": 5, "ham_path": 4, "ham_cycle": 4, "shortest_path": 5,
    "chordless": 6,
}


class GraphTaskError(ValueError):
    """A task cannot be posed (unknown task, graph too large, no valid instance for the sizes)."""


def check_task_sizes(task: str, n_nodes: Sequence[int]) -> None:
    """Raise if ``task`` has a class that no graph with ``n_nodes`` nodes can have."""
    if task not in TASK_CLASSES:
        raise GraphTaskError(f"unknown task {task!r}; known: {list(TASKS)}")
    if not n_nodes:
        raise GraphTaskError("n_nodes is empty")
    if max(n_nodes) > MAX_DP_NODES:
        raise GraphTaskError(f"n_nodes {list(n_nodes)}: graphs above {MAX_DP_NODES} nodes are "
                             "beyond the exact Hamiltonian solver")
    if task == "node_count":
        if sorted(n_nodes) != [8, 9]:
            raise GraphTaskError(f"node_count classes are 8 and 9 nodes; n_nodes "
                                 f"{list(n_nodes)} must be exactly [8, 9]")
        return
    need = MIN_NODES_FOR_ALL_CLASSES[task]
    if max(n_nodes) < need:
        raise GraphTaskError(f"task {task}: no valid instance of every class with n_nodes "
                             f"{list(n_nodes)} (needs at least {need} nodes)")


# ---------------------------------------------------------------------------------- bitmasks
def adjacency_masks(graph: nx.Graph) -> list[int]:
    """Neighbour bitsets of a graph whose nodes are 0..n-1."""
    n = graph.number_of_nodes()
    if sorted(graph.nodes) != list(range(n)):
        raise GraphTaskError("the bitmask solvers need nodes labelled 0..n-1")
    masks = [0] * n
    for u, v in graph.edges:
        if u == v:
            raise GraphTaskError(f"self-loop at node {u}: graphs must be simple")
        masks[u] |= 1 << v
        masks[v] |= 1 << u
    return masks


def _reach(adj: list[int], starts: Sequence[int]) -> list[int]:
    """``reach[mask]``: bitset of vertices v such that a simple path that starts in ``starts``
    covers exactly ``mask`` and ends at v (the Held-Karp style recursion)."""
    n = len(adj)
    if n > MAX_DP_NODES:
        raise GraphTaskError(f"Hamiltonian DP: {n} nodes > {MAX_DP_NODES} (cost 2^n n^2)")
    reach = [0] * (1 << n)
    for s in starts:
        reach[1 << s] |= 1 << s
    for mask in range(1, 1 << n):  # mask | w > mask, so increasing order is topological
        ends = reach[mask]
        while ends:
            low = ends & -ends
            v = low.bit_length() - 1
            ends ^= low
            free = adj[v] & ~mask
            while free:
                wbit = free & -free
                free ^= wbit
                reach[mask | wbit] |= wbit
    return reach


def has_hamiltonian_path(graph: nx.Graph) -> bool:
    """A simple path through every vertex exists (``reach[full] != 0``)."""
    n = graph.number_of_nodes()
    if n == 0:
        return False
    adj = adjacency_masks(graph)
    return _reach(adj, range(n))[(1 << n) - 1] != 0


def has_hamiltonian_cycle(graph: nx.Graph) -> bool:
    """A cycle through every vertex exists: paths from vertex 0 covering all vertices whose end
    is adjacent to 0 (n >= 3)."""
    n = graph.number_of_nodes()
    if n < 3:
        return False
    adj = adjacency_masks(graph)
    return (_reach(adj, [0])[(1 << n) - 1] & adj[0]) != 0


def largest_chordless_cycle(graph: nx.Graph) -> int | None:
    """Length of the largest induced cycle, or ``None`` for a forest."""
    lengths = [len(c) for c in nx.chordless_cycles(graph)]
    return max(lengths) if lengths else None


# ---------------------------------------------------------------------------------- sampling
def random_planar_connected(rng: np.random.Generator, n: int, p: float,
                            max_tries: int = 1000) -> nx.Graph:
    """G(n, p) rejected until connected and planar, nodes randomly permuted (labels 0..n-1)."""
    iu, ju = np.triu_indices(n, 1)
    for _ in range(max_tries):
        keep = rng.random(iu.size) < p
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(zip(iu[keep].tolist(), ju[keep].tolist(), strict=True))
        if nx.is_connected(graph) and nx.check_planarity(graph)[0]:
            return relabel_randomly(graph, rng)
    raise GraphTaskError(f"no connected planar G({n}, {p}) in {max_tries} tries; raise p")


def relabel_randomly(graph: nx.Graph, rng: np.random.Generator) -> nx.Graph:
    """The same graph under a uniformly random permutation of 0..n-1 (node order sorted)."""
    n = graph.number_of_nodes()
    perm = rng.permutation(n)
    out = nx.Graph()
    out.add_nodes_from(range(n))
    out.add_edges_from((int(perm[u]), int(perm[v])) for u, v in graph.edges)
    return out


def hard_negative(graph: nx.Graph, rng: np.random.Generator, tries: int = 20) -> nx.Graph | None:
    """A connected planar graph with the same degree sequence that is *not* isomorphic to
    ``graph`` (1-3 double edge swaps), randomly relabelled; ``None`` if none was found."""
    for _ in range(tries):
        other = graph.copy()
        try:
            nx.double_edge_swap(other, nswap=int(rng.integers(1, 4)), max_tries=100,
                                seed=int(rng.integers(2**31)))
        except (nx.NetworkXError, nx.NetworkXAlgorithmError):
            continue
        if (nx.is_connected(other) and nx.check_planarity(other)[0]
                and not nx.is_isomorphic(graph, other)):
            return relabel_randomly(other, rng)
    return None


def graph_from_edges(n: int, edges: Sequence[Sequence[int]]) -> nx.Graph:
    """A graph on nodes 0..n-1 from an edge list (as stored in the graphs table)."""
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((int(u), int(v)) for u, v in edges)
    if graph.number_of_nodes() != n:
        raise GraphTaskError(f"edge list names nodes outside 0..{n - 1}")
    return graph


def edge_list(graph: nx.Graph) -> list[list[int]]:
    """Sorted edge list with u < v (a canonical, JSON-friendly form)."""
    return sorted(sorted([int(u), int(v)]) for u, v in graph.edges)


# ---------------------------------------------------------------------------------- labels
def solve(task: str, graph: nx.Graph, marked: Sequence[int] = (),
          partner: nx.Graph | None = None) -> int | None:
    """The exact class index of an instance (``TASK_CLASSES[task][index]`` is the answer), or
    ``None`` when the instance has no answer in the task's answer set."""
    if task in PAIR_TASKS:
        if partner is None:
            raise GraphTaskError(f"{task}: needs the partner graph")
        return int(nx.is_isomorphic(graph, partner))
    if task == "ham_path":
        return int(has_hamiltonian_path(graph))
    if task == "ham_cycle":
        return int(has_hamiltonian_cycle(graph))
    if task == "shortest_path":
        if len(marked) != 2 or marked[0] == marked[1]:
            raise GraphTaskError(f"shortest_path: needs two distinct marked nodes, got {marked}")
        d = nx.shortest_path_length(graph, int(marked[0]), int(marked[1]))
        return d - 1 if 1 <= d <= 4 else None
    if task == "chordless":
        k = largest_chordless_cycle(graph)
        return k - 3 if k is not None and 3 <= k <= 6 else None
    if task == "node_count":
        n = graph.number_of_nodes()
        return n - 8 if n in (8, 9) else None
    raise GraphTaskError(f"unknown task {task!r}; known: {list(TASKS)}")


def distance_class(distance: int) -> int:
    """Class index of a shortest-path distance; distances outside 1..4 are no instance."""
    if not 1 <= distance <= 4:
        raise GraphTaskError(f"shortest_path: distance {distance} is outside the classes 1-4")
    return distance - 1


# ---------------------------------------------------------------------------- graph statistics
def graph_statistics(graph: nx.Graph, max_degree: int = 8) -> np.ndarray:
    """Pixel-free features of the graph-statistics baseline: n, m, degree histogram 0..max_degree
    (last bin open), #leaves, min degree."""
    degrees = np.array([d for _, d in graph.degree], dtype=int)
    hist = np.bincount(np.minimum(degrees, max_degree), minlength=max_degree + 1)
    return np.concatenate([[graph.number_of_nodes(), graph.number_of_edges()], hist,
                           [(degrees == 1).sum(), degrees.min() if degrees.size else 0]]
                          ).astype(float)


def pair_statistics(graph: nx.Graph, partner: nx.Graph | None) -> np.ndarray:
    """Features of an instance: its statistics, and for pairs also the partner's and the
    absolute difference (identical degree sequences make the difference zero)."""
    left = graph_statistics(graph)
    if partner is None:
        return left
    right = graph_statistics(partner)
    return np.concatenate([left, right, np.abs(left - right)])
