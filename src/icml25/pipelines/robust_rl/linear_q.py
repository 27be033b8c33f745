"""Robust Q-learning with linear function approximation for the contamination set.

docs/papers/robust_rl.md, "The method" (function approximation): a robust *discounted* learner run at the
reduction's discount ``gamma = 1 - eps / H``. With features ``phi(s, a)`` and parameters
``theta`` the target is

    y = r + gamma [(1 - R) max_a' phi(s', a')^T theta + R m],
    m = min over a reservoir of visited states s~ of max_a phi(s~, a)^T theta,

(the contamination support function needs only ``min V``; Wang & Zou 2021 use the same target),
and the semi-gradient update is ``theta <- theta + alpha (y - phi(s, a)^T theta) phi(s, a)``,
behaviour epsilon-greedy. The step size follows ``schedule``:

* ``visit`` (default): ``alpha = alpha_0 / (1 + n(s, a) / k_0)`` with ``n(s, a)`` the number of
  earlier updates at the visited pair. For every pair visited infinitely often the steps satisfy
  the Robbins-Monro conditions ``sum alpha = inf``, ``sum alpha^2 < inf`` *along that pair's
  visits*, which is what tabular Q-learning's convergence needs (with one-hot features this
  learner is tabular robust Q-learning).
* ``global``: ``alpha_k = alpha_0 / (1 + k / k_0)`` with ``k`` the total step count. Shared by all
  pairs, it decays on the clock of the whole trajectory, so a pair visited a fraction ``f`` of
  the time receives steps summing only to about ``alpha_0 k_0 f log k``: rarely visited pairs
  starve, and the parameter change shrinks with the step whether or not the learner has
  converged (kept as the ablation of that failure). The reservoir keeps a
uniform sample of the visited states (Vitter's algorithm R); ``reservoir=0`` takes the exact
minimum over all states (tabular-size checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from icml25.core.mdp import TabularMDP, policy_gain
from icml25.pipelines.robust_rl.robust_planning import robust_gain
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

SCHEDULES = ("visit", "global")


@dataclass
class RobustLinearQ:
    """The learner's state: parameters, step counter and the reservoir of visited states."""

    features: np.ndarray  # (S, A, d)
    gamma: float
    radius: float
    alpha0: float = 0.05
    k0: float = 1e4
    reservoir_size: int = 1000
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    schedule: str = "visit"
    theta: np.ndarray = field(init=False)
    k: int = field(init=False, default=0)
    reservoir: list = field(init=False, default_factory=list)
    _seen: int = field(init=False, default=0)
    _counts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self._flat = np.ascontiguousarray(self.features.reshape(-1, self.features.shape[-1]))
        if not 0.0 <= self.gamma < 1.0:
            raise ValueError(f"gamma must lie in [0, 1); got {self.gamma}")
        if not 0.0 <= self.radius <= 1.0:
            raise ValueError(f"contamination radius must lie in [0, 1]; got {self.radius}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"step-size schedule {self.schedule!r} is unknown; expected one of "
                             f"{SCHEDULES}")
        self.theta = np.zeros(self.features.shape[-1])
        self._counts = np.zeros(self.features.shape[0], dtype=np.int64)
        self.visits = np.zeros(self.features.shape[:2], dtype=np.int64)

    def q_values(self, s: int) -> np.ndarray:
        return self.features[s] @ self.theta

    def state_values(self) -> np.ndarray:
        """``max_a phi(s, a)^T theta`` for every state (one matrix-vector product)."""
        return (self._flat @ self.theta).reshape(self.features.shape[:2]).max(axis=1)

    def observe_state(self, s: int) -> None:
        """Reservoir sampling (algorithm R) over the stream of visited states."""
        self._seen += 1
        if len(self.reservoir) < self.reservoir_size:
            self.reservoir.append(s)
            self._counts[s] += 1
        else:
            j = int(self.rng.integers(self._seen))
            if j < self.reservoir_size:
                self._counts[self.reservoir[j]] -= 1
                self.reservoir[j] = s
                self._counts[s] += 1

    def worst_value(self, values: np.ndarray | None = None) -> float:
        """``m``: min over the reservoir (or all states) of ``max_a phi^T theta``."""
        values = self.state_values() if values is None else values
        if self.reservoir_size == 0:
            return float(values.min())
        # the reservoir as a multiset of states: the min over its distinct members
        return float(values[self._counts > 0].min())

    def step_size(self, s: int | None = None, a: int | None = None) -> float:
        """The step of the next update at ``(s, a)`` (module docstring, ``schedule``)."""
        if self.schedule == "global":
            return self.alpha0 / (1.0 + self.k / self.k0)
        if s is None or a is None:
            raise ValueError("the visit-count schedule needs the pair (s, a) of the update")
        return self.alpha0 / (1.0 + self.visits[s, a] / self.k0)

    def update(self, s: int, a: int, r: float, s_next: int) -> float:
        """One semi-gradient robust TD update; returns ``||theta_k - theta_{k-1}||``."""
        if self.reservoir_size:
            self.observe_state(s_next)
        values = self.state_values()
        nominal = float(values[s_next])
        worst = self.worst_value(values) if self.radius > 0 else 0.0
        y = r + self.gamma * ((1.0 - self.radius) * nominal + self.radius * worst)
        phi = self.features[s, a]
        delta = self.step_size(s, a) * (y - phi @ self.theta) * phi
        self.theta = self.theta + delta
        self.k += 1
        self.visits[s, a] += 1
        return float(np.linalg.norm(delta))


