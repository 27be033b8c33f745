"""Bound propagation for Sequential ReLU networks: IBP, CROWN-IBP and full CROWN.

CTBench (Mao, Balauca, Vechev, ICML 2025) certifies with a cascade of sound bound-propagation
methods. This module implements them for ``nn.Sequential`` networks of ``Normalize``, ``Conv2d``,
``Linear``, ``BatchNorm1d/2d``, ``ReLU`` and ``Flatten``:

- a network becomes a list of *ops* (:func:`network_ops`): affine maps (``LinearOp``,
  ``ConvOp``), per-channel affine maps (``ChannelAffineOp``: input normalisation and batch norm,
  folded to ``s*x + t``), ``ReluOp`` and ``FlattenOp``. Ops reference the module parameters, so
  bounds are differentiable (certified training back-propagates through them).
- **IBP** (Gowal et al. 2018): box as centre/radius, ``c' = Wc + b``, ``r' = |W| r``; ReLU maps
  ``[l, u]`` to ``[relu(l), relu(u)]``.
- **CROWN** (Zhang et al. 2018) backward pass: ``Λ·W`` for Linear, ``conv_transpose2d`` for Conv2d,
  ReLU relaxation (upper line ``u/(u−l)·(z−l)``, lower slope 1 if ``u > −l`` else 0), then
  concretisation over the input box ``Λ⁺·l + Λ⁻·u + bias``.
- **CROWN-IBP** (Zhang et al. 2020): intermediate ReLU bounds from IBP, the final margins from one
  CROWN backward pass. **Full CROWN** (:func:`crown`, auto_LiRPA's ``method="CROWN"``): every
  intermediate bound from its own backward pass with an identity specification, through the CROWN
  bounds of the earlier layers, with no IBP anywhere (memory ∝ neurons × input size: the batch is
  chunked). :func:`crown_intersect_ibp` is a variant that intersects every intermediate bound
  with IBP (sound, never looser than IBP layer by layer, but not plain CROWN).
- Specifications are margins ``C·f(x)`` with ``C`` row ``e_y − e_j`` (j ≠ y). ``C`` is folded
  into the last Linear layer (*final-layer elision*, ``W' = C W``, ``b' = C b``) before bounding.

A sample is certified if every lower bound of ``C·f(x')`` over the box is positive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class UnsupportedLayerError(TypeError):
    """A network contains a layer the bound propagation does not know."""


class BoundInputError(ValueError):
    """Bad input to a bound computation (non-finite values, ε < 0, wrong shapes)."""


class Normalize(nn.Module):
    """Per-channel input normalisation ``(x − mean)/std``: the first layer of every network, so
    that ε is measured in raw pixel units (the threat model ``B(x)`` lives in [0, 1] pixels)."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        if any(s <= 0 for s in std):
            raise ValueError(f"Normalize: std must be positive, got {list(std)}")
        self.register_buffer("mean", torch.tensor(list(mean), dtype=torch.float32))
        self.register_buffer("std", torch.tensor(list(std), dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return (x - self.mean.view(shape)) / self.std.view(shape)


# ----------------------------------------------------------------------------------- ops
def _bcast(v: Tensor, ndim: int) -> Tensor:
    """A per-channel vector shaped to broadcast over ``[B, C, ...]`` with ``ndim`` dims."""
    return v.view((1, -1) + (1,) * (ndim - 2))


class LinearOp:
    """``z = W x + b`` on ``[B, n]``."""

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        self.weight = weight
        self.bias = bias if bias is not None else torch.zeros(weight.shape[0],
                                                                dtype=weight.dtype,
                                                                device=weight.device)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def ibp(self, c: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(c, self.weight, self.bias), F.linear(r, self.weight.abs())

    def backward(self, lam: Tensor) -> tuple[Tensor, Tensor]:
        """``Λ`` over this op's output ``[B, S, out]`` -> (``Λ W``, ``Λ b``)."""
        return lam @ self.weight, lam @ self.bias

    def elide(self, spec: Tensor) -> LinearOp:
        """This layer with the specification matrix ``C`` folded in: per-sample ``W' = C W``,
        ``b' = C b``."""
        return _ElidedLinearOp(spec @ self.weight, spec @ self.bias)


class _ElidedLinearOp(LinearOp):
    """A per-sample Linear layer ``[B, S, n]`` (the last layer with the spec matrix folded in)."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.einsum("bsn,bn->bs", self.weight, x) + self.bias

    def ibp(self, c: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        return (torch.einsum("bsn,bn->bs", self.weight, c) + self.bias,
                torch.einsum("bsn,bn->bs", self.weight.abs(), r))

    def backward(self, lam: Tensor) -> tuple[Tensor, Tensor]:
        return lam @ self.weight, (lam @ self.bias.unsqueeze(-1)).squeeze(-1)


class ConvOp:
    """2-D convolution; ``in_shape`` (C, H, W) is needed to invert the shape in the backward pass."""

    def __init__(self, weight: Tensor, bias: Tensor | None, stride: tuple[int, int],
                 padding: tuple[int, int], in_shape: tuple[int, int, int]) -> None:
        self.weight, self.stride, self.padding = weight, stride, padding
        self.bias = bias if bias is not None else torch.zeros(weight.shape[0],
                                                                dtype=weight.dtype,
                                                                device=weight.device)
        self.in_shape = tuple(in_shape)
        c_out, _, kh, kw = weight.shape
        h = (in_shape[1] + 2 * padding[0] - kh) // stride[0] + 1
        w = (in_shape[2] + 2 * padding[1] - kw) // stride[1] + 1
        self.out_shape = (c_out, h, w)
        # transposed convolution gives back (h-1)*s - 2p + k rows: pad up to the input size
        self.output_padding = (in_shape[1] - ((h - 1) * stride[0] - 2 * padding[0] + kh),
                               in_shape[2] - ((w - 1) * stride[1] - 2 * padding[1] + kw))

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)

    def ibp(self, c: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        return (F.conv2d(c, self.weight, self.bias, self.stride, self.padding),
                F.conv2d(r, self.weight.abs(), None, self.stride, self.padding))

    def backward(self, lam: Tensor) -> tuple[Tensor, Tensor]:
        b, s = lam.shape[:2]
        flat = lam.reshape(b * s, *self.out_shape)
        back = F.conv_transpose2d(flat, self.weight, None, self.stride, self.padding,
                                  self.output_padding)
        bias = (lam.sum(dim=(-1, -2)) * self.bias).sum(-1)
        return back.reshape(b, s, *self.in_shape), bias


class ChannelAffineOp:
    """Per-channel ``s·x + t`` (input normalisation, batch norm with fixed statistics)."""

    def __init__(self, scale: Tensor, shift: Tensor) -> None:
        self.scale, self.shift = scale, shift

    def forward(self, x: Tensor) -> Tensor:
        return x * _bcast(self.scale, x.dim()) + _bcast(self.shift, x.dim())

    def ibp(self, c: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        return self.forward(c), r * _bcast(self.scale.abs(), r.dim())  # |s|: γ may be negative

    def backward(self, lam: Tensor) -> tuple[Tensor, Tensor]:
        shape = (1, 1, -1) + (1,) * (lam.dim() - 3)
        bias = lam * self.shift.view(shape)
        return lam * self.scale.view(shape), bias.flatten(2).sum(-1)


class FlattenOp:
    def __init__(self, in_shape: tuple[int, ...]) -> None:
        self.in_shape = tuple(in_shape)

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(1)

    def ibp(self, c: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        return c.flatten(1), r.flatten(1)

    def backward(self, lam: Tensor) -> tuple[Tensor, Tensor]:
        return lam.reshape(*lam.shape[:2], *self.in_shape), lam.new_zeros(lam.shape[:2])


class ReluOp:
    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(x)

    def ibp(self, c: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        lo, hi = torch.relu(c - r), torch.relu(c + r)
        return (hi + lo) / 2, (hi - lo) / 2

    @staticmethod
    def relaxation(lower: Tensor, upper: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """CROWN's linear relaxation: (lower slope, upper slope, upper intercept).

        Stable active: identity; stable inactive: zero; unstable: upper line through
        ``(l, 0)`` and ``(u, u)``, lower line ``α z`` with α = 1 if ``u > −l`` else 0.
        """
        active, inactive = lower >= 0, upper <= 0
        unstable = ~(active | inactive)
        width = torch.where(unstable, upper - lower, torch.ones_like(upper))
        up_slope = torch.where(unstable, upper / width, active.to(upper.dtype))
        up_icpt = torch.where(unstable, -upper * lower / width, torch.zeros_like(upper))
        lo_slope = torch.where(unstable, (upper > -lower).to(upper.dtype),
                               active.to(upper.dtype))
        return lo_slope, up_slope, up_icpt


Op = LinearOp | ConvOp | ChannelAffineOp | FlattenOp | ReluOp
SUPPORTED = (Normalize, nn.Linear, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.ReLU,
             nn.Flatten)


def check_supported(model: nn.Module) -> None:
    """Refuse networks the bound propagation cannot handle, naming the offending layer."""
    if not isinstance(model, nn.Sequential):
        raise UnsupportedLayerError(
            f"bound propagation needs an nn.Sequential network, got {type(model).__name__}")
    for idx, layer in enumerate(model):
        if not isinstance(layer, SUPPORTED):
            raise UnsupportedLayerError(
                f"layer {idx} ({type(layer).__name__}) is not supported by the bound "
                f"propagation; supported: {', '.join(t.__name__ for t in SUPPORTED)}")
        if isinstance(layer, nn.Flatten) and (layer.start_dim, layer.end_dim) != (1, -1):
            raise UnsupportedLayerError(f"layer {idx} (Flatten) must flatten dims 1..-1")
        if isinstance(layer, nn.Conv2d) and (layer.groups != 1 or layer.dilation != (1, 1)
                                             or layer.padding_mode != "zeros"
                                             or isinstance(layer.padding, str)):
            raise UnsupportedLayerError(
                f"layer {idx} (Conv2d) must use groups=1, dilation=1, numeric zero padding")
    if not isinstance(model[-1], nn.Linear):
        raise UnsupportedLayerError(
            f"the last layer must be Linear (the specification matrix is folded into it), got "
            f"{type(model[-1]).__name__}")


def bn_scale_shift(bn: nn.Module, mean: Tensor | None = None,
                   var: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Batch norm as ``s·x + t``: ``s = γ/√(σ²+eps)``, ``t = β − μ s``; running statistics unless
    ``mean``/``var`` (the clean batch's, in training) are given."""
    mu = bn.running_mean if mean is None else mean
    sigma2 = bn.running_var if var is None else var
    gamma = bn.weight if bn.affine else torch.ones_like(mu)
    beta = bn.bias if bn.affine else torch.zeros_like(mu)
    scale = gamma / torch.sqrt(sigma2 + bn.eps)
    return scale, beta - mu * scale


def network_ops(model: nn.Sequential, in_shape: Sequence[int],
                bn_stats: Sequence[tuple[Tensor, Tensor]] | None = None) -> list[Op]:
    """The ops of ``model`` for inputs of shape ``in_shape`` (without the batch dimension).

    ``bn_stats``: the clean batch's (mean, var) for each BatchNorm layer in order (training
    mode, see :func:`forward_with_bn_stats`); ``None`` uses the running statistics (evaluation).
    """
    check_supported(model)
    ops: list[Op] = []
    shape = tuple(in_shape)
    bn_index = 0
    for layer in model:
        if isinstance(layer, Normalize):
            ops.append(ChannelAffineOp(1.0 / layer.std, -layer.mean / layer.std))
        elif isinstance(layer, nn.Linear):
            if len(shape) != 1 or shape[0] != layer.in_features:
                raise BoundInputError(f"Linear expects {layer.in_features} inputs, got {shape}")
            ops.append(LinearOp(layer.weight, layer.bias))
            shape = (layer.out_features,)
        elif isinstance(layer, nn.Conv2d):
            if len(shape) != 3 or shape[0] != layer.in_channels:
                raise BoundInputError(f"Conv2d expects {layer.in_channels} channels, got {shape}")
            op = ConvOp(layer.weight, layer.bias, layer.stride, layer.padding, shape)
            ops.append(op)
            shape = op.out_shape
        elif isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d):
            stats = bn_stats[bn_index] if bn_stats is not None else (None, None)
            bn_index += 1
            ops.append(ChannelAffineOp(*bn_scale_shift(layer, *stats)))
        elif isinstance(layer, nn.Flatten):
            ops.append(FlattenOp(shape))
            shape = (int(torch.tensor(shape).prod()),)
        else:  # nn.ReLU
            ops.append(ReluOp())
    return ops


def forward_with_bn_stats(model: nn.Sequential, x: Tensor
                          ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
    """The clean forward pass (updating BN running stats in training mode as usual) and the
    batch statistics each BN layer normalised with; the box pass reuses them (as CTBench does)."""
    stats: list[tuple[Tensor, Tensor]] = []
    h = x
    for layer in model:
        if isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d) and layer.training:
            dims = [0] if h.dim() == 2 else [0, 2, 3]
            stats.append((h.mean(dims), h.var(dims, unbiased=False)))
        elif isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d):
            stats.append((layer.running_mean, layer.running_var))
        h = layer(h)
    return h, stats


# --------------------------------------------------------------------------- specifications
def margin_spec(labels: Tensor, num_classes: int) -> Tensor:
    """``C [B, K−1, K]``: row for each j ≠ y is ``e_y − e_j``."""
    labels.shape[0]
    eye = torch.eye(num_classes, device=labels.device)
    others = torch.stack([torch.cat([torch.arange(y), torch.arange(y + 1, num_classes)])
                          for y in labels.cpu().tolist()]).to(labels.device)
    return eye[labels].unsqueeze(1) - eye[others]  # [B, K-1, K]


#: The data domain of every image (pixels in [0, 1]); the threat model is clipped to it.
DATA_RANGE = (0.0, 1.0)


def input_box(x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """``B(x) = [max(x − ε, 0), min(x + ε, 1)]`` in pixel space; refuses ε < 0, NaN/inf and
    inputs outside the data domain (the clipped box would not contain them)."""
    if not isinstance(eps, int | float) or not eps >= 0 or eps != eps or eps == float("inf"):
        raise BoundInputError(f"eps: got {eps!r}; expected a finite number >= 0")
    check_finite(x, "input")
    check_domain(x, "input")
    lo, hi = DATA_RANGE
    return (x - eps).clamp(lo, hi), (x + eps).clamp(lo, hi)


def check_domain(x: Tensor, name: str, offset: int = 0) -> None:
    """Refuse samples with a value outside :data:`DATA_RANGE`, naming them (index + ``offset``):
    clipping their ε-box to the domain would give a box that does not contain the sample, and a
    "certificate" over it would say nothing about the sample itself."""
    lo, hi = DATA_RANGE
    flat = x.detach().reshape(x.shape[0], -1) if x.dim() > 1 else x.detach().reshape(-1, 1)
    bad = ((flat < lo) | (flat > hi)).any(1).nonzero().flatten().cpu().tolist()
    if bad:
        shown = ", ".join(str(i + offset) for i in bad[:10]) + (", ..." if len(bad) > 10 else "")
        raise BoundInputError(
            f"{name}: {len(bad)} sample(s) outside the data domain [{lo:g}, {hi:g}] (samples "
            f"{shown}; values in [{float(flat.min()):.4g}, {float(flat.max()):.4g}]); the "
            "ε-box is clipped to the domain, so it would not contain them: refusing to bound")


def check_finite(x: Tensor, name: str) -> None:
    if x.numel() == 0:
        raise BoundInputError(f"{name}: empty tensor {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise BoundInputError(f"{name}: {bad} non-finite values (NaN or inf); refusing to bound")


def _check_box(lower: Tensor, upper: Tensor) -> None:
    check_finite(lower, "lower bound of the input box")
    check_finite(upper, "upper bound of the input box")
    if lower.shape != upper.shape:
        raise BoundInputError(f"box bounds differ in shape: {lower.shape} vs {upper.shape}")
    if (lower > upper).any():
        raise BoundInputError("input box has lower > upper")


# ------------------------------------------------------------------------------------ IBP
@dataclass
class IBPResult:
    """Lower/upper output bounds and the pre-activation bounds of every ReLU, in op order."""

    lower: Tensor
    upper: Tensor
    relu_bounds: list[tuple[Tensor, Tensor]]
    input_radius: Tensor  # the box radius after the first op (normalisation), for R_fast


def ibp(ops: Sequence[Op], lower: Tensor, upper: Tensor, spec: Tensor | None = None
        ) -> IBPResult:
    """Interval bound propagation; with ``spec`` the output is ``C·f`` (elided last layer)."""
    _check_box(lower, upper)
    c, r = (upper + lower) / 2, (upper - lower) / 2
    relu_bounds, input_radius = [], None
    for idx, op in enumerate(ops):
        if spec is not None and idx == len(ops) - 1:
            op = op.elide(spec)
        if isinstance(op, ReluOp):
            relu_bounds.append((c - r, c + r))
        c, r = op.ibp(c, r)
        if idx == 0:
            input_radius = r
    return IBPResult(c - r, c + r, relu_bounds, input_radius)


# ---------------------------------------------------------------------------------- CROWN
def backward_lower(ops: Sequence[Op], lam: Tensor, lower: Tensor, upper: Tensor,
                   relu_bounds: dict[int, tuple[Tensor, Tensor]]) -> Tensor:
    """Sound lower bound of ``Λ · h`` over the input box, ``h`` the output of ``ops``.

    ``lam``: ``[B, S, *out_shape]``; ``relu_bounds[i]``: pre-activation bounds of the ReLU op
    ``ops[i]``. Returns ``[B, S]``.
    """
    bias = lam.new_zeros(lam.shape[:2])
    for idx in range(len(ops) - 1, -1, -1):
        op = ops[idx]
        if isinstance(op, ReluOp):
            lo, hi = relu_bounds[idx]
            lo_slope, up_slope, up_icpt = ReluOp.relaxation(lo.unsqueeze(1), hi.unsqueeze(1))
            pos, neg = lam.clamp(min=0), lam.clamp(max=0)
            bias = bias + (neg * up_icpt).flatten(2).sum(-1)
            lam = pos * lo_slope + neg * up_slope
        else:
            lam, b = op.backward(lam)
            bias = bias + b
    pos, neg = lam.clamp(min=0).flatten(2), lam.clamp(max=0).flatten(2)
    return (pos @ lower.flatten(1).unsqueeze(-1) + neg @ upper.flatten(1).unsqueeze(-1)
            ).squeeze(-1) + bias


def _identity_spec(x: Tensor) -> Tensor:
    """``[B, 2n, *shape]``: identity rows then their negatives (lower and upper bounds at once)."""
    b, n = x.shape[0], x[0].numel()
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    both = torch.cat([eye, -eye]).reshape(2 * n, *x.shape[1:])
    return both.unsqueeze(0).expand(b, *both.shape)


def _final_ops(ops: Sequence[Op], spec: Tensor | None) -> list[Op]:
    if spec is None:
        return list(ops)
    return [*ops[:-1], ops[-1].elide(spec)]


def _final_lam(ops: Sequence[Op], spec: Tensor | None, lower: Tensor) -> tuple[Tensor, bool]:
    """The starting ``Λ`` of the final backward pass, and whether it holds ±identity rows."""
    if spec is not None:
        return torch.eye(spec.shape[1], dtype=lower.dtype, device=lower.device
                         ).expand(lower.shape[0], -1, -1), False
    out = _shape_through(ops, lower)
    return _identity_spec(out), True


def _shape_through(ops: Sequence[Op], x: Tensor) -> Tensor:
    with torch.no_grad():
        for op in ops:
            x = op.forward(x[:1])
    return x


def crown_ibp(ops: Sequence[Op], lower: Tensor, upper: Tensor, spec: Tensor | None = None
              ) -> tuple[Tensor, Tensor | None]:
    """CROWN-IBP: IBP for the ReLU pre-activations, one CROWN pass for the output.

    With ``spec`` returns (lower bound of ``C·f``, None); without, (lower, upper) of ``f``.
    """
    _check_box(lower, upper)
    pre = ibp(ops, lower, upper)
    relu_idx = [i for i, op in enumerate(ops) if isinstance(op, ReluOp)]
    bounds = dict(zip(relu_idx, pre.relu_bounds, strict=True))
    final = _final_ops(ops, spec)
    lam, both = _final_lam(final, spec, lower)
    out = backward_lower(final, lam, lower, upper, bounds)
    if both:
        n = out.shape[1] // 2
        return out[:, :n], -out[:, n:]
    return out, None


def crown(ops: Sequence[Op], lower: Tensor, upper: Tensor, spec: Tensor | None = None,
          chunk: int = 16) -> tuple[Tensor, Tensor | None, list[tuple[Tensor, Tensor]]]:
    """Full (plain) CROWN as auto_LiRPA defines it: every ReLU's pre-activation bounds from its
    own backward linear relaxation through every earlier layer (identity specification), using
    the CROWN bounds of the earlier ReLUs only, and the output from a final backward pass. No
    interval bound enters anywhere. The batch is processed ``chunk`` samples at a time.

    Returns (lower, upper or None with ``spec``, per-ReLU pre-activation bounds).
    """
    return _crown(ops, lower, upper, spec, chunk, intersect_ibp=False)


def crown_intersect_ibp(ops: Sequence[Op], lower: Tensor, upper: Tensor,
                        spec: Tensor | None = None, chunk: int = 16
                        ) -> tuple[Tensor, Tensor | None, list[tuple[Tensor, Tensor]]]:
    """A CROWN variant: each ReLU's CROWN pre-activation bounds intersected with the IBP bounds
    propagated from the (tightened) earlier ones. Both are sound, so the intersection is too,
    and its intermediate bounds are never looser than IBP's; it is *not* plain CROWN (see
    :func:`crown`), whose intermediate bounds may be looser than IBP's on some neurons."""
    return _crown(ops, lower, upper, spec, chunk, intersect_ibp=True)


def _crown(ops, lower, upper, spec, chunk, intersect_ibp):
    _check_box(lower, upper)
    if chunk < 1:
        raise ValueError(f"chunk: got {chunk}; expected >= 1")
    parts = []
    for start in range(0, lower.shape[0], chunk):
        sl = slice(start, start + chunk)
        parts.append(_crown_chunk(ops, lower[sl], upper[sl],
                                  None if spec is None else spec[sl], intersect_ibp))
    lows = torch.cat([p[0] for p in parts])
    ups = None if spec is not None else torch.cat([p[1] for p in parts])
    n_relu = len(parts[0][2])
    relu_bounds = [(torch.cat([p[2][k][0] for p in parts]), torch.cat([p[2][k][1] for p in parts]))
                   for k in range(n_relu)]
    return lows, ups, relu_bounds


def _crown_chunk(ops, lower, upper, spec, intersect_ibp):
    bounds: dict[int, tuple[Tensor, Tensor]] = {}
    for idx, op in enumerate(ops):
        if not isinstance(op, ReluOp):
            continue
        sub = ops[:idx]
        probe = _shape_through(sub, lower)
        lam = _identity_spec(probe).expand(lower.shape[0], -1, *probe.shape[1:])
        out = backward_lower(sub, lam, lower, upper, bounds)
        n = out.shape[1] // 2
        lo, hi = out[:, :n].reshape(-1, *probe.shape[1:]), -out[:, n:].reshape(-1, *probe.shape[1:])
        if intersect_ibp:
            ibp_lo, ibp_hi = _ibp_at(ops, idx, lower, upper, bounds)
            lo, hi = torch.maximum(lo, ibp_lo), torch.minimum(hi, ibp_hi)
        bounds[idx] = (lo, hi)
    final = _final_ops(ops, spec)
    lam, both = _final_lam(final, spec, lower)
    out = backward_lower(final, lam, lower, upper, bounds)
    relu_bounds = [bounds[i] for i in sorted(bounds)]
    if both:
        n = out.shape[1] // 2
        return out[:, :n], -out[:, n:], relu_bounds
    return out, None, relu_bounds


def _ibp_at(ops, idx, lower, upper, bounds):
    """IBP bounds at the input of ``ops[idx]`` using the tightened ReLU bounds found so far."""
    c, r = (upper + lower) / 2, (upper - lower) / 2
    for j in range(idx):
        if j in bounds:
            lo, hi = bounds[j]
            lo, hi = torch.relu(lo), torch.relu(hi)
            c, r = (hi + lo) / 2, (hi - lo) / 2
        else:
            c, r = ops[j].ibp(c, r)
    return c - r, c + r
