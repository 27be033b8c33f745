"""Two-player repeated normal-form games of the benchmark (docs/papers/functional_tom.md).

``R[a, b]`` is the focal agent's payoff (rows = agent action a, columns = partner action b) and
``partner_payoff[b, a]`` the partner's. The payoffs are parameters; the defaults are the values of
the paper's games (RPS win/tie/loss +1/0/-1; IBS and IPD with the values of Akata et al. 2023,
which reproduce the paper's tabular R-Max numbers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: Game kinds; the kind fixes how the reactive partner families (tit-for-tat, ...) respond.
KINDS = ("rps", "ibs", "ipd")


@dataclass(frozen=True)
class Game:
    """A finite two-player game with both payoff matrices and human-readable action names."""

    name: str
    kind: str
    actions: tuple[str, ...]
    payoff: np.ndarray = field(repr=False)          # R[a, b], focal agent
    partner_payoff: np.ndarray = field(repr=False)  # P[b, a], partner
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        n = len(self.actions)
        if self.kind not in KINDS:
            raise ValueError(f"game {self.name}: kind {self.kind!r} not in {KINDS}")
        if n < 2:
            raise ValueError(f"game {self.name}: needs at least two actions, got {self.actions}")
        for label, mat in (("payoff", self.payoff), ("partner_payoff", self.partner_payoff)):
            arr = np.asarray(mat, dtype=float)
            if arr.shape != (n, n):
                raise ValueError(f"game {self.name}: {label} must be {n}x{n}, got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"game {self.name}: {label} has non-finite entries")
        object.__setattr__(self, "payoff", np.asarray(self.payoff, dtype=float))
        object.__setattr__(self, "partner_payoff", np.asarray(self.partner_payoff, dtype=float))
        _check_semantics(self)

    @property
    def n_actions(self) -> int:
        return len(self.actions)

    @property
    def r_max(self) -> float:
        return float(self.payoff.max())

    def best_response(self, p: np.ndarray, rng: np.random.Generator | None = None) -> int:
        """Myopic best response ``argmax_a R[a, :] @ p``; ties broken by ``rng`` (else first)."""
        values = self.payoff @ np.asarray(p, dtype=float)
        return argmax_random(values, rng)


def argmax_random(values: np.ndarray, rng: np.random.Generator | None = None,
                  tol: float = 1e-12) -> int:
    """Index of the maximum; ties (within ``tol``) broken uniformly with ``rng`` (breaking
    ties by action order would bias results), or the first one if ``rng`` is None."""
    values = np.asarray(values, dtype=float)
    best = np.flatnonzero(values >= values.max() - tol)
    if rng is None or best.size == 1:
        return int(best[0])
    return int(best[rng.integers(best.size)])


def _relation(game: Game) -> np.ndarray:
    """``wins[x, y]``: action x beats action y (``R[x, y] > R[y, x]``), read from the payoffs."""
    return game.payoff > game.payoff.T


def beats(game: Game, action: int) -> int:
    """The RPS action that beats ``action``, read from the payoffs (so a relabelled game, e.g.
    actions listed as Scissors, Rock, Paper, keeps its meaning)."""
    return int(np.flatnonzero(_relation(game)[:, action])[0])


def beaten_by(game: Game, action: int) -> int:
    """The RPS action that ``action`` beats, read from the payoffs."""
    return int(np.flatnonzero(_relation(game)[action])[0])


def defect_action(game: Game) -> int:
    """IPD's Defect: the partner's strictly dominant action (``P[d, a] > P[c, a]`` for every
    agent action a), read from the partner's payoffs; the other action is Cooperate."""
    p = game.partner_payoff
    dominant = [b for b in range(game.n_actions)
                if all(np.all(p[b] > p[c]) for c in range(game.n_actions) if c != b)]
    return dominant[0]


def cooperate_action(game: Game) -> int:
    """IPD's Cooperate: the action other than :func:`defect_action`."""
    return 1 - defect_action(game)


def _check_semantics(game: Game) -> None:
    """The actions of RPS and IPD have a meaning the reactive partners use; refuse payoffs
    that do not define it."""
    if game.kind == "rps":
        wins = _relation(game)
        if game.n_actions != 3 or not (wins.sum(0) == 1).all() or not (wins.sum(1) == 1).all():
            raise ValueError(f"game {game.name} (kind rps): payoff must make every action beat "
                             "exactly one other and be beaten by exactly one other "
                             "(R[x, y] > R[y, x] when x beats y)")
    if game.kind == "ipd":
        p = game.partner_payoff
        if game.n_actions != 2 or not (np.all(p[0] > p[1]) or np.all(p[1] > p[0])):
            raise ValueError(f"game {game.name} (kind ipd): needs two actions, one of which "
                             "(Defect) is strictly dominant in partner_payoff")


def make_game(name: str, kind: str, actions: Sequence[str], payoff: Sequence[Sequence[float]],
              partner_payoff: Sequence[Sequence[float]],
              synonyms: Mapping[str, Sequence[str]] | None = None) -> Game:
    """A :class:`Game` from parameter lists (``functional_tom.games.<name>``)."""
    return Game(name=name, kind=kind, actions=tuple(actions), payoff=np.asarray(payoff, float),
                partner_payoff=np.asarray(partner_payoff, float),
                synonyms={k: tuple(v) for k, v in (synonyms or {}).items()})


def default_games() -> dict[str, Game]:
    """The paper's three games with their default payoffs (also the parameter defaults)."""
    return {
        "rps": make_game("rps", "rps", ["Rock", "Paper", "Scissors"],
                         [[0, -1, 1], [1, 0, -1], [-1, 1, 0]],
                         [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]),
        "ibs": make_game("ibs", "ibs", ["A0", "A1"], [[10, 0], [0, 7]], [[7, 0], [0, 10]]),
        "ipd": make_game("ipd", "ipd", ["Cooperate", "Defect"], [[8, 0], [10, 5]],
                         [[8, 0], [10, 5]]),
    }
