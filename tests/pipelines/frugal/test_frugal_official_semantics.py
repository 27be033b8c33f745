"""30 steps of each optimiser in float64 against references written here from the definitions
of the official FRUGAL optimisers (``ProjOptimizer`` with its GaLore and block projectors, the
authors' AdamW arithmetic) and of BAdam's ``BlockOptimizer`` (badam 1.4 over
``torch.optim.Adam``), to 1e-6 in the parameters.

The references are deliberately plain: one loop over a list of tensors per step, every rule of
the official code spelled out (refresh keyed on the first projectable tensor's step counter,
Python's ``round`` for counts and ranks, the SVD in float32 whatever the dtype, ``sign`` of the
whole residual, the whole state cleared at a BAdam switch).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from icml25.pipelines.frugal.optimizers import BlockAdam, Frugal, layer_blocks, split_parameters
from icml25.pipelines.frugal.projectors import block_active_set, subspace_rank

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS, GAP, BASE_LR = 30, 7, 1e-2
D, LAYERS, VOCAB = 10, 5, 7  # 10 block tensors: rho 0.25 -> round(2.5) = 2 active (not 3)


class Toy(nn.Module):
    """Embedding, LAYERS residual blocks of two Linear maps (10x12 and 12x10), norm, head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList(
            nn.ModuleDict({"a": nn.Linear(D, D + 2, bias=False),
                           "b": nn.Linear(D + 2, D, bias=False)}) for _ in range(LAYERS))
        self.norm = nn.Parameter(torch.ones(D))
        self.lm_head = nn.Linear(D, VOCAB, bias=False)

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids[:, :-1])
        for layer in self.layers:
            x = x + layer["b"](torch.tanh(layer["a"](x)))
        logits = self.lm_head(x * self.norm)
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def schedule(k: int) -> float:
    """Warm-up over 5 steps, then cosine to 0.1 over the rest (any schedule would do)."""
    if k < 5:
        return (k + 1) / 5
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (k - 5) / (STEPS - 5)))


def _batches(seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (6, 9), generator=gen) for _ in range(STEPS)]


def _model(seed: int) -> Toy:
    torch.manual_seed(seed)
    return Toy().double()


# ----------------------------------------------------------------- references (definitions)
def ref_adam(state: dict, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """The authors' ``AdamW._compute_update`` after ``state['step'] += 1``: β (0.9, 0.999),
    ε 1e-8, bias correction on."""
    b1, b2, eps = 0.9, 0.999, 1e-8
    state["m"] = state["m"] * b1 + grad * (1 - b1)
    state["v"] = state["v"] * b2 + grad * grad * (1 - b2)
    t = state["step"]
    denom = state["v"].sqrt() / math.sqrt(1 - b2**t) + eps
    return state["m"] / denom * (-lr / (1 - b1**t))


def ref_proj_optimizer(model: Toy, batches, *, kind: str, density: float, scale: float,
                       inactive_scale: float, rule: str, reset: bool,
                       count=round) -> list[torch.Tensor]:
    """``ProjOptimizer.step`` (GaLore-SVD ``proj_side='std'`` or block ``descending``) with the
    regular parameters by the authors' AdamW; returns the final parameters."""
    regular = [model.embed.weight, model.norm, model.lm_head.weight]
    proj = [layer[k].weight for layer in model.layers for k in ("a", "b")]
    st_reg = [{"step": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)} for p in regular]
    st_proj: list[dict] = [{} for _ in proj]
    n_active = count(len(proj) * density)
    next_start = len(proj) - 1
    for k, ids in enumerate(batches):
        for p in model.parameters():
            p.grad = None
        model.loss(ids).backward()
        lr = BASE_LR * schedule(k)
        with torch.no_grad():
            # refresh when the first projectable tensor's counter is a multiple of the gap
            first = st_proj[0]
            if "step" not in first or first["step"] % GAP == 0:
                if kind == "block":
                    for s in st_proj:
                        s.clear()
                        s.update(step=0, active=False)
                    for idx in range(next_start, next_start - n_active, -1):
                        p = proj[idx % len(proj)]
                        st_proj[idx % len(proj)].update(
                            active=True, m=torch.zeros_like(p), v=torch.zeros_like(p))
                    next_start -= n_active
                    if next_start < 0:
                        next_start += len(proj)
                else:
                    for p, s in zip(proj, st_proj, strict=True):
                        g = p.grad
                        m, n = g.shape
                        right = m >= n
                        r = count((n if right else m) * density)
                        u, _, vh = torch.linalg.svd(g.float(), full_matrices=False)
                        s["basis"] = (vh[:r, :] if right else u[:, :r]).to(g.dtype)
                        s["right"] = right
                        if "step" not in s or reset:
                            low = g @ s["basis"].T if right else s["basis"].T @ g
                            s.update(step=0, m=torch.zeros_like(low), v=torch.zeros_like(low))
            for p, s in zip(regular, st_reg, strict=True):
                s["step"] += 1
                p.add_(ref_adam(s, p.grad, lr))
            for p, s in zip(proj, st_proj, strict=True):
                s["step"] += 1
                g = p.grad
                active_lr, free_lr = lr * scale, lr * scale * inactive_scale
                if kind == "block":
                    if s["active"]:
                        p.add_(ref_adam(s, g, active_lr))
                    elif rule == "sign_sgd":
                        p.add_(-free_lr * g.sign())
                    continue
                b = s["basis"]
                low = g @ b.T if s["right"] else b.T @ g
                up = ref_adam(s, low, active_lr)
                update = up @ b if s["right"] else b @ up
                if rule == "sign_sgd":
                    residual = g - (low @ b if s["right"] else b @ low)
                    update = update - free_lr * residual.sign()
                p.add_(update)
    return [p.detach().clone() for p in model.parameters()]


