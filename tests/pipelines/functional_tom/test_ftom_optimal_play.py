"""Games, partner FSMs and the exact optimal value by dynamic programming."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.functional_tom.games import default_games, make_game
from icml25.pipelines.functional_tom.optimal_play import brute_force_value, solve
from icml25.pipelines.functional_tom.partners import (
    build_partner,
    hypothesis_library,
    sample_partner_spec,
)

GAMES = default_games()


@pytest.mark.parametrize("horizon", [1, 7, 100])
def test_known_optimal_values(horizon):
    rps, ibs, ipd = GAMES["rps"], GAMES["ibs"], GAMES["ipd"]
    t = horizon
    assert solve(rps, build_partner(rps, {"family": "single", "action": 0}), t).v_star == t
    ipd_tft = solve(ipd, build_partner(ipd, {"family": "tft", "first": 0}), t)
    assert ipd_tft.v_star == 8 * (t - 1) + 10  # cooperate, defect in the last round
    assert solve(ibs, build_partner(ibs, {"family": "tft", "first": 0}), t).v_star == 10 * t
    assert solve(rps, build_partner(rps, {"family": "tft", "first": 0}), t).v_star == t


def test_ipd_tft_minimum_and_regret_bound():
    ipd = GAMES["ipd"]
    opt = solve(ipd, build_partner(ipd, {"family": "tft", "first": 0}), 100)
    assert opt.v_star == 802 and opt.v_worst == 500
    assert (opt.v_star - opt.v_worst) / 100 == pytest.approx(3.02)


@pytest.mark.parametrize("game", sorted(GAMES))
def test_dp_equals_brute_force_on_every_library_partner(game):
    g = GAMES[game]
    for partner in hypothesis_library(g):
        for horizon in (1, 4 if g.n_actions == 3 else 6):
            opt = solve(g, partner, horizon)
            best, worst = brute_force_value(g, partner, horizon)
            assert opt.v_star == pytest.approx(best), partner.name
            assert opt.v_worst == pytest.approx(worst), partner.name
            assert opt.r_star.sum() == pytest.approx(opt.v_star)


def test_stochastic_partner_value_is_expected_optimum():
    rps = GAMES["rps"]
    p = build_partner(rps, {"family": "biased", "probs": [0.5, 0.3, 0.2]})
    opt = solve(rps, p, 10)
    # against an i.i.d. partner the optimum is the best single-round expectation, every round
    assert opt.v_star == pytest.approx(10 * max(rps.payoff @ np.array([0.5, 0.3, 0.2])))


def test_partner_fsms():
    rps, ibs, ipd = GAMES["rps"], GAMES["ibs"], GAMES["ipd"]
    tft = build_partner(rps, {"family": "tft", "first": 0})
    z = tft.step(tft.z0, 0, 0)  # agent played Rock
    assert rps.actions[int(tft.probs[z].argmax())] == "Paper"
    anti = build_partner(rps, {"family": "anti", "first": 0})
    assert rps.actions[int(anti.probs[anti.step(anti.z0, 0, 0)].argmax())] == "Scissors"
    copy = build_partner(ibs, {"family": "tft", "first": 0})
    assert int(copy.probs[copy.z0].argmax()) == 0
    assert int(copy.probs[copy.step(copy.z0, 1, 0)].argmax()) == 1
    grim = build_partner(ipd, {"family": "grim"})
    z = grim.step(grim.z0, 1, 0)  # agent defects once
    for a in (0, 0, 0, 1, 0):
        assert int(grim.probs[z].argmax()) == 1
        z = grim.step(z, a, 1)
    lag2 = build_partner(ipd, {"family": "lag2_tft", "first": 0})
    z, seen = lag2.z0, []
    for a in (1, 0, 0, 1):
        b = int(lag2.probs[z].argmax())
        seen.append(b)
        z = lag2.step(z, a, b)
    assert seen == [0, 0, 1, 0]  # first twice, then the agent's action two rounds earlier
    wsls = build_partner(ipd, {"family": "wsls", "first": 0})
    z = wsls.step(wsls.z0, 1, 0)  # partner cooperated, was exploited: shift to Defect
    assert int(wsls.probs[z].argmax()) == 1
    z = wsls.step(z, 1, 1)  # mutual defection (5 < mean payoff 5.75): shift back
    assert int(wsls.probs[z].argmax()) == 0


def test_random_first_move_and_single_action_coverage():
    rps = GAMES["rps"]
    rng = np.random.default_rng(0)
    firsts = {sample_partner_spec(rps, "tft", rng)["first"] for _ in range(60)}
    assert firsts == {0, 1, 2}
    assert [sample_partner_spec(rps, "single", rng, episode=e)["action"] for e in range(6)] == [
        0, 1, 2, 0, 1, 2]
    cycle = sample_partner_spec(rps, "cycle", rng)
    assert 2 <= len(cycle["sequence"]) <= 3 and len(set(cycle["sequence"])) > 1


@pytest.mark.parametrize("spec, match", [
    ({"family": "single", "action": 3}, "not an action"),
    ({"family": "tft", "first": -1}, "not an action"),
    ({"family": "biased", "probs": [0.5, 0.6, -0.1]}, "not a distribution"),
    ({"family": "nope"}, "unknown partner family"),
])
def test_bad_partner_specs_are_refused(spec, match):
    with pytest.raises(ValueError, match=match):
        build_partner(GAMES["rps"], spec)


def test_grim_is_ipd_only_and_bad_games_are_refused():
    with pytest.raises(ValueError, match="IPD only"):
        build_partner(GAMES["rps"], {"family": "grim"})
    with pytest.raises(ValueError, match="must be 2x2"):
        make_game("bad", "ipd", ["C", "D"], [[1, 2, 3], [4, 5, 6]], [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="non-finite"):
        make_game("bad", "ipd", ["C", "D"], [[1, np.nan], [4, 5]], [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="horizon"):
        solve(GAMES["ipd"], build_partner(GAMES["ipd"], {"family": "grim"}), 0)
