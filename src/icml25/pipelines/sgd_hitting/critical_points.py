"""Critical points of a landscape and the minimum–saddle–minimum graph between them.

1-D: sign changes of f' on a fine grid, refined by Brent's method. 2-D: a grid of starts,
refined by Newton–Krylov/hybrid root finding of ∇f = 0 (``scipy.optimize.root``), deduplicated.
Each point is classified by the signs of its Hessian eigenvalues (minimum, saddle, maximum).
Adjacent minima are the two ends of the gradient flow leaving an index-1 saddle (in 1-D: a
local maximum) along its unstable direction; only adjacent pairs get a direct cost Ṽ(i, j).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize

from icml25.pipelines.sgd_hitting.landscapes import Landscape


@dataclass(frozen=True)
class CriticalPoint:
    x: tuple[float, ...]
    f: float
    eig: tuple[float, ...]
    kind: str  # minimum | saddle | maximum


def _classify(eig: np.ndarray) -> str:
    # a zero eigenvalue (a continuum of minima, e.g. the Mexican hat's circle) is not descent
    tol = 1e-7 * max(1.0, float(np.max(np.abs(eig))))
    neg = int(np.sum(eig < -tol))
    if neg == 0:
        return "minimum"
    return "maximum" if neg == len(eig) else "saddle"


def _point(landscape: Landscape, x: np.ndarray) -> CriticalPoint:
    eig = np.linalg.eigvalsh(landscape.hessian(x))
    return CriticalPoint(tuple(float(v) for v in x), landscape.value(x),
                         tuple(float(v) for v in eig), _classify(eig))


def find_critical_points(landscape: Landscape, n_grid: int = 4001) -> list[CriticalPoint]:
    """All non-degenerate critical points inside the landscape's box, sorted by position."""
    if landscape.dim == 1:
        lo, hi = landscape.box[0]
        xs = np.linspace(lo, hi, n_grid)
        g = np.asarray(landscape.grad((xs,), np)[0])
        points = [_point(landscape, np.array([xs[k]])) for k in np.flatnonzero(g == 0)]
        for k in np.flatnonzero(np.sign(g[:-1]) * np.sign(g[1:]) < 0):
            root = optimize.brentq(lambda x: landscape.gradient(np.array([x]))[0], xs[k],
                                   xs[k + 1], xtol=1e-14, rtol=1e-14)
            points.append(_point(landscape, np.array([root])))
        return sorted(points, key=lambda p: p.x[0])
    side = max(round(np.sqrt(n_grid)), 5)
    axes = [np.linspace(lo, hi, side) for lo, hi in landscape.box]
    found: list[np.ndarray] = []
    for start in np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, landscape.dim):
        sol = optimize.root(landscape.gradient, start, jac=landscape.hessian, tol=1e-13)
        x = sol.x
        if not sol.success or np.linalg.norm(landscape.gradient(x)) > 1e-9:
            continue
        if any(not lo <= v <= hi for v, (lo, hi) in zip(x, landscape.box, strict=True)):
            continue
        if all(np.linalg.norm(x - y) > 1e-6 for y in found):
            found.append(x)
    found.sort(key=lambda v: tuple(np.round(v, 8)))
    return [_point(landscape, x) for x in found]


def flow_to_minimum(landscape: Landscape, x0: np.ndarray, t_max: float = 200.0) -> np.ndarray:
    """End point of the gradient flow ``ẋ = -∇f(x)`` from ``x0`` (stiff solver, tight tols)."""
    sol = integrate.solve_ivp(lambda t, x: -landscape.gradient(x), (0.0, t_max), x0,
                              method="LSODA", rtol=1e-10, atol=1e-12)
    return sol.y[:, -1]


def nearest(points: list[CriticalPoint], x: np.ndarray) -> int:
    return int(np.argmin([np.linalg.norm(np.array(p.x) - x) for p in points]))


def basin_of(landscape: Landscape, minima: list[CriticalPoint], x0: np.ndarray) -> int:
    """Index (in ``minima``) of the minimum whose gradient-flow basin contains ``x0``."""
    if landscape.dim == 1:
        # in 1-D the flow cannot cross a critical point: the basin is bounded by the maxima
        x = float(x0[0])
        xs = np.array([m.x[0] for m in minima])
        lo = xs[xs <= x].max(initial=-np.inf)
        hi = xs[xs >= x].min(initial=np.inf)
        if lo == hi:
            return int(np.flatnonzero(xs == lo)[0])
        end = flow_to_minimum(landscape, np.asarray(x0, float))
        return nearest(minima, end)
    return nearest(minima, flow_to_minimum(landscape, np.asarray(x0, float)))


def adjacency(landscape: Landscape, points: list[CriticalPoint],
              step: float = 1e-3) -> list[tuple[int, int, int]]:
    """``(i, j, s)``: minima i and j (indices into the minima list) joined through saddle s
    (index into ``points``), from the flow along the saddle's unstable eigenvector."""
    minima = [p for p in points if p.kind == "minimum"]
    pairs = []
    for s_idx, p in enumerate(points):
        if p.kind not in (("maximum",) if landscape.dim == 1 else ("saddle",)):
            continue
        x = np.array(p.x)
        w, v = np.linalg.eigh(landscape.hessian(x))
        direction = v[:, np.argmin(w)]
        ends = [nearest(minima, flow_to_minimum(landscape, x + sgn * step * direction))
                for sgn in (-1.0, 1.0)]
        if ends[0] != ends[1]:
            pairs.append((min(ends), max(ends), s_idx))
    return pairs
