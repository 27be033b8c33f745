"""IHT-2SP, HSG-HT-2SP, the zeroth-order estimator and methods: known answers and invariants."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from pydantic import ValidationError

from icml25.pipelines.sparse_iht import algorithms as alg
from icml25.pipelines.sparse_iht.problems import (
    DivergenceError,
    LeastSquares,
    NonFiniteGradientError,
    make_sparse_regression,
)
from icml25.pipelines.sparse_iht.projections import (
    Constraint,
    feasibility_violation,
    two_step_projection,
)

GAMMAS = [Constraint("nonneg"), Constraint("l2_ball", radius=1.5),
          Constraint("box", lower=-0.5, upper=0.8), Constraint("nonneg_budget", budget=2.0),
          Constraint("l1_ball", radius=2.0)]


def _problem(seed=0, n=60, d=40, k_bar=4, sigma=0.2, signed=False) -> tuple:
    truth = make_sparse_regression(n, d, k_bar, 0.5, sigma, seed, signed=signed)
    return LeastSquares(truth.X, truth.y), truth


def test_orthogonal_design_one_step_is_the_projection_and_then_a_fixed_point():
    n = 12
    rng = np.random.default_rng(0)
    y = rng.normal(size=n) * 3
    problem = LeastSquares(math.sqrt(n) * np.eye(n), y)
    assert pytest.approx(1.0) == problem.L
    for gamma in GAMMAS:
        target = two_step_projection(y / math.sqrt(n), 4, gamma)
        one = alg.iht_2sp(problem, 4, gamma, 1, eta=1.0)
        np.testing.assert_allclose(one.w, target, atol=1e-12)
        many = alg.iht_2sp(problem, 4, gamma, 20, eta=1.0)
        np.testing.assert_allclose(many.w, target, atol=1e-12)
        # R(w) = ½||w - y/√n||² on this design
        assert many.final == pytest.approx(0.5 * np.sum((target - y / math.sqrt(n)) ** 2))


def test_noiseless_gaussian_design_recovers_the_support_exactly():
    truth = make_sparse_regression(200, 500, 5, 0.0, 0.0, seed=3)
    problem = LeastSquares(truth.X, truth.y)
    run = alg.iht_2sp(problem, 5, Constraint("nonneg"), 1500)
    np.testing.assert_array_equal(np.flatnonzero(run.w), truth.support)
    assert run.final < 1e-10
    np.testing.assert_allclose(run.w, truth.w_true, atol=1e-5)


def test_unconstrained_dense_case_is_gradient_descent_to_least_squares():
    problem, _ = _problem(n=80, d=10, k_bar=3)
    run = alg.iht_2sp(problem, 10, Constraint("none"), 3000)
    closed, *_ = np.linalg.lstsq(problem.X, problem.y, rcond=None)
    np.testing.assert_allclose(run.w, closed, atol=1e-8)
    assert np.all(np.diff(run.objective) <= 1e-15)  # monotone with η = 1/L


@pytest.mark.parametrize("gamma", GAMMAS, ids=lambda g: g.kind)
def test_every_iterate_of_every_2sp_method_is_feasible(gamma):
    problem, _ = _problem(seed=1, signed=gamma.kind in ("l2_ball", "box", "l1_ball"))
    k = 8
    seen = []

    def recording(v):
        w = two_step_projection(v, k, gamma)
        seen.append(feasibility_violation(w, k, gamma))
        return w

    alg.projected_gradient(problem, recording, 100)
    assert len(seen) == 100 and max(seen) <= 1e-12
    runs = [alg.iht_2sp(problem, k, gamma, 100),
            alg.iht_2sp(problem, k, gamma, 50, w0=np.ones(problem.d)),  # dense warm start
            alg.hsg_ht_2sp(problem, k, gamma, b0=4, tau=1.3, extra_full_steps=20,
                           rng=np.random.default_rng(0))]
    if gamma.kind in ("nonneg", "nonneg_budget"):
        runs.append(alg.hzo_ht_2sp(problem, k, gamma, q0=5, rho_q=1.05, iterations=40,
                                   s2=problem.d, mu=1e-4, rng=np.random.default_rng(0)))
    for run in runs:
        assert run.max_violation <= 1e-12
        assert feasibility_violation(run.w, k, gamma) <= 1e-12


def test_monotone_decrease_for_the_l2_ball_and_the_box():
    """With 2SP exact for these sets, IHT-2SP is a projected-gradient method on B0(k) ∩ Γ."""
    problem, _ = _problem(seed=2, signed=True)
    for gamma in (Constraint("l2_ball", radius=1.5), Constraint("box", lower=-0.7, upper=0.7)):
        run = alg.iht_2sp(problem, 6, gamma, 200)
        assert np.all(np.diff(run.objective) <= 1e-12 * run.objective[:-1])


def test_iht_then_project_and_exact_projection_iht_are_feasible_at_the_end():
    problem, _ = _problem(seed=4)
    gamma = Constraint("nonneg")
    itp = alg.iht_then_project(problem, 8, gamma, 100)
    exact = alg.exact_projection_iht(problem, 8, gamma, 100)
    assert feasibility_violation(itp.w, 8, gamma) == 0
    assert feasibility_violation(exact.w, 8, gamma) == 0
    assert itp.final == pytest.approx(problem.value(itp.w))


def test_batch_schedule_grows_caps_at_n_and_the_ifo_counter_sums_it():
    sizes = alg.batch_schedule(150, 8, 1.1, 60)
    assert sizes[0] == 8 and np.all(np.diff(sizes) >= 0) and sizes.max() == 150
    full = alg.steps_until_full(150, 8, 1.1)
    assert sizes[full] == 150 and sizes[full - 1] < 150
    problem, _ = _problem(n=150, d=30)
    run = alg.hsg_ht_2sp(problem, 6, Constraint("nonneg"), b0=8, tau=1.1, extra_full_steps=10,
                         rng=np.random.default_rng(0))
    assert run.cost[-1] == run.extra["batch_sizes"].sum()
    assert run.objective.size == full + 10 + 1
    np.testing.assert_array_equal(np.diff(run.cost), run.extra["batch_sizes"])
    with pytest.raises(ValueError, match="tau"):
        alg.batch_schedule(10, 1, 0.5, 3)


def test_hsg_with_a_full_batch_from_the_start_is_iht_2sp():
    problem, _ = _problem(n=50, d=30)
    gamma = Constraint("nonneg")
    hsg = alg.hsg_ht_2sp(problem, 6, gamma, b0=50, tau=1.5, extra_full_steps=40,
                         rng=np.random.default_rng(0))
    iht = alg.iht_2sp(problem, 6, gamma, 40)
    np.testing.assert_allclose(hsg.w, iht.w, atol=1e-12)
    assert hsg.cost[-1] == iht.cost[-1]


@pytest.mark.parametrize("s2", [None, 5])
def test_zeroth_order_estimator_is_unbiased_with_the_d_scaling(s2):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 12))
    problem = LeastSquares(X, rng.normal(size=30))
    w = rng.normal(size=12) * 0.3
    s2 = s2 or problem.d
    draws = np.array([alg.zo_gradient(problem, w, 1, s2, 1e-5, rng)[0] for _ in range(20_000)])
    _, grad = problem.value_and_grad(w)
    mean = draws.mean(axis=0)
    se = draws.std(axis=0, ddof=1) / math.sqrt(len(draws))
    assert np.all(np.abs(mean - grad) <= 3 * se + 1e-6)
    # without the factor d the estimate is biased by 1/d: the same check must fail
    unscaled = mean / problem.d
    assert np.any(np.abs(unscaled - grad) > 3 * se / problem.d + 1e-6)


def test_zeroth_order_query_counting_and_direction_supports():
    rng = np.random.default_rng(1)
    U = alg.random_directions(20, 7, 4, rng)
    assert U.shape == (20, 7)
    np.testing.assert_allclose(np.linalg.norm(U, axis=0), 1.0)
    assert np.all(np.count_nonzero(U, axis=0) == 4)
    problem, _ = _problem(d=20)
    _, _, queries = alg.zo_gradient(problem, np.zeros(20), 7, 4, 1e-4, rng)
    assert queries == 8
    run = alg.szoht(problem, 5, Constraint("nonneg"), q=7, iterations=10, s2=20, mu=1e-4,
                    eta=0.01, rng=rng)
    assert run.cost[-1] == 10 * 8
    hzo = alg.hzo_ht_2sp(problem, 5, Constraint("nonneg"), q0=3, rho_q=1.5, iterations=6,
                         s2=20, mu=1e-4, rng=rng)
    qs = alg.hzo_schedule(3, 1.5, 6)
    np.testing.assert_array_equal(qs, [3, 5, 7, 11, 16, 23])
    assert hzo.cost[-1] == np.sum(qs + 1)


def test_hzo_reaches_the_first_order_value_on_a_small_problem():
    problem, _ = _problem(n=80, d=30, k_bar=3, sigma=0.1, seed=5)
    gamma = Constraint("nonneg")
    fo = alg.iht_2sp(problem, 6, gamma, 1000)
    hzo = alg.hzo_ht_2sp(problem, 6, gamma, q0=5, rho_q=1.03, iterations=150, s2=problem.d,
                         mu=1e-4, rng=np.random.default_rng(0))
    assert hzo.final <= fo.final * 1.01


def test_non_finite_gradient_is_a_clear_error():
    problem, _ = _problem()
    with pytest.raises(NonFiniteGradientError, match="IHT-2SP diverged at iteration"):
        alg.iht_2sp(problem, 5, Constraint("none"), 2000, eta=1e3)
    with pytest.raises(ValueError, match="step size"):
        alg.iht_2sp(problem, 5, Constraint("none"), 5, eta=-1.0)


def _diverging_instance():
    # k = d without a constraint is gradient descent: a step of 4/L multiplies the error along
    # the top eigenvector by |1 - 4| = 3 per step
    truth = make_sparse_regression(60, 40, 4, 0.5, 0.3, 0)
    return LeastSquares(truth.X, truth.y)


@pytest.mark.parametrize("method", ["iht_2sp", "iht_then_project", "exact_iht", "dense"])
def test_a_step_of_4_over_L_is_a_reported_divergence_not_a_warning(method):
    problem = _diverging_instance()
    eta = 4.0 / problem.L
    run = {"iht_2sp": lambda: alg.iht_2sp(problem, 40, Constraint("nonneg"), 600, eta=eta),
           "iht_then_project": lambda: alg.iht_then_project(problem, 40, Constraint("nonneg"),
                                                            600, eta=eta),
           "exact_iht": lambda: alg.exact_projection_iht(problem, 40, Constraint("nonneg"), 600,
                                                         eta=eta),
           "dense": lambda: alg.dense_reference(problem, Constraint("none"), 600, eta=eta)}[method]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning on the way
        with pytest.raises(DivergenceError, match=r"diverged at iteration \d+: .* = 4/L"):
            run()
    # the same runs at 1/L converge and are not flagged
    converged = alg.dense_reference(problem, Constraint("none"), 600)
    assert np.isfinite(converged.final) and converged.final < problem.value(np.zeros(problem.d))


def test_divergence_is_detected_in_the_stochastic_and_zeroth_order_methods():
    problem = _diverging_instance()
    gamma = Constraint("nonneg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DivergenceError, match="HSG-HT-2SP diverged"):
            alg.hsg_ht_2sp(problem, 40, gamma, b0=4, tau=1.2, extra_full_steps=600,
                           rng=np.random.default_rng(0), eta=4.0 / problem.L)
        with pytest.raises(DivergenceError, match="SZOHT diverged"):
            alg.szoht(problem, 40, gamma, q=40, iterations=2000, s2=problem.d, mu=1e-4,
                      eta=8.0 / problem.L, rng=np.random.default_rng(0))


@pytest.mark.parametrize("kwargs,field", [
    ({"q": 0}, "q"), ({"mu": 0.0}, "mu"), ({"mu": -1e-4}, "mu"), ({"mu": math.nan}, "mu"),
    ({"s2": 0}, "s2"),
])
def test_degenerate_zeroth_order_arguments_are_parameter_errors(kwargs, field):
    problem, _ = _problem()
    gamma = Constraint("nonneg")
    args = {"q": 5, "mu": 1e-4, "s2": problem.d, **kwargs}
    w = np.zeros(problem.d)
    with pytest.raises(ValidationError, match=rf"ZerothOrderArgs\n{field}\n"):
        alg.zo_gradient(problem, w, args["q"], args["s2"], args["mu"], np.random.default_rng(0))
    with pytest.raises(ValidationError, match=rf"ZerothOrderArgs\n{field}\n"):
        alg.szoht(problem, 5, gamma, q=args["q"], iterations=3, s2=args["s2"], mu=args["mu"],
                  eta=1.0 / problem.L, rng=np.random.default_rng(0))


@pytest.mark.parametrize("kwargs,field", [
    ({"q0": 0}, "q0"), ({"mu": 0.0}, "mu"), ({"rho_q": 0.5}, "rho_q"), ({"q_max": 0}, "q_max"),
])
def test_degenerate_hzo_arguments_are_parameter_errors(kwargs, field):
    problem, _ = _problem()
    args = {"q0": 5, "rho_q": 1.02, "mu": 1e-4, "q_max": None, **kwargs}
    with pytest.raises(ValidationError, match=rf"ZerothOrderArgs\n{field}\n"):
        alg.hzo_ht_2sp(problem, 5, Constraint("nonneg"), iterations=3, s2=problem.d,
                       rng=np.random.default_rng(0), **args)


def test_bad_data_and_k_larger_than_d_are_refused():
    problem, _ = _problem(d=20)
    with pytest.raises(ValueError, match="larger than the dimension"):
        alg.iht_2sp(problem, 21, Constraint("nonneg"), 5)
    X = np.ones((5, 3))
    with pytest.raises(ValueError, match="NaN"):
        LeastSquares(np.where(np.eye(5, 3) > 0, np.nan, X), np.ones(5))
    with pytest.raises(ValueError, match="shape"):
        LeastSquares(X, np.ones(4))
    with pytest.raises(ValueError, match="non-empty"):
        LeastSquares(np.ones((0, 3)), np.ones(0))
