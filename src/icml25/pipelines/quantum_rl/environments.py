"""The MDPs of the quantum_rl experiments, built on :mod:`icml25.core.mdp`.

* RiverSwim (6 and 12 states; ``icml25.core.mdp.riverswim``),
* random ergodic Garnet MDPs (branching Dirichlet(1) rows mixed with uniform mass, rewards
  ``U[0, 1]``; ``icml25.core.mdp.garnet_kernel``), one fixed instance per seed,
* a two-state toy with a closed-form optimal gain (unit tests),
* explicit ``P``/``r`` from the configuration (validated like every other MDP).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml25.core.mdp import TabularMDP, garnet_kernel, riverswim


def two_state_toy(alpha: float = 0.2, beta: float = 0.1, safe_reward: float = 0.3) -> TabularMDP:
    """Two states, two actions. In 0: ``stay`` (reward ``safe_reward``) or ``try`` (reach 1 w.p.
    ``alpha``, reward 0). In 1: ``work`` (reward 1, fall back to 0 w.p. ``beta``) or ``leave``
    (back to 0, reward 0). Optimal gain: ``max(safe_reward, alpha / (alpha + beta))``."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = 1.0
    P[0, 1, 1], P[0, 1, 0] = alpha, 1.0 - alpha
    P[1, 0, 0], P[1, 0, 1] = beta, 1.0 - beta
    P[1, 1, 0] = 1.0
    r = np.array([[safe_reward, 0.0], [1.0, 0.0]])
    return TabularMDP(P, r, name="two_state")


def two_state_gain(alpha: float = 0.2, beta: float = 0.1, safe_reward: float = 0.3) -> float:
    """Closed-form optimal gain of :func:`two_state_toy`."""
    return max(safe_reward, alpha / (alpha + beta))


def garnet_mdp(n_states: int, n_actions: int, branching: int, uniform_mix: float,
               seed: int) -> TabularMDP:
    """A random ergodic Garnet MDP (one instance per ``seed``)."""
    rng = np.random.default_rng(seed)
    P = garnet_kernel(n_states, n_actions, branching, rng, uniform_mix=uniform_mix)
    r = rng.uniform(0.0, 1.0, size=(n_states, n_actions))
    return TabularMDP(P, r, name=f"garnet_{n_states}")


def build_mdp(name: str, spec: dict[str, Any]) -> TabularMDP:
    """The MDP an ``envs.<name>`` entry describes (see ``params.EnvParams``)."""
    kind = spec["kind"]
    if kind == "riverswim":
        mdp = riverswim(spec["n_states"])
    elif kind == "garnet":
        mdp = garnet_mdp(spec["n_states"], spec["n_actions"], spec["branching"],
                         spec["uniform_mix"], spec["seed"])
    elif kind == "two_state":
        mdp = two_state_toy()
    elif kind == "explicit":
        mdp = TabularMDP(np.asarray(spec["P"], float), np.asarray(spec["r"], float))
    else:
        raise ValueError(f"envs.{name}.kind: unknown environment kind {kind!r}")
    return TabularMDP(mdp.P, mdp.r, name=name)
