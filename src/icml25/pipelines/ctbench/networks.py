"""The networks CTBench trains, as ``nn.Sequential`` with input normalisation first.

- ``mlp``: Normalize → Flatten → [Linear(width) (BN) ReLU] × depth → Linear(K) (the CPU
  default of ``conf/base`` is 784-256-256-10).
- ``small_cnn``: Conv16 5×5 s2 p2 → ReLU → Conv32 4×4 s2 p1 → ReLU → Flatten → Linear(linear) →
  ReLU → Linear(K) (the small CPU CNN).
- ``cnn7``: CTBench's ``cnn_7layer_bn`` — [Conv3×3(w) BN ReLU] ×2 → Conv3×3 s2 (2w) BN ReLU →
  [Conv3×3(2w) BN ReLU] ×2 → Flatten → Linear(linear) BN ReLU → Linear(K), padding 1.

Fast initialisation (Shi et al. 2021, used by CTBench for every certified method): every
Conv/Linear weight except the last ~ N(0, (√(2π)/fan_in)²); biases and BN keep torch's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from icml25.pipelines.ctbench.bounds import Normalize
from icml25.pipelines.ctbench.params import NETWORKS


def build_network(name: str, in_shape: Sequence[int], num_classes: int, *, width: int = 256,
                  depth: int = 2, linear: int = 100, batch_norm: bool = False,
                  mean: Sequence[float] = (0.1307,), std: Sequence[float] = (0.3081,)
                  ) -> nn.Sequential:
    """A network by name for inputs ``in_shape`` = (C, H, W)."""
    c, h, w = in_shape
    layers: list[nn.Module] = [Normalize(mean, std)]
    if name == "mlp":
        layers.append(nn.Flatten())
        fan = c * h * w
        for _ in range(depth):
            layers.append(nn.Linear(fan, width))
            if batch_norm:
                layers.append(nn.BatchNorm1d(width))
            layers.append(nn.ReLU())
            fan = width
        layers.append(nn.Linear(fan, num_classes))
    elif name == "small_cnn":
        h1, w1 = (h + 4 - 5) // 2 + 1, (w + 4 - 5) // 2 + 1
        h2, w2 = (h1 + 2 - 4) // 2 + 1, (w1 + 2 - 4) // 2 + 1
        layers += [nn.Conv2d(c, 16, 5, stride=2, padding=2), nn.ReLU(),
                   nn.Conv2d(16, 32, 4, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                   nn.Linear(32 * h2 * w2, linear), nn.ReLU(), nn.Linear(linear, num_classes)]
    elif name == "cnn7":
        chans = [(c, width, 1), (width, width, 1), (width, 2 * width, 2),
                 (2 * width, 2 * width, 1), (2 * width, 2 * width, 1)]
        hh, ww = h, w
        for cin, cout, stride in chans:
            layers += [nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.BatchNorm2d(cout),
                       nn.ReLU()]
            hh, ww = (hh + 2 - 3) // stride + 1, (ww + 2 - 3) // stride + 1
        layers += [nn.Flatten(), nn.Linear(2 * width * hh * ww, linear), nn.BatchNorm1d(linear),
                   nn.ReLU(), nn.Linear(linear, num_classes)]
    else:
        raise ValueError(f"network: got {name!r}; expected one of {', '.join(NETWORKS)}")
    return nn.Sequential(*layers)


def fast_init(model: nn.Sequential, generator: torch.Generator | None = None) -> None:
    """Shi et al. (2021) IBP initialisation: std √(2π)/fan_in for all but the last weight."""
    layers = [m for m in model if isinstance(m, nn.Linear | nn.Conv2d)]
    with torch.no_grad():
        for layer in layers[:-1]:
            fan_in = layer.weight[0].numel()
            noise = torch.randn(layer.weight.shape, generator=generator)
            layer.weight.copy_(noise * (math.sqrt(2 * math.pi) / fan_in))


def l1_penalty(model: nn.Module) -> torch.Tensor:
    """Σ|W| over Conv/Linear weights only (not biases, not BN)."""
    terms = [m.weight.abs().sum() for m in model.modules() if isinstance(m, nn.Linear | nn.Conv2d)]
    return torch.stack(terms).sum()


def has_batch_norm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d) for m in model.modules())


@torch.no_grad()
def reset_bn_to_population(model: nn.Sequential, images: torch.Tensor,
                           batch_size: int = 512) -> None:
    """Replace BN running statistics by the population statistics of ``images``, as CTBench does
    after every epoch: exactly the statistics one training-mode pass over all of ``images`` at
    once (momentum None) would leave, computed ``batch_size`` images at a time.

    BN layer k gets the mean and the unbiased variance of its inputs over every image (sums
    accumulated in float64, so every chunk counts by its size, a short last one included), with
    the earlier BN layers normalising by their own full-population mean and (biased) variance,
    as they would in that single pass.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size: got {batch_size}; expected >= 1")
    positions = [i for i, m in enumerate(model) if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d)]
    nested = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d)]
    if len(nested) != len(positions):
        raise ValueError("reset_bn_to_population: batch norm layers must be direct children of "
                         "the nn.Sequential network")
    if not positions:
        return
    if len(images) < 2:
        raise ValueError(f"reset_bn_to_population: need at least 2 images, got {len(images)}")
    population: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # position -> (mean, biased var)
    counts: dict[int, int] = {}  # position -> values per channel

    def prefix(x: torch.Tensor, stop: int) -> torch.Tensor:
        for i in range(stop):
            layer = model[i]
            if i in population:
                mean, var = population[i]
                x = F.batch_norm(x, mean.to(x.dtype), var.to(x.dtype), layer.weight, layer.bias,
                                 False, 0.0, layer.eps)
            else:
                x = layer(x)
        return x

    was_training = model.training
    model.eval()  # Dropout etc. would not matter here; BN layers are handled explicitly
    for pos in positions:
        total = sq = None
        count = 0
        for start in range(0, len(images), batch_size):
            h = prefix(images[start:start + batch_size], pos).double()
            dims = [0] if h.dim() == 2 else [0, 2, 3]
            s, q = h.sum(dims), (h * h).sum(dims)
            total, sq = (s, q) if total is None else (total + s, sq + q)
            count += h.numel() // h.shape[1]
        mean = total / count
        var = (sq / count - mean * mean).clamp(min=0.0)
        population[pos] = (mean, var)
        counts[pos] = count
    for pos in positions:
        bn = model[pos]
        mean, var = population[pos]
        bn.reset_running_stats()
        bn.running_mean.copy_(mean.to(bn.running_mean.dtype))
        # torch's running variance is the unbiased one (n / (n − 1) times the batch variance)
        bn.running_var.copy_((var * counts[pos] / (counts[pos] - 1)).to(bn.running_var.dtype))
        bn.num_batches_tracked.fill_(1)
    model.train(was_training)
