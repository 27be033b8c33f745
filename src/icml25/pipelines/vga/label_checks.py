"""Independent checks of a generated graphs table (the pipeline node ``check_labels``):
brute-force re-labelling of a subset, class balance, graph validity and the train/test leakage
count. A failed check stops the pipeline: no image is ever rendered for an
instance whose label could not be verified.
"""

from __future__ import annotations

from itertools import combinations

import networkx as nx
import numpy as np
import pandas as pd

from icml25.pipelines.vga.generator import check_graphs_table, instance_graphs
from icml25.pipelines.vga.graphs import TASK_CLASSES


class LabelCheckError(AssertionError):
    """The generated data set violates one of its guarantees."""


def brute_hamiltonian(graph: nx.Graph, cycle: bool) -> bool:
    """Hamiltonian path/cycle by exhaustive depth-first extension of simple paths (every vertex
    order that the edges allow is tried; independent of the bitmask DP)."""
    n = graph.number_of_nodes()
    if cycle and n < 3:
        return False
    nodes = list(graph.nodes)

    def extend(path: list, used: set) -> bool:
        if len(path) == n:
            return not cycle or graph.has_edge(path[-1], path[0])
        for w in graph[path[-1]]:
            if w not in used:
                used.add(w)
                path.append(w)
                if extend(path, used):
                    return True
                path.pop()
                used.remove(w)
        return False

    starts = nodes[:1] if cycle else nodes  # a cycle can start anywhere: fix its first vertex
    return any(extend([s], {s}) for s in starts)


def brute_isomorphic(graph: nx.Graph, other: nx.Graph) -> bool:
    """Exhaustive search for an edge-preserving bijection (degree-respecting backtracking)."""
    if (graph.number_of_nodes() != other.number_of_nodes()
            or graph.number_of_edges() != other.number_of_edges()):
        return False
    order = sorted(graph.nodes, key=lambda v: -graph.degree[v])
    mapping: dict = {}
    used: set = set()

    def assign(i: int) -> bool:
        if i == len(order):
            return True
        v = order[i]
        for w in other.nodes:
            if w in used or other.degree[w] != graph.degree[v]:
                continue
            if all(graph.has_edge(v, u) == other.has_edge(w, mapping[u]) for u in order[:i]):
                mapping[v] = w
                used.add(w)
                if assign(i + 1):
                    return True
                used.remove(w)
                del mapping[v]
        return False

    return assign(0)


def brute_largest_induced_cycle(graph: nx.Graph) -> int | None:
    """Largest vertex subset whose induced subgraph is connected and 2-regular (a chordless
    cycle), by enumerating subsets from the largest size down."""
    nodes = list(graph.nodes)
    for k in range(len(nodes), 2, -1):
        for subset in combinations(nodes, k):
            sub = graph.subgraph(subset)
            if all(d == 2 for _, d in sub.degree) and nx.is_connected(sub):
                return k
    return None


def brute_label(task: str, graph: nx.Graph, partner: nx.Graph | None,
                marked: list[int]) -> int | None:
    """The class of an instance by exhaustive search (no DP, no VF2, no networkx solvers)."""
    if task in ("iso_easy", "iso_hard"):
        return int(brute_isomorphic(graph, partner))
    if task == "ham_path":
        return int(brute_hamiltonian(graph, cycle=False))
    if task == "ham_cycle":
        return int(brute_hamiltonian(graph, cycle=True))
    if task == "shortest_path":
        # plain BFS written out, independent of networkx's implementation
        s, t = marked
        frontier, seen, d = {s}, {s}, 0
        while frontier and t not in frontier:
            frontier = {w for v in frontier for w in graph[v]} - seen
            seen |= frontier
            d += 1
        return d - 1 if t in frontier and 1 <= d <= 4 else None
    if task == "chordless":
        k = brute_largest_induced_cycle(graph)
        return k - 3 if k is not None and 3 <= k <= 6 else None
    if task == "node_count":
        return graph.number_of_nodes() - 8
    raise LabelCheckError(f"unknown task {task}")


def label_report(graphs: pd.DataFrame, n_brute_force: int, seed: int,
                 n_nodes: list[int]) -> dict:
    """Class counts, brute-force agreement on ``n_brute_force`` instances per task, validity
    and leakage; raises :class:`LabelCheckError` on any violation."""
    check_graphs_table(graphs)
    report: dict = {"tasks": {}}
    problems = []
    rng = np.random.default_rng(seed)
    for task, frame in graphs.groupby("task", sort=True):
        info: dict = {"class_counts": {}}
        k = len(TASK_CLASSES[task])
        for split, part in frame.groupby("split"):
            counts = np.bincount(part["label"].to_numpy().astype(int), minlength=k)
            info["class_counts"][split] = {TASK_CLASSES[task][c]: int(n)
                                           for c, n in enumerate(counts)}
            if len(set(counts.tolist())) != 1 or len(counts) != k:
                problems.append(f"{task}/{split}: classes unbalanced {counts.tolist()}")
        invalid = 0
        records = frame.to_dict("records")
        for rec in records:
            graph, partner, _ = instance_graphs(rec)
            ok = (graph.number_of_nodes() in n_nodes and nx.is_connected(graph)
                  and nx.check_planarity(graph)[0])
            if partner is not None:
                ok &= nx.is_connected(partner) and nx.check_planarity(partner)[0]
                if task == "iso_hard":
                    ok &= sorted(d for _, d in graph.degree) == sorted(
                        d for _, d in partner.degree)
            invalid += not ok
        info["invalid_graphs"] = invalid
        if invalid:
            problems.append(f"{task}: {invalid} graphs are not connected planar graphs of the "
                            "configured sizes (or iso_hard partners differ in degree sequence)")
        pick = rng.choice(len(records), size=min(n_brute_force, len(records)), replace=False)
        agree = 0
        for i in pick:
            graph, partner, marked = instance_graphs(records[i])
            agree += brute_label(task, graph, partner, marked) == records[i]["label"]
        info["brute_force_checked"] = len(pick)
        info["brute_force_agree"] = int(agree)
        if agree != len(pick):
            problems.append(f"{task}: brute force disagrees on {len(pick) - agree} labels")
        train = frame[frame["split"] == "train"]
        buckets: dict[str, list[nx.Graph]] = {}
        for rec in train.to_dict("records"):
            buckets.setdefault(rec["wl_hash"], []).append(instance_graphs(rec)[0])
        leaks = 0
        for rec in frame[frame["split"] != "train"].to_dict("records"):
            graph = instance_graphs(rec)[0]
            leaks += any(nx.is_isomorphic(graph, g) for g in buckets.get(rec["wl_hash"], ()))
        info["leakage_count"] = leaks
        if leaks:
            problems.append(f"{task}: {leaks} val/test graphs are isomorphic to training graphs")
        report["tasks"][task] = info
    report["ok"] = not problems
    if problems:
        raise LabelCheckError("vga data checks failed:\n  " + "\n  ".join(problems))
    return report
