"""FPO on real models: a local Hugging Face causal LM, a local pretrained SAE (sae-lens / Gemma
Scope layout, JumpReLU or ReLU) and a local jsonl preference file (``docs/papers/fpo.md``,
"Running it").

Nothing is downloaded: models load with ``local_files_only=True``; ``transformers`` is imported
only here. The FPO loss itself is :mod:`icml25.pipelines.fpo.losses`, shared with the synthetic
pipeline: :func:`fpo_pair_stats` computes its inputs from an HF model, so
``margin_u("fpo", stats, ...)`` and ``preference_loss`` train it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from icml25.pipelines.fpo.align import check_digests, digests_of
from icml25.pipelines.fpo.lm import full_batch
from icml25.pipelines.fpo.losses import (
    PairStats,
    feature_discrepancy,
    masked_mean,
    masked_sum,
    pooled_features,
    token_logps,
)


def load_hf_causal_lm(path: str | Path, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A local causal LM directory (``config.json`` + weights) as an HF model in eval mode."""
    from transformers import AutoModelForCausalLM

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"fpo hf_model_path {path} has no config.json")
    model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True,
                                                 dtype=dtype)
    return model.eval()


class PretrainedSAE(nn.Module):
    """A pretrained SAE in the sae-lens / Gemma Scope layout: ``W_enc [d, m]``, ``b_enc [m]``,
    ``W_dec [m, d]``, ``b_dec [d]`` and, for JumpReLU SAEs, ``threshold [m]``:
    ``c = (pre > threshold) · pre`` with ``pre = (h − b_dec) W_enc + b_enc`` (ReLU without a
    threshold). Frozen: it only encodes."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        missing = {"W_enc", "b_enc", "W_dec", "b_dec"} - set(tensors)
        if missing:
            raise ValueError(f"SAE weights lack {sorted(missing)}")
        d, m = tensors["W_enc"].shape
        shapes = {"b_enc": (m,), "W_dec": (m, d), "b_dec": (d,), "threshold": (m,)}
        for name, shape in shapes.items():
            if name in tensors and tuple(tensors[name].shape) != shape:
                raise ValueError(f"SAE {name} has shape {tuple(tensors[name].shape)}, "
                                 f"expected {shape} for W_enc {(d, m)}")
        for name, value in tensors.items():
            self.register_buffer(name, value.float())
        self.d, self.m = d, m

    def encode(self, h: torch.Tensor) -> torch.Tensor:
        pre = (h - self.b_dec) @ self.W_enc + self.b_enc
        if hasattr(self, "threshold"):
            return pre * (pre > self.threshold)
        return torch.relu(pre)


def load_pretrained_sae(path: str | Path) -> PretrainedSAE:
    """SAE weights from ``.npz`` or ``.safetensors``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"fpo SAE file {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path) as data:
            tensors = {k: torch.from_numpy(data[k]) for k in data.files}
    elif path.suffix == ".safetensors":
        from safetensors.torch import load_file

        tensors = load_file(str(path))
    else:
        raise ValueError(f"fpo SAE file {path}: expected .npz or .safetensors")
    return PretrainedSAE(tensors)


def read_preference_jsonl(path: str | Path, tokenize: Callable[[str], list[int]],
                          max_len: int) -> tuple[list[tuple[list[int], list[int], list[int]]],
                                                 dict[str, int]]:
    """``(prompt, chosen, rejected)`` token ids from a jsonl file of ``{prompt, chosen,
    rejected}`` records. Records that must not be trained on are counted and skipped: identical
    chosen and rejected, an empty response, a prompt + response longer than ``max_len``; a line
    that is not such a JSON record raises, naming the line."""
    pairs: list[tuple[list[int], list[int], list[int]]] = []
    skipped = {"identical": 0, "empty_response": 0, "too_long": 0}
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                prompt, chosen, rejected = (str(rec[k]) for k in ("prompt", "chosen", "rejected"))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: not a {{prompt, chosen, rejected}} record "
                                 f"({exc})") from None
            if chosen.strip() == rejected.strip():
                skipped["identical"] += 1
                continue
            if not chosen.strip() or not rejected.strip():
                skipped["empty_response"] += 1
                continue
            p, w, l_ = tokenize(prompt), tokenize(chosen), tokenize(rejected)
            if len(p) + max(len(w), len(l_)) > max_len:
                skipped["too_long"] += 1
                continue
            pairs.append((p, w, l_))
    return pairs, skipped


