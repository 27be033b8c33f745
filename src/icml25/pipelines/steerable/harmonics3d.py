"""Spherical-harmonic geometry of the 3D steerable layers (Kundu & Kondor
2025, Sec. 3-4 in 3D).

Everything is written in the *real* spherical-harmonic basis, so features, weights and the
rotation matrices are real. A feature of degree ``l`` is a vector of ``2l + 1`` coefficients
(order m = -l..l) that rotates as ``(g_R F)_l(p) = D_l(R) F_l(R^{-1} p)``, with ``D_l`` the real
Wigner matrix defined here by ``Y_l(R u) = D_l(R) Y_l(u)``. Directions are vectors in the
array's index axes ``(axis0, axis1, axis2) = (x, y, z)``.

- :func:`real_sph_harm`: ``Y_l^m`` from ``scipy.special.sph_harm_y`` (complex, Condon-Shortley)
  by the usual real combinations.
- :func:`wigner_d_real`: ``D_l(R)`` by least squares on sample directions (exact up to rounding,
  since the ``Y_l`` span a (2l+1)-dimensional invariant space).
- :func:`real_clebsch_gordan`: the real coupling tensor ``C[m1, m2, m]`` with
  ``sum C[m1, m2, m] (D_l1 a)_m1 (D_l2 b)_m2 = (D_l sum C a b)_m``, computed as the null space of
  the intertwining equations on random rotations (unique up to sign for
  ``|l1 - l2| <= l <= l1 + l2``; the sign is fixed deterministically).
- :func:`cube_rotations`: the 24 proper rotations of the cube (signed permutation matrices of
  determinant +1), the exact group elements of a voxel grid.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import torch
from scipy.special import sph_harm_y

from icml25.pipelines.steerable.harmonics import SteerableConfigError

#: the largest degree the 3D layers are built for (their cost grows as (L+1)^4 per conv)
MAX_DEGREE = 4


def check_degree(max_degree: int, name: str = "max_degree") -> int:
    """``max_degree`` L (degrees 0..L) must be an integer in 0..MAX_DEGREE."""
    if isinstance(max_degree, bool) or not isinstance(max_degree, int | np.integer) \
            or not 0 <= max_degree <= MAX_DEGREE:
        raise SteerableConfigError(f"{name}: got {max_degree!r}; expected an integer in "
                                   f"0..{MAX_DEGREE} (spherical-harmonic degrees 0..L)")
    return int(max_degree)


def n_components(max_degree: int) -> int:
    """``sum_{l<=L} (2l + 1) = (L + 1)^2`` coefficients per channel."""
    return (max_degree + 1) ** 2


def degree_of_component(max_degree: int) -> np.ndarray:
    """The degree l of each of the ``(L+1)^2`` packed components (l-major, m = -l..l)."""
    return np.concatenate([np.full(2 * ell + 1, ell) for ell in range(max_degree + 1)])


def real_sph_harm(ell: int, directions: np.ndarray) -> np.ndarray:
    """Real spherical harmonics ``Y_l^m(u)``, m = -l..l, of unit vectors ``[..., 3]``
    (orthonormal on the sphere): ``sqrt2 (-1)^m Re Y_l^m`` for m > 0, ``sqrt2 (-1)^m Im
    Y_l^|m|`` for m < 0, ``Y_l^0`` for m = 0. Returns ``[..., 2l + 1]``."""
    u = np.asarray(directions, dtype=np.float64)
    norm = np.linalg.norm(u, axis=-1)
    safe = np.where(norm[..., None] > 0, u / np.maximum(norm, 1e-300)[..., None], 0.0)
    polar = np.arccos(np.clip(safe[..., 2], -1.0, 1.0))
    azimuth = np.arctan2(safe[..., 1], safe[..., 0])
    out = np.empty((*u.shape[:-1], 2 * ell + 1))
    for m in range(-ell, ell + 1):
        y = sph_harm_y(ell, abs(m), polar, azimuth)
        if m > 0:
            out[..., m + ell] = np.sqrt(2) * (-1) ** m * y.real
        elif m < 0:
            out[..., m + ell] = np.sqrt(2) * (-1) ** m * y.imag
        else:
            out[..., ell] = y.real
    return out


def real_sph_harm_all(max_degree: int, directions: np.ndarray) -> np.ndarray:
    """All degrees 0..L packed l-major: ``[..., (L+1)^2]``."""
    return np.concatenate([real_sph_harm(ell, directions) for ell in range(max_degree + 1)], -1)


def _sample_directions(n: int = 64, seed: int = 7) -> np.ndarray:
    u = np.random.default_rng(seed).normal(size=(n, 3))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def wigner_d_real(ell: int, rotation: np.ndarray) -> np.ndarray:
    """``D_l(R)`` with ``Y_l(R u) = D_l(R) Y_l(u)`` (real, orthogonal, ``[2l+1, 2l+1]``)."""
    R = np.asarray(rotation, dtype=np.float64)
    u = _sample_directions(max(64, 8 * (2 * ell + 1)))
    A = real_sph_harm(ell, u)  # [n, 2l+1]
    B = real_sph_harm(ell, u @ R.T)  # rows Y(R u)
    Dt, *_ = np.linalg.lstsq(A, B, rcond=None)  # B = A D^T
    return Dt.T


def wigner_d_packed(max_degree: int, rotation: np.ndarray) -> np.ndarray:
    """Block-diagonal ``D(R) = diag(D_0, ..., D_L)`` on the packed components."""
    K = n_components(max_degree)
    D = np.zeros((K, K))
    for ell in range(max_degree + 1):
        s = slice(ell * ell, (ell + 1) ** 2)
        D[s, s] = wigner_d_real(ell, rotation)
    return D


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


@functools.cache
def _clebsch_gordan_cached(l1: int, l2: int, ell: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    n1, n2, n = 2 * l1 + 1, 2 * l2 + 1, 2 * ell + 1
    rows = []
    for _ in range(3):
        R = _random_rotation(rng)
        D1, D2, D = wigner_d_real(l1, R), wigner_d_real(l2, R), wigner_d_real(ell, R)
        # sum_{m1 m2} C[m1, m2, m] D1[m1, p] D2[m2, q] = sum_k D[m, k] C[p, q, k]
        rows.append(np.kron(np.kron(D1.T, D2.T), np.eye(n))
                    - np.kron(np.eye(n1 * n2), D))
    _, s, vt = np.linalg.svd(np.concatenate(rows))
    if s[-1] > 1e-8 or (len(s) > 1 and s[-2] < 1e-6):
        raise SteerableConfigError(f"no unique coupling {l1} x {l2} -> {ell} (singular values "
                                   f"{s[-2:]}); |l1 - l2| <= l <= l1 + l2 is required")
    C = vt[-1].reshape(n1, n2, n)
    flat = C.ravel()
    big = np.flatnonzero(np.abs(flat) > 1e-6)[0]
    return C * np.sign(flat[big]) / np.linalg.norm(C)


def real_clebsch_gordan(l1: int, l2: int, ell: int) -> np.ndarray:
    """The real coupling tensor ``C[m1, m2, m]`` of ``l1 x l2 -> l`` (unit Frobenius norm)."""
    if not abs(l1 - l2) <= ell <= l1 + l2:
        raise SteerableConfigError(f"degrees {l1} x {l2} cannot couple to {ell} "
                                   "(selection rule |l1 - l2| <= l <= l1 + l2)")
    return _clebsch_gordan_cached(l1, l2, ell).copy()


@functools.lru_cache(maxsize=1)
def cube_rotations() -> tuple[np.ndarray, ...]:
    """The 24 rotations of the cube: signed 3x3 permutation matrices with determinant +1
    (identity first)."""
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1, -1), repeat=3):
            R = np.zeros((3, 3))
            for row, (col, s) in enumerate(zip(perm, signs, strict=True)):
                R[row, col] = s
            if np.linalg.det(R) > 0:
                out.append(R)
    out.sort(key=lambda R: (not np.allclose(R, np.eye(3)),))
    return tuple(out)


def rotate_grid_indices(size: int, rotation: np.ndarray) -> np.ndarray:
    """Flat source index of each voxel of a ``size^3`` grid rotated about its centre by a
    cube rotation: ``out[p] = in[R^{-1} p]`` (positions relative to the centre)."""
    R = np.asarray(rotation)
    if not np.allclose(np.abs(R).sum(0), 1) or not np.allclose(np.abs(R).sum(1), 1) \
            or not np.allclose(R, np.rint(R)):
        raise SteerableConfigError("exact voxel rotation needs a signed permutation matrix "
                                   "(one of the 24 cube rotations)")
    c = (size - 1) / 2
    idx = np.stack(np.meshgrid(*[np.arange(size)] * 3, indexing="ij"), -1).reshape(-1, 3)
    src = np.rint((idx - c) @ R + c).astype(np.int64)  # R^{-1} p = R^T p, row-vector form
    return (src[:, 0] * size + src[:, 1]) * size + src[:, 2]


def rotate_voxels(x: torch.Tensor, rotation: np.ndarray) -> torch.Tensor:
    """Rotate the last three (cubic) axes of ``x`` by a cube rotation (exact, a permutation)."""
    size = x.shape[-1]
    if x.shape[-3:] != (size, size, size):
        raise SteerableConfigError(f"voxel rotation needs a cubic grid, got {tuple(x.shape)}")
    idx = torch.from_numpy(rotate_grid_indices(size, rotation)).to(x.device)
    flat = x.reshape(*x.shape[:-3], size ** 3)
    return flat[..., idx].reshape(x.shape)


def rotate_field3d(x: torch.Tensor, rotation: np.ndarray, max_degree: int) -> torch.Tensor:
    """The group action on a packed field ``[B, (L+1)^2, C, X, X, X]``: rotate the grid and
    multiply the components by ``D(R)``."""
    D = torch.from_numpy(wigner_d_packed(max_degree, rotation)).to(x.dtype).to(x.device)
    return torch.einsum("kj,bjc...->bkc...", D, rotate_voxels(x, rotation))
