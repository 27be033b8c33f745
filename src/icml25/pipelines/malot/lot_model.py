"""LoT-Solver in miniature (docs/papers/malot.md): a small LLaMA-style causal LM
trained here with the LoT transfer recipe on synthetic theorems, used as prover and corrector.

Pieces, none of them Kedro-specific:

- :class:`LeanTokenizer`: a word/tactic-level tokenizer over the fragment's Lean syntax and the
  template NL (identifiers such as ``nlinarith``/``sq_nonneg``/``h₀`` are one token, numerals are
  split into digits, every other symbol is a token), with a vocabulary built from the training
  corpus; :meth:`LeanTokenizer.detokenize` re-inserts Lean's spacing.
- Templates of the three LoT-TL stages in miniature, with the paper's slot order (system prompt,
  instruction = statement, response = ``<Thought>`` ... ``</Thought>`` ``<Output>`` ... ``</Output>``),
  the system prompt shrunk to one token (``<sys_with>``/``<sys_without>``/``<sys_correct>``):
  stage 1 "NL CoT" (WITH): template NL reasoning about the statement (and, for failed drafts,
  about the error) and an NL answer; stage 2 "LoT-PD" (WITHOUT): a one-line placeholder thought
  and the Lean proof; stage 3 "LoT-CD": the thought holds the draft, the verifier's errors and the
  "write the revised code directly" placeholder, then the corrected proof.
- :func:`sample_batch`: batched top-p sampling with a KV cache over left-padded prompts (key
  padding mask; rotary attention depends only on relative positions, so left padding changes
  nothing but the mask).
- :class:`LotAgent`: prover and corrector with the Long-CoT control (think until ``</Thought>``,
  inject ``</Thought> <Output>``, let the model write the proof until ``</Output>``), batched over
  many theorems at once.

Loss: next-token cross-entropy on response tokens only (prompt masked; the paper does not say,
but this is the usual choice for SFT).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from icml25.core.causal_lm import LlamaConfig, LlamaLM

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>", "<sys_with>", "<sys_without>", "<sys_correct>",
            "<inst>", "<resp>", "<Thought>", "</Thought>", "<Output>", "</Output>", "<draft>",
            "<failed>", "<err>", "</err>", "<analyse>", "\n")
PAD, UNK, BOS, EOS = 0, 1, 2, 3
_TOKEN = re.compile(r"<;>|:=|</?[A-Za-z_]+>|[A-Za-z_][A-Za-z_0-9'₀-₉]*(?:\.[0-9A-Za-z_]+)*|\d|\n|\S")
_NO_SPACE_AFTER = {"(", "[", "⟨", "↑", "¬", "\n", "|"}
_NO_SPACE_BEFORE = {")", "]", ",", "⟩", "\n"}

#: The placeholder thoughts of LoT-TL's alignment stages (paper section 2.2), in our words.
PLACEHOLDER = "the user asked for no long chain-of-thought , so I answer directly ."
CD_PLACEHOLDER = "I write the revised code directly ."
OPENER = "I will analyse the statement , draft the tactics and write the final Lean code . " \
         "it can be proved by"


# ------------------------------------------------------------------------------ tokenizer
class LeanTokenizer:
    """Word/tactic-level tokens over Lean syntax; unknown tokens map to ``<unk>``."""

    def __init__(self, vocab: Sequence[str]) -> None:
        if list(vocab[:len(SPECIALS)]) != list(SPECIALS):
            raise ValueError("vocab must start with the special tokens")
        self.vocab = list(vocab)
        self.index = {t: i for i, t in enumerate(self.vocab)}

    @staticmethod
    def split(text: str) -> list[str]:
        return _TOKEN.findall(text)

    @classmethod
    def train(cls, texts: Iterable[str], min_count: int = 1) -> LeanTokenizer:
        counts = Counter(t for text in texts for t in cls.split(text))
        words = sorted(t for t, n in counts.items() if n >= min_count and t not in SPECIALS)
        return cls([*SPECIALS, *words])

    def encode(self, text: str) -> list[int]:
        return [self.index.get(t, UNK) for t in self.split(text)]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.vocab[i] for i in ids]

    @staticmethod
    def detokenize(tokens: Sequence[str]) -> str:
        out = ""
        for i, tok in enumerate(tokens):
            prev = tokens[i - 1] if i else ""
            glue = (not out or prev in _NO_SPACE_AFTER or tok in _NO_SPACE_BEFORE
                    or (tok.isdigit() and prev.isdigit())
                    or (tok == "." and prev.isdigit() and i + 1 < len(tokens)
                        and tokens[i + 1].isdigit())
                    or (tok.isdigit() and prev == "." and i > 1 and tokens[i - 2].isdigit()))
            out += tok if glue else " " + tok
        return out

    def decode(self, ids: Iterable[int]) -> str:
        return self.detokenize(self.tokens(ids))

    def __len__(self) -> int:
        return len(self.vocab)


# ------------------------------------------------------------------------------- templates
def statement_text(statement: str) -> str:
    """The Lean statement as the model sees it: name replaced by ``thm``, ``:= by`` cut, one
    line."""
    text = re.sub(r"^\s*(theorem|lemma)\s+\S+", "theorem thm", statement.strip())
    text = re.sub(r":=\s*by\s*$", "", text)
    return " ".join(text.split())


def error_text(errors: Sequence[dict[str, Any]], max_errors: int = 2, max_words: int = 12) -> str:
    """The verifier's errors as the corrector reads them: ``<err> line L message </err>`` (first
    line of each message, cut to ``max_words`` tokens)."""
    parts = []
    for e in list(errors)[:max_errors]:
        first = str(e.get("message", "")).split("\n")[0]
        words = LeanTokenizer.split(first)[:max_words]
        parts.append(f"<err> line {e.get('line', 0)} {' '.join(words)} </err>")
    return " ".join(parts)


def prover_prompt(statement: str, with_cot: bool) -> str:
    system = "<sys_with>" if with_cot else "<sys_without>"
    return f"<bos> {system} <inst> {statement_text(statement)} <resp> <Thought>"


def corrector_prompt(statement: str, wrong_proof: str, errors: Sequence[dict[str, Any]],
                     max_errors: int = 2) -> str:
    """Slots in order: system, statement, the drafted (failed) proof, the errors."""
    return (f"<bos> <sys_correct> <inst> {statement_text(statement)} <resp> <Thought> <draft> "
            f"{wrong_proof.strip()} <failed> {error_text(errors, max_errors)}")


def thought_opener(role: str, with_cot: bool) -> str:
    """What the Long-CoT control pre-fills after the prompt (WITH) or the placeholder (WITHOUT)."""
    if role == "prover":
        return OPENER if with_cot else PLACEHOLDER
    return "<analyse>" if with_cot else CD_PLACEHOLDER


_FAMILY_THOUGHT = {
    "linear": "the goal fixes one variable of a linear system . a linear combination of the "
              "hypotheses gives its value .",
    "evaluation": "the hypotheses give the value of every variable . substituting them and "
                  "computing gives the number .",
    "identity": "both sides are polynomials . expanding both sides gives the same polynomial .",
    "square_hint": "the goal is a quadratic inequality . it follows from the squares ( a - b ) "
                   "^ 2 ≥ 0 and ( a + b ) ^ 2 ≥ 0 .",
    "modular": "the goal is about remainders of integers . adding to a number with a known "
               "remainder shifts the remainder .",
    "conjunction": "the goal has two parts . each part follows from the linear hypotheses .",
}
_MUTATION_THOUGHT = {
    "drop_hints": "the tactic lacks the facts it needs ; the hints must come back .",
    "missing_constructor": "the goal is a conjunction ; it must be split first .",
    "perturbed_constant": "a constant in the proof is wrong ; it must match the statement .",
    "wrong_hypothesis": "the proof names a hypothesis that does not exist .",
    "wrong_tactic": "this tactic cannot close this kind of goal ; another tactic is needed .",
}


def nl_answer(family: str) -> str:
    return {"linear": "so the variable has the stated value .",
            "evaluation": "so the expression equals the stated number .",
            "identity": "so the identity holds .",
            "square_hint": "so the inequality holds .",
            "modular": "so the remainder is as stated .",
            "conjunction": "so both equations hold ."}.get(family, "so the statement holds .")


def stage_examples(theorems: Sequence[dict[str, Any]], corrections: Sequence[dict[str, Any]]
                   ) -> dict[str, list[tuple[str, str]]]:
    """(prompt, response) pairs of the three LoT-TL stages in miniature.

    - ``stage1`` (NL CoT, WITH): per theorem, an NL reasoning trace and NL answer; per correction
      record, an NL analysis of the failed draft's error (the generic CoT ability the paper
      teaches with OpenO1 data, here template-generated over the same fragment).
    - ``stage2`` (LoT-PD, WITHOUT): placeholder thought + Lean proof.
    - ``stage3`` (LoT-CD): draft + errors + placeholder inside the thought, then the correct proof.
    """
    s1, s2, s3 = [], [], []
    for t in theorems:
        thought = _FAMILY_THOUGHT.get(t["family"], "")
        s1.append((prover_prompt(t["statement"], True),
                   f"{OPENER} {thought} </Thought> <Output> {nl_answer(t['family'])} "
                   f"</Output> <eos>"))
        s2.append((prover_prompt(t["statement"], False),
                   f"{PLACEHOLDER} </Thought> <Output> {t['proof']} </Output> <eos>"))
    for c in corrections:
        errors = parse_error_field(c["errors"])
        prompt = corrector_prompt(c["statement"], c["wrong_proof"], errors)
        s1.append((prompt, f"<analyse> {_MUTATION_THOUGHT.get(c['mutation'], '')} "
                           f"{_FAMILY_THOUGHT.get(c['family'], '')} </Thought> <Output> "
                           f"{nl_answer(c['family'])} </Output> <eos>"))
        s3.append((prompt, f"{CD_PLACEHOLDER} </Thought> <Output> {c['proof']} </Output> <eos>"))
    return {"stage1": s1, "stage2": s2, "stage3": s3}


def parse_error_field(text: str) -> list[dict[str, Any]]:
    """The ``errors`` column of a correction record (``line L\\nmessage`` blocks) as dicts."""
    out = []
    for block in str(text).split("\n\n"):
        m = re.match(r"line (\d+)\n(.*)", block, re.S)
        if m:
            out.append({"line": int(m.group(1)), "message": m.group(2)})
    return out


# ------------------------------------------------------------------------------- training
@dataclass(frozen=True)
class Encoded:
    """Token ids of (prompt + response) examples with the response mask."""

    ids: list[list[int]]
    prompt_len: list[int]


def encode_examples(tok: LeanTokenizer, pairs: Sequence[tuple[str, str]], max_len: int
                    ) -> Encoded:
    ids, plen = [], []
    for prompt, response in pairs:
        p, r = tok.encode(prompt), tok.encode(response)
        seq = (p + r)[:max_len]
        ids.append(seq)
        plen.append(min(len(p), len(seq)))
    return Encoded(ids, plen)


def make_batch(enc: Encoded, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(ids, target_mask)``: the mask is 1 on response tokens (targets)."""
    length = max(len(enc.ids[i]) for i in rows)
    ids = torch.full((len(rows), length), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.float32)
    for j, i in enumerate(rows):
        seq = enc.ids[i]
        ids[j, :len(seq)] = torch.tensor(seq)
        mask[j, enc.prompt_len[i]:len(seq)] = 1.0
    return ids, mask


