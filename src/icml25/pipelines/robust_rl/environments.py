"""Tabular test beds of the robust average-reward experiments (docs/papers/robust_rl.md, "Data").

* Garnet-sparse ``G(S, A, b)``: each row puts Dirichlet(1) mass on ``b`` random next states
  (:func:`icml25.core.mdp.garnet_kernel`); reward 1 on ``n_goals`` goal states (all actions) and
  ``U[0, 0.2]`` elsewhere, so the nominal and the robust optimal policies differ.
* Recycling robot (Sutton & Barto, Example 3.3), three states ``high, low, depleted`` and actions
  ``search, wait, recharge``, rewards rescaled to ``[0, 1]`` by ``(r + 3) / 5``.
* RiverSwim (:func:`icml25.core.mdp.riverswim`).
* Linear-FA Garnet: a Garnet-sparse model with random unit-norm state features ``psi(s)`` in
  ``R^d`` placed in the block of the action, ``phi(s, a) = e_a (x) psi(s)`` (``d A`` features).
"""

from __future__ import annotations

import numpy as np

from icml25.core.mdp import MDPError, TabularMDP, garnet_kernel, is_communicating, riverswim

ENV_KINDS = ("garnet_sparse", "recycling_robot", "riverswim")


def garnet_sparse(n_states: int, n_actions: int, branching: int, seed: int, n_goals: int = 2,
                  low_reward: float = 0.2) -> TabularMDP:
    """Garnet-sparse instance ``seed``: goal states pay 1, the others ``U[0, low_reward]``."""
    if not 1 <= n_goals <= n_states:
        raise MDPError(f"garnet n_goals must lie in [1, {n_states}]; got {n_goals}")
    rng = np.random.default_rng(seed)
    P = garnet_kernel(n_states, n_actions, branching, rng)
    r = rng.uniform(0.0, low_reward, size=(n_states, n_actions))
    goals = rng.choice(n_states, size=n_goals, replace=False)
    r[goals] = 1.0
    return TabularMDP(P, r, name=f"garnet_sparse_{n_states}_{n_actions}_{branching}_s{seed}")


def recycling_robot() -> TabularMDP:
    """Recycling robot. States 0 high, 1 low, 2 depleted; actions 0 search, 1 wait, 2 recharge.

    high-search: high 0.7 / low 0.3, r = 2; low-search: low 0.6 / depleted 0.4, r = 2; wait stays,
    r = 1; recharge takes low to high with r = 0 and acts as wait at high; from depleted every
    action returns to high with r = -3. Rewards are rescaled by ``(r + 3) / 5``.
    """
    P = np.zeros((3, 3, 3))
    r = np.zeros((3, 3))
    P[0, 0, 0], P[0, 0, 1], r[0, 0] = 0.7, 0.3, 2.0
    P[1, 0, 1], P[1, 0, 2], r[1, 0] = 0.6, 0.4, 2.0
    P[0, 1, 0], r[0, 1] = 1.0, 1.0
    P[1, 1, 1], r[1, 1] = 1.0, 1.0
    P[1, 2, 0], r[1, 2] = 1.0, 0.0
    P[0, 2, 0], r[0, 2] = 1.0, 1.0
    P[2, :, 0], r[2, :] = 1.0, -3.0
    return TabularMDP(P, (r + 3.0) / 5.0, name="recycling_robot")


def make_env(kind: str, label: str | None = None, **kwargs) -> TabularMDP:
    """Build a tabular environment by name and refuse one that is not communicating (the
    reduction's theory needs a communicating, unichain model)."""
    if kind == "garnet_sparse":
        mdp = garnet_sparse(**kwargs)
    elif kind == "recycling_robot":
        mdp = recycling_robot()
    elif kind == "riverswim":
        mdp = riverswim(**kwargs)
    else:
        raise MDPError(f"environment kind {kind!r} is unknown; expected one of {ENV_KINDS}")
    require_communicating(mdp.P, label or mdp.name)
    return mdp


def require_communicating(P: np.ndarray, name: str) -> None:
    """Raise a clear error for a nominal model that is not communicating."""
    if not is_communicating(P):
        raise MDPError(f"{name}: the nominal model is not communicating (some state cannot reach "
                       "another under any policy); robust average-reward theory and the "
                       "reduction need a communicating, unichain model")


def state_features(n_states: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Random Gaussian state features with unit-norm rows, shape ``(S, d)``."""
    psi = rng.normal(size=(n_states, dim))
    return psi / np.linalg.norm(psi, axis=1, keepdims=True)


def action_block_features(psi: np.ndarray, n_actions: int) -> np.ndarray:
    """``phi(s, a) = e_a (x) psi(s)``: shape ``(S, A, A d)``, ``psi(s)`` in the block of ``a``."""
    S, d = psi.shape
    phi = np.zeros((S, n_actions, n_actions * d))
    for a in range(n_actions):
        phi[:, a, a * d:(a + 1) * d] = psi
    return phi
