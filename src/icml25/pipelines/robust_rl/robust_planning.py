"""Robust dynamic programming on (s, a)-rectangular sets: DRVI and robust relative VI.

docs/papers/robust_rl.md, "The method" (robust MDPs):

* robust discounted Bellman operator ``(T_g V)(s) = max_a [r(s, a) + g sigma_{P_sa}(V)]``, a
  ``g``-contraction in sup-norm, solved by robust value iteration (DRVI) with the stopping rule
  ``||V_{k+1} - V_k||_inf <= tol (1 - g)``;
* robust average Bellman equation ``g + h(s) = max_a [r(s, a) + sigma_{P_sa}(h)]``, solved by
  robust relative value iteration (RRVI) with the aperiodicity mix ``h <- h/2 + T(h)/2``
  normalised at a reference state (Wang et al., AAAI 2023, Algorithm 1); at convergence the
  robust optimal gain is ``T(h) - h`` (the midpoint of its range is returned);
* the same with a fixed policy gives the robust policy value ``V^pi_g`` and robust gain ``g^pi``
  (worst kernel chosen by the adversary state by state).
"""

from __future__ import annotations

import numpy as np

from icml25.core.mdp import MDPError, policy_matrix, validate_kernel
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet


class NotConvergedError(MDPError):
    """A robust iteration did not converge (a model outside the unichain assumption)."""


def robust_q(P: np.ndarray, r: np.ndarray, V: np.ndarray, uset: UncertaintySet,
             gamma: float = 1.0) -> np.ndarray:
    """``Q(s, a) = r(s, a) + gamma sigma_{P_sa}(V)``, vectorised over all (s, a)."""
    return r + gamma * uset.sigma(P, V)


def robust_bellman(P: np.ndarray, r: np.ndarray, V: np.ndarray, uset: UncertaintySet,
                   gamma: float = 1.0, policy: np.ndarray | None = None) -> np.ndarray:
    """``T V`` (optimal, max over actions) or ``T_pi V`` (policy-averaged) for the robust MDP."""
    Q = robust_q(P, r, V, uset, gamma)
    if policy is None:
        return Q.max(axis=1)
    pi = policy_matrix(policy, P.shape[0], P.shape[1])
    return np.sum(pi * Q, axis=1)


def _check_gamma(gamma: float) -> None:
    if not 0.0 <= gamma < 1.0:
        raise MDPError(f"discount factor must lie in [0, 1); got {gamma}")


def robust_value_iteration(P: np.ndarray, r: np.ndarray, uset: UncertaintySet, gamma: float,
                           tol: float = 1e-8, max_iter: int = 10_000_000,
                           policy: np.ndarray | None = None
                           ) -> tuple[np.ndarray, np.ndarray, int]:
    """DRVI: iterate ``V <- T_g V`` from 0 until ``||dV||_inf <= tol (1 - g)``.

    Returns ``(V, greedy policy of Q = r + g sigma(V), sweeps)``; with ``policy`` it evaluates
    that policy's robust discounted value instead (the returned policy is then the input's
    greedy action).
    """
    validate_kernel(P)
    _check_gamma(gamma)
    V = np.zeros(P.shape[0])
    sweeps = 0
    while sweeps < max_iter:
        V_new = robust_bellman(P, r, V, uset, gamma, policy)
        sweeps += 1
        done = np.max(np.abs(V_new - V)) <= tol * (1.0 - gamma)
        V = V_new
        if done:
            return V, robust_q(P, r, V, uset, gamma).argmax(axis=1), sweeps
    raise NotConvergedError(f"robust value iteration: no convergence in {max_iter} sweeps")


def robust_relative_value_iteration(P: np.ndarray, r: np.ndarray, uset: UncertaintySet,
                                    tol: float = 1e-10, max_iter: int = 200_000,
                                    policy: np.ndarray | None = None, ref_state: int = 0,
                                    strict: bool = True) -> tuple[float, np.ndarray, np.ndarray]:
    """RRVI: ``h <- h/2 + T(h)/2 - (same)(ref)`` until ``span(T(h) - h) < tol``.

    Returns ``(gain, bias h, greedy policy)``; ``gain`` is the midpoint of ``T(h) - h``. With
    ``policy`` it computes the robust gain ``g^pi`` of that fixed policy. A model whose iteration
    does not settle (multichain under some kernel of the set) raises :class:`NotConvergedError`,
    or with ``strict=False`` returns the last iterate (gain NaN) for the caller to flag.
    """
    validate_kernel(P)
    h = np.zeros(P.shape[0])
    for _ in range(max_iter):
        Th = robust_bellman(P, r, h, uset, 1.0, policy)
        diff = Th - h
        if diff.max() - diff.min() < tol:
            gain = 0.5 * (diff.max() + diff.min())
            greedy = robust_q(P, r, h, uset).argmax(axis=1)
            return float(gain), h - h.min(), greedy
        mixed = 0.5 * (h + Th)
        h = mixed - mixed[ref_state]
    if not strict:
        return float("nan"), h - h.min(), robust_q(P, r, h, uset).argmax(axis=1)
    raise NotConvergedError(
        f"robust relative value iteration did not reach span {tol:g} in {max_iter} sweeps; the "
        "theory needs every kernel of the set to make every policy unichain")


def robust_gain(P: np.ndarray, r: np.ndarray, uset: UncertaintySet, policy: np.ndarray,
                tol: float = 1e-10) -> float:
    """Exact robust average reward ``g^pi = min_kappa g^pi_kappa`` of a fixed policy."""
    return robust_relative_value_iteration(P, r, uset, tol=tol, policy=policy)[0]


def span(x: np.ndarray) -> float:
    """Span semi-norm ``max x - min x``."""
    return float(np.max(x) - np.min(x))
