"""Convex-relaxation, greedy and exhaustive baselines (lasso, lasso + refit, OMP, and the exhaustive
best k̄-sparse feasible point of small instances).

- lasso: scikit-learn's ``lasso_path`` (``positive=True`` when Γ lies in the non-negative
  orthant), keeping the largest support with at most k non-zeros, made feasible by ``Π_Γ``;
- lasso_refit: the same support refitted with Γ by cvxpy (CLARABEL): the strong version;
- omp_project: ``OrthogonalMatchingPursuit(n_nonzero_coefs=k)`` followed by ``Π̄_k^Γ``;
- best_sparse_feasible: ``min R`` over ``B0(k̄) ∩ Γ`` by enumerating all supports of size k̄.
"""

from __future__ import annotations

import itertools
import math
import warnings

import cvxpy as cp
import numpy as np
from scipy.optimize import nnls
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import OrthogonalMatchingPursuit, lasso_path

from icml25.pipelines.sparse_iht.problems import LeastSquares
from icml25.pipelines.sparse_iht.projections import Constraint, two_step_projection

NONNEG_KINDS = frozenset({"nonneg", "nonneg_budget", "nonneg_l2_ball", "simplex"})


def cvxpy_constraints(w: cp.Variable, gamma: Constraint) -> list:
    """The constraints ``w ∈ Γ`` in cvxpy form."""
    kind = gamma.kind
    if kind == "none":
        return []
    if kind == "l2_ball":
        return [cp.norm(w, 2) <= gamma.radius]
    if kind == "l1_ball":
        return [cp.norm(w, 1) <= gamma.radius]
    if kind == "box":
        return [w >= gamma.lower, w <= gamma.upper]
    if kind == "nonneg":
        return [w >= 0]
    if kind == "nonneg_budget":
        return [w >= 0, cp.sum(w) <= gamma.budget]
    if kind == "nonneg_l2_ball":
        return [w >= 0, cp.norm(w, 2) <= gamma.radius]
    if kind == "simplex":
        return [w >= 0, cp.sum(w) == gamma.budget]
    raise ValueError(f"unknown constraint kind {kind!r}")


def constrained_refit(problem: LeastSquares, support: np.ndarray, gamma: Constraint) -> np.ndarray:
    """``argmin R(w)`` s.t. ``w ∈ Γ``, ``supp(w) ⊆ S`` (cvxpy, CLARABEL)."""
    support = np.asarray(support, dtype=int)
    w_full = np.zeros(problem.d)
    if support.size == 0:
        return w_full
    w = cp.Variable(support.size)
    Xs = problem.X[:, support]
    objective = cp.Minimize(cp.sum_squares(Xs @ w - problem.y) / (2 * problem.n))
    cp.Problem(objective, cvxpy_constraints(w, gamma)).solve(solver=cp.CLARABEL)
    if w.value is None:
        raise RuntimeError(f"cvxpy refit failed on a support of size {support.size}")
    w_full[support] = np.asarray(w.value)
    # a clean feasible point: the solver's tolerance can leave tiny violations
    return gamma.project_restricted(w_full, support)


def lasso_supports(problem: LeastSquares, gamma: Constraint, ks: list[int],
                   n_alphas: int = 300) -> dict[int, np.ndarray]:
    """Lasso path coefficients with the largest support of at most ``k`` non-zeros, per ``k``."""
    positive = gamma.kind in NONNEG_KINDS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, coefs, _ = lasso_path(problem.X, problem.y, alphas=n_alphas, positive=positive)
    nnz = np.count_nonzero(coefs, axis=0)
    out = {}
    for k in ks:
        ok = np.flatnonzero(nnz <= k)
        # the largest support within budget; among equal sizes the weakest regularisation
        best = ok[np.lexsort((ok, nnz[ok]))[-1]]
        out[k] = coefs[:, best].copy()
    return out