def masked_loss(model: LlamaLM, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy on response tokens only (prompt and padding masked)."""
    ids, mask = batch
    logits = model(ids[:, :-1]).float()
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                          reduction="none").view(ids.shape[0], -1)
    target = mask[:, 1:]
    return (nll * target).sum() / target.sum().clamp_min(1.0)


# -------------------------------------------------------------------------------- sampling
def _attend(layer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            cache: list[torch.Tensor], key_mask: torch.Tensor) -> torch.Tensor:
    """One decoder block of :class:`LlamaLM` with a key padding mask (``key_mask``: (b, T) True
    where a key position is real), reusing the block's own weights."""
    from icml25.core.causal_lm import apply_rotary

    attn = layer.self_attn
    h = layer.input_norm(x)
    b, t, d = h.shape
    shape = (b, t, attn.n_heads, attn.head_dim)
    q = apply_rotary(attn.q_proj(h).view(shape).transpose(1, 2), cos, sin)
    k = apply_rotary(attn.k_proj(h).view(shape).transpose(1, 2), cos, sin)
    v = attn.v_proj(h).view(shape).transpose(1, 2)
    if cache:
        k = torch.cat([cache[0], k], dim=2)
        v = torch.cat([cache[1], v], dim=2)
    cache[:] = [k, v]
    total = k.shape[2]
    allowed = key_mask[:, None, None, :total].expand(b, 1, t, total)
    causal = torch.ones(t, total, dtype=torch.bool).tril(total - t)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed & causal)
    x = x + attn.o_proj(out.transpose(1, 2).reshape(b, t, d))
    return x + layer.mlp(layer.post_attention_norm(x))


