"""Finite (tabular) Markov decision processes: validation, exact planning, and the generators that
several papers share (RiverSwim, Garnet kernels).

Conventions used throughout icml25:

* ``P`` has shape ``(S, A, S)`` with ``P[s, a, s']`` the probability of moving from ``s`` to ``s'``
  under action ``a``; every row ``P[s, a]`` sums to one.
* ``r`` has shape ``(S, A)``.
* A deterministic policy is an integer array of shape ``(S,)``; a stochastic one has shape
  ``(S, A)`` with rows summing to one.

Everything here is plain numpy (plus scipy's HiGHS for the LP cross-check) and knows no paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROW_TOL = 1e-8


class MDPError(ValueError):
    """A transition kernel, reward table or policy that is not a valid finite MDP."""


@dataclass(frozen=True)
class TabularMDP:
    """A validated finite MDP ``(P, r)``; see the module docstring for the shapes."""

    P: np.ndarray
    r: np.ndarray
    name: str = "mdp"

    def __post_init__(self) -> None:
        P = np.asarray(self.P, dtype=float)
        r = np.asarray(self.r, dtype=float)
        validate_kernel(P, what=f"{self.name}.P")
        if r.shape != P.shape[:2]:
            raise MDPError(f"{self.name}.r has shape {r.shape}; expected (S, A) = {P.shape[:2]}")
        if not np.all(np.isfinite(r)):
            raise MDPError(f"{self.name}.r contains NaN or infinite rewards")
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "r", r)

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]


def validate_kernel(P: np.ndarray, what: str = "P") -> None:
    """Refuse anything that is not a stochastic ``(S, A, S)`` kernel, naming the first bad row."""
    if P.ndim != 3 or P.shape[0] != P.shape[2] or P.shape[0] == 0 or P.shape[1] == 0:
        raise MDPError(f"{what} must have shape (S, A, S) with S, A >= 1; got {P.shape}")
    if not np.all(np.isfinite(P)):
        raise MDPError(f"{what} contains NaN or infinite probabilities")
    if np.any(P < -ROW_TOL):
        s, a, s2 = np.argwhere(P < -ROW_TOL)[0]
        raise MDPError(f"{what}[{s}, {a}, {s2}] = {P[s, a, s2]:.3g} is negative")
    sums = P.sum(axis=2)
    bad = np.argwhere(np.abs(sums - 1.0) > 1e-6)
    if bad.size:
        s, a = bad[0]
        raise MDPError(f"{what}[{s}, {a}] sums to {sums[s, a]:.6g}, not 1 (rows must be distributions)")


def policy_matrix(policy: np.ndarray, n_states: int, n_actions: int) -> np.ndarray:
    """A deterministic ``(S,)`` or stochastic ``(S, A)`` policy as an ``(S, A)`` matrix."""
    policy = np.asarray(policy)
    if policy.ndim == 1:
        if policy.shape != (n_states,) or policy.min() < 0 or policy.max() >= n_actions:
            raise MDPError(f"deterministic policy must be {n_states} actions in [0, {n_actions})")
        pi = np.zeros((n_states, n_actions))
        pi[np.arange(n_states), policy.astype(int)] = 1.0
        return pi
    if policy.shape != (n_states, n_actions) or np.any(np.abs(policy.sum(1) - 1) > 1e-6):
        raise MDPError(f"stochastic policy must have shape {(n_states, n_actions)} with unit rows")
    return policy.astype(float)


def induced_chain(P: np.ndarray, r: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Markov chain ``P_pi`` (S, S) and reward vector ``r_pi`` (S,) a policy induces."""
    pi = policy_matrix(policy, P.shape[0], P.shape[1])
    return np.einsum("sa,sat->st", pi, P), np.einsum("sa,sa->s", pi, r)


def stationary_distribution(P_pi: np.ndarray) -> np.ndarray:
    """The stationary distribution of a unichain ``P_pi`` (least squares on ``mu (P - I) = 0``)."""
    S = P_pi.shape[0]
    A = np.vstack([(P_pi - np.eye(S)).T, np.ones((1, S))])
    b = np.zeros(S + 1)
    b[-1] = 1.0
    mu, *_ = np.linalg.lstsq(A, b, rcond=None)
    mu = np.clip(mu, 0.0, None)
    return mu / mu.sum()


