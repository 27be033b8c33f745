"""Optimistic planning over l1 confidence sets: extended value iteration (EVI).

Jaksch, Ortner, Auer (2010), "Near-optimal regret bounds for reinforcement learning", §3.1.1 and
Fig. 2: ``u_{i+1}(s) = max_a [ r(s, a) + max_{p in B(s, a)} p . u_i ]`` with
``B(s, a) = {p in simplex : ||p - P_hat(.|s, a)||_1 <= beta(s, a)}``. The inner maximum is closed
form: put ``min(1, P_hat(top) + beta/2)`` on the state with the largest ``u`` and remove the excess
from the states with the smallest ``u`` first. Here it is vectorised over every ``(s, a)`` with one
sort per sweep, and the iteration runs on the aperiodic transform ``u <- a u + (1 - a) T u``
(same gain and greedy policies, no oscillation on periodic optimistic models).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EVIResult:
    """Greedy optimistic policy, its optimistic gain estimate and the work done."""

    policy: np.ndarray
    gain: float
    u: np.ndarray
    sweeps: int
    converged: bool


def optimistic_transitions(P_hat: np.ndarray, beta: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``argmax_{p in B(s, a)} p . u`` for every row of ``P_hat`` (shape ``(..., S)``) at once.

    ``beta`` has shape ``P_hat.shape[:-1]``. Ties in ``u`` are broken by state index (stable sort),
    which does not change the attained maximum.
    """
    order = np.argsort(-u, kind="stable")
    q = P_hat[..., order]
    add = np.minimum(1.0 - q[..., 0], 0.5 * np.asarray(beta, dtype=float))
    low = q[..., :0:-1]  # every state but the top one, smallest u first
    removed_before = np.cumsum(low, axis=-1) - low
    removed = np.clip(add[..., None] - removed_before, 0.0, low)
    sorted_p = np.concatenate([(q[..., 0] + add)[..., None], (low - removed)[..., ::-1]], axis=-1)
    out = np.empty_like(sorted_p)
    out[..., order] = sorted_p
    return out


def extended_value_iteration(P_hat: np.ndarray, r: np.ndarray, beta: np.ndarray, eps: float,
                             aperiodic: float = 0.5, max_sweeps: int = 200_000) -> EVIResult:
    """EVI until ``span(T u - u) < eps``; greedy policy with ties to the lowest action index.

    ``P_hat``: (S, A, S) centre of the confidence sets, ``r``: (S, A) known rewards, ``beta``:
    (S, A) l1 radii. The gain estimate is the midpoint of ``T u - u`` at the last sweep (an
    ``eps/2``-accurate optimistic gain, Jaksch et al. Thm. 7). ``u`` is shifted to ``min u = 0``
    every sweep. If ``max_sweeps`` is reached the last greedy policy is returned with
    ``converged=False`` (the caller logs it).
    """
    if not 0.0 <= aperiodic < 1.0:
        raise ValueError(f"aperiodic must lie in [0, 1); got {aperiodic}")
    S = P_hat.shape[0]
    u = np.zeros(S)
    for sweep in range(1, max_sweeps + 1):
        p = optimistic_transitions(P_hat, beta, u)
        Q = r + p @ u
        Tu = Q.max(axis=1)
        diff = Tu - u
        lo, hi = diff.min(), diff.max()
        if hi - lo < eps:
            return EVIResult(Q.argmax(axis=1), float(0.5 * (lo + hi)), u, sweep, True)
        u = aperiodic * u + (1.0 - aperiodic) * Tu
        u -= u.min()
    return EVIResult(Q.argmax(axis=1), float(0.5 * (lo + hi)), u, max_sweeps, False)