def _logits(model: LlamaLM, ids: torch.Tensor, start: int, cache: list[list[torch.Tensor]],
            key_mask: torch.Tensor) -> torch.Tensor:
    x = model.embed_tokens(ids)
    t = ids.shape[1]
    cos, sin = model.rope_cos[start:start + t], model.rope_sin[start:start + t]
    for layer, layer_cache in zip(model.layers, cache, strict=True):
        x = _attend(layer, x, cos, sin, layer_cache, key_mask)
    return model.lm_head(model.norm(x[:, -1]))


def _top_p(logits: torch.Tensor, temperature: float, top_p: float,
           gen: torch.Generator) -> torch.Tensor:
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p  # the smallest prefix with mass >= top_p
    sorted_p = sorted_p * keep
    choice = torch.multinomial(sorted_p / sorted_p.sum(-1, keepdim=True), 1, generator=gen)
    return order.gather(-1, choice).squeeze(-1)


@torch.no_grad()
def sample_batch(model: LlamaLM, prompts: Sequence[Sequence[int]], max_new: int, stop: int,
                 temperature: float, top_p: float, gen: torch.Generator) -> list[list[int]]:
    """Sample a continuation of every prompt (left-padded into one batch, KV cache) until the
    ``stop`` token (included) or ``max_new`` tokens or the context limit."""
    if not prompts:
        return []
    limit = model.config.max_seq_len
    longest = max(len(p) for p in prompts)
    if longest >= limit:
        raise ValueError(f"prompt of {longest} tokens does not fit max_seq_len {limit}")
    max_new = min(max_new, limit - longest)
    b = len(prompts)
    ids = torch.full((b, longest), PAD, dtype=torch.long)
    key_mask = torch.zeros((b, longest + max_new), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p):] = torch.tensor(list(p), dtype=torch.long)
        key_mask[i, longest - len(p):] = True
    key_mask[:, longest:] = True
    cache = model.new_cache()
    logits = _logits(model, ids, 0, cache, key_mask)
    out: list[list[int]] = [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool)
    for step in range(max_new):
        nxt = _top_p(logits, temperature, top_p, gen)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        for i in torch.nonzero(~done).flatten().tolist():
            out[i].append(int(nxt[i]))
        done |= nxt == stop
        if bool(done.all()) or step == max_new - 1:
            break
        logits = _logits(model, nxt[:, None], longest + step, cache, key_mask)
    return out