def policy_gain(P: np.ndarray, r: np.ndarray, policy: np.ndarray, tol: float = 1e-12,
                max_iter: int = 1_000_000) -> np.ndarray:
    """Exact average reward ``g_pi(s)`` of a fixed policy from every start state.

    Uses the Cesàro limit through the aperiodic transform ``(P + I) / 2`` (same gain, no
    oscillation on periodic chains), iterated to convergence; multichain policies are handled
    because the limit is taken per start state.
    """
    P_pi, r_pi = induced_chain(P, r, policy)
    S = P_pi.shape[0]
    M = 0.5 * (P_pi + np.eye(S))
    h = np.zeros(S)
    g = np.zeros(S)
    for _ in range(max_iter):
        h_new = r_pi + M @ h
        g_new = h_new - h
        h = h_new - h_new[0]
        if np.max(np.abs(g_new - g)) < tol:
            return g_new
        g = g_new
    return g


def relative_value_iteration(P: np.ndarray, r: np.ndarray, tol: float = 1e-10,
                             max_iter: int = 1_000_000, aperiodic: float = 0.5,
                             ref_state: int = 0) -> tuple[float, np.ndarray, np.ndarray]:
    """Optimal gain ``rho*``, bias ``h`` and a greedy optimal policy of a communicating MDP.

    ``h_{k+1} = T h_k - (T h_k)(ref_state)`` with ``T h = max_a [r + P h]`` applied to the
    aperiodic transform ``P' = aperiodic * I + (1 - aperiodic) * P`` (Puterman §8.5.4; the gain is
    unchanged, the bias is scaled by ``1 / (1 - aperiodic)``, which is undone on return). Stops
    when the span of ``T h - h`` is below ``tol``; the gain is the midpoint of its range.
    """
    validate_kernel(P)
    S = P.shape[0]
    Pa = aperiodic * np.eye(S)[:, None, :] + (1.0 - aperiodic) * P
    h = np.zeros(S)
    for _ in range(max_iter):
        Q = r + Pa @ h
        Th = Q.max(axis=1)
        diff = Th - h
        span = diff.max() - diff.min()
        h = Th - Th[ref_state]
        if span < tol:
            gain = 0.5 * (diff.max() + diff.min())
            return float(gain), h * (1.0 - aperiodic), Q.argmax(axis=1)
    raise MDPError(f"relative value iteration did not reach span {tol:g} in {max_iter} sweeps "
                   "(is the MDP communicating?)")


