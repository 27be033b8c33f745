"""The numpy Harvest game: observations, apples, lasers, collisions, episode end."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.ex2psro.harvest import (
    FORWARD,
    LASER,
    NOOP,
    OBS_SIZE,
    Harvest,
    parse_map,
)


def _place(env: Harvest, p: int, pos, facing: int) -> None:
    env.pos[p] = pos
    env.facing[p] = facing


def test_ex2psro_harvest_observation_length():
    env = Harvest("sparse", seed=0)
    obs = env.reset()
    assert OBS_SIZE == 84 and all(o.shape == (84,) for o in obs)
    # one-hot over 4 channels per cell, agent channel signed
    cells = np.abs(obs[0].reshape(7, 3, 4)).sum(-1)
    assert np.all(cells == 1)
    assert obs[0].reshape(7, 3, 4)[0, 1, 3] == 1.0  # self at the window's centre bottom


@pytest.mark.parametrize("map_name", ["sparse", "dense"])
def test_ex2psro_harvest_apples_never_on_walls_or_agents(map_name):
    env = Harvest(map_name, max_steps=300, seed=1)
    rng = np.random.default_rng(0)
    while not env.done:
        env.step(rng.integers(8, size=2))
        assert not np.any(env.apples & env.wall)
        assert not np.any(env.apples & ~env.apple_spawn)
        for p in range(2):
            if env.timer[p] == 0:
                # the agent has just eaten any apple it stands on; regrowth skips occupied cells
                assert not env.apples[tuple(env.pos[p])]


def test_ex2psro_harvest_apple_reward_and_consumption():
    env = Harvest("sparse", seed=0)
    _place(env, 0, (1, 4), 2)   # facing south, apple at (2, 4)
    _place(env, 1, (5, 1), 0)
    assert env.apples[2, 4]
    _, rewards, _ = env.step([FORWARD, NOOP])
    assert tuple(env.pos[0]) == (2, 4) and rewards[0] == 1.0 and rewards[1] == 0.0
    assert not env.apples[2, 4]


def test_ex2psro_harvest_laser_removes_for_exactly_25_steps():
    env = Harvest("sparse", seed=0)
    _place(env, 0, (1, 1), 1)   # facing east along row 1
    _place(env, 1, (1, 6), 0)
    env.step([LASER, NOOP])
    removed = 0
    while env.timer[1] > 0:
        assert np.all(env.observation(1) == 1.0)
        removed += 1
        env.step([NOOP, FORWARD])  # the removed player's action is forced to no-op
    assert removed == 25 and env.spawn[tuple(env.pos[1])]


def test_ex2psro_harvest_mutual_hits_remove_nobody():
    env = Harvest("sparse", seed=0)
    _place(env, 0, (1, 1), 1)
    _place(env, 1, (1, 6), 3)
    env.step([LASER, LASER])
    assert np.all(env.timer == 0)


def test_ex2psro_harvest_collisions_keep_both_in_place():
    env = Harvest("sparse", seed=0)
    _place(env, 0, (1, 3), 1)   # both move into (1, 4)
    _place(env, 1, (1, 5), 3)
    env.step([FORWARD, FORWARD])
    assert tuple(env.pos[0]) == (1, 3) and tuple(env.pos[1]) == (1, 5)
    _place(env, 0, (1, 1), 0)   # into the wall
    env.step([FORWARD, NOOP])
    assert tuple(env.pos[0]) == (1, 1)


def test_ex2psro_harvest_ends_when_apples_run_out():
    env = Harvest("sparse", seed=0)
    env.apples[:] = False
    env.apples[2, 4] = True
    _place(env, 0, (1, 4), 2)
    _place(env, 1, (5, 1), 0)
    _, _, done = env.step([FORWARD, NOOP])
    assert done and env.t == 1
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step([NOOP, NOOP])


def test_ex2psro_harvest_same_seed_same_trajectory():
    def rollout(seed):
        env = Harvest("dense", max_steps=200, seed=seed)
        rng = np.random.default_rng(seed)
        trace = []
        while not env.done:
            obs, rewards, _ = env.step(rng.integers(8, size=2))
            trace.append((obs[0].copy(), rewards.copy(), env.apples.copy()))
        return trace

    a, b = rollout(4), rollout(4)
    assert len(a) == len(b)
    for (oa, ra, pa), (ob, rb, pb) in zip(a, b, strict=True):
        assert np.array_equal(oa, ob) and np.array_equal(ra, rb) and np.array_equal(pa, pb)


@pytest.mark.parametrize(("rows", "match"), [
    (["WWW", "WP"], "equal length"),
    (["WWWW", "WPXW", "WWWW"], "unknown cell"),
    (["WWWW", "PPAW", "WWWW"], "border"),
    (["WWWW", "WPAW", "WWWW"], "2 spawn cells"),
])
def test_ex2psro_harvest_malformed_map_is_refused(rows, match):
    with pytest.raises(ValueError, match=match):
        parse_map(rows)


def test_ex2psro_harvest_unknown_map_and_bad_actions_are_refused():
    with pytest.raises(ValueError, match="unknown harvest map"):
        Harvest("medium")
    with pytest.raises(ValueError, match="expected 2 actions"):
        Harvest("sparse").step([0, 9])
