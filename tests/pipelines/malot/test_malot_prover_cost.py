"""The 7B prover's training cost counted on meta (prover_cost.py, docs/scale.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from icml25.core.causal_lm import LlamaConfig, LlamaLM
from icml25.pipelines.malot.prover_cost import (
    PROVER_7B,
    SGD_BYTES_PER_PARAMETER,
    largest_fitting_layers,
    parameter_count,
    prover_step_cost,
    run_cpu_step,
)

TINY = LlamaConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=2, d_ff=24, max_seq_len=32)


@pytest.mark.parametrize("tie", [False, True])
def test_parameter_count_by_hand_is_the_module_s(tie):
    cfg = replace(TINY, tie_embeddings=tie)
    assert parameter_count(cfg) == LlamaLM(cfg).num_parameters()


def test_the_7b_prover_is_counted_on_meta_without_its_weights():
    cost = prover_step_cost(PROVER_7B, batch=1, seq_len=128)
    assert cost.parameters == parameter_count(PROVER_7B) == 6_910_365_696
    assert cost.method.startswith("measured: FlopCounterMode on the meta device")
    # matrix products: 6 FLOPs per token and weight of every layer and the head (the
    # embedding lookup is no product), plus attention's QK^T and AV, forward and backward
    dense = 6 * 128 * (PROVER_7B.n_layers * (4 * 4096**2 + 3 * 4096 * 11_008) + 102_400 * 4096)
    assert dense <= cost.flops <= 1.05 * dense


def test_meta_count_is_the_count_of_a_step_that_runs():
    cost = prover_step_cost(TINY, batch=1, seq_len=16)
    ran = run_cpu_step(TINY, batch=1, seq_len=16, lr=0.5)
    assert ran["parameters"] == cost.parameters
    # the CPU's fused attention kernel is not in torch's FLOP table; on meta attention runs as
    # matrix products: QK^T and AV, 4 t^2 d forward and twice that backward, per layer
    attention = 12 * 16**2 * TINY.d_model * TINY.n_layers
    assert ran["flops_counted"] + attention == cost.flops
    assert ran["loss_after"] < ran["loss_before"]


def test_largest_fitting_layers_respects_the_budget():
    per = [prover_step_cost(replace(TINY, n_layers=n), 1, 16) for n in (1, 2)]
    need = [c.parameters * SGD_BYTES_PER_PARAMETER + c.activation_bytes for c in per]
    assert largest_fitting_layers(need[0] - 1, TINY, 1, 16)[0] == 0
    assert largest_fitting_layers(need[0], TINY, 1, 16)[0] == 1
    assert largest_fitting_layers(need[1], TINY, 1, 16)[0] == 2
    assert largest_fitting_layers(1e18, TINY, 1, 16)[0] == TINY.n_layers
    with pytest.raises(ValueError, match="exceeds the model's max_seq_len"):
        prover_step_cost(TINY, 1, 64)
    assert torch.get_default_device().type == "cpu"  # the meta context does not leak
