"""The PSRO loop on a tiny budget: every exploration type runs, runs are deterministic, the
empirical payoff matrix is symmetrised from shared simulations."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.ex2psro.bargaining import EX2PSRO_INSTANCES, UniformPolicy, load_game
from icml25.pipelines.ex2psro.psro import PSROConfig, estimate_entry, run_psro
from icml25.pipelines.ex2psro.responses import SACConfig

pytestmark = pytest.mark.usefixtures("one_thread")
pytest.importorskip("pyspiel")


@pytest.fixture(scope="module")
def game():
    return load_game("bargaining", 0.99, EX2PSRO_INSTANCES)


def _cfg(explore: str) -> PSROConfig:
    return PSROConfig(iters=2, sims_per_entry=3, rrd_lambda_init=2.0, rrd_lambda_final=0.0,
                      rrd_steps=2, rrd_dt=1e-3, rrd_max_steps=500, oracle_steps=40,
                      learning_starts=16, update_every=4, buffer_size=200,
                      sac=SACConfig(hidden=(8,), batch=8), explore=explore, n_top=10,
                      bc_lr=1e-3, bc_batch=16, bc_epochs=1, bc_min_loss=0.8, lambda0=0.1,
                      k_lambda=5, progress=False)


@pytest.mark.parametrize("explore", ["none", "ex2psro", "maxwelfare", "minwelfare", "prevbr",
                                     "uniform"])
def test_ex2psro_every_exploration_type_runs(game, explore):
    run = run_psro(game, _cfg(explore), seed=0, name=explore)
    assert run["payoffs"].shape == (3, 3) and np.all(np.isfinite(run["payoffs"]))
    assert len(run["sigma"]) == 3 and all(abs(s.sum() - 1) < 1e-9 for s in run["sigma"])
    assert (max(run["kl_weight"]) > 0) == (explore != "none")


def test_ex2psro_runs_are_deterministic(game):
    a = run_psro(game, _cfg("ex2psro"), seed=3)
    b = run_psro(game, _cfg("ex2psro"), seed=3)
    np.testing.assert_array_equal(a["payoffs"], b["payoffs"])
    for (wa, ba), (wb, bb) in zip(a["weights"][-1], b["weights"][-1], strict=True):
        np.testing.assert_array_equal(wa, wb)
        np.testing.assert_array_equal(ba, bb)


def test_ex2psro_payoff_entries_share_simulations(game):
    seen = []
    a, b = estimate_entry(game, UniformPolicy(), UniformPolicy(), 50,
                          np.random.default_rng(0), seen.append)
    # the two entries are the two seats' mean returns of the same 50 episodes
    assert len(seen) == 50
    assert a + b == pytest.approx(np.mean([sum(t.returns) for t in seen]))


def test_ex2psro_unknown_exploration_type_is_refused(game):
    with pytest.raises(ValueError, match="unknown exploration type"):
        run_psro(game, _cfg("magic"), seed=0)


def test_ex2psro_psro_runs_on_harvest():
    from icml25.pipelines.ex2psro.harvest import HarvestGame

    game = HarvestGame("dense", max_steps=15)
    run = run_psro(game, _cfg("ex2psro"), seed=0, name="harvest")
    assert run["payoffs"].shape == (3, 3) and np.all(run["payoffs"] >= 0)
    assert np.all(np.isfinite(run["welfare"]))


def test_ex2psro_bargaining_rewards_sit_on_each_players_last_decision(game):
    from icml25.pipelines.ex2psro.bargaining import play_episode

    traj = play_episode(game, (UniformPolicy(), UniformPolicy()), np.random.default_rng(1))
    for player in (0, 1):
        mine = [t for t, p in enumerate(traj.players) if p == player]
        assert traj.rewards[mine[-1]] == traj.returns
        assert all(traj.rewards[t] == (0.0, 0.0) for t in mine[:-1])
