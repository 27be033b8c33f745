"""A small encoder-decoder transformer for the toy translation task, with batched greedy decoding.

Pre-norm torch transformer layers, learned absolute positions, one embedding shared by source,
target and output projection. Padding is masked in the encoder, in cross-attention and in the
decoder, so a batch decodes exactly like its rows one by one (tested).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
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
        for _ in range(max_new):
            if shrink:
                live = (~done).nonzero().squeeze(-1)
                logits = self.decode(memory[live], pad[live], ys[live])[:, -1]
                nxt = torch.full((b,), self.cfg.pad_id, dtype=torch.long, device=src.device)
                nxt[live] = logits.argmax(-1)
            else:
                logits = self.decode(memory, pad, ys)[:, -1]
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
