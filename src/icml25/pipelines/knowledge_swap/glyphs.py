"""Synthetic glyph classes: the new domain the pretrained digit classifier learns in the swap.

The learn set of this project (``docs/papers/knowledge_swap.md``, "Data"): stroked shapes on a
28x28 canvas. Per image the centre is U(10, 18) px, the size (radius / half-extent) U(5, 9) px, the
rotation U(0, pi) and the stroke width w ~ U(1.0, 2.2) px. A pixel at distance d from the stroke
has intensity ``max(0, 1 - (d / w)^2)``; N(0, 0.05) noise is added and the result is clipped to
[0, 1].

Two shapes are made rotation-distinct on purpose (a documented choice): a rotation in U(0, pi)
turns a plus into an X and a square into a diamond, so ``x_cross`` uses lines at +-30 degrees
from the horizontal and ``diamond`` is a rhombus with half-diagonals 1 and 0.6.
"""

from __future__ import annotations

import numpy as np

SIZE = 28

# Each shape: a list of polylines in unit coordinates (scaled by the size in pixels), or "ring".
_S30, _C30 = np.sin(np.pi / 6), np.cos(np.pi / 6)
_TRI = [(np.cos(a), np.sin(a)) for a in np.pi / 2 + 2 * np.pi * np.arange(4) / 3]
SHAPES: dict[str, list[list[tuple[float, float]]] | str] = {
    "ring": "ring",
    "square": [[(-1, -1), (1, -1), (1, 1), (-1, 1), (-1, -1)]],
    "plus": [[(-1, 0), (1, 0)], [(0, -1), (0, 1)]],
    "x_cross": [[(-_C30, -_S30), (_C30, _S30)], [(-_C30, _S30), (_C30, -_S30)]],
    "stripes": [[(-1, -1), (1, -1)], [(-1, 0), (1, 0)], [(-1, 1), (1, 1)]],
    "triangle": [_TRI],
    "diamond": [[(1, 0), (0, 0.6), (-1, 0), (0, -0.6), (1, 0)]],
    "l_corner": [[(-1, 1), (-1, -1), (1, -1)]],
}
GLYPH_CLASSES = tuple(SHAPES)


def _segments(shape: str) -> np.ndarray:
    """The shape's strokes as segments ``[k, 2 (ends), 2 (xy)]`` in unit coordinates."""
    segs = []
    for line in SHAPES[shape]:
        pts = np.asarray(line, dtype=float)
        segs.extend(np.stack([pts[:-1], pts[1:]], axis=1))
    return np.asarray(segs)


def _distance_to_segments(q: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """Distance of points ``q [n, P, 2]`` to the nearest of per-image segments ``[n, k, 2, 2]``."""
    a = segs[:, None, :, 0, :]  # [n, 1, k, 2]
    b = segs[:, None, :, 1, :]
    ab = b - a
    t = np.einsum("npkd,npkd->npk", q[:, :, None, :] - a, ab) / np.einsum("npkd,npkd->npk", ab, ab)
    t = np.clip(t, 0.0, 1.0)
    nearest = a + t[..., None] * ab
    return np.linalg.norm(q[:, :, None, :] - nearest, axis=-1).min(axis=-1)


def render_glyphs(shape: str, n: int, rng: np.random.Generator, noise: float = 0.05) -> np.ndarray:
    """``n`` images float32 ``[n, 28, 28]`` in [0, 1] of one glyph class (module docstring)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown glyph class {shape!r}; known: {list(GLYPH_CLASSES)}")
    if n < 1:
        raise ValueError(f"n: got {n}; expected at least one image")
    centre = rng.uniform(10.0, 18.0, size=(n, 2))
    size = rng.uniform(5.0, 9.0, size=n)
    theta = rng.uniform(0.0, np.pi, size=n)
    width = rng.uniform(1.0, 2.2, size=n)
    ys, xs = np.mgrid[0:SIZE, 0:SIZE].astype(float)
    pix = np.stack([xs.ravel(), ys.ravel()], axis=-1)  # [P, 2] as (x, y)
    # pixel coordinates in the glyph's frame: rotate by -theta about the centre, stay in pixels
    rel = pix[None] - centre[:, None, :]
    cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
    q = np.stack([cos * rel[..., 0] + sin * rel[..., 1],
                  -sin * rel[..., 0] + cos * rel[..., 1]], axis=-1)
    if SHAPES[shape] == "ring":
        d = np.abs(np.linalg.norm(q, axis=-1) - size[:, None])
    else:
        segs = _segments(shape)[None] * size[:, None, None, None]
        d = _distance_to_segments(q, segs)
    img = np.maximum(0.0, 1.0 - (d / width[:, None]) ** 2)
    img = img + rng.normal(0.0, noise, size=img.shape)
    return np.clip(img, 0.0, 1.0).reshape(n, SIZE, SIZE).astype(np.float32)


def make_glyph_set(classes: list[str], per_class: int, seed: int,
                   noise: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """A class-balanced glyph set: images ``[K * per_class, 28, 28]`` and labels ``0..K-1``
    (the position of each class in ``classes``), deterministic under ``seed``."""
    if not classes:
        raise ValueError("classes: empty; expected at least one glyph class")
    rng = np.random.default_rng(seed)
    images = [render_glyphs(c, per_class, rng, noise) for c in classes]
    labels = np.repeat(np.arange(len(classes), dtype=np.int64), per_class)
    return np.concatenate(images), labels
