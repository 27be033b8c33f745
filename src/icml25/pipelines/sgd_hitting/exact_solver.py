"""Exact mean (and median) hitting times of 1-D SGD on a grid.

The SGD transition kernel ``x → x - η (f'(x) + Z)`` is put on the grid ``x_j = lo + j h``:
- continuous noise: the mass of each cell ``[x_j - h/2, x_j + h/2]`` is integrated exactly from
  the CDF of Z (no quantile quadrature, which would cut the tails that drive large deviations);
- atomic noise (Rademacher, finite-sum mini-batches): each atom is spread onto its two
  neighbouring grid points by linear interpolation (``h ≤ η/8``).
Mass beyond the walls ``[lo, hi]`` stays at the wall (clamping). Grid points in U absorb; on
the transient set T, ``(I - P_TT) u = 1`` gives ``u(x) = E_x τ`` (sparse LU). Results are
trusted only while ``E τ < 1e13`` (float64 cancellation in ``I - P_TT`` beyond that).
The noise scale may depend on the state (σ(x) per grid row) and must be > 0 everywhere.

The solve is checked: it runs on the states reachable from the start, each of which must reach
U (else ``E τ = ∞``, returned as such: a closed class outside U, e.g. bounded noise that cannot
climb out of a well); a singular factorisation is an error; the solution must be finite, at
least 1 on T, and have a small relative residual. Because ``(I - P_TT)⁻¹`` is entrywise
non-negative, ``‖(I - P_TT)⁻¹‖_∞ = max_x E_x τ``, so the ∞-norm condition number is
``‖I - P_TT‖_∞ · max u``, reported with the solution.

The median of τ comes from the survival function ``P(τ > n) = (P_TT^n 1)(x0)``: the powers
``P_TT^(2^k)`` by repeated squaring (dense), then a binary descent on n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.sparse.linalg import splu

from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target
from icml25.pipelines.sgd_hitting.monte_carlo import check_step_size
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw

TRUST_LIMIT = 1e13
CONDITION_LIMIT = 1e15  # beyond, float64 (ε ≈ 2.2e-16) leaves under a digit in u
RESIDUAL_LIMIT = 1e-8  # relative residual ‖(I - P)u - 1‖∞ / (‖I - P‖∞ ‖u‖∞) of a checked solve


@dataclass
class ExactKernel:
    grid: np.ndarray
    transient: np.ndarray  # indices of grid points outside U
    p_tt: sparse.csr_matrix
    leak: np.ndarray | None = None  # per transient state: probability of entering U next


class IllConditionedSolve(RuntimeError):
    """float64 cannot resolve ``(I - P_TT) u = 1`` (singular factor, non-finite or sub-1 u, or a
    large residual): E τ is beyond what the grid solve can give, not a number to use."""


@dataclass
class ExactSolution:
    """``E_{x0} τ`` with the checks of its linear solve."""

    mean: float
    condition: float  # ∞-norm condition number of I - P_SS (S: states reachable from x0)
    residual: float  # relative residual of the solve
    n_solved: int  # size of S


def build_kernel(landscape: Landscape, noise: NoiseLaw, eta: float, target: Target,
                 h: float, walls: tuple[float, float] | None = None,
                 curvature: float | None = None) -> ExactKernel:
    """The SGD kernel restricted to the transient grid points (see module docstring).

    ``curvature``: the largest Hessian eigenvalue at the minima, where known (``η·λ ≥ 2`` is
    refused)."""
    check_step_size(eta, curvature)
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
    if not np.all(np.isfinite(drift)):
        raise ValueError(f"exact solver: the gradient of {landscape.name} is not finite on the "
                         "grid; narrow the walls")
    rows, cols, vals = [], [], []
    if noise.kind != "minibatch":
        sigma = noise.sd_at(xt)
        bad = ~(np.isfinite(sigma) & (sigma > 0))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"exact solver: noise scale σ(x) = {sigma[k]:g} at x = {xt[k]:.6g}; "
                             "the exact solver needs σ > 0 (and finite) on every grid point "
                             "(noise.scale / noise.scale_fn)")
    if not noise.continuous:
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
        zlo, zhi = noise.support(sigma)
        # next = drift - η Z: cells from drift - η zhi to drift - η zlo
        j0 = np.clip(np.floor((drift - eta * zhi - lo) / h - 0.5).astype(np.int64), 0, n - 1)
        j1 = np.clip(np.ceil((drift - eta * zlo - lo) / h + 0.5).astype(np.int64), 0, n - 1)
        width = int((j1 - j0).max()) + 1
        if width * len(xt) > 60_000_000:
            raise ValueError(f"exact solver: {len(xt)} states × a noise band of {width} cells; "
                             "increase h or narrow the walls")
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
        s_col = sigma[:, None]
        prob = (noise.cdf((drift[:, None] - lower_edge) / eta, s_col)
                - noise.cdf((drift[:, None] - upper_edge) / eta, s_col))
        prob = np.where(valid, np.maximum(prob, 0.0), 0.0)
        r = np.broadcast_to(np.arange(len(xt))[:, None], j.shape)
        rows, cols, vals = [r[valid]], [j[valid]], [prob[valid]]
    rows_a, cols_a, vals_a = (np.concatenate(a) for a in (rows, cols, vals))
    full = sparse.csr_matrix((vals_a, (rows_a, cols_a)), shape=(len(xt), n))
    sums = np.asarray(full.sum(1)).ravel()
    if np.any(np.abs(sums - 1) > 1e-9):
        raise RuntimeError(f"exact solver: kernel rows do not sum to one (max error "
                           f"{np.abs(sums - 1).max():.2e})")
    absorbing_idx = np.flatnonzero(absorbing)
    leak = np.asarray(full[:, absorbing_idx].sum(1)).ravel() if absorbing_idx.size else \
        np.zeros(len(xt))
    return ExactKernel(grid, transient, full[:, transient].tocsr(), leak)


def mean_hitting_time(kernel: ExactKernel, x0: float) -> float:
    """``E_{x0} τ`` from ``(I - P_TT) u = 1`` at the grid point nearest to ``x0`` (0 in U,
    ``inf`` if U cannot be reached); the solve is checked (:func:`solve_hitting_time`)."""
    return solve_hitting_time(kernel, x0).mean


def solve_hitting_time(kernel: ExactKernel, x0: float) -> ExactSolution:
    """``E_{x0} τ`` with its checks (module docstring): reachability, singularity, residual."""
    j = int(np.argmin(np.abs(kernel.grid - x0)))
    pos = np.searchsorted(kernel.transient, j)
    if pos >= len(kernel.transient) or kernel.transient[pos] != j:
        return ExactSolution(0.0, 1.0, 0.0, 0)
    p = kernel.p_tt.tocsr()
    p.eliminate_zeros()
    n = p.shape[0]
    leak = kernel.leak if kernel.leak is not None else 1.0 - np.asarray(p.sum(1)).ravel()
    # S: the states reachable from x0; R: those from which U is reachable
    reach = csgraph.breadth_first_order(p, int(pos), directed=True, return_predecessors=False)
    into_u = np.flatnonzero(leak > 0)
    # reversed edges, plus a virtual node n with an edge to every state that leaks into U
    pt = p.T.tocoo()
    aug = sparse.csr_matrix(
        (np.ones(pt.nnz + len(into_u)),
         (np.concatenate([pt.row, np.full(len(into_u), n)]),
          np.concatenate([pt.col, into_u]))), shape=(n + 1, n + 1))
    can = csgraph.breadth_first_order(aug, n, directed=True, return_predecessors=False)
    can_hit = np.zeros(n + 1, bool)
    can_hit[can] = True
    if not can_hit[reach].all():
        return ExactSolution(math.inf, math.inf, 0.0, len(reach))
    s_idx = np.sort(reach)
    p_ss = p[s_idx][:, s_idx].tocsc()
    m = (sparse.identity(len(s_idx), format="csc") - p_ss).tocsc()
    try:
        lu = splu(m)
    except RuntimeError as err:  # "Factor is exactly singular"
        raise IllConditionedSolve(f"exact solver: I - P_TT is singular on the {len(s_idx)} states "
                           f"reachable from x0 = {x0:g} ({err}); U is not reached from there "
                           "in float64 (the walls, the target or the noise scale)") from None
    ones = np.ones(len(s_idx))
    u = lu.solve(ones)
    norm_m = float(abs(m).sum(1).max())
    if not np.all(np.isfinite(u)) or u.min() < 1 - 1e-3 * max(1.0, float(np.abs(u).max())):
        raise IllConditionedSolve(f"exact solver: the solve of (I - P_TT) u = 1 from x0 = {x0:g} "
                           f"returned {'non-finite' if not np.all(np.isfinite(u)) else 'u < 1'} "
                           "values: the system is numerically singular")
    residual = float(np.abs(m @ u - ones).max() / (norm_m * np.abs(u).max()))
    if residual > RESIDUAL_LIMIT:
        raise IllConditionedSolve(f"exact solver: relative residual {residual:.2e} of the solve from "
                           f"x0 = {x0:g} exceeds {RESIDUAL_LIMIT:g}")
    k = int(np.searchsorted(s_idx, pos))
    return ExactSolution(float(u[k]), norm_m * float(u.max()), residual, len(s_idx))


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
                    atoms_per_step: float = 8.0,
                    walls: tuple[float, float] | None = None) -> float:
    """Grid spacing ``h = η σ / 6`` (continuous laws; σ(x) state-dependent: its minimum over
    ``walls``) or ``η / 8`` (atomic laws)."""
    if not noise.continuous:
        return eta / atoms_per_step
    if noise.state_dependent:
        if walls is None:
            raise ValueError("default_spacing: state-dependent noise needs the walls")
        sigma = float(np.min(noise.sd_at(np.linspace(walls[0], walls[1], 4001))))
    else:
        sigma = noise.sd()
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"exact solver: noise scale σ = {sigma:g}; the exact solver needs "
                         "σ > 0 (noise.scale / noise.scale_fn)")
    return eta * sigma * math.sqrt(noise.unit_variance()) / cells_per_sd
