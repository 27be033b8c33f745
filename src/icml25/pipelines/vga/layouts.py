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


def layout_positions(graph: nx.Graph, layout: str, size: int, *,
                     rng: np.random.Generator | None = None, node_radius: float = 2.5,
                     random_min_dist_radii: float = 3.0, max_random_tries: int = 2000,
                     fill: float = 0.84) -> np.ndarray:
    """Pixel positions (n, 2) of nodes 0..n-1 drawn with ``layout`` on a ``size`` canvas."""
    n = graph.number_of_nodes()
    nodes = list(range(n))
    if sorted(graph.nodes) != nodes:
        raise LayoutError("layouts need nodes labelled 0..n-1")
    if layout == "kk":
        with _blas_single_thread():
            pos = nx.kamada_kawai_layout(graph)
    elif layout == "planar":
        if not nx.check_planarity(graph)[0]:
            raise LayoutError("planar layout of a non-planar graph is impossible")
        pos = nx.planar_layout(graph)
    elif layout == "random":
        if rng is None:
            raise LayoutError("random layout needs a seeded generator")
        for _ in range(max_random_tries):
            raw = rng.random((n, 2))
            out = normalise_positions(raw, size, fill)
            if min_distance(out) >= random_min_dist_radii * node_radius:
                return out
        raise LayoutError(f"no random layout with nodes {random_min_dist_radii} radii apart in "
                          f"{max_random_tries} tries; lower random_min_dist_radii")
    else:
        raise LayoutError(f"unknown layout {layout!r}; known: {list(LAYOUTS)}")
    return normalise_positions(np.array([pos[v] for v in nodes]), size, fill)
