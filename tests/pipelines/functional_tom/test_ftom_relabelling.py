"""Relabelling a game's actions (listing them in another order, payoffs permuted to match)
changes nothing a game means: every partner family plays the relabelled actions, and every
agent's regret is the same (exactly for the DP oracle, within sampling error for agents that
break ties at random)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from icml25.core.chat import stub_server
from icml25.pipelines.functional_tom.episodes import run_episode
from icml25.pipelines.functional_tom.games import Game, default_games, make_game
from icml25.pipelines.functional_tom.llm_agent import LLMAgent, make_backend
from icml25.pipelines.functional_tom.optimal_play import solve
from icml25.pipelines.functional_tom.partners import (
    DETERMINISTIC,
    build_partner,
    hypothesis_library,
)
from icml25.pipelines.functional_tom.reference_agents import (
    REFERENCE_AGENTS,
    make_reference_agent,
)

pytestmark = pytest.mark.usefixtures("one_thread")
GAMES = default_games()
#: new order of the old action indices: IPD lists Defect first, IBS A1 first, RPS is reversed
#: (Scissors, Paper, Rock: not a rotation, so "the next action" by index changes meaning)
PERMS = {"ipd": [1, 0], "ibs": [1, 0], "rps": [2, 1, 0]}


def relabel(game: Game, perm: list[int]) -> Game:
    p = np.asarray(perm)
    return make_game(game.name, game.kind, [game.actions[i] for i in perm],
                     game.payoff[np.ix_(p, p)], game.partner_payoff[np.ix_(p, p)])


def relabel_spec(spec: dict, perm: list[int]) -> dict:
    new = {old: i for i, old in enumerate(perm)}
    out = dict(spec)
    for key in ("action", "first"):
        if key in out:
            out[key] = new[out[key]]
    if "sequence" in out:
        out["sequence"] = [new[s] for s in out["sequence"]]
    if "probs" in out:
        out["probs"] = [spec["probs"][old] for old in perm]
    return out


def _specs(game: Game) -> list[dict]:
    return [dict(h.spec) for h in hypothesis_library(game)]


@pytest.mark.parametrize("name", ["rps", "ibs", "ipd"])
def test_every_partner_family_plays_the_same_actions_by_name(name):
    game, perm = GAMES[name], PERMS[name]
    new_game = relabel(game, perm)
    new_index = {old: i for i, old in enumerate(perm)}
    families = {s["family"] for s in _specs(game)}
    assert families == set(DETERMINISTIC) - ({"grim"} if name != "ipd" else set())
    rng = np.random.default_rng(0)
    for spec in _specs(game):
        old, new = build_partner(game, spec), build_partner(new_game, relabel_spec(spec, perm))
        for _ in range(5):
            z_old, z_new = old.z0, new.z0
            for a in rng.integers(game.n_actions, size=12):
                b = old.action(z_old, rng)
                assert game.actions[b] == new_game.actions[new.action(z_new, rng)], spec
                z_old = old.step(z_old, int(a), b)
                z_new = new.step(z_new, new_index[int(a)], new_index[b])


def test_grim_and_rps_reactions_follow_the_names():
    ipd = relabel(GAMES["ipd"], PERMS["ipd"])  # [Defect, Cooperate]
    grim = build_partner(ipd, {"family": "grim"})
    assert ipd.actions[int(grim.probs[grim.z0].argmax())] == "Cooperate"
    z = grim.step(grim.z0, ipd.actions.index("Defect"), 0)
    assert ipd.actions[int(grim.probs[z].argmax())] == "Defect"
    rps = relabel(GAMES["rps"], PERMS["rps"])  # [Scissors, Paper, Rock]
    tft = build_partner(rps, {"family": "tft", "first": 0})
    z = tft.step(tft.z0, rps.actions.index("Rock"), 0)
    assert rps.actions[int(tft.probs[z].argmax())] == "Paper"  # Paper beats Rock


def test_games_without_the_meaning_are_refused():
    with pytest.raises(ValueError, match="kind rps"):
        make_game("bad", "rps", ["R", "P", "S"], np.zeros((3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="kind ipd"):
        make_game("bad", "ipd", ["C", "D"], [[8, 0], [10, 5]], [[8, 0], [8, 5]])


@pytest.fixture
def ties_by_name(monkeypatch):
    """Couple the two labellings: ties are broken among the tied actions listed by *name*, and
    the random agent's draw k picks the k-th action by name, so every draw means the same
    action in both labellings and each episode's regret must be identical (the agents' own
    tie-breaking picks by position, which is equal in distribution only)."""
    import icml25.pipelines.functional_tom.games as games_mod
    import icml25.pipelines.functional_tom.reference_agents as ref_mod

    current: dict = {}

    def by_name(values, rng=None, tol=1e-12):
        values = np.asarray(values, dtype=float)
        best = sorted(np.flatnonzero(values >= values.max() - tol),
                      key=lambda i: current["names"][i])
        return int(best[0] if rng is None or len(best) == 1 else best[rng.integers(len(best))])

    def random_act(self):
        order = sorted(range(self.game.n_actions), key=lambda i: self.game.actions[i])
        return int(order[self.rng.integers(self.game.n_actions)])

    monkeypatch.setattr(games_mod, "argmax_random", by_name)
    monkeypatch.setattr(ref_mod, "argmax_random", by_name)
    monkeypatch.setattr(ref_mod.RandomAgent, "act", random_act)
    return current


def _regrets(game: Game, specs: list[dict], agent_name: str, horizon: int,
             current: dict) -> np.ndarray:
    current["names"] = game.actions
    out = []
    for k, spec in enumerate(specs):
        partner = build_partner(game, spec)
        agent = make_reference_agent(agent_name, rmax_sweeps=20)
        res = run_episode(game, partner, agent, solve(game, partner, horizon), seed=k,
                          give_partner=agent_name == "oracle")
        out.append(res.regret)
    return np.asarray(out)


@pytest.mark.parametrize(("name", "agent"), list(itertools.product(["ipd", "ibs", "rps"],
                                                                 REFERENCE_AGENTS)))
def test_every_reference_agent_has_the_same_regret_after_relabelling(name, agent,
                                                                      ties_by_name):
    """Every partner of the planner's hypothesis library (grim trigger, TFT, anti, WSLS,
    cycles, constants), original vs relabelled game: the same regret in every episode. Before
    the partners were defined by the games' meaning, grim trigger and the RPS reactions
    followed the action order (the Bayesian planner's regret against constant Cooperate was
    1.98 vs 0.00 per step with IPD's actions listed Defect first)."""
    game, perm = GAMES[name], PERMS[name]
    specs = _specs(game)
    before = _regrets(game, specs, agent, 10, ties_by_name)
    after = _regrets(relabel(game, perm), [relabel_spec(s, perm) for s in specs], agent, 10,
                     ties_by_name)
    bad = [(specs[i], before[i], after[i]) for i in np.flatnonzero(
        np.abs(after - before) > 1e-9)]
    assert not bad, bad


def test_llm_agent_reads_names_not_positions():
    """An endpoint that always answers by name ("Defect"): the same regret in both labellings."""
    llm = {"backend": "openai", "base_url": None, "model": None, "timeout_s": 2.0,
           "max_retries": 0, "backoff_s": 0.0}
    ipd = GAMES["ipd"]
    new = relabel(ipd, PERMS["ipd"])
    regrets = []
    with stub_server(lambda body: "I'd defect.") as url:
        backend = make_backend(llm, {"base_url": url, "model": "m"})
        for game, spec in ((ipd, {"family": "grim"}), (new, {"family": "grim"}),
                           (ipd, {"family": "tft", "first": 0}),
                           (new, relabel_spec({"family": "tft", "first": 0}, PERMS["ipd"]))):
            partner = build_partner(game, spec)
            res = run_episode(game, partner, LLMAgent(backend, "qa"), solve(game, partner, 4),
                              seed=0)
            assert res.invalid_rate == 0
            regrets.append(res.regret)
    assert regrets[0] == regrets[1] and regrets[2] == regrets[3]