def ref_badam(model: Toy, batches, *, density: float) -> list[torch.Tensor]:
    """badam's ``BlockOptimizer`` over ``torch.optim.Adam``: blocks of ``int(rho·L)`` layers
    (descending), embeddings / norm / head always active, the base optimiser's whole state
    cleared at every switch (after the step at which ``(global_step + 1) % T == 0``)."""
    per = int(density * LAYERS)
    blocks = [[layer[k].weight for i in range(s, s + per) for layer in [model.layers[i]]
               for k in ("a", "b")] for s in range(0, LAYERS, per)]
    always = [model.embed.weight, model.norm, model.lm_head.weight]
    base = torch.optim.Adam(model.parameters(), lr=BASE_LR, betas=(0.9, 0.999), eps=1e-8,
                            foreach=False)
    current = len(blocks) - 1
    for k, ids in enumerate(batches):
        for p in model.parameters():
            p.grad = None
        model.loss(ids).backward()
        trainable = {id(p) for p in blocks[current] + always}
        for p in model.parameters():
            if id(p) not in trainable:
                p.grad = None  # frozen (requires_grad False in the package)
        for group in base.param_groups:
            group["lr"] = BASE_LR * schedule(k)
        base.step()
        if (k + 1) % GAP == 0:
            base.state.clear()
            current = (current - 1) % len(blocks)
    return [p.detach().clone() for p in model.parameters()]


# ----------------------------------------------------------------------------- ours
def ours_frugal(model: Toy, batches, **kwargs) -> list[torch.Tensor]:
    reg, proj = split_parameters(model)
    opt = Frugal(reg, proj, lr=BASE_LR, update_gap=GAP, **kwargs)
    return _run(model, opt, batches)


def ours_badam(model: Toy, batches, density: float) -> list[torch.Tensor]:
    reg, proj = split_parameters(model)
    opt = BlockAdam(reg, layer_blocks(proj, LAYERS, density), lr=BASE_LR, switch_every=GAP,
                    switch_mode="descending")
    return _run(model, opt, batches)


def _run(model: Toy, opt: torch.optim.Optimizer, batches) -> list[torch.Tensor]:
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    for ids in batches:
        opt.zero_grad()
        model.loss(ids).backward()
        opt.step()
        sched.step()
    return [p.detach().clone() for p in model.parameters()]


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


