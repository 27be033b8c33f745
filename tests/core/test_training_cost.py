"""Parameter, FLOP and activation counts of one training step against hand-computed values, and
the H100 arithmetic."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from icml25.core.training_cost import (
    ADAM_BYTES_PER_PARAMETER,
    H100_BF16_DENSE_FLOPS,
    count_parameters,
    h100_estimate,
    measure_training_step,
    steps_weighted_mean,
)

B, D_IN, D_HID, D_OUT = 5, 8, 16, 4


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_OUT))


def test_mlp_counts_match_the_hand_computed_ones():
    mlp = _mlp()
    cost = measure_training_step(mlp, (torch.randn(B, D_IN),))
    assert cost.method.startswith("measured") and "meta" in cost.method
    assert (cost.parameters, cost.trainable_parameters) == (
        D_IN * D_HID + D_HID + D_HID * D_OUT + D_OUT,) * 2
    # a Linear's forward is 2·B·in·out; its backward 2·B·in·out for the weight's gradient plus
    # 2·B·in·out for the input's (not for the first layer: the batch needs no gradient)
    forward = 2 * B * (D_IN * D_HID + D_HID * D_OUT)
    assert cost.forward_flops == forward
    assert cost.backward_flops == forward + 2 * B * D_HID * D_OUT
    # saved for backward: the batch (Linear 1) and ReLU's output (ReLU and Linear 2, once)
    assert cost.activation_bytes == 4 * (B * D_IN + B * D_HID)
    # the module itself is untouched: real weights, no gradients written
    assert all(p.device.type == "cpu" and p.grad is None for p in mlp.parameters())


def test_a_batch_that_needs_its_gradient_doubles_the_backward():
    cost = measure_training_step(_mlp(), (torch.randn(B, D_IN, requires_grad=True),))
    assert cost.backward_flops == 2 * cost.forward_flops


def test_a_tiny_transformer_matches_the_matmul_count():
    d, heads, ff, layers, batch, length = 32, 4, 64, 2, 3, 10
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    cost = measure_training_step(model, (torch.randn(batch, length, d, requires_grad=True),))
    tokens = batch * length
    per_layer = (2 * tokens * d * 3 * d          # q, k, v projections
                 + 2 * 2 * batch * heads * length * length * (d // heads)  # QKᵀ and A·V
                 + 2 * tokens * d * d            # output projection
                 + 2 * 2 * tokens * d * ff)      # the two feed-forward layers
    assert cost.forward_flops == layers * per_layer
    assert cost.backward_flops == 2 * cost.forward_flops
    n_params = layers * (3 * d * d + 3 * d + d * d + d + 2 * d * ff + ff + d + 4 * d)
    assert count_parameters(model) == (n_params, n_params)
    assert cost.activation_bytes > 4 * layers * tokens * d  # at least each layer's input


def test_shared_and_frozen_parameters_count_once_and_apart():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, shared, nn.Linear(4, 2))
    model[2].weight.requires_grad_(False)
    assert count_parameters(model) == (20 + 10, 20 + 2)


def test_an_op_without_a_meta_kernel_is_measured_on_the_cpu():
    class Picky(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            keep = torch.nonzero(x[:, 0] > -10).squeeze(1)  # a data-dependent shape
            return self.lin(x[keep])

    model = Picky()
    cost = measure_training_step(model, (torch.randn(7, 3),))
    assert "CPU" in cost.method and cost.forward_flops == 2 * 7 * 3 * 2
    assert model.lin.weight.grad is None
    with pytest.raises(RuntimeError, match="cannot measure Picky on meta"):
        measure_training_step(model, (torch.randn(7, 3),), allow_cpu=False)


def test_an_output_without_gradient_is_refused():
    with pytest.raises(ValueError, match="carries no gradient"):
        measure_training_step(nn.Embedding(3, 2).requires_grad_(False),
                              (torch.tensor([0, 1]),))


def test_h100_arithmetic():
    est = h100_estimate(flops_per_step=6e12, steps=10_000, parameters=10**9,
                        activation_bytes=20e9, mfu=0.4)
    assert est["seconds"] == pytest.approx(10_000 * 6e12 / (0.4 * H100_BF16_DENSE_FLOPS))
    assert est["memory_bytes"] == 10**9 * ADAM_BYTES_PER_PARAMETER + 20e9
    assert est["fits_memory"] is True
    assert "10,000 steps" in est["arithmetic"] and "40% × 989 TFLOP/s" in est["arithmetic"]
    big = h100_estimate(flops_per_step=1, steps=1, parameters=7 * 10**9, activation_bytes=0)
    assert big["fits_memory"] is False and "does NOT fit" in big["arithmetic"]
    with pytest.raises(ValueError, match="mfu"):
        h100_estimate(flops_per_step=1, steps=1, parameters=1, activation_bytes=0, mfu=0)


def test_steps_weighted_mean():
    assert steps_weighted_mean([(10.0, 1), (40.0, 3)]) == pytest.approx(32.5)
    assert steps_weighted_mean([]) == 0.0
