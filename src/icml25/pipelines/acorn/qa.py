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

_NUMBER = r"(-?\d+(?:\.\d+)?)"


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
    """The label read back from an answer; NaN when the text cannot be parsed."""
    if task == "los":
        t = text.strip().lower()
        return 1.0 if t.startswith("yes") else 0.0 if t.startswith("no") else float("nan")
    if task == "multipath":
        t = text.strip().lower()
        return float(MULTIPATH_CLASSES.index(t)) if t in MULTIPATH_CLASSES else float("nan")
    pattern = {"doppler": rf"shifted by {_NUMBER}%", "doa": rf"delay is {_NUMBER} samples",
               "range": rf"is {_NUMBER} m away"}.get(task)
    if pattern is None:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    match = re.search(pattern, text)
    return float(match.group(1)) if match else float("nan")


def answer_decimals(task: str) -> int:
    """How many decimals an answer keeps (the parser's round-trip precision)."""
    return {"doppler": 2, "doa": 1, "range": 2}.get(task, 0)


def round_trip_error(task: str, labels: np.ndarray) -> float:
    """Largest |parse(answer(y)) − y| over ``labels`` (NaN if any answer fails to parse)."""
    back = np.array([parse_answer(task, answer(task, y)) for y in labels])
    return float(np.max(np.abs(back - labels)))