CASES = {
    "frugal_block": (
        dict(projector="block", density=0.25, state_free="sign_sgd", proj_lr_scale=0.3,
             inactive_lr_scale=1.0, state_on_refresh="reset", block_order="descending"),
        dict(kind="block", density=0.25, scale=0.3, inactive_scale=1.0, rule="sign_sgd",
             reset=True)),
    "frugal_block_rho0": (
        dict(projector="block", density=0.0, state_free="sign_sgd", proj_lr_scale=0.3),
        dict(kind="block", density=0.0, scale=0.3, inactive_scale=1.0, rule="sign_sgd",
             reset=True)),
    "frugal_svd": (
        dict(projector="svd", density=0.25, state_free="sign_sgd", proj_lr_scale=0.5,
             inactive_lr_scale=0.5, state_on_refresh="reset"),
        dict(kind="svd", density=0.25, scale=0.5, inactive_scale=0.5, rule="sign_sgd",
             reset=True)),
    "galore": (
        dict(projector="svd", density=0.25, state_free="no", proj_lr_scale=0.25,
             state_on_refresh="keep"),
        dict(kind="svd", density=0.25, scale=0.25, inactive_scale=1.0, rule="no",
             reset=False)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_thirty_float64_steps_equal_the_official_definition(case):
    ours_kw, ref_kw = CASES[case]
    start = [p.detach().clone() for p in _model(3).parameters()]
    for seed in (0, 1):
        batches = _batches(seed)
        ours = ours_frugal(_model(3), batches, **ours_kw)
        ref = ref_proj_optimizer(_model(3), batches, **ref_kw)
        assert _max_diff(ours, ref) < 1e-6, (case, seed, _max_diff(ours, ref))
        assert _max_diff(ours, start) > 1e-2  # 30 steps really moved the weights


def test_thirty_float64_badam_steps_equal_the_package_definition():
    start = [p.detach().clone() for p in _model(4).parameters()]
    for seed in (0, 1):
        batches = _batches(seed)
        ours = ours_badam(_model(4), batches, 0.25)
        ref = ref_badam(_model(4), batches, density=0.25)
        assert _max_diff(ours, ref) < 1e-6, (seed, _max_diff(ours, ref))
        assert _max_diff(ours, start) > 1e-2


def test_the_reference_tells_half_up_rounding_apart():
    """The comparison can fail: counting round(2.5) as 3 active tensors (the earlier
    half-up rule), or ranks round(2.5) as 3, gives a different trajectory."""
    def half_up(x):
        return math.floor(x + 0.5)

    batches = _batches(0)
    for case in ("frugal_block", "frugal_svd"):
        ours_kw, ref_kw = CASES[case]
        ours = ours_frugal(_model(3), batches, **ours_kw)
        other = ref_proj_optimizer(_model(3), batches, count=half_up, **ref_kw)
        assert _max_diff(ours, other) > 1e-3, case


def test_counts_round_as_the_official_code():
    """42 tensors at rho 0.25: round(10.5) = 10 active (the official count), not 11; ranks
    likewise (round(2.5) = 2, round(3.5) = 4)."""
    assert len(block_active_set(42, 0.25, 0, "descending")) == 10
    assert len(block_active_set(28, 0.25, 0, "descending")) == 7
    assert block_active_set(10, 0.25, 0, "descending") == [8, 9]
    assert subspace_rank((12, 10), 0.25) == 2 and subspace_rank((14, 30), 0.25) == 4
    assert subspace_rank((10, 12), 0.25) == 2


def test_small_residual_entries_are_signed_not_dropped():
    """A residual entry far below float32 round-off relative to max|G| still moves by
    -eta_0·sign (the official ``inactive_grad.sign()``); only exact zeros stay."""
    w = nn.Parameter(torch.zeros(3, 2, dtype=torch.float64))
    opt = Frugal([], [("w", w)], lr=1.0, density=0.5, update_gap=10, projector="svd",
                 state_free="sign_sgd", proj_lr_scale=1.0, inactive_lr_scale=1.0)
    # right side (3 >= 2), r = 1: the top right singular vector is ±e_1, the residual is the
    # 1e-9 entry alone (the earlier mask zeroed entries below 7.6e-6·max|G|)
    w.grad = torch.tensor([[1.0, 0.0], [0.0, 1e-9], [0.0, 0.0]], dtype=torch.float64)
    opt.step()
    basis = opt.state[w]["proj_basis"]
    assert torch.equal(basis.abs(), torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    low = w.grad @ basis.T
    adam = -(low / (low.abs() + 1e-8)) @ basis  # first Adam step, fresh state
    free = w.detach() - adam
    assert torch.allclose(free, torch.tensor([[0.0, 0.0], [0.0, -1.0], [0.0, 0.0]],
                                             dtype=torch.float64), atol=1e-12, rtol=0)
    assert torch.equal(w.detach()[2], torch.zeros(2, dtype=torch.float64))  # exact zeros stay
