"""LLM agents: prompts, parsing, the Hugging Face backend on a tiny random model and the
OpenAI-compatible backend against a local stub endpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.core.chat import ChatClient, stub_requests, stub_server
from icml25.pipelines.functional_tom.episodes import run_episode
from icml25.pipelines.functional_tom.games import default_games
from icml25.pipelines.functional_tom.llm_agent import (
    PROBE,
    EndpointError,
    LLMAgent,
    make_backend,
    probe_endpoint,
)
from icml25.pipelines.functional_tom.llm_backends import ChatEndpointBackend
from icml25.pipelines.functional_tom.optimal_play import solve
from icml25.pipelines.functional_tom.partners import build_partner
from icml25.pipelines.functional_tom.prompts import (
    build_prompt,
    completion_prompt,
    game_description,
    parse_final_action,
    parse_first_action,
    parse_strategy,
)

pytestmark = pytest.mark.usefixtures("one_thread")
GAMES = default_games()
RPS = GAMES["rps"]
HISTORY = [(1, 0, 1.0), (2, 0, -1.0), (0, 0, 0.0)]


def test_prompt_sections_and_history_lines():
    system, user, truncated = build_prompt(RPS, 100, HISTORY, parse_strategy("qa"), "act")
    assert "If you play Paper and the other player plays Rock, you get 1 point" in system
    assert "maximise your total points" in system and "100 rounds" in system
    assert sum(line.startswith("Round ") and "you played" in line
               for line in user.splitlines()) == len(HISTORY)  # t - 1 history lines
    assert "Round 2: you played Scissors, the other player played Rock, you got -1 point." in user
    assert user.splitlines()[-1].startswith("Round 4: which action do you play?")
    assert not truncated
    system, user, _ = build_prompt(RPS, 100, HISTORY, parse_strategy("qa+no_history"), "act")
    assert "you played" not in user
    system, _, _ = build_prompt(RPS, 100, HISTORY, parse_strategy("qa+no_payoffs"), "act")
    assert "you get" not in system and "Rock, Paper, Scissors" in system
    system, _, _ = build_prompt(RPS, 100, HISTORY, parse_strategy("oracle_max"), "act",
                                partner_text="The other player always plays Rock.")
    assert "always plays Rock" in system and "maximises your points" in system
    _, user, truncated = build_prompt(RPS, 100, HISTORY, parse_strategy("qa"), "act",
                                      max_history_rounds=2)
    assert truncated and "Round 1:" not in user and "Round 3: you played" in user
    _, user, _ = build_prompt(RPS, 100, HISTORY, parse_strategy("social_qa"), "act",
                              prediction="Rock")
    assert "I predict the other player will play Rock" in user
    text, _ = completion_prompt(RPS, 100, HISTORY, parse_strategy("lm"), "predict")
    assert text.endswith("Round 4: the other player will play")
    with pytest.raises(ValueError, match="unknown ablations"):
        parse_strategy("qa+no_brain")
    with pytest.raises(ValueError, match="base"):
        parse_strategy("telepathy")


def test_answer_parsing():
    ipd = GAMES["ipd"]
    assert parse_first_action("I will play PAPER, not rock.", RPS) == 1
    assert parse_first_action("rocks and stuff", RPS) is None  # whole words only
    assert parse_first_action("", RPS) is None and parse_first_action(None, RPS) is None
    assert parse_first_action("Let's DEFECT.", ipd) == 1
    assert parse_first_action("I choose D", ipd) is None  # no synonyms configured
    from icml25.pipelines.functional_tom.games import make_game

    with_synonyms = make_game("ipd", "ipd", ["Cooperate", "Defect"], ipd.payoff,
                              ipd.partner_payoff, {"Defect": ["D"]})
    assert parse_first_action("I choose D", with_synonyms) == 1
    cot = "Rock beats scissors; paper beats rock. So... Action: Scissors"
    assert parse_final_action(cot, RPS) == 2
    assert parse_final_action("Action: `Paper` then Action: **Rock**", RPS) == 0
    assert parse_final_action("no idea", RPS) is None


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    from icml25.pipelines.functional_tom.llm_backends import build_tiny_llama

    corpus = [game_description(g, 5) for g in GAMES.values()]
    corpus += [build_prompt(RPS, 5, HISTORY, parse_strategy("cot"), "act")[1]]
    return build_tiny_llama(tmp_path_factory.mktemp("tiny_llm"), corpus, seed=0)


def test_hf_backend_logprob_round_trip_and_episode(tiny_dir):
    from transformers import AutoModelForCausalLM

    from icml25.pipelines.functional_tom.llm_backends import HFBackend

    backend = HFBackend.from_pretrained(tiny_dir)
    prompt, cont = "Round 4: you play", " Paper"
    p_ids = backend.tokenizer(prompt)["input_ids"]
    c_ids = backend.tokenizer(cont, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = backend.model(input_ids=torch.tensor([p_ids + c_ids])).logits[0]
    manual = sum(torch.log_softmax(logits[len(p_ids) - 1 + i], -1)[tok].item()
                 for i, tok in enumerate(c_ids))
    assert backend.logprob(prompt, cont) == pytest.approx(manual, abs=1e-5)
    reloaded = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    ids = torch.tensor([p_ids])
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids=ids).logits, backend.model(input_ids=ids).logits)
    partner = build_partner(RPS, {"family": "single", "action": 0})
    opt = solve(RPS, partner, 5)
    for strategy in ("lm", "qa", "social_lm"):
        agent = LLMAgent(backend, strategy, max_new_tokens=4)
        res = run_episode(RPS, partner, agent, opt, seed=0)
        assert len(res.log) == 5 and np.isfinite([res.regret, res.tom_regret]).all()
        assert 0 <= res.invalid_rate <= 1


def _chat_backend(url, **kw):
    return ChatEndpointBackend(ChatClient(url, "stub-model", timeout_s=kw.get("timeout", 2.0),
                                          max_retries=kw.get("retries", 1), backoff_s=0.0))


def test_endpoint_agent_valid_answers():
    def reply(body):
        user = body["messages"][-1]["content"]
        return "The other player will play Rock." if "other player play?" in user else \
            "I play Paper."

    partner = build_partner(RPS, {"family": "single", "action": 0})
    opt = solve(RPS, partner, 5)
    with stub_server(reply) as url:
        res = run_episode(RPS, partner, LLMAgent(_chat_backend(url), "social_qa"), opt, seed=0)
        bodies = stub_requests(url)
    assert res.regret == 0 and res.accuracy == 1.0 and res.invalid_rate == 0
    assert len(bodies) == 10 and bodies[0]["model"] == "stub-model"
    assert "I predict the other player will play Rock" in bodies[1]["messages"][-1]["content"]


@pytest.mark.parametrize("mode", ["garbage", "http500", "timeout"])
def test_endpoint_failures_are_bounded_counted_and_never_crash(mode):
    def reply(body):
        if mode == "http500":
            raise RuntimeError("boom")
        return None  # not JSON

    partner = build_partner(RPS, {"family": "single", "action": 0})
    opt = solve(RPS, partner, 3)
    delay = 0.3 if mode == "timeout" else 0.0
    with stub_server(reply, delay_s=delay) as url:
        backend = _chat_backend(url, timeout=0.1 if mode == "timeout" else 2.0, retries=1)
        res = run_episode(RPS, partner, LLMAgent(backend, "qa"), opt, seed=0)
        n_requests = len(stub_requests(url))
    assert len(res.log) == 3 and res.invalid_rate == 1.0
    assert res.log["invalid"].all() and res.log["invalid_prediction"].all()
    assert res.log["raw"].str.contains("endpoint failure").all()
    assert n_requests == 3 * 2 * 2  # rounds x (predict, act) x (1 + max_retries)
    assert set(res.log["a"]) <= {0, 1, 2}


def test_unparseable_answers_random_vs_zero_reward():
    partner = build_partner(RPS, {"family": "single", "action": 0})
    opt = solve(RPS, partner, 30)
    with stub_server(lambda body: "I refuse to answer.") as url:
        backend = _chat_backend(url)
        rand = run_episode(RPS, partner, LLMAgent(backend, "qa"), opt, seed=1)
        zero = run_episode(RPS, partner, LLMAgent(backend, "cot"), opt, seed=1,
                           invalid_policy="zero_reward")
    assert rand.invalid_rate == 1.0 and len(set(rand.log["a"])) == 3  # uniform, not fixed
    assert zero.regret == 30 and (zero.log["r"] == 0).all()


def test_endpoint_backend_from_credentials_and_scored_strategies_refused():
    llm = {"backend": "openai", "base_url": None, "model": None, "timeout_s": 1.0,
           "max_retries": 0, "backoff_s": 0.0}
    with stub_server(lambda body: "Rock") as url:
        backend = make_backend(llm, {"base_url": url, "model": "m", "api_key": "k"})
        assert backend.generate([{"role": "user", "content": "hi"}]) == ["Rock"]
        with pytest.raises(ValueError, match="log-probabilities"):
            LLMAgent(backend, "lm")
    with pytest.raises(ValueError, match="credentials lack"):
        make_backend(llm, {})


def test_llm_node_against_a_flaky_endpoint_keeps_every_episode():
    """The pipeline node with ``backend: openai``: garbage, HTTP 500 and valid answers mixed;
    every episode finishes, failures are counted, scored strategies are skipped."""
    import copy
    from pathlib import Path

    import yaml

    from icml25.pipelines.functional_tom import nodes

    root = Path(__file__).resolve().parents[3]
    params = copy.deepcopy(yaml.safe_load(
        (root / "conf/base/parameters_functional_tom.yml").read_text())["functional_tom"])
    calls = {"n": 0}

    def reply(body):
        if body["messages"] == PROBE:
            return "OK"  # the start-of-run probe answers; the episodes then meet the flakiness
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            raise RuntimeError("overloaded")  # HTTP 500, retried
        return None if calls["n"] % 3 == 1 else "Paper"

    with stub_server(reply) as url:
        params.update(seeds=[0], progress=False, episodes_per_cell=1, horizon=3)
        params["meta"]["enabled"] = False
        params["llm"].update(backend="openai", base_url=url, model="stub", strategies=["qa", "lm"],
                             games=["rps"], families=["single", "tft"], horizon=3,
                             episodes_per_cell=2, max_retries=1, backoff_s=0.0, timeout_s=2.0,
                             max_invalid_rate=1.0)
        scenarios = nodes.build_scenarios(params)
        logs = nodes.run_llm_agents(scenarios, params)
    assert set(logs["agent"]) == {"llm.qa"}  # lm needs log-probabilities: skipped
    llm_ids = scenarios.loc[scenarios["suite"] == "llm", "scenario_id"]
    assert sorted(logs["scenario_id"].unique()) == sorted(llm_ids)
    assert logs.groupby("scenario_id").size().eq(3).all()
    # calls cycle garbage, "Paper", HTTP 500: every prediction gets "Paper" (at most on its
    # retry), every action query meets 500 then garbage and is counted invalid after the
    # bounded retries (1 + max_retries = 2 attempts per query)
    assert not logs["invalid_prediction"].any() and logs["invalid"].all()
    assert calls["n"] == 1 + 3 * len(logs) <= 2 * 2 * len(logs)


def _node_params(url, **llm):
    import copy
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    params = copy.deepcopy(yaml.safe_load(
        (root / "conf/base/parameters_functional_tom.yml").read_text())["functional_tom"])
    params.update(seeds=[0], progress=False, episodes_per_cell=1, horizon=3)
    params["meta"]["enabled"] = False
    params["llm"].update(backend="openai", base_url=url, model="stub", strategies=["qa"],
                         games=["rps"], families=["single", "tft"], horizon=4,
                         episodes_per_cell=2, max_retries=3, backoff_s=0.5, timeout_s=2.0,
                         **llm)
    return params


def _closed_port_url():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there any more


def test_unreachable_endpoint_fails_at_the_probe_before_any_episode():
    """One probe, no retries, a clear error naming the endpoint; no episode is played."""
    import time

    from icml25.pipelines.functional_tom import nodes

    url = _closed_port_url()
    params = _node_params(url)
    scenarios = nodes.build_scenarios(params)
    start = time.perf_counter()
    with pytest.raises(EndpointError, match=r"127\.0\.0\.1.*failed its probe.*no LLM episode"):
        nodes.check_llm_endpoint(params, {})
    with pytest.raises(EndpointError, match="failed its probe"):
        nodes.run_llm_agents(scenarios, params)  # called alone, it probes first too
    assert time.perf_counter() - start < 10  # no retry backoff (3 retries x 35 s before)
    params["llm"]["backend"] = "hf_tiny"  # a local model needs no probe
    assert nodes.check_llm_endpoint(params, {}) == {"backend": "hf_tiny", "probed": False}


@pytest.mark.parametrize("mode", ["http500", "garbage", "no_credentials"])
def test_failing_endpoint_fails_at_the_probe(mode):
    def reply(body):
        if mode == "http500":
            raise RuntimeError("down")
        return None

    with stub_server(reply) as url:
        creds = {} if mode == "no_credentials" else {"base_url": url, "model": "m"}
        llm = {"base_url": None, "model": None, "timeout_s": 2.0}
        with pytest.raises(EndpointError, match="failed its probe"):
            probe_endpoint(llm, creds)
        assert len(stub_requests(url)) == (0 if mode == "no_credentials" else 1)
    with stub_server(lambda body: "OK") as url:
        assert probe_endpoint(llm, {"base_url": url, "model": "m"}) == "OK"


def test_invalid_answer_rate_above_the_bound_stops_the_run():
    from icml25.pipelines.functional_tom import nodes

    with stub_server(lambda body: "OK" if body["messages"] == PROBE else "I refuse.") as url:
        params = _node_params(url, max_invalid_rate=0.5)
        scenarios = nodes.build_scenarios(params)
        with pytest.raises(nodes.InvalidAnswersError, match=r"max_invalid_rate = 0\.5"):
            nodes.run_llm_agents(scenarios, params, None, {"probed": True})
        # 4 episodes x 4 rounds = 16 action answers; more than 8 invalid after the 3rd episode: stop
        n_act = sum("which action do you play" in b["messages"][-1]["content"]
                    for b in stub_requests(url))
        assert n_act == 12
        params = _node_params(url, max_invalid_rate=1.0)
        logs = nodes.run_llm_agents(scenarios, params, None, {"probed": True})
    assert logs["invalid"].all() and len(logs) == 16


def test_endpoint_check_runs_right_after_the_scenarios():
    from icml25.pipelines.functional_tom.pipeline import create_pipeline

    names = [n.name.split(".")[-1] for n in create_pipeline().nodes]
    assert names.index("check_llm_endpoint") < min(
        i for i, n in enumerate(names) if n in ("train_meta_agents", "run_reference_agents",
                                                 "compute_optimal_values", "run_llm_agents"))
