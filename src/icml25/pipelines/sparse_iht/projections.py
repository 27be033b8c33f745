"""Hard thresholding, support-preserving convex sets and the two-step projection (2SP).

de Vazelhes, Yuan, Gu, "Optimization over Sparse Support-Preserving Sets: Two-Step Projection
with Global Optimality Guarantees" (ICML 2025), Section 2: the mixed constraint
``B0(k) ∩ Γ`` with ``Γ`` support-preserving (Definition 2.3: for every sparse ``v``,
``supp(Π_Γ(v)) ⊆ supp(v)``) and the two-step projection ``Π̄_k^Γ(v) = Π_Γ(H_k(v))``.

Everything here is plain NumPy and usable without Kedro.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

ConstraintKind = Literal[
    "none", "l2_ball", "l1_ball", "box", "nonneg", "nonneg_budget", "nonneg_l2_ball", "simplex",
]

#: Kinds whose Euclidean projection never creates new non-zeros (the paper's Definition 2.3).
SUPPORT_PRESERVING = frozenset(
    {"none", "l2_ball", "l1_ball", "box", "nonneg", "nonneg_budget", "nonneg_l2_ball"})


class InfeasibleConstraintError(ValueError):
    """The constraint set is empty, or does not contain 0 as support preservation requires."""


def _check_vector(v: np.ndarray, name: str = "v") -> np.ndarray:
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-d vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    return v


def check_sparsity(k: int, d: int) -> int:
    """``k`` as an int if ``1 <= k <= d``; otherwise a clear error (k larger than the dimension)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"sparsity k: got {k!r}; expected a positive integer")
    if k > d:
        raise ValueError(f"sparsity k = {k} is larger than the dimension d = {d}")
    return int(k)


def top_k_indices(v: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``|v_i|``, ties broken by the lower index, sorted ascending.

    ``np.argpartition(-|v|, k-1)[:k]`` finds a candidate set; entries tied with the k-th magnitude
    are then resolved by index so the result never depends on argpartition's internal order.
    """
    v = np.asarray(v, dtype=float)
    k = check_sparsity(k, v.size)
    mag = np.abs(v)
    if k == v.size:
        return np.arange(v.size)
    cand = np.argpartition(-mag, k - 1)[:k]
    kth = mag[cand].min()
    if np.count_nonzero(mag >= kth) == k:  # no tie at the threshold: the common case
        return np.sort(cand)
    strict = np.flatnonzero(mag > kth)
    tied = np.flatnonzero(mag == kth)  # ascending index: the lower index wins a tie
    return np.sort(np.concatenate([strict, tied[: k - strict.size]]))


def hard_threshold(v: np.ndarray, k: int) -> np.ndarray:
    """``H_k(v)``: keep the k entries of largest magnitude (lower index wins ties), zero the rest."""
    v = np.asarray(v, dtype=float)
    out = np.zeros_like(v)
    idx = top_k_indices(v, k)
    out[idx] = v[idx]
    return out


def project_l1_ball(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto ``{w : ||w||_1 <= radius}`` (Duchi et al. 2008, Fig. 1)."""
    v = np.asarray(v, dtype=float)
    a = np.abs(v)
    if a.sum() <= radius:
        return v.copy()
    if radius == 0:
        return np.zeros_like(v)
    u = np.sort(a)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, u.size + 1)
    rho = np.flatnonzero(u - (css - radius) / j > 0)[-1]
    theta = (css[rho] - radius) / (rho + 1)
    return np.sign(v) * np.maximum(a - theta, 0.0)


def project_simplex(v: np.ndarray, total: float = 1.0) -> np.ndarray:
    """Euclidean projection onto ``{w >= 0, sum w = total}`` (sort-based, Duchi et al. 2008)."""
    v = np.asarray(v, dtype=float)
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, u.size + 1)
    rho = np.flatnonzero(u - (css - total) / j > 0)[-1]
    theta = (css[rho] - total) / (rho + 1)
    return np.maximum(v - theta, 0.0)


