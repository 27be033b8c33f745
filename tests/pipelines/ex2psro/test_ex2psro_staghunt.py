"""The repeated stag hunt, the payoff-range scaling of the RRD thresholds, the episode budget and
the per-run episode counts."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.ex2psro.bargaining import UniformPolicy
from icml25.pipelines.ex2psro.meta_solver import (
    game_payoff_range,
    regret,
    regret_lambda,
    rrd,
    threshold_scale,
    total_regret,
)
from icml25.pipelines.ex2psro.psro import PSROConfig, run_psro, train_response
from icml25.pipelines.ex2psro.responses import SACConfig
from icml25.pipelines.ex2psro.staghunt import HARE, STAG, StagHuntGame

pytestmark = pytest.mark.usefixtures("one_thread")


class _Always:
    def __init__(self, action: int):
        self.action = action

    def probabilities(self, obs, legal):
        p = np.zeros(legal.size)
        p[self.action] = 1.0
        return p


def test_ex2psro_stag_hunt_payoffs_and_returns():
    game = StagHuntGame(rounds=5, stag=4.0, hare=3.0, sucker=0.0)
    assert game.stage_payoffs(STAG, STAG) == (4.0, 4.0)
    assert game.stage_payoffs(STAG, HARE) == (0.0, 3.0)
    assert game.stage_payoffs(HARE, HARE) == (3.0, 3.0)
    traj = game.play_episode((_Always(STAG), _Always(HARE)), np.random.default_rng(0))
    assert traj.returns == (0.0, 15.0)
    assert len(traj.actions) == 10 and traj.players == [0, 1] * 5
    assert game.payoff_range() == 20.0 == game_payoff_range(game)
    # the second round's observation shows the first round's actions from each player's side
    np.testing.assert_array_equal(traj.obs[0], [1, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(traj.obs[2], [0, 1, 0, 0, 1, 0.2], atol=1e-7)
    np.testing.assert_allclose(traj.obs[3], [0, 0, 1, 1, 0, 0.2], atol=1e-7)


def test_ex2psro_stag_hunt_uniform_welfare_matches_the_closed_form():
    game = StagHuntGame(rounds=4)
    rng = np.random.default_rng(0)
    totals = [sum(game.play_episode((UniformPolicy(), UniformPolicy()), rng).returns)
              for _ in range(3000)]
    # per round and player: 0.5 * 3 + 0.5 * 0.5 * 4 = 2.5
    assert np.mean(totals) == pytest.approx(4 * 2 * 2.5, abs=0.25)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rounds": 0}, "rounds"), ({"stag": 3.0, "hare": 3.0}, "stag > hare > sucker")])
def test_ex2psro_stag_hunt_bad_parameters_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StagHuntGame(**kwargs)


def test_ex2psro_one_shot_stag_hunt_leaves_uniform_once_thresholds_scale():
    """Uniform play of the one-shot stag hunt has total regret 1.0: an absolute threshold of 2
    never moves the meta-solver; the scaled schedule at its end (floor x range) does."""
    u = np.array([[4.0, 0.0], [3.0, 3.0]])
    uniform = np.full(2, 0.5)
    assert total_regret(u, uniform) == pytest.approx(1.0)
    sigma, steps = rrd(u, lam=2.0)
    assert steps == 0 and np.allclose(sigma, uniform)
    game = StagHuntGame(rounds=1)
    lam = threshold_scale(game, u, "payoff_range") * regret_lambda(4, 0.5, 0.0, 4, 1e-4)
    assert lam == pytest.approx(4e-4)
    sigma, _ = rrd(u, lam=lam, dt=1e-2, max_steps=50_000)
    assert total_regret(u, sigma) < lam and sigma[1] > 0.99  # the risk-dominant hare


def test_ex2psro_threshold_scale_modes():
    u = np.array([[1.0, -2.0], [5.0, 0.0]])
    assert threshold_scale(object(), u, "absolute") == 1.0
    assert threshold_scale(object(), u, "payoff_range") == 7.0  # no stated range: max U - min U
    assert threshold_scale(StagHuntGame(rounds=2), u, "payoff_range") == 8.0
    with pytest.raises(ValueError, match="unknown RRD threshold scale"):
        threshold_scale(object(), u, "magic")


def test_ex2psro_bargaining_payoff_range_is_ten():
    pytest.importorskip("pyspiel")
    from icml25.pipelines.ex2psro.bargaining import EX2PSRO_INSTANCES, load_game

    assert game_payoff_range(load_game("bargaining", 0.99, EX2PSRO_INSTANCES)) == 10.0


def _cfg(explore: str, **kw) -> PSROConfig:
    base = {"iters": 2, "sims_per_entry": 3, "rrd_lambda_init": 0.5, "rrd_lambda_final": 0.0,
            "rrd_steps": 2, "rrd_dt": 1e-3, "rrd_max_steps": 5000, "oracle_steps": 40,
            "learning_starts": 16, "update_every": 4, "buffer_size": 500,
            "sac": SACConfig(hidden=(8,), batch=8), "explore": explore, "n_top": 10,
            "bc_lr": 1e-3, "bc_batch": 16, "bc_epochs": 1, "bc_min_loss": 0.8, "lambda0": 0.1,
            "k_lambda": 5, "progress": False, "oracle_episodes": 7,
            "rrd_scale": "payoff_range", "rrd_floor": 1e-4}
    return PSROConfig(**{**base, **kw})


def test_ex2psro_oracle_episode_budget_is_exact():
    game = StagHuntGame(rounds=3)
    _, summary = train_response(game, [UniformPolicy()], np.ones(1), _cfg("none"), seed=0)
    assert summary["episodes"] == 7 and summary["learner_steps"] == 21
    _, summary = train_response(game, [UniformPolicy()], np.ones(1),
                                _cfg("none", oracle_episodes=None), seed=0)
    assert summary["learner_steps"] == 42  # step budget 40, whole episodes of 3 decisions


def test_ex2psro_methods_simulate_equal_episodes_and_record_exact_regrets():
    game = StagHuntGame(rounds=3)
    runs = {e: run_psro(game, _cfg(e), seed=1, name=e) for e in ("none", "ex2psro")}
    # uniform self-play: 3; then per iteration k the new policy against all k + 1 members
    estimation = 3 * (1 + 2 + 3)
    for run in runs.values():
        assert run["episodes_oracle"] == 2 * 7
        assert run["episodes_estimation"] == estimation
        assert run["episodes_total"] == 2 * 7 + estimation
        assert run["learner_steps"] == 2 * 7 * 3
        for k, sigma in enumerate(run["sigma"]):
            n = sigma.size
            assert run["own_regret"][k] == pytest.approx(regret(run["payoffs"][:n, :n], sigma))
        # thresholds in return units: fraction x the game's range (3 x 4), the last at the floor
        assert run["rrd_lambda"] == pytest.approx([6.0, 3.0, 1.2e-3])
        assert total_regret(run["payoffs"], run["sigma"][-1]) < 1.2e-3 or (
            run["rrd_steps_used"][-1] == 5000)
