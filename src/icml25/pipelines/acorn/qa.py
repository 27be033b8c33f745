"""AQA-PHY-style question/answer text: paraphrased question templates
per task, templated answers that carry the label, and a regex parser that reads the label back
from an answer (paper: closed-ended answers such as "Yes"/"No" or "shifted by −3.41%")."""

from __future__ import annotations

import re

import numpy as np

TASKS = ("los", "multipath", "doppler", "doa", "range")
MULTIPATH_CLASSES = ("none", "weak", "strong")

QUESTIONS = {
    "los": (
        "Is the talker in direct line of sight of the microphones?",
        "Is there a clear direct path between the sound source and the device?",
        "Can the source be heard along an unobstructed line of sight?",
        "Is the source visible from the microphones, with nothing in between?",
    ),
    "multipath": (
        "How much multipath propagation is in this recording: none, weak or strong?",
        "Describe the reverberation of the space: none, weak or strong.",
        "Is the room echo absent, weak or strong?",
        "How reverberant is the environment of this sound: none, weak or strong?",
    ),
    "doppler": (
        "A {source} ({rest:g} Hz at rest) is recorded. By what percentage is its frequency "
        "shifted?",
        "This is a {source} whose rest frequency is {rest:g} Hz. What Doppler shift do you hear?",
        "A {source} ({rest:g} Hz at rest) passes by. Is it approaching or receding, and by how "
        "much is the pitch shifted?",
        "Estimate the Doppler frequency shift of the {source} (rest frequency {rest:g} Hz).",
    ),
    "doa": (
        "What is the time difference of arrival between the two microphones, and which side "
        "is the source on?",
        "From which side does the sound come, and what is the inter-microphone delay?",
        "Estimate the delay between the microphones in samples and the side of the source.",
        "Is the source on the left or the right? Give the delay in samples.",
    ),
    "range": (
        "The device emitted a chirp. How far away is the reflecting object?",
        "Using the echo of the probe chirp, estimate the distance to the object.",
        "How many metres away is the object that reflects the chirp?",
        "What is the range of the reflector, judging from the echo?",
    ),
}

def question(task: str, template: int, source: str = "", rest_hz: float = 0.0) -> str:
    """The question text of ``task`` with paraphrase ``template``."""
    text = QUESTIONS[task][template % len(QUESTIONS[task])]
    return text.format(source=source, rest=rest_hz) if task == "doppler" else text


def answer(task: str, label: float) -> str:
    """The closed-ended answer that carries ``label`` (class index or regression target)."""
    if task == "los":
        return "Yes" if int(label) == 1 else "No"
    if task == "multipath":
        return MULTIPATH_CLASSES[int(label)]
    if task == "doppler":
        motion = "receding" if label < 0 else "approaching"
        return f"The frequency shifted by {label:.2f}%; the source is {motion}."
    if task == "doa":
        side = "left" if label > 0 else "right"
        return f"The delay is {label:.1f} samples; the source is on the {side}."
    if task == "range":
        return f"The object is {label:.2f} m away."
    raise ValueError(f"unknown task {task!r}; known: {TASKS}")


def parse_answer(task: str, text: str) -> float:
    """The label read back from an answer; NaN when the text cannot be parsed.

    Classification: "Yes"/"No" (LOS) and "none"/"weak"/"strong" (multipath) as the first word,
    any case and trailing punctuation. Regression: the first number that carries the task's unit
    (Doppler ``%``, ``percent``, ``per cent``; DoA ``sample(s)``; range ``m``, ``metre(s)``,
    ``meter(s)``, ``cm``, ``mm``, converted to metres), with or without a space before the unit;
    without any number+unit, a text holding exactly one number is read as that number in the
    task's unit. A number is digits (``3``, ``3.4``, ``.5``, ``3e-1``, ``1,250.5``; ``3,4``
    is a decimal comma unless exactly three digits follow the comma) or English number words
    (``three``, ``minus two point five``, ``twenty-one``: integers below a thousand, decimals
    spoken digit by digit after ``point``), signed by ``+``, ``-``, the unicode minus
    ``−``, an en dash, ``plus``, ``minus`` or ``negative``. An unsigned Doppler shift takes its
    sign from "approaching"/"higher" (+) or "receding"/"lower" (−), an unsigned delay from
    "left" (+) or "right" (−); an explicit sign that contradicts those words gives NaN (the
    answer contradicts itself).
    """
    if task == "los":
        word = _first_word(text)
        return 1.0 if word == "yes" else 0.0 if word == "no" else float("nan")
    if task == "multipath":
        word = _first_word(text)
        return float(MULTIPATH_CLASSES.index(word)) if word in MULTIPATH_CLASSES else float("nan")
    if task not in _UNITS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    norm = _normalise(text)
    numbers = list(_NUMBER_RE.finditer(norm))
    value, signed = None, False
    for match in numbers:
        unit = _UNITS[task].match(norm, match.end())
        if unit:
            value, signed = _number_value(match), _has_sign(match)
            value *= _SCALE.get(unit.group(1), 1.0)
            break
    if value is None:
        if len(numbers) != 1:
            return float("nan")
        value, signed = _number_value(numbers[0]), _has_sign(numbers[0])
    hint = _sign_hint(task, norm)
    if hint and value != 0.0:
        if not signed:
            value = abs(value) * hint
        elif np.sign(value) != hint:
            return float("nan")
    return float(value)


