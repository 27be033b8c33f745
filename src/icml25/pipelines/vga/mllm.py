"""Zero-shot multimodal-LLM evaluation through any OpenAI-compatible endpoint.

The paper's protocol: a fixed number of random test images per task, one image per question,
zero-shot, temperature 0. Prompts (our wording) state the task and the answer set and ask for a
final line ``Answer: <x>``. The parser takes the *last* ``Answer:`` (models often reason first or
add markdown), falls back to the last token that is an allowed answer, and otherwise records the
reply as invalid (scored wrong, counted separately). Raw replies are kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from icml25.core.chat import ChatClient, ChatError, image_part, text_part
from icml25.pipelines.vga.graphs import TASK_CLASSES

_FINAL = "End your reply with a final line of the form 'Answer: <x>' where <x> is {choices}."
PROMPTS = {
    "iso_easy": "The image shows two drawings of graphs, separated by a grey line. Are they the "
                "same graph drawn twice, that is, are the two graphs isomorphic?",
    "iso_hard": "The image shows two drawings of graphs, separated by a grey line. Are they the "
                "same graph drawn twice, that is, are the two graphs isomorphic?",
    "ham_path": "The image shows a graph: black dots are nodes, lines are edges. Does the graph "
                "have a Hamiltonian path, a path that visits every node exactly once?",
    "ham_cycle": "The image shows a graph: black dots are nodes, lines are edges. Does the graph "
                 "have a Hamiltonian cycle, a cycle that visits every node exactly once?",
    "shortest_path": "The image shows a graph: black dots and two black squares are nodes, lines "
                     "are edges. How many edges are on a shortest path between the two square "
                     "nodes?",
    "chordless": "The image shows a graph: black dots are nodes, lines are edges. How many nodes "
                 "are in the largest cycle that has no chord (an edge joining two nodes of the "
                 "cycle that are not adjacent in it)?",
    "node_count": "The image shows a graph: black dots are nodes, lines are edges. How many nodes "
                  "does the graph have?",
}
_ANSWER = re.compile(r"answer\s*[:：]\s*\**\s*(yes|no|\d+)", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9]+")
INVALID = -1
RESPONSE_COLUMNS = ("task", "layout", "sample_id", "label", "pred", "response", "error")


def build_prompt(task: str) -> str:
    """The question for ``task`` with its answer set and the required final line."""
    choices = TASK_CLASSES[task]
    words = " or ".join(choices) if len(choices) == 2 else ", ".join(choices[:-1]) + \
        f" or {choices[-1]}"
    return f"{PROMPTS[task]} {_FINAL.format(choices=words)}"


def parse_answer(text: str | None, task: str) -> int:
    """Class index of a reply, or ``INVALID``: the last ``Answer: x``, else the last token that
    is an allowed answer."""
    if not text:
        return INVALID
    choices = TASK_CLASSES[task]
    matches = _ANSWER.findall(text)
    if matches:
        value = matches[-1].lower()
        return choices.index(value) if value in choices else INVALID
    for token in reversed(_TOKEN.findall(text.lower())):
        if token in choices:
            return choices.index(token)
    return INVALID


def sample_questions(images: pd.DataFrame, layouts: dict[str, str], n_per_task: int,
                     seed: int) -> pd.DataFrame:
    """``n_per_task`` random test images per task, each in its task's evaluation layout."""
    picks = []
    for i, (task, layout) in enumerate(sorted(layouts.items())):
        pool = images[(images["task"] == task) & (images["split"] == "test")
                      & (images["layout"] == layout)]
        if pool.empty:
            raise ValueError(f"mllm: no test images of {task} in layout {layout}")
        rng = np.random.default_rng(np.random.SeedSequence([seed, i]))
        take = rng.choice(len(pool), size=min(n_per_task, len(pool)), replace=False)
        picks.append(pool.iloc[np.sort(take)])
    return pd.concat(picks, ignore_index=True)


def ask(client: ChatClient, questions: pd.DataFrame, *, max_tokens: int, temperature: float,
        progress: bool = True) -> pd.DataFrame:
    """Send every question (prompt + inline PNG); keep raw replies, parsed answers, errors."""
    rows = []
    for q in tqdm(questions.to_dict("records"), desc="vga mllm", disable=not progress,
                  leave=False):
        messages = [{"role": "user", "content": [text_part(build_prompt(q["task"])),
                                                 image_part(q["png"])]}]
        try:
            reply, error = client.complete(messages, temperature=temperature,
                                           max_tokens=max_tokens), ""
        except ChatError as err:
            reply, error = None, str(err)
        rows.append({"task": q["task"], "layout": q["layout"], "sample_id": q["sample_id"],
                     "label": int(q["label"]), "pred": parse_answer(reply, q["task"]),
                     "response": reply, "error": error})
    return pd.DataFrame(rows, columns=list(RESPONSE_COLUMNS))


def responses_to_predictions(responses: pd.DataFrame, seed: int,
                             variant: str = "mllm") -> pd.DataFrame:
    """The prediction-table rows of an MLLM run (invalid answers stay ``-1``)."""
    cols: Sequence[str] = ("task", "layout", "sample_id", "label", "pred")
    out = responses[list(cols)].copy()
    out.insert(0, "seed", seed)
    out.insert(0, "variant", variant)
    return out
