"""Layouts: the same abstract graph in different visual forms (``docs/papers/vga.md``, "Data").

``kk`` is Kamada-Kawai (the training layout of the paper), ``planar`` the straight-line
combinatorial embedding of ``nx.planar_layout`` (a test layout), ``random`` uniform positions
resampled until no two nodes are closer than a few node radii. Positions are returned already
normalised to pixel coordinates of the canvas: bounding box centred, longer side scaled to
``fill`` of the canvas, aspect kept — so no node can fall outside the image.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

LAYOUTS = ("kk", "planar", "random")


class LayoutError(ValueError):
    """A layout that cannot be computed (unknown name, non-planar graph for ``planar``)."""


def _blas_single_thread():
    # Kamada-Kawai runs scipy's L-BFGS; with threaded OpenBLAS on 2 cores it is ~15x slower.
    # threadpool_limits only caps libraries already loaded, so load scipy.optimize first.
    import scipy.optimize  # noqa: F401
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


def normalise_positions(pos: np.ndarray, size: int, fill: float = 0.84,
                        height: int | None = None) -> np.ndarray:
    """Centre the bounding box in a ``size`` x ``height`` canvas and scale its longer side to
    ``fill`` of the canvas side (aspect kept); returns float pixel coordinates (x, y)."""
    pos = np.asarray(pos, dtype=float)
    if pos.ndim != 2 or pos.shape[1] != 2 or not np.isfinite(pos).all():
        raise LayoutError(f"positions must be a finite (n, 2) array, got shape {pos.shape}")
    height = size if height is None else height
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    span = float((hi - lo).max())
    scale = fill * min(size, height) / span if span > 0 else 0.0
    centre = (lo + hi) / 2
    out = (pos - centre) * scale + np.array([size / 2, height / 2])
    return out


def min_distance(pos: np.ndarray) -> float:
    """Smallest distance between two nodes (inf for fewer than two nodes)."""
    if len(pos) < 2:
        return float("inf")
    diff = pos[:, None, :] - pos[None, :, :]
    dist = np.sqrt((diff ** 2).sum(-1))
    return float(dist[np.triu_indices(len(pos), 1)].min())


def edge_clearance(pos: np.ndarray, edges) -> float:
    """Smallest distance from a node centre to an edge that does not end at it (inf if none):
    a node drawn on such an edge reads as one more bend or vertex of that edge."""
    pos = np.asarray(pos, dtype=float)
    best = float("inf")
    for u, v in edges:
        a, b = pos[u], pos[v]
        ab = b - a
        denom = float(ab @ ab)
        others = np.array([w for w in range(len(pos)) if w != u and w != v], dtype=int)
        if not len(others):
            continue
        rel = pos[others] - a
        t = np.clip(rel @ ab / denom, 0.0, 1.0) if denom > 0 else np.zeros(len(others))
        d = np.sqrt(((rel - t[:, None] * ab) ** 2).sum(-1))
        best = min(best, float(d.min()))
    return best


def drawing_overlap(pos: np.ndarray, edges, node_radius: float, min_node_dist_radii: float,
                    min_edge_clearance_radii: float) -> str | None:
    """Why a drawing is unreadable, or None: two nodes closer than ``min_node_dist_radii``
    node radii (centre to centre; 2 = touching disks), or a node centre closer than
    ``min_edge_clearance_radii`` radii to an edge it is not an end of."""
    d = min_distance(np.asarray(pos, dtype=float))
    if d < min_node_dist_radii * node_radius:
        return (f"two nodes are {d:.2f} px apart, under {min_node_dist_radii:g} node radii "
                f"({min_node_dist_radii * node_radius:.2f} px)")
    c = edge_clearance(pos, edges)
    if c < min_edge_clearance_radii * node_radius:
        return (f"a node lies {c:.2f} px from an edge it is not an end of, under "
                f"{min_edge_clearance_radii:g} node radii "
                f"({min_edge_clearance_radii * node_radius:.2f} px)")
    return None


def _cross(a, b, c, d) -> bool:
    """Whether segments ab and cd properly cross (shared end points do not count)."""
    def orient(p, q, r):
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])
    d1, d2 = orient(c, d, a), orient(c, d, b)
    d3, d4 = orient(a, b, c), orient(a, b, d)
    return d1 * d2 < 0 and d3 * d4 < 0


def has_crossing(pos: np.ndarray, edges) -> bool:
    """Whether two edges without a common end cross in the straight-line drawing ``pos``."""
    edges = list(edges)
    for i, (u, v) in enumerate(edges):
        for a, b in edges[i + 1:]:
            if len({u, v, a, b}) == 4 and _cross(pos[u], pos[v], pos[a], pos[b]):
                return True
    return False


#: Re-draws after this many use the (re-)drawn positions plus a seeded jitter whose scale grows
#: with the attempt, for graphs whose layout always puts a node on a foreign edge.
JITTER_AFTER = 10


def _raw_positions(graph: nx.Graph, layout: str, attempt: int,
                   rng: np.random.Generator | None) -> np.ndarray:
    """Un-normalised positions of ``layout``; attempt 0 is the layout's canonical drawing, a
    later attempt a re-draw: Kamada-Kawai from seeded random initial positions, the planar
    embedding with nodes and edges inserted in a seeded order (the embedding depends on it),
    every other time relaxed by Kamada-Kawai from there (kept only if no edges cross);
    from attempt ``JITTER_AFTER`` on, with every node moved by a seeded Gaussian jitter of
    1 % to 10 % of the drawing's extent, cycling (a planar drawing keeps no crossing)."""
    pos = _layout_once(graph, layout, attempt, rng)
    if layout == "random" or attempt < JITTER_AFTER:
        return pos
    span = float(np.ptp(pos, axis=0).max()) or 1.0
    scale = 0.01 * (1 + (attempt - JITTER_AFTER) % 10) * span
    for _ in range(100):
        moved = pos + rng.normal(0.0, scale, pos.shape)
        if layout != "planar" or not has_crossing(moved, graph.edges):
            return moved
    return pos