# ----------------------------------------------------------------------------------- agent
class LotAgent:
    """The trained model as prover and corrector, batched over many requests.

    ``prove_many([(statement, n), ...])`` and ``correct_many([(statement, proof, errors, n),
    ...])`` return ``n`` proofs per request. ``with_cot`` selects the WITH prompt and CoT opener
    (the model thinks until ``</Thought>``) or the WITHOUT prompt with the placeholder thought;
    ``corrector_cot`` does the same for the corrector (analysis opener or the "write the revised
    code directly" placeholder).
    """

    def __init__(self, model: LlamaLM, tok: LeanTokenizer, seed: int, temperature: float = 0.8,
                 top_p: float = 0.8, thought_tokens: int = 48, proof_tokens: int = 40,
                 with_cot: bool = True, corrector_cot: bool = True, batch_size: int = 256) -> None:
        self.model, self.tok = model.eval(), tok
        self.gen = torch.Generator().manual_seed(seed)
        self.temperature, self.top_p = temperature, top_p
        self.thought_tokens, self.proof_tokens = thought_tokens, proof_tokens
        self.with_cot, self.corrector_cot = with_cot, corrector_cot
        self.batch_size = batch_size
        self.generations = 0
        self.tokens_generated = 0
        self.prompt_tokens = 0
        self.overlong = 0

    def _run(self, prompts: list[str], think: list[bool]) -> list[str]:
        """Long-CoT control for a batch of prompt texts that end inside ``<Thought>``."""
        room = self.model.config.max_seq_len - self.thought_tokens - self.proof_tokens - 4
        encoded = []
        for text in prompts:
            ids = self.tok.encode(text)
            if len(ids) > room:  # does not fit the context: counted, answered with nothing
                self.overlong += 1
                ids = []
            encoded.append(ids)
        out = [""] * len(prompts)
        live = [i for i, ids in enumerate(encoded) if ids]
        close = self.tok.index["</Thought>"]
        header = self.tok.encode("</Thought> <Output>")
        end = self.tok.index["</Output>"]
        for s in range(0, len(live), self.batch_size):
            rows = live[s:s + self.batch_size]
            seqs = [encoded[i] for i in rows]
            need = [j for j, i in enumerate(rows) if think[i]]
            thoughts: list[list[int]] = [[] for _ in rows]
            if need:
                sampled = sample_batch(self.model, [seqs[j] for j in need], self.thought_tokens,
                                       close, self.temperature, self.top_p, self.gen)
                for j, th in zip(need, sampled, strict=True):
                    thoughts[j] = [t for t in th if t not in (close, PAD)]
            full = [seqs[j] + thoughts[j] + header for j in range(len(rows))]
            proofs = sample_batch(self.model, full, self.proof_tokens, end, self.temperature,
                                  self.top_p, self.gen)
            for j, i in enumerate(rows):
                body = [t for t in proofs[j] if t not in (end, PAD, EOS)]
                self.tokens_generated += len(thoughts[j]) + len(proofs[j])
                self.prompt_tokens += len(seqs[j])
                out[i] = self.tok.detokenize(self.tok.tokens(body)).strip()
        self.generations += len(prompts)
        return out

    def prove_many(self, requests: Sequence[tuple[str, int]]) -> list[list[str]]:
        opener = thought_opener("prover", self.with_cot)
        texts, owners = [], []
        for k, (statement, n) in enumerate(requests):
            texts += [f"{prover_prompt(statement, self.with_cot)} {opener}"] * n
            owners += [k] * n
        proofs = self._run(texts, [self.with_cot] * len(texts))
        return _group(proofs, owners, len(requests))

    def correct_many(self, requests: Sequence[tuple[str, str, list[dict[str, Any]], int]]
                     ) -> list[list[str]]:
        opener = thought_opener("corrector", self.corrector_cot)
        texts, owners = [], []
        for k, (statement, proof, errors, n) in enumerate(requests):
            texts += [f"{corrector_prompt(statement, proof, errors)} {opener}"] * n
            owners += [k] * n
        proofs = self._run(texts, [self.corrector_cot] * len(texts))
        return _group(proofs, owners, len(requests))


