"""Synthetic voxel shapes for the 3D experiment (``docs/papers/steerable.md``, "Data"): eight
solid classes without mirror-image pairs, each sample with a random size (0.5-0.8 of the
grid), a random rotation (``scipy.spatial.transform.Rotation.random``, seeded), a random shift
of up to one voxel, occupancy from the implicit function at the voxel centres with 2x2x2
supersampling, plus Gaussian noise.

Each sample is rendered twice from the same size, shift and noise seed: ``upright`` (identity
rotation) and ``rotated``; the ``up_rot`` protocol trains on upright shapes and tests on rotated
ones, ``rot_rot`` trains and tests on rotated shapes.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation
from tqdm.auto import tqdm

from icml25.core.images import stratified_split

SHAPES = ("sphere_shell", "solid_cube", "cuboid_2_1_1", "cylinder", "cone", "torus", "dumbbell",
          "plate_with_hole")
SPLITS = ("train", "val", "test")


class VoxelDataError(ValueError):
    """Voxel data of the wrong shape, non-finite, empty, or labels out of range."""


def _inside(shape: str, u: np.ndarray) -> np.ndarray:
    """Implicit function of each class on local coordinates ``u [..., 3]`` scaled so the
    shape spans about [-1, 1]: True inside."""
    x, y, z = u[..., 0], u[..., 1], u[..., 2]
    rxy = np.hypot(x, y)
    r = np.linalg.norm(u, axis=-1)
    if shape == "sphere_shell":
        return (r <= 1.0) & (r >= 0.65)
    if shape == "solid_cube":
        return np.abs(u).max(-1) <= 0.6
    if shape == "cuboid_2_1_1":
        return (np.abs(x) <= 0.9) & (np.abs(y) <= 0.45) & (np.abs(z) <= 0.45)
    if shape == "cylinder":
        return (rxy <= 0.45) & (np.abs(z) <= 0.85)
    if shape == "cone":
        return (np.abs(z) <= 0.85) & (rxy <= 0.7 * (0.85 - z) / 1.7)
    if shape == "torus":
        return (rxy - 0.65) ** 2 + z**2 <= 0.28**2
    if shape == "dumbbell":
        balls = (np.linalg.norm(u - np.array([0.6, 0, 0]), axis=-1) <= 0.38) | \
            (np.linalg.norm(u + np.array([0.6, 0, 0]), axis=-1) <= 0.38)
        return balls | ((np.abs(x) <= 0.6) & (np.hypot(y, z) <= 0.15))
    if shape == "plate_with_hole":
        return (np.abs(z) <= 0.18) & (np.maximum(np.abs(x), np.abs(y)) <= 0.8) & (rxy >= 0.38)
    raise VoxelDataError(f"unknown shape class {shape!r}; expected one of {SHAPES}")


def render_shape(shape: str, grid: int, size: float, rotation: np.ndarray,
                 shift: np.ndarray) -> np.ndarray:
    """Occupancy ``[grid]^3`` in [0, 1] of ``shape`` scaled to ``size * grid / 2`` voxels
    (half-extent), rotated by the 3x3 matrix ``rotation`` and shifted by ``shift`` voxels:
    the mean of the implicit function over 2x2x2 points at +-1/4 voxel around each centre
    (a point set that the 24 cube rotations map onto itself)."""
    c = (grid - 1) / 2
    centres = np.stack(np.meshgrid(*[np.arange(grid) - c] * 3, indexing="ij"), -1)
    offsets = np.stack(np.meshgrid(*[[-0.25, 0.25]] * 3, indexing="ij"), -1).reshape(-1, 3)
    points = centres[..., None, :] + offsets  # [G, G, G, 8, 3]
    # local coordinates: u = R^T (p - shift) / half-extent (row vectors: (p - s) @ R)
    local = (points - np.asarray(shift, dtype=float)) @ np.asarray(rotation, dtype=float)
    local /= size * grid / 2
    return _inside(shape, local).mean(-1).astype(np.float32)


def make_voxel_splits(grid: int, n_train: int, n_val: int, n_test: int, noise: float,
                      seed: int, size_range: tuple[float, float] = (0.5, 0.8),
                      max_shift: float = 1.0, progress: bool = False) -> dict[str, np.ndarray]:
    """``n_*`` samples per class and split. Returns ``<split>_upright``, ``<split>_rotated``
    (``[N, G, G, G]`` float32), ``<split>_labels`` and ``<split>_rotations`` (``[N, 3, 3]``)."""
    if grid < 4 or grid % 2:
        raise VoxelDataError(f"grid: got {grid}; expected an even size >= 4")
    counts = {"train": n_train, "val": n_val, "test": n_test}
    rng = np.random.default_rng(seed)
    n_total = sum(counts.values()) * len(SHAPES)
    labels = np.repeat(np.arange(len(SHAPES)), sum(counts.values()))
    sizes = rng.uniform(*size_range, n_total)
    shifts = rng.uniform(-max_shift, max_shift, (n_total, 3))
    rotations = Rotation.random(n_total, random_state=rng).as_matrix()
    noise_seeds = rng.integers(0, 2**32, n_total)
    up = np.empty((n_total, grid, grid, grid), np.float32)
    rot = np.empty_like(up)
    for i in tqdm(range(n_total), desc="voxel shapes", disable=not progress, leave=False):
        shape = SHAPES[labels[i]]
        eps = np.random.default_rng(noise_seeds[i]).normal(0, noise, (grid,) * 3)
        up[i] = render_shape(shape, grid, sizes[i], np.eye(3), shifts[i]) + eps
        rot[i] = render_shape(shape, grid, sizes[i], rotations[i], shifts[i]) + eps
    parts = stratified_split(labels, [counts[s] / sum(counts.values()) for s in SPLITS], seed)
    out: dict[str, np.ndarray] = {}
    for split, idx in zip(SPLITS, parts, strict=True):
        out[f"{split}_upright"] = up[idx]
        out[f"{split}_rotated"] = rot[idx]
        out[f"{split}_labels"] = labels[idx].astype(np.int64)
        out[f"{split}_rotations"] = rotations[idx]
    return out


def check_voxel_data(voxels: np.ndarray, labels: np.ndarray | None = None,
                     grid: int | None = None, name: str = "voxels") -> None:
    """Refuse voxel data a classifier cannot use, naming the record."""
    voxels = np.asarray(voxels)
    if voxels.ndim != 4 or voxels.shape[0] == 0 or len(set(voxels.shape[1:])) != 1:
        raise VoxelDataError(f"{name}: expected a non-empty stack of cubic grids [N, G, G, G], "
                             f"got shape {voxels.shape}")
    if grid is not None and voxels.shape[1] != grid:
        raise VoxelDataError(f"{name}: expected {grid}^3 grids, got {voxels.shape[1]}^3")
    bad = ~np.isfinite(voxels.reshape(len(voxels), -1)).all(1)
    if bad.any():
        raise VoxelDataError(f"{name}: record {int(np.flatnonzero(bad)[0])} has non-finite "
                             f"values ({int(bad.sum())} records affected)")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (voxels.shape[0],):
            raise VoxelDataError(f"{name}: {voxels.shape[0]} grids but labels of shape "
                                 f"{labels.shape}")
        if labels.min() < 0 or labels.max() >= len(SHAPES):
            raise VoxelDataError(f"{name}: labels must be 0..{len(SHAPES) - 1}, got range "
                                 f"[{labels.min()}, {labels.max()}]")


def voxel_protocol_data(splits: dict[str, np.ndarray], protocol: str, split: str
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Grids and labels a protocol uses for one split (test is always rotated)."""
    if protocol not in ("rot_rot", "up_rot"):
        raise VoxelDataError(f"protocol: got {protocol!r}; expected rot_rot or up_rot")
    rotated = split == "test" or protocol == "rot_rot"
    return splits[f"{split}_{'rotated' if rotated else 'upright'}"], splits[f"{split}_labels"]