@dataclass(frozen=True)
class Constraint:
    """A convex set ``Γ`` with its closed-form Euclidean projection.

    kinds (parameters used):
      - ``none``: ``R^d``;
      - ``l2_ball`` (radius): ``||w||_2 <= r``;      ``l1_ball`` (radius): ``||w||_1 <= τ``;
      - ``box`` (lower, upper): ``l <= w_i <= u`` with ``l <= 0 <= u``;
      - ``nonneg``: ``w >= 0``;                    ``nonneg_budget`` (budget): ``w >= 0, Σw <= B``;
      - ``nonneg_l2_ball`` (radius): ``w >= 0, ||w||_2 <= r``;
      - ``simplex`` (budget): ``w >= 0, Σw = B``; *not* support-preserving (its projection fills
        zeros when the positive mass is below B), so the two-step projection uses the restricted
        projection onto ``Γ ∩ {supp ⊆ S}`` for it.
    """

    kind: ConstraintKind
    radius: float = math.inf
    lower: float = -math.inf
    upper: float = math.inf
    budget: float = math.inf

    def __post_init__(self) -> None:
        bad = InfeasibleConstraintError
        if self.kind in ("l2_ball", "l1_ball", "nonneg_l2_ball") and (
                not self.radius >= 0 or math.isnan(self.radius)):
            raise bad(f"{self.kind}: radius {self.radius} < 0 makes the set empty")
        if self.kind == "box":
            if math.isnan(self.lower) or math.isnan(self.upper) or self.lower > self.upper:
                raise bad(f"box: lower {self.lower} > upper {self.upper} makes the set empty")
            if not self.lower <= 0 <= self.upper:
                raise bad(f"box [{self.lower}, {self.upper}] must contain 0 (l <= 0 <= u) to be "
                          "support-preserving")
        if self.kind in ("nonneg_budget", "simplex") and (
                not self.budget >= 0 or math.isnan(self.budget)):
            raise bad(f"{self.kind}: budget {self.budget} < 0 makes the set empty")
        if self.kind == "simplex" and (self.budget == 0 or math.isinf(self.budget)):
            raise bad("simplex: the budget (the sum) must be finite and positive")

    @property
    def support_preserving(self) -> bool:
        return self.kind in SUPPORT_PRESERVING

    def project(self, v: np.ndarray) -> np.ndarray:
        """``Π_Γ(v)``, the Euclidean projection onto the set (closed forms, Section 2)."""
        v = np.asarray(v, dtype=float)
        kind = self.kind
        if kind == "none":
            return v.copy()
        if kind == "l2_ball":
            norm = np.linalg.norm(v)
            return v * min(1.0, self.radius / norm) if norm > 0 else v.copy()
        if kind == "l1_ball":
            return project_l1_ball(v, self.radius)
        if kind == "box":
            return np.clip(v, self.lower, self.upper)
        if kind == "nonneg":
            return np.maximum(v, 0.0)
        if kind == "nonneg_budget":
            p = np.maximum(v, 0.0)
            return p if p.sum() <= self.budget else project_l1_ball(p, self.budget)
        if kind == "nonneg_l2_ball":
            p = np.maximum(v, 0.0)
            norm = np.linalg.norm(p)
            return p * min(1.0, self.radius / norm) if norm > 0 else p
        if kind == "simplex":
            return project_simplex(v, self.budget)
        raise ValueError(f"unknown constraint kind {kind!r}")

    def project_restricted(self, v: np.ndarray, support: np.ndarray) -> np.ndarray:
        """Projection onto ``Γ ∩ {w : supp(w) ⊆ S}``: ``Π_Γ`` of ``v_S`` computed in ``R^S``.

        For a support-preserving set this equals ``Π_Γ(v ⊙ 1_S)``; for the simplex it is the
        restricted projection the two-step operator needs (Kyrillidis et al. 2013).
        """
        v = np.asarray(v, dtype=float)
        out = np.zeros_like(v)
        support = np.asarray(support, dtype=int)
        out[support] = self.project(v[support])
        return out

    def violation(self, w: np.ndarray) -> float:
        """Distance-like violation of ``w ∈ Γ`` (0 when feasible)."""
        w = np.asarray(w, dtype=float)
        kind = self.kind
        if kind == "none":
            return 0.0
        if kind == "l2_ball":
            return max(float(np.linalg.norm(w)) - self.radius, 0.0)
        if kind == "l1_ball":
            return max(float(np.abs(w).sum()) - self.radius, 0.0)
        if kind == "box":
            return float(max(np.max(w - self.upper), np.max(self.lower - w), 0.0))
        neg = max(float(-w.min()), 0.0)
        if kind == "nonneg":
            return neg
        if kind == "nonneg_budget":
            return max(neg, float(w.sum()) - self.budget, 0.0)
        if kind == "nonneg_l2_ball":
            return max(neg, float(np.linalg.norm(w)) - self.radius, 0.0)
        if kind == "simplex":
            return max(neg, abs(float(w.sum()) - self.budget))
        raise ValueError(f"unknown constraint kind {kind!r}")


