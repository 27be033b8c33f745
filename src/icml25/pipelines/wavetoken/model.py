"""A small T5-style encoder-decoder that forecasts token sequences (the Chronos recipe).

WaveToken keeps the Chronos recipe: a T5 encoder-decoder reads the context tokens and is trained
with cross-entropy on the forecast tokens, then sampled autoregressively. This module is a
plain-torch substitute for ``transformers.T5ForConditionalGeneration`` (the same architecture
without the dependency; ``hf_t5.py`` offers the real one):

- pre-norm residual blocks with RMS layer norm (T5LayerNorm: no mean subtraction, no bias),
  ReLU feed-forward, no biases anywhere, dropout on every residual branch and on attention weights;
- positions: ``"learned"`` absolute embeddings (the CPU default) or ``"t5_relative"``
  bucketed relative-position biases (32 buckets, max distance 128; one table per stack, computed
  once and shared by all layers of that stack, no bias in cross-attention -- as in HF
  ``modeling_t5.T5Attention._relative_position_bucket``);
- tied input/output embeddings; because T5's embeddings are initialised with std 1 and never
  rescaled on input, the decoder output is multiplied by ``d_model ** -0.5`` before the tied
  projection (HF ``T5ForConditionalGeneration.forward``: ``sequence_output * model_dim**-0.5``
  when ``tie_word_embeddings``), so initial logits have unit scale;
- attention without the ``1/sqrt(d_head)`` factor and T5's initialisation, which folds that
  factor into the query weights (HF ``T5PreTrainedModel._init_weights``);
- decoder start token = PAD (T5 / Chronos), labels ``-100`` ignored by the loss.

Models are stored as a plain state dict plus the config dict, never as pickled modules.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

IGNORE_INDEX = -100
RELATIVE_BUCKETS = 32
RELATIVE_MAX_DISTANCE = 128
_POSITIONS = ("learned", "t5_relative")


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Sizes of the encoder-decoder (defaults = the CPU default model of conf/base).

    Attributes:
        vocab_size: number of token ids, specials included (1024 for WaveToken).
        d_model: width of the residual stream.
        n_heads: attention heads; ``d_model`` must be divisible by it.
        n_encoder_layers, n_decoder_layers: blocks in each stack.
        d_ff: hidden width of the ReLU feed-forward.
        dropout: dropout on residual branches, attention weights and embeddings (T5's
            ``dropout_rate``); switched off in ``eval()`` and in :meth:`Seq2SeqForecaster.generate`.
        max_context_tokens: longest encoder input (C + EOS); bounds the learned encoder positions.
        max_target_tokens: longest decoder input (H + EOS); bounds the learned decoder positions.
        pad_id, eos_id: special ids (Chronos convention PAD = 0, EOS = 1).
        position: ``"learned"`` absolute embeddings or ``"t5_relative"`` bucketed biases.
    """

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1
    max_context_tokens: int = 513
    max_target_tokens: int = 65
    pad_id: int = 0
    eos_id: int = 1
    position: str = "learned"

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "n_heads",
            "n_encoder_layers",
            "n_decoder_layers",
            "d_ff",
            "max_context_tokens",
            "max_target_tokens",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"Seq2SeqConfig.{name}: got {value!r}; expected a positive integer"
                )
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"Seq2SeqConfig.d_model: got {self.d_model}, not divisible by "
                f"n_heads={self.n_heads}"
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float):
            raise ValueError(f"Seq2SeqConfig.dropout: got {self.dropout!r}; expected a float")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(
                f"Seq2SeqConfig.dropout: got {self.dropout}; expected 0 <= dropout < 1"
            )
        for name in ("pad_id", "eos_id"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"Seq2SeqConfig.{name}: got {value!r}; expected an integer")
            if not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"Seq2SeqConfig.{name}: got {value}; expected 0 <= {name} < "
                    f"vocab_size={self.vocab_size}"
                )
        if self.pad_id == self.eos_id:
            raise ValueError(f"Seq2SeqConfig.eos_id: equals pad_id={self.pad_id}; they must differ")
        if self.vocab_size < 3:
            raise ValueError(
                f"Seq2SeqConfig.vocab_size: got {self.vocab_size}; expected >= 3 (PAD, EOS and "
                "at least one value token)"
            )
        if self.position not in _POSITIONS:
            raise ValueError(
                f"Seq2SeqConfig.position: got {self.position!r}; expected one of {_POSITIONS}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict that :meth:`from_dict` turns back into an equal config."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Seq2SeqConfig:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"Seq2SeqConfig: unknown field(s) {sorted(unknown)}")
        return cls(**data)