def _layout_once(graph: nx.Graph, layout: str, attempt: int,
                 rng: np.random.Generator | None) -> np.ndarray:
    n = graph.number_of_nodes()
    if layout == "kk":
        init = None
        if attempt:
            init = {v: tuple(xy) for v, xy in enumerate(rng.random((n, 2)))}
        with _blas_single_thread():
            pos = nx.kamada_kawai_layout(graph, pos=init)
        return np.array([pos[v] for v in range(n)])
    if layout == "planar":
        if not attempt:
            pos = nx.planar_layout(graph)
            return np.array([pos[v] for v in range(n)])
        shuffled = nx.Graph()  # same graph, nodes and edges inserted in a seeded order
        shuffled.add_nodes_from(int(v) for v in rng.permutation(n))
        edges = list(graph.edges)
        shuffled.add_edges_from(edges[int(i)] for i in rng.permutation(len(edges)))
        pos = nx.planar_layout(shuffled)
        if attempt % 2 == 0:  # every other re-draw: Kamada-Kawai relaxed from that embedding
            with _blas_single_thread():
                pos = nx.kamada_kawai_layout(graph, pos=pos)
        return np.array([pos[v] for v in range(n)])
    return rng.random((n, 2))


def layout_positions(graph: nx.Graph, layout: str, size: int, *,
                     rng: np.random.Generator | None = None, node_radius: float = 2.5,
                     random_min_dist_radii: float = 3.0, max_random_tries: int = 2000,
                     fill: float = 0.84, min_node_dist_radii: float = 3.0,
                     min_edge_clearance_radii: float = 1.4,
                     max_redraws: int = 400) -> np.ndarray:
    """Pixel positions (n, 2) of nodes 0..n-1 drawn with ``layout`` on a ``size`` canvas.

    A drawing with overlapping nodes or a node on a foreign edge (:func:`drawing_overlap`) is
    re-drawn (``kk``, ``planar``: up to ``max_redraws`` seeded re-draws; ``random``: up to
    ``max_random_tries`` samples, nodes at least ``random_min_dist_radii`` radii apart); if
    none is readable the layout is refused with a :class:`LayoutError`."""
    n = graph.number_of_nodes()
    nodes = list(range(n))
    if sorted(graph.nodes) != nodes:
        raise LayoutError("layouts need nodes labelled 0..n-1")
    if layout not in LAYOUTS:
        raise LayoutError(f"unknown layout {layout!r}; known: {list(LAYOUTS)}")
    if layout == "planar" and not nx.check_planarity(graph)[0]:
        raise LayoutError("planar layout of a non-planar graph is impossible")
    if layout == "random":
        if rng is None:
            raise LayoutError("random layout needs a seeded generator")
        node_radii, tries = max(random_min_dist_radii, min_node_dist_radii), max_random_tries
    else:
        node_radii, tries = min_node_dist_radii, max_redraws + 1
        if rng is None:
            rng = np.random.default_rng(0)
    edges = [(int(u), int(v)) for u, v in graph.edges]
    why = None
    for attempt in range(tries):
        out = normalise_positions(_raw_positions(graph, layout, attempt, rng), size, fill)
        why = drawing_overlap(out, edges, node_radius, node_radii, min_edge_clearance_radii)
        if why is None and layout == "planar" and has_crossing(out, edges):
            why = "two edges cross"  # a relaxed planar drawing must stay crossing-free
        if why is None:
            return out
    raise LayoutError(f"no readable {layout} drawing in {tries} tries (last: {why}); lower "
                      "vga.render.min_node_dist_radii / min_edge_clearance_radii"
                      + (" or random_min_dist_radii" if layout == "random" else ""))