def two_step_projection(v: np.ndarray, k: int, gamma: Constraint) -> np.ndarray:
    """``Π̄_k^Γ(v) = Π_Γ(H_k(v))`` (the paper's 2SP operator).

    For a support-preserving ``Γ`` the result is k-sparse and in ``Γ``. For the simplex the second
    step is the restricted projection onto ``Γ ∩ {supp ⊆ supp(H_k(v))}``.
    """
    v = _check_vector(v)
    support = top_k_indices(v, k)
    return gamma.project_restricted(v, support)


def exact_sparse_projection(v: np.ndarray, k: int, gamma: Constraint) -> np.ndarray:
    """The exact Euclidean projection onto ``B0(k) ∩ Γ`` where a closed form is known.

    - ``none``, ``l2_ball``, ``l1_ball`` and the symmetric box: equal to 2SP (top-k by magnitude
      is optimal because these sets are sign- and permutation-symmetric and their restricted
      projections shrink monotonically in |v_i|);
    - ``nonneg``: ``H_k(max(v, 0))``; ``nonneg_budget`` / ``nonneg_l2_ball`` / ``simplex``: the k
      largest *values* (not magnitudes), then the projection on that support (Kyrillidis et al.
      2013, greedy selection).
    The tests check each case against :func:`brute_force_sparse_projection`.
    """
    v = _check_vector(v)
    k = check_sparsity(k, v.size)
    kind = gamma.kind
    symmetric_box = kind == "box" and gamma.lower == -gamma.upper
    if kind in ("none", "l2_ball", "l1_ball") or symmetric_box:
        return two_step_projection(v, k, gamma)
    if kind in ("nonneg", "nonneg_budget", "nonneg_l2_ball", "simplex"):
        # the k largest values; ties by the lower index
        order = np.lexsort((np.arange(v.size), -v))
        support = np.sort(order[:k])
        return gamma.project_restricted(v, support)
    raise NotImplementedError(f"no closed-form exact sparse projection for {kind!r}")


def brute_force_sparse_projection(v: np.ndarray, k: int, gamma: Constraint) -> np.ndarray:
    """Exact projection onto ``B0(k) ∩ Γ`` by enumerating every support of size k (tiny d only).

    For each support S the projection onto ``Γ ∩ {supp ⊆ S}`` is ``project_restricted``; the
    best S minimises the distance to ``v``. Supports of size < k are subsets of size-k ones.
    """
    v = _check_vector(v)
    k = check_sparsity(k, v.size)
    best, best_dist = None, math.inf
    for support in itertools.combinations(range(v.size), k):
        w = gamma.project_restricted(v, np.array(support))
        dist = float(np.sum((w - v) ** 2))
        if dist < best_dist - 1e-15:
            best, best_dist = w, dist
    return best


def feasibility_violation(w: np.ndarray, k: int, gamma: Constraint) -> float:
    """``max(violation of Γ, number of non-zeros beyond k)``: 0 iff ``w ∈ B0(k) ∩ Γ``."""
    excess = max(int(np.count_nonzero(w)) - k, 0)
    return max(gamma.violation(w), float(excess))