def _forward_pairs(model: nn.Module, sae: nn.Module,
                   pairs: Sequence[tuple[list[int], list[int], list[int]]], layer: int,
                   pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed and averaged response log-probs ``[2n]`` and pooled SAE features ``[2n, m]`` of
    the chosen (first n) and rejected (last n) responses."""
    prompts = [p for p, _, _ in pairs]
    responses = [w for _, w, _ in pairs] + [l_ for _, _, l_ in pairs]
    ids, logit_mask, token_mask = full_batch(prompts + prompts, responses, pad_id)
    # attend to every real token: the prompt (before the response) and the response
    attn = torch.zeros_like(ids)
    for i, (p, r) in enumerate(zip(prompts + prompts, responses, strict=True)):
        attn[i, :len(p) + len(r)] = 1
    out = model(input_ids=ids, attention_mask=attn, output_hidden_states=True)
    lp = token_logps(out.logits[:, :-1], ids[:, 1:])
    h = out.hidden_states[layer]
    return (masked_sum(lp, logit_mask), masked_mean(lp, logit_mask),
            pooled_features(sae.encode(h.float()), token_mask))


def fpo_pair_stats(model: nn.Module, sae: nn.Module, pairs: Sequence[tuple[list[int],
                   list[int], list[int]]], ref_cache: dict[str, torch.Tensor], layer: int,
                   beta: float, k: int, union: bool = True, pad_id: int = 0) -> PairStats:
    """FPO's inputs for a batch of pairs from an HF causal LM: length-averaged log-probs,
    pooled SAE features of ``hidden_states[layer]`` (the residual after block ``layer``; some
    HF models return the final-normed output as the last entry) and the discrepancy to the
    reference's cached features ``ref_cache`` (from :func:`reference_cache`, sliced to the same
    pairs). A cache that carries ``digests`` is refused if they are not those of ``pairs``."""
    n = len(pairs)
    if "digests" in ref_cache:
        check_digests(ref_cache["digests"], digests_of(*zip(*pairs, strict=True)), "ref_cache")
    sums, avgs, feats = _forward_pairs(model, sae, pairs, layer, pad_id)
    return PairStats(
        sum_w=sums[:n], sum_l=sums[n:], avg_w=avgs[:n], avg_l=avgs[n:],
        d_w=feature_discrepancy(feats[:n], ref_cache["feat_w"], k, union),
        d_l=feature_discrepancy(feats[n:], ref_cache["feat_l"], k, union),
        gamma_ref=beta * (ref_cache["avg_w"] - ref_cache["avg_l"]))


@torch.no_grad()
def reference_cache(model: nn.Module, sae: nn.Module,
                    pairs: Sequence[tuple[list[int], list[int], list[int]]], layer: int,
                    pad_id: int = 0) -> dict[str, torch.Tensor]:
    """FPO's offline cache from the frozen reference (SFT) HF model, for ``pairs``, with the
    digests of the pairs it was computed on (``digests``, checked by :func:`fpo_pair_stats`)."""
    n = len(pairs)
    _, avgs, feats = _forward_pairs(model.eval(), sae, pairs, layer, pad_id)
    return {"avg_w": avgs[:n], "avg_l": avgs[n:], "feat_w": feats[:n], "feat_l": feats[n:],
            "digests": digests_of(*zip(*pairs, strict=True))}
