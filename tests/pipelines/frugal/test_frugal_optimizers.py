"""FRUGAL's mathematics against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from icml25.pipelines.frugal.optimizers import (
    BlockAdam,
    Frugal,
    SignSGD,
    layer_blocks,
    split_parameters,
    state_floats,
)
from icml25.pipelines.frugal.projectors import (
    block_active_set,
    make_projector,
    project,
    project_back,
)

pytestmark = pytest.mark.usefixtures("one_thread")


class Toy(nn.Module):
    """Two 'transformer layers' of Linear maps plus regular embedding, norm and head params."""

    def __init__(self, d: int = 6, n_layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, d)
        self.layers = nn.ModuleList(
            nn.ModuleDict({"a": nn.Linear(d, d + 2, bias=False),
                           "b": nn.Linear(d + 2, d, bias=False)}) for _ in range(n_layers))
        self.norm = nn.Parameter(torch.ones(d))
        self.lm_head = nn.Linear(d, 5, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = x + layer["b"](torch.tanh(layer["a"](x)))
        return self.lm_head(x * self.norm)

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        logits = self(ids[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, 5), ids[:, 1:].reshape(-1))


def _batches(n: int, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 5, (4, 7), generator=gen) for _ in range(n)]


def _twins(seed: int = 0) -> tuple[Toy, Toy]:
    torch.manual_seed(seed)
    a = Toy()
    b = Toy()
    b.load_state_dict(a.state_dict())
    return a, b


def _run(model: Toy, opt: torch.optim.Optimizer, batches: list[torch.Tensor]) -> None:
    for ids in batches:
        opt.zero_grad()
        model.loss(ids).backward()
        opt.step()


def test_rho_one_block_equals_torch_adam():
    """With rho = 1, block projector, T > steps => the trajectory of torch.optim.Adam."""
    ours, ref = _twins()
    reg, proj = split_parameters(ours)
    opt = Frugal(reg, proj, lr=1e-2, density=1.0, update_gap=100, projector="block")
    torch_adam = torch.optim.Adam(ref.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.0)
    batches = _batches(20)
    _run(ours, opt, batches)
    _run(ref, torch_adam, batches)
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6, rtol=0), name


def test_split_follows_official_prepare_proj_params():
    model = Toy()
    reg, proj = split_parameters(model)
    assert [n for n, _ in proj] == ["layers.0.a.weight", "layers.0.b.weight",
                                    "layers.1.a.weight", "layers.1.b.weight"]
    assert {n for n, _ in reg} == {"embed.weight", "norm", "lm_head.weight"}
    _, proj_l = split_parameters(model, proj_logits=True)
    assert "lm_head.weight" in {n for n, _ in proj_l}


def test_rho_zero_moves_every_projectable_weight_by_minus_lr_sign():
    """With rho = 0, W moves by exactly -lr·sign(g) (g = 0 entries stay); regular = Adam."""
    ours, ref = _twins(1)
    reg, proj = split_parameters(ours)
    lr = 3e-3
    opt = Frugal(reg, proj, lr=lr, density=0.0, update_gap=5)
    names = dict(reg)
    adam = torch.optim.Adam([p for n, p in ref.named_parameters() if n in names], lr=lr)
    sign = SignSGD([p for n, p in ref.named_parameters() if n not in names], lr=lr)
    for ids in _batches(6, seed=3):
        before = {n: p.detach().clone() for n, p in proj}
        opt.zero_grad()
        ours.loss(ids).backward()
        # a zero gradient entry must not move
        proj[0][1].grad[0, 0] = 0.0
        grads = {n: p.grad.clone() for n, p in proj}
        opt.step()
        for n, p in proj:  # float32 round-off of w + Δ only
            assert torch.allclose(p.detach() - before[n], -lr * grads[n].sign(), atol=1e-7,
                                  rtol=0), n
        assert torch.equal(proj[0][1].detach()[0, 0], before[proj[0][0]][0, 0])
        adam.zero_grad()
        sign.zero_grad()
        ref.loss(ids).backward()
        ref.layers[0]["a"].weight.grad[0, 0] = 0.0
        adam.step()
        sign.step()
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        if name in dict(reg):
            assert torch.allclose(p, q, atol=1e-6), name


def test_svd_projector_is_an_orthogonal_projection():
    """P^{-1}(P(.)) is idempotent and the residual is orthogonal to the projection, to the
    float32 accuracy of the basis (the official projector takes the SVD in float32)."""
    gen = torch.Generator().manual_seed(0)
    for shape in [(12, 8), (8, 12)]:
        g = torch.randn(*shape, generator=gen, dtype=torch.float64)
        proj = make_projector("svd", g, 0.5)
        assert proj["proj_basis"].dtype == torch.float64
        full = project_back(proj, project(proj, g), g)
        again = project_back(proj, project(proj, full), g)
        assert torch.allclose(full, again, atol=1e-5)
        assert abs(float((g - full).mul(full).sum())) < 1e-5 * float(g.norm() ** 2)
        # the subspace is the top-r singular subspace: the residual's norm is the tail energy
        s = torch.linalg.svdvals(g)
        r = round(0.5 * min(shape))
        assert float((g - full).norm() ** 2) == pytest.approx(float((s[r:] ** 2).sum()),
                                                              rel=1e-5)


def test_svd_step_equals_galore_when_gradient_is_inside_the_subspace():
    """If rank(G) <= r, g_free is round-off only: FRUGAL-SVD with the SGD residual rule moves as
    GaLore does (to round-off); with signSGD every non-zero round-off entry becomes a full
    -eta_0 step, as in the official optimiser (no entry of the residual is dropped)."""
    gen = torch.Generator().manual_seed(1)
    w0 = torch.randn(16, 12, generator=gen) * 0.1
    u = torch.randn(16, 2, generator=gen)
    v = torch.randn(2, 12, generator=gen)
    scales = torch.randn(3, generator=gen).tolist()
    weights, residual_signs = {}, []
    for state_free in ("sgd", "no", "sign_sgd"):
        w = nn.Parameter(w0.clone())
        opt = Frugal([], [("w", w)], lr=1e-2, density=0.25, update_gap=1, projector="svd",
                     state_free=state_free)
        for scale in scales:
            opt.zero_grad()
            w.grad = (u @ v) * scale  # rank 2 <= r = round(0.25 · 12) = 3
            proj = make_projector("svd", w.grad, 0.25)
            residual = w.grad - project_back(proj, project(proj, w.grad), w.grad)
            assert float(residual.abs().max()) < 1e-5 * float(w.grad.abs().max())
            if state_free == "sign_sgd":
                residual_signs.append(residual.sign())
            opt.step()
        weights[state_free] = w.detach().clone()
    assert torch.allclose(weights["sgd"], weights["no"], atol=1e-6, rtol=0)
    assert not torch.equal(weights["no"], w0)
    # sign_sgd = GaLore's step - eta_0 · sign(round-off) at each step (eta_0 = 1e-2)
    expected = weights["no"] - 1e-2 * sum(residual_signs)
    assert torch.allclose(weights["sign_sgd"], expected, atol=1e-6, rtol=0)
    assert float((weights["sign_sgd"] - weights["no"]).abs().max()) > 5e-3


def test_descending_block_order_cycles_through_all_tensors():
    """28 tensors, rho = 0.25: refreshes 0..3 are disjoint, cover all; 4 repeats 0."""
    sets = [block_active_set(28, 0.25, j, "descending") for j in range(5)]
    assert all(len(s) == 7 for s in sets)
    assert sets[0] == list(range(21, 28))
    assert set().union(*map(set, sets[:4])) == set(range(28))
    assert sum(len(s) for s in sets[:4]) == 28
    assert sets[4] == sets[0]
    asc = [block_active_set(28, 0.25, j, "ascending") for j in range(4)]
    assert asc[0] == list(range(7)) and set().union(*map(set, asc)) == set(range(28))
    rnd = block_active_set(28, 0.25, 3, "random", seed=5)
    assert rnd == block_active_set(28, 0.25, 3, "random", seed=5) and len(rnd) == 7


def test_refresh_resets_adam_state():
    """The first Adam step after a refresh moves every active coordinate by ≈ lr."""
    torch.manual_seed(0)
    model = Toy()
    reg, proj = split_parameters(model)
    lr = 1e-3
    opt = Frugal(reg, proj, lr=lr, density=1.0, update_gap=3, state_on_refresh="reset")
    batches = _batches(4, seed=7)
    _run(model, opt, batches[:3])
    before = {n: p.detach().clone() for n, p in proj}
    opt.zero_grad()
    model.loss(batches[3]).backward()
    grads = {n: p.grad.clone() for n, p in proj}
    opt.step()  # k = 3: refresh, fresh state => |Δw| = lr·|g|/(|g| + eps)
    for n, p in proj:
        g = grads[n]
        expected = lr * g.abs() / (g.abs() + 1e-8)
        assert torch.allclose((p.detach() - before[n]).abs(), expected, atol=1e-7), n
    assert all(opt.state[p]["step"] == 1 for _, p in proj)


def test_keep_carries_moments_and_counter_across_refreshes():
    torch.manual_seed(0)
    model = Toy()
    reg, proj = split_parameters(model)
    opt = Frugal(reg, proj, lr=1e-3, density=0.5, update_gap=2, projector="svd",
                 state_free="no", state_on_refresh="keep")
    _run(model, opt, _batches(5))
    assert all(opt.state[p]["step"] == 5 for _, p in proj)
    opt2 = Frugal(*split_parameters(model), lr=1e-3, density=0.5, update_gap=2,
                  projector="svd", state_on_refresh="reproject")
    _run(model, opt2, _batches(5))
    for _, p in proj:
        assert opt2.state[p]["step"] == 5 and (opt2.state[p]["exp_avg_sq"] >= 0).all()


@pytest.mark.parametrize("projector", ["block", "svd", "random", "randperm", "randk"])
def test_state_floats_match_the_closed_forms(projector):
    """Counted floats = the closed-form memory formula for every projector."""
    torch.manual_seed(0)
    model = Toy()
    reg, proj = split_parameters(model)
    n_reg = sum(p.numel() for _, p in reg)
    opt = Frugal(reg, proj, lr=1e-3, density=0.5, update_gap=2, projector=projector)
    _run(model, opt, _batches(3))
    if projector == "block":  # 4 tensors, rho 0.5 -> 2 active; refresh 1 = tensors 0, 1
        active = block_active_set(4, 0.5, 1, "descending")
        expected = 2 * (n_reg + sum(proj[i][1].numel() for i in active))
    elif projector in ("svd", "random"):
        expected = 2 * n_reg + sum(3 * (2 * max(p.shape) + min(p.shape)) for _, p in proj)
    elif projector == "randperm":
        expected = 2 * n_reg + sum(2 * 3 * max(p.shape) for _, p in proj)
    else:
        expected = 2 * (n_reg + sum(int(0.5 * p.numel()) for _, p in proj))
    assert state_floats(opt) == expected


def test_state_floats_of_the_baselines():
    torch.manual_seed(0)
    model = Toy()
    n = sum(p.numel() for p in model.parameters())
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _run(model, adamw, _batches(2))
    assert state_floats(adamw) == 2 * n
    sign = SignSGD(model.parameters(), lr=1e-3)
    _run(model, sign, _batches(2))
    assert state_floats(sign) == 0
    reg, proj = split_parameters(model)
    badam = BlockAdam(reg, layer_blocks(proj, 2, 0.5), lr=1e-3, switch_every=2)
    _run(model, badam, _batches(3))  # steps 0,1 block 1; step 2 block 0
    n_reg = sum(p.numel() for _, p in reg)
    assert state_floats(badam) == 2 * (n_reg + sum(p.numel() for _, p in proj[:2]))


def test_block_adam_matches_frugal_block_without_state_free_update():
    """On the block tensors alone, BAdam with one layer per block == FRUGAL-block with rule
    'no' when the tensor blocks align with the layers (two independent code paths). With
    regular parameters they differ by design: BAdam clears their state at every switch."""
    a, b = _twins(2)
    _, proj_a = split_parameters(a)
    _, proj_b = split_parameters(b)
    badam = BlockAdam([], layer_blocks(proj_a, 2, 0.5), lr=1e-2, switch_every=3)
    frugal = Frugal([], proj_b, lr=1e-2, density=0.5, update_gap=3, state_free="no")
    batches = _batches(9, seed=4)
    _run(a, badam, batches)
    _run(b, frugal, batches)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)


def _rank(delta: torch.Tensor) -> int:
    s = torch.linalg.svdvals(delta.double())
    return int((s > 1e-3 * s[0]).sum())


def test_effective_update_rank_galore_low_frugal_full():
    """10 steps inside one refresh: GaLore's ΔW has rank <= r, FRUGAL's is full."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 12, generator=gen)
    y = torch.randn(64, 16, generator=gen)
    ranks = {}
    for name, kw in {"galore": dict(state_free="no", state_on_refresh="keep"),
                     "frugal": dict(state_free="sign_sgd")}.items():
        w = nn.Parameter(torch.randn(16, 12, generator=gen) * 0.1)
        opt = Frugal([], [("w", w)], lr=1e-2, density=0.25, update_gap=100, projector="svd",
                     **kw)
        w0 = w.detach().clone()
        for _ in range(10):
            opt.zero_grad()
            ((x @ w.T - y) ** 2).mean().backward()
            opt.step()
        ranks[name] = _rank(w.detach() - w0)
    assert ranks["galore"] <= 3  # r = round(0.25 · 12)
    assert ranks["frugal"] == 12


