"""Optional backend: Hugging Face ``T5ForConditionalGeneration`` built from a local config.

Chronos (and so WaveToken) trains exactly this architecture (``chronos-forecasting``
``src/chronos/chronos.py``: ``ChronosModel`` wraps ``AutoModelForSeq2SeqLM`` built from a T5
config with ``pad_token_id=0``, ``eos_token_id=1``, ``decoder_start_token_id=0`` and samples with
``generate(do_sample=True, min_new_tokens=max_new_tokens=H)``). This adapter gives it the
interface of :class:`~icml25.pipelines.wavetoken.model.Seq2SeqForecaster` (``loss`` and
``generate``), so the training loop and :func:`~icml25.pipelines.wavetoken.forecaster.forecast`
use either backend unchanged. Nothing is downloaded: the model is built from a ``T5Config``.
``transformers`` is imported only when this backend is chosen.
"""

from __future__ import annotations

import torch
from torch import nn

from icml25.pipelines.wavetoken.model import Seq2SeqConfig


def t5_config(config: Seq2SeqConfig):
    """The ``transformers.T5Config`` equivalent of our config (T5 relative positions, ReLU FFN)."""
    from transformers import T5Config

    return T5Config(
        vocab_size=config.vocab_size, d_model=config.d_model, d_kv=config.d_head,
        d_ff=config.d_ff, num_layers=config.n_encoder_layers,
        num_decoder_layers=config.n_decoder_layers, num_heads=config.n_heads,
        relative_attention_num_buckets=32, relative_attention_max_distance=128,
        dropout_rate=config.dropout, feed_forward_proj="relu", tie_word_embeddings=True,
        pad_token_id=config.pad_id, eos_token_id=config.eos_id,
        decoder_start_token_id=config.pad_id, use_cache=True,
    )


class HFT5Forecaster(nn.Module):
    """``T5ForConditionalGeneration`` with the ``loss``/``generate`` interface of our model."""

    backend = "hf_t5"

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        try:
            from transformers import T5ForConditionalGeneration
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError(
                "wavetoken.model.backend: 'hf_t5' needs the transformers package "
                "(pip install 'icml25[dev]' or pip install transformers)"
            ) from err
        self.config = config
        self.t5 = T5ForConditionalGeneration(t5_config(config))

    def loss(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             labels: torch.Tensor) -> torch.Tensor:
        """Token cross-entropy; ``-100`` labels are ignored and shifted to PAD as decoder input."""
        return self.t5(input_ids=input_ids, attention_mask=attention_mask.long(),
                       labels=labels).loss

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_tokens: int,
                 n_samples: int = 20, temperature: float = 1.0, top_k: int | None = 50,
                 top_p: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """``[B, n_samples, n_tokens]`` sampled ids, PAD and EOS suppressed at every step.

        HF ``generate`` draws from torch's global RNG; a seed drawn from ``generator`` seeds it
        inside ``fork_rng`` so the call is reproducible and leaves the global state untouched.
        """
        return seeded_generate(
            self.t5, input_ids, attention_mask, n_tokens, n_samples, generator, self,
            do_sample=True, max_new_tokens=n_tokens, min_new_tokens=n_tokens,
            temperature=temperature, top_k=top_k or 0, top_p=top_p,
            suppress_tokens=[self.config.pad_id, self.config.eos_id],
            pad_token_id=self.config.pad_id, eos_token_id=self.config.eos_id,
            decoder_start_token_id=self.config.pad_id,
        )


def seeded_generate(t5: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    n_tokens: int, n_samples: int, generator: torch.Generator | None,
                    owner: nn.Module, **generate_kwargs) -> torch.Tensor:
    """``t5.generate`` as ``[B, n_samples, n_tokens]`` ids, reproducible from ``generator``.

    HF ``generate`` draws from torch's global RNG: a seed drawn from ``generator`` (on its own
    device) seeds it inside ``fork_rng``, so the call is reproducible and leaves the global
    state untouched. ``owner`` (the module wrapping ``t5``) is put in eval mode for the call
    and restored after it.
    """
    seed = (int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=generator.device))
            if generator is not None else None)
    was_training = owner.training
    owner.eval()
    try:
        with torch.random.fork_rng(devices=[input_ids.device] if input_ids.is_cuda else []):
            if seed is not None:
                torch.manual_seed(seed)
            out = t5.generate(input_ids=input_ids, attention_mask=attention_mask.long(),
                              num_return_sequences=n_samples, **generate_kwargs)
    finally:
        owner.train(was_training)
    # out = [decoder start, n_tokens sampled ids]; HF puts the samples of a series side by side
    return out[:, 1 : 1 + n_tokens].reshape(input_ids.shape[0], n_samples, n_tokens)


def build_model(config: Seq2SeqConfig, backend: str) -> nn.Module:
    """A fresh model of the chosen backend: ``torch`` (ours) or ``hf_t5`` (transformers' T5)."""
    if backend == "torch":
        from icml25.pipelines.wavetoken.model import Seq2SeqForecaster

        return Seq2SeqForecaster(config)
    if backend == "hf_t5":
        return HFT5Forecaster(config)
    raise ValueError(f"wavetoken.model.backend: got {backend!r}; expected 'torch' or 'hf_t5'")


def load_model(config: Seq2SeqConfig | dict, state_dict: dict[str, torch.Tensor],
               backend: str = "torch") -> nn.Module:
    """Rebuild a trained model of either backend from its config and state dict (strict keys)."""
    if isinstance(config, dict):
        config = Seq2SeqConfig.from_dict(config)
    model = build_model(config, backend)
    model.load_state_dict(state_dict, strict=True)
    return model
