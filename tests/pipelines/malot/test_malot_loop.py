"""MA-LoT loop, budget accounting, prompts, agents and verifier backends."""

from __future__ import annotations

import os

import numpy as np
import pytest

from icml25.pipelines.malot.loop import cumulative_accuracy, ma_lot, select, whole_proof
from icml25.pipelines.malot.minilean import HEADER, lean_file, verify
from icml25.pipelines.malot.model_agent import ChatGenerator, HFGenerator, ModelAgent
from icml25.pipelines.malot.prompts import (
    BOS,
    build_corrector_prompt,
    build_prover_prompt,
    extract_last_lean_block,
    longcot_complete,
    proof_body,
)
from icml25.pipelines.malot.symbolic_agent import (
    PortfolioProver,
    RuleCorrector,
    in_repertoire,
    portfolio,
)
from icml25.pipelines.malot.synthetic import (
    FAMILIES,
    correction_records,
    generate_theorems,
)
from icml25.pipelines.malot.verifier import (
    LeanReplVerifier,
    MiniLeanVerifier,
    lean_project,
    parse_repl_output,
)

pytestmark = pytest.mark.usefixtures("one_thread")

THEOREM = {"name": "t1", "nl": "Find x and y.",
           "statement": "theorem t1 (x y : ℝ) (h₀ : x + y = 3) (h₁ : x - y = 1) :\n"
                        "  x = 2 ∧ y = 1 := by"}
requires_lean = pytest.mark.skipif(lean_project(None) is None,
                                   reason="no Lean 4 project ($MALOT_LEAN_PROJECT) here")


class ScriptedModel:
    """Writes a wrong proof; once it has seen Lean's error it writes the right one."""

    def __init__(self):
        self.prover_calls = self.corrector_calls = 0

    def prove(self, statement, nl, n):
        self.prover_calls += n
        return ["linarith"] * n

    def correct(self, statement, nl, proof, errors, n):
        self.corrector_calls += n
        assert errors and "linarith failed" in errors[0]["message"]
        return ["constructor <;> linarith"] * n


def test_scripted_model_is_solved_in_round_one_and_whole_proof_is_not():
    verifier = MiniLeanVerifier()
    model = ScriptedModel()
    out = ma_lot(THEOREM, model, model, verifier, x=4, rounds=2, y=2, c=1,
                 rng=np.random.default_rng(0))
    assert out["solved_round"] == 1
    assert model.prover_calls == 4 and model.corrector_calls == 1  # 4 identical → 1 distinct
    wp = whole_proof(THEOREM, ScriptedModel(), verifier, x=4, rounds=2, y=2)
    assert wp["solved_round"] is None and wp["generations"] == 8
    assert verifier.calls == 2  # identical proofs are verified once (sha256 cache)


def test_budget_accounting_is_x_plus_k_times_y():
    class Stubborn(ScriptedModel):
        def prove(self, statement, nl, n):
            self.prover_calls += n
            return [f"linarith [h{'₀₁'[i % 2]}]" + " " * i for i in range(n)]

        def correct(self, statement, nl, proof, errors, n):
            self.corrector_calls += n
            return [f"nlinarith [h₀]{' ' * self.corrector_calls}{i}" for i in range(n)]

    model = Stubborn()
    out = ma_lot(THEOREM, model, model, MiniLeanVerifier(), x=4, rounds=3, y=4, c=2,
                 rng=np.random.default_rng(0))
    assert out["solved_round"] is None
    assert model.prover_calls == 4 and model.corrector_calls == 3 * 4
    assert out["generations"] == 4 + 3 * 4
    rounds = [a["round"] for a in out["attempts"]]
    assert rounds.count(0) == 4 and all(rounds.count(r) == 4 for r in (1, 2, 3))


def test_sorry_proofs_are_dropped_before_the_verifier():
    class Lazy(ScriptedModel):
        def prove(self, statement, nl, n):
            return ["sorry", "constructor <;> sorry", "admit", "linarith"][:n]

    verifier = MiniLeanVerifier()
    out = ma_lot(THEOREM, Lazy(), Lazy(), verifier, x=4, rounds=1, y=1, c=1,
                 rng=np.random.default_rng(0))
    verdicts = [a["verdict"] for a in out["attempts"] if a["round"] == 0]
    assert verdicts.count("filtered_sorry") == 3 and verifier.calls == 2


