"""A small encoder-decoder transformer for the toy translation task, with batched greedy decoding.

Pre-norm torch transformer layers, learned absolute positions, one embedding shared by source,
target and output projection. Padding is masked in the encoder, in cross-attention and in the
decoder, so a batch decodes exactly like its rows one by one (tested).

Generation decodes incrementally: each decoder layer keeps the keys and values of the tokens
already emitted, and the memory's cross-attention keys and values are projected once, so a step
costs one token's work instead of re-running the whole prefix (the same arithmetic as
:meth:`Seq2Seq.decode`'s last position, tested to 1e-5).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Seq2SeqConfig:
    vocab_size: int
    d_model: int = 64
    heads: int = 4
    enc_layers: int = 2
    dec_layers: int = 2
    ff: int = 128
    dropout: float = 0.1
    max_len: int = 64
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


class Seq2Seq(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.pos_src = nn.Embedding(cfg.max_len, cfg.d_model)
        self.pos_tgt = nn.Embedding(cfg.max_len, cfg.d_model)
        enc = nn.TransformerEncoderLayer(cfg.d_model, cfg.heads, cfg.ff, cfg.dropout,
                                         batch_first=True, norm_first=True)
        dec = nn.TransformerDecoderLayer(cfg.d_model, cfg.heads, cfg.ff, cfg.dropout,
                                         batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(enc, cfg.enc_layers, norm=nn.LayerNorm(cfg.d_model),
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, cfg.dec_layers, norm=nn.LayerNorm(cfg.d_model))

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pad = src.eq(self.cfg.pad_id)
        pos = torch.arange(src.shape[1], device=src.device)
        x = self.embed(src) * self.cfg.d_model**0.5 + self.pos_src(pos)
        return self.encoder(x, src_key_padding_mask=pad), pad

    def decode(self, memory: torch.Tensor, src_pad: torch.Tensor,
               tgt_in: torch.Tensor) -> torch.Tensor:
        t = tgt_in.shape[1]
        pos = torch.arange(t, device=tgt_in.device)
        y = self.embed(tgt_in) * self.cfg.d_model**0.5 + self.pos_tgt(pos)
        causal = torch.triu(torch.full((t, t), float("-inf"), device=tgt_in.device), 1)
        h = self.decoder(y, memory, tgt_mask=causal, memory_key_padding_mask=src_pad)
        return h @ self.embed.weight.T

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, pad = self.encode(src)
        return self.decode(memory, pad, tgt_in)

    def token_logprobs(self, src: torch.Tensor, tgt_in: torch.Tensor,
                       tgt_out: torch.Tensor) -> torch.Tensor:
        """``log p(y_t | x, y_<t)`` for every target position (B x T); padding gets 0."""
        logp = torch.log_softmax(self(src, tgt_in), dim=-1)
        out = logp.gather(-1, tgt_out.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return out.masked_fill(tgt_out.eq(self.cfg.pad_id), 0.0)

    # ------------------------------------------------------------------ incremental decoding
    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, H, T, d / H)."""
        b, t, _ = x.shape
        return x.view(b, t, self.cfg.heads, -1).transpose(1, 2)

    def _attend(self, mha: nn.MultiheadAttention, q: torch.Tensor, k: torch.Tensor,
                v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Multi-head attention of one query position (q: B, H, 1, dh) over cached keys and
        values, through ``mha``'s output projection; ``mask`` (B, S) True where a key is padding."""
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if mask is not None:
            scores = scores.masked_fill(mask[:, None, None, :], float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(q.shape[0], 1, -1)
        return mha.out_proj(out)

    def start_cache(self, memory: torch.Tensor, max_len: int) -> dict[str, list[torch.Tensor]]:
        """Per decoder layer: the memory's cross-attention keys and values (projected once)
        and empty self-attention key / value buffers for ``max_len`` target positions."""
        d, b = self.cfg.d_model, memory.shape[0]
        cache: dict[str, list[torch.Tensor]] = {"mk": [], "mv": [], "sk": [], "sv": []}
        for layer in self.decoder.layers:
            if not layer.norm_first:
                raise NotImplementedError("incremental decoding assumes pre-norm layers")
            w, bias = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            kv = F.linear(memory, w[d:], None if bias is None else bias[d:])
            cache["mk"].append(self._heads(kv[..., :d]))
            cache["mv"].append(self._heads(kv[..., d:]))
            shape = (b, self.cfg.heads, max_len, d // self.cfg.heads)
            cache["sk"].append(memory.new_zeros(shape))
            cache["sv"].append(memory.new_zeros(shape))
        return cache

    def decode_step(self, cache: dict[str, list[torch.Tensor]], rows: torch.Tensor,
                    src_pad: torch.Tensor, tok: torch.Tensor, t: int) -> torch.Tensor:
        """Logits (len(rows), V) of target position ``t`` given token ``tok`` there, for the
        batch rows ``rows``; writes that position's self-attention keys and values into the
        cache. Positions ``0..t-1`` of those rows must have been stepped before."""
        d = self.cfg.d_model
        x = self.embed(tok)[:, None] * d**0.5 + self.pos_tgt.weight[t]
        for i, layer in enumerate(self.decoder.layers):
            sa = layer.self_attn
            qkv = F.linear(layer.norm1(x), sa.in_proj_weight, sa.in_proj_bias)
            q, k, v = (self._heads(z) for z in qkv.split(d, dim=-1))
            cache["sk"][i][rows, :, t] = k[:, :, 0]
            cache["sv"][i][rows, :, t] = v[:, :, 0]
            x = x + self._attend(sa, q, cache["sk"][i][rows, :, :t + 1],
                                 cache["sv"][i][rows, :, :t + 1], None)
            ca = layer.multihead_attn
            q = F.linear(layer.norm2(x), ca.in_proj_weight[:d],
                         None if ca.in_proj_bias is None else ca.in_proj_bias[:d])
            x = x + self._attend(ca, self._heads(q), cache["mk"][i][rows], cache["mv"][i][rows],
                                 src_pad)
            x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
        return (self.decoder.norm(x) @ self.embed.weight.T)[:, 0]

    @torch.no_grad()
    def generate(self, src: torch.Tensor, max_new: int, temperature: float = 0.0,
                 generator: torch.Generator | None = None) -> list[list[int]]:
        """Greedy (``temperature == 0``) or sampled decoding; token ids without BOS/EOS.

        Greedy decoding drops finished rows from the batch (each row's decoding depends on its
        own source and prefix only, padding being masked), so a few outputs that never emit
        EOS do not keep the whole batch decoding to ``max_new``; sampling keeps every row, so
        the generator's draws stay those of the full batch.
        """
        was_training = self.training
        self.eval()
        memory, pad = self.encode(src)
        b = src.shape[0]
        ys = torch.full((b, 1), self.cfg.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(b, dtype=torch.bool, device=src.device)
        max_new = min(max_new, self.cfg.max_len - 1)
        shrink = temperature <= 0
        cache = self.start_cache(memory, max_new)
        every = torch.arange(b, device=src.device)
        for t in range(max_new):
            if shrink:
                live = (~done).nonzero().squeeze(-1)
                logits = self.decode_step(cache, live, pad[live], ys[live, -1], t)
                nxt = torch.full((b,), self.cfg.pad_id, dtype=torch.long, device=src.device)
                nxt[live] = logits.argmax(-1)
            else:
                logits = self.decode_step(cache, every, pad, ys[:, -1], t)
                probs = torch.softmax(logits / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            nxt = nxt.masked_fill(done, self.cfg.pad_id)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            done |= nxt.eq(self.cfg.eos_id)
            if bool(done.all()):
                break
        self.train(was_training)
        out = []
        for row in ys[:, 1:].tolist():
            seq = []
            for t in row:
                if t in (self.cfg.eos_id, self.cfg.pad_id):
                    break
                seq.append(t)
            out.append(seq)
        return out


def pad_batch(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    n = max(1, max(len(s) for s in seqs))
    out = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def greedy_translate(model: Seq2Seq, sources: list[list[int]], batch_size: int = 256,
                     max_new: int = 48) -> list[list[int]]:
    """Greedy translations of id sequences, in input order (batched by length)."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out: list[list[int] | None] = [None] * len(sources)
    for k in range(0, len(order), batch_size):
        idx = order[k: k + batch_size]
        hyps = model.generate(pad_batch([sources[i] for i in idx], model.cfg.pad_id), max_new)
        for i, h in zip(idx, hyps, strict=True):
            out[i] = h
    return out  # type: ignore[return-value]
