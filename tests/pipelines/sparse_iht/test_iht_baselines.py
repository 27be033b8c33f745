"""Baselines and references: exhaustive best k̄-sparse point, constrained refit, lasso, OMP."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest

from icml25.pipelines.sparse_iht import algorithms as alg
from icml25.pipelines.sparse_iht.baselines import (
    best_on_support,
    best_sparse_feasible,
    constrained_refit,
    lasso_baselines,
    omp_project,
)
from icml25.pipelines.sparse_iht.problems import (
    LeastSquares,
    constraint_for,
    make_sparse_regression,
    support_recall_precision,
)
from icml25.pipelines.sparse_iht.projections import feasibility_violation


def _cvxpy_best(problem: LeastSquares, k_bar: int, gamma) -> float:
    """Independent exhaustive search: one cvxpy solve per support."""
    best = np.inf
    for support in itertools.combinations(range(problem.d), k_bar):
        best = min(best, problem.value(constrained_refit(problem, np.array(support), gamma)))
    return best


@pytest.mark.parametrize("kind,scale,signed", [("nonneg", 1.0, False), ("l2_ball", 0.8, True),
                                               ("box", 0.8, True)])
def test_exhaustive_best_sparse_point_matches_cvxpy_per_support(kind, scale, signed):
    truth = make_sparse_regression(25, 8, 2, 0.5, 0.3, seed=1, signed=signed)
    problem = LeastSquares(truth.X, truth.y)
    gamma = constraint_for(kind, scale, truth.w_true)
    w, value = best_sparse_feasible(problem, 2, gamma)
    assert feasibility_violation(w, 2, gamma) <= 1e-9
    assert value == pytest.approx(_cvxpy_best(problem, 2, gamma), rel=1e-6, abs=1e-10)


def test_exhaustive_search_refuses_large_instances():
    truth = make_sparse_regression(30, 60, 5, 0.5, 0.3, seed=0)
    problem = LeastSquares(truth.X, truth.y)
    with pytest.raises(ValueError, match="exceeds max_supports"):
        best_sparse_feasible(problem, 5, constraint_for("nonneg", 1.0, truth.w_true),
                             max_supports=1000)


def test_iht_2sp_with_relaxation_is_no_worse_than_the_best_k_bar_sparse_point_here():
    """On a well-conditioned small instance, k = 2k̄ reaches at most the exhaustive optimum."""
    truth = make_sparse_regression(60, 16, 3, 0.0, 0.2, seed=2)
    problem = LeastSquares(truth.X, truth.y)
    gamma = constraint_for("nonneg", 1.0, truth.w_true)
    _, best = best_sparse_feasible(problem, 3, gamma)
    assert alg.iht_2sp(problem, 6, gamma, 500).final <= best * (1 + 1e-9)


def test_refit_is_optimal_on_its_support_and_feasible():
    truth = make_sparse_regression(50, 20, 3, 0.5, 0.3, seed=3, signed=True)
    problem = LeastSquares(truth.X, truth.y)
    gamma = constraint_for("l2_ball", 0.8, truth.w_true)
    support = np.array([1, 4, 7, 9])
    w = constrained_refit(problem, support, gamma)
    assert set(np.flatnonzero(w)) <= set(support.tolist())
    assert gamma.violation(w) <= 1e-12
    # against an independent solve with another solver
    v = cp.Variable(support.size)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(problem.X[:, support] @ v - problem.y)
                                  / (2 * problem.n)), [cp.norm(v, 2) <= gamma.radius])
    prob.solve(solver=cp.SCS, eps=1e-9)
    assert problem.value(w) == pytest.approx(prob.value, rel=1e-5)
    nonneg = constraint_for("nonneg", 1.0, np.abs(truth.w_true))
    assert best_on_support(problem, support, nonneg) == pytest.approx(
        problem.value(constrained_refit(problem, support, nonneg)), rel=1e-6)


def test_lasso_and_omp_baselines_are_feasible_and_respect_k():
    truth = make_sparse_regression(60, 40, 4, 0.5, 0.3, seed=4)
    problem = LeastSquares(truth.X, truth.y)
    gamma = constraint_for("nonneg_budget", 1.0, truth.w_true)
    out = lasso_baselines(problem, gamma, [4, 8], n_alphas=50)
    for k, (raw, refit) in out.items():
        for w in (raw, refit):
            assert feasibility_violation(w, k, gamma) <= 1e-12
        # the refit is at least as good as the raw lasso point on the same support
        assert problem.value(refit) <= problem.value(raw) + 1e-9
    w = omp_project(problem, 6, gamma)
    assert feasibility_violation(w, 6, gamma) <= 1e-12


def test_support_recall_and_precision():
    w = np.array([0.0, 1.0, 2.0, 0.0, 3.0])
    assert support_recall_precision(w, np.array([1, 3])) == (0.5, pytest.approx(1 / 3))
    assert support_recall_precision(np.zeros(5), np.array([1])) == (0.0, 0.0)
