"""H_k, the support-preserving projections and the two-step projection against independent
computations (cvxpy solves, brute force over supports, random feasible points)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from icml25.pipelines.sparse_iht.baselines import cvxpy_constraints
from icml25.pipelines.sparse_iht.projections import (
    Constraint,
    InfeasibleConstraintError,
    brute_force_sparse_projection,
    exact_sparse_projection,
    feasibility_violation,
    hard_threshold,
    top_k_indices,
    two_step_projection,
)

SETS = {
    "l2_ball": Constraint("l2_ball", radius=1.3),
    "l1_ball": Constraint("l1_ball", radius=1.1),
    "box": Constraint("box", lower=-0.4, upper=0.7),
    "sym_box": Constraint("box", lower=-0.6, upper=0.6),
    "nonneg": Constraint("nonneg"),
    "nonneg_budget": Constraint("nonneg_budget", budget=0.9),
    "nonneg_l2_ball": Constraint("nonneg_l2_ball", radius=0.8),
}


def _random_feasible(gamma: Constraint, d: int, rng: np.random.Generator) -> np.ndarray:
    """A random point of Γ (feasible by construction, not by projecting)."""
    z = rng.normal(size=d) * rng.uniform(0.05, 2.0)
    kind = gamma.kind
    if kind in ("nonneg", "nonneg_budget", "nonneg_l2_ball"):
        z = np.abs(z)
    if kind == "l2_ball" or kind == "nonneg_l2_ball":
        z *= rng.uniform(0, 1) * gamma.radius / np.linalg.norm(z)
    if kind == "l1_ball":
        z *= rng.uniform(0, 1) * gamma.radius / np.abs(z).sum()
    if kind == "nonneg_budget":
        z *= rng.uniform(0, 1) * gamma.budget / z.sum()
    if kind == "box":
        z = rng.uniform(gamma.lower, gamma.upper, size=d)
    assert gamma.violation(z) == 0
    return z


def test_hard_threshold_keeps_the_k_largest_magnitudes():
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.normal(size=30)
        k = int(rng.integers(1, 30))
        h = hard_threshold(v, k)
        kept = np.flatnonzero(h)
        assert kept.size == k
        np.testing.assert_array_equal(h[kept], v[kept])
        assert np.abs(v[kept]).min() >= np.abs(np.delete(v, kept)).max()


def test_hard_threshold_breaks_ties_by_the_lower_index():
    v = np.array([1.0, -2.0, 2.0, 0.5, -2.0, 2.0])
    np.testing.assert_array_equal(top_k_indices(v, 2), [1, 2])
    np.testing.assert_array_equal(top_k_indices(v, 3), [1, 2, 4])
    np.testing.assert_array_equal(hard_threshold(v, 3), [0, -2, 2, 0, -2, 0])
    z = np.zeros(5)  # all tied: the first k
    np.testing.assert_array_equal(top_k_indices(z, 2), [0, 1])


@pytest.mark.parametrize("name", sorted(SETS))
def test_projection_is_support_preserving_idempotent_and_nearest(name):
    gamma = SETS[name]
    rng = np.random.default_rng(1)
    d, k = 12, 4
    for _ in range(20):
        v = hard_threshold(rng.normal(size=d) * 2, k)
        p = gamma.project(v)
        assert set(np.flatnonzero(p)) <= set(np.flatnonzero(v))
        assert gamma.violation(p) <= 1e-12
        np.testing.assert_allclose(gamma.project(p), p, atol=1e-12)
        dist = np.linalg.norm(p - v)
        for _ in range(10):
            z = _random_feasible(gamma, d, rng)
            assert dist <= np.linalg.norm(z - v) + 1e-12
    # 200 random feasible points for one v
    v = rng.normal(size=d) * 2
    p = gamma.project(v)
    for _ in range(200):
        assert np.linalg.norm(p - v) <= np.linalg.norm(_random_feasible(gamma, d, rng) - v) + 1e-12


@pytest.mark.parametrize("name", sorted(SETS))
def test_projection_matches_cvxpy(name):
    gamma = SETS[name]
    rng = np.random.default_rng(2)
    for _ in range(3):
        v = rng.normal(size=15) * 1.5
        w = cp.Variable(15)
        cp.Problem(cp.Minimize(cp.sum_squares(w - v)), cvxpy_constraints(w, gamma)).solve(
            solver=cp.CLARABEL)
        ours = gamma.project(v)
        # our closed form is never worse than the solver; second-order cone solves (the balls)
        # are accurate to ~1e-5 in the argument, the polyhedral ones (l1, budget) to 1e-6
        assert np.sum((ours - v) ** 2) <= np.sum((w.value - v) ** 2) + 1e-9
        atol = 1e-4 if "l2" in gamma.kind else 1e-6
        np.testing.assert_allclose(ours, w.value, atol=atol)


def test_simplex_is_not_support_preserving_and_has_a_restricted_variant():
    gamma = Constraint("simplex", budget=1.0)
    assert not gamma.support_preserving
    v = np.array([0.2, 0.0, 0.1, 0.0])  # positive mass < 1: the projection fills zeros
    assert np.count_nonzero(gamma.project(v)) > np.count_nonzero(v)
    w = two_step_projection(np.array([0.2, -0.5, 0.1, 0.05]), 2, gamma)
    assert set(np.flatnonzero(w)) <= {0, 1} and abs(w.sum() - 1) < 1e-12 and w.min() >= 0


@pytest.mark.parametrize("name", ["l2_ball", "sym_box"])
def test_two_step_projection_is_exact_for_the_ball_and_the_symmetric_box(name):
    gamma = SETS[name]
    rng = np.random.default_rng(3)
    for _ in range(30):
        v = rng.normal(size=8) * 1.5
        exact = brute_force_sparse_projection(v, 3, gamma)
        np.testing.assert_allclose(two_step_projection(v, 3, gamma), exact, atol=1e-12)


@pytest.mark.parametrize("name", ["l2_ball", "l1_ball", "sym_box", "nonneg", "nonneg_budget",
                                  "nonneg_l2_ball", "simplex"])
def test_exact_closed_forms_match_brute_force(name):
    gamma = SETS.get(name, Constraint("simplex", budget=1.0))
    rng = np.random.default_rng(4)
    for _ in range(30):
        v = rng.normal(size=8) * 1.5
        ours = exact_sparse_projection(v, 3, gamma)
        brute = brute_force_sparse_projection(v, 3, gamma)
        assert np.linalg.norm(ours - v) == pytest.approx(np.linalg.norm(brute - v), abs=1e-12)


def test_two_step_differs_from_exact_on_the_nonnegative_orthant():
    gamma = Constraint("nonneg")
    v = np.array([-5.0, 3.0, 1.0, 0.5])
    two_step = two_step_projection(v, 2, gamma)
    exact = exact_sparse_projection(v, 2, gamma)
    np.testing.assert_array_equal(two_step, [0, 3, 0, 0])  # -5 was kept, then clipped
    np.testing.assert_array_equal(exact, [0, 3, 1, 0])
    np.testing.assert_array_equal(exact, brute_force_sparse_projection(v, 2, gamma))
    assert np.count_nonzero(two_step) == 1 and np.count_nonzero(exact) == 2


@pytest.mark.parametrize("name", sorted(SETS))
def test_two_step_output_is_feasible(name):
    gamma = SETS[name]
    rng = np.random.default_rng(5)
    for _ in range(50):
        w = two_step_projection(rng.normal(size=40) * 3, 6, gamma)
        assert feasibility_violation(w, 6, gamma) <= 1e-12


@pytest.mark.parametrize("bad", [
    dict(kind="box", lower=0.5, upper=1.0),
    dict(kind="box", lower=1.0, upper=-1.0),
    dict(kind="l2_ball", radius=-1.0),
    dict(kind="nonneg_budget", budget=-0.5),
    dict(kind="simplex", budget=0.0),
])
def test_infeasible_constraint_sets_are_refused(bad):
    with pytest.raises(InfeasibleConstraintError):
        Constraint(**bad)


def test_k_larger_than_dimension_and_bad_vectors_are_refused():
    with pytest.raises(ValueError, match="larger than the dimension"):
        hard_threshold(np.ones(5), 6)
    with pytest.raises(ValueError, match="positive integer"):
        two_step_projection(np.ones(5), 0, Constraint("nonneg"))
    with pytest.raises(ValueError, match="NaN"):
        two_step_projection(np.array([1.0, np.nan]), 1, Constraint("nonneg"))
    with pytest.raises(ValueError, match="1-d"):
        two_step_projection(np.ones((2, 2)), 1, Constraint("nonneg"))