@pytest.mark.parametrize("state_full, state_free, lr", [("sgdm", "sgd", 0.05),
                                                         ("adamw", "sign_sgd", 0.05)])
def test_frugal_converges_on_a_convex_quadratic(state_full, state_free, lr):
    """Loss below 1e-3 of its start in 500 steps (with lr decay)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(40, 10, generator=gen)
    hess = a.T @ a / 40 + 0.5 * torch.eye(10)
    w_star = torch.randn(8, 10, generator=gen)
    w = nn.Parameter(torch.zeros(8, 10))

    def loss() -> torch.Tensor:
        d = w - w_star
        return 0.5 * torch.einsum("ij,jk,ik->", d, hess, d)

    start = float(loss().detach())
    opt = Frugal([], [("w", w)], lr=lr, density=0.25, update_gap=20, projector="svd",
                 state_full=state_full, state_free=state_free, momentum=0.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.99 ** k)
    for _ in range(500):
        opt.zero_grad()
        loss().backward()
        opt.step()
        sched.step()
    assert float(loss().detach()) < 1e-3 * start


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_density_outside_unit_interval_is_refused(bad):
    model = Toy()
    with pytest.raises(ValueError, match="density"):
        Frugal(*split_parameters(model), density=bad)


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_update_gap_below_one_is_refused(bad):
    with pytest.raises(ValueError, match="update_gap"):
        Frugal(*split_parameters(Toy()), update_gap=bad)


def test_matrix_projector_refuses_a_group_it_cannot_split():
    model = Toy()
    reg, proj = split_parameters(model, proj_norms=True)
    with pytest.raises(ValueError, match=r"cannot split norm \(6,\)"):
        Frugal(reg, proj, projector="svd")
    Frugal(reg, proj, projector="block")  # whole tensors: any shape
    with pytest.raises(ValueError, match="needs a matrix"):
        make_projector("svd", torch.ones(3), 0.5)


def test_frugal_block_is_deterministic():
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = Toy()
        opt = Frugal(*split_parameters(model), lr=1e-2, density=0.5, update_gap=2,
                     projector="random", seed=3)
        _run(model, opt, _batches(5))
        runs.append(np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
    assert np.array_equal(runs[0], runs[1])
