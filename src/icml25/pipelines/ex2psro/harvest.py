"""Harvest, a two-player commons social dilemma on a grid, in numpy (rules from the
authors' OpenSpiel fork, ``games/harvest.cc``; docs/papers/ex2psro.md, "Data").

Rules implemented:
- 7x9 map with wall border; 2 players; simultaneous moves; 8 actions: move left / forward /
  right / backward relative to facing, turn clockwise, turn counter-clockwise, laser, no-op.
- Players spawn on a random free 'P' cell with a random facing.
- Moving into a wall keeps the player in place; two players targeting the same cell, swapping
  cells, or moving into a player that stays all keep both in place (our reading of "both stay").
- Entering an apple cell gives +1 and consumes the apple.
- Laser (after moves): scans the 3-wide x 7-long egocentric window (own row plus 6 ahead) column
  by column until a wall or a player blocks; a hit player is removed for 25 steps unless all
  players are hit in the same step (then nobody is). Removed players act no-op and respawn on a
  random free 'P' cell at the step their timer reaches 1 (so 25 observations are "removed").
- Regrowth each step: an empty apple-spawn cell becomes an apple with probability
  [0, 0.005, 0.02, 0.05][min(n, 3)], n = apples within Euclidean radius 2.
- The episode ends after ``max_steps`` steps or when no apples remain.
- Observation: 4 one-hot channels (empty, wall, apple, agent) over the 7x3 egocentric window, the
  agent channel +1 for self and -1 for the other: 84 floats; all ones while removed.
"""

from __future__ import annotations

import numpy as np

MAPS = {
    "sparse": ("WWWWWWWWW", "WP     PW", "W  AAA  W", "W AAAAA W", "W  AAA  W", "WP     PW",
               "WWWWWWWWW"),
    "dense": ("WWWWWWWWW", "WPAA A PW", "W A A AAW", "WAAA AAAW", "WAA A A W", "WP A AAPW",
              "WWWWWWWWW"),
}
# facing 0 north, 1 east, 2 south, 3 west (clockwise)
DIRECTIONS = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])
LEFT, FORWARD, RIGHT, BACKWARD, TURN_CW, TURN_CCW, LASER, NOOP = range(8)
N_ACTIONS = 8
REMOVAL_STEPS = 25
REGROWTH = np.array([0.0, 0.005, 0.02, 0.05])
VIEW_AHEAD, VIEW_SIDE = 7, 1
OBS_SIZE = VIEW_AHEAD * (2 * VIEW_SIDE + 1) * 4


def parse_map(rows: tuple[str, ...] | list[str]) -> dict[str, np.ndarray]:
    """Walls, spawn cells and apple-spawn cells of a map; a malformed map is refused."""
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError("harvest map: rows must be non-empty and of equal length")
    grid = np.array([list(r) for r in rows])
    unknown = set(np.unique(grid)) - set("WPA ")
    if unknown:
        raise ValueError(f"harvest map: unknown cell characters {sorted(unknown)}")
    border = np.concatenate([grid[0], grid[-1], grid[:, 0], grid[:, -1]])
    if not np.all(border == "W"):
        raise ValueError("harvest map: the border must be walls")
    if np.sum(grid == "P") < 2 or not np.any(grid == "A"):
        raise ValueError("harvest map: needs at least 2 spawn cells 'P' and one apple 'A'")
    return {"wall": grid == "W", "spawn": grid == "P", "apple_spawn": grid == "A"}


