"""Objectives and generated data of the sparse_iht experiments (synthetic and
zeroth-order instances).

``R(w) = (1/2n) ||Xw - y||²`` with full, mini-batch and function-value oracles, and the
AR(1)-correlated Gaussian design of the synthetic sparse-regression task. Plain NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from icml25.pipelines.sparse_iht.projections import Constraint


class NonFiniteGradientError(FloatingPointError):
    """A gradient (or an objective value) became NaN or infinite."""


class DivergenceError(NonFiniteGradientError):
    """An iterative method diverged: its objective became non-finite or grew past a bound
    (typically a step size above the stable range ``η < 2/L``)."""


@dataclass
class LeastSquares:
    """``R(w) = (1/2n) ||Xw - y||²``; ``L = λ_max(XᵀX/n)`` is a global smoothness bound."""

    X: np.ndarray
    y: np.ndarray
    L: float = field(init=False)

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=float)
        y = np.asarray(self.y, dtype=float)
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X: expected a non-empty 2-d design, got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y: expected shape ({X.shape[0]},) to match X, got {y.shape}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X or y contains NaN or infinite entries")
        self.X, self.y = X, y
        # λ_max(XᵀX/n) = λ_max(XXᵀ/n): use the smaller Gram matrix
        gram = X.T @ X if X.shape[1] <= X.shape[0] else X @ X.T
        self.L = float(np.linalg.eigvalsh(gram / X.shape[0])[-1])
        if not self.L > 0:
            raise ValueError("X is all zeros: the objective has no curvature")

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    def value(self, w: np.ndarray) -> float:
        r = self.X @ w - self.y
        return float(r @ r) / (2 * self.n)

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        r = self.X @ w - self.y
        return float(r @ r) / (2 * self.n), self.X.T @ r / self.n

    def batch_grad(self, w: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``∇R_B(w) = (1/|B|) X_Bᵀ (X_B w - y_B)``, an unbiased estimate of ``∇R(w)``."""
        Xb = self.X[rows]
        return Xb.T @ (Xb @ w - self.y[rows]) / rows.size

    def batch_smoothness(self, rows: np.ndarray) -> float:
        """``λ_max(X_Bᵀ X_B / |B|)``: the smoothness of the mini-batch objective ``R_B``."""
        Xb = self.X[rows]
        return float(np.linalg.eigvalsh(Xb @ Xb.T / rows.size)[-1])

    def values_along(self, w: np.ndarray, U: np.ndarray, mu: float) -> tuple[float, np.ndarray]:
        """Function queries ``R(w)`` and ``R(w + μ u_i)`` for the columns ``u_i`` of ``U``."""
        r = self.X @ w - self.y
        shifted = r[:, None] + mu * (self.X @ U)
        return float(r @ r) / (2 * self.n), np.sum(shifted**2, axis=0) / (2 * self.n)


@dataclass(frozen=True)
class SyntheticProblem:
    """One generated sparse-regression instance: design, response, truth and its support."""

    X: np.ndarray
    y: np.ndarray
    w_true: np.ndarray
    seed: int

    @property
    def support(self) -> np.ndarray:
        return np.flatnonzero(self.w_true)


def ar1_design(n: int, d: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Gaussian rows with ``corr(x_j, x_{j+1}) = ρ`` (AR(1) columns, unit variance)."""
    if not -1 < rho < 1:
        raise ValueError(f"rho: got {rho}; expected |rho| < 1")
    Z = rng.standard_normal((n, d))
    X = np.empty((n, d))
    X[:, 0] = Z[:, 0]
    scale = np.sqrt(1 - rho**2)
    for j in range(1, d):
        X[:, j] = rho * X[:, j - 1] + scale * Z[:, j]
    return X


def make_sparse_regression(n: int, d: int, k_bar: int, rho: float, sigma: float, seed: int,
                           signed: bool = False) -> SyntheticProblem:
    """The synthetic regression: AR(1) design, ``w̄`` with k̄ non-zeros ~ U(0.5, 1.5) on a random
    support (random signs when ``signed``), ``y = Xw̄ + σε``."""
    if k_bar > d:
        raise ValueError(f"k_bar = {k_bar} is larger than the dimension d = {d}")
    rng = np.random.default_rng(seed)
    X = ar1_design(n, d, rho, rng)
    support = np.sort(rng.choice(d, size=k_bar, replace=False))
    w = np.zeros(d)
    w[support] = rng.uniform(0.5, 1.5, size=k_bar)
    if signed:
        w[support] *= rng.choice([-1.0, 1.0], size=k_bar)
    y = X @ w + sigma * rng.standard_normal(n)
    return SyntheticProblem(X=X, y=y, w_true=w, seed=seed)


def constraint_for(kind: str, scale: float, w_true: np.ndarray) -> Constraint:
    """The set ``Γ`` of a setting, sized from the truth so that ``w̄ ∈ Γ`` when ``scale >= 1``
    (budget ``B = Σw̄``, ball ``r = ||w̄||``, box ``u = max|w̄|``); ``scale < 1`` makes
    the constraint binding (the truth is then infeasible and the oracle is the reference)."""
    if kind == "nonneg":
        return Constraint("nonneg")
    if kind == "nonneg_budget":
        return Constraint("nonneg_budget", budget=scale * float(np.sum(np.maximum(w_true, 0))))
    if kind == "l2_ball":
        return Constraint("l2_ball", radius=scale * float(np.linalg.norm(w_true)))
    if kind == "l1_ball":
        return Constraint("l1_ball", radius=scale * float(np.abs(w_true).sum()))
    if kind == "box":
        u = scale * float(np.abs(w_true).max())
        return Constraint("box", lower=-u, upper=u)
    if kind == "nonneg_l2_ball":
        return Constraint("nonneg_l2_ball", radius=scale * float(np.linalg.norm(w_true)))
    raise ValueError(f"unknown constraint kind {kind!r}")


def support_recall_precision(w: np.ndarray, support: np.ndarray) -> tuple[float, float]:
    """Recall ``|supp(w) ∩ S|/|S|`` and precision ``|supp(w) ∩ S|/|supp(w)|`` (0 if w = 0)."""
    found = set(np.flatnonzero(w).tolist())
    true = set(np.asarray(support).tolist())
    hit = len(found & true)
    recall = hit / len(true) if true else 1.0
    precision = hit / len(found) if found else 0.0
    return recall, precision
