"""Prompts of the LLM agents and robust answer parsing (the paper's prompting strategies).

The prompt is the game description (actions, the full payoff table for both players, the number
of rounds, "your goal is to maximise your total points"), then one history line per finished
round ("Round 7: you played Paper, the other player played Rock, you got 1 point."), then the
question. A strategy is a base name (``lm``, ``qa``, ``cot``, ``social_qa``, ``social_lm``,
``oracle``, ``oracle_max``, ``cot_3shot``) optionally followed by ablations joined with ``+``:
``no_history`` drops the history, ``no_payoffs`` drops the payoff table (e.g.
``oracle_max+no_history``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icml25.pipelines.functional_tom.games import Game

BASE_STRATEGIES = ("lm", "qa", "cot", "social_qa", "social_lm", "oracle", "oracle_max",
                   "cot_3shot")
ABLATIONS = ("no_history", "no_payoffs")
SCORED = ("lm", "social_lm")


@dataclass(frozen=True)
class Strategy:
    base: str
    no_history: bool = False
    no_payoffs: bool = False

    @property
    def scored(self) -> bool:
        """Completion-style strategies that score continuations by log-probability."""
        return self.base in SCORED

    @property
    def social(self) -> bool:
        return self.base.startswith("social")


def parse_strategy(name: str) -> Strategy:
    base, *ablations = name.split("+")
    if base not in BASE_STRATEGIES:
        raise ValueError(f"strategy {name!r}: base {base!r} not in {BASE_STRATEGIES}")
    unknown = sorted(set(ablations) - set(ABLATIONS))
    if unknown:
        raise ValueError(f"strategy {name!r}: unknown ablations {unknown}; expected {ABLATIONS}")
    return Strategy(base, "no_history" in ablations, "no_payoffs" in ablations)


def _points(x: float) -> str:
    value = int(x) if float(x).is_integer() else x
    return f"{value} point" if value in (1, -1) else f"{value} points"


def game_description(game: Game, horizon: int, payoffs: bool = True) -> str:
    names = game.actions
    lines = [
        f"You are playing a game repeatedly with another player, for {horizon} rounds. "
        f"In each round, you and the other player simultaneously choose one action from: "
        f"{', '.join(names)}.",
    ]
    if payoffs:
        lines.append("The points of each round are:")
        for a, name_a in enumerate(names):
            for b, name_b in enumerate(names):
                lines.append(
                    f"- If you play {name_a} and the other player plays {name_b}, you get "
                    f"{_points(game.payoff[a, b])} and the other player gets "
                    f"{_points(game.partner_payoff[b, a])}.")
    lines.append("Your goal is to maximise your total points over all rounds.")
    return "\n".join(lines)


def history_lines(game: Game, history: Sequence[tuple[int, int, float]],
                  max_rounds: int | None = None) -> tuple[list[str], bool]:
    """One line per finished round; only the last ``max_rounds`` are kept (small models' context
    is short). Returns the lines and whether older rounds were dropped."""
    start = 0 if max_rounds is None else max(0, len(history) - max_rounds)
    lines = [f"Round {i + 1}: you played {game.actions[a]}, the other player played "
             f"{game.actions[b]}, you got {_points(r)}."
             for i, (a, b, r) in enumerate(history) if i >= start]
    return lines, start > 0


def describe_partner(game: Game, spec: Mapping[str, Any]) -> str:
    """The partner's policy in words (``oracle`` strategies)."""
    names, family = game.actions, spec["family"]
    if family == "single":
        return f"The other player always plays {names[spec['action']]}."
    if family in ("tft", "lag2_tft"):
        lag = "previous action" if family == "tft" else "action two rounds ago"
        first = names[spec["first"]]
        if game.kind == "rps":
            return (f"The other player plays the action that beats your {lag} "
                    f"({'first round' if family == 'tft' else 'first two rounds'}: {first}).")
        return (f"The other player copies your {lag} "
                f"({'first round' if family == 'tft' else 'first two rounds'}: {first}).")
    if family == "anti":
        how = ("the action that your previous action beats" if game.kind == "rps"
               else "the other action than your previous one")
        return f"The other player plays {how} (first round: {names[spec['first']]})."
    if family == "cycle":
        seq = ", ".join(names[s] for s in spec["sequence"])
        return f"The other player repeats the cycle {seq}."
    if family == "wsls":
        return ("The other player keeps its action after a good round and switches to the next "
                f"action after a bad one (first round: {names[spec['first']]}).")
    if family == "grim":
        return (f"The other player plays {names[0]} until you first play {names[1]}, then plays "
                f"{names[1]} forever.")
    if family == "biased":
        probs = ", ".join(f"{n} with probability {p:.2f}" for n, p in zip(names, spec["probs"],
                                                                          strict=True))
        return f"The other player plays at random: {probs}."
    raise ValueError(f"unknown partner family {family!r}")


