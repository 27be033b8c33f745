"""Certified training: one loop, one ε schedule, the robust terms of each algorithm.

Objective (CTBench §3, shared by every certified method):
``L = (1−w)·CE(f(x), y) + w·ℓ_rob(x, ε_t) + λ_fast(t)·R_fast + λ_L1·Σ|W|`` with the robust term
of each method:

- ``standard``: no robust term (w = 0); ``pgd``: CE on PGD points (w = 1);
- ``ibp``: ``ℓ_rob = log(1 + Σ_j exp(ub(z_j − z_y)))`` with IBP margin bounds on ``B(x)``;
- ``crown_ibp``: the same loss on CROWN-IBP margin bounds (no loss fusion);
- ``sabr`` (Müller et al. 2023): IBP loss on a small box of radius ``λ·(ub−lb)/2`` centred at the
  PGD point (clipped to stay inside ``B(x)``);
- ``mtl_ibp`` (De Palma et al. 2024): ``κ·ℓ_IBP(B(x)) + (1−κ)·CE(f(x_adv))``, ``x_adv`` from PGD in
  the box of radius ``attack_range_scale·ε_t``.

Fast initialisation and the fast regulariser follow Shi et al. (2021); Adam with gradient-norm
clipping and MultiStepLR; BN statistics reset to population statistics after every epoch; the
model is selected on a validation split (the official code selects on the test set).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from icml25.pipelines.ctbench.attacks import pgd_attack
from icml25.pipelines.ctbench.bounds import (
    IBPResult,
    check_finite,
    crown_ibp,
    forward_with_bn_stats,
    ibp,
    input_box,
    margin_spec,
    network_ops,
)
from icml25.pipelines.ctbench.networks import (
    fast_init,
    has_batch_norm,
    l1_penalty,
    reset_bn_to_population,
)
from icml25.pipelines.ctbench.params import ALGORITHMS

CERTIFIED_METHODS = ("ibp", "crown_ibp", "sabr", "mtl_ibp")


# ------------------------------------------------------------------------------ schedule
def smooth_eps(step: int, eps: float, s0: int, s1: int) -> float:
    """CTBench's "smooth" ε schedule: 0 before ``s0``, a quartic rise up to
    ``m = s0 + ⌊0.25(s1−s0)⌋``, then linear to ``eps`` at ``s1`` (C¹ at ``m``)."""
    if step < s0 or eps == 0:
        return 0.0
    if step >= s1:
        return float(eps)
    m = s0 + math.floor(0.25 * (s1 - s0))
    if m == s0:  # ramp too short for the quartic part: linear
        return float(eps) * (step - s0) / (s1 - s0)
    a = eps / ((s1 - m) * 4 * (m - s0) ** 3 + (m - s0) ** 4)
    if step <= m:
        return a * (step - s0) ** 4
    at_m = a * (m - s0) ** 4
    return at_m + (eps - at_m) * (step - m) / (s1 - m)


# -------------------------------------------------------------------------------- losses
def robust_ce(margin_lower: Tensor) -> Tensor:
    """``CE([0, −lb_1 … −lb_{K−1}], 0) = log(1 + Σ_j exp(−lb_j))`` per sample (lb of
    ``z_y − z_j``)."""
    zeros = margin_lower.new_zeros(margin_lower.shape[0], 1)
    return torch.logsumexp(torch.cat([zeros, -margin_lower], dim=1), dim=1)


def fast_regularizer(result: IBPResult, tol: float = 0.5) -> Tensor:
    """R_fast of Shi et al. (2021) from IBP pre-activation bounds (``tol`` 0.5;
    non-finite terms are skipped)."""
    tau0 = result.input_radius.mean()
    terms = []
    for lo, hi in result.relu_bounds:
        tau = ((hi - lo) / 2).mean()
        tight = torch.relu(tol - tau0 / tau) / tol
        c = (hi + lo) / 2
        act, inact = (lo > 0).to(c.dtype), (hi < 0).to(c.dtype)
        m_a, m_i = (c * act).mean(), (c * inact).mean()
        cc = (c - c.mean()) ** 2
        v_a, v_i = (cc * act).sum(), (cc * inact).sum()
        relu_term = c.new_zeros(())
        for rho in (m_a / (-m_i), v_a / v_i):
            if torch.isfinite(rho) and rho > 0:
                rho = torch.minimum(rho, 1 / rho)
                relu_term = relu_term + torch.relu(tol - rho) / tol
            elif torch.isfinite(rho):
                relu_term = relu_term + torch.relu(tol - rho) / tol
        if torch.isfinite(tight):
            terms.append(tight + relu_term)
        else:
            terms.append(relu_term)
    if not terms:
        return tau0.new_zeros(())
    return torch.stack(terms).sum() / len(terms)


def sabr_box(x_adv: Tensor, lower: Tensor, upper: Tensor, shrink: float
             ) -> tuple[Tensor, Tensor]:
    """SABR's small box: radius ``ρ = λ(ub−lb)/2``, centre the PGD point clipped to
    ``[lb+ρ, ub−ρ]``, so the small box lies inside ``B(x)`` and has width ``λ(ub−lb)``."""
    rho = shrink * (upper - lower) / 2
    centre = torch.max(torch.min(x_adv, upper - rho), lower + rho)
    return centre - rho, centre + rho


# --------------------------------------------------------------------------- config/result
@dataclass
class MethodConfig:
    """One algorithm's settings (``ctbench.methods.<name>`` in the parameters)."""

    method: str
    robust_weight: float = 0.7
    l1: float = 0.0
    fast_init: bool = True
    fast_reg: float = 0.5
    eps_shrinkage: float = 0.4     # SABR λ
    ibp_coef: float = 0.1          # MTL-IBP κ
    attack_range_scale: float = 1.0
    train_steps: int = 5           # PGD steps for pgd / sabr / mtl_ibp
    restarts: int = 1


