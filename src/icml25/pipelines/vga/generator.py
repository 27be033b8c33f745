"""Balanced, leakage-free instance generation (``docs/papers/vga.md``, "Data").

Every attempt draws its own generator from ``SeedSequence([seed, task, split, attempt])``, so a
single instance can be regenerated from its ``seed_key`` alone. Classes are filled by rejection:
an instance whose class is already full, whose label the exact solver could not verify, or whose
graph is isomorphic to a training graph (val/test only; WL hash bucket, then VF2) is discarded.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from icml25.pipelines.vga.graphs import (
    PAIR_TASKS,
    TASK_CLASSES,
    TASKS,
    GraphTaskError,
    check_task_sizes,
    edge_list,
    graph_from_edges,
    hard_negative,
    random_planar_connected,
    relabel_randomly,
    solve,
)

SPLITS = ("train", "val", "test")
GRAPH_COLUMNS = ("task", "split", "sample_id", "seed_key", "n", "edges_json", "label",
                 "marked_json", "partner_edges_json", "wl_hash")


class GenerationError(RuntimeError):
    """Balanced generation could not fill a class within its attempt budget."""


@dataclass(frozen=True)
class Instance:
    graph: nx.Graph
    label: int
    marked: tuple[int, ...] = ()
    partner: nx.Graph | None = None


def wl_hash(graph: nx.Graph) -> str:
    """Weisfeiler-Lehman hash: equal for isomorphic graphs (bucket key of the leakage check)."""
    with warnings.catch_warnings():  # networkx notes that its hashes changed in 3.5; ours are
        warnings.simplefilter("ignore", UserWarning)  # only compared within one run
        return nx.weisfeiler_lehman_graph_hash(graph, iterations=3)


def _propose(task: str, rng: np.random.Generator, n: int, p: float,
             wanted: int) -> Instance | None:
    """One candidate instance aiming at class ``wanted`` (where the task lets us aim)."""
    graph = random_planar_connected(rng, n, p)
    if task in PAIR_TASKS:
        if wanted == 1:
            partner = relabel_randomly(graph, rng)
        elif task == "iso_easy":
            partner = random_planar_connected(rng, n, p)
        else:
            partner = hard_negative(graph, rng)
            if partner is None:
                return None
        label = solve(task, graph, partner=partner)
        return Instance(graph, label, partner=partner)
    if task == "shortest_path":
        lengths = dict(nx.all_pairs_shortest_path_length(graph))
        pairs = [(s, t) for s in range(n) for t in range(s + 1, n)
                 if lengths[s][t] == wanted + 1]
        if not pairs:
            return None
        s, t = pairs[int(rng.integers(len(pairs)))]
        marked = (s, t) if rng.random() < 0.5 else (t, s)
        return Instance(graph, solve(task, graph, marked=marked), marked=marked)
    label = solve(task, graph)
    return None if label is None else Instance(graph, label)


def generate_task(
    task: str,
    sizes: Mapping[str, int],
    n_nodes: Sequence[int],
    p_range: tuple[float, float],
    seed: int,
    max_attempts_per_sample: int = 500,
    progress: bool = True,
) -> pd.DataFrame:
    """Balanced train/val/test instances of one task (one row each, see ``GRAPH_COLUMNS``)."""
    check_task_sizes(task, n_nodes)
    classes = len(TASK_CLASSES[task])
    task_index = TASKS.index(task)
    rows: list[dict] = []
    train_buckets: dict[str, list[nx.Graph]] = {}
    for split_index, split in enumerate(SPLITS):
        total = sizes[split]
        if total % classes:
            raise GenerationError(f"{task}: {split} size {total} is not divisible by its "
                                  f"{classes} classes (classes are balanced exactly)")
        per_class = total // classes
        counts = [0] * classes
        budget = max_attempts_per_sample * total
        bar = tqdm(total=total, desc=f"vga generate {task}/{split}", disable=not progress,
                   leave=False)
        attempt = 0
        while min(counts) < per_class:
            if attempt >= budget:
                bar.close()
                short = {TASK_CLASSES[task][c]: per_class - k for c, k in enumerate(counts)
                         if k < per_class}
                raise GenerationError(
                    f"{task}/{split}: classes {short} still short after {budget} attempts "
                    f"(n_nodes {list(n_nodes)}, p {list(p_range)}); widen p or lower the size")
            key = [seed, task_index, split_index, attempt]
            attempt += 1
            rng = np.random.default_rng(np.random.SeedSequence(key))
            open_classes = [c for c in range(classes) if counts[c] < per_class]
            wanted = open_classes[int(rng.integers(len(open_classes)))]
            n = int(rng.choice(np.asarray(n_nodes)))
            p = float(rng.uniform(*p_range))
            try:
                inst = _propose(task, rng, n, p, wanted)
            except GraphTaskError:
                continue
            if inst is None or inst.label is None or counts[inst.label] >= per_class:
                continue
            digest = wl_hash(inst.graph)
            if split != "train" and any(nx.is_isomorphic(inst.graph, g)
                                        for g in train_buckets.get(digest, ())):
                continue  # leakage: this graph (up to isomorphism) is a training graph
            if split == "train":
                train_buckets.setdefault(digest, []).append(inst.graph)
            index = sum(counts)
            counts[inst.label] += 1
            bar.update(1)
            rows.append({
                "task": task, "split": split, "sample_id": f"{task}/{split}/{index}",
                "seed_key": json.dumps(key), "n": n,
                "edges_json": json.dumps(edge_list(inst.graph)), "label": int(inst.label),
                "marked_json": json.dumps(list(inst.marked)),
                "partner_edges_json": json.dumps(edge_list(inst.partner)
                                                 if inst.partner is not None else None),
                "wl_hash": digest,
            })
        bar.close()
    return pd.DataFrame(rows, columns=list(GRAPH_COLUMNS))


def generate_graphs(
    tasks: Mapping[str, tuple[float, float]],
    sizes: Mapping[str, int],
    n_nodes: Sequence[int],
    seed: int,
    max_attempts_per_sample: int = 500,
    progress: bool = True,
    on_task: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """All tasks' instances in one table (``tasks``: task -> p range of its G(n, p) sampler)."""
    frames = []
    for task, p_range in tasks.items():
        if on_task is not None:
            on_task(task)
        frames.append(generate_task(task, sizes, n_nodes, tuple(p_range), seed,
                                    max_attempts_per_sample, progress))
    return pd.concat(frames, ignore_index=True)


def instance_graphs(row: Mapping) -> tuple[nx.Graph, nx.Graph | None, list[int]]:
    """(graph, partner or None, marked nodes) of one row of the graphs table."""
    graph = graph_from_edges(int(row["n"]), json.loads(row["edges_json"]))
    partner_edges = json.loads(row["partner_edges_json"])
    partner = (graph_from_edges(int(row["n"]), partner_edges)
               if partner_edges is not None else None)
    return graph, partner, [int(v) for v in json.loads(row["marked_json"])]


def check_graphs_table(graphs: pd.DataFrame) -> None:
    """Refuse an empty or malformed graphs table with a clear error."""
    if graphs is None or len(graphs) == 0:
        raise ValueError("vga graphs table is empty; run generate_graphs first")
    missing = sorted(set(GRAPH_COLUMNS) - set(graphs.columns))
    if missing:
        raise ValueError(f"vga graphs table lacks columns {missing}")
    if graphs["label"].isna().any():
        raise ValueError("vga graphs table has missing labels")
