"""Exact optimal play against a known partner FSM by backward dynamic programming (the
regret of the paper's functional ToM, Def. 2.2):

    V_0(z) = 0,  Q_k(z, a) = E_{b ~ f(z)} [ R[a, b] + V_{k-1}(g(z, a, b)) ],  V_k(z) = max_a Q_k(z, a)

with ``k`` the number of rounds remaining; ``V*_T = V_T(z0)``. The same recursion with ``min``
gives ``V_min``, the lowest return any action sequence can get (the bound of the regret tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml25.pipelines.functional_tom.games import Game
from icml25.pipelines.functional_tom.partners import PartnerFSM


@dataclass(frozen=True)
class OptimalPlay:
    """DP tables: ``q[k, z, a]`` and ``v[k, z]`` for k = 0..T rounds remaining, the minimum
    value ``v_min[k, z]``, and ``r_star[t]`` (t = 0..T-1): the expected reward at round t+1 of the
    optimal policy (first optimal action) started in ``z0``; ``sum(r_star) == v_star``."""

    q: np.ndarray
    v: np.ndarray
    v_min: np.ndarray
    r_star: np.ndarray
    z0: int

    @property
    def horizon(self) -> int:
        return self.v.shape[0] - 1

    @property
    def v_star(self) -> float:
        return float(self.v[-1, self.z0])

    @property
    def v_worst(self) -> float:
        return float(self.v_min[-1, self.z0])

    def optimal_actions(self, t: int, z: int, tol: float = 1e-9) -> np.ndarray:
        """All optimal actions at round ``t`` (0-based) in partner state ``z``."""
        q = self.q[self.horizon - t, z]
        return np.flatnonzero(q >= q.max() - tol)


def solve(game: Game, partner: PartnerFSM, horizon: int) -> OptimalPlay:
    """Backward DP over (rounds remaining, partner state); see the module docstring."""
    if horizon < 1:
        raise ValueError(f"horizon: got {horizon}; expected a positive integer")
    if partner.probs.shape[1] != game.n_actions or partner.next_state.shape[1] != game.n_actions:
        raise ValueError(f"partner {partner.name} does not fit game {game.name}")
    probs, nxt, payoff = partner.probs, partner.next_state, game.payoff
    n_z, n_a = probs.shape[0], game.n_actions
    q = np.zeros((horizon + 1, n_z, n_a))
    v = np.zeros((horizon + 1, n_z))
    v_min = np.zeros((horizon + 1, n_z))
    immediate = probs @ payoff.T  # [z, a] = sum_b p(b|z) R[a, b]
    for k in range(1, horizon + 1):
        # cont[z, a] = sum_b p(b|z) V_{k-1}(g(z, a, b))
        q[k] = immediate + np.einsum("zb,zab->za", probs, v[k - 1][nxt])
        v[k] = q[k].max(axis=1)
        v_min[k] = (immediate + np.einsum("zb,zab->za", probs, v_min[k - 1][nxt])).min(axis=1)
    # forward pass of the optimal policy's state distribution for the per-round rewards r*_t
    r_star = np.zeros(horizon)
    occupancy = np.zeros(n_z)
    occupancy[partner.z0] = 1.0
    for t in range(horizon):
        a_star = q[horizon - t].argmax(axis=1)  # [z]
        r_star[t] = occupancy @ immediate[np.arange(n_z), a_star]
        new = np.zeros(n_z)
        trans = nxt[np.arange(n_z), a_star]  # [z, b]
        np.add.at(new, trans.ravel(), (occupancy[:, None] * probs).ravel())
        occupancy = new
    return OptimalPlay(q=q, v=v, v_min=v_min, r_star=r_star, z0=partner.z0)


def brute_force_value(game: Game, partner: PartnerFSM, horizon: int) -> tuple[float, float]:
    """(max, min) expected return over all open-loop-by-history policies for a *deterministic*
    partner, by enumerating every agent action sequence (tests only; |A|^T sequences)."""
    if not partner.deterministic:
        raise ValueError("brute force enumerates deterministic partners only")
    best, worst = -np.inf, np.inf
    for seq in np.ndindex(*([game.n_actions] * horizon)):
        z, total = partner.z0, 0.0
        for a in seq:
            b = int(partner.probs[z].argmax())
            total += game.payoff[a, b]
            z = partner.step(z, a, b)
        best, worst = max(best, total), min(worst, total)
    return best, worst
