"""The small causal LM of the fpo pipeline: batching of prompt+response sequences, response
log-probabilities with the residual stream of one block, batched sampling and SFT.

The model is :class:`icml25.core.causal_lm.LlamaLM` (a small LLaMA-style decoder: RMSNorm,
SwiGLU, RoPE; sizes from ``params:fpo.model``).
Sequences are right-padded with ``<pad>``: attention is causal, so padding after a
sequence never changes its logits, and padded positions are masked out of every sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from icml25.core.causal_lm import LlamaConfig, LlamaLM
from icml25.pipelines.fpo.world import EOS, PAD, World


def build_model(world: World, d_model: int, n_layers: int, n_heads: int, d_ff: int,
                max_seq_len: int) -> LlamaLM:
    return LlamaLM(LlamaConfig(vocab_size=world.vocab_size, d_model=d_model, n_layers=n_layers,
                               n_heads=n_heads, d_ff=d_ff, max_seq_len=max_seq_len))


def batch_sequences(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                    pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(inputs [B, T], targets [B, T], response_mask [B, T])`` for next-token prediction of
    ``prompt + response``: ``targets[:, t]`` is token ``t + 1``; the mask is 1 exactly where that
    target is a response token."""
    seqs = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
    T = max(len(s) for s in seqs) - 1
    ids = torch.full((len(seqs), T + 1), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.float32)
    for i, (p, s) in enumerate(zip(prompts, seqs, strict=True)):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, len(p) - 1:len(s) - 1] = 1.0
    return ids[:, :-1], ids[:, 1:], mask


def full_batch(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
               pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids [B, L], logit_mask [B, L-1], token_mask [B, L])`` of whole ``prompt + response``
    sequences: ``logit_mask`` marks the logits ``[:, :-1]`` that predict a response token (for
    log-probs and KL), ``token_mask`` the positions that hold one (where the SAE features of a
    response are read, the paper's eq. 10)."""
    inputs, targets, logit_mask = batch_sequences(prompts, responses, pad_id)
    ids = torch.cat([inputs, targets[:, -1:]], dim=1)
    token_mask = torch.cat([torch.zeros(len(prompts), 1), logit_mask], dim=1)
    return ids, logit_mask, token_mask


@contextmanager
def capture_residual(model: LlamaLM, layer: int):
    """Record the residual stream after block ``layer`` (1-based) during forward passes."""
    if not 1 <= layer <= len(model.layers):
        raise ValueError(f"fpo.sae.layer: got {layer}; expected 1..{len(model.layers)}")
    store: dict[str, torch.Tensor] = {}
    handle = model.layers[layer - 1].register_forward_hook(
        lambda module, args, output: store.__setitem__("h", output))
    try:
        yield store
    finally:
        handle.remove()


def forward(model: LlamaLM, inputs: torch.Tensor, layer: int | None = None
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logits ``[B, T, V]`` and, with ``layer``, the residual after that block ``[B, T, d]``."""
    if layer is None:
        return model(inputs), None
    with capture_residual(model, layer) as store:
        logits = model(inputs)
    return logits, store["h"]


@torch.no_grad()
def generate(model: LlamaLM, prompts: Sequence[Sequence[int]], world: World, max_new: int,
             temperature: float, seed: int, batch_size: int = 256,
             progress: bool = False, desc: str = "sampling") -> list[list[int]]:
    """Sample a response for every prompt (greedy at ``temperature`` 0), stopping at ``<eos>``.

    Decoding is incremental with the model's KV cache
    (:meth:`icml25.core.causal_lm.LlamaLM.forward_cached`). Prompts of equal length are batched
    together (no padding inside the context); each batch
    draws from its own generator seeded by ``seed`` and the batch's first prompt index, so the
    result does not depend on the batch composition of other lengths. Returned responses include
    their ``<eos>`` when one was produced within ``max_new`` tokens.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    eos = world.index[EOS]
    out: list[list[int] | None] = [None] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    chunks = [idx[s:s + batch_size] for idx in by_len.values()
              for s in range(0, len(idx), batch_size)]
    for chunk in tqdm(chunks, desc=desc, disable=not progress, leave=False):
        gen = torch.Generator(device="cpu").manual_seed(int(seed) * 1_000_003 + chunk[0])
        ids = torch.tensor([list(prompts[i]) for i in chunk], dtype=torch.long, device=device)
        done = torch.zeros(len(chunk), dtype=torch.bool)
        new: list[torch.Tensor] = []
        cache = model.new_cache()
        step_input = ids
        for _ in range(max_new):
            logits = model.forward_cached(step_input, cache)[:, -1].float().cpu()
            if temperature == 0:
                nxt = logits.argmax(-1)
            else:
                probs = F.softmax(logits / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
            nxt = torch.where(done, torch.full_like(nxt, world.index[PAD]), nxt)
            new.append(nxt)
            done |= nxt == eos
            step_input = nxt.unsqueeze(1).to(device)
            if bool(done.all()):
                break
        gen_ids = torch.stack(new, 1).numpy()
        for row, i in enumerate(chunk):
            seq = gen_ids[row].tolist()
            out[i] = seq[:seq.index(eos) + 1] if eos in seq else seq
    model.train(was_training)
    return [o if o is not None else [] for o in out]


def train_sft(model: LlamaLM, prompts: Sequence[Sequence[int]],
              responses: Sequence[Sequence[int]], world: World, steps: int, batch_size: int,
              lr: float, seed: int, progress: bool = True) -> list[float]:
    """Supervised finetuning on response tokens (cross-entropy masked to the response)."""
    gen = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)))
    model.train()
    losses = []
    pad = world.index[PAD]
    for _ in tqdm(range(steps), desc="fpo SFT", disable=not progress, leave=False):
        idx = gen.integers(len(prompts), size=batch_size)
        inputs, targets, mask = batch_sequences([prompts[i] for i in idx],
                                                [responses[i] for i in idx], pad)
        logits = model(inputs)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                              reduction="none").view_as(mask)
        loss = (nll * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def response_activations(model: LlamaLM, prompts: Sequence[Sequence[int]],
                         responses: Sequence[Sequence[int]], world: World, layer: int,
                         batch_size: int = 128) -> torch.Tensor:
    """Residual vectors after block ``layer`` at every response-token position, ``[N, d]``
    (the positions whose SAE features FPO pools)."""
    model.eval()
    pad = world.index[PAD]
    rows = []
    for s in range(0, len(prompts), batch_size):
        ids, _, token_mask = full_batch(prompts[s:s + batch_size], responses[s:s + batch_size],
                                        pad)
        _, h = forward(model, ids, layer)
        rows.append(h[token_mask.bool()])
    return torch.cat(rows).float()
