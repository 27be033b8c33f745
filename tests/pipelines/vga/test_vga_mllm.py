"""The multimodal-LLM path against a local stub endpoint; never a real server."""

from __future__ import annotations

import base64

import pandas as pd
import pytest

from icml25.core.chat import ChatClient, stub_requests, stub_server
from icml25.pipelines.vga.mllm import (
    INVALID,
    ask,
    build_prompt,
    parse_answer,
    responses_to_predictions,
    sample_questions,
)
from icml25.pipelines.vga.render import to_png


@pytest.mark.parametrize(("text", "task", "expected"), [
    ("Answer: Yes", "iso_easy", 1),
    ("I think no.\nAnswer: no", "ham_path", 0),
    ("**Answer:** 4", "shortest_path", 3),
    ("answer：3", "chordless", 0),
    ("Answer: 2 ... wait, recounting. Answer: 3", "shortest_path", 2),
    ("The path has 3 edges, so 2 is wrong", "shortest_path", 1),  # fallback: last allowed token
    ("I cannot tell.", "iso_hard", INVALID),
    ("Answer: 7", "chordless", INVALID),  # explicit answer outside the answer set
    ("", "ham_cycle", INVALID),
    (None, "ham_cycle", INVALID),
])
def test_parser(text, task, expected):
    assert parse_answer(text, task) == expected


def test_prompts_state_the_answer_set_and_the_final_line():
    assert "is no or yes" in build_prompt("iso_hard")
    assert "1, 2, 3 or 4" in build_prompt("shortest_path")
    assert "Answer: <x>" in build_prompt("chordless")


def _images() -> pd.DataFrame:
    png = to_png(pd.DataFrame([[255, 0], [0, 255]]).to_numpy())
    rows = [{"sample_id": f"shortest_path/test/{i}", "task": "shortest_path", "split": "test",
             "layout": "planar", "label": i % 4, "png": png} for i in range(6)]
    rows += [{"sample_id": f"iso_easy/test/{i}", "task": "iso_easy", "split": "test",
              "layout": "planar", "label": i % 2, "png": png} for i in range(4)]
    return pd.DataFrame(rows)


def test_questions_go_out_with_the_image_inline_and_answers_are_scored():
    questions = sample_questions(_images(), {"shortest_path": "planar", "iso_easy": "planar"},
                                 n_per_task=3, seed=0)
    assert len(questions) == 6

    def reply(body):
        text = body["messages"][0]["content"][0]["text"]
        return "Some reasoning.\n**Answer:** 2" if "square" in text else "Answer: yes"

    with stub_server(reply) as url:
        out = ask(ChatClient(url, "stub", max_retries=0), questions, max_tokens=64,
                  temperature=0.0, progress=False)
        requests = stub_requests(url)
    assert len(requests) == 6
    image = requests[0]["messages"][0]["content"][1]["image_url"]["url"]
    assert image.startswith("data:image/png;base64,")
    assert base64.b64decode(image.split(",", 1)[1]) == questions["png"].iloc[0]
    assert requests[0]["temperature"] == 0.0 and requests[0]["max_tokens"] == 64
    sp = out[out["task"] == "shortest_path"]
    assert (sp["pred"] == 1).all() and (out[out["task"] == "iso_easy"]["pred"] == 1).all()
    preds = responses_to_predictions(out, seed=0)
    assert list(preds["variant"].unique()) == ["mllm"]


def test_endpoint_failures_are_recorded_as_invalid_answers():
    questions = sample_questions(_images(), {"iso_easy": "planar"}, n_per_task=2, seed=0)
    with stub_server(lambda body: None) as url:  # garbage bodies
        out = ask(ChatClient(url, "stub", max_retries=1, backoff_s=0.0), questions,
                  max_tokens=8, temperature=0.0, progress=False)
    assert (out["pred"] == INVALID).all()
    assert out["error"].str.contains("no usable answer").all()
