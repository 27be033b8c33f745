"""FRUGAL and its baselines as ``torch.optim.Optimizer`` classes (``docs/papers/frugal.md``).

* :class:`Frugal` — full-rank updates with gradient splitting (Zmushko et al., ICML 2025,
  Algorithm 1; official code github.com/fzmushko/FRUGAL, read for semantics only). Each
  projectable weight's gradient ``G`` is split into a state-full part ``P(G)`` updated by AdamW in
  the subspace and a state-free residual ``G - P^{-1}(P(G))`` updated by signSGD (or SGD, or not
  at all); the subspace is re-chosen every ``update_gap`` steps. With ``projector: svd``,
  ``state_free: no``, ``state_on_refresh: keep`` and ``proj_lr_scale`` = GaLore's scale it is
  GaLore-AdamW (Zhao et al., ICML 2024).
* :class:`BlockAdam` — the BAdam baseline (Luo et al., 2024; the ``badam`` package is not
  installed here): Adam on one block of consecutive transformer layers at a time, switched
  every ``switch_every`` steps in descending order, inactive blocks frozen; embeddings, norms and
  the output layer always trained by Adam.
* :class:`SignSGD` — every parameter moves by ``-lr·sign(g)`` (the stateless extreme).
* :func:`split_parameters` — the official ``prepare_proj_params`` split; :func:`state_floats`
  — optimiser memory counted from ``optimizer.state``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import torch
from torch import nn

from icml25.pipelines.frugal.projectors import (
    MATRIX_PROJECTORS,
    BlockOrder,
    ProjectorKind,
    block_active_set,
    make_projector,
    project,
    project_back,
    project_squared,
)

StateFree = Literal["sign_sgd", "sgd", "no"]
StateOnRefresh = Literal["reset", "keep", "reproject"]
StateFull = Literal["adamw", "sgdm"]
NamedParams = list[tuple[str, nn.Parameter]]

def _check_density(density: float, name: str = "density") -> None:
    if not isinstance(density, int | float) or not 0.0 <= float(density) <= 1.0:
        raise ValueError(f"{name}: got {density!r}; expected a number in [0, 1]")


def _check_gap(update_gap: int, name: str = "update_gap") -> None:
    if isinstance(update_gap, bool) or not isinstance(update_gap, int) or update_gap < 1:
        raise ValueError(f"{name}: got {update_gap!r}; expected an integer >= 1")


def split_parameters(
    model: nn.Module, *, blocks: str = "layers", logits: str = "lm_head",
    proj_embeds: bool = False, proj_norms: bool = False, proj_logits: bool = False,
) -> tuple[NamedParams, NamedParams]:
    """``(regular, projectable)`` named parameters (official ``prepare_proj_params``).

    Projectable: the weights of every ``nn.Linear`` inside the transformer blocks
    (``<blocks>.*``: q, k, v, o, gate, up, down). Regular: everything else (token embeddings,
    RMSNorm weights, the output layer ``<logits>``). The ``proj_*`` flags move embeddings
    (``nn.Embedding``), norms (1-D weights) or the logits layer into the projectable set
    (for the block projector; the ablation of a state-free logits layer). The order is the
    official one, which the block order walks: the block weights in model order, then the moved
    parameters in model order.
    """
    linear_in_blocks: set[str] = set()
    embeddings: set[str] = set()
    for mod_name, module in model.named_modules():
        if isinstance(module, nn.Linear) and mod_name.startswith(f"{blocks}."):
            linear_in_blocks.add(f"{mod_name}.weight")
        if isinstance(module, nn.Embedding):
            embeddings.add(f"{mod_name}.weight")
    regular, projectable, moved = [], [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name in linear_in_blocks:
            projectable.append((name, param))
        elif ((proj_embeds and name in embeddings) or (proj_norms and param.ndim == 1)
              or (proj_logits and name.startswith(f"{logits}."))):
            moved.append((name, param))
        else:
            regular.append((name, param))
    projectable += moved
    if not projectable:
        raise ValueError(f"no projectable parameters: no nn.Linear under {blocks!r}")
    return regular, projectable


def state_floats(optimizer: torch.optim.Optimizer) -> int:
    """Floating-point numbers held in ``optimizer.state`` (moments and projection matrices).

    Step counters (key ``step``) and integer index tensors are not floats of state and are
    left out, so for ``torch.optim.AdamW`` this is exactly ``2·N``.
    """
    total = 0
    for state in optimizer.state.values():
        if not isinstance(state, dict):
            continue
        for key, value in state.items():
            if key == "step" or not isinstance(value, torch.Tensor):
                continue
            if value.is_floating_point():
                total += value.numel()
    return total


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in ``optimizer.state`` (floats, indices and counters)."""
    return sum(v.numel() * v.element_size() for s in optimizer.state.values()
               if isinstance(s, dict) for v in s.values() if isinstance(v, torch.Tensor))


