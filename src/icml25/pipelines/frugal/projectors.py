"""Projectors of FRUGAL's state-full subspace (the paper's projectors; ``docs/papers/frugal.md``).

A projector maps a gradient ``G`` (one weight tensor) to its low-dimensional, state-full part
``P(G)`` and embeds such a part back into the tensor's shape with ``P^{-1}``. The residual
``G - P^{-1}(P(G))`` is the state-free part. Semantics follow the official FRUGAL code
(github.com/fzmushko/FRUGAL, ``frugal/proj_optimizer_templates.py``), written anew here:

* ``svd``  (GaLore): if ``m >= n`` the right factor ``B = Vh[:r]`` with ``r = round(rho·n)``,
  ``P(G) = G Bᵀ``, ``P^{-1}(X) = X B``; else the left factor ``A = U[:, :r]``, ``r = round(rho·m)``,
  ``P(G) = Aᵀ G``, ``P^{-1}(X) = A X``.
* ``random``: the same two sides with a random semi-orthogonal factor (QR of a Gaussian matrix).
* ``randperm``: the same sides with a random subset of ``r`` columns (rows) of the identity.
* ``randk``: ``int(rho·size)`` random individual entries (RandK), any tensor shape.
* ``block`` (BAdam-like) is decided per tensor by :func:`block_active_set`: an active tensor
  uses the identity, an inactive one the empty subspace.

A projector is stored as a small dict of tensors in the optimiser's state (``proj_*`` keys), so
the state that the memory accounting counts includes the projection matrices themselves.
"""

from __future__ import annotations

from typing import Literal

import torch

ProjectorKind = Literal["block", "svd", "random", "randperm", "randk"]
MATRIX_PROJECTORS = ("svd", "random", "randperm")
BlockOrder = Literal["descending", "ascending", "random"]


def official_round(x: float) -> int:
    """Python's ``round`` (halves to even: ``round(10.5) == 10``), as the official code counts
    active tensors (``round(len(params) * density)``) and subspace ranks
    (``round(dim * density)``): 42 tensors at rho = 0.25 give 10 active ones, not 11."""
    return round(float(x))


def subspace_rank(shape: tuple[int, ...], density: float) -> int:
    """Rank ``r = round(rho·min(m, n))`` of a matrix projector (side chosen by :func:`side`):
    the official ``round(n·rho)`` on the right side (``m >= n``), ``round(m·rho)`` on the left."""
    return official_round(min(shape) * density)


def side(shape: tuple[int, ...]) -> Literal["right", "left"]:
    """GaLore's ``proj_side=std``: project the smaller dimension (right if ``m >= n``)."""
    return "right" if shape[0] >= shape[1] else "left"


def make_projector(kind: ProjectorKind, grad: torch.Tensor, density: float,
                   generator: torch.Generator | None = None) -> dict[str, torch.Tensor | str]:
    """Build the projector of ``grad`` for one refresh period (``kind`` other than ``block``)."""
    if kind == "randk":
        size = grad.numel()
        count = int(density * size)
        perm = torch.randperm(size, generator=generator, device="cpu")[:count]
        return {"proj_kind": "flat", "proj_index": perm.sort().values.to(grad.device)}
    if kind not in MATRIX_PROJECTORS:
        raise ValueError(f"projector: got {kind!r}; expected block, svd, random, randperm or randk")
    if grad.ndim != 2:
        raise ValueError(f"projector {kind!r} needs a matrix, got shape {tuple(grad.shape)}")
    m, n = grad.shape
    which = side(grad.shape)
    r = subspace_rank(grad.shape, density)
    small = n if which == "right" else m
    if kind == "svd":
        # the official GaLore projector takes the SVD in float32 whatever the gradient's dtype
        # (bf16 and float64 alike) and casts the factor back to it
        u, _, vh = torch.linalg.svd(grad.float(), full_matrices=False)
        basis = vh[:r].clone() if which == "right" else u[:, :r].clone()
    elif kind == "random":
        gauss = torch.randn(small, r, generator=generator, device="cpu")
        q, _ = torch.linalg.qr(gauss)  # (small, r) with orthonormal columns
        basis = (q.T if which == "right" else q).contiguous().to(grad.device)
    else:  # randperm: a subset of coordinates of the small dimension
        index = torch.randperm(small, generator=generator, device="cpu")[:r].sort().values
        return {"proj_kind": "cols" if which == "right" else "rows",
                "proj_index": index.to(grad.device)}
    return {"proj_kind": which, "proj_basis": basis.to(grad.dtype)}