def test_select_prefers_distinct_proofs_and_first_errors():
    e1 = {"errors": [{"message": "linarith failed\n..."}]}
    e2 = {"errors": [{"message": "unknown identifier 'h₅'"}]}
    failed = [("a", e1), ("a ", e1), ("b", e1), ("c", e2)]
    picked = select(failed, 2, np.random.default_rng(0))
    assert len(picked) == 2
    assert {p[1]["errors"][0]["message"] for p in picked} == {e1["errors"][0]["message"],
                                                             e2["errors"][0]["message"]}
    assert len(select(failed, 10, np.random.default_rng(0))) == 3  # "a" and "a " are one proof


def test_cumulative_accuracy():
    assert cumulative_accuracy([0, 1, None, 2], 2) == [0.25, 0.5, 0.75]


def test_symbolic_agents_are_seeded_and_the_corrector_reads_errors():
    p1, p2 = PortfolioProver(3), PortfolioProver(3)
    assert p1.prove(THEOREM["statement"], "", 6) == p2.prove(THEOREM["statement"], "", 6)
    result = MiniLeanVerifier().check(lean_file(THEOREM["statement"], "linarith"))
    fixes = RuleCorrector(0).correct(THEOREM["statement"], "", "linarith", result["errors"], 1)
    assert fixes == ["constructor <;> linarith"]
    renamed = RuleCorrector(0).correct(
        THEOREM["statement"], "", "constructor <;> linarith [h₅]",
        [{"line": 8, "message": "unknown identifier 'h₅'"}], 2)
    assert renamed[0] == "constructor <;> linarith [h₀]"


def test_prover_and_corrector_draw_on_one_repertoire():
    """Every proof the rule corrector writes for a portfolio proof's errors is one the prover
    could have sampled itself; the conjunction splits are among the prover's samples."""
    theorems = generate_theorems(18, seed=11, prefix="r")
    prover, corrector = PortfolioProver(0), RuleCorrector(1)
    verifier = MiniLeanVerifier()
    corrections = 0
    for thm in theorems:
        for proof in prover.prove(thm["statement"], thm["nl"], 4):
            assert in_repertoire(thm["statement"], proof), proof
            result = verifier.check(lean_file(thm["statement"], proof))
            if result["complete"]:
                continue
            for fix in corrector.correct(thm["statement"], thm["nl"], proof, result["errors"], 2):
                corrections += 1
                assert in_repertoire(thm["statement"], fix), (thm["family"], proof, fix)
    assert corrections > 20
    conj = next(t for t in theorems if t["family"] == "conjunction")
    texts = {c for c, _ in portfolio(conj["statement"], np.random.default_rng(0))}
    assert "constructor <;> linarith" in texts and "constructor <;> nlinarith" in texts
    sampled = set()
    for seed in range(6):
        sampled |= set(PortfolioProver(seed).prove(conj["statement"], conj["nl"], 8))
    assert sampled & {"constructor <;> linarith", "constructor\n· linarith\n· linarith"}
    assert not in_repertoire(conj["statement"], "constructor <;> omega")
    assert not in_repertoire(conj["statement"], "nlinarith [sq_nonneg (z - 1)]")


def test_corrector_reads_the_goal_from_the_messages_not_the_statement():
    # the same conjunction statement: a message without a goal state gives no constructor
    no_goal = RuleCorrector(0).options(THEOREM["statement"], "norm_num",
                                       [{"line": 7, "message": "simp made no progress"}])
    assert not set(no_goal) & {"constructor <;> linarith", "constructor <;> nlinarith"}
    shown = RuleCorrector(0).options(THEOREM["statement"], "ring", [{
        "line": 7, "message": "ring failed: not an equality\nx y : ℝ\n⊢ x = 2 ∧ y = 1"}])
    assert "constructor <;> linarith" in shown


def test_synthetic_theorems_cover_every_family_and_corrections_fail():
    rows = generate_theorems(12, seed=5, prefix="s")
    assert {r["family"] for r in rows} == set(FAMILIES)
    assert generate_theorems(12, seed=5, prefix="s") == rows  # deterministic
    records = correction_records(rows, 2, seed=1)
    assert records
    verifier = MiniLeanVerifier()
    for rec in records:
        assert not verifier.check(lean_file(rec["statement"], rec["wrong_proof"]))["complete"]
        assert rec["errors"].startswith("line ")