@dataclass
class TrainSetting:
    eps_train: float
    eps_test: float
    epochs: int
    batch_size: int
    ramp_start: int
    ramp_end: int
    milestones: tuple[int, ...]
    lr: float = 5e-4
    lr_decay: float = 0.2
    grad_clip: float = 10.0
    selection: str = "best_val"    # or "final"
    val_pgd_steps: int = 5


@dataclass
class TrainOutput:
    model: nn.Sequential
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    best_epoch: int = -1
    steps: int = 0


# ------------------------------------------------------------------------------- training
def method_loss(model: nn.Sequential, cfg: MethodConfig, x: Tensor, y: Tensor, eps: float,
                num_classes: int, in_shape: tuple[int, ...], lambda_fast: float,
                generator: torch.Generator) -> tuple[Tensor, dict[str, float]]:
    """The loss of one batch for ``cfg.method`` at the current ε (the objective above)."""
    logits, stats = forward_with_bn_stats(model, x)
    nat = F.cross_entropy(logits, y)
    info = {"nat_loss": nat.item()}
    if cfg.method == "standard":
        loss = nat
    elif cfg.method == "pgd":
        lower, upper = input_box(x, eps)
        x_adv = _attack(model, x, y, lower, upper, cfg, generator)
        loss = F.cross_entropy(model(x_adv), y) if eps > 0 else nat
    else:
        lower, upper = input_box(x, eps)
        spec = margin_spec(y, num_classes)
        ops = network_ops(model, in_shape, stats)
        box_result = None
        if cfg.method == "ibp":
            box_result = ibp(ops, lower, upper, spec)
            robust = robust_ce(box_result.lower).mean()
        elif cfg.method == "crown_ibp":
            margins, _ = crown_ibp(ops, lower, upper, spec)
            robust = robust_ce(margins).mean()
        elif cfg.method == "sabr":
            x_adv = _attack(model, x, y, lower, upper, cfg, generator) if eps > 0 else x
            lo_s, up_s = sabr_box(x_adv, lower, upper, cfg.eps_shrinkage)
            robust = robust_ce(ibp(ops, lo_s, up_s, spec).lower).mean()
        elif cfg.method == "mtl_ibp":
            box_result = ibp(ops, lower, upper, spec)
            lo_a, up_a = input_box(x, cfg.attack_range_scale * eps)
            x_adv = _attack(model, x, y, lo_a, up_a, cfg, generator) if eps > 0 else x
            adv = F.cross_entropy(model(x_adv), y)
            robust = cfg.ibp_coef * robust_ce(box_result.lower).mean() + (1 - cfg.ibp_coef) * adv
        else:
            raise ValueError(f"method: got {cfg.method!r}; expected one of {', '.join(ALGORITHMS)}")
        loss = (1 - cfg.robust_weight) * nat + cfg.robust_weight * robust
        info["robust_loss"] = robust.item()
        if lambda_fast > 0 and eps > 0:
            if box_result is None:
                box_result = ibp(ops, lower, upper)
            reg = fast_regularizer(box_result)
            loss = loss + lambda_fast * reg
            info["fast_reg"] = reg.item()
    if cfg.l1 > 0:
        loss = loss + cfg.l1 * l1_penalty(model)
    return loss, info


