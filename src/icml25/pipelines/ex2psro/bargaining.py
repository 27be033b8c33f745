"""OpenSpiel's bargaining game with the 20-instance set and per-episode seat randomisation.

docs/papers/ex2psro.md ("Data"): the Ex2PSRO experiments use 20 instances forming 10
mirrored pairs and a random starting seat. PyPI OpenSpiel always starts with player 0, so the
wrapper draws the seats of the two policies uniformly per episode; the instance set is written to
a file and loaded through the game's ``instances_file`` parameter. Episodes are stepped on raw
pyspiel states (the RL environment wrapper is ~5x slower).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

#: The 20 instances (pool, player-0 values, player-1 values) of the Ex2PSRO bargaining set.
EX2PSRO_INSTANCES = """\
1,2,3 8,1,0 4,0,2
1,2,3 4,0,2 8,1,0
1,4,1 4,1,2 2,2,0
1,4,1 2,2,0 4,1,2
2,2,1 1,1,6 0,4,2
2,2,1 0,4,2 1,1,6
1,4,1 9,0,1 2,2,0
1,4,1 2,2,0 9,0,1
1,4,1 5,1,1 0,1,6
1,4,1 0,1,6 5,1,1
4,1,1 2,1,1 1,0,6
4,1,1 1,0,6 2,1,1
3,1,1 1,4,3 0,2,8
3,1,1 0,2,8 1,4,3
1,1,3 0,1,3 1,3,2
1,1,3 1,3,2 0,1,3
1,3,1 2,2,2 10,0,0
1,3,1 10,0,0 2,2,2
1,2,2 2,3,1 4,0,3
1,2,2 4,0,3 2,3,1
"""

GAMES = ("bargaining",)


def parse_instances(text: str) -> list[tuple[tuple[int, ...], ...]]:
    """Parse and validate an instance file: one ``pool p0vals p1vals`` line per instance.

    Each group is 3 comma-separated non-negative integers; pools hold 5-7 items; each player's
    values of the pool sum to 10 (the rules of OpenSpiel's bargaining game).
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("bargaining instance file: empty; expected one 'pool p0vals p1vals' line "
                         "per instance")
    instances = []
    for number, line in enumerate(lines, start=1):
        groups = line.split()
        where = f"bargaining instance file, line {number} ({line!r})"
        if len(groups) != 3:
            raise ValueError(f"{where}: expected 3 space-separated groups 'pool p0vals p1vals'")
        try:
            parsed = tuple(tuple(int(x) for x in g.split(",")) for g in groups)
        except ValueError:
            raise ValueError(f"{where}: groups must be comma-separated integers") from None
        if any(len(g) != 3 or min(g) < 0 for g in parsed):
            raise ValueError(f"{where}: each group must be 3 non-negative integers")
        pool, v0, v1 = parsed
        if not 5 <= sum(pool) <= 7:
            raise ValueError(f"{where}: the pool must hold 5-7 items, got {sum(pool)}")
        for player, values in ((0, v0), (1, v1)):
            total = sum(p * v for p, v in zip(pool, values, strict=True))
            if total != 10:
                raise ValueError(f"{where}: player {player}'s values of the pool sum to {total}, "
                                 "expected 10")
        instances.append(parsed)
    return instances


def load_game(name: str, discount: float, instances_text: str, max_turns: int = 10):
    """A pyspiel game for ``name`` (only ``bargaining``) on the given validated instance set."""
    if name not in GAMES:
        raise ValueError(f"unknown game {name!r}; known games: {list(GAMES)}")
    import pyspiel

    instances = parse_instances(instances_text)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "instances.txt"
        path.write_text(instances_text)
        game = pyspiel.load_game(name, {"discount": float(discount), "max_turns": int(max_turns),
                                        "instances_file": str(path),
                                        "max_num_instances": len(instances)})
    return game


class Policy(Protocol):
    def probabilities(self, obs: np.ndarray, legal: np.ndarray) -> np.ndarray: ...

    def batch_probabilities(self, obs: np.ndarray, legal: np.ndarray) -> np.ndarray: ...


class UniformPolicy:
    """Uniform over legal actions (the initial population and the random baseline)."""

    def probabilities(self, obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
        return legal / legal.sum()

    def batch_probabilities(self, obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
        """Rows of :meth:`probabilities` for a batch (``obs``: n x d, ``legal``: n x A)."""
        return legal / legal.sum(axis=1, keepdims=True)


class MLPPolicy:
    """A ReLU MLP's masked softmax, evaluated in numpy (weights ``[(W, b), ...]``, W: in x out)."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]]):
        self.layers = layers

    def logits(self, obs: np.ndarray) -> np.ndarray:
        h = obs
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < len(self.layers) - 1:
                h = np.maximum(h, 0.0)
        return h

    def probabilities(self, obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
        z = np.where(legal, self.logits(obs).astype(np.float64), -1e9)
        z = np.exp(z - z.max())
        return z / z.sum()

    def batch_probabilities(self, obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
        """Rows of :meth:`probabilities` for a batch (``obs``: n x d, ``legal``: n x A)."""
        z = np.where(legal, self.logits(obs).astype(np.float64), -1e9)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)


def sample_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row of ``probs`` (n x A, rows summing to 1) by inversion of one uniform
    draw per row; an action of probability 0 is never drawn."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(len(probs)) * cdf[:, -1]
    actions = (cdf <= u[:, None]).sum(axis=1)
    # u * total can round up to the total: fall back to the last action of positive probability
    last = probs.shape[1] - 1 - np.argmax(probs[:, ::-1] > 0, axis=1)
    return np.minimum(actions, last)


def sample_pair(a: Policy, b: Policy, a_acts: np.ndarray, obs: np.ndarray, legal: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
    """One action per row of a lockstep step: ``a`` acts in the rows where ``a_acts`` is true,
    ``b`` in the others, each policy asked once for its rows (``a``'s rows drawn first)."""
    actions = np.empty(len(a_acts), dtype=np.int64)
    for policy, rows in ((a, np.flatnonzero(a_acts)), (b, np.flatnonzero(~a_acts))):
        if len(rows):
            actions[rows] = sample_rows(policy.batch_probabilities(obs[rows], legal[rows]), rng)
    return actions


@dataclass
class Trajectory:
    """One episode: per decision the acting player, its information state, legal mask, action."""

    players: list[int] = field(default_factory=list)
    obs: list[np.ndarray] = field(default_factory=list)
    legal: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    rewards: list[tuple[float, float]] = field(default_factory=list)  # both players', per decision
    returns: tuple[float, float] = (0.0, 0.0)
    instance: int = -1  # the chance outcome (instance index) the episode was dealt


def play_episode(game, seat_policies: tuple[Policy, Policy], rng: np.random.Generator) -> Trajectory:
    """Play one episode with ``seat_policies[p]`` acting for player ``p``; chance by ``rng``."""
    n_actions = game.num_distinct_actions()
    state = game.new_initial_state()
    traj = Trajectory()
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            traj.instance = int(outcomes[rng.choice(len(outcomes), p=np.asarray(probs))])
            state.apply_action(traj.instance)
            continue
        player = state.current_player()
        obs = np.asarray(state.information_state_tensor(player), dtype=np.float32)
        legal = np.zeros(n_actions, dtype=bool)
        legal[state.legal_actions()] = True
        probs = seat_policies[player].probabilities(obs, legal)
        action = int(rng.choice(n_actions, p=probs))
        traj.players.append(player)
        traj.obs.append(obs)
        traj.legal.append(legal)
        traj.actions.append(action)
        state.apply_action(action)
    r = state.returns()
    traj.returns = (float(r[0]), float(r[1]))
    # bargaining pays only at the end: the returns are attributed to each player's last decision
    traj.rewards = [(0.0, 0.0)] * len(traj.players)
    for player in (0, 1):
        mine = [t for t, p in enumerate(traj.players) if p == player]
        if mine:
            traj.rewards[mine[-1]] = traj.returns
    return traj


def play_returns(game, a: Policy, b: Policy, seats: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """Returns (n x 2: a's, b's) of ``n = len(seats)`` episodes of ``a`` against ``b`` played in
    lockstep, ``a`` in seat ``seats[e]`` of episode ``e``. Each step asks each policy once for
    every episode it acts in (one batched forward pass) instead of once per decision; the game
    rules are pyspiel's own states. For evaluation: no trajectory is kept."""
    n = len(seats)
    seats = np.asarray(seats, dtype=np.int64)
    if n == 0:
        return np.zeros((0, 2))
    n_actions = game.num_distinct_actions()
    states = [game.new_initial_state() for _ in range(n)]
    active = list(range(n))
    while active:
        chance = [e for e in active if states[e].is_chance_node()]
        for e in chance:
            outcomes, probs = zip(*states[e].chance_outcomes(), strict=True)
            states[e].apply_action(int(outcomes[rng.choice(len(outcomes), p=np.asarray(probs))]))
        deciding = [e for e in active if not states[e].is_chance_node()]
        if deciding:
            players = np.array([states[e].current_player() for e in deciding])
            obs = np.array([states[e].information_state_tensor(int(p))
                            for e, p in zip(deciding, players, strict=True)], dtype=np.float32)
            legal = np.zeros((len(deciding), n_actions), dtype=bool)
            for row, e in enumerate(deciding):
                legal[row, states[e].legal_actions()] = True
            actions = sample_pair(a, b, players == seats[deciding], obs, legal, rng)
            for e, action in zip(deciding, actions, strict=True):
                states[e].apply_action(int(action))
        active = [e for e in active if not states[e].is_terminal()]
    out = np.empty((n, 2))
    for e, state in enumerate(states):
        r = state.returns()
        out[e] = (r[seats[e]], r[1 - seats[e]])
    return out


def play_match(game, a: Policy, b: Policy, rng: np.random.Generator) -> tuple[Trajectory, int]:
    """One episode of ``a`` against ``b`` with seats drawn 50/50; returns (trajectory, a's seat)."""
    seat = int(rng.integers(2))
    policies = (a, b) if seat == 0 else (b, a)
    if hasattr(game, "play_episode"):  # a game simulated in-repo (Harvest)
        return game.play_episode(policies, rng), seat
    return play_episode(game, policies, rng), seat
