"""The bargaining wrapper: instance set, seat randomisation, returns."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.ex2psro.bargaining import (
    EX2PSRO_INSTANCES,
    UniformPolicy,
    load_game,
    parse_instances,
    play_episode,
    play_match,
)

pytest.importorskip("pyspiel")


@pytest.fixture(scope="module")
def game():
    return load_game("bargaining", 0.99, EX2PSRO_INSTANCES)


def test_ex2psro_game_has_20_instances_and_121_actions(game):
    assert game.num_distinct_actions() == 121
    assert len(game.new_initial_state().chance_outcomes()) == 20
    assert len(parse_instances(EX2PSRO_INSTANCES)) == 20


def test_ex2psro_seats_balanced(game):
    rng = np.random.default_rng(0)
    seats = [int(rng.integers(2)) for _ in range(10_000)]  # the draw play_match makes
    assert 0.49 <= np.mean(seats) <= 0.51
    uniform = UniformPolicy()
    got = [play_match(game, uniform, uniform, np.random.default_rng(s))[1] for s in range(400)]
    assert 0.4 < np.mean(got) < 0.6


def test_ex2psro_returns_equal_state_returns_and_discount_lowers_them():
    undiscounted = load_game("bargaining", 1.0, EX2PSRO_INSTANCES)
    discounted = load_game("bargaining", 0.95, EX2PSRO_INSTANCES)
    uniform = UniformPolicy()
    for seed in range(30):
        traj = play_episode(undiscounted, (uniform, uniform), np.random.default_rng(seed))
        states = []
        for g in (undiscounted, discounted):
            state = g.new_initial_state()
            state.apply_action(traj.instance)
            for action in traj.actions:
                state.apply_action(action)
            states.append(state)
        assert tuple(states[0].returns()) == pytest.approx(traj.returns)
        assert all(d <= u + 1e-12 for d, u in zip(states[1].returns(), states[0].returns(),
                                                  strict=True))


def test_ex2psro_unknown_game_is_refused():
    with pytest.raises(ValueError, match="unknown game 'harvest'"):
        load_game("harvest", 0.99, EX2PSRO_INSTANCES)


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty"),
    ("1,2,3 8,1,0", "3 space-separated groups"),
    ("1,2,x 8,1,0 4,0,2", "comma-separated integers"),
    ("1,2 8,1,0 4,0,2", "3 non-negative integers"),
    ("1,1,1 1,1,1 1,1,1", "5-7 items"),
    ("1,2,3 8,1,1 4,0,2", "sum to 13"),
])
def test_ex2psro_malformed_instance_file_is_refused(text, match):
    with pytest.raises(ValueError, match=match):
        parse_instances(text)
