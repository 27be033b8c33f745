"""Circular-harmonic geometry of the 2D steerable layers (Kundu & Kondor 2025, Sec. 3).

Convention used by every kernel, positional encoding and test of this room: a pixel offset
``v = (d_row, d_col)`` has angle ``theta(v) = atan2(d_col, d_row)``. A feature at frequency ``m``
transforms under a rotation by ``a`` as ``(g_a F)[m](p) = exp(-i m a) F[m](R_a^{-1} p)``; with
this convention ``torch.rot90(F, 1, dims=(-2, -1))`` pairs with the phase ``exp(-i m pi / 2)``
(pinned by ``tests/pipelines/steerable/test_steer_layers.py``).
"""

from __future__ import annotations

import math

import numpy as np
import torch


class SteerableConfigError(ValueError):
    """A band limit, group order, kernel or grid the steerable layers cannot represent."""


def check_band_limit(freq_cutoff: int, name: str = "freq_cutoff") -> int:
    """``freq_cutoff`` M (frequencies 0..M-1) must be a positive integer."""
    if isinstance(freq_cutoff, bool) or not isinstance(freq_cutoff, int | np.integer) \
            or freq_cutoff < 1:
        raise SteerableConfigError(f"{name}: got {freq_cutoff!r}; expected an integer >= 1 "
                                   "(frequencies 0..M-1 are kept)")
    return int(freq_cutoff)


def offset_angles(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Radius and angle of every offset of an odd ``size x size`` kernel from its centre."""
    if size < 1 or size % 2 == 0:
        raise SteerableConfigError(f"kernel_size: got {size}; expected an odd positive integer "
                                   "(the kernel needs a centre pixel to rotate about)")
    c = (size - 1) / 2
    rows, cols = np.meshgrid(np.arange(size) - c, np.arange(size) - c, indexing="ij")
    return np.hypot(rows, cols), np.arctan2(cols, rows)


def radial_profiles(size: int, n_radius: int) -> np.ndarray:
    """Gaussian rings ``tau_rho(r) = exp(-(r - r_rho)^2 / (2 sigma^2))`` on the kernel grid.

    Rings sit at ``r_rho = rho * R / n_radius`` (R = (size-1)/2, rho = 1..n_radius), sigma 0.6
    (0.4 for the outermost ring) and ``tau = 0`` at the centre pixel, whose angle is undefined —
    the analytic basis of the official code ("interpolation_type=-1"). Returns
    ``[n_radius, size, size]``.
    """
    if n_radius < 1:
        raise SteerableConfigError(f"n_radius: got {n_radius}; expected >= 1")
    r, _ = offset_angles(size)
    half = (size - 1) / 2
    if half == 0:
        raise SteerableConfigError("kernel_size 1 has no ring to carry an angular frequency")
    out = np.empty((n_radius, size, size))
    for k in range(n_radius):
        centre = (k + 1) * half / n_radius
        sigma = 0.4 if k == n_radius - 1 else 0.6
        out[k] = np.exp(-((r - centre) ** 2) / (2 * sigma**2))
    out[:, r == 0] = 0.0
    return out


def filter_basis(size: int, n_radius: int, freqs: np.ndarray) -> torch.Tensor:
    """``psi_{rho,n}(v) = tau_rho(|v|) exp(-i n theta(v))``: complex ``[len(freqs), n_radius,
    size, size]``, each ring normalised to unit L2 norm (so weights keep one scale)."""
    _, theta = offset_angles(size)
    tau = radial_profiles(size, n_radius)
    tau = tau / np.linalg.norm(tau.reshape(n_radius, -1), axis=1)[:, None, None]
    freqs = np.asarray(freqs)
    phase = np.exp(-1j * freqs[:, None, None] * theta[None])
    basis = tau[None] * phase[:, None]
    return torch.from_numpy(basis.astype(np.complex64))


def grid_geometry(height: int, width: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Relative geometry of the tokens of an ``height x width`` grid (row-major order).

    Returns ``(r_index [N, N], theta [N, N], R)``: ``r_index[i, j]`` is the rank of
    ``|p_i - p_j|^2`` among the distinct squared distances of the grid (0 only for i = j),
    ``theta[i, j] = theta(p_i - p_j)`` and R the number of distinct nonzero squared distances.
    """
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    pos = np.stack([rows.ravel(), cols.ravel()], axis=1).astype(float)
    delta = pos[:, None, :] - pos[None, :, :]
    sq = np.rint((delta**2).sum(-1)).astype(np.int64)
    distinct = np.unique(sq)
    r_index = np.searchsorted(distinct, sq)
    theta = np.arctan2(delta[..., 1], delta[..., 0])
    return r_index, theta, int(len(distinct) - 1)


def relative_harmonics(height: int, width: int, freq_cutoff: int) -> tuple[torch.Tensor,
                                                                           torch.Tensor, int]:
    """``E[m, i, j] = exp(-i m theta_ij)`` (0 on the diagonal) and the distance index
    ``r_ij`` of the steerable positional encoding (Sec. 4)."""
    r_index, theta, n_dist = grid_geometry(height, width)
    m = np.arange(freq_cutoff)
    E = np.exp(-1j * m[:, None, None] * theta[None])
    E[:, r_index == 0] = 0.0
    return torch.from_numpy(E.astype(np.complex64)), torch.from_numpy(r_index), n_dist


def complex_randn(*shape: int, std: float, generator: torch.Generator | None = None
                  ) -> torch.Tensor:
    """Complex normal with E|z|^2 = std^2 (real and imaginary parts each std^2 / 2)."""
    re = torch.randn(*shape, generator=generator) * (std / math.sqrt(2))
    im = torch.randn(*shape, generator=generator) * (std / math.sqrt(2))
    return torch.complex(re, im)