def project(proj: dict, grad: torch.Tensor) -> torch.Tensor:
    """``P(G)``: the state-full coordinates of ``grad``."""
    kind = proj["proj_kind"]
    if kind == "identity":
        return grad
    if kind == "right":
        return grad @ proj["proj_basis"].T
    if kind == "left":
        return proj["proj_basis"].T @ grad
    if kind == "cols":
        return grad[:, proj["proj_index"]]
    if kind == "rows":
        return grad[proj["proj_index"], :]
    if kind == "flat":
        return grad.reshape(-1)[proj["proj_index"]]
    raise ValueError(f"unknown projector kind {kind!r}")


def project_back(proj: dict, low: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``P^{-1}(X)``: embed subspace coordinates ``low`` into a tensor shaped like ``like``."""
    kind = proj["proj_kind"]
    if kind == "identity":
        return low
    if kind == "right":
        return low @ proj["proj_basis"]
    if kind == "left":
        return proj["proj_basis"] @ low
    out = torch.zeros_like(like)
    if kind == "cols":
        out[:, proj["proj_index"]] = low
    elif kind == "rows":
        out[proj["proj_index"], :] = low
    elif kind == "flat":
        out.view(-1)[proj["proj_index"]] = low
    else:
        raise ValueError(f"unknown projector kind {kind!r}")
    return out


def project_squared(proj: dict, low_sq: torch.Tensor, like: torch.Tensor,
                    new: dict) -> torch.Tensor:
    """Carry a second moment to a new subspace: ``(P_new ∘ P_old^{-1})`` with squared entries.

    For the linear map ``x ↦ M x`` of independent coordinates, ``E[(Mx)²] = M² E[x²]`` (entry-wise
    square of ``M``): the non-negative way to re-project Adam's ``v`` (``state_on_refresh:
    reproject``; the paper leaves this choice open).
    """
    squared_old = {k: (v.square() if k == "proj_basis" else v) for k, v in proj.items()}
    squared_new = {k: (v.square() if k == "proj_basis" else v) for k, v in new.items()}
    return project(squared_new, project_back(squared_old, low_sq, like))


def block_active_set(n_tensors: int, density: float, refresh: int, order: BlockOrder,
                     seed: int = 0) -> list[int]:
    """Indices of the tensors that are state-full during refresh period ``refresh``.

    ``n_act = round(rho·N)`` whole tensors with Python's rounding (official block projector,
    :func:`official_round`). ``descending`` starts at
    the last tensor and takes ``n_act`` consecutive tensors going down; the next period continues
    below, cyclically. ``ascending`` mirrors it from the first tensor; ``random`` draws a
    uniform subset from a generator seeded by ``(seed, refresh)``, so the set is a pure function
    of the period (exact resume).
    """
    n_act = official_round(n_tensors * density)
    if n_act == 0 or n_tensors == 0:
        return []
    if order == "descending":
        start = n_tensors - 1 - refresh * n_act
        return sorted({(start - i) % n_tensors for i in range(n_act)})
    if order == "ascending":
        start = refresh * n_act
        return sorted({(start + i) % n_tensors for i in range(n_act)})
    if order == "random":
        gen = torch.Generator().manual_seed(seed * 1_000_003 + refresh)
        return sorted(torch.randperm(n_tensors, generator=gen)[:n_act].tolist())
    raise ValueError(f"block_order: got {order!r}; expected descending, ascending or random")