class Harvest:
    """The two-player Harvest game; ``reset()`` then ``step(actions)`` until ``done``."""

    def __init__(self, map_name: str = "sparse", max_steps: int = 1000, seed: int = 0):
        if map_name not in MAPS:
            raise ValueError(f"unknown harvest map {map_name!r}; known: {sorted(MAPS)}")
        layout = parse_map(MAPS[map_name])
        self.wall, self.spawn = layout["wall"], layout["spawn"]
        self.apple_spawn = layout["apple_spawn"]
        self.max_steps = max_steps
        self.rng = np.random.default_rng(seed)
        h, w = self.wall.shape
        yy, xx = np.mgrid[-2:3, -2:3]
        self._kernel = ((yy**2 + xx**2) <= 4) & ~((yy == 0) & (xx == 0))
        self._shape = (h, w)
        self.reset()

    def reset(self) -> list[np.ndarray]:
        self.apples = self.apple_spawn.copy()
        self.pos = np.full((2, 2), -1)
        self.facing = np.zeros(2, dtype=int)
        self.timer = np.zeros(2, dtype=int)
        self.t = 0
        for p in range(2):
            self._respawn(p)
        return [self.observation(p) for p in range(2)]

    def _occupied(self, exclude: int | None = None) -> np.ndarray:
        occ = np.zeros(self._shape, dtype=bool)
        for p in range(2):
            if p != exclude and self.timer[p] == 0 and self.pos[p, 0] >= 0:
                occ[tuple(self.pos[p])] = True
        return occ

    def _respawn(self, p: int) -> None:
        free = np.argwhere(self.spawn & ~self._occupied(exclude=p))
        self.pos[p] = free[self.rng.integers(len(free))]
        self.facing[p] = self.rng.integers(4)

    @property
    def done(self) -> bool:
        return self.t >= self.max_steps or not self.apples.any()

    def _window(self, p: int) -> list[list[tuple[int, int]]]:
        """Cells of p's egocentric window, as columns (left, centre, right) of 7 cells ahead."""
        fwd = DIRECTIONS[self.facing[p]]
        right = DIRECTIONS[(self.facing[p] + 1) % 4]
        return [[tuple(self.pos[p] + d * fwd + s * right) for d in range(VIEW_AHEAD)]
                for s in range(-VIEW_SIDE, VIEW_SIDE + 1)]

    def observation(self, p: int) -> np.ndarray:
        if self.timer[p] > 0:
            return np.ones(OBS_SIZE, dtype=np.float32)
        h, w = self._shape
        obs = np.zeros((VIEW_AHEAD, 2 * VIEW_SIDE + 1, 4), dtype=np.float32)
        others = {tuple(self.pos[q]): q for q in range(2) if self.timer[q] == 0}
        for c, column in enumerate(self._window(p)):
            for d, (y, x) in enumerate(column):
                if not (0 <= y < h and 0 <= x < w) or self.wall[y, x]:
                    obs[d, c, 1] = 1.0
                elif (y, x) in others:
                    obs[d, c, 3] = 1.0 if others[(y, x)] == p else -1.0
                elif self.apples[y, x]:
                    obs[d, c, 2] = 1.0
                else:
                    obs[d, c, 0] = 1.0
        return obs.ravel()

    def step(self, actions) -> tuple[list[np.ndarray], np.ndarray, bool]:
        """Apply both players' actions; returns (observations, rewards, done)."""
        if self.done:
            raise RuntimeError("harvest: step() after the episode ended; call reset()")
        acts = [int(a) for a in actions]
        if len(acts) != 2 or any(not 0 <= a < N_ACTIONS for a in acts):
            raise ValueError(f"harvest: expected 2 actions in [0, {N_ACTIONS}), got {actions}")
        removed_before = self.timer > 0
        acts = [NOOP if removed_before[p] else a for p, a in enumerate(acts)]
        rewards = np.zeros(2)
        for p, a in enumerate(acts):
            if a == TURN_CW:
                self.facing[p] = (self.facing[p] + 1) % 4
            elif a == TURN_CCW:
                self.facing[p] = (self.facing[p] + 3) % 4
        targets = self.pos.copy()
        offsets = {LEFT: 3, FORWARD: 0, RIGHT: 1, BACKWARD: 2}
        for p, a in enumerate(acts):
            if a in offsets:
                target = self.pos[p] + DIRECTIONS[(self.facing[p] + offsets[a]) % 4]
                if not self.wall[tuple(target)]:
                    targets[p] = target
        active = [p for p in range(2) if not removed_before[p]]
        if len(active) == 2:
            same = np.array_equal(targets[0], targets[1])
            swap = (np.array_equal(targets[0], self.pos[1])
                    and np.array_equal(targets[1], self.pos[0]))
            if same or swap:
                targets = self.pos.copy()
            else:
                for p in range(2):  # moving into a player that stays
                    q = 1 - p
                    if np.array_equal(targets[p], self.pos[q]) and np.array_equal(
                            targets[q], self.pos[q]):
                        targets[p] = self.pos[p]
        for p in active:
            self.pos[p] = targets[p]
            if self.apples[tuple(self.pos[p])]:
                rewards[p] += 1.0
                self.apples[tuple(self.pos[p])] = False
        hit = np.zeros(2, dtype=bool)
        for p in active:
            if acts[p] == LASER:
                hit |= self._laser_hits(p)
        if hit.all():
            hit[:] = False  # all players hit in the same step: nobody is removed
        for p in range(2):
            if removed_before[p]:
                if self.timer[p] == 1:
                    self.timer[p] = 0
                    self._respawn(p)
                else:
                    self.timer[p] -= 1
        for p in np.flatnonzero(hit):
            if self.timer[p] == 0:
                self.timer[p] = REMOVAL_STEPS
        self._regrow()
        self.t += 1
        return [self.observation(p) for p in range(2)], rewards, self.done

    def _laser_hits(self, p: int) -> np.ndarray:
        h, w = self._shape
        hit = np.zeros(2, dtype=bool)
        where = {tuple(self.pos[q]): q for q in range(2) if q != p and self.timer[q] == 0}
        for column in self._window(p):
            for y, x in column:
                if (y, x) == tuple(self.pos[p]):
                    continue
                if not (0 <= y < h and 0 <= x < w) or self.wall[y, x]:
                    break
                if (y, x) in where:
                    hit[where[(y, x)]] = True
                    break
        return hit

    def _regrow(self) -> None:
        padded = np.pad(self.apples.astype(int), 2)
        h, w = self._shape
        counts = np.zeros(self._shape, dtype=int)
        for dy, dx in np.argwhere(self._kernel):
            counts += padded[dy:dy + h, dx:dx + w]
        prob = REGROWTH[np.minimum(counts, 3)]
        empty = self.apple_spawn & ~self.apples & ~self._occupied()
        self.apples |= empty & (self.rng.random(self._shape) < prob)