def relative_position_bucket(
    relative_position: torch.Tensor,
    bidirectional: bool,
    num_buckets: int = RELATIVE_BUCKETS,
    max_distance: int = RELATIVE_MAX_DISTANCE,
) -> torch.Tensor:
    """T5's relative-position buckets (HF ``T5Attention._relative_position_bucket``).

    ``relative_position = key_position - query_position``. Half the buckets (all of them when
    ``bidirectional`` is false, where only the past is visible) hold exact small distances, the
    rest log-spaced distances up to ``max_distance``; farther distances share the last bucket.
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = -torch.clamp(relative_position, max=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # clamp(min=1) only avoids log(0) on entries that take the `is_small` branch anyway
    large = (
        max_exact
        + (
            torch.log(distance.clamp(min=1).float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """One learned scalar per (bucket, head), added to the attention logits (T5 section 2.1)."""

    def __init__(self, n_heads: int, bidirectional: bool) -> None:
        super().__init__()
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(RELATIVE_BUCKETS, n_heads)

    def forward(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        """Bias ``[1, n_heads, Tq, Tk]`` for integer positions ``[Tq]`` and ``[Tk]``."""
        relative = key_positions[None, :] - query_positions[:, None]
        bucket = relative_position_bucket(relative, self.bidirectional)
        return self.embedding(bucket).permute(2, 0, 1).unsqueeze(0)


class Attention(nn.Module):
    """Multi-head attention without biases, via ``F.scaled_dot_product_attention``.

    ``scale=1.0``: T5 does not divide the logits by ``sqrt(d_head)``; its initialisation of the
    query projection (std ``(d_model * d_head) ** -0.5``) carries that factor instead.
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.d_head = config.d_head
        self.dropout = float(config.dropout)
        d = config.d_model
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split_heads(self.k(x)), self.split_heads(self.v(x))

    def forward(
        self,
        x: torch.Tensor,
        key_value: tuple[torch.Tensor, torch.Tensor],
        bias: torch.Tensor | None,
    ) -> torch.Tensor:
        q = self.split_heads(self.q(x))
        k, v = key_value
        n, h, t, dh = q.shape
        group = n // k.shape[0]
        if group * k.shape[0] != n:
            raise ValueError(f"attention: {n} query rows do not split into {k.shape[0]} key rows")
        if group > 1:
            # Samples of one series share its keys/values (cross-attention during generation):
            # fold the group into the query axis instead of repeating the encoder output.
            # Only valid for a bias that does not depend on the query ([B, 1, 1, L] padding).
            q = q.view(k.shape[0], group, h, t, dh).transpose(1, 2).reshape(-1, h, group * t, dh)
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=bias,
            dropout_p=self.dropout if self.training else 0.0,
            scale=1.0,
        )
        if group > 1:
            out = out.view(k.shape[0], h, group, t, dh).transpose(1, 2).reshape(n, h, t, dh)
        return self.o(out.transpose(1, 2).reshape(n, t, h * dh))


class FeedForward(nn.Module):
    """T5's ``DenseReluDense``: ``wo(dropout(relu(wi(x))))``, no biases."""

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wo(self.dropout(F.relu(self.wi(x))))


def _rms_norm(config: Seq2SeqConfig) -> nn.RMSNorm:
    # T5LayerNorm: x / sqrt(mean(x^2) + 1e-6) * weight, no bias, no mean subtraction
    return nn.RMSNorm(config.d_model, eps=1e-6)


