"""The evaluation's lockstep episodes and ex2psro's worker processes.

- Lockstep play (one batched forward pass per policy and step) plays the same game as the
  one-episode-at-a-time player: with deterministic policies on one-instance bargaining games and
  on the stag hunt, every episode's returns are equal exactly, per seat; with stochastic policies
  the two estimators' means agree within their standard errors.
- ``sample_rows`` draws by the row probabilities and never an action of probability 0.
- The combined game, the PSRO runs of a shard and the extra best responses are the same for
  one process and for two (each pair, run and response has its own random stream).
"""

from __future__ import annotations

import copy
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import yaml

from icml25.pipelines.ex2psro.bargaining import (
    EX2PSRO_INSTANCES,
    MLPPolicy,
    UniformPolicy,
    load_game,
    play_episode,
    sample_rows,
)
from icml25.pipelines.ex2psro.bargaining import play_returns as play_returns_pyspiel
from icml25.pipelines.ex2psro.psro import (
    cross_evaluate,
    estimate_entry,
    evaluate_entry,
    pair_rng,
    play_returns,
)
from icml25.pipelines.ex2psro.staghunt import StagHuntGame

pytestmark = pytest.mark.usefixtures("one_thread")
pytest.importorskip("pyspiel")

ROOT = Path(__file__).resolve().parents[3]
INSTANCES = EX2PSRO_INSTANCES.splitlines()


def _mlp(n_obs: int, n_actions: int, seed: int, scale: float = 1.0) -> MLPPolicy:
    rng = np.random.default_rng(seed)
    return MLPPolicy([(rng.normal(size=(n_obs, 16)) * scale, rng.normal(size=16) * scale),
                      (rng.normal(size=(16, n_actions)) * scale, rng.normal(size=n_actions))])


def test_sample_rows_follows_the_probabilities_and_skips_impossible_actions():
    probs = np.array([0.0, 0.2, 0.0, 0.5, 0.3, 0.0])
    draws = sample_rows(np.tile(probs, (200_000, 1)), np.random.default_rng(0))
    freq = np.bincount(draws, minlength=len(probs)) / len(draws)
    assert set(np.unique(draws)) == {1, 3, 4}
    np.testing.assert_allclose(freq, probs, atol=5 * np.sqrt(0.25 / len(draws)))

    class Edge:  # the two ends of the uniform draw
        def __init__(self, u):
            self.u = u

        def random(self, n):
            return np.full(n, self.u)

    rows = np.tile(probs, (1, 1))
    assert sample_rows(rows, Edge(0.0))[0] == 1              # never the 0-probability action 0
    assert sample_rows(rows, Edge(np.nextafter(1.0, 0)))[0] == 4  # nor the trailing action 5


@pytest.mark.parametrize("line", [0, 5, 16])
def test_lockstep_bargaining_equals_one_episode_at_a_time(line):
    # one instance: chance is fixed; policies with logit gaps of ~1e6 are deterministic, so each
    # seat's returns are a function of the policies alone
    game = load_game("bargaining", 0.99, INSTANCES[line] + "\n")
    n_obs, n_act = game.information_state_tensor_shape()[0], game.num_distinct_actions()
    a, b = _mlp(n_obs, n_act, 1, 1e6), _mlp(n_obs, n_act, 2, 1e6)
    lockstep = play_returns_pyspiel(game, a, b, np.array([0, 1, 1, 0]),
                                    np.random.default_rng(3))
    for e, seat in enumerate((0, 1, 1, 0)):
        traj = play_episode(game, (a, b) if seat == 0 else (b, a), np.random.default_rng(e))
        assert tuple(lockstep[e]) == (traj.returns[seat], traj.returns[1 - seat])


def test_lockstep_stag_hunt_equals_one_episode_at_a_time():
    game = StagHuntGame(rounds=7)
    a, b = _mlp(6, 2, 4, 1e6), _mlp(6, 2, 5, 1e6)
    seats = np.array([0, 1, 0, 1])
    lockstep = game.play_returns(a, b, seats, np.random.default_rng(0))
    for e, seat in enumerate(seats):
        traj = game.play_episode((a, b) if seat == 0 else (b, a), np.random.default_rng(e))
        assert tuple(lockstep[e]) == (traj.returns[seat], traj.returns[1 - seat])


@pytest.mark.parametrize("which", ["bargaining", "staghunt"])
def test_lockstep_and_sequential_estimates_agree_with_stochastic_policies(which):
    if which == "bargaining":
        game = load_game("bargaining", 0.99, EX2PSRO_INSTANCES)
        n_obs, n_act = game.information_state_tensor_shape()[0], game.num_distinct_actions()
    else:
        game, n_obs, n_act = StagHuntGame(), 6, 2
    a, b = _mlp(n_obs, n_act, 7, 0.3), UniformPolicy()
    sims = 3000
    batch = play_returns(game, a, b, sims, np.random.default_rng(1))
    seq = np.array([estimate_entry(game, a, b, 1, np.random.default_rng(10_000 + e))
                    for e in range(sims)])
    for k in (0, 1):
        se = np.sqrt(batch[:, k].var() / sims + seq[:, k].var() / sims)
        assert abs(batch[:, k].mean() - seq[:, k].mean()) < 5 * se


