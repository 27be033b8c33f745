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

import itertools
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
        from icml25.pipelines.functional_tom.games import cooperate_action, defect_action

        c, d = names[cooperate_action(game)], names[defect_action(game)]
        return f"The other player plays {c} until you first play {d}, then plays {d} forever."
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


#: Words that negate an action named within the next few words of the same clause
#: ("not Rock", "I won't defect", "never cooperate"); contractions are single words.
NEGATIONS = frozenset({
    "not", "no", "never", "dont", "wont", "wouldnt", "shouldnt", "doesnt", "isnt",
    "cant", "cannot", "avoid", "avoiding", "except", "nor", "neither", "'t",
})
#: Two-word phrases whose second word negates the action that follows ("instead of Rock").
NEGATING_PHRASES = frozenset({("instead", "of"), ("rather", "than"), ("other", "than")})
#: Words that may stand between two different actions of a hedge ("Rock or maybe Paper").
HEDGE_WORDS = frozenset({"or", "maybe", "perhaps", "possibly", "probably", "either", "and",
                         "else", "even"})
NEGATION_WINDOW = 3  # words between a negation and the action it negates
#: A word (letters/digits), a clitic glued to the word before it (the "'s" of "it's", the "'d"
#: of "I'd", the "'t" of "won't": its own word, never an action), a slash (read as "or") or a
#: clause break (negation does not cross it).
_TOKEN = re.compile(r"[0-9A-Za-z]+|(?<=[0-9A-Za-z])['\u2019][A-Za-z]+|/|[.;:!?,()\[\]]")
_BREAKS = frozenset(".;:!?,()[]") | {"but"}


def _tokens(text: str) -> list[str]:
    out = []
    for tok in _TOKEN.findall(text):
        tok = tok.lower().replace("\u2019", "'")
        out.append("or" if tok == "/" else tok)
    return out


def _phrases(game: Game) -> list[tuple[tuple[str, ...], int]]:
    """(word sequence, action) of every action name and synonym, longest first."""
    out = []
    for i, name in enumerate(game.actions):
        for w in (name, *game.synonyms.get(name, ())):
            words = tuple(_tokens(w))
            if words:
                out.append((words, i))
    return sorted(out, key=lambda x: -len(x[0]))


def _mentions(text: str, game: Game) -> tuple[list[str], list[tuple[int, int, int, bool]]]:
    """The words of ``text`` and its action mentions (start word, end word, action, negated):
    whole words and phrases only, so the "s" of "it's" or the "d" of "I'd" is never an action."""
    toks = _tokens(text)
    phrases = _phrases(game)
    found, i = [], 0
    while i < len(toks):
        for words, action in phrases:
            if tuple(toks[i:i + len(words)]) == words:
                floor = found[-1][1] if found else 0  # a negation negates one action only
                found.append((i, i + len(words), action, _negated(toks, i, floor)))
                i += len(words)
                break
        else:
            i += 1
    return toks, found


def _negated(toks: list[str], start: int, floor: int = 0) -> bool:
    """Whether a negation stands within ``NEGATION_WINDOW`` words before word ``start`` in the
    same clause and after word ``floor`` (the end of the action named before)."""
    for j in range(start - 1, max(floor - 1, start - 2 - NEGATION_WINDOW), -1):
        if toks[j] in _BREAKS:
            return False
        if toks[j] in NEGATIONS:
            return True
        if j > 0 and (toks[j - 1], toks[j]) in NEGATING_PHRASES:
            return True
    return False


def _choose(toks: list[str], found: list[tuple[int, int, int, bool]], game: Game,
            last: bool = False) -> int | None:
    """The answer among the mentions: the first (``last``: the last) action named without a
    negation; None when the answer hedges between two actions ("Rock or Paper"); when every
    mention is negated and exactly one action is left un-named, that action ("I won't
    defect" -> Cooperate in a two-action game)."""
    kept = [m for m in found if not m[3]]
    if not kept:
        negated = {m[2] for m in found}
        rest = set(range(game.n_actions)) - negated
        return rest.pop() if negated and len(rest) == 1 else None
    for (_, end, a, _n), (start, _, b, _m) in itertools.pairwise(kept):
        between = set(toks[end:start]) - _BREAKS
        if a != b and "or" in toks[end:start] and between <= HEDGE_WORDS:
            return None
    return kept[-1][2] if last else kept[0][2]


def parse_first_action(text: str | None, game: Game) -> int | None:
    """The action an answer names, read word by word (case-insensitive; names and synonyms are
    whole words or phrases, contractions stay one word): the first action named that is not
    negated ("not Rock", "I won't play Rock", "instead of Rock"); None if there is none or the
    answer hedges between two ("Rock or Paper"). When every action named is negated and one
    action is left, it is the answer ("I won't defect" -> Cooperate)."""
    if not text:
        return None
    toks, found = _mentions(text, game)
    return _choose(toks, found, game)


def parse_final_action(text: str | None, game: Game) -> int | None:
    """The action after the last ``Action:`` marker (chain-of-thought answers); falls back to the
    last action named (not negated) when there is no marker or nothing valid after it; None if
    nothing valid."""
    if not text:
        return None
    markers = list(re.finditer(r"action\s*[:=]\s*[`*\"']*", text, re.I))
    if markers:
        found = parse_first_action(text[markers[-1].end():], game)
        if found is not None:
            return found
    toks, found = _mentions(text, game)
    return _choose(toks, found, game, last=True)