class EncoderLayer(nn.Module):
    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.norm_attn = _rms_norm(config)
        self.attn = Attention(config)
        self.norm_ff = _rms_norm(config)
        self.ff = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        h = self.norm_attn(x)
        x = x + self.dropout(self.attn(h, self.attn.project_kv(h), bias))
        return x + self.dropout(self.ff(self.norm_ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.norm_self = _rms_norm(config)
        self.self_attn = Attention(config)
        self.norm_cross = _rms_norm(config)
        self.cross_attn = Attention(config)
        self.norm_ff = _rms_norm(config)
        self.ff = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        self_bias: torch.Tensor | None,
        cross_kv: tuple[torch.Tensor, torch.Tensor],
        cross_bias: torch.Tensor,
        cache: list[torch.Tensor] | None,
    ) -> torch.Tensor:
        h = self.norm_self(x)
        k, v = self.self_attn.project_kv(h)
        if cache is not None:
            if cache:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]
        x = x + self.dropout(self.self_attn(h, (k, v), self_bias))
        x = x + self.dropout(self.cross_attn(self.norm_cross(x), cross_kv, cross_bias))
        return x + self.dropout(self.ff(self.norm_ff(x)))


@dataclass
class DecoderState:
    """What incremental decoding keeps between steps (a key/value cache).

    Attributes:
        cross_kv: per decoder layer, the cross-attention keys/values of the encoder output
            ``([B, heads, L, d_head], [B, heads, L, d_head])`` -- computed once.
        cross_bias: additive key-padding mask ``[B, 1, 1, L]`` (0 = attend, -inf = padding).
        self_kv: per decoder layer, ``[k, v]`` of every decoder token seen so far (empty at start).
        length: number of decoder tokens already consumed (= position of the next one).
    """

    cross_kv: list[tuple[torch.Tensor, torch.Tensor]]
    cross_bias: torch.Tensor
    self_kv: list[list[torch.Tensor]]
    length: int = 0

    def repeat_interleave(self, n: int) -> DecoderState:
        """A state for ``n`` samples per row (row b -> rows b*n .. b*n+n-1).

        The self-attention cache is repeated; the cross-attention keys/values and padding bias
        stay at one copy per series -- :class:`Attention` folds the ``n`` samples into its query
        axis, so the encoder output is neither recomputed nor copied per sample.
        """
        return DecoderState(
            cross_kv=self.cross_kv,
            cross_bias=self.cross_bias,
            self_kv=[[t.repeat_interleave(n, dim=0) for t in layer] for layer in self.self_kv],
            length=self.length,
        )


