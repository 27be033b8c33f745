"""What a training step of the paper's 7B prover costs, counted without its weights.

The paper config serves its prover behind an OpenAI-compatible endpoint (``malot.agent``); the
room trains only its small LoT-Solver (``lot_model.py``). The prover itself is a LLaMA-style
decoder of the DeepSeekMath-7B architecture (the base of DeepSeek-Prover-V1.5 and of the
Goedel prover the paper config names): 30 layers, width 4096, 32 heads, SwiGLU width 11,008,
a vocabulary of 102,400 and untied input and output embeddings, 6.9 billion parameters. Its
float32 weights alone are 27.7 GB, with gradients and Adam's moments 111 GB: not a CPU dry run's
size. So:

- :func:`prover_step_cost` builds it on torch's ``meta`` device (shapes without data) from
  :mod:`icml25.core.causal_lm` and counts its parameters, the FLOPs of one forward and backward
  and the bytes autograd saves (:func:`icml25.core.training_cost.measure_training_step`);
- :func:`largest_fitting_layers` picks the most decoder layers of the same shapes whose
  weights, gradients and saved activations fit a memory budget, and :func:`run_cpu_step` trains
  that model one real step on the CPU (plain SGD, no optimizer state), which checks that the
  meta count is the count of a step that runs.

``python -m icml25.pipelines.malot.prover_cost`` prints both as JSON (docs/scale.md).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from typing import Any

import torch

from icml25.core.causal_lm import LlamaConfig, LlamaLM
from icml25.core.training_cost import StepCost, measure_training_step

#: the DeepSeekMath-7B architecture (module docstring); ``max_seq_len`` bounds the rotary table
PROVER_7B = LlamaConfig(vocab_size=102_400, d_model=4096, n_layers=30, n_heads=32, d_ff=11_008,
                        max_seq_len=4096, tie_embeddings=False)

#: float32 weights + their gradients (plain SGD keeps no other state)
SGD_BYTES_PER_PARAMETER = 8


def parameter_count(cfg: LlamaConfig) -> int:
    """Parameters of :class:`LlamaLM` for ``cfg``, by hand: embeddings and head, per layer the
    four attention projections, the three SwiGLU matrices and two RMSNorm gains, and the final
    norm (checked against the module in the tests)."""
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    per_layer = 4 * d * d + 3 * d * f + 2 * d
    head = 0 if cfg.tie_embeddings else v * d
    return v * d + head + cfg.n_layers * per_layer + d


def prover_step_cost(cfg: LlamaConfig = PROVER_7B, batch: int = 1, seq_len: int = 4096
                     ) -> StepCost:
    """One forward + backward of ``cfg``'s model on ``batch`` sequences of ``seq_len`` tokens,
    measured on ``meta`` (no memory for the weights)."""
    if seq_len > cfg.max_seq_len:
        raise ValueError(f"seq_len {seq_len} exceeds the model's max_seq_len {cfg.max_seq_len}")
    with torch.device("meta"):
        model = LlamaLM(cfg)
        ids = torch.zeros(batch, seq_len, dtype=torch.long)
    return measure_training_step(model, (ids,), allow_cpu=False)


def largest_fitting_layers(memory_bytes: float, cfg: LlamaConfig = PROVER_7B, batch: int = 1,
                           seq_len: int = 256) -> tuple[int, StepCost]:
    """The most decoder layers (at most ``cfg.n_layers``) of ``cfg``'s shapes whose float32
    weights and gradients plus the activations of one step (measured on ``meta``) fit in
    ``memory_bytes``; ``(0, cost)`` when not even one layer fits."""
    best, best_cost = 0, prover_step_cost(replace(cfg, n_layers=1), batch, seq_len)
    for layers in range(1, cfg.n_layers + 1):
        cost = prover_step_cost(replace(cfg, n_layers=layers), batch, seq_len)
        if cost.parameters * SGD_BYTES_PER_PARAMETER + cost.activation_bytes > memory_bytes:
            break
        best, best_cost = layers, cost
    return best, best_cost


def run_cpu_step(cfg: LlamaConfig, batch: int = 1, seq_len: int = 256, lr: float = 1e-4,
                 seed: int = 0) -> dict[str, Any]:
    """Train ``cfg``'s model one step on the CPU (next-token loss, SGD): the loss before and
    after, the seconds of the step and the FLOPs torch counted while it ran. That count leaves
    out attention (the CPU's fused attention kernel has no entry in torch's FLOP table), which
    the count on ``meta`` has: 12 t² d per layer for t tokens of width d."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(seed)
    model = LlamaLM(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq_len + 1))
    counter = FlopCounterMode(display=False)
    start = time.perf_counter()
    with counter:
        loss = model.loss(ids)
        loss.backward()
    opt.step()
    seconds = time.perf_counter() - start
    with torch.no_grad():
        after = float(model.loss(ids))
    return {"parameters": sum(p.numel() for p in model.parameters()),
            "loss_before": float(loss), "loss_after": after, "seconds": seconds,
            "flops_counted": counter.get_total_flops()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=4096,
                        help="tokens per sequence of the 7B step counted on meta")
    parser.add_argument("--memory-gb", type=float, default=10.0,
                        help="budget of the real CPU step (weights, gradients, activations)")
    parser.add_argument("--cpu-seq-len", type=int, default=256)
    parser.add_argument("--no-run", action="store_true", help="count on meta only")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    full = prover_step_cost(PROVER_7B, 1, args.seq_len)
    out: dict[str, Any] = {
        "prover": PROVER_7B.to_dict(),
        "parameters": full.parameters, "parameters_by_hand": parameter_count(PROVER_7B),
        "step": {"batch": 1, "seq_len": args.seq_len, "flops": full.flops,
                 "flops_per_token": full.flops / args.seq_len,
                 "activation_bytes": full.activation_bytes, "method": full.method},
        "adam_state_bytes": full.parameters * 16,
    }
    layers, cost = largest_fitting_layers(args.memory_gb * 1e9, PROVER_7B, 1, args.cpu_seq_len)
    out["largest_that_fits"] = {"memory_budget_bytes": args.memory_gb * 1e9, "layers": layers,
                                "seq_len": args.cpu_seq_len, "parameters": cost.parameters,
                                "flops_meta": cost.flops,
                                "activation_bytes": cost.activation_bytes}
    if layers and not args.no_run:
        out["largest_that_fits"]["cpu_step"] = run_cpu_step(
            replace(PROVER_7B, n_layers=layers, max_seq_len=args.cpu_seq_len + 1), 1,
            args.cpu_seq_len)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
