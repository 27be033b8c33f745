"""Freidlin–Wentzell W-graphs: the energy E of the mean hitting time, and its Markov-chain check.

Nodes are the local minima 0..L-1, ``W`` the global minima. A W-graph maps every node outside
W to one other node with no cycles; ``V(g) = Σ_{(a→b)∈g} Ṽ(a, b)``. For a start at minimum
``i ∉ W`` (Freidlin & Wentzell, Random Perturbations of Dynamical Systems,
ch. 6, Lemma 3.4 / Thm 4.3):

    E(i) = min_{g∈G(W)} V(g) - min( min_{g∈G(W∪{i})} V(g),
                                     min_{j∉W∪{i}} min_{g∈G_ij(W∪{j})} V(g) ),

with ``G_ij(W∪{j})`` the W∪{j}-graphs in which the chain from i ends at j. Graphs are
enumerated over the finite-cost out-edges of each node only (in 1-D at most two: the
neighbouring wells), so landscapes with a dozen wells stay cheap. Cross-check: the finite
chain ``q_ij = exp(-Ṽ_ij/ε)/L`` whose ``ε log E_i τ_W`` tends to E(i) as ε → 0.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import mpmath
import numpy as np

MAX_GRAPHS = 5_000_000


def _graphs(costs: np.ndarray, roots: frozenset[int]) -> Iterable[tuple[dict[int, int], float]]:
    """Every ``roots``-graph with finite cost: (map node → successor, V(g))."""
    n = len(costs)
    free = [a for a in range(n) if a not in roots]
    choices = [[b for b in range(n) if b != a and math.isfinite(costs[a, b])] for a in free]
    count = math.prod(len(c) for c in choices) if choices else 1
    if count > MAX_GRAPHS:
        raise ValueError(f"W-graph enumeration: {count} candidate graphs exceed {MAX_GRAPHS}")
    for pick in itertools.product(*choices):
        succ = dict(zip(free, pick, strict=True))
        if _acyclic(succ, roots):
            yield succ, float(sum(costs[a, b] for a, b in succ.items()))


def _acyclic(succ: dict[int, int], roots: frozenset[int]) -> bool:
    state: dict[int, int] = {}
    for start in succ:
        path = []
        node = start
        while node not in roots and state.get(node) != 2:
            if state.get(node) == 1:
                return False
            state[node] = 1
            path.append(node)
            node = succ[node]
        for p in path:
            state[p] = 2
    return True


def _chain_end(succ: dict[int, int], roots: frozenset[int], i: int) -> int:
    node = i
    while node not in roots:
        node = succ[node]
    return node


def min_graph_cost(costs: np.ndarray, roots: Iterable[int]) -> float:
    """``min_{g ∈ G(roots)} V(g)`` (``inf`` if no finite-cost graph exists)."""
    roots = frozenset(roots)
    return min((v for _, v in _graphs(costs, roots)), default=math.inf)


def energy(costs: Sequence[Sequence[float]], targets: Iterable[int], start: int) -> float:
    """E(start) of the W-graph formula above; 0 if ``start`` is a target."""
    c = np.asarray(costs, float)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"costs: expected a square matrix, got shape {c.shape}")
    if np.any(np.isnan(c)) or np.any(c[np.isfinite(c)] < 0):
        raise ValueError("costs: entries must be non-negative (or +inf for no direct path)")
    w = frozenset(targets)
    if not w:
        raise ValueError("targets: W must contain at least one minimum")
    if start in w:
        return 0.0
    top = min_graph_cost(c, w)
    second = min_graph_cost(c, w | {start})
    for j in range(len(c)):
        if j in w or j == start:
            continue
        roots = w | {j}
        best = min((v for g, v in _graphs(c, roots) if _chain_end(g, roots, start) == j),
                   default=math.inf)
        second = min(second, best)
    if math.isinf(top):
        return math.inf
    return top - second


def markov_chain_exponent(costs: Sequence[Sequence[float]], targets: Iterable[int], start: int,
                          eps: float, digits: int = 80) -> float:
    """``ε log E_start τ_W`` for the chain with rates ``q_ij = exp(-Ṽ_ij/ε)/L`` (plus holding).

    Solved exactly in ``digits``-digit arithmetic (the rates span hundreds of orders of
    magnitude at small ε, beyond float64).
    """
    c = np.asarray(costs, float)
    n = len(c)
    w = set(targets)
    transient = [a for a in range(n) if a not in w]
    if start in w:
        return 0.0
    with mpmath.workdps(digits):
        rate = [[mpmath.mpf(0) if (a == b or not math.isfinite(c[a, b]))
                 else mpmath.exp(-mpmath.mpf(c[a, b]) / eps) / n for b in range(n)]
                for a in range(n)]
        m = mpmath.matrix(len(transient), len(transient))
        for r, a in enumerate(transient):
            m[r, r] = mpmath.fsum(rate[a])
            for s, b in enumerate(transient):
                if b != a:
                    m[r, s] = -rate[a][b]
        u = mpmath.lu_solve(m, mpmath.matrix([1] * len(transient)))
        return float(eps * mpmath.log(u[transient.index(start)]))


def markov_chain_energy(costs: Sequence[Sequence[float]], targets: Iterable[int], start: int,
                        eps: tuple[float, float] = (0.02, 0.01)) -> float:
    """Linear extrapolation to ε → 0 of ``ε log E τ`` measured at two values of ε."""
    (e1, e2) = eps
    v1 = markov_chain_exponent(costs, targets, start, e1)
    v2 = markov_chain_exponent(costs, targets, start, e2)
    return v2 + (v2 - v1) * e2 / (e1 - e2)


def most_likely_path(costs: np.ndarray, targets: Iterable[int], start: int,
                     max_paths: int = 100_000) -> list[tuple]:
    """The path of least resistance from ``start`` to W: [(from, to, Ṽ(from, to)), ...].

    Among the simple paths along finite-cost edges, the one whose largest barrier is smallest
    (ties: smallest sum). This is the route a typical (median) trajectory takes and the one the
    path-based predictions B2–B4 read their barriers from.
    """
    w = set(targets)
    c = np.asarray(costs, float)
    if start in w:
        return []
    best: tuple[tuple[float, float], list[tuple]] | None = None
    stack = [(start, [start])]
    seen_paths = 0
    while stack:
        node, nodes_on = stack.pop()
        for nxt in np.flatnonzero(np.isfinite(c[node])):
            nxt = int(nxt)
            if nxt in nodes_on:
                continue
            path = [*nodes_on, nxt]
            if nxt in w:
                seen_paths += 1
                edges = [(a, b, float(c[a, b])) for a, b in itertools.pairwise(path)]
                key = (max(e[2] for e in edges), sum(e[2] for e in edges))
                if best is None or key < best[0]:
                    best = (key, edges)
                if seen_paths > max_paths:
                    raise ValueError(f"most_likely_path: more than {max_paths} paths to W")
            else:
                stack.append((nxt, path))
    return best[1] if best else []
