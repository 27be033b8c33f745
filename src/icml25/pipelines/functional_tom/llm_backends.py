"""Language-model backends of the LLM agents (``docs/papers/functional_tom.md``, "Running it").

- :class:`HFBackend`: a local Hugging Face causal LM (``AutoModelForCausalLM`` +
  ``AutoTokenizer`` from a local folder; hub downloads are impossible offline). ``logprob`` is the
  sum of the log-softmax of the continuation tokens given the prompt, in one forward pass; prompt
  and continuation are tokenised separately so only continuation tokens are scored and no merge
  crosses the boundary (the continuation carries its leading space). ``generate`` uses the
  tokenizer's chat template when it has one, else a plain "role: content" concatenation.
- :class:`ChatEndpointBackend`: any OpenAI-compatible ``/chat/completions`` endpoint through
  :class:`icml25.core.chat.ChatClient` (bounded retries, then :class:`~icml25.core.chat.ChatError`).
  Chat endpoints return no prompt log-probabilities, so scored (``lm``) strategies are skipped.

transformers is imported lazily inside the HF paths (an optional dependency).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Message = Mapping[str, str]


class HFBackend:
    supports_logprob = True

    def __init__(self, model: Any, tokenizer: Any, device: str = "cpu") -> None:
        self.model, self.tokenizer, self.device = model.eval(), tokenizer, device
        self.model.to(device)

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "cpu") -> HFBackend:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"functional_tom.llm.model_path: {path} does not exist "
                                    "(a local model folder is needed; nothing is downloaded)")
        return cls(AutoModelForCausalLM.from_pretrained(str(path)),
                   AutoTokenizer.from_pretrained(str(path)), device)

    def _ids(self, text: str, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def logprob(self, prompt: str, continuation: str) -> float:
        import torch

        prompt_ids = self._ids(prompt, special=True)
        cont_ids = self._ids(continuation, special=False)
        if not cont_ids:
            raise ValueError(f"continuation {continuation!r} has no tokens")
        ids = torch.tensor([prompt_ids + cont_ids], device=self.device)
        with torch.no_grad():
            logits = self.model(input_ids=ids).logits[0].float()
        logp = logits.log_softmax(-1)
        # token i of the continuation sits at position len(prompt)+i, predicted from the one before
        positions = torch.arange(len(prompt_ids) - 1, len(prompt_ids) + len(cont_ids) - 1)
        return float(logp[positions, torch.tensor(cont_ids)].sum())

    def _chat_ids(self, messages: Sequence[Message]):
        import torch

        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                                     return_tensors="pt", return_dict=False)
            if isinstance(ids, Mapping):
                ids = ids["input_ids"]
            return torch.as_tensor(ids).reshape(1, -1)
        text = "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"
        return torch.tensor([self._ids(text, special=True)])

    def generate(self, messages: Sequence[Message], n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 32) -> list[str]:
        import torch

        ids = self._chat_ids(messages).to(self.device)
        kwargs: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": temperature > 0,
                                  "attention_mask": torch.ones_like(ids)}
        if temperature > 0:
            kwargs["temperature"] = temperature
        pad = self.tokenizer.pad_token_id
        kwargs["pad_token_id"] = pad if pad is not None else self.tokenizer.eos_token_id
        outs = []
        with torch.no_grad():
            for _ in range(n):
                seq = self.model.generate(ids, **kwargs)[0, ids.shape[1]:]
                outs.append(self.tokenizer.decode(seq, skip_special_tokens=True))
        return outs


class ChatEndpointBackend:
    supports_logprob = False

    def __init__(self, client: Any) -> None:
        self.client = client

    def logprob(self, prompt: str, continuation: str) -> float:
        raise NotImplementedError("chat endpoints return no prompt log-probabilities; the "
                                  "scored (lm) strategies are skipped for them")

    def generate(self, messages: Sequence[Message], n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 32) -> list[str]:
        return [self.client.complete(list(messages), temperature=temperature,
                                     max_tokens=max_tokens) for _ in range(n)]


def prompt_vocabulary(texts: Sequence[str]) -> list[str]:
    """Every word and punctuation token of ``texts`` (the tiny tokenizer's training corpus)."""
    import re

    return sorted({w for text in texts for w in re.findall(r"\w+|[^\w\s]", text)})


def build_tiny_llama(directory: str | Path, corpus: Sequence[str], seed: int = 0,
                     hidden_size: int = 32, layers: int = 2) -> Path:
    """A tiny randomly initialised LLaMA and a word-level tokenizer trained on ``corpus``, saved
    with ``save_pretrained`` so the real loading path (``from_pretrained``) is exercised (the
    offline stand-in for a real model; its answers are noise, it is a smoke test)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    trainer = trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[BOS]", "[EOS]"],
                                        vocab_size=512)
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   bos_token="[BOS]", eos_token="[EOS]")
    fast.save_pretrained(str(directory))
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=512, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=4096, pad_token_id=0, bos_token_id=2,
                      eos_token_id=3)
    LlamaForCausalLM(cfg).save_pretrained(str(directory))
    return directory