def test_uniform_stag_hunt_welfare_matches_the_closed_form():
    # each round: both stag 1/4 (4 + 4), one hare 1/2 (3 + 0), both hare 1/4 (3 + 3): 5 per round
    game = StagHuntGame(rounds=10)
    r = play_returns(game, UniformPolicy(), UniformPolicy(), 20_000, np.random.default_rng(0))
    welfare = r.sum(axis=1)
    assert abs(welfare.mean() - 50.0) < 5 * welfare.std() / np.sqrt(len(welfare))


@pytest.mark.parametrize("which", ["bargaining", "staghunt", "harvest"])
def test_cross_evaluation_is_the_same_on_two_processes(which):
    from icml25.pipelines.ex2psro.harvest import HarvestGame

    if which == "bargaining":
        make_game = partial(load_game, "bargaining", 0.99, EX2PSRO_INSTANCES)
    elif which == "staghunt":
        make_game = partial(StagHuntGame, 10)
    else:  # no batched player: episodes one at a time, from the same per-pair streams
        make_game = partial(HarvestGame, "dense", 12)
    game = make_game()
    n_obs, n_act = game.information_state_tensor_shape()[0], game.num_distinct_actions()
    policies = [UniformPolicy(), *(_mlp(n_obs, n_act, s, 0.5) for s in range(4))]
    one = cross_evaluate(make_game, policies, 6, 99, progress=False, workers=1)
    two = cross_evaluate(make_game, policies, 6, 99, progress=False, workers=2)
    np.testing.assert_array_equal(one, two)
    # an entry is the pair's own stream: independent of the order the pairs are evaluated in
    a, b = evaluate_entry(make_game(), policies[1], policies[3], 6, pair_rng(99, 1, 3))
    assert (one[1, 3], one[3, 1]) == (a, b)
    assert one[2, 2] == pytest.approx(np.mean(evaluate_entry(make_game(), policies[2],
                                                             policies[2], 6, pair_rng(99, 2, 2))))


def _tiny_params(n_workers: int) -> dict:
    tree = copy.deepcopy(yaml.safe_load(
        (ROOT / "conf/base/parameters_ex2psro.yml").read_text())["ex2psro"])
    tree.update(seeds=[0, 1], n_workers=n_workers, progress=False)
    tree["psro"].update(iters=1, sims_per_entry=2)
    tree["psro"]["rrd"].update(steps=1, max_iters=200)
    tree["oracle"].update(episodes=12, learning_starts=8, hidden=[8], batch=8, update_every=4)
    tree["explore"].update(n_top=4, bc_epochs=1)
    tree["eval"].update(sims_per_entry=2, extra_br_steps=24)
    tree["variants"]["staghunt"]["oracle"] = {"episodes": 3}
    tree["variants"]["staghunt"]["eval"] = {"extra_br_steps": 24}
    return tree


def test_psro_runs_and_evaluation_are_the_same_on_two_processes():
    from icml25.pipelines.ex2psro.nodes import (
        evaluate_runs,
        make_instances,
        run_all_psro,
        train_extra_best_responses,
    )

    out = {}
    for n in (1, 2):
        params = _tiny_params(n)
        instances = make_instances(params)
        runs = run_all_psro(instances, params)
        brs = train_extra_best_responses(instances, params, runs)
        out[n] = (runs, brs, evaluate_runs(instances, params, brs, runs))
    (runs1, brs1, ev1), (runs2, brs2, ev2) = out[1], out[2]
    assert [(r["variant"], r["name"], r["seed"]) for r in runs1] == \
        [(r["variant"], r["name"], r["seed"]) for r in runs2]
    assert len(runs1) == 2 * 2 * 2  # games x methods x seeds
    for r1, r2 in zip(runs1, runs2, strict=True):
        np.testing.assert_array_equal(r1["payoffs"], r2["payoffs"])
        for (w1, b1), (w2, b2) in zip(r1["weights"][-1], r2["weights"][-1], strict=True):
            np.testing.assert_array_equal(w1, w2)
            np.testing.assert_array_equal(b1, b2)
    assert [len(brs1[v]) for v in ("main", "staghunt")] == [4, 4]
    for v in ("main", "staghunt"):
        for br1, br2 in zip(brs1[v], brs2[v], strict=True):
            for (w1, b1), (w2, b2) in zip(br1, br2, strict=True):
                np.testing.assert_array_equal(w1, w2)
                np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(ev1["combined"], ev2["combined"])
    np.testing.assert_array_equal(ev1["variants"]["staghunt"]["combined"],
                                  ev2["variants"]["staghunt"]["combined"])
    assert ev1["n_extra_br"] == 4


def test_bad_worker_count_is_refused():
    from icml25.pipelines.ex2psro.nodes import run_all_psro

    with pytest.raises(ValueError, match="n_workers"):
        run_all_psro(EX2PSRO_INSTANCES, _tiny_params(-1))
