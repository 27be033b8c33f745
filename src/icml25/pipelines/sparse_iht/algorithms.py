"""Hard-thresholding algorithms with the two-step projection, and their baselines.

The paper's three methods (de Vazelhes, Yuan, Gu, ICML 2025, Sections 3-5):

- IHT-2SP: ``w_{t+1} = Π̄_k^Γ(w_t - η ∇R(w_t))`` with ``η = 1/L``;
- HSG-HT-2SP: the same step with a mini-batch gradient whose batch grows geometrically,
  ``b_t = min(n, ⌈b_0 τ^t⌉)`` (the hybrid stochastic gradient of HSG-HT, Zhou, Yuan, Feng,
  NeurIPS 2018);
- HZO-HT-2SP: the random-direction zeroth-order estimator with ``q_t = ⌈q_0 ρ_q^t⌉`` directions.

Baselines: plain IHT (then one 2SP at the end), IHT with the exact projection onto
``B0(k) ∩ Γ``, projected gradient onto ``Γ`` (dense, no sparsity; and on the true support, the
oracle), and SZOHT (de Vazelhes et al., NeurIPS 2022: the same estimator with a fixed ``q`` and
plain ``H_k``). Every run records the objective of each iterate, the gradient evaluations (IFO:
sample gradients) or function queries spent so far, and the largest feasibility violation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from icml25.pipelines.sparse_iht.problems import (
    DivergenceError,
    LeastSquares,
    NonFiniteGradientError,
)
from icml25.pipelines.sparse_iht.projections import (
    Constraint,
    check_sparsity,
    exact_sparse_projection,
    feasibility_violation,
    hard_threshold,
    top_k_indices,
    two_step_projection,
)

Projection = Callable[[np.ndarray], np.ndarray]

#: An objective above this multiple of its scale (the larger of ``R(w_0)`` and ``R(0)``) is
#: divergence: no convergent run of these methods rises by six orders of magnitude.
DIVERGENCE_FACTOR = 1e6


@dataclass
class RunResult:
    """Final iterate and per-iterate history of one algorithm run.

    ``objective[t]`` is ``R`` at the t-th iterate (``t = 0`` is the start); ``cost[t]`` the
    sample gradients (first order) or function queries (zeroth order) spent to reach it.
    """

    w: np.ndarray
    objective: np.ndarray
    cost: np.ndarray
    max_violation: float
    seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def final(self) -> float:
        return float(self.objective[-1])

    def iterations_to_tolerance(self, rtol: float = 1e-6) -> int:
        """First t with ``|R_t - R_{t-1}| <= rtol·|R_{t-1}|``; the run length if never reached."""
        obj = self.objective
        change = np.abs(np.diff(obj)) <= rtol * np.abs(obj[:-1])
        hit = np.flatnonzero(change)
        return int(hit[0] + 1) if hit.size else int(obj.size - 1)

    def cost_to_tolerance(self, rtol: float = 1e-6) -> float:
        return float(self.cost[self.iterations_to_tolerance(rtol)])


def _check_finite(g: np.ndarray, t: int, what: str = "gradient step") -> None:
    if not np.all(np.isfinite(g)):
        raise NonFiniteGradientError(
            f"non-finite {what} at iteration {t} (NaN or inf): the step size is too large for "
            "the objective's smoothness, or the data contain non-finite values")


def _objective_scale(problem, w0: np.ndarray) -> float:
    """``max(R(w_0), R(0))``: the yardstick of the divergence check (``0`` lies in every
    support-preserving Γ, so ``R(0)`` is a value every method can fall back to)."""
    with np.errstate(over="ignore", invalid="ignore"):
        scale = max(problem.value(w0), problem.value(np.zeros(problem.d)))
    if not math.isfinite(scale):
        raise ValueError("the objective is not finite at the start point w0 or at 0")
    return scale


def _check_objective(value: float, t: int, scale: float, eta: float, L: float,
                     method: str, factor: float = DIVERGENCE_FACTOR) -> None:
    """Raise :class:`DivergenceError` if ``R(w_t)`` is NaN, infinite or above ``factor · scale``."""
    if math.isfinite(value) and value <= factor * max(scale, np.finfo(float).tiny):
        return
    raise DivergenceError(
        f"{method} diverged at iteration {t}: R(w_t) = {value:.3g} (the run started at a scale "
        f"of {scale:.3g}); step η = {eta:.3g} = {eta * L:.3g}/L where L = {L:.3g} bounds the "
        "smoothness; use a step below 2/L (the default is 1/L)")


def _step_size(problem: LeastSquares, eta: float | None) -> float:
    eta = 1.0 / problem.L if eta is None else float(eta)
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f"step size: got {eta}; expected a positive finite number")
    return eta


def projected_gradient(problem: LeastSquares, projection: Projection, iterations: int, *,
                       eta: float | None = None, w0: np.ndarray | None = None,
                       violation: Callable[[np.ndarray], float] | None = None,
                       method: str = "projected gradient") -> RunResult:
    """``w_{t+1} = P(w_t - η ∇R(w_t))`` for a given projection-like operator ``P``.

    With ``P = Π̄_k^Γ`` this is IHT-2SP; with ``P = H_k`` plain IHT; with ``P = Π_Γ`` dense
    projected gradient. Each full gradient costs ``n`` sample gradients (IFO). A run whose
    objective becomes non-finite or exceeds ``DIVERGENCE_FACTOR`` times its start scale raises
    :class:`DivergenceError` (a step above the stable range) instead of returning a result.
    """
    eta = _step_size(problem, eta)
    w = np.zeros(problem.d) if w0 is None else np.asarray(w0, dtype=float).copy()
    scale = _objective_scale(problem, w)
    obj = np.empty(iterations + 1)
    viol = np.zeros(iterations + 1)  # viol[0] = 0: the start is not an iterate of the operator
    worst = 0.0  # over the iterates the operator produces; a warm start may be dense
    start = time.perf_counter()
    for t in range(iterations):
        with np.errstate(over="ignore", invalid="ignore"):
            value, g = problem.value_and_grad(w)
            step = w - eta * g
        _check_objective(value, t, scale, eta, problem.L, method)
        _check_finite(step, t)
        obj[t] = value
        w = projection(step)
        if violation:
            viol[t + 1] = violation(w)
            worst = max(worst, viol[t + 1])
    with np.errstate(over="ignore", invalid="ignore"):
        obj[iterations] = problem.value(w)
    _check_objective(obj[iterations], iterations, scale, eta, problem.L, method)
    cost = problem.n * np.arange(iterations + 1, dtype=float)
    return RunResult(w, obj, cost, worst, time.perf_counter() - start,
                     extra={"violation": viol})


def iht_2sp(problem: LeastSquares, k: int, gamma: Constraint, iterations: int, *,
            eta: float | None = None, w0: np.ndarray | None = None) -> RunResult:
    """IHT-2SP (the paper's Algorithm 1): ``w_{t+1} = Π̄_k^Γ(w_t - η ∇R(w_t))``, ``η = 1/L``."""
    k = check_sparsity(k, problem.d)
    return projected_gradient(problem, lambda v: two_step_projection(v, k, gamma), iterations,
                              eta=eta, w0=w0, violation=lambda w: feasibility_violation(w, k, gamma),
                              method="IHT-2SP")


def iht_then_project(problem: LeastSquares, k: int, gamma: Constraint, iterations: int, *,
                     eta: float | None = None, w0: np.ndarray | None = None) -> RunResult:
    """Baseline 1: plain IHT with ``H_k`` (ignores Γ), then one ``Π̄_k^Γ`` at the end.

    The history is that of the plain-IHT iterates; ``max_violation`` is theirs (infeasible in
    general), while ``w`` and ``objective[-1]`` are the projected output.
    """
    k = check_sparsity(k, problem.d)
    run = projected_gradient(problem, lambda v: hard_threshold(v, k), iterations, eta=eta, w0=w0,
                             violation=lambda w: feasibility_violation(w, k, gamma),
                             method="IHT (then project)")
    w = two_step_projection(run.w, k, gamma)
    run.extra["unprojected_objective"] = run.final
    run.objective[-1] = problem.value(w)
    run.w = w
    return run


def exact_projection_iht(problem: LeastSquares, k: int, gamma: Constraint, iterations: int, *,
                         eta: float | None = None, w0: np.ndarray | None = None) -> RunResult:
    """Baseline 2: IHT with the exact projection onto ``B0(k) ∩ Γ`` (closed forms only)."""
    k = check_sparsity(k, problem.d)
    return projected_gradient(problem, lambda v: exact_sparse_projection(v, k, gamma), iterations,
                              eta=eta, w0=w0, violation=lambda w: feasibility_violation(w, k, gamma),
                              method="exact-projection IHT")


def dense_reference(problem: LeastSquares, gamma: Constraint, iterations: int, *,
                    eta: float | None = None) -> RunResult:
    """Baseline 5: projected gradient onto Γ without sparsity (lower-bounds the objective)."""
    return projected_gradient(problem, gamma.project, iterations, eta=eta,
                              violation=gamma.violation, method="dense projected gradient")


def oracle(problem: LeastSquares, gamma: Constraint, support: np.ndarray, iterations: int, *,
           eta: float | None = None) -> RunResult:
    """Projected gradient on the true support within Γ: the reference of binding settings."""
    support = np.asarray(support, dtype=int)
    return projected_gradient(problem, lambda v: gamma.project_restricted(v, support),
                              iterations, eta=eta, violation=gamma.violation, method="oracle")


def batch_schedule(n: int, b0: int, tau: float, steps: int) -> np.ndarray:
    """``b_t = min(n, ⌈b_0 τ^t⌉)`` for ``t = 0..steps-1`` (geometric growth, capped at n)."""
    if b0 < 1 or tau < 1:
        raise ValueError(f"batch schedule: need b0 >= 1 and tau >= 1, got b0={b0}, tau={tau}")
    t = np.arange(steps, dtype=float)
    with np.errstate(over="ignore"):
        grown = np.ceil(b0 * np.power(tau, t) - 1e-9)
    return np.minimum(grown, n).astype(int)


def steps_until_full(n: int, b0: int, tau: float) -> int:
    """The first t with ``b_t = n`` (the number of growing steps)."""
    if b0 >= n:
        return 0
    if tau == 1:
        raise ValueError("tau = 1 never reaches a full batch")
    return math.ceil(math.log(n / b0) / math.log(tau) - 1e-12)


def hsg_ht_2sp(problem: LeastSquares, k: int, gamma: Constraint, *, b0: int, tau: float,
               extra_full_steps: int, rng: np.random.Generator, eta: float | None = None,
               w0: np.ndarray | None = None) -> RunResult:
    """HSG-HT-2SP: ``w_{t+1} = Π̄_k^Γ(w_t - η ∇R_{B_t}(w_t))``, ``|B_t| = b_t`` without replacement.

    Runs the growing phase until the batch is full, then ``extra_full_steps`` more steps. The
    IFO counter adds ``b_t`` per step, so ``cost[-1] = Σ b_t``. The step is ``1/L_t`` with
    ``L_t = max(L, λ_max(X_Bᵀ X_B/b_t))``, a safe smoothness bound of the mini-batch objective
    (it equals ``1/L`` once the batch is full): with ``1/L`` a batch of 8 rows in d = 500 has
    curvature ~8x larger than ``L`` and the growing phase can throw the iterate into a poor
    support it never leaves (measured: one seed in eight ended 30x above IHT-2SP).
    """
    k = check_sparsity(k, problem.d)
    fixed = None if eta is None else _step_size(problem, eta)
    steps = steps_until_full(problem.n, b0, tau) + extra_full_steps
    sizes = batch_schedule(problem.n, b0, tau, steps)
    w = np.zeros(problem.d) if w0 is None else np.asarray(w0, dtype=float).copy()
    scale = _objective_scale(problem, w)
    obj = np.empty(steps + 1)
    worst = 0.0
    start = time.perf_counter()
    for t, b in enumerate(sizes):
        with np.errstate(over="ignore", invalid="ignore"):
            obj[t] = problem.value(w)  # evaluation only, not charged to the IFO counter
        _check_objective(obj[t], t, scale, fixed or 1.0 / problem.L, problem.L, "HSG-HT-2SP")
        rows = rng.choice(problem.n, size=b, replace=False) if b < problem.n else np.arange(b)
        eta = fixed if fixed is not None else 1.0 / (
            problem.L if b == problem.n else max(problem.L, problem.batch_smoothness(rows)))
        with np.errstate(over="ignore", invalid="ignore"):
            step = w - eta * problem.batch_grad(w, rows)
        _check_finite(step, t)
        w = two_step_projection(step, k, gamma)
        worst = max(worst, feasibility_violation(w, k, gamma))
    with np.errstate(over="ignore", invalid="ignore"):
        obj[steps] = problem.value(w)
    _check_objective(obj[steps], steps, scale, fixed or 1.0 / problem.L, problem.L, "HSG-HT-2SP")
    cost = np.concatenate([[0.0], np.cumsum(sizes, dtype=float)])
    return RunResult(w, obj, cost, worst, time.perf_counter() - start,
                     extra={"batch_sizes": sizes})


class ZerothOrderArgs(BaseModel):
    """The scalar arguments of the zeroth-order methods, checked before any query: the estimator
    divides by ``q·μ``, so ``q = 0`` or ``μ = 0`` would otherwise surface as a bare
    ZeroDivisionError (or a NaN gradient) deep inside the first iteration."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    q: int | None = Field(default=None, ge=1, description="directions per estimate")
    q0: int | None = Field(default=None, ge=1, description="directions at the first step")
    rho_q: float | None = Field(default=None, ge=1, description="growth factor of q_t")
    q_max: int | None = Field(default=None, ge=1, description="cap on q_t")
    mu: float = Field(gt=0, description="smoothing radius of the finite differences")
    s2: int = Field(ge=1, description="size of each direction's random support")
    iterations: int | None = Field(default=None, ge=1)
    eta: float | None = Field(default=None, gt=0, description="step size")


def random_directions(d: int, q: int, s2: int, rng: np.random.Generator) -> np.ndarray:
    """``q`` columns ``u_i``: a support ``S_i`` of size ``s2`` drawn uniformly, ``u_i`` uniform on
    the unit sphere of ``R^{S_i}`` and zero elsewhere (SZOHT's random support sampling)."""
    s2 = check_sparsity(s2, d)
    G = rng.standard_normal((d, q))
    if s2 < d:
        keep = np.argsort(rng.random((q, d)), axis=1)[:, :s2]
        mask = np.zeros((q, d), dtype=bool)
        np.put_along_axis(mask, keep, True, axis=1)
        G *= mask.T
    return G / np.linalg.norm(G, axis=0, keepdims=True)


def zo_gradient(problem: LeastSquares, w: np.ndarray, q: int, s2: int, mu: float,
                rng: np.random.Generator) -> tuple[np.ndarray, float, int]:
    """``ĝ(w) = (d/(qμ)) Σ_i (R(w + μu_i) - R(w)) u_i``; returns ``(ĝ, R(w), queries = q + 1)``.

    The factor ``d`` makes the estimator first-order unbiased, since ``E[u uᵀ] = I/d`` for
    ``u`` uniform on the sphere of a uniformly drawn ``s2``-subset (also for ``s2 < d``).
    ``q >= 1`` and ``μ > 0`` are checked (:class:`ZerothOrderArgs`).
    """
    ZerothOrderArgs(q=q, mu=mu, s2=s2)
    U = random_directions(problem.d, q, s2, rng)
    base, shifted = problem.values_along(w, U, mu)
    g = (problem.d / (q * mu)) * (U @ (shifted - base))
    return g, base, q + 1


def zo_step(q: int, d: int, L: float) -> float:
    """``η = q / ((q + d) L)``: the step minimising the descent-lemma bound for an estimator
    with ``E||ĝ||² ≈ (1 + d/q) ||∇R||²`` (random directions on the sphere)."""
    return q / ((q + d) * L)


def _zeroth_order(problem: LeastSquares, k: int, gamma: Constraint, qs: np.ndarray,
                  etas: np.ndarray, *, s2: int, mu: float, rng: np.random.Generator,
                  projection: Projection, feasible: Projection,
                  monitor: Callable[[np.ndarray], float] | None = None,
                  monitor_every: int = 0, method: str = "zeroth-order IHT") -> RunResult:
    w = np.zeros(problem.d)
    scale = _objective_scale(problem, w)
    watched: list[tuple[int, float]] = []
    T = qs.size
    obj = np.empty(T + 1)
    raw = np.empty(T + 1)
    cost = np.zeros(T + 1)
    worst = 0.0
    start = time.perf_counter()
    for t in range(T):
        with np.errstate(over="ignore", invalid="ignore"):
            g, base, queries = zo_gradient(problem, w, int(qs[t]), s2, mu, rng)
            step = w - etas[t] * g
        _check_objective(base, t, scale, float(etas[t]), problem.L, method)
        _check_finite(step, t, "zeroth-order gradient step")
        raw[t] = base
        obj[t] = problem.value(feasible(w))
        cost[t + 1] = cost[t] + queries
        w = projection(step)
        worst = max(worst, feasibility_violation(w, k, gamma))
        if monitor is not None and monitor_every and (t + 1) % monitor_every == 0:
            watched.append((t + 1, monitor(feasible(w))))
    with np.errstate(over="ignore", invalid="ignore"):
        raw[T] = problem.value(w)
    _check_objective(raw[T], T, scale, float(etas[-1]), problem.L, method)
    obj[T] = problem.value(feasible(w))
    return RunResult(w, obj, cost, worst, time.perf_counter() - start,
                     extra={"raw_objective": raw, "q": qs, "monitor": watched,
                            "feasible_w": feasible(w)})


def szoht(problem: LeastSquares, k: int, gamma: Constraint, *, q: int, iterations: int, s2: int,
          mu: float, eta: float, rng: np.random.Generator,
          monitor: Callable[[np.ndarray], float] | None = None, monitor_every: int = 0,
          ) -> RunResult:
    """SZOHT (baseline): ``w_{t+1} = H_k(w_t - η ĝ(w_t))`` with a fixed number ``q`` of directions.

    Its iterates ignore Γ; ``objective`` is measured at the feasible point ``Π_Γ(w_t)`` (the
    2SP of an already k-sparse iterate) so it compares with the constrained methods, and
    ``extra['raw_objective']`` holds ``R(w_t)``.
    """
    ZerothOrderArgs(q=q, mu=mu, s2=s2, iterations=iterations, eta=eta)
    k = check_sparsity(k, problem.d)
    qs = np.full(iterations, int(q))
    etas = np.full(iterations, float(eta))
    return _zeroth_order(problem, k, gamma, qs, etas, s2=s2, mu=mu, rng=rng,
                         projection=lambda v: hard_threshold(v, k),
                         feasible=lambda w: two_step_projection(w, k, gamma),
                         monitor=monitor, monitor_every=monitor_every, method="SZOHT")


def hzo_schedule(q0: int, rho_q: float, iterations: int, q_max: int | None = None) -> np.ndarray:
    """``q_t = ⌈q_0 ρ_q^t⌉`` (optionally capped at ``q_max``)."""
    t = np.arange(iterations, dtype=float)
    qs = np.ceil(q0 * np.power(rho_q, t) - 1e-9).astype(np.int64)
    return np.minimum(qs, q_max) if q_max else qs


def hzo_ht_2sp(problem: LeastSquares, k: int, gamma: Constraint, *, q0: int, rho_q: float,
               iterations: int, s2: int, mu: float, rng: np.random.Generator,
               q_max: int | None = None, monitor: Callable[[np.ndarray], float] | None = None,
               monitor_every: int = 0) -> RunResult:
    """HZO-HT-2SP: ``w_{t+1} = Π̄_k^Γ(w_t - η_t ĝ_{q_t}(w_t))`` with ``q_t = ⌈q_0 ρ_q^t⌉`` and
    ``η_t = q_t / ((q_t + d) L)``, so the estimator's variance vanishes and only the ``O(μ)``
    smoothing bias is left."""
    ZerothOrderArgs(q0=q0, rho_q=rho_q, q_max=q_max, mu=mu, s2=s2, iterations=iterations)
    k = check_sparsity(k, problem.d)
    qs = hzo_schedule(q0, rho_q, iterations, q_max)
    etas = np.array([zo_step(int(q), problem.d, problem.L) for q in qs])
    run = _zeroth_order(problem, k, gamma, qs, etas, s2=s2, mu=mu, rng=rng,
                        projection=lambda v: two_step_projection(v, k, gamma),
                        feasible=lambda w: w, monitor=monitor, monitor_every=monitor_every,
                        method="HZO-HT-2SP")
    return run


def support_of(w: np.ndarray, k: int) -> np.ndarray:
    """The (at most k) non-zero positions of ``w``, by magnitude."""
    idx = top_k_indices(w, min(k, w.size))
    return idx[w[idx] != 0]