def tabular_robust_q_update(Q: np.ndarray, s: int, a: int, r: float, s_next: int, gamma: float,
                            radius: float, alpha: float, states: np.ndarray) -> np.ndarray:
    """Tabular robust Q-learning (contamination): ``Q(s, a) += alpha (r + gamma[(1 - R) max Q(s')
    + R min_{s~ in states} max Q(s~)] - Q(s, a))``; the reference the linear learner must match
    with one-hot features."""
    Q = Q.copy()
    target = r + gamma * ((1.0 - radius) * Q[s_next].max() + radius * Q[states].max(axis=1).min())
    Q[s, a] += alpha * (target - Q[s, a])
    return Q


@dataclass(frozen=True)
class TraceConfig:
    steps: int
    explore: float = 0.1
    eval_every: int = 10_000


def train_linear(mdp: TabularMDP, features: np.ndarray, gamma: float, radius: float,
                 cfg: TraceConfig, rng: np.random.Generator, eval_set: UncertaintySet,
                 alpha0: float = 0.05, k0: float = 1e4, reservoir_size: int = 1000,
                 progress: bool = True, desc: str = "linear Q", schedule: str = "visit",
                 q_reference: np.ndarray | None = None) -> tuple[RobustLinearQ, list]:
    """Run the learner on one continuing trajectory of the nominal model; every
    ``eval_every`` steps record the parameter change and the exact robust and nominal gains of
    the greedy policy (the model is known, so evaluation is exact), and the fewest updates any
    pair has had. With ``q_reference`` (the tabular answer, shape ``(S, A)``) each record also
    holds ``q_error = ||Phi theta - Q_ref||_inf`` and ``q_rel_error = q_error / ||Q_ref||_inf``."""
    S, A, _ = mdp.P.shape
    learner = RobustLinearQ(features, gamma, radius, alpha0=alpha0, k0=k0,
                            reservoir_size=reservoir_size, rng=rng, schedule=schedule)
    if q_reference is not None:
        q_reference = np.asarray(q_reference, dtype=float)
        if q_reference.shape != (S, A) or not np.all(np.isfinite(q_reference)):
            raise ValueError(f"q_reference must be a finite (S, A) = ({S}, {A}) array; got "
                             f"shape {q_reference.shape}")
        q_scale = max(float(np.abs(q_reference).max()), 1e-12)
    s = int(rng.integers(S))
    trace = []
    window_change = 0.0
    theta_prev_eval = learner.theta.copy()
    explore = rng.random(cfg.steps) < cfg.explore
    random_actions = rng.integers(A, size=cfg.steps)
    # inverse-CDF draws as in icml25.core.mdp.sample_next_states, one uniform per step
    cdf = np.cumsum(mdp.P, axis=2)
    uniforms = rng.random(cfg.steps)
    for k in tqdm(range(cfg.steps), desc=desc, disable=not progress, leave=False,
                  mininterval=1.0):
        a = int(random_actions[k]) if explore[k] else int(learner.q_values(s).argmax())
        s_next = min(int(np.searchsorted(cdf[s, a], uniforms[k], side="left")), S - 1)
        window_change += learner.update(s, a, float(mdp.r[s, a]), s_next)
        s = s_next
        if (k + 1) % cfg.eval_every == 0 or k + 1 == cfg.steps:
            q_lin = features @ learner.theta
            greedy = q_lin.argmax(axis=1)
            errors = {}
            if q_reference is not None:
                err = float(np.abs(q_lin - q_reference).max())
                errors = {"q_error": err, "q_rel_error": err / q_scale}
            trace.append({
                "step": k + 1,
                "mean_update_norm": window_change / cfg.eval_every,
                "theta_change": float(np.linalg.norm(learner.theta - theta_prev_eval)),
                "theta_norm": float(np.linalg.norm(learner.theta)),
                "robust_gain": robust_gain(mdp.P, mdp.r, eval_set, greedy),
                "nominal_gain": float(np.mean(policy_gain(mdp.P, mdp.r, greedy, tol=1e-11))),
                "min_visits": int(learner.visits.min()),
                **errors,
            })
            window_change = 0.0
            theta_prev_eval = learner.theta.copy()
    return learner, trace


def robust_q_star(mdp: TabularMDP, gamma: float, radius: float, tol: float = 1e-12,
                  max_iter: int = 10_000_000) -> np.ndarray:
    """The tabular answer: the fixed point ``Q*`` of the robust (contamination) Bellman operator
    ``Q = r + gamma [(1 - R) P max_a Q + R min_s max_a Q]`` at discount ``gamma``, by value
    iteration to ``||dQ||_inf <= tol (1 - gamma)`` (a gamma-contraction, so ``Q`` is then within
    ``tol`` of the fixed point)."""
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma must lie in [0, 1); got {gamma}")
    Q = np.zeros_like(mdp.r, dtype=float)
    for _ in range(max_iter):
        V = Q.max(axis=1)
        new = mdp.r + gamma * ((1.0 - radius) * (mdp.P @ V) + radius * V.min())
        if np.abs(new - Q).max() <= tol * (1.0 - gamma):
            return new
        Q = new
    raise RuntimeError(f"robust Q value iteration did not converge in {max_iter} sweeps")


def relative_change(theta_hist: list[np.ndarray]) -> float:
    """``||theta_T - theta_{T'}|| / ||theta_T||`` between the last two recorded parameters."""
    last, before = theta_hist[-1], theta_hist[-2]
    return float(np.linalg.norm(last - before) / max(np.linalg.norm(last), 1e-12))