def _adam_update(state: dict, grad: torch.Tensor, lr: float, betas: tuple[float, float],
                 eps: float) -> torch.Tensor:
    """The Adam step ``-lr·m̂/(√v̂ + ε)`` in ``torch.optim.Adam``'s arithmetic."""
    beta1, beta2 = betas
    if "exp_avg" not in state:
        state["exp_avg"] = torch.zeros_like(grad)
        state["exp_avg_sq"] = torch.zeros_like(grad)
        state["step"] = 0
    state["step"] += 1
    step = state["step"]
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias1 = 1 - beta1**step
    bias2_sqrt = math.sqrt(1 - beta2**step)
    denom = (exp_avg_sq.sqrt() / bias2_sqrt).add_(eps)
    return exp_avg.div(denom).mul_(-lr / bias1)


def _sgdm_update(state: dict, grad: torch.Tensor, lr: float, momentum: float) -> torch.Tensor:
    """Heavy-ball momentum SGD (the theory variant FRUGAL(SGDM, SGD)): ``-lr·m``."""
    if "momentum_buffer" not in state:
        state["momentum_buffer"] = grad.clone()
        state["step"] = 0
    else:
        state["momentum_buffer"].mul_(momentum).add_(grad)
    state["step"] += 1
    return state["momentum_buffer"] * (-lr)


_MOMENT_KEYS = ("exp_avg", "exp_avg_sq", "momentum_buffer")