# ---------------------------------------------------------------------------------- prompts
def _in_order(text: str, parts: list[str]) -> bool:
    pos = -1
    for part in parts:
        nxt = text.find(part, pos + 1)
        if nxt <= pos:
            return False
        pos = nxt
    return True


def test_prover_prompt_has_its_slots_in_order():
    shots = [{"name": f"ex{i}", "nl": f"nl{i}", "statement": f"theorem ex{i} : 1 = 1 := by",
              "proof": "rfl"} for i in range(3)]
    prompt = build_prover_prompt("t1", THEOREM["nl"], THEOREM["statement"], shots)
    assert prompt.startswith(BOS)
    assert _in_order(prompt, ["**WITH**", "### Instruction:", "ex0", "=" * 40, "ex1", "=" * 40,
                              "ex2", "Name: t1", THEOREM["nl"], THEOREM["statement"],
                              "### Response:\n<Thought>\n", "sorry", "t1 can be proved by"])
    assert prompt.endswith("t1 can be proved by")


def test_corrector_prompt_has_its_slots_in_order():
    code = lean_file(THEOREM["statement"], "linarith")
    errors = [{"line": 7, "message": "linarith failed"}, {"line": 8, "message": "oops"}]
    prompt = build_corrector_prompt("t1", THEOREM["nl"], THEOREM["statement"], code, errors)
    assert _in_order(prompt, [BOS, "repairs failed proofs", "### Instruction:", "Name: t1",
                              "### Response:\n<Thought>\n", "I drafted a proof", code,
                              "failed", "```bash\nline 7\n\nlinarith failed\n```",
                              "```bash\nline 8\n\noops\n```", "1. Analyse", "3. Write",
                              "analyse these errors"])


def test_longcot_control_stops_at_thought_and_injects_the_output_header():
    calls = []

    def generate(prompt, stop, max_tokens):
        calls.append((prompt, list(stop), max_tokens))
        if len(calls) == 1:
            return "linarith after splitting the conjunction.</Thought> ignored tail"
        return "  constructor <;> linarith\n```\nchatter ```lean4\nsorry\n```"

    thought, proof = longcot_complete(generate, "PROMPT", "NL", THEOREM["statement"], 100, 0.8)
    assert thought == "linarith after splitting the conjunction."
    assert calls[0][1] == ["</Thought>"] and calls[0][2] == 80
    second = calls[1][0]
    assert second.startswith("PROMPT" + thought + "</Thought>\n<Output>\n```lean4\n" + HEADER)
    assert second.endswith("/--NL-/\n" + THEOREM["statement"] + "\n")
    assert proof == "  constructor <;> linarith"


def test_proof_body_is_the_proof_the_verifier_checked():
    statement = "theorem t (x y : ℝ) (h₀ : x + y = 10) (h₁ : x - y = 2) : x = 6 := by"
    proof = "  have h₂ : 2 * x = 12 := by linarith\n  have h₃ : x = 6 := by\n    linarith\n" \
            "  exact h₃"
    block = f"{HEADER}/--Solve for x.-/\n{statement}\n{proof}"
    whole = verify(block)
    assert whole["complete"], whole["errors"]
    for given in (statement, None):  # with the statement, and from the declaration alone
        body = proof_body(block, given)
        assert body == proof
        rewrapped = verify(lean_file(statement, body))
        assert rewrapped["complete"], rewrapped["errors"]
    # the old rule (text after the last `:= by`) kept only "linarith" of the inner have
    assert proof_body(block) != "    linarith\n  exact h₃"
    # an inline first tactic and a block of bare tactics
    assert proof_body("theorem t : (1 : ℕ) = 1 := by rfl") == " rfl"
    assert proof_body("  have h : 1 = 1 := by rfl\n  exact h") == "  have h : 1 = 1 := by rfl\n" \
                                                                    "  exact h"
    # the Long-CoT control returns the same body
    _, via_control = longcot_complete(lambda p, s, n: "" if s == ["</Thought>"] else proof,
                                      "P", "Solve for x.", statement, 100, 0.8)
    assert via_control == proof


def test_last_lean_block_is_extracted():
    text = "```lean4\nfirst\n```\nthen\n```lean\nsecond := by\n  ring\n```\n"
    assert extract_last_lean_block(text) == "second := by\n  ring"
    assert extract_last_lean_block("no code") is None