def average_reward_lp(P: np.ndarray, r: np.ndarray) -> float:
    """Optimal gain of a unichain/communicating MDP by the occupancy-measure LP (HiGHS).

    max_x sum r x  s.t.  sum_a x(s', a) = sum_{s, a} P(s'|s, a) x(s, a),  sum x = 1,  x >= 0.
    """
    from scipy.optimize import linprog

    S, A, _ = P.shape
    n = S * A
    flow = np.zeros((S, n))
    for s in range(S):
        for a in range(A):
            flow[s, s * A + a] += 1.0
            flow[:, s * A + a] -= P[s, a]
    A_eq = np.vstack([flow, np.ones((1, n))])
    b_eq = np.zeros(S + 1)
    b_eq[-1] = 1.0
    res = linprog(-r.reshape(-1), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if not res.success:
        raise MDPError(f"average-reward LP failed: {res.message}")
    return float(-res.fun)


def discounted_value_iteration(P: np.ndarray, r: np.ndarray, gamma: float, tol: float = 1e-8,
                               max_iter: int = 10_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Optimal discounted values ``V*`` and a greedy policy; stops at ``||dV|| <= tol (1 - gamma)``."""
    if not 0.0 <= gamma < 1.0:
        raise MDPError(f"discount factor must lie in [0, 1); got {gamma}")
    V = np.zeros(P.shape[0])
    for _ in range(max_iter):
        Q = r + gamma * (P @ V)
        V_new = Q.max(axis=1)
        if np.max(np.abs(V_new - V)) <= tol * (1.0 - gamma):
            return V_new, Q.argmax(axis=1)
        V = V_new
    return V, (r + gamma * (P @ V)).argmax(axis=1)


def discounted_policy_iteration(P: np.ndarray, r: np.ndarray, gamma: float,
                                max_iter: int = 1000) -> np.ndarray:
    """Howard's policy iteration (exact evaluation by a linear solve): an optimal discounted
    policy in a few iterations even for ``gamma`` next to 1, where value iteration crawls."""
    S = P.shape[0]
    pi = r.argmax(axis=1)
    for _ in range(max_iter):
        P_pi = P[np.arange(S), pi]
        V = np.linalg.solve(np.eye(S) - gamma * P_pi, r[np.arange(S), pi])
        Q = r + gamma * (P @ V)
        # keep the current action unless another is strictly better (no cycling on ties)
        better = Q.max(axis=1) > Q[np.arange(S), pi] + 1e-12 * max(1.0, np.abs(V).max())
        if not better.any():
            return pi
        pi = np.where(better, Q.argmax(axis=1), pi)
    raise MDPError(f"policy iteration did not stabilise in {max_iter} iterations")


def is_communicating(P: np.ndarray, eps: float = 0.0) -> bool:
    """True when every state reaches every other under some policy (union graph strongly connected)."""
    adj = (eps < P).any(axis=1)
    S = adj.shape[0]
    reach = adj | np.eye(S, dtype=bool)
    for _ in range(int(np.ceil(np.log2(max(S, 2)))) + 1):
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    return bool(reach.all())


def sample_next_states(P: np.ndarray, states: np.ndarray, actions: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
    """Vectorised draw of ``s' ~ P(.|s, a)`` for arrays of states and actions (inverse CDF)."""
    cdf = np.cumsum(P[states, actions], axis=-1)
    u = rng.random(np.shape(states))[..., None]
    return np.minimum((u > cdf).sum(axis=-1), P.shape[0] - 1)


def riverswim(n_states: int = 6) -> TabularMDP:
    """RiverSwim (Strehl & Littman 2008; the Osband/Fruit variant). Actions: 0 = left, 1 = right.

    Left moves to ``max(s - 1, 0)`` surely. Right: at 0 stay 0.4 / right 0.6; in the middle right
    0.35 / stay 0.6 / left 0.05; at the end stay 0.6 / left 0.4. Rewards ``r(0, left) = 0.05``,
    ``r(S - 1, right) = 1``, else 0.
    """
    if n_states < 2:
        raise MDPError(f"RiverSwim needs at least 2 states; got {n_states}")
    S = n_states
    P = np.zeros((S, 2, S))
    for s in range(S):
        P[s, 0, max(s - 1, 0)] = 1.0
    P[0, 1, 0], P[0, 1, 1] = 0.4, 0.6
    for s in range(1, S - 1):
        P[s, 1, s + 1], P[s, 1, s], P[s, 1, s - 1] = 0.35, 0.6, 0.05
    P[S - 1, 1, S - 1], P[S - 1, 1, S - 2] = 0.6, 0.4
    r = np.zeros((S, 2))
    r[0, 0] = 0.05
    r[S - 1, 1] = 1.0
    return TabularMDP(P, r, name=f"riverswim_{S}")


def garnet_kernel(n_states: int, n_actions: int, branching: int, rng: np.random.Generator,
                  uniform_mix: float = 0.0) -> np.ndarray:
    """A Garnet kernel: each row puts Dirichlet(1) mass on ``branching`` random next states, then
    mixes in ``uniform_mix`` of the uniform distribution (``> 0`` makes every policy ergodic)."""
    if not 1 <= branching <= n_states:
        raise MDPError(f"garnet branching must lie in [1, {n_states}]; got {branching}")
    if not 0.0 <= uniform_mix <= 1.0:
        raise MDPError(f"garnet uniform_mix must lie in [0, 1]; got {uniform_mix}")
    P = np.zeros((n_states, n_actions, n_states))
    for s in range(n_states):
        for a in range(n_actions):
            support = rng.choice(n_states, size=branching, replace=False)
            P[s, a, support] = rng.dirichlet(np.ones(branching))
    return (1.0 - uniform_mix) * P + uniform_mix / n_states