_UNITS = {
    "doppler": re.compile(r"\s?(%|percent\b|per\s?cent\b|pct\b)"),
    "doa": re.compile(r"\s?(samples?\b|smp\b)"),
    "range": re.compile(r"\s?(mm\b|millimet(?:re|er)s?\b|cm\b|centimet(?:re|er)s?\b|m\b|"
                        r"met(?:re|er)s?\b)"),
}
_SCALE = {"mm": 1e-3, "cm": 1e-2, **{f"{p}{s}": f for p, f in (("millimet", 1e-3),
                                                               ("centimet", 1e-2))
                                     for s in ("re", "er", "res", "ers")}}
_ONES = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen"))}
_TENS = {w: 10 * (i + 2) for i, w in enumerate((
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"))}
_DIGIT = "|".join(sorted(_ONES, key=len, reverse=True))
_TEN = "|".join(_TENS)
_CARDINAL = (rf"(?:(?:{_DIGIT})\s+hundred(?:\s+(?:and\s+)?)?)?"
             rf"(?:(?:{_TEN})(?:[-\s](?:{_DIGIT}))?|(?:{_DIGIT}))|(?:{_DIGIT})\s+hundred")
_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<sign>[+-]|(?:plus|minus|negative)\s+)?\s*(?:"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d*)?|\d+(?:[.,]\d*)?|\.\d+)"
    r"(?P<exp>e[+-]?\d+)?"
    rf"|\b(?P<words>(?:{_CARDINAL})(?:\s+point(?:\s+(?:{_DIGIT}))+)?)\b)")


def _first_word(text: str) -> str:
    match = re.match(r"\s*([a-z]+)", text.lower())
    return match.group(1) if match else ""


def _normalise(text: str) -> str:
    """Lower case, unicode minus / dashes to ``-``, non-breaking and thin spaces to spaces."""
    table = {"\u2212": "-", "\u2013": "-", "\u2012": "-", "\ufe63": "-", "\uff0d": "-",
             "\u00a0": " ", "\u2009": " ", "\u202f": " "}
    return "".join(table.get(c, c) for c in text.lower())


def _has_sign(match: re.Match) -> bool:
    return bool(match.group("sign"))


def _words_value(words: str) -> float:
    whole, _, frac = words.partition(" point ")
    total, parts = 0, re.split(r"[-\s]+", whole.replace(" and ", " "))
    for word in parts:
        if word == "hundred":
            total *= 100
        else:
            total += _ONES.get(word, _TENS.get(word, 0))
    digits = "".join(str(_ONES[w]) for w in frac.split())
    return float(f"{total}.{digits}") if digits else float(total)


def _number_value(match: re.Match) -> float:
    if match.group("digits") is not None:
        digits = match.group("digits")
        digits = digits.replace(",", "") if "." in digits or re.search(
            r",\d{3}(?!\d)", digits) else digits.replace(",", ".")
        value = float(digits.rstrip(".") + (match.group("exp") or ""))
    else:
        value = _words_value(re.sub(r"\s+", " ", match.group("words")))
    sign = (match.group("sign") or "").strip()
    return -value if sign in ("-", "minus", "negative") else value


def _sign_hint(task: str, text: str) -> int:
    """+1 / −1 from the direction words of an answer (0: none or both)."""
    pos, neg = {"doppler": (r"\b(approaching|higher|raised|up)\b", r"\b(receding|lower|down)\b"),
                "doa": (r"\bleft\b", r"\bright\b")}.get(task, ("$^", "$^"))
    up, down = bool(re.search(pos, text)), bool(re.search(neg, text))
    return 1 if up and not down else -1 if down and not up else 0


def answer_decimals(task: str) -> int:
    """How many decimals an answer keeps (the parser's round-trip precision)."""
    return {"doppler": 2, "doa": 1, "range": 2}.get(task, 0)


def round_trip_error(task: str, labels: np.ndarray) -> float:
    """Largest |parse(answer(y)) − y| over ``labels`` (NaN if any answer fails to parse)."""
    back = np.array([parse_answer(task, answer(task, y)) for y in labels])
    return float(np.max(np.abs(back - labels)))
