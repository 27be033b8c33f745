"""The reduction from robust average reward to robust discounted RL, and its tabular baselines.

docs/papers/robust_rl.md, "The method" (the reduction and the model-based algorithm):

* for any policy ``|(1 - g) V^pi_g - g^pi| <= (1 - g) H`` when every robust bias span is at most
  ``H``; hence with ``g = 1 - eps / H`` an ``H``-optimal robust discounted policy is
  ``3 eps``-optimal for the robust average reward;
* the model-based algorithm estimates ``P_hat`` from ``N`` generative samples per (s, a), runs
  robust value iteration (DRVI) at that discount on the set centred at ``P_hat`` and returns the
  greedy policy, whose robust gain is then measured exactly on the set centred at the true ``P0``.

Baselines: the same planner at a fixed discount, the non-robust average-reward
plug-in policy of ``P_hat``, robust RVI on ``P_hat``, and model-free robust RVI Q-learning
(Wang et al., ICML 2023) with the same sample budget ``S A N``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from icml25.core.mdp import (
    discounted_policy_iteration,
    is_communicating,
    relative_value_iteration,
    sample_next_states,
)
from icml25.pipelines.robust_rl.robust_planning import (
    robust_relative_value_iteration,
    robust_value_iteration,
    span,
)
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

logger = logging.getLogger(__name__)

GAMMA_CLAMP = (0.5, 0.9999)
#: Discount used for a gain-optimal plug-in policy when ``P_hat`` is not communicating: in a
#: finite MDP a discount close enough to 1 yields a Blackwell-, hence gain-optimal policy.
BLACKWELL_GAMMA = 0.9999


@dataclass(frozen=True)
class ReductionDiscount:
    """The discount of the reduction: raw ``1 - eps / H`` and the value clamped for planning."""

    eps: float
    H: float
    gamma_raw: float
    gamma: float

    @property
    def clamped(self) -> bool:
        """Whether the planning discount differs from the raw ``1 - eps / H``."""
        return self.gamma != self.gamma_raw


def reduction_discount(eps: float, H: float, clamp: tuple[float, float] = GAMMA_CLAMP
                       ) -> ReductionDiscount:
    """``gamma = 1 - eps / H`` clamped to ``clamp`` (default ``[0.5, 0.9999]``); both are kept.

    A clamped discount is logged as a warning: ``eps >= H / 2`` gives a raw discount below 0.5
    (``eps >= H`` a negative one, which is no discount at all), so the reduction's guarantee
    ``3 eps`` does not apply to the clamped planner; the callers record ``gamma_raw``, ``gamma``
    and whether it was clamped in their tables and in MLflow."""
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps (target accuracy) must be a finite number > 0; got {eps!r}")
    if not (math.isfinite(H) and H >= 0):
        raise ValueError(f"H (span bound) must be finite and >= 0; got {H!r}")
    gamma_raw = 1.0 - eps / H if H > 0 else -math.inf
    out = ReductionDiscount(float(eps), float(H), gamma_raw,
                            float(min(max(gamma_raw, clamp[0]), clamp[1])))
    if out.clamped:
        logger.warning("robust_rl: the reduction's discount 1 - eps / H = 1 - %g / %g = %.4g lies "
                       "outside [%g, %g] and is clamped to %g; the 3 eps guarantee does not "
                       "hold for the clamped planner", eps, H, gamma_raw, clamp[0], clamp[1],
                       out.gamma)
    return out


def estimate_span_bound(P: np.ndarray, r: np.ndarray, uset: UncertaintySet, c_H: float,
                        tol: float = 1e-10) -> float:
    """``H_hat = c_H Sp(h_hat*)`` from robust RVI on the (empirical) model (``c_H = 2`` by default)."""
    _, h, _ = robust_relative_value_iteration(P, r, uset, tol=tol)
    return c_H * span(h)


def empirical_kernel(P: np.ndarray, n_samples: int, rng: np.random.Generator,
                     chunk: int = 256) -> np.ndarray:
    """``P_hat(.|s, a)``: frequencies of ``n_samples`` generative draws ``s' ~ P(.|s, a)``."""
    if n_samples < 1:
        raise ValueError(f"samples per (s, a) must be >= 1; got {n_samples}")
    S, A, _ = P.shape
    counts = np.zeros((S * A, S))
    states = np.repeat(np.arange(S), A)
    actions = np.tile(np.arange(A), S)
    done = 0
    while done < n_samples:
        m = min(chunk, n_samples - done)
        nxt = sample_next_states(P, np.repeat(states[:, None], m, 1),
                                 np.repeat(actions[:, None], m, 1), rng)
        rows = np.repeat(np.arange(S * A)[:, None], m, 1)
        np.add.at(counts, (rows.ravel(), nxt.ravel()), 1.0)
        done += m
    return (counts / n_samples).reshape(S, A, S)


