"""What one training step of a torch model costs, and what a whole training run would cost on one
H100-class GPU: parameters, FLOPs, activation memory, wall time and GPU memory.

Measured, not guessed, where torch allows: :func:`measure_training_step` runs the module's forward
and backward once on torch's ``meta`` device (tensors with shapes and no data, so a 7B model costs
no memory) under ``torch.utils.flop_counter.FlopCounterMode``, which counts the FLOPs of the
matrix products and convolutions (a multiply-add is 2 FLOPs; elementwise ops, norms and softmax
are not counted, a few per cent of a transformer's total). The activation memory is the bytes of
the tensors autograd saves for the backward pass (``torch.autograd.graph.saved_tensors_hooks``),
parameters excluded, at the dtype the step ran in. Where a module cannot run on ``meta`` (an op
without a meta kernel, a data-dependent shape), the same counting runs on the CPU with copies of
the parameters; ``StepCost.method`` says which.

:func:`h100_estimate` turns steps × FLOPs into seconds at a stated model FLOPs utilisation (MFU)
of the bf16 dense peak, and parameters + activations into GPU memory, and writes the arithmetic
out beside the result so that a reader can check it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

__all__ = [
    "ADAM_BYTES_PER_PARAMETER",
    "DEFAULT_MFU",
    "H100_BF16_DENSE_FLOPS",
    "H100_MEMORY_BYTES",
    "StepCost",
    "count_parameters",
    "h100_estimate",
    "measure_training_step",
]

#: NVIDIA H100 SXM, bf16 tensor-core peak without structured sparsity, FLOP/s
H100_BF16_DENSE_FLOPS = 989e12
#: one 80 GB H100 (decimal gigabytes, as the card is sold)
H100_MEMORY_BYTES = 80e9
#: a sustained model FLOPs utilisation that well-tuned single-GPU training reaches
DEFAULT_MFU = 0.40
#: mixed-precision Adam: fp32 weights (4) + fp32 gradients (4) + Adam's two moments (4 + 4)
ADAM_BYTES_PER_PARAMETER = 16


def count_parameters(module: nn.Module) -> tuple[int, int]:
    """``(all, trainable)`` parameter counts; a parameter shared by two layers counts once."""
    seen: dict[int, nn.Parameter] = {id(p): p for p in module.parameters()}
    total = sum(p.numel() for p in seen.values())
    trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
    return total, trainable


@dataclass(frozen=True)
class StepCost:
    """One forward + backward pass of a module on one batch."""

    parameters: int
    trainable_parameters: int
    forward_flops: int
    backward_flops: int
    activation_bytes: int
    method: str
    dtype: str = "float32"
    input_shapes: list[Any] = field(default_factory=list)

    @property
    def flops(self) -> int:
        """FLOPs of the training step (forward + backward; the optimizer update is not counted:
        a few FLOPs per parameter, negligible beside 6 per parameter per token)."""
        return self.forward_flops + self.backward_flops

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flops": self.flops}


def _shape_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return [list(value.shape), str(value.dtype).removeprefix("torch.")]
    if isinstance(value, Mapping):
        return {str(k): _shape_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shape_tree(v) for v in value]
    return repr(value) if not isinstance(value, int | float | bool | str | None) else value


def map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, Mapping):
        return type(value)({k: map_tensors(v, fn) for k, v in value.items()}) \
            if isinstance(value, dict) else {k: map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(map_tensors(v, fn) for v in value))
    if isinstance(value, list | tuple):
        return type(value)(map_tensors(v, fn) for v in value)
    return value


def _grad_outputs(value: Any) -> list[torch.Tensor]:
    """The floating tensors of a module's output that carry a gradient."""
    found: list[torch.Tensor] = []
    if isinstance(value, torch.Tensor):
        if value.requires_grad and value.is_floating_point():
            found.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            found += _grad_outputs(item)
    elif isinstance(value, list | tuple):
        for item in value:
            found += _grad_outputs(item)
    elif hasattr(value, "__dict__"):  # a dataclass or model-output object
        for item in vars(value).values():
            found += _grad_outputs(item)
    return found


def _as_meta(tensor: torch.Tensor) -> torch.Tensor:
    meta = torch.empty_like(tensor, device="meta")
    return meta.requires_grad_(tensor.requires_grad) if tensor.is_floating_point() else meta


def _run_step(module: nn.Module, tensors: dict[str, torch.Tensor], args: Sequence[Any],
              kwargs: Mapping[str, Any], autocast_dtype: torch.dtype | None
              ) -> tuple[int, int, int]:
    """Forward and backward of ``module`` with its parameters and buffers replaced by
    ``tensors``: (forward FLOPs, backward FLOPs, bytes saved for backward)."""
    from torch.func import functional_call

    own = {id(t) for t in tensors.values()}
    saved: dict[int, int] = {}
    keep: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        base = tensor._base if tensor._base is not None else tensor
        if id(base) not in own and id(tensor) not in own and id(base) not in saved:
            saved[id(base)] = base.numel() * base.element_size()
            keep.append(base)  # ids stay unique while the step runs
        return tensor

    device_type = next(iter(tensors.values())).device.type if tensors else "cpu"
    autocast = (torch.autocast(device_type="cpu", dtype=autocast_dtype)
                if autocast_dtype is not None and device_type == "cpu" else None)
    forward = FlopCounterMode(display=False)
    with torch.enable_grad(), forward, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if autocast is not None:
            with autocast:
                output = functional_call(module, tensors, tuple(args), dict(kwargs))
        else:
            output = functional_call(module, tensors, tuple(args), dict(kwargs))
    grads = _grad_outputs(output)
    if not grads:
        raise ValueError(f"{type(module).__name__}'s output carries no gradient: nothing to "
                         "train in this call")
    backward = FlopCounterMode(display=False)
    with backward:
        torch.autograd.backward([g.float().sum() for g in grads])
    return forward.get_total_flops(), backward.get_total_flops(), sum(saved.values())