def _attack(model, x, y, lower, upper, cfg: MethodConfig, generator) -> Tensor:
    # BN nets are attacked in eval mode so adversarial batches never touch the running stats
    was = model.training
    if has_batch_norm(model):
        model.eval()
    try:
        return pgd_attack(model, x, y, lower, upper, steps=cfg.train_steps,
                          restarts=cfg.restarts, generator=generator).x_adv
    finally:
        model.train(was)


@torch.no_grad()
def ibp_certified(model: nn.Sequential, x: Tensor, y: Tensor, eps: float, num_classes: int,
                  batch_size: int = 500) -> Tensor:
    """Per-sample IBP certification (eval mode) — the model-selection criterion."""
    was = model.training
    model.eval()
    ops = network_ops(model, tuple(x.shape[1:]))
    out = []
    for start in range(0, len(x), batch_size):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        lower, upper = input_box(xb, eps)
        out.append(ibp(ops, lower, upper, margin_spec(yb, num_classes)).lower.min(1).values > 0)
    model.train(was)
    return torch.cat(out)


def _val_score(model, cfg: MethodConfig, setting: TrainSetting, x_val, y_val, num_classes,
               generator) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        nat = float((model(x_val).argmax(1) == y_val).float().mean())
    scores = {"val_nat": nat}
    if cfg.method in CERTIFIED_METHODS:
        scores["val_ibp_cert"] = float(ibp_certified(model, x_val, y_val, setting.eps_test,
                                                     num_classes).float().mean())
    elif cfg.method == "pgd":
        lower, upper = input_box(x_val, setting.eps_test)
        res = pgd_attack(model, x_val, y_val, lower, upper, steps=setting.val_pgd_steps,
                         generator=generator)
        scores["val_pgd"] = float((~res.broken).float().mean())
    model.train()
    return scores


def selection_key(method: str) -> str:
    if method in CERTIFIED_METHODS:
        return "val_ibp_cert"
    return "val_pgd" if method == "pgd" else "val_nat"


