"""Language-model provers and correctors (the paper's MA-LoT roles): one model plays both
roles, as LoT-Solver does.

- :class:`ChatGenerator`: any OpenAI-compatible ``/chat/completions`` endpoint through
  :class:`icml25.core.chat.ChatClient` (vLLM serving LoT-Solver, for example). A chat endpoint
  cannot be pre-filled, so the prompt's system part becomes the system message and the rest the
  user message; the proof is the last lean block of the reply.
- :class:`HFGenerator`: a local Hugging Face causal LM (``transformers`` is imported lazily), used
  with raw prompts and the Long-CoT control of :func:`prompts.longcot_complete`.
- :class:`ModelAgent`: prover (``prove``) and corrector (``correct``) on top of a generator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from icml25.pipelines.malot.prompts import (
    BOS,
    build_corrector_prompt,
    build_prover_prompt,
    extract_last_lean_block,
    longcot_complete,
    proof_body,
)

logger = logging.getLogger(__name__)


class ChatGenerator:
    """``generate(prompt, stop, max_tokens)`` through an OpenAI-compatible chat endpoint."""

    raw = False

    def __init__(self, client: Any, temperature: float, top_p: float) -> None:
        self.client, self.temperature, self.top_p = client, temperature, top_p

    def __call__(self, prompt: str, stop: Sequence[str], max_tokens: int) -> str:
        text = prompt.removeprefix(BOS)
        system, _, user = text.partition("\n### Instruction:\n")
        messages = [{"role": "system", "content": system},
                    {"role": "user", "content": user or text}]
        return self.client.complete(messages, temperature=self.temperature, top_p=self.top_p,
                                    max_tokens=max_tokens)


class HFGenerator:
    """Sampling from a Hugging Face causal LM; text after the first stop string is cut."""

    raw = True

    def __init__(self, model: Any, tokenizer: Any, temperature: float, top_p: float,
                 seed: int = 0) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.top_p, self.seed = temperature, top_p, seed

    @classmethod
    def from_pretrained(cls, path: str, temperature: float, top_p: float,
                        seed: int = 0) -> HFGenerator:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
        model.eval()
        return cls(model, tokenizer, temperature, top_p, seed)

    def __call__(self, prompt: str, stop: Sequence[str], max_tokens: int) -> str:
        import torch

        torch.manual_seed(self.seed)
        self.seed += 1
        inputs = self.tokenizer(prompt, return_tensors="pt")
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit:
            max_tokens = max(1, min(max_tokens, limit - inputs["input_ids"].shape[1]))
            inputs = {k: v[:, -(limit - max_tokens):] for k, v in inputs.items()}
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=max_tokens, do_sample=True,
                                      temperature=self.temperature, top_p=self.top_p,
                                      pad_token_id=self.tokenizer.pad_token_id
                                      or self.tokenizer.eos_token_id or 0)
        text = self.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:],
                                     skip_special_tokens=True)
        cuts = [text.find(s) for s in stop if s in text]
        return text[:min(cuts)] if cuts else text


class ModelAgent:
    """Prover and corrector served by one generator; counts generations and prompt characters."""

    def __init__(self, generate: Any, max_tokens: int, cot_fraction: float,
                 fewshots: Sequence[dict[str, Any]] = (), n_fewshot: int = 3,
                 seed: int = 0, with_cot: bool = True) -> None:
        self.generate, self.max_tokens, self.cot_fraction = generate, max_tokens, cot_fraction
        self.fewshots, self.n_fewshot = list(fewshots), n_fewshot
        self.rng = np.random.default_rng(seed)
        self.with_cot = with_cot
        self.generations = 0
        self.prompt_chars = 0

    def _shots(self) -> list[dict[str, Any]]:
        if not self.fewshots or self.n_fewshot == 0:
            return []
        k = min(self.n_fewshot, len(self.fewshots))
        return [self.fewshots[i] for i in self.rng.choice(len(self.fewshots), k, replace=False)]

    def _complete(self, prompt: str, nl: str, statement: str) -> str:
        self.generations += 1
        self.prompt_chars += len(prompt)
        try:
            return self._sample(prompt, nl, statement)
        except Exception as err:
            from icml25.core.chat import ChatError

            if not isinstance(err, ChatError):
                raise
            logger.warning("malot: generation failed (%s); counted as an empty proof", err)
            return ""

    def _sample(self, prompt: str, nl: str, statement: str) -> str:
        if getattr(self.generate, "raw", False):
            return longcot_complete(self.generate, prompt, nl, statement, self.max_tokens,
                                    self.cot_fraction)[1]
        reply = self.generate(prompt, [], self.max_tokens)
        block = extract_last_lean_block(reply)
        return proof_body(block, statement) if block else ""

    @staticmethod
    def _name(statement: str) -> str:
        parts = statement.split()
        return parts[1] if len(parts) > 1 else "theorem"

    def prove(self, statement: str, nl: str, n: int) -> list[str]:
        name = self._name(statement)
        return [self._complete(build_prover_prompt(name, nl, statement, self._shots(),
                                                   self.with_cot), nl, statement)
                for _ in range(n)]

    def correct(self, statement: str, nl: str, proof: str, errors: list[dict[str, Any]],
                n: int) -> list[str]:
        from icml25.pipelines.malot.minilean import lean_file

        name = self._name(statement)
        prompt = build_corrector_prompt(name, nl, statement, lean_file(statement, proof), errors,
                                        self.with_cot)
        return [self._complete(prompt, nl, statement) for _ in range(n)]


def make_model_agent(agent_params: Any, seed: int, fewshots: Sequence[dict[str, Any]] = (),
                     credentials: dict[str, Any] | None = None) -> ModelAgent:
    """A :class:`ModelAgent` for ``malot.agent`` (backend ``openai`` or ``hf``)."""
    a = agent_params
    if a.backend == "openai":
        from icml25.core.chat import ChatClient

        creds = {"base_url": a.base_url, "model": a.model, **(credentials or {})}
        generate: Any = ChatGenerator(ChatClient.from_credentials(creds), a.temperature, a.top_p)
    elif a.backend == "hf":
        generate = HFGenerator.from_pretrained(a.model_path, a.temperature, a.top_p, seed)
    else:
        raise ValueError(f"malot.agent.backend: {a.backend!r} is not a model backend")
    return ModelAgent(generate, a.max_tokens, a.cot_fraction, fewshots, a.fewshot, seed)
