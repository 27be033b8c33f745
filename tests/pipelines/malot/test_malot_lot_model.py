"""The small LoT-Solver trained here: tokenizer, stage templates, masked loss, batched sampling
with a padded KV cache, the recipe's training, and the batched MA-LoT loop."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from icml25.pipelines.malot import lot_model as L
from icml25.pipelines.malot.loop import ma_lot, ma_lot_many, whole_proof, whole_proof_many
from icml25.pipelines.malot.synthetic import correction_records, generate_theorems
from icml25.pipelines.malot.verifier import MiniLeanVerifier

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data():
    train = generate_theorems(12, 0, "train")
    return train, correction_records(train, 1, 5)


def test_tokenizer_round_trips_lean_proofs(data):
    train, cd = data
    proofs = [t["proof"] for t in train] + [c["wrong_proof"] for c in cd] + [
        "constructor <;> linarith", "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), h₀.1]",
        "norm_num [h₀, h₁] at h₂ ⊢", "have h : x = 1 / 2 := by linarith\nexact h",
        "linarith [sub_pos.mpr h₀, abs_nonneg (x - 0.5)]", "rw [← h₁]"]
    for proof in proofs:
        toks = L.LeanTokenizer.split(proof)
        assert L.LeanTokenizer.detokenize(toks) == proof, proof
    assert L.LeanTokenizer.split("constructor <;> nlinarith") == ["constructor", "<;>",
                                                                  "nlinarith"]
    assert L.LeanTokenizer.split("h₁₂ := 12") == ["h₁₂", ":=", "1", "2"]
    tok = L.LeanTokenizer.train(proofs)
    assert tok.vocab[:len(L.SPECIALS)] == list(L.SPECIALS)
    assert tok.encode("linarith frobnicate") == [tok.index["linarith"], L.UNK]
    with pytest.raises(ValueError, match="special tokens"):
        L.LeanTokenizer(["a", "b"])


def test_stage_templates_follow_the_recipe(data):
    train, cd = data
    stages = L.stage_examples(train, cd)
    assert len(stages["stage1"]) == len(train) + len(cd)
    assert len(stages["stage2"]) == len(train) and len(stages["stage3"]) == len(cd)
    p1, r1 = stages["stage1"][0]
    assert "<sys_with>" in p1 and r1.startswith(L.OPENER) and "</Thought> <Output>" in r1
    p2, r2 = stages["stage2"][0]
    assert "<sys_without>" in p2 and r2.startswith(L.PLACEHOLDER)
    assert r2.endswith(f"<Output> {train[0]['proof']} </Output> <eos>")
    assert train[0]["name"] not in p2 and "theorem thm" in p2  # names never leak
    p3, r3 = stages["stage3"][0]
    slots = [p3.index(s) for s in ("<sys_correct>", "<inst>", "<resp>", "<Thought>", "<draft>",
                                   cd[0]["wrong_proof"], "<failed>", "<err> line")]
    assert slots == sorted(slots)
    assert r3.startswith(L.CD_PLACEHOLDER) and r3.endswith(f"{cd[0]['proof']} </Output> <eos>")
    assert L.parse_error_field("line 6\nlinarith failed\nx : ℝ\n\nline 7\nunsolved goals") == [
        {"line": 6, "message": "linarith failed\nx : ℝ"}, {"line": 7, "message": "unsolved goals"}]


def test_training_data_never_contains_held_out_theorems():
    from icml25.pipelines.malot.nodes import _lot_stages

    train = generate_theorems(6, 0, "train")
    held = generate_theorems(6, 10_000, "heldout")
    theorems = pd.DataFrame([{**t, "split": "train"} for t in train]
                            + [{**t, "split": "heldout"} for t in held])
    stages = _lot_stages(theorems, pd.DataFrame(correction_records(train, 1, 3)))
    text = " ".join(a + b for pairs in stages.values() for a, b in pairs)
    for t in held:
        assert L.statement_text(t["statement"]).split("theorem thm")[1] not in text


def test_masked_loss_counts_response_tokens_only():
    torch.manual_seed(0)
    model = L.build_model(20, 16, 1, 2, 32, 32)
    enc = L.Encoded([[2, 5, 6, 7, 8], [2, 9, 10]], [3, 2])
    ids, mask = L.make_batch(enc, [0, 1])
    assert ids.tolist() == [[2, 5, 6, 7, 8], [2, 9, 10, 0, 0]]
    assert mask.tolist() == [[0, 0, 0, 1, 1], [0, 0, 1, 0, 0]]
    loss = L.masked_loss(model, (ids, mask))
    terms = []  # independent: per example, log-prob of each response token given its prefix
    for seq, plen in zip(enc.ids, enc.prompt_len, strict=True):
        for t in range(plen, len(seq)):
            logits = model(torch.tensor([seq[:t]]))[0, -1]
            terms.append(-F.log_softmax(logits, -1)[seq[t]])
    assert float(loss) == pytest.approx(float(torch.stack(terms).mean()), rel=1e-5)


def test_padded_batched_sampling_matches_unpadded_model():
    torch.manual_seed(1)
    model = L.build_model(30, 32, 2, 4, 48, 64).eval()
    prompts = [[2, 5, 6, 7, 8, 9, 10], [2, 11, 12], [2, 13, 14, 15, 16]]
    longest = max(map(len, prompts))
    ids = torch.zeros((3, longest), dtype=torch.long)
    mask = torch.zeros((3, longest + 5), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p):] = torch.tensor(p)
        mask[i, longest - len(p):] = True
    mask[:, longest:] = True
    with torch.no_grad():
        last = L._logits(model, ids, 0, model.new_cache(), mask)
        for i, p in enumerate(prompts):
            ref = model(torch.tensor([p]))[0, -1]
            assert torch.allclose(last[i], ref, atol=1e-5)
    gen = torch.Generator().manual_seed(0)
    greedy = L.sample_batch(model, prompts, 6, stop=3, temperature=0.0, top_p=1.0, gen=gen)
    for p, out in zip(prompts, greedy, strict=True):
        seq = list(p)
        with torch.no_grad():
            for _ in range(len(out)):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        assert out == seq[len(p):][:len(out)]
        assert len(out) == 6 or out[-1] == 3
    with pytest.raises(ValueError, match="does not fit"):
        L.sample_batch(model, [[1] * 64], 4, 3, 0.8, 0.8, gen)


def test_top_p_keeps_the_smallest_prefix():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    draws = {int(L._top_p(logits, 1.0, 0.8, gen)) for _ in range(300)}
    assert draws == {0, 1}  # 0.5 + 0.3 reaches 0.8; tokens 2 and 3 are cut
    draws = {int(L._top_p(logits, 1.0, 0.81, gen)) for _ in range(300)}
    assert draws == {0, 1, 2}


def test_recipe_trains_both_branches_and_learns(data):
    train, cd = data
    stages = L.stage_examples(train, cd)
    tok = L.LeanTokenizer.train([a + " " + b for v in stages.values() for a, b in v]
                                + [L.OPENER, L.PLACEHOLDER, L.CD_PLACEHOLDER])
    cfg = L.RecipeConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=160,
                         batch_size=8, stage1_steps=10, stage2_steps=40, stage3_steps=30,
                         warmup=5)
    models, history = L.train_recipe(tok, stages, cfg, seed=0)
    assert set(models) == {"full", "no_cd"}
    phases = [h["phase"] for h in history]
    assert phases[0] == "stage1+2" and {"full", "no_cd"} <= set(phases)
    first, last = history[0]["train_loss"], history[1]["train_loss"]
    assert last < first  # the loss falls within stages 1+2
    diff = sum(float((a - b).abs().sum()) for a, b in
               zip(models["full"].parameters(), models["no_cd"].parameters(), strict=True))
    assert diff > 0  # the branches differ
    again, _ = L.train_recipe(tok, stages, cfg, seed=0)
    for a, b in zip(models["full"].parameters(), again["full"].parameters(), strict=True):
        assert torch.equal(a, b)  # deterministic on CPU for a fixed seed
    agent = L.LotAgent(models["full"], tok, 0, thought_tokens=8, proof_tokens=8)
    out = agent.prove_many([(train[0]["statement"], 3), (train[1]["statement"], 2)])
    assert [len(o) for o in out] == [3, 2] and agent.generations == 5
    fixed = agent.correct_many([(cd[0]["statement"], cd[0]["wrong_proof"],
                                 L.parse_error_field(cd[0]["errors"]), 2)])
    assert len(fixed) == 1 and len(fixed[0]) == 2 and agent.generations == 7
    with pytest.raises(ValueError, match="stage3 has no examples"):
        L.train_recipe(tok, {**stages, "stage3": []}, cfg, seed=0)


class _Scripted:
    """Deterministic agent: the answer depends only on the request (and whether it has seen an
    error), so the batched loop and the per-theorem loop must agree exactly."""

    def _proofs(self, statement, n, base):
        if "∧" in statement:
            return [base] * n
        return ["omega" if i % 2 else "linarith" for i in range(n)]

    def prove(self, statement, nl, n):
        return self._proofs(statement, n, "linarith")

    def correct(self, statement, nl, proof, errors, n):
        return ["constructor <;> linarith"] * n if "∧" in statement else ["norm_num"] * n

    def prove_many(self, requests):
        return [self.prove(s, "", n) for s, n in requests]

    def correct_many(self, requests):
        return [self.correct(s, "", p, e, n) for s, p, e, n in requests]


def test_batched_loop_equals_per_theorem_loop():
    theorems = [{**t, "set": "synthetic"} for t in generate_theorems(12, 3, "t")]
    agent, verifier = _Scripted(), MiniLeanVerifier()
    batched = ma_lot_many(theorems, agent, verifier, 4, 2, 2, 1,
                          [np.random.default_rng(i) for i in range(len(theorems))])
    for i, thm in enumerate(theorems):
        single = ma_lot(thm, agent, agent, verifier, 4, 2, 2, 1, np.random.default_rng(i))
        assert batched[i]["solved_round"] == single["solved_round"]
        assert batched[i]["generations"] == single["generations"]
        assert [a["proof"] for a in batched[i]["attempts"]] == \
            [a["proof"] for a in single["attempts"]]
    conj = [o for o, t in zip(batched, theorems, strict=True) if t["family"] == "conjunction"]
    assert conj and all(o["solved_round"] == 1 for o in conj)
    wp = whole_proof_many(theorems, agent, verifier, 4, 2, 2)
    for thm, out in zip(theorems, wp, strict=True):
        assert out["solved_round"] == whole_proof(thm, agent, verifier, 4, 2, 2)["solved_round"]
        assert out["generations"] == 8