class Frugal(torch.optim.Optimizer):
    """FRUGAL: state-full subspace + state-free residual, refreshed every T steps.

    Args:
        regular: named parameters always trained by the state-full rule (embeddings, norms,
            logits layer by default).
        projectable: named parameters whose gradients are split.
        lr: base learning rate ``η`` (the scheduler changes every group's ``lr``).
        density: ``ρ`` in [0, 1] — fraction of tensors (block), rank fraction (svd, random,
            randperm) or entry fraction (randk) that is state-full.
        update_gap: ``T >= 1``; the subspace is re-chosen when ``k % T == 0``.
        projector: ``block | svd | random | randperm | randk``.
        state_free: rule for the residual: ``sign_sgd`` (``-η_0·sign``), ``sgd`` (``-η_0·g``),
            ``no`` (no update: GaLore / BAdam-like).
        inactive_lr_scale: ``η_0 = η_f · inactive_lr_scale``.
        proj_lr_scale: ``η_f = η · proj_lr_scale`` (GaLore's "scale").
        state_on_refresh: ``reset`` (zero moments, step 0; official FRUGAL), ``keep`` (GaLore:
            moments and step counter carried over) or ``reproject`` (``s ← P_k(P_{k-1}^{-1}(s))``).
        block_order: order of the block projector (``descending`` in the official scripts).
        state_full: ``adamw`` (default) or ``sgdm`` (the convergence-theory variant).
        seed: seeds the random projectors and the random block order.
    """

    def __init__(
        self,
        regular: Iterable[tuple[str, nn.Parameter]],
        projectable: Iterable[tuple[str, nn.Parameter]],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        density: float = 0.25,
        update_gap: int = 200,
        projector: ProjectorKind = "block",
        state_free: StateFree = "sign_sgd",
        inactive_lr_scale: float = 1.0,
        proj_lr_scale: float = 1.0,
        state_on_refresh: StateOnRefresh = "reset",
        block_order: BlockOrder = "descending",
        state_full: StateFull = "adamw",
        momentum: float = 0.9,
        seed: int = 0,
    ) -> None:
        _check_density(density)
        _check_gap(update_gap)
        if lr <= 0:
            raise ValueError(f"lr: got {lr!r}; expected > 0")
        if projector not in ("block", *MATRIX_PROJECTORS, "randk"):
            raise ValueError(f"projector: got {projector!r}; expected block, svd, random, "
                             "randperm or randk")
        if state_free not in ("sign_sgd", "sgd", "no"):
            raise ValueError(f"state_free: got {state_free!r}; expected sign_sgd, sgd or no")
        if state_on_refresh not in ("reset", "keep", "reproject"):
            raise ValueError(f"state_on_refresh: got {state_on_refresh!r}; "
                             "expected reset, keep or reproject")
        if state_full not in ("adamw", "sgdm"):
            raise ValueError(f"state_full: got {state_full!r}; expected adamw or sgdm")
        regular, projectable = list(regular), list(projectable)
        if projector in MATRIX_PROJECTORS:
            bad = [f"{n} {tuple(p.shape)}" for n, p in projectable if p.ndim != 2]
            if bad:
                raise ValueError(
                    f"projector {projector!r} splits matrices only; cannot split "
                    f"{', '.join(bad)} (use projector block or randk, or keep them regular)")
        if not projectable:
            raise ValueError("projectable: empty; FRUGAL needs at least one parameter to split")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        projectable=False, names=[], k=0)
        groups: list[dict[str, Any]] = []
        if regular:
            groups.append({"params": [p for _, p in regular], "names": [n for n, _ in regular],
                           "projectable": False})
        groups.append({"params": [p for _, p in projectable],
                       "names": [n for n, _ in projectable], "projectable": True})
        super().__init__(groups, defaults)
        self.density = float(density)
        self.update_gap = update_gap
        self.projector = projector
        self.state_free = state_free
        self.inactive_lr_scale = inactive_lr_scale
        self.proj_lr_scale = proj_lr_scale
        self.state_on_refresh = state_on_refresh
        self.block_order = block_order
        self.state_full = state_full
        self.momentum = momentum
        self.seed = seed
        self._generator = torch.Generator().manual_seed(seed)

    # ------------------------------------------------------------------ bookkeeping
    @property
    def projectable_params(self) -> list[nn.Parameter]:
        return [p for g in self.param_groups if g["projectable"] for p in g["params"]]

    def active_blocks(self, refresh: int) -> list[int]:
        """Indices (into :attr:`projectable_params`) state-full in refresh period ``refresh``."""
        return block_active_set(len(self.projectable_params), self.density, refresh,
                                self.block_order, self.seed)

    def _state_full_step(self, state: dict, grad: torch.Tensor, lr: float,
                         group: dict) -> torch.Tensor:
        if self.state_full == "sgdm":
            return _sgdm_update(state, grad, lr, self.momentum)
        return _adam_update(state, grad, lr, group["betas"], group["eps"])

    def _refresh(self, refresh: int) -> None:
        """Choose the next subspace of every projectable tensor and handle its moments."""
        active = set(self.active_blocks(refresh)) if self.projector == "block" else None
        for i, p in enumerate(self.projectable_params):
            state = self.state[p]
            old = {k: v for k, v in state.items() if k.startswith("proj_")}
            if self.projector == "block":
                new = {"proj_kind": "identity" if i in active else "none"}
            elif p.grad is None:
                continue
            else:
                new = make_projector(self.projector, p.grad.detach(), self.density,
                                     self._generator)
            moments = {k: state[k] for k in _MOMENT_KEYS if k in state}
            was_active = old.get("proj_kind") not in (None, "none")
            for k in [*old, *moments]:
                del state[k]
            state.update(new)
            if new["proj_kind"] == "none":
                state.pop("step", None)  # an inactive block keeps no state at all
                continue
            if not moments or not was_active or self.state_on_refresh == "reset":
                state["step"] = 0
            elif self.state_on_refresh == "keep":
                state.update(moments)  # GaLore: same shapes, moments and counter kept
            else:  # reproject s ← P_k(P_{k-1}^{-1}(s))
                for key, value in moments.items():
                    if key == "exp_avg_sq":
                        state[key] = project_squared(old, value, p, new).clamp_min_(0)
                    else:
                        state[key] = project(new, project_back(old, value, p))

    # ------------------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        k = self.param_groups[0]["k"]
        if k % self.update_gap == 0:
            self._refresh(k // self.update_gap)
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if wd:
                    p.mul_(1 - lr * wd)  # decoupled weight decay before the update
                state = self.state[p]
                if not group["projectable"]:
                    p.add_(self._state_full_step(state, grad, lr, group))
                    continue
                if "proj_kind" not in state:  # first gradient after a refresh it missed
                    self._refresh_one(p, state)
                lr_full = lr * self.proj_lr_scale
                lr_free = lr_full * self.inactive_lr_scale
                kind = state["proj_kind"]
                if kind == "identity":
                    p.add_(self._state_full_step(state, grad, lr_full, group))
                    continue
                if kind == "none":
                    residual = grad
                else:
                    low = project(state, grad)
                    full = project_back(state, low, grad)
                    if low.numel():
                        update = self._state_full_step(state, low, lr_full, group)
                        p.add_(project_back(state, update, grad))
                    # every entry of the residual is kept, however small, as in the official
                    # optimiser: sign() leaves only exact zeros unmoved
                    residual = grad - full
                if self.state_free == "sign_sgd":
                    p.add_(residual.sign(), alpha=-lr_free)
                elif self.state_free == "sgd":
                    p.add_(residual, alpha=-lr_free)
        for group in self.param_groups:
            group["k"] = k + 1
        return loss

    def _refresh_one(self, p: nn.Parameter, state: dict) -> None:
        if self.projector == "block":
            state["proj_kind"] = "none"
            return
        state.update(make_projector(self.projector, p.grad.detach(), self.density,
                                    self._generator))
        state["step"] = 0


class BlockAdam(torch.optim.Optimizer):
    """BAdam block coordinate Adam, with the update semantics of ``badam.BlockOptimizer`` (Luo et
    al. 2024; badam 1.4 wrapping ``torch.optim.Adam`` as the FRUGAL scripts build it).

    ``blocks`` lists the parameters of each block (groups of consecutive transformer layers);
    one block is trained by Adam at a time, switched every ``switch_every`` steps, in
    ``descending`` (last layers first, as in the FRUGAL scripts) or ``ascending`` order.
    Parameters of inactive blocks are frozen (no update). ``regular`` parameters (embeddings,
    norms, output layer: BAdam's ``active_modules``) are always trained. At every switch the
    *whole* Adam state is cleared, the always-active parameters' included, as the package does
    (``base_optimizer.state = defaultdict(dict)``), so their bias correction restarts too.
    ``weight_decay`` is ``torch.optim.Adam``'s (L2 added to the gradient), BAdam's base
    optimiser; 0 in pre-training.
    """

    def __init__(
        self,
        regular: Iterable[tuple[str, nn.Parameter]],
        blocks: Sequence[Sequence[tuple[str, nn.Parameter]]],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        switch_every: int = 200,
        switch_mode: Literal["descending", "ascending"] = "descending",
    ) -> None:
        _check_gap(switch_every, "switch_every")
        if switch_mode not in ("descending", "ascending"):
            raise ValueError(f"switch_mode: got {switch_mode!r}; expected descending or ascending")
        if not blocks or any(len(b) == 0 for b in blocks):
            raise ValueError("blocks: expected a non-empty list of non-empty parameter blocks")
        regular = list(regular)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, block=-1,
                        names=[], k=0)
        groups = []
        if regular:
            groups.append({"params": [p for _, p in regular], "names": [n for n, _ in regular],
                           "block": -1})
        for i, block in enumerate(blocks):
            groups.append({"params": [p for _, p in block], "names": [n for n, _ in block],
                           "block": i})
        super().__init__(groups, defaults)
        self.n_blocks = len(blocks)
        self.switch_every = switch_every
        self.switch_mode = switch_mode

    def active_block(self, k: int) -> int:
        period = k // self.switch_every
        if self.switch_mode == "descending":
            return (self.n_blocks - 1 - period) % self.n_blocks
        return period % self.n_blocks

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        k = self.param_groups[0]["k"]
        active = self.active_block(k)
        if k % self.switch_every == 0:
            # the package clears all of its base optimiser's state at a block switch
            self.state.clear()
        for group in self.param_groups:
            if group["block"] not in (-1, active):
                continue
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if group["weight_decay"]:
                    grad = grad.add(p, alpha=group["weight_decay"])  # torch Adam's L2
                p.add_(_adam_update(self.state[p], grad, group["lr"], group["betas"],
                                    group["eps"]))
        for group in self.param_groups:
            group["k"] = k + 1
        return loss


