"""Real (bundled) data: sparse logistic regression with an ℓ2-ball constraint on
scikit-learn's breast-cancer set, and sparse non-negative-budget regression on its diabetes set.

Both load offline from scikit-learn. Features are standardised with the training split's mean
and scale only (seeded 70/30 split); the test split is never used for fitting or tuning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
from scipy.special import expit
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from icml25.pipelines.sparse_iht import algorithms as alg
from icml25.pipelines.sparse_iht.baselines import lasso_baselines, omp_project
from icml25.pipelines.sparse_iht.problems import LeastSquares
from icml25.pipelines.sparse_iht.projections import (
    Constraint,
    feasibility_violation,
    two_step_projection,
)


@dataclass
class Logistic:
    """``R(w) = (1/n) Σ log(1 + exp(-y_i x_iᵀw))`` with ``y ∈ {-1, +1}``;
    ``L = λ_max(XᵀX)/(4n)`` bounds its smoothness (the logistic loss has curvature <= 1/4)."""

    X: np.ndarray
    y: np.ndarray
    L: float = field(init=False)

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=float)
        y = np.asarray(self.y, dtype=float)
        if X.ndim != 2 or X.shape[0] == 0 or y.shape != (X.shape[0],):
            raise ValueError(f"X {X.shape} and y {y.shape} do not form a data set")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X or y contains NaN or infinite entries")
        if not np.all(np.isin(y, (-1.0, 1.0))):
            raise ValueError("y: labels must be -1 or +1")
        self.X, self.y = X, y
        self.L = float(np.linalg.eigvalsh(X.T @ X)[-1]) / (4 * X.shape[0])

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    def value(self, w: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0.0, -self.y * (self.X @ w))))

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        margin = self.y * (self.X @ w)
        grad = -self.X.T @ (self.y * expit(-margin)) / self.n
        return float(np.mean(np.logaddexp(0.0, -margin))), grad


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, scale = train.mean(axis=0), train.std(axis=0)
    scale[scale == 0] = 1.0
    return (train - mean) / scale, (test - mean) / scale


def logistic_refit(problem: Logistic, support: np.ndarray, gamma: Constraint) -> np.ndarray:
    """``argmin R`` over ``w ∈ Γ``, ``supp(w) ⊆ S`` for the logistic loss (cvxpy, CLARABEL)."""
    w_full = np.zeros(problem.d)
    support = np.asarray(support, dtype=int)
    if support.size == 0:
        return w_full
    w = cp.Variable(support.size)
    margins = cp.multiply(problem.y, problem.X[:, support] @ w)
    cons = [cp.norm(w, 2) <= gamma.radius] if gamma.kind == "l2_ball" else []
    cp.Problem(cp.Minimize(cp.sum(cp.logistic(-margins)) / problem.n), cons).solve(
        solver=cp.CLARABEL)
    if w.value is None:
        raise RuntimeError("cvxpy logistic refit failed")
    w_full[support] = w.value
    return gamma.project_restricted(w_full, support)


def _l1_logistic_supports(problem: Logistic, ks: list[int], n_c: int,
                          seed: int) -> dict[int, np.ndarray]:
    """The largest support with at most k features along an ℓ1-logistic regularisation path
    (liblinear shuffles its coordinates: seeded for determinism)."""
    coefs = []
    for c in np.geomspace(1e-3, 10.0, n_c):
        model = LogisticRegression(l1_ratio=1.0, C=c, solver="liblinear", fit_intercept=False,
                                   max_iter=1000, random_state=seed)
        model.fit(problem.X, problem.y)
        coefs.append(model.coef_.ravel())
    coefs = np.array(coefs)
    nnz = np.count_nonzero(coefs, axis=1)
    out = {}
    for k in ks:
        ok = np.flatnonzero(nnz <= k)
        out[k] = coefs[ok[np.lexsort((ok, nnz[ok]))[-1]]]
    return out


def breast_cancer_experiment(ks: list[int], radius: float, iterations: int, seed: int,
                             n_c: int = 30) -> list[dict]:
    """Sparse logistic regression in an ℓ2 ball: train log-loss, test log-loss and accuracy."""
    data = load_breast_cancer()
    y = np.where(data.target == 1, 1.0, -1.0)
    Xtr, Xte, ytr, yte = train_test_split(data.data, y, test_size=0.3, random_state=seed,
                                          stratify=y)
    Xtr, Xte = _standardise(Xtr, Xte)
    train, test = Logistic(Xtr, ytr), Logistic(Xte, yte)
    gamma = Constraint("l2_ball", radius=radius)
    l1 = _l1_logistic_supports(train, ks, n_c, seed)
    rows = []
    for k in ks:
        points = {
            "iht_2sp": alg.iht_2sp(train, k, gamma, iterations).w,
            "iht_then_project": alg.iht_then_project(train, k, gamma, iterations).w,
            "lasso": two_step_projection(l1[k], k, gamma),
            "lasso_refit": logistic_refit(train, np.flatnonzero(l1[k]), gamma),
        }
        for method, w in points.items():
            rows.append({"dataset": "breast_cancer", "seed": seed, "k": k, "method": method,
                         "train_objective": train.value(w), "test_objective": test.value(w),
                         # ties (x·w = 0, e.g. w = 0) predict the positive class
                         "test_accuracy": float(np.mean(np.where(Xte @ w >= 0, 1.0, -1.0)
                                                        == yte)),
                         "nnz": int(np.count_nonzero(w)),
                         "violation": feasibility_violation(w, k, gamma)})
    return rows


def diabetes_experiment(ks: list[int], budget_fraction: float, iterations: int, seed: int,
                        dense_iterations: int = 3000) -> list[dict]:
    """Sparse regression with ``w >= 0, Σw <= B``; ``B`` is a fraction of the dense
    non-negative least-squares solution's sum on the training split (binding when < 1)."""
    data = load_diabetes()
    Xtr, Xte, ytr, yte = train_test_split(data.data, data.target, test_size=0.3,
                                          random_state=seed)
    Xtr, Xte = _standardise(Xtr, Xte)
    centre = ytr.mean()
    train = LeastSquares(Xtr, ytr - centre)
    test = LeastSquares(Xte, yte - centre)
    dense_nn = alg.dense_reference(train, Constraint("nonneg"), dense_iterations).w
    gamma = Constraint("nonneg_budget", budget=budget_fraction * float(dense_nn.sum()))
    dense = alg.dense_reference(train, gamma, dense_iterations).w
    lasso = lasso_baselines(train, gamma, ks, n_alphas=100)
    rows = []
    for k in ks:
        points = {
            "iht_2sp": alg.iht_2sp(train, k, gamma, iterations).w,
            "iht_then_project": alg.iht_then_project(train, k, gamma, iterations).w,
            "exact_iht": alg.exact_projection_iht(train, k, gamma, iterations).w,
            "iht_2sp_warm": alg.iht_2sp(train, k, gamma, iterations, w0=dense).w,
            "lasso": lasso[k][0], "lasso_refit": lasso[k][1],
            "omp_project": omp_project(train, k, gamma), "dense_reference": dense,
        }
        for method, w in points.items():
            rows.append({"dataset": "diabetes", "seed": seed, "k": k, "method": method,
                         "train_objective": train.value(w), "test_objective": test.value(w),
                         "test_accuracy": np.nan, "nnz": int(np.count_nonzero(w)),
                         "violation": feasibility_violation(
                             w, k if method != "dense_reference" else train.d, gamma)})
    return rows
