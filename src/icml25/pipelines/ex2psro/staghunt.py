"""A repeated stag hunt: a symmetric two-player coordination game with a payoff-dominant and a
risk-dominant equilibrium (docs/papers/ex2psro.md, "Data").

Each of ``rounds`` rounds both players choose simultaneously, stag (0) or hare (1). Two stag
hunters each get ``stag``; a hare hunter gets ``hare`` whatever the other does; a lone stag
hunter gets ``sucker``. With ``stag > hare > sucker`` and ``hare > (stag + sucker) / 2``,
(stag, stag) is the high-welfare equilibrium and (hare, hare) the risk-dominant one, which is the
setting in which the paper's question (does exploration find the high-welfare equilibrium) is
sharpest. A player observes the previous round's two actions and the round's position.
"""

from __future__ import annotations

import numpy as np

STAG, HARE = 0, 1
#: [first round, own last stag, own last hare, other's last stag, other's last hare, t / rounds]
OBS_SIZE = 6


class StagHuntGame:
    """The repeated stag hunt as a PSRO game (the interface the PSRO loop uses)."""

    def __init__(self, rounds: int = 10, stag: float = 4.0, hare: float = 3.0,
                 sucker: float = 0.0):
        if rounds < 1:
            raise ValueError(f"stag hunt rounds must be >= 1, got {rounds}")
        if not stag > hare > sucker:
            raise ValueError(f"stag hunt payoffs must satisfy stag > hare > sucker, got "
                             f"stag={stag}, hare={hare}, sucker={sucker}")
        self.rounds, self.stag, self.hare, self.sucker = rounds, stag, hare, sucker

    def information_state_tensor_shape(self) -> list[int]:
        return [OBS_SIZE]

    def num_distinct_actions(self) -> int:
        return 2

    def payoff_range(self) -> float:
        """The width of one player's episode return range: ``rounds * (stag - sucker)``."""
        return float(self.rounds * (self.stag - self.sucker))

    def stage_payoffs(self, a0: int, a1: int) -> tuple[float, float]:
        def pay(mine: int, other: int) -> float:
            if mine == HARE:
                return self.hare
            return self.stag if other == STAG else self.sucker
        return pay(a0, a1), pay(a1, a0)

    def observation(self, player: int, last: tuple[int, int] | None, t: int) -> np.ndarray:
        obs = np.zeros(OBS_SIZE, dtype=np.float32)
        if last is None:
            obs[0] = 1.0
        else:
            obs[1 + last[player]] = 1.0
            obs[3 + last[1 - player]] = 1.0
        obs[5] = t / self.rounds
        return obs

    def play_episode(self, seat_policies, rng: np.random.Generator):
        """One episode; per round both players' decisions are recorded (player 0 first), each with
        that round's payoff pair."""
        from icml25.pipelines.ex2psro.bargaining import Trajectory

        legal = np.ones(2, dtype=bool)
        traj = Trajectory()
        totals = np.zeros(2)
        last = None
        for t in range(self.rounds):
            obs = [self.observation(p, last, t) for p in range(2)]
            acts = [int(rng.choice(2, p=seat_policies[p].probabilities(obs[p], legal)))
                    for p in range(2)]
            rewards = self.stage_payoffs(*acts)
            totals += rewards
            for p in range(2):
                traj.players.append(p)
                traj.obs.append(obs[p])
                traj.legal.append(legal)
                traj.actions.append(acts[p])
                traj.rewards.append(rewards)
            last = (acts[0], acts[1])
        traj.returns = (float(totals[0]), float(totals[1]))
        return traj

    def play_returns(self, a, b, seats: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Returns (n x 2: a's, b's) of ``n = len(seats)`` episodes of ``a`` against ``b``
        played in lockstep (``a`` in seat ``seats[e]`` of episode ``e``): each round asks each
        policy once, for a batch, with the observations of :meth:`observation`."""
        seats = np.asarray(seats, dtype=np.int64)
        n = len(seats)
        from icml25.pipelines.ex2psro.bargaining import sample_pair

        legal = np.ones((n, 2), dtype=bool)
        totals = np.zeros((n, 2))
        last = None
        for t in range(self.rounds):
            acts = np.empty((n, 2), dtype=np.int64)
            for p in range(2):
                obs = np.zeros((n, OBS_SIZE), dtype=np.float32)
                if last is None:
                    obs[:, 0] = 1.0
                else:
                    obs[np.arange(n), 1 + last[:, p]] = 1.0
                    obs[np.arange(n), 3 + last[:, 1 - p]] = 1.0
                obs[:, 5] = t / self.rounds
                acts[:, p] = sample_pair(a, b, seats == p, obs, legal, rng)
            stag = acts == STAG
            other_stag = stag[:, ::-1]
            totals += np.where(stag, np.where(other_stag, self.stag, self.sucker), self.hare)
            last = acts
        mine = np.take_along_axis(totals, seats[:, None], axis=1)[:, 0]
        theirs = np.take_along_axis(totals, 1 - seats[:, None], axis=1)[:, 0]
        return np.stack([mine, theirs], axis=1)
