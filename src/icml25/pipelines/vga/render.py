"""Rendering graph drawings to grayscale images (``docs/papers/vga.md``, "Data").

The default renderer draws with PIL at ``supersample`` x resolution on white — black straight
edges, filled black circles for nodes, filled squares for the two marked nodes of the
shortest-path task — and downsamples with Lanczos. Pair images (isomorphism tasks) are two
panels side by side with a 2-pixel grey separator. A drawing whose nodes overlap, or with a
node on an edge it is not an end of, is refused (``layouts.drawing_overlap``). A matplotlib renderer (``nx.draw``) exists for
visual parity with the paper's figures; it is ~10x slower.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from icml25.pipelines.vga.layouts import drawing_overlap

SEPARATOR_GREY = 128
SEPARATOR_WIDTH = 2


@dataclass(frozen=True)
class RenderConfig:
    """Sizes at the reference resolution of 128 px scale with ``size``."""

    size: int = 128
    node_radius: float = 2.5
    edge_width: float = 1.0
    supersample: int = 4
    backend: str = "pil"
    edge_grey: int = 0                     # grey level of edges (0 = black like the nodes)
    min_node_dist_radii: float = 3.0       # refuse nodes closer than this (centre to centre)
    min_edge_clearance_radii: float = 1.4  # refuse a node this close to a foreign edge

    @property
    def radius_px(self) -> float:
        """Node radius in output pixels."""
        return self.node_radius * self.size / 128


def _draw_pil(pos: np.ndarray, edges: Sequence[Sequence[int]], marked: Sequence[int],
              cfg: RenderConfig) -> Image.Image:
    k = cfg.supersample
    big = cfg.size * k
    img = Image.new("L", (big, big), 255)
    draw = ImageDraw.Draw(img)
    p = np.asarray(pos, dtype=float) * k
    width = max(1, round(cfg.edge_width * cfg.size / 128 * k))
    for u, v in edges:
        draw.line([tuple(p[u]), tuple(p[v])], fill=cfg.edge_grey, width=width)
    r = cfg.radius_px * k
    marks = set(int(m) for m in marked)
    for v, (x, y) in enumerate(p):
        box = [x - r, y - r, x + r, y + r]
        if v in marks:
            draw.rectangle(box, fill=0)
        else:
            draw.ellipse(box, fill=0)
    return img.resize((cfg.size, cfg.size), Image.Resampling.LANCZOS)


def _draw_matplotlib(pos: np.ndarray, edges: Sequence[Sequence[int]], marked: Sequence[int],
                     cfg: RenderConfig) -> Image.Image:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(len(pos)))
    graph.add_edges_from((int(u), int(v)) for u, v in edges)
    dpi = 100
    fig = plt.figure(figsize=(cfg.size / dpi, cfg.size / dpi), dpi=dpi)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, cfg.size)
    ax.set_ylim(cfg.size, 0)
    ax.axis("off")
    at = {v: tuple(pos[v]) for v in range(len(pos))}
    marks = [int(m) for m in marked]
    others = [v for v in range(len(pos)) if v not in marks]
    node_size = (2 * cfg.radius_px * 72 / dpi) ** 2
    grey = cfg.edge_grey / 255
    nx.draw_networkx_edges(graph, at, ax=ax, width=cfg.edge_width * 72 / dpi,
                           edge_color=[(grey, grey, grey)])
    nx.draw_networkx_nodes(graph, at, nodelist=others, node_color="black", ax=ax,
                           node_size=node_size)
    if marks:
        nx.draw_networkx_nodes(graph, at, nodelist=marks, node_color="black", node_shape="s",
                               ax=ax, node_size=node_size)
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    plt.close(fig)
    return Image.fromarray(rgba[..., :3]).convert("L")


def render_panel(pos: np.ndarray, edges: Sequence[Sequence[int]], marked: Sequence[int] = (),
                 cfg: RenderConfig = RenderConfig()) -> np.ndarray:
    """One drawing as a uint8 array (size, size); positions in pixels of the output canvas."""
    pos = np.asarray(pos, dtype=float)
    if pos.ndim != 2 or pos.shape[1] != 2 or not np.isfinite(pos).all():
        raise ValueError(f"positions must be a finite (n, 2) array, got shape {pos.shape}")
    if ((pos < 0) | (pos > cfg.size)).any():
        raise ValueError("positions fall outside the canvas; normalise them first")
    n = len(pos)
    for u, v in edges:
        if not (0 <= u < n and 0 <= v < n):
            raise ValueError(f"edge ({u}, {v}) names a node outside 0..{n - 1}")
    why = drawing_overlap(pos, edges, cfg.radius_px, cfg.min_node_dist_radii,
                          cfg.min_edge_clearance_radii)
    if why is not None:  # the layouts re-draw such drawings; one that reaches here is refused
        raise ValueError(f"refusing to draw an unreadable graph drawing: {why}")
    if cfg.backend == "pil":
        img = _draw_pil(pos, edges, marked, cfg)
    elif cfg.backend == "matplotlib":
        img = _draw_matplotlib(pos, edges, marked, cfg)
    else:
        raise ValueError(f"unknown render backend {cfg.backend!r}; known: pil, matplotlib")
    return np.asarray(img, dtype=np.uint8)


def join_pair(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Two panels side by side with a grey separator (height x (2 size + 2))."""
    sep = np.full((left.shape[0], SEPARATOR_WIDTH), SEPARATOR_GREY, dtype=np.uint8)
    return np.concatenate([left, sep, right], axis=1)


def to_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of a uint8 grayscale image (deterministic)."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(image, dtype=np.uint8), mode="L").save(buf, format="PNG")
    return buf.getvalue()


def from_png(data: bytes) -> np.ndarray:
    """Decode PNG bytes to a uint8 grayscale array; corrupt bytes raise a clear error."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.asarray(img.convert("L"), dtype=np.uint8)
    except Exception as err:  # PIL raises several types for truncated or foreign data
        raise ValueError(f"image bytes are not a readable PNG ({err})") from err