def train_certified(model: nn.Sequential, cfg: MethodConfig, setting: TrainSetting,
                    x_train: Tensor, y_train: Tensor, x_val: Tensor, y_val: Tensor,
                    num_classes: int, seed: int, progress: bool = True, desc: str = "",
                    callback: Callable[[dict[str, Any]], None] | None = None) -> TrainOutput:
    """Train ``model`` with ``cfg`` under ``setting``; returns the selected model and history."""
    for name, t in (("training images", x_train), ("validation images", x_val)):
        check_finite(t, name)
    if len(x_train) != len(y_train) or len(x_val) != len(y_val):
        raise ValueError("images and labels differ in length")
    # explicit generators only (no global RNG): seeds may train concurrently in threads
    gen = torch.Generator().manual_seed(seed)  # initialisation and batch order (CPU)
    attack_gen = torch.Generator(device=x_train.device).manual_seed(seed)
    if cfg.fast_init:
        fast_init(model, gen)
    in_shape = tuple(x_train.shape[1:])
    opt = torch.optim.Adam(model.parameters(), lr=setting.lr)
    n = len(x_train)
    nb = math.ceil(n / setting.batch_size)
    sched = torch.optim.lr_scheduler.MultiStepLR(
        opt, milestones=[m * nb for m in setting.milestones], gamma=setting.lr_decay)
    s0, s1 = setting.ramp_start * nb, setting.ramp_end * nb
    eps_train = setting.eps_train if cfg.method != "standard" else 0.0
    out = TrainOutput(model)
    best, best_state = -1.0, None
    key = selection_key(cfg.method)
    start_time = time.perf_counter()
    step = 0
    bar = tqdm(total=setting.epochs * nb, desc=desc or cfg.method, disable=not progress,
               leave=False)
    for epoch in range(setting.epochs):
        model.train()
        perm = torch.randperm(n, generator=gen).to(x_train.device)
        sums: dict[str, float] = {}
        for b in range(nb):
            idx = perm[b * setting.batch_size:(b + 1) * setting.batch_size]
            if len(idx) < 2 and has_batch_norm(model):
                continue
            eps = smooth_eps(step, eps_train, s0, s1)
            lam_fast = (cfg.fast_reg * (1 - eps / eps_train)
                        if eps_train > 0 and epoch < setting.ramp_end else 0.0)
            loss, info = method_loss(model, cfg, x_train[idx], y_train[idx], eps, num_classes,
                                     in_shape, lam_fast, attack_gen)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{desc or cfg.method}: loss became {float(loss)} at "
                                         f"step {step} (ε_t = {eps:.4f})")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), setting.grad_clip)
            if torch.isfinite(norm):
                opt.step()
            else:
                # a box narrower than float32 resolution (ε_t ~ 1e-11 at the start of the
                # ramp) can overflow the gradient of the relaxation slopes: skip that step
                sums["skipped_steps"] = sums.get("skipped_steps", 0.0) + nb
            sched.step()
            step += 1
            for k, v in {"loss": loss.item(), **info}.items():
                sums[k] = sums.get(k, 0.0) + v
            bar.update()
        reset_bn_to_population(model, x_train)
        eps_now = smooth_eps(step, eps_train, s0, s1)
        record = {"epoch": epoch + 1, "eps": eps_now, "lr": opt.param_groups[0]["lr"],
                  **{k: v / nb for k, v in sums.items()}}
        if setting.selection == "best_val" and (eps_now >= min(setting.eps_test, eps_train)
                                                or cfg.method == "standard"):
            record.update(_val_score(model, cfg, setting, x_val, y_val, num_classes,
                                      attack_gen))
            if record[key] >= best:
                best, best_state = record[key], copy.deepcopy(model.state_dict())
                out.best_epoch = epoch + 1
        out.history.append(record)
        bar.set_postfix(eps=f"{eps_now:.3f}", loss=f"{record['loss']:.3f}")
        if callback is not None:
            callback(record)
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    else:
        out.best_epoch = setting.epochs
    model.eval()
    out.seconds = time.perf_counter() - start_time
    out.steps = step
    return out


def to_tensors(images: np.ndarray, labels: np.ndarray) -> tuple[Tensor, Tensor]:
    return torch.as_tensor(images, dtype=torch.float32), torch.as_tensor(labels, dtype=torch.long)
