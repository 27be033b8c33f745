"""Robust Q-learning with linear function approximation for the contamination set.

docs/papers/robust_rl.md, "The method" (function approximation): a robust *discounted* learner run at the
reduction's discount ``gamma = 1 - eps / H``. With features ``phi(s, a)`` and parameters
``theta`` the target is

    y = r + gamma [(1 - R) max_a' phi(s', a')^T theta + R m],
    m = min over a reservoir of visited states s~ of max_a phi(s~, a)^T theta,

(the contamination support function needs only ``min V``; Wang & Zou 2021 use the same target),
and the semi-gradient update is ``theta <- theta + alpha_k (y - phi(s, a)^T theta) phi(s, a)``
with ``alpha_k = alpha_0 / (1 + k / k_0)``, behaviour epsilon-greedy. The reservoir keeps a
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
        self.theta = np.zeros(self.features.shape[-1])
        self._counts = np.zeros(self.features.shape[0], dtype=np.int64)

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

    def step_size(self) -> float:
        return self.alpha0 / (1.0 + self.k / self.k0)

    def update(self, s: int, a: int, r: float, s_next: int) -> float:
        """One semi-gradient robust TD update; returns ``||theta_k - theta_{k-1}||``."""
        if self.reservoir_size:
            self.observe_state(s_next)
        values = self.state_values()
        nominal = float(values[s_next])
        worst = self.worst_value(values) if self.radius > 0 else 0.0
        y = r + self.gamma * ((1.0 - self.radius) * nominal + self.radius * worst)
        phi = self.features[s, a]
        delta = self.step_size() * (y - phi @ self.theta) * phi
        self.theta = self.theta + delta
        self.k += 1
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
                 progress: bool = True, desc: str = "linear Q") -> tuple[RobustLinearQ, list]:
    """Run the learner on one continuing trajectory of the nominal model; every
    ``eval_every`` steps record the parameter change and the exact robust and nominal gains of
    the greedy policy (the model is known, so evaluation is exact)."""
    S, A, _ = mdp.P.shape
    learner = RobustLinearQ(features, gamma, radius, alpha0=alpha0, k0=k0,
                            reservoir_size=reservoir_size, rng=rng)
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
            greedy = (features @ learner.theta).argmax(axis=1)
            trace.append({
                "step": k + 1,
                "mean_update_norm": window_change / cfg.eval_every,
                "theta_change": float(np.linalg.norm(learner.theta - theta_prev_eval)),
                "theta_norm": float(np.linalg.norm(learner.theta)),
                "robust_gain": robust_gain(mdp.P, mdp.r, eval_set, greedy),
                "nominal_gain": float(np.mean(policy_gain(mdp.P, mdp.r, greedy, tol=1e-11))),
            })
            window_change = 0.0
            theta_prev_eval = learner.theta.copy()
    return learner, trace


def relative_change(theta_hist: list[np.ndarray]) -> float:
    """``||theta_T - theta_{T'}|| / ||theta_T||`` between the last two recorded parameters."""
    last, before = theta_hist[-1], theta_hist[-2]
    return float(np.linalg.norm(last - before) / max(np.linalg.norm(last), 1e-12))