def lasso_baselines(problem: LeastSquares, gamma: Constraint, ks: list[int],
                    n_alphas: int = 300) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per k: ``(lasso made feasible by Π̄_k^Γ, constrained refit on the lasso support)``."""
    out = {}
    for k, coef in lasso_supports(problem, gamma, ks, n_alphas).items():
        raw = two_step_projection(coef, k, gamma)
        refit = constrained_refit(problem, np.flatnonzero(coef), gamma)
        out[k] = (raw, refit)
    return out


def omp_project(problem: LeastSquares, k: int, gamma: Constraint) -> np.ndarray:
    """Baseline 4: OMP with ``n_nonzero_coefs = k``, then ``Π̄_k^Γ``."""
    omp = OrthogonalMatchingPursuit(n_nonzero_coefs=k, fit_intercept=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        omp.fit(problem.X, problem.y)
    return two_step_projection(omp.coef_, k, gamma)


def _ball_constrained_ls(G: np.ndarray, c: np.ndarray, radius: float) -> np.ndarray:
    """Batched ``argmin ½wᵀGw - cᵀw`` s.t. ``||w|| <= r`` (trust-region subproblem, G ≻ 0).

    ``w(λ) = (G + λI)⁻¹ c``; if ``||w(0)|| > r`` bisect on λ so that ``||w(λ)|| = r``
    (the norm is decreasing in λ). ``G``: (m, s, s), ``c``: (m, s).
    """
    evals, evecs = np.linalg.eigh(G)
    ct = np.einsum("mji,mj->mi", evecs, c)  # c in the eigenbasis

    def norms(lam: np.ndarray) -> np.ndarray:
        return np.sqrt(np.sum((ct / (evals + lam[:, None])) ** 2, axis=1))

    m = G.shape[0]
    lam = np.zeros(m)
    outside = norms(lam) > radius
    if np.any(outside):
        lo = np.zeros(m)
        hi = np.maximum(np.linalg.norm(ct, axis=1) / max(radius, 1e-300), 1.0)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            big = norms(mid) > radius
            lo = np.where(big, mid, lo)
            hi = np.where(big, hi, mid)
        lam = np.where(outside, hi, 0.0)
    wt = ct / (evals + lam[:, None])
    return np.einsum("mij,mj->mi", evecs, wt)


def best_sparse_feasible(problem: LeastSquares, k_bar: int, gamma: Constraint,
                         max_supports: int = 200_000) -> tuple[np.ndarray, float]:
    """Exhaustive search: the best point of ``B0(k̄) ∩ Γ`` and its objective.

    Each support's problem is convex; it is solved exactly by NNLS (non-negative orthant), by
    the trust-region secular equation (ℓ2 ball), by least squares (no constraint) or by cvxpy
    (other sets). Only for small instances: at most ``max_supports`` supports.
    """
    d = problem.d
    count = math.comb(d, k_bar)
    if count > max_supports:
        raise ValueError(f"exhaustive search over C({d}, {k_bar}) = {count} supports exceeds "
                         f"max_supports = {max_supports}; use a smaller instance")
    supports = np.array(list(itertools.combinations(range(d), k_bar)))
    X, y, n = problem.X, problem.y, problem.n
    if gamma.kind == "nonneg":
        values = np.empty(len(supports))
        coefs = np.empty((len(supports), k_bar))
        for i, s in enumerate(supports):
            coefs[i], res = nnls(X[:, s], y)
            values[i] = res**2 / (2 * n)
    elif gamma.kind in ("l2_ball", "none"):
        Xs = X[:, supports]  # (n, m, s)
        G = np.einsum("nmi,nmj->mij", Xs, Xs) / n
        c = np.einsum("nmi,n->mi", Xs, y) / n
        radius = gamma.radius if gamma.kind == "l2_ball" else math.inf
        coefs = _ball_constrained_ls(G, c, radius)
        resid = np.einsum("nmi,mi->mn", Xs, coefs) - y
        values = np.sum(resid**2, axis=1) / (2 * n)
    else:
        values = np.empty(len(supports))
        coefs = np.empty((len(supports), k_bar))
        for i, s in enumerate(supports):
            w = constrained_refit(problem, s, gamma)
            coefs[i], values[i] = w[s], problem.value(w)
    best = int(np.argmin(values))
    w = np.zeros(d)
    w[supports[best]] = coefs[best]
    return w, float(problem.value(w))


def best_on_support(problem: LeastSquares, support: np.ndarray, gamma: Constraint) -> float:
    """``min R(w)`` over ``w ∈ Γ`` with ``supp(w) ⊆ S``: NNLS for the orthant, least squares
    without a constraint, cvxpy otherwise. Used to split an iterate's excess objective into
    support choice and optimisation error on its own support."""
    support = np.asarray(support, dtype=int)
    if support.size == 0:
        return problem.value(np.zeros(problem.d))
    if gamma.kind == "nonneg":
        _, res = nnls(problem.X[:, support], problem.y)
        return float(res**2) / (2 * problem.n)
    if gamma.kind == "none":
        coef, *_ = np.linalg.lstsq(problem.X[:, support], problem.y, rcond=None)
        w = np.zeros(problem.d)
        w[support] = coef
        return problem.value(w)
    return problem.value(constrained_refit(problem, support, gamma))
