"""Exact mean (and median) hitting times of 1-D SGD on a grid.

The SGD transition kernel ``x → x - η (f'(x) + Z)`` is put on the grid ``x_j = lo + j h``:
- continuous noise: the mass of each cell ``[x_j - h/2, x_j + h/2]`` is integrated exactly from
  the CDF of Z (no quantile quadrature, which would cut the tails that drive large deviations);
- atomic noise (Rademacher, finite-sum mini-batches): each atom is spread onto its two
  neighbouring grid points by linear interpolation (``h ≤ η/8``).
Mass beyond the walls ``[lo, hi]`` stays at the wall (clamping). Grid points in U absorb; on
the transient set T, ``(I - P_TT) u = 1`` gives ``u(x) = E_x τ`` (sparse LU). Results are
trusted only while ``E τ < 1e13`` (float64 cancellation in ``I - P_TT`` beyond that).

The median of τ comes from the survival function ``P(τ > n) = (P_TT^n 1)(x0)``: the powers
``P_TT^(2^k)`` by repeated squaring (dense), then a binary descent on n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import spsolve

from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target
from icml25.pipelines.sgd_hitting.monte_carlo import check_step_size
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw

TRUST_LIMIT = 1e13


@dataclass
class ExactKernel:
    grid: np.ndarray
    transient: np.ndarray  # indices of grid points outside U
    p_tt: sparse.csr_matrix


def build_kernel(landscape: Landscape, noise: NoiseLaw, eta: float, target: Target,
                 h: float, walls: tuple[float, float] | None = None) -> ExactKernel:
    """The SGD kernel restricted to the transient grid points (see module docstring)."""
    check_step_size(eta)
    if landscape.dim != 1:
        raise ValueError(f"exact solver: {landscape.name} is {landscape.dim}-D; it needs 1-D")
    if not h > 0:
        raise ValueError(f"exact solver: grid spacing h = {h} must be > 0")
    lo, hi = walls if walls is not None else landscape.box[0]
    n = round((hi - lo) / h) + 1
    if n > 200_000:
        raise ValueError(f"exact solver: {n} grid points; increase h or narrow the walls")
    grid = lo + h * np.arange(n)
    absorbing = np.asarray(target.contains((grid,), np), bool)
    transient = np.flatnonzero(~absorbing)
    xt = grid[transient]
    drift = xt - eta * np.asarray(landscape.grad((xt,), np)[0])
    rows, cols, vals = [], [], []
    if noise.kind == "gaussian" and noise.sd() == 0.0:
        values, weights = np.zeros((len(xt), 1)), np.ones(1)
        atomic = True
    else:
        atomic = not noise.continuous
    if atomic:
        if noise.kind != "gaussian":
            values, weights = noise.atoms(landscape, xt)
        pos = (drift[:, None] - eta * values - lo) / h
        pos = np.clip(pos, 0.0, n - 1.0)
        left = np.floor(pos).astype(np.int64)
        frac = pos - left
        left = np.minimum(left, n - 2)
        frac = pos - left
        r = np.broadcast_to(np.arange(len(xt))[:, None], pos.shape)
        w = np.broadcast_to(weights[None, :], pos.shape)
        rows += [r.ravel(), r.ravel()]
        cols += [left.ravel(), left.ravel() + 1]
        vals += [(w * (1 - frac)).ravel(), (w * frac).ravel()]
    else:
        zlo, zhi = noise.support()
        # next = drift - η Z: cells from drift - η zhi to drift - η zlo
        j0 = np.clip(np.floor((drift - eta * zhi - lo) / h - 0.5).astype(np.int64), 0, n - 1)
        j1 = np.clip(np.ceil((drift - eta * zlo - lo) / h + 0.5).astype(np.int64), 0, n - 1)
        width = int((j1 - j0).max()) + 1
        j = j0[:, None] + np.arange(width)[None, :]
        valid = j <= j1[:, None]
        j = np.minimum(j, n - 1)
        upper_edge = grid[j] + h / 2
        lower_edge = grid[j] - h / 2
        first, last = j == j0[:, None], j == j1[:, None]
        # the band's end cells (and the walls) take the far tails, so each row sums to one
        lower_edge = np.where(first, -np.inf, lower_edge)
        upper_edge = np.where(last, np.inf, upper_edge)
        # next ∈ (lower, upper]  <=>  Z ∈ [(drift - upper)/η, (drift - lower)/η)
        prob = (noise.cdf((drift[:, None] - lower_edge) / eta)
                - noise.cdf((drift[:, None] - upper_edge) / eta))
        prob = np.where(valid, np.maximum(prob, 0.0), 0.0)
        r = np.broadcast_to(np.arange(len(xt))[:, None], j.shape)
        rows, cols, vals = [r[valid]], [j[valid]], [prob[valid]]
    rows_a, cols_a, vals_a = (np.concatenate(a) for a in (rows, cols, vals))
    full = sparse.csr_matrix((vals_a, (rows_a, cols_a)), shape=(len(xt), n))
    sums = np.asarray(full.sum(1)).ravel()
    if np.any(np.abs(sums - 1) > 1e-9):
        raise RuntimeError(f"exact solver: kernel rows do not sum to one (max error "
                           f"{np.abs(sums - 1).max():.2e})")
    return ExactKernel(grid, transient, full[:, transient].tocsr())


def mean_hitting_time(kernel: ExactKernel, x0: float) -> float:
    """``E_{x0} τ`` from ``(I - P_TT) u = 1`` at the grid point nearest to ``x0`` (0 in U)."""
    j = int(np.argmin(np.abs(kernel.grid - x0)))
    pos = np.searchsorted(kernel.transient, j)
    if pos >= len(kernel.transient) or kernel.transient[pos] != j:
        return 0.0
    m = sparse.identity(len(kernel.transient), format="csc") - kernel.p_tt.tocsc()
    u = spsolve(m, np.ones(len(kernel.transient)))
    return float(u[pos])


def median_hitting_time(kernel: ExactKernel, x0: float, max_doublings: int = 60) -> float:
    """Smallest n with ``P(τ > n) ≤ 1/2`` from ``x0`` (dense repeated squaring)."""
    j = int(np.argmin(np.abs(kernel.grid - x0)))
    pos = np.searchsorted(kernel.transient, j)
    if pos >= len(kernel.transient) or kernel.transient[pos] != j:
        return 0.0
    if len(kernel.transient) > 6000:
        raise ValueError("median_hitting_time: too many states for dense powers")
    powers = [kernel.p_tt.toarray()]
    e = np.zeros(len(kernel.transient))
    e[pos] = 1.0
    # survival after 2^k steps from x0: e^T P^(2^k) 1
    while powers[-1][pos].sum() > 0.5:
        if len(powers) > max_doublings:
            return math.inf
        powers.append(powers[-1] @ powers[-1])
    row, n = e, 0
    for k in range(len(powers) - 1, -1, -1):
        candidate = row @ powers[k]
        if candidate.sum() > 0.5:
            row, n = candidate, n + 2**k
    return float(n + 1)


def solve_mean(landscape: Landscape, noise: NoiseLaw, eta: float, target: Target, x0: float,
               h: float, walls: tuple[float, float] | None = None) -> float:
    """Convenience: build the kernel and return ``E_{x0} τ``."""
    return mean_hitting_time(build_kernel(landscape, noise, eta, target, h, walls), x0)


def default_spacing(noise: NoiseLaw, eta: float, cells_per_sd: float = 6.0,
                    atoms_per_step: float = 8.0) -> float:
    """Grid spacing ``h = η σ / 6`` (continuous laws) or ``η / 8`` (atomic laws)."""
    if noise.continuous and noise.sd() > 0:
        return eta * noise.sd() / cells_per_sd
    return eta / atoms_per_step
