"""The real data: the logistic objective, its constrained refit and both real-data experiments."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from icml25.pipelines.sparse_iht.projections import Constraint
from icml25.pipelines.sparse_iht.real_data import (
    Logistic,
    breast_cancer_experiment,
    diabetes_experiment,
    logistic_refit,
)


def _logistic(seed=0, n=40, d=6) -> Logistic:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return Logistic(X, y)


def test_logistic_gradient_matches_finite_differences_and_l_bounds_the_curvature():
    problem = _logistic()
    w = np.random.default_rng(1).normal(size=problem.d)
    value, grad = problem.value_and_grad(w)
    assert value == pytest.approx(problem.value(w))
    eps = 1e-6
    numeric = np.array([(problem.value(w + eps * e) - problem.value(w - eps * e)) / (2 * eps)
                        for e in np.eye(problem.d)])
    np.testing.assert_allclose(grad, numeric, atol=1e-8)
    s = 1 / (1 + np.exp(-problem.y * (problem.X @ w)))
    hessian = problem.X.T @ (problem.X * (s * (1 - s))[:, None]) / problem.n
    assert np.linalg.eigvalsh(hessian)[-1] <= problem.L + 1e-12


def test_logistic_refit_matches_an_independent_solve():
    problem = _logistic(seed=2)
    gamma = Constraint("l2_ball", radius=0.7)
    support = np.array([0, 2, 5])
    w = logistic_refit(problem, support, gamma)
    assert set(np.flatnonzero(w)) <= {0, 2, 5} and gamma.violation(w) <= 1e-12
    v = cp.Variable(3)
    margins = cp.multiply(problem.y, problem.X[:, support] @ v)
    ref = cp.Problem(cp.Minimize(cp.sum(cp.logistic(-margins)) / problem.n),
                     [cp.sum_squares(v) <= gamma.radius**2])
    ref.solve(solver=cp.SCS, eps=1e-9)
    assert problem.value(w) == pytest.approx(ref.value, rel=1e-5)


def test_bad_labels_and_non_finite_data_are_refused():
    with pytest.raises(ValueError, match="labels"):
        Logistic(np.ones((3, 2)), np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="NaN"):
        Logistic(np.array([[np.nan, 1.0]]), np.array([1.0]))


def test_real_data_experiments_are_feasible_and_sparse():
    rows = breast_cancer_experiment([3], radius=1.0, iterations=40, seed=0, n_c=6)
    rows += diabetes_experiment([3], budget_fraction=1.0, iterations=40, seed=0,
                                dense_iterations=300)
    for row in rows:
        assert row["violation"] <= 1e-9
        assert row["nnz"] <= (3 if row["method"] != "dense_reference" else 10)
        assert np.isfinite(row["train_objective"]) and np.isfinite(row["test_objective"])
    bc = [r for r in rows if r["dataset"] == "breast_cancer"]
    assert {r["method"] for r in bc} == {"iht_2sp", "iht_then_project", "lasso", "lasso_refit"}
    assert all(0.5 < r["test_accuracy"] <= 1 for r in bc)


def test_real_data_runs_are_deterministic_for_a_seed():
    """liblinear shuffles coordinates: the ℓ1 path must be seeded, or the lasso rows drift."""
    first = breast_cancer_experiment([3, 5], radius=1.0, iterations=20, seed=1, n_c=8)
    second = breast_cancer_experiment([3, 5], radius=1.0, iterations=20, seed=1, n_c=8)
    assert first == second