class HarvestGame:
    """Harvest as a PSRO game: the interface the PSRO loop uses (observation size, number of
    actions, one simulated episode with both players acting simultaneously)."""

    def __init__(self, map_name: str = "sparse", max_steps: int = 1000):
        if map_name not in MAPS:
            raise ValueError(f"unknown harvest map {map_name!r}; known: {sorted(MAPS)}")
        if max_steps < 1:
            raise ValueError(f"harvest max_steps must be >= 1, got {max_steps}")
        self.map_name, self.max_steps = map_name, max_steps

    def information_state_tensor_shape(self) -> list[int]:
        return [OBS_SIZE]

    def num_distinct_actions(self) -> int:
        return N_ACTIONS

    def play_episode(self, seat_policies, rng: np.random.Generator):
        """One episode; per step both players' decisions are recorded (player 0 first), each with
        that step's reward pair."""
        from icml25.pipelines.ex2psro.bargaining import Trajectory

        env = Harvest(self.map_name, self.max_steps, seed=int(rng.integers(2**31)))
        obs = env.reset()
        legal = np.ones(N_ACTIONS, dtype=bool)
        traj = Trajectory()
        totals = np.zeros(2)
        while not env.done:
            acts = [int(rng.choice(N_ACTIONS, p=seat_policies[p].probabilities(obs[p], legal)))
                    for p in range(2)]
            observed = obs
            obs, rewards, _ = env.step(acts)
            totals += rewards
            for p in range(2):
                traj.players.append(p)
                traj.obs.append(observed[p])
                traj.legal.append(legal)
                traj.actions.append(acts[p])
                traj.rewards.append((float(rewards[0]), float(rewards[1])))
        traj.returns = (float(totals[0]), float(totals[1]))
        return traj
