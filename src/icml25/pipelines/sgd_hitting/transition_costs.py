"""Large-deviation transition costs Ṽ(i, j) between adjacent minima.

1-D: with the Hamiltonian ``ℋ(x, p) = H(x, -p) - p f'(x)``, the uphill
quasi-potential from a minimum m to the adjacent maximum s is ``V(m→s) = ∫_m^s p̂(x) dx``, where
p̂(x) is the non-zero root of ``H(x, -p) = p f'(x)`` (sign of f'). If no root exists (bounded
noise cannot push against |f'|), the cost is +∞. Downhill costs 0, so ``Ṽ(i, j) = V(i → s_ij)``.

2-D, Gaussian noise of constant covariance Σ: the geometric minimum action
method (gMAM, Heymann & Vanden-Eijnden 2008) minimises the discretised geometric action
``S(φ) = Σ_k |Δφ_k|_A |b(φ̄_k)|_A - <Δφ_k, b(φ̄_k)>_A`` with ``A = Σ⁻¹``, ``b = -∇f``, over the
interior nodes of a path between two minima (torch LBFGS with strong Wolfe line search), with
reparametrisation to equal arc length after each outer round.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from scipy import optimize

from icml25.pipelines.sgd_hitting.landscapes import Landscape
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw


# -------------------------------------------------------------------------------- 1-D HJ
def momentum_root(h_minus: Callable[[float], float], slope: float, variance: float,
                  p_max: float = 1e6) -> float:
    """Non-zero root p̂ of ``h_minus(p) = p · slope`` with the sign of ``slope``.

    ``h_minus(p) = H(x, -p)`` is convex with ``h_minus(0) = 0`` and ``h_minus'(0) = 0`` (Z is
    centred), so ``φ(p) = h_minus(p) - p·slope`` is negative just beyond 0 in the direction of
    ``slope`` and the root, if any, is where φ turns positive. Returns ``inf`` if φ stays
    non-positive up to ``|p| = p_max`` (no root: the cost is infinite).
    """
    if slope == 0.0:
        return 0.0
    sgn = 1.0 if slope > 0 else -1.0

    def phi(q: float) -> float:  # q = |p| > 0
        return h_minus(sgn * q) - sgn * q * slope

    guess = 2.0 * abs(slope) / variance if variance > 0 else 1.0
    lo = 1e-6 * guess
    while phi(lo) >= 0 and lo > 1e-300:  # the Gaussian guess overshoots only for odd laws
        lo *= 1e-3
    hi = 2.0 * guess
    while True:
        val = phi(hi)
        if math.isinf(val) or val > 0:
            break
        lo, hi = hi, 2.0 * hi
        if hi > p_max:
            return math.inf
    if math.isinf(phi(hi)):  # the mgf ends before φ turns positive: close in on the edge
        a, b = lo, hi
        for _ in range(200):
            mid = 0.5 * (a + b)
            v = phi(mid)
            if math.isinf(v):
                b = mid
            elif v > 0:
                hi = mid
                break
            else:
                a = lo = mid
        else:
            return math.inf
    return sgn * optimize.brentq(phi, lo, hi, xtol=1e-15, rtol=1e-13)


def quasi_potential_1d(landscape: Landscape, noise: NoiseLaw, x_from: float, x_to: float,
                       n_nodes: int = 64, gaussian_approx: bool = False) -> float:
    """``V(x_from → x_to) = ∫ p̂(x) dx`` along an uphill interval (Gauss–Legendre nodes).

    ``gaussian_approx``: replace H by the Gaussian law with the same (state-dependent)
    variance, ``H = Var Z(x) p²/2`` (baseline B1).
    """
    noise.require_finite_mgf(f"cost on {landscape.name}")
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    xs = 0.5 * (x_to - x_from) * nodes + 0.5 * (x_to + x_from)
    total = 0.0
    for x, w in zip(xs, weights, strict=True):
        slope = landscape.gradient(np.array([x]))[0]
        var = noise.variance(x, landscape)
        if gaussian_approx:
            p = 2.0 * slope / var if var > 0 else math.copysign(math.inf, slope)
        else:
            h_at = noise.log_mgf_at(x, landscape)
            p = momentum_root(lambda q, h_at=h_at: h_at(-q), slope, var)
        if math.isinf(p):
            return math.inf
        total += w * p
    return float(0.5 * (x_to - x_from) * total)


# -------------------------------------------------------------------------------- 2-D gMAM
def _torch_grad(landscape: Landscape, pts: torch.Tensor) -> torch.Tensor:
    g = landscape.grad(tuple(pts[:, k] for k in range(pts.shape[1])), torch)
    return torch.stack(list(g), dim=1)


def geometric_action(path: torch.Tensor, landscape: Landscape, a_matrix: torch.Tensor) -> \
        torch.Tensor:
    """Discrete geometric action of a path (nodes × d) for drift ``b = -∇f`` and metric A."""
    d = path[1:] - path[:-1]
    mid = 0.5 * (path[1:] + path[:-1])
    b = -_torch_grad(landscape, mid)
    d_a = torch.sqrt(torch.einsum("ki,ij,kj->k", d, a_matrix, d) + 1e-300)
    b_a = torch.sqrt(torch.einsum("ki,ij,kj->k", b, a_matrix, b) + 1e-300)
    return (d_a * b_a - torch.einsum("ki,ij,kj->k", d, a_matrix, b)).sum()


def _equal_arclength(path: np.ndarray) -> np.ndarray:
    seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    s /= s[-1]
    target = np.linspace(0.0, 1.0, len(path))
    return np.stack([np.interp(target, s, path[:, k]) for k in range(path.shape[1])], 1)


def gmam(landscape: Landscape, start: np.ndarray, end: np.ndarray, covariance: np.ndarray,
         n_nodes: int = 150, rounds: int = 20, via: np.ndarray | None = None,
         lbfgs_iter: int = 60) -> tuple[float, np.ndarray]:
    """Minimum geometric action from ``start`` to ``end`` and the minimising path.

    The initial path is the polyline through ``via`` (e.g. the saddle between the minima).
    Costs are in units of the large-deviation speed 1/η: the mean exit time grows like
    ``exp(cost/η)``. Returns (cost, path of shape (n_nodes, d)).
    """
    a_matrix = torch.as_tensor(np.linalg.inv(np.asarray(covariance, float)), dtype=torch.float64)
    knots = [np.asarray(start, float)] + ([np.asarray(via, float)] if via is not None else []) \
        + [np.asarray(end, float)]
    path = _equal_arclength(np.concatenate(
        [np.linspace(knots[k], knots[k + 1], n_nodes)[:-1] for k in range(len(knots) - 1)]
        + [knots[-1][None]]))
    path = _equal_arclength(path[np.linspace(0, len(path) - 1, n_nodes).round().astype(int)])
    first = torch.as_tensor(path[:1], dtype=torch.float64)
    last = torch.as_tensor(path[-1:], dtype=torch.float64)
    cost = math.inf
    for _ in range(rounds):
        inner = torch.tensor(path[1:-1], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([inner], lr=1.0, max_iter=lbfgs_iter,
                                line_search_fn="strong_wolfe", tolerance_grad=1e-12,
                                tolerance_change=1e-15, history_size=20)

        def closure(opt=opt, inner=inner) -> torch.Tensor:
            opt.zero_grad()
            value = geometric_action(torch.cat([first, inner, last]), landscape, a_matrix)
            value.backward()
            return value

        opt.step(closure)
        path = _equal_arclength(torch.cat([first, inner, last]).detach().numpy())
        new = float(geometric_action(torch.as_tensor(path), landscape, a_matrix))
        if abs(cost - new) < 1e-9 * max(1.0, abs(new)):
            cost = new
            break
        cost = new
    return cost, path
