"""PGD attack in an L∞ box, as CTBench uses it for training (PGD-AT, SABR, MTL-IBP) and
evaluation (one attack shared by both).

Random uniform start in the box, sign-gradient steps of size ``max(0.25, 2/steps)·(ub−lb)/2``,
step-size decay (×0.2 every 10 steps below 20 steps; ×0.1 at 70% for 20–49 steps; ×0.1 at 50%,
80% and 90% from 50 steps), restarts; the per-sample worst cross-entropy point over all steps and
restarts is kept, and any misclassified iterate marks the sample as broken.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class AttackResult:
    x_adv: Tensor       # worst-CE point per sample (inside the box)
    broken: Tensor      # bool per sample: some iterate was misclassified
    worst_loss: Tensor  # CE at x_adv


def step_scale(step: int, steps: int) -> float:
    """Multiplier of the base step size at iteration ``step`` (0-based) of ``steps``."""
    if steps < 20:
        return 0.2 ** (step // 10)
    if steps < 50:
        return 0.1 if step >= int(0.7 * steps) else 1.0
    return 0.1 ** sum(step >= int(f * steps) for f in (0.5, 0.8, 0.9))


def pgd_attack(model: nn.Module, x: Tensor, y: Tensor, lower: Tensor, upper: Tensor, *,
               steps: int, restarts: int = 1, generator: torch.Generator | None = None
               ) -> AttackResult:
    """Maximise the cross-entropy of ``model`` over the box ``[lower, upper]``.

    The model's train/eval mode is left as it is (training attacks run in eval mode for BN nets,
    see ``certified_training``); parameters receive no gradient.
    """
    if steps < 1 or restarts < 1:
        raise ValueError(f"pgd_attack: steps {steps} and restarts {restarts} must be >= 1")
    requires = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        best_x = x.detach().clone().clamp(lower, upper)
        with torch.no_grad():
            out = model(best_x)
            best_loss = F.cross_entropy(out, y, reduction="none")
            broken = out.argmax(1) != y
        base = torch.clamp(max(0.25, 2.0 / steps) * (upper - lower) / 2, min=0.0)
        for _ in range(restarts):
            noise = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            xa = (lower + noise * (upper - lower)).detach()
            for step in range(steps):
                xa.requires_grad_(True)
                out = model(xa)
                loss = F.cross_entropy(out, y, reduction="none")
                grad, = torch.autograd.grad(loss.sum(), xa)
                with torch.no_grad():
                    better = loss.detach() > best_loss
                    best_loss = torch.where(better, loss.detach(), best_loss)
                    best_x[better] = xa.detach()[better]
                    broken |= out.argmax(1) != y
                    xa = (xa + step_scale(step, steps) * base * grad.sign())
                    xa = torch.max(torch.min(xa, upper), lower).detach()
            with torch.no_grad():
                out = model(xa)
                loss = F.cross_entropy(out, y, reduction="none")
                better = loss > best_loss
                best_loss = torch.where(better, loss, best_loss)
                best_x[better] = xa[better]
                broken |= out.argmax(1) != y
    finally:
        for p, r in zip(model.parameters(), requires, strict=True):
            p.requires_grad_(r)
    return AttackResult(best_x.detach(), broken, best_loss)