def _padding_bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, L]`` bool/int mask (1 = attend) -> additive ``[B, 1, 1, L]`` bias (0 / -inf)."""
    bias = torch.zeros(attention_mask.shape, dtype=dtype, device=attention_mask.device)
    bias = bias.masked_fill(~attention_mask.bool(), float("-inf"))
    return bias[:, None, None, :]


class Seq2SeqForecaster(nn.Module):
    """T5-style encoder-decoder over forecast tokens (see the module docstring for the design).

    Encoder positions with ``position="learned"`` are counted from the *right* end of the input
    (the EOS token always has position 0, the newest context token position 1, ...): contexts are
    left-padded, so this keeps the most recent observations at fixed positions whatever the
    padding or the context length. Decoder positions count from the start token (position 0).
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        if not isinstance(config, Seq2SeqConfig):
            raise TypeError(f"config: expected Seq2SeqConfig, got {type(config).__name__}")
        self.config = config
        d = config.d_model
        self.shared = nn.Embedding(config.vocab_size, d)
        if config.position == "learned":
            self.encoder_positions = nn.Embedding(config.max_context_tokens, d)
            self.decoder_positions = nn.Embedding(config.max_target_tokens, d)
        else:
            self.encoder_relative = RelativePositionBias(config.n_heads, bidirectional=True)
            self.decoder_relative = RelativePositionBias(config.n_heads, bidirectional=False)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(config) for _ in range(config.n_encoder_layers)
        )
        self.encoder_norm = _rms_norm(config)
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(config) for _ in range(config.n_decoder_layers)
        )
        self.decoder_norm = _rms_norm(config)
        self.dropout = nn.Dropout(config.dropout)
        self.reset_parameters()

    # ----------------------------------------------------------------------------- init / io
    @torch.no_grad()
    def reset_parameters(self) -> None:
        """T5's initialisation (HF ``T5PreTrainedModel._init_weights``, ``factor = 1``)."""
        c = self.config
        d, dh, h = c.d_model, c.d_head, c.n_heads
        nn.init.normal_(self.shared.weight, std=1.0)
        for module in self.modules():
            if isinstance(module, Attention):
                nn.init.normal_(module.q.weight, std=(d * dh) ** -0.5)
                nn.init.normal_(module.k.weight, std=d**-0.5)
                nn.init.normal_(module.v.weight, std=d**-0.5)
                nn.init.normal_(module.o.weight, std=(h * dh) ** -0.5)
            elif isinstance(module, FeedForward):
                nn.init.normal_(module.wi.weight, std=d**-0.5)
                nn.init.normal_(module.wo.weight, std=c.d_ff**-0.5)
            elif isinstance(module, RelativePositionBias):
                nn.init.normal_(module.embedding.weight, std=d**-0.5)
            elif isinstance(module, nn.RMSNorm):
                nn.init.ones_(module.weight)
        if c.position == "learned":
            # not part of T5; same scale as the token embeddings they are added to (our choice)
            nn.init.normal_(self.encoder_positions.weight, std=1.0)
            nn.init.normal_(self.decoder_positions.weight, std=1.0)

    @classmethod
    def from_state(
        cls, config: Seq2SeqConfig | dict[str, Any], state_dict: dict[str, torch.Tensor]
    ) -> Seq2SeqForecaster:
        """Build a model from a config (or its dict) and a plain state dict (strict keys)."""
        if isinstance(config, dict):
            config = Seq2SeqConfig.from_dict(config)
        model = cls(config)
        model.load_state_dict(state_dict, strict=True)
        device = next(iter(state_dict.values())).device if state_dict else torch.device("cpu")
        return model.to(device)

    # -------------------------------------------------------------------------------- checks
    def _check_ids(self, ids: torch.Tensor, name: str) -> None:
        if ids.dim() != 2:
            raise ValueError(f"{name}: expected shape [batch, tokens], got {tuple(ids.shape)}")
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise ValueError(f"{name}: expected integer token ids, got dtype {ids.dtype}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(
                f"{name}: ids must lie in [0, {self.config.vocab_size}); got "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )

    # ------------------------------------------------------------------------------- encoder
    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Encoder output ``[B, L, d_model]`` for context ids ``[B, L]`` and mask ``[B, L]``."""
        self._check_ids(input_ids, "input_ids")
        if attention_mask.shape != input_ids.shape:
            raise ValueError(
                f"attention_mask: shape {tuple(attention_mask.shape)} differs from input_ids "
                f"{tuple(input_ids.shape)}"
            )
        if not bool(attention_mask.bool().any(dim=1).all()):
            raise ValueError("attention_mask: some row attends to no token (all zeros)")
        _, length = input_ids.shape
        x = self.shared(input_ids)
        pad_bias = _padding_bias(attention_mask, x.dtype)
        if self.config.position == "learned":
            if length > self.config.max_context_tokens:
                raise ValueError(
                    f"input_ids: {length} tokens exceed max_context_tokens="
                    f"{self.config.max_context_tokens}"
                )
            # right-aligned: the last token (EOS) has position 0, see the class docstring
            positions = torch.arange(length - 1, -1, -1, device=input_ids.device)
            x = x + self.encoder_positions(positions)[None]
            bias = pad_bias
        else:
            positions = torch.arange(length, device=input_ids.device)
            bias = pad_bias + self.encoder_relative(positions, positions)
        x = self.dropout(x)
        for layer in self.encoder_layers:
            x = layer(x, bias)
        return self.dropout(self.encoder_norm(x))

    # ------------------------------------------------------------------------------- decoder
    def init_decoder_state(
        self, encoder_output: torch.Tensor, attention_mask: torch.Tensor
    ) -> DecoderState:
        """Empty key/value cache plus the cross-attention keys/values of ``encoder_output``."""
        return DecoderState(
            cross_kv=[layer.cross_attn.project_kv(encoder_output) for layer in self.decoder_layers],
            cross_bias=_padding_bias(attention_mask, encoder_output.dtype),
            self_kv=[[] for _ in self.decoder_layers],
        )

    def decode(self, decoder_input_ids: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Logits ``[B, T, V]`` for ``T`` new decoder tokens; appends their keys/values to ``state``.

        Call it with the whole decoder input (training, one call) or one token at a time
        (generation); both give the same logits because the new tokens sit at positions
        ``state.length .. state.length + T - 1`` and attend causally to everything cached.
        """
        self._check_ids(decoder_input_ids, "decoder_input_ids")
        _, t_new = decoder_input_ids.shape
        start = state.length
        device = decoder_input_ids.device
        query_pos = torch.arange(start, start + t_new, device=device)
        key_pos = torch.arange(0, start + t_new, device=device)
        x = self.shared(decoder_input_ids)
        causal = torch.zeros(t_new, start + t_new, dtype=x.dtype, device=device)
        causal = causal.masked_fill(key_pos[None, :] > query_pos[:, None], float("-inf"))
        if self.config.position == "learned":
            if start + t_new > self.config.max_target_tokens:
                raise ValueError(
                    f"decoder_input_ids: {start + t_new} tokens exceed max_target_tokens="
                    f"{self.config.max_target_tokens}"
                )
            x = x + self.decoder_positions(query_pos)[None]
            self_bias = causal[None, None] if t_new > 1 else None
        else:
            self_bias = causal[None, None] + self.decoder_relative(query_pos, key_pos)
        x = self.dropout(x)
        for layer, cross_kv, cache in zip(
            self.decoder_layers, state.cross_kv, state.self_kv, strict=True
        ):
            x = layer(x, self_bias, cross_kv, state.cross_bias, cache)
        state.length = start + t_new
        x = self.dropout(self.decoder_norm(x))
        # tied embeddings: rescale as T5 does before projecting onto the shared matrix
        return F.linear(x * self.config.d_model**-0.5, self.shared.weight)

    # ------------------------------------------------------------------------------ training
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        decoder_input_ids: torch.Tensor,
    ) -> torch.Tensor:
        """Logits ``[B, T, V]`` of every decoder position (teacher forcing)."""
        if decoder_input_ids.dim() != 2 or decoder_input_ids.shape[0] != input_ids.shape[0]:
            raise ValueError(
                f"decoder_input_ids: expected [batch={input_ids.shape[0]}, tokens], got "
                f"{tuple(decoder_input_ids.shape)}"
            )
        encoder_output = self.encode(input_ids, attention_mask)
        state = self.init_decoder_state(encoder_output, attention_mask)
        return self.decode(decoder_input_ids, state)

    def shift_right(self, labels: torch.Tensor) -> torch.Tensor:
        """Decoder input = ``[PAD, labels[:-1]]`` with ``-100`` replaced by PAD (T5 ``_shift_right``)."""
        pad = self.config.pad_id
        shifted = torch.full_like(labels, pad)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == IGNORE_INDEX, pad)

    def loss(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """Mean token cross-entropy over labels ``[B, T]`` (``-100`` positions ignored)."""
        if labels.dim() != 2:
            raise ValueError(f"labels: expected [batch, tokens], got {tuple(labels.shape)}")
        valid = labels != IGNORE_INDEX
        if not bool(valid.any()):
            raise ValueError("labels: every position is -100; nothing to learn from")
        logits = self(input_ids, attention_mask, self.shift_right(labels))
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            labels.reshape(-1),
            ignore_index=IGNORE_INDEX,
        )

    # ---------------------------------------------------------------------------- generation
    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        n_tokens: int,
        n_samples: int = 20,
        temperature: float = 1.0,
        top_k: int | None = 50,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Sample ``n_samples`` continuations of ``n_tokens`` tokens each: ``[B, n_samples, n_tokens]``.

        Chronos ``ChronosModel.forward`` (HF ``generate`` with ``do_sample``,
        ``min_new_tokens = max_new_tokens = n_tokens``): the encoder runs once per series and its
        keys/values are shared by the samples; each step masks PAD and EOS (-inf), then applies
        HF's warpers in HF's order -- temperature, top-k (ties at the k-th value are kept), top-p
        (smallest set whose probability reaches ``top_p``, at least one token) -- and draws from
        the softmax by inverse-CDF sampling (:func:`sample_categorical`). Dropout is off while sampling; the
        module's train/eval mode is restored afterwards. Sample ``s`` of series ``b`` is
        ``out[b, s]`` (HF's ``num_return_sequences`` interleaving).
        """
        _check_sampling(n_tokens, n_samples, temperature, top_k, top_p)
        was_training = self.training
        self.eval()
        try:
            encoder_output = self.encode(input_ids, attention_mask)
            # keys/values of the encoder output computed on B rows, then repeated for the samples
            state = self.init_decoder_state(encoder_output, attention_mask)
            state = state.repeat_interleave(n_samples)
            batch = input_ids.shape[0] * n_samples
            token = torch.full(
                (batch, 1), self.config.pad_id, dtype=torch.long, device=input_ids.device
            )
            out = torch.empty(batch, n_tokens, dtype=torch.long, device=input_ids.device)
            for step in range(n_tokens):
                logits = self.decode(token, state)[:, -1, :].float()
                logits[:, self.config.pad_id] = float("-inf")
                logits[:, self.config.eos_id] = float("-inf")
                logits = warp_logits(logits, temperature, top_k, top_p)
                token = sample_categorical(torch.softmax(logits, dim=-1), generator)
                out[:, step] = token[:, 0]
        finally:
            self.train(was_training)
        return out.view(input_ids.shape[0], n_samples, n_tokens)


def _check_sampling(
    n_tokens: int,
    n_samples: int,
    temperature: float,
    top_k: int | None,
    top_p: float,
) -> None:
    for name, value in (("n_tokens", n_tokens), ("n_samples", n_samples)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: got {value!r}; expected a positive integer")
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature: got {temperature!r}; expected a finite value > 0")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0):
        raise ValueError(f"top_k: got {top_k!r}; expected None or an integer >= 0 (0 = off)")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p: got {top_p!r}; expected 0 < top_p <= 1")


def sample_categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One draw per row of ``probs`` ``[N, V]`` (rows sum to 1) -> ids ``[N, 1]``.

    Inverse-CDF sampling with one uniform per row: the smallest id whose cumulative probability
    exceeds ``u * total``. Same distribution as ``torch.multinomial``, which on CPU draws an
    exponential variate for every vocabulary entry (~10x slower at V = 1024, measured). Ids with
    probability 0 (PAD, EOS, filtered by top-k/top-p) are never returned: they add nothing to the
    cumulative sum, and the float-rounding corner case ``u * total >= total`` falls back to the
    most likely id.
    """
    cdf = probs.cumsum(dim=-1)
    u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=probs.dtype)
    ids = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=probs.shape[-1] - 1)
    invalid = probs.gather(-1, ids) <= 0
    if bool(invalid.any()):
        ids = torch.where(invalid, probs.argmax(dim=-1, keepdim=True), ids)
    return ids


def warp_logits(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = 50, top_p: float = 1.0
) -> torch.Tensor:
    """HF ``TemperatureLogitsWarper`` -> ``TopKLogitsWarper`` -> ``TopPLogitsWarper`` on ``[N, V]``.

    ``top_k`` of 0/None and ``top_p == 1`` are no-ops (HF does not even add those warpers).
    """
    if temperature != 1.0:
        logits = logits / temperature
    if top_k:
        k = min(top_k, logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= (1.0 - top_p)
        remove_sorted[..., -1:] = False  # keep at least the most likely token
        remove = remove_sorted.scatter(-1, sorted_idx, remove_sorted)
        logits = logits.masked_fill(remove, float("-inf"))
    return logits