def _group(items: list[str], owners: list[int], n: int) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in range(n)]
    for item, owner in zip(items, owners, strict=True):
        out[owner].append(item)
    return out


def build_model(vocab_size: int, d_model: int, n_layers: int, n_heads: int, d_ff: int,
                max_seq_len: int) -> LlamaLM:
    return LlamaLM(LlamaConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                               n_heads=n_heads, d_ff=d_ff, max_seq_len=max_seq_len))


def cosine_lr(step: int, total: int, warmup: int) -> float:
    """Linear warm-up then cosine decay to 10% (a multiplier for LambdaLR)."""
    if step < warmup:
        return (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


def stage_schedule(sizes: dict[str, int], steps: dict[str, int], batch: int, seed: int,
                   replay: float = 0.0) -> list[list[tuple[str, int]]]:
    """Deterministic batches of (stage, row) for sequential stages; ``replay`` mixes that fraction
    of each batch from the previous stage's data (guards a tiny model against forgetting)."""
    rng = np.random.default_rng(seed)
    order = list(steps)
    batches = []
    for k, stage in enumerate(order):
        prev = order[k - 1] if k and replay > 0 else None
        for _ in range(steps[stage]):
            n_prev = round(batch * replay) if prev and sizes.get(prev) else 0
            rows = [(stage, int(i)) for i in rng.integers(0, sizes[stage], batch - n_prev)]
            rows += [(prev, int(i)) for i in rng.integers(0, sizes[prev], n_prev)] if n_prev \
                else []
            batches.append(rows)
    return batches


# ------------------------------------------------------------------------------ the recipe
@dataclass(frozen=True)
class RecipeConfig:
    """Sizes and steps of the miniature LoT-TL run (``malot.lot`` parameters)."""

    d_model: int = 96
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int = 256
    max_seq_len: int = 256
    batch_size: int = 16
    lr: float = 3e-3
    warmup: int = 30
    stage1_steps: int = 100
    stage2_steps: int = 300
    stage3_steps: int = 300
    replay: float = 0.25
    weight_decay: float = 0.01


def train_recipe(tok: LeanTokenizer, stages: dict[str, list[tuple[str, str]]],
                 cfg: RecipeConfig, seed: int, progress: bool = False
                 ) -> tuple[dict[str, LlamaLM], list[dict[str, float]]]:
    """Train the LoT-TL stages in order from a fresh model: NL CoT (stage 1) -> LoT-PD (stage 2),
    then branch: ``full`` continues on LoT-CD (stage 3, with ``replay`` of LoT-PD), ``no_cd`` (the
    "no correction data" ablation) continues on LoT-PD for the same number of steps. Both share
    the warm-up/cosine schedule over the whole run. Returns both models and the loss history."""
    import copy

    from icml25.core.training import TrainLoopConfig, train

    torch.manual_seed(seed)
    model = build_model(len(tok), cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff,
                        cfg.max_seq_len)
    encoded = {k: encode_examples(tok, v, cfg.max_seq_len) for k, v in stages.items()}
    for name in ("stage2", "stage3"):
        if not encoded.get(name) or not encoded[name].ids:
            raise ValueError(f"LoT-TL: {name} has no examples (synth.n_train or "
                             "synth.corrections_per_theorem is too small)")
    sizes = {k: len(e.ids) for k, e in encoded.items()}
    first = {"stage1": cfg.stage1_steps} if cfg.stage1_steps and sizes.get("stage1") else {}
    shared = stage_schedule(sizes, {**first, "stage2": cfg.stage2_steps}, cfg.batch_size, seed,
                            cfg.replay)
    branches = {"full": stage_schedule(sizes, {"stage2": 0, "stage3": cfg.stage3_steps},
                                       cfg.batch_size, seed + 1, cfg.replay),
                "no_cd": stage_schedule(sizes, {"stage2": cfg.stage3_steps}, cfg.batch_size,
                                        seed + 1, 0.0)}
    total = len(shared) + cfg.stage3_steps

    def batches(schedule):
        def batch_fn(step: int):
            merged = Encoded([], [])
            for stage, i in schedule[step]:
                merged.ids.append(encoded[stage].ids[i])
                merged.prompt_len.append(encoded[stage].prompt_len[i])
            return make_batch(merged, range(len(merged.ids)))
        return batch_fn

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_lr(s, total, cfg.warmup))
    history: list[dict[str, float]] = []

    def run(m, o, s, schedule, phase):
        if not schedule:
            return
        out = train(m, o, batches(schedule), masked_loss,
                    TrainLoopConfig(steps=len(schedule), log_every=min(25, len(schedule)), progress=progress,
                                    desc=f"malot: LoT-TL {phase} (seed {seed})"), scheduler=s)
        history.extend({**h, "phase": phase} for h in out.history)

    run(model, opt, sched, shared, "stage1+2")
    models = {}
    for name, schedule in branches.items():
        m, o, s = copy.deepcopy((model, opt, sched))
        torch.manual_seed(seed + 2)
        run(m, o, s, schedule, name)
        models[name] = m.eval()
    return models, history
