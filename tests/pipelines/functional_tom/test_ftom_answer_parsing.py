"""The answer parser on real-style answers of each game (whole words and phrases, negation,
contractions, hedges, two actions named, case, punctuation), with the games built from the
configured action names and synonyms (conf/base/parameters_functional_tom.yml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from icml25.pipelines.functional_tom.games import make_game
from icml25.pipelines.functional_tom.prompts import parse_final_action, parse_first_action

ROOT = Path(__file__).resolve().parents[3]
_CONF = yaml.safe_load((ROOT / "conf/base/parameters_functional_tom.yml").read_text())
GAMES = {name: make_game(name, g["kind"], g["actions"], g["payoff"], g["partner_payoff"],
                         g.get("synonyms"))
         for name, g in _CONF["functional_tom"]["games"].items()}

R, P, S = 0, 1, 2
C, D = 0, 1
A0, A1 = 0, 1
NONE = None

RPS_ANSWERS = [
    ("It's rock", R), ("It's Rock.", R), ("Let's go with Paper", P), ("Let's go with paper.", P),
    ("Rock", R), ("rock", R), ("ROCK", R), ("Paper!", P), ("scissors", S), ("SCISSORS.", S),
    ("Scissor", S), ("I play Paper.", P), ("I'll play Scissors", S), ("I'd pick Rock", R),
    ("I’d go with Paper", P), ("My answer: Rock", R), ("Answer: **Paper**", P),
    ('"Scissors"', S), ("'Rock'", R), ("`Paper`", P), ("(Scissors)", S), ("[Rock]", R),
    ("R", R), ("P.", P), ("S", S), ("I choose P", P), ("Paper's my choice", P),
    ("Paper beats Rock, so Paper.", P), ("Scissors, since they keep playing Paper", S),
    ("Probably Rock", R), ("Maybe scissors?", S), ("I think Paper, but I'm not sure", P),
    ("Rock or Paper", NONE), ("Rock / Paper", NONE), ("either Scissors or Rock", NONE),
    ("Paper, or maybe Scissors", NONE), ("Not rock. Paper.", P), ("I will not play Rock", NONE),
    ("I won't play Rock, I'll play Paper", P), ("Paper instead of Rock", P),
    ("Scissors rather than Paper", S), ("Never Scissors: Rock", R), ("Don't play paper; rock", R),
    ("I would avoid Rock and play Paper", P), ("Rock, not Paper", R), ("It's not Scissors", NONE),
    ("Rockets are cool", NONE), ("Papery texture", NONE), ("Let's see", NONE),
    ("It's", NONE), ("I'd say so", NONE), ("I have no idea", NONE), ("", NONE),
    ("rock-paper-scissors is fun", R), ("Rock!!!", R), ("  paper  ", P),
]

IPD_ANSWERS = [
    ("I'd cooperate", C), ("I'd defect", D), ("Cooperate", C), ("cooperate.", C),
    ("DEFECT", D), ("Defect!", D), ("Let's cooperate", C), ("Let's defect.", D),
    ("It's Defect", D), ("It's cooperate", C), ("I'll cooperate this round", C),
    ("I’ll defect this round", D), ("C", C), ("D", D), ("I choose D.", D), ("I choose C", C),
    ("My answer: Defect", D), ("Answer: **Cooperate**", C), ('"Defect"', D), ("(Cooperate)", C),
    ("Cooperation", C), ("I keep cooperating", C), ("Defection is best", D),
    ("I'm defecting", D), ("Probably cooperate", C), ("Maybe defect?", D),
    ("I think Cooperate, but I'm not sure", C), ("Cooperate or Defect", NONE),
    ("Cooperate / Defect", NONE), ("either Defect or Cooperate", NONE),
    ("Defect, or maybe Cooperate", NONE), ("I won't defect", C), ("I will not cooperate", D),
    ("Never cooperate", D), ("I don't want to defect", C), ("Don't cooperate; defect", D),
    ("Not defect. Cooperate.", C), ("Cooperate, not defect", C),
    ("Cooperate instead of defect", C), ("Defect rather than cooperate", D),
    ("I can't cooperate", D), ("Cooperate, since it cooperates back", C),
    ("Defect because it defects", D), ("I'll be cooperative", C), ("cooperate!!!", C),
    ("  defect  ", D), ("Cooperated", NONE), ("I'd say so", NONE), ("Let's see", NONE),
    ("no idea", NONE), ("", NONE), ("I choose A", NONE), ("Defective product", NONE),
]

IBS_ANSWERS = [
    ("A0", A0), ("A1", A1), ("a0", A0), ("a1.", A1), ("It's A1", A1), ("It's A0.", A0),
    ("Let's go with A1", A1), ("Let's go with A0", A0), ("I'd pick A0", A0), ("I’d pick A1", A1),
    ("I'll play A1", A1), ("I play A0.", A0), ("My answer: A1", A1), ("Answer: **A0**", A0),
    ('"A1"', A1), ("'A0'", A0), ("`A1`", A1), ("(A0)", A0), ("[A1]", A1), ("A1!", A1),
    ("Probably A0", A0), ("Maybe A1?", A1), ("I think A0, but I'm not sure", A0),
    ("A0 or A1", NONE), ("A0/A1", NONE), ("either A1 or A0", NONE),
    ("A1, or maybe A0", NONE), ("Not A0", A1), ("I won't play A1", A0),
    ("I will not choose A0", A1), ("Never A1", A0), ("Don't play A0; A1", A1),
    ("A1, not A0", A1), ("A0 instead of A1", A0), ("A1 rather than A0", A1),
    ("Not A0. A1.", A1), ("I can't play A1", A0), ("A1 since they played A1", A1),
    ("A0, matching their A0", A0), ("A10", NONE), ("A01", NONE), ("A", NONE), ("0", NONE),
    ("I'd say so", NONE), ("Let's see", NONE), ("", NONE), ("  A1  ", A1), ("A0!!!", A0),
    ("I choose A1 this round", A1), ("Going with a1", A1), ("a0 it is", A0),
    ("The answer is A1.", A1),
]


@pytest.mark.parametrize(("game", "answers"), [("rps", RPS_ANSWERS), ("ipd", IPD_ANSWERS),
                                                ("ibs", IBS_ANSWERS)])
def test_answer_table(game, answers):
    assert len(answers) >= 50
    wrong = [(text, parse_first_action(text, GAMES[game]), want) for text, want in answers
             if parse_first_action(text, GAMES[game]) != want]
    assert not wrong, f"{game}: (answer, parsed, expected): {wrong}"


def test_final_action_marker_and_fallback():
    rps, ipd = GAMES["rps"], GAMES["ipd"]
    assert parse_final_action("It's rock they play; paper beats it. Action: Paper", rps) == P
    assert parse_final_action("They played Rock. Let's think... so Scissors? No: Paper", rps) == P
    assert parse_final_action("I won't defect. Action: cooperate", ipd) == C
    assert parse_final_action("Action: Rock or Paper", rps) is None
    assert parse_final_action("Rock beats scissors; it's settled", rps) == S
    assert parse_final_action("I'd say so", rps) is None