_COT_SHOTS = (
    "Example: the other player played Rock in every round so far. Step by step: it will most "
    "likely play Rock again; Paper beats Rock. Action: Paper\n"
    "Example: the other player copied my previous action every round and cooperating together "
    "pays more than mutual defection. Step by step: if I cooperate it cooperates next round. "
    "Action: Cooperate\n"
    "Example: the other player always chose A1. Step by step: matching it gives me points, "
    "mismatching gives none. Action: A1\n"
)


def build_prompt(game: Game, horizon: int, history: Sequence[tuple[int, int, float]],
                 strategy: Strategy, question: str, partner_text: str | None = None,
                 max_history_rounds: int | None = None, prediction: str | None = None
                 ) -> tuple[str, str, bool]:
    """(system text, user text, truncated) for one query. ``question`` is ``act`` or
    ``predict``; ``prediction`` is appended to the context for social strategies."""
    system = game_description(game, horizon, payoffs=not strategy.no_payoffs)
    if strategy.base in ("oracle", "oracle_max") and partner_text:
        system += "\n" + partner_text
        if strategy.base == "oracle_max":
            system += ("\nChoose the action that maximises your points against that policy, "
                       "taking all remaining rounds into account.")
    lines, truncated = ([], False) if strategy.no_history else history_lines(
        game, history, max_history_rounds)
    t = len(history) + 1
    options = ", ".join(game.actions)
    parts = list(lines)
    if strategy.base == "cot_3shot" and question == "act":
        parts.insert(0, _COT_SHOTS)
    if prediction is not None:
        parts.append(f"Round {t}: I predict the other player will play {prediction}.")
    if question == "predict":
        parts.append(f"Round {t}: which action will the other player play? Answer with one of: "
                     f"{options}.")
    elif strategy.base in ("cot", "cot_3shot"):
        parts.append(f"Round {t}: which action do you play? Think step by step, then answer in "
                     f"the form `Action: <name>` with <name> one of: {options}.")
    else:
        parts.append(f"Round {t}: which action do you play? Answer with one of: {options}.")
    return system, "\n".join(parts), truncated


def completion_prompt(game: Game, horizon: int, history: Sequence[tuple[int, int, float]],
                      strategy: Strategy, question: str, max_history_rounds: int | None = None,
                      prediction: str | None = None) -> tuple[str, bool]:
    """Completion-style (``lm``) text without a chat template, ending in "Round t: you play" or
    "Round t: the other player will play"; action names are scored as continuations."""
    system = game_description(game, horizon, payoffs=not strategy.no_payoffs)
    lines, truncated = ([], False) if strategy.no_history else history_lines(
        game, history, max_history_rounds)
    t = len(history) + 1
    text = system + "\n" + "\n".join(lines) + ("\n" if lines else "")
    if prediction is not None:
        text += f"Round {t}: the other player will play {prediction}.\n"
    text += f"Round {t}: the other player will play" if question == "predict" \
        else f"Round {t}: you play"
    return text, truncated


def _patterns(game: Game) -> list[tuple[int, re.Pattern]]:
    out = []
    for i, name in enumerate(game.actions):
        words = [name, *game.synonyms.get(name, ())]
        alt = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        out.append((i, re.compile(rf"(?<![A-Za-z0-9])(?:{alt})(?![A-Za-z0-9])", re.I)))
    return out


def parse_first_action(text: str | None, game: Game) -> int | None:
    """The first action name (or synonym) in ``text``, case-insensitive; None if there is none."""
    if not text:
        return None
    hits = [(m.start(), i) for i, pat in _patterns(game) for m in pat.finditer(text)]
    return min(hits)[1] if hits else None


def parse_final_action(text: str | None, game: Game) -> int | None:
    """The action after the last ``Action:`` marker (chain-of-thought answers); falls back to the
    last action name mentioned when there is no marker; None if nothing valid."""
    if not text:
        return None
    markers = list(re.finditer(r"action\s*[:=]\s*[`*\"']*", text, re.I))
    if markers:
        found = parse_first_action(text[markers[-1].end():], game)
        if found is not None:
            return found
    hits = [(m.start(), i) for i, pat in _patterns(game) for m in pat.finditer(text)]
    return max(hits)[1] if hits else None