def measure_training_step(module: nn.Module, args: Sequence[Any] = (),
                          kwargs: Mapping[str, Any] | None = None, *,
                          autocast_dtype: torch.dtype | None = None,
                          allow_cpu: bool = True) -> StepCost:
    """FLOPs and activation memory of one forward + backward of ``module(*args, **kwargs)``.

    The module is not changed (its parameters are swapped for meta tensors by
    ``torch.func.functional_call``; no gradient is written into it). The backward pass is that of
    the sum of the output's floating tensors that carry a gradient, so a loss computed outside
    the module is not counted. ``autocast_dtype`` (e.g. ``torch.bfloat16``) runs the CPU fallback
    under autocast; on ``meta`` there is no autocast, so activations are counted at the
    parameters' dtype (an upper bound for a bf16-autocast run)."""
    kwargs = dict(kwargs or {})
    total, trainable = count_parameters(module)
    named = {**dict(module.named_parameters(remove_duplicate=False)),
             **dict(module.named_buffers(remove_duplicate=False))}
    dtype = next((str(p.dtype).removeprefix("torch.") for p in module.parameters()), "float32")
    shapes = _shape_tree([list(args), kwargs])
    errors = []
    try:
        meta = {name: _as_meta(t) if not isinstance(t, nn.Parameter)
                else torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)
                for name, t in named.items()}
        flops = _run_step(module, meta, map_tensors(args, _as_meta),
                          map_tensors(kwargs, _as_meta), None)
        return StepCost(total, trainable, flops[0], flops[1], flops[2],
                        "measured: FlopCounterMode on the meta device", dtype, shapes)
    except Exception as exc:  # an op without a meta kernel, a data-dependent shape
        errors.append(f"meta: {type(exc).__name__}: {exc}")
        if not allow_cpu:
            raise RuntimeError(f"cannot measure {type(module).__name__} on meta: {exc}") from exc
    copies = {name: t.detach().clone().requires_grad_(t.requires_grad)
              if isinstance(t, nn.Parameter) else t for name, t in named.items()}
    cpu_args = map_tensors(args, lambda t: t.detach())
    cpu_kwargs = map_tensors(kwargs, lambda t: t.detach())
    flops = _run_step(module, copies, cpu_args, cpu_kwargs, autocast_dtype)
    under = f", under {str(autocast_dtype).removeprefix('torch.')} autocast" if autocast_dtype else ""
    return StepCost(total, trainable, flops[0], flops[1], flops[2],
                    f"measured: FlopCounterMode on the CPU{under} ({errors[0][:160]})",
                    str(autocast_dtype).removeprefix("torch.") if autocast_dtype else dtype,
                    shapes)


def _human(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def h100_estimate(*, flops_per_step: float, steps: int, parameters: int,
                  activation_bytes: float, mfu: float = DEFAULT_MFU,
                  peak_flops: float = H100_BF16_DENSE_FLOPS,
                  bytes_per_parameter: float = ADAM_BYTES_PER_PARAMETER,
                  memory_bytes: float = H100_MEMORY_BYTES) -> dict[str, Any]:
    """Wall time and GPU memory of ``steps`` training steps on one H100, with the arithmetic.

    seconds = steps × FLOPs/step ÷ (MFU × peak); memory = parameters × bytes/parameter (weights,
    gradients, Adam moments) + activation bytes of one step (the training batch's saved tensors).
    Data loading, evaluation and checkpointing are not in it."""
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu: got {mfu!r}; expected a fraction in (0, 1]")
    if steps < 0 or flops_per_step < 0 or parameters < 0 or activation_bytes < 0:
        raise ValueError("steps, flops_per_step, parameters and activation_bytes must be >= 0")
    sustained = mfu * peak_flops
    seconds = steps * flops_per_step / sustained
    state = parameters * bytes_per_parameter
    memory = state + activation_bytes
    arithmetic = (
        f"time = {steps:,} steps × {_human(flops_per_step, 'FLOP')}/step ÷ "
        f"({mfu:.0%} × {_human(peak_flops, 'FLOP/s')}) = {_human(steps * flops_per_step, 'FLOP')} "
        f"÷ {_human(sustained, 'FLOP/s')} = {seconds:,.0f} s ({seconds / 3600:.3g} h); "
        f"memory = {parameters:,} params × {bytes_per_parameter:g} B + "
        f"{_human(activation_bytes, 'B')} activations = {_human(memory, 'B')} "
        f"({'fits' if memory <= memory_bytes else 'does NOT fit'} in {_human(memory_bytes, 'B')})")
    return {"seconds": seconds, "hours": seconds / 3600, "memory_bytes": memory,
            "fits_memory": memory <= memory_bytes, "mfu": mfu, "peak_flops": peak_flops,
            "bytes_per_parameter": bytes_per_parameter, "steps": steps,
            "flops_per_step": flops_per_step, "arithmetic": arithmetic}


def steps_weighted_mean(costs: Iterable[tuple[float, int]]) -> float:
    """Σ FLOPs_i × steps_i ÷ Σ steps_i over ``(flops per step, steps)`` pairs (0 when empty)."""
    pairs = list(costs)
    steps = sum(s for _f, s in pairs)
    return sum(f * s for f, s in pairs) / steps if steps else 0.0