# ----------------------------------------------------------------------------------- agents
def test_openai_backend_against_a_loopback_stub():
    from icml25.core.chat import ChatClient, stub_requests, stub_server

    def reply(body):
        user = body["messages"][-1]["content"]
        if "I drafted a proof" in user or "errors" in user.lower():
            return "<Thought>fix</Thought><Output>```lean4\ntheorem t1 := by\n  constructor " \
                   "<;> linarith\n```</Output>"
        return "<Thought>try</Thought>\n<Output>\n```lean4\ntheorem t1 := by\n  linarith\n```"

    with stub_server(reply) as url:
        agent = ModelAgent(ChatGenerator(ChatClient(url, "stub", backoff_s=0), 0.8, 0.8),
                           max_tokens=256, cot_fraction=0.8)
        out = ma_lot(THEOREM, agent, agent, MiniLeanVerifier(), x=2, rounds=1, y=1, c=1,
                     rng=np.random.default_rng(0))
        sent = stub_requests(url)
    assert out["solved_round"] == 1
    assert agent.generations == 3
    assert sent[0]["messages"][0]["role"] == "system" and "**WITH**" in \
        sent[0]["messages"][0]["content"]
    assert sent[0]["temperature"] == 0.8 and sent[0]["top_p"] == 0.8


def test_openai_backend_failure_costs_a_generation_not_the_run():
    from icml25.core.chat import ChatClient, stub_server

    with stub_server(lambda body: None) as url:
        agent = ModelAgent(ChatGenerator(ChatClient(url, "stub", max_retries=0), 0.8, 0.8),
                           max_tokens=64, cot_fraction=0.8)
        assert agent.prove(THEOREM["statement"], "", 2) == ["", ""]


def test_hf_backend_with_a_tiny_config_built_llama(tmp_path):
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    corpus = [build_prover_prompt("t1", THEOREM["nl"], THEOREM["statement"]),
              "constructor <;> linarith</Thought>```"]
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.train_from_iterator(corpus, tokenizers.trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<eos>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>",
                                                unk_token="<unk>", pad_token="<eos>")
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2,
                                      intermediate_size=64, max_position_embeddings=2048)
    transformers.set_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    fast.save_pretrained(tmp_path)
    generator = HFGenerator.from_pretrained(str(tmp_path), temperature=0.8, top_p=0.8)
    agent = ModelAgent(generator, max_tokens=12, cot_fraction=0.5)
    proofs = agent.prove(THEOREM["statement"], THEOREM["nl"], 2)
    assert len(proofs) == 2 and all(isinstance(p, str) for p in proofs)
    assert agent.generations == 2
    verdicts = MiniLeanVerifier().check_all([lean_file(THEOREM["statement"], p) for p in proofs])
    assert all(not v["complete"] for v in verdicts)  # a random model proves nothing


# --------------------------------------------------------------------------------- verifier
def test_repl_output_parsing_follows_the_contract():
    ok = parse_repl_output('{"env": 0}', "")
    assert ok["complete"] and ok["pass"]
    warn = parse_repl_output('{"messages": [{"severity": "warning", "pos": {"line": 5, '
                             '"column": 8}, "data": "declaration uses \'sorry\'"}], '
                             '"sorries": [{"pos": {"line": 6}}]}', "")
    assert warn["pass"] and not warn["complete"]
    err = parse_repl_output('{"messages": [{"severity": "error", "pos": {"line": 7, '
                            '"column": 2}, "data": "linarith failed"}]}', "")
    assert not err["pass"] and err["errors"][0]["line"] == 7
    assert parse_repl_output("garbage", "boom")["system_error"] == "boom"


def test_lean_repl_backend_needs_a_project(tmp_path, monkeypatch):
    monkeypatch.delenv("MALOT_LEAN_PROJECT", raising=False)
    with pytest.raises(FileNotFoundError, match="MALOT_LEAN_PROJECT"):
        LeanReplVerifier(str(tmp_path))


@requires_lean
def test_lean_repl_checks_norm_num_and_flags_sorry():
    verifier = LeanReplVerifier(os.environ.get("MALOT_LEAN_PROJECT"), timeout_s=120, workers=1)
    good = verifier.check(lean_file("theorem t : 2 + 2 = 4 := by", "norm_num"))
    assert good["complete"]
    lazy = verifier.check(lean_file("theorem t : 2 + 2 = 4 := by", "sorry"))
    assert lazy["pass"] and not lazy["complete"]