def reduction_policy(P_hat: np.ndarray, r: np.ndarray, uset: UncertaintySet, gamma: float,
                     tol: float = 1e-8) -> np.ndarray:
    """Greedy policy of DRVI at discount ``gamma`` on the set centred at ``P_hat``."""
    return robust_value_iteration(P_hat, r, uset, gamma, tol=tol)[1]


def robust_rvi_policy(P_hat: np.ndarray, r: np.ndarray, uset: UncertaintySet,
                      tol: float = 1e-10, max_iter: int = 20_000
                      ) -> tuple[np.ndarray, float, bool]:
    """Robust RVI on ``P_hat`` (direct robust average planning): greedy policy, span of h and
    whether it converged. Chi-square and KL balls cannot leave the support of ``P_hat``, so an
    empirical model that misses a transition can be multichain for them; RRVI then does not
    settle and its last iterate is used (flagged, never silently)."""
    gain, h, pi = robust_relative_value_iteration(P_hat, r, uset, tol=tol, max_iter=max_iter,
                                                  strict=False)
    return pi, span(h), bool(np.isfinite(gain))


def nonrobust_plugin_policy(P_hat: np.ndarray, r: np.ndarray, tol: float = 1e-10
                            ) -> tuple[np.ndarray, bool]:
    """Average-reward optimal policy of ``P_hat`` ignoring uncertainty; ``(policy, communicating)``.

    RVI needs a communicating model; an empirical kernel that misses a rare transition may not
    be, and then a discount of 0.9999 gives a gain-optimal (Blackwell) policy instead.
    """
    if is_communicating(P_hat):
        return relative_value_iteration(P_hat, r, tol=tol, max_iter=200_000)[2], True
    return discounted_policy_iteration(P_hat, r, BLACKWELL_GAMMA), False


def robust_rvi_q_learning(P: np.ndarray, r: np.ndarray, radius: float, n_iter: int,
                          rng: np.random.Generator | None = None, exact: bool = False,
                          step_power: float = 0.7, ref: tuple[int, int] = (0, 0)
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Robust RVI Q-learning for the contamination set (Wang et al., ICML 2023), synchronous.

    ``Q <- Q + a_n (r + sigma_hat(max Q) - f(Q) - Q)`` with ``f(Q) = Q(s_ref, a_ref)`` and
    ``sigma_hat(v) = (1 - R) v(s') + R min_s v(s)`` from one generative draw ``s'`` per (s, a)
    per sweep (``exact=True`` uses the expectation ``P v`` instead, the noise-free iteration);
    ``a_n = (n + 1)^(-step_power)``. ``n_iter`` sweeps use ``S A n_iter`` samples. Returns
    ``(Q, f(Q) trace)``; ``f(Q)`` converges to the robust optimal gain.
    """
    S, A, _ = P.shape
    if not exact and rng is None:
        raise ValueError("robust_rvi_q_learning: a random generator is needed unless exact=True")
    Q = np.zeros((S, A))
    trace = np.empty(n_iter)
    states = np.repeat(np.arange(S)[:, None], A, 1)
    actions = np.repeat(np.arange(A)[None, :], S, 0)
    for n in range(n_iter):
        v = Q.max(axis=1)
        nominal = P @ v if exact else v[sample_next_states(P, states, actions, rng)]
        target = r + (1.0 - radius) * nominal + radius * v.min() - Q[ref]
        Q = Q + (n + 1.0) ** (-step_power) * (target - Q)
        trace[n] = Q[ref]
    return Q, trace

