"""Partner policies as finite-state machines (``docs/papers/functional_tom.md``, "Data").

Every partner is tabular: ``probs[z, b]`` is its action distribution in state ``z`` and
``next_state[z, a, b]`` the state after the agent played ``a`` and the partner ``b``; ``z0`` is
the start state. Deterministic partners have one-hot ``probs``. Every family is defined by the
game's meaning (which RPS action beats which, which IPD action is Defect, read from the payoffs),
never by the order the actions are listed in, so relabelling a game's actions relabels its
partners and leaves every agent's regret unchanged. Because every family is such a
table, the optimal value against it is exact by dynamic programming (:mod:`.optimal_play`).

Families (paper set first, then the extended families used for meta-training and held-out
evaluation):

- ``single``: always plays ``action`` (1 state).
- ``tft``: RPS plays the action that beats the agent's previous action; IBS / IPD copy the agent's
  previous action. State = agent's previous action, plus a start state playing ``first``.
- ``cycle``: plays ``sequence`` cyclically, ignoring the agent.
- ``anti``: RPS plays the action the agent's previous action beats; two-action games play the
  other action than the agent's previous one (our reading: "anti" mirrors TFT).
- ``wsls``: win-stay-lose-shift: keeps its action when its own payoff was at least the mean of
  its payoff matrix, else shifts (RPS: to the action that beats its own; two actions: the other).
- ``grim``: IPD grim trigger: cooperates until the agent first defects, then defects forever.
- ``lag2_tft``: the TFT response to the agent's action two rounds ago (``first`` for two rounds).
- ``biased``: a fixed stochastic action distribution ``probs`` (drawn from Dirichlet(1)).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from icml25.pipelines.functional_tom.games import (
    Game,
    beaten_by,
    beats,
    cooperate_action,
    defect_action,
)

FAMILIES = ("single", "tft", "cycle", "anti", "wsls", "grim", "lag2_tft", "biased")
#: Families whose every instance is a deterministic FSM (regret >= 0 for every agent).
DETERMINISTIC = frozenset(FAMILIES) - {"biased"}


@dataclass(frozen=True)
class PartnerFSM:
    """A partner policy: ``probs[z, b]``, ``next_state[z, a, b]``, start state ``z0``."""

    name: str
    probs: np.ndarray = field(repr=False)
    next_state: np.ndarray = field(repr=False)
    z0: int = 0
    spec: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        probs = np.asarray(self.probs, dtype=float)
        nxt = np.asarray(self.next_state, dtype=np.int64)
        z, b = probs.shape
        if nxt.ndim != 3 or nxt.shape[0] != z or nxt.shape[2] != b:
            raise ValueError(f"partner {self.name}: next_state shape {nxt.shape} does not match "
                             f"probs {probs.shape}")
        if np.any(probs < -1e-12) or not np.allclose(probs.sum(1), 1.0):
            raise ValueError(f"partner {self.name}: probs rows must be distributions")
        if nxt.min() < 0 or nxt.max() >= z or not 0 <= self.z0 < z:
            raise ValueError(f"partner {self.name}: state index out of range")
        object.__setattr__(self, "probs", probs)
        object.__setattr__(self, "next_state", nxt)

    @property
    def n_states(self) -> int:
        return self.probs.shape[0]

    @property
    def deterministic(self) -> bool:
        return bool(np.all((self.probs == 0) | (self.probs == 1)))

    def action(self, z: int, rng: np.random.Generator) -> int:
        """Sample the partner's action in state ``z`` (no draw for deterministic states)."""
        p = self.probs[z]
        if p.max() == 1.0:
            return int(p.argmax())
        return int(rng.choice(p.size, p=p))

    def step(self, z: int, a: int, b: int) -> int:
        return int(self.next_state[z, a, b])


def _table(n_states: int, n_a: int, n_b: int) -> np.ndarray:
    return np.zeros((n_states, n_a, n_b), dtype=np.int64)


def _reaction(game: Game, family: str, a: int) -> int:
    """The response of a reactive partner to the agent's previous action ``a``, defined by the
    game's meaning (the action that beats ``a`` in RPS), never by action order."""
    if family in ("tft", "lag2_tft"):
        return beats(game, a) if game.kind == "rps" else a
    if family == "anti":
        return beaten_by(game, a) if game.kind == "rps" else (a + 1) % game.n_actions
    raise ValueError(family)


def _one_hot(actions: list[int], n: int) -> np.ndarray:
    out = np.zeros((len(actions), n))
    out[np.arange(len(actions)), actions] = 1.0
    return out


