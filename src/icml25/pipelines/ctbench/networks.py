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
    """Replace BN running statistics by the population statistics of ``images`` (cumulative
    average, momentum None), as CTBench does after every epoch."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d)]
    if not bns:
        return
    was_training = model.training
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    for start in range(0, len(images), batch_size):
        chunk = images[start:start + batch_size]
        if len(chunk) > 1:
            model(chunk)
    for bn, momentum in zip(bns, momenta, strict=True):
        bn.momentum = momentum
    model.train(was_training)