class SignSGD(torch.optim.Optimizer):
    """``p ← p(1 - lr·wd) - lr·sign(g)`` for every parameter: no optimiser state at all."""

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.0) -> None:
        if lr <= 0:
            raise ValueError(f"lr: got {lr!r}; expected > 0")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(p.grad.sign(), alpha=-group["lr"])
        return loss


def layer_blocks(projectable: NamedParams, n_layers: int, density: float,
                 prefix: str = "layers") -> list[NamedParams]:
    """BAdam blocks as the FRUGAL scripts build them: ``int(rho·L)`` consecutive layers per
    block (floor), which must divide the ``L`` layers into equal blocks."""
    _check_density(density)
    per_block = int(density * n_layers)
    if per_block < 1 or n_layers % per_block:
        raise ValueError(f"density: {density!r} gives blocks of int({density!r}·{n_layers}) = "
                         f"{per_block} layers, which cannot split {n_layers} layers into equal "
                         "blocks (BAdam needs int(density·layers) >= 1 dividing layers)")
    blocks: list[NamedParams] = []
    for start in range(0, n_layers, per_block):
        layers = {str(i) for i in range(start, min(start + per_block, n_layers))}
        block = [(n, p) for n, p in projectable
                 if n.startswith(f"{prefix}.") and n.split(".")[1] in layers]
        if block:
            blocks.append(block)
    covered = sum(len(b) for b in blocks)
    if covered != len(projectable):
        raise ValueError("layer_blocks: some projectable parameters are outside "
                         f"'{prefix}.<i>.' ({len(projectable) - covered} left)")
    return blocks