def build_partner(game: Game, spec: Mapping[str, Any]) -> PartnerFSM:
    """Build the FSM of one partner from its spec, e.g. ``{"family": "tft", "first": 0}``."""
    family = spec.get("family")
    n = game.n_actions
    name = json.dumps(dict(spec), sort_keys=True)
    if family == "single":
        k = int(spec["action"])
        _check_action(game, k, "action")
        return PartnerFSM(name, _one_hot([k], n), _table(1, n, n), 0, dict(spec))
    if family in ("tft", "anti"):
        first = int(spec["first"])
        _check_action(game, first, "first")
        # states 0..n-1: agent's previous action was z; state n: start
        acts = [_reaction(game, family, z) for z in range(n)] + [first]
        nxt = _table(n + 1, n, n)
        nxt[:, :, :] = np.arange(n)[None, :, None]
        return PartnerFSM(name, _one_hot(acts, n), nxt, n, dict(spec))
    if family == "lag2_tft":
        first = int(spec["first"])
        _check_action(game, first, "first")
        # state (x, y) = agent's actions two rounds ago and one round ago, x/y = n means "none";
        # index x * (n + 1) + y; the partner responds to x.
        size = n + 1
        acts, nxt = [], _table(size * size, n, n)
        for x, y in itertools.product(range(size), range(size)):
            acts.append(first if x == n else _reaction(game, "tft", x))
            for a in range(n):
                nxt[x * size + y, a, :] = y * size + a
        return PartnerFSM(name, _one_hot(acts, n), nxt, n * size + n, dict(spec))
    if family == "cycle":
        seq = [int(s) for s in spec["sequence"]]
        if not 1 <= len(seq) <= 8:
            raise ValueError(f"cycle partner: sequence length {len(seq)} not in 1..8")
        for s in seq:
            _check_action(game, s, "sequence")
        nxt = _table(len(seq), n, n)
        nxt[:, :, :] = ((np.arange(len(seq)) + 1) % len(seq))[:, None, None]
        return PartnerFSM(name, _one_hot(seq, n), nxt, 0, dict(spec))
    if family == "wsls":
        first = int(spec["first"])
        _check_action(game, first, "first")
        aspiration = float(game.partner_payoff.mean())
        nxt = _table(n, n, n)
        for b, a in itertools.product(range(n), range(n)):
            stay = game.partner_payoff[b, a] >= aspiration
            shift = beats(game, b) if game.kind == "rps" else (b + 1) % n
            nxt[:, a, b] = b if stay else shift
        return PartnerFSM(name, _one_hot(list(range(n)), n), nxt, first, dict(spec))
    if family == "grim":
        if game.kind != "ipd":
            raise ValueError(f"grim partner is defined for IPD only, not {game.name}")
        # state 0 cooperates, state 1 (after the agent's first Defect) defects forever
        c, d = cooperate_action(game), defect_action(game)
        nxt = _table(2, n, n)
        nxt[0, c, :], nxt[0, d, :], nxt[1, :, :] = 0, 1, 1
        return PartnerFSM(name, _one_hot([c, d], n), nxt, 0, dict(spec))
    if family == "biased":
        p = np.asarray(spec["probs"], dtype=float)
        if p.shape != (n,) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
            raise ValueError(f"biased partner: probs {p.tolist()} is not a distribution over "
                             f"{n} actions")
        return PartnerFSM(name, (p / p.sum())[None, :], _table(1, n, n), 0, dict(spec))
    raise ValueError(f"unknown partner family {family!r}; expected one of {FAMILIES}")


def _check_action(game: Game, k: int, key: str) -> None:
    if not 0 <= k < game.n_actions:
        raise ValueError(f"partner {key} {k} is not an action of {game.name} "
                         f"(0..{game.n_actions - 1})")


def family_available(game: Game, family: str) -> bool:
    return family != "grim" or game.kind == "ipd"


def sample_partner_spec(game: Game, family: str, rng: np.random.Generator,
                        first_move: int | None = None, episode: int = 0) -> dict[str, Any]:
    """A random member of ``family`` for ``game`` (random first moves, random cycles).

    ``first_move`` fixes the TFT-style first move (the paper's convention, a parameter); for
    ``single`` the action is ``episode mod |A|`` so a cell averages over every constant action as
    the paper does.
    """
    n = game.n_actions
    first = int(rng.integers(n)) if first_move is None else int(first_move)
    if family == "single":
        return {"family": "single", "action": episode % n}
    if family in ("tft", "anti", "lag2_tft", "wsls"):
        return {"family": family, "first": first}
    if family == "cycle":
        while True:  # a cycle of length 2-3 that is not constant
            seq = rng.integers(n, size=int(rng.integers(2, 4))).tolist()
            if len(set(seq)) > 1:
                return {"family": "cycle", "sequence": seq}
    if family == "grim":
        return {"family": "grim"}
    if family == "biased":
        return {"family": "biased", "probs": rng.dirichlet(np.ones(n)).round(6).tolist()}
    raise ValueError(f"unknown partner family {family!r}")


def hypothesis_library(game: Game) -> list[PartnerFSM]:
    """Every deterministic FSM of the extended families (the Bayesian planner's hypotheses):
    constants, all cycles of length <= 3, TFT / anti / lag-2 TFT / WSLS with every first move,
    grim (IPD)."""
    n = game.n_actions
    specs: list[dict[str, Any]] = [{"family": "single", "action": k} for k in range(n)]
    for length in (2, 3):
        for seq in itertools.product(range(n), repeat=length):
            if len(set(seq)) > 1:
                specs.append({"family": "cycle", "sequence": list(seq)})
    for family in ("tft", "anti", "lag2_tft", "wsls"):
        specs += [{"family": family, "first": k} for k in range(n)]
    if game.kind == "ipd":
        specs.append({"family": "grim"})
    return [build_partner(game, s) for s in specs]
