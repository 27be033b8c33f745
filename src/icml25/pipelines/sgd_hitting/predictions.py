"""The theory's exponent E and the competing predictions, computed from a landscape and a law.

- B0 ``w_graph``: E(start) from the W-graph formula with the exact noise law's costs (method);
- B1 ``gaussian_approx``: the same formula with Gaussian costs of equal (state-dependent)
  variance, ``H = Var Z(x) p²/2``;
- B2/B3/B4 ``first_barrier`` / ``sum_barriers`` / ``largest_barrier``: the barriers (exact
  costs) on the most likely path, i.e. the chain of cheapest exits from the start well to W;
- B5 ``eyring_kramers``: ``E τ ≈ (1/η)(2π/|λ_-(s)|) sqrt(|det ∇²f(s)| / det ∇²f(m))
  exp(2Δf/(ησ²))`` for the cheapest exit of the start well (isotropic constant variance only);
  its exponent is ``2Δf/σ²``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from icml25.pipelines.sgd_hitting import w_graphs
from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target

if TYPE_CHECKING:
    from icml25.pipelines.sgd_hitting.critical_points import CriticalPoint
    from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw

VARIANTS = ("w_graph", "gaussian_approx", "first_barrier", "sum_barriers", "largest_barrier",
            "eyring_kramers")
GLOBAL_TOL = 1e-9


@dataclass
class MinimaGraph:
    """Minima of a landscape, which are global, and the saddles joining adjacent pairs."""

    minima: list[CriticalPoint]
    pairs: list[tuple[int, int, CriticalPoint]]
    targets: list[int]
    saddles: list[CriticalPoint] = field(default_factory=list)


def minima_graph(landscape: Landscape, points: list[CriticalPoint]) -> MinimaGraph:
    from icml25.pipelines.sgd_hitting.critical_points import adjacency
    minima = [p for p in points if p.kind == "minimum"]
    if not minima:
        raise ValueError(f"{landscape.name}: no local minimum inside the box")
    fmin = min(p.f for p in minima)
    targets = [k for k, p in enumerate(minima) if p.f <= fmin + GLOBAL_TOL * max(1, abs(fmin))]
    pairs = [(i, j, points[s]) for i, j, s in adjacency(landscape, points)]
    return MinimaGraph(minima, pairs, targets, [p for _, _, p in pairs])


def cost_matrix(landscape: Landscape, graph: MinimaGraph, noise: NoiseLaw,
                gaussian_approx: bool = False,
                gmam_options: dict[str, Any] | None = None) -> tuple[np.ndarray, list[dict]]:
    """Direct costs Ṽ(i, j) between adjacent minima (+inf otherwise) and the minimum-action
    paths (2-D). 1-D: HJ quasi-potential to the separating maximum; 2-D: gMAM (Gaussian).

    In 2-D the costs out of the global minima are left at +inf, not computed: W absorbs, so no
    W-graph and no prediction uses them, and each gMAM solve is the expensive step."""
    from icml25.pipelines.sgd_hitting.transition_costs import gmam, quasi_potential_1d
    noise.require_finite_mgf(f"costs on {landscape.name}")
    n = len(graph.minima)
    costs = np.full((n, n), np.inf)
    paths: list[dict] = []
    for i, j, saddle in graph.pairs:
        for a, b in ((i, j), (j, i)):
            if landscape.dim == 1:
                costs[a, b] = quasi_potential_1d(landscape, noise, graph.minima[a].x[0],
                                                 saddle.x[0], gaussian_approx=gaussian_approx)
            else:
                if a in graph.targets:
                    continue
                if noise.kind != "gaussian" or noise.state_dependent:
                    raise ValueError(f"{landscape.name}: 2-D costs are implemented for Gaussian "
                                     f"noise of constant covariance (gMAM); got {noise.name!r}"
                                     f"{' with a state-dependent scale' if noise.state_dependent else ''}")
                cov = noise.covariance_matrix(landscape.dim)
                cost, path = gmam(landscape, np.array(graph.minima[a].x),
                                  np.array(graph.minima[b].x), cov, via=np.array(saddle.x),
                                  **(gmam_options or {}))
                costs[a, b] = cost
                paths.append({"from": a, "to": b, "cost": cost, "path": path.tolist()})
    return costs, paths


def eyring_kramers_time(landscape: Landscape, minimum: CriticalPoint, saddle: CriticalPoint,
                        variance: float, eta: float) -> float:
    """Eyring–Kramers mean exit time, in iterations, over ``saddle`` from ``minimum``."""
    hs = np.linalg.eigvalsh(landscape.hessian(np.array(saddle.x)))
    hm = np.linalg.eigvalsh(landscape.hessian(np.array(minimum.x)))
    lam = abs(hs.min())
    pref = (2 * math.pi / lam) * math.sqrt(abs(np.prod(hs)) / np.prod(hm))
    return pref / eta * math.exp(2 * (saddle.f - minimum.f) / (eta * variance))


def start_and_target(landscape: Landscape, graph: MinimaGraph, start: list[float] | None,
                     start_minimum: int | None, target: dict[str, Any]) -> \
        tuple[np.ndarray, int, Target]:
    """Resolve the configured start (coordinates or minimum index) and U around W."""
    from icml25.pipelines.sgd_hitting.critical_points import basin_of
    if start_minimum is not None:
        if not 0 <= start_minimum < len(graph.minima):
            raise ValueError(f"{landscape.name}: start_minimum {start_minimum} out of range; "
                             f"the landscape has {len(graph.minima)} minima")
        x0 = np.array(graph.minima[start_minimum].x)
    else:
        x0 = np.asarray(start, float)
    landscape.check_inside(x0)
    idx = basin_of(landscape, graph.minima, x0)
    # U surrounds every global minimiser: W in the energy is the set of all of them
    globs = [graph.minima[k] for k in graph.targets]
    kind, radius = target["kind"], float(target["radius"])
    if kind == "ball":
        tgt = Target("ball", centers=tuple(tuple(g.x) for g in globs), radius=radius)
    elif kind == "halfline":
        if landscape.dim != 1:
            raise ValueError(f"{landscape.name}: a half-line target needs a 1-D landscape")
        right = [g.x[0] for g in globs if g.x[0] > x0[0]]
        left = [g.x[0] for g in globs if g.x[0] <= x0[0]]
        if right and left:
            tgt = Target("outside", threshold=min(right) - radius,
                         threshold_low=max(left) + radius)
        elif right:
            tgt = Target("right_of", threshold=min(right) - radius)
        else:
            tgt = Target("left_of", threshold=max(left) + radius)
    elif kind == "annulus":
        tgt = Target("annulus", radius=radius, radius0=float(target.get("radius0", 1.0)))
    else:
        raise ValueError(f"unknown target kind {kind!r}")
    return x0, idx, tgt


def predict(landscape: Landscape, graph: MinimaGraph, costs: np.ndarray, costs_gauss: np.ndarray,
            start_idx: int, noise: NoiseLaw, markov_eps: tuple[float, float] = (0.02, 0.01)) \
        -> dict[str, Any]:
    """Every variant's predicted exponent for a start in minimum ``start_idx``, with the
    most likely path, the finite-chain cross-check of E and the bounded-depth level h."""
    w = graph.targets
    energy = w_graphs.energy(costs, w, start_idx)
    path = w_graphs.most_likely_path(costs, w, start_idx)
    barriers = [c for _, _, c in path]
    spurious = [k for k in range(len(graph.minima)) if k not in w]
    exits = [float(np.min(costs[k])) for k in spurious]
    out = {
        "w_graph": energy,
        "gaussian_approx": w_graphs.energy(costs_gauss, w, start_idx),
        "first_barrier": barriers[0] if barriers else 0.0,
        "sum_barriers": float(sum(barriers)),
        "largest_barrier": max(barriers) if barriers else 0.0,
        "path": path,
        "start_minimum": start_idx,
        "depth_bound_h": max(exits) if exits else 0.0,
        "cheapest_exits": dict(zip(map(str, spurious), exits, strict=True)),
        "markov_chain_energy": (w_graphs.markov_chain_energy(costs, w, start_idx, markov_eps)
                                if math.isfinite(energy) and len(graph.minima) > 1 else energy),
    }
    out["eyring_kramers"] = math.nan
    out["kramers_saddle"] = None
    if start_idx not in w and noise.isotropic_constant:
        # the cheapest Gaussian exit of the start well
        options = [(costs_gauss[start_idx, j], s) for i, j, s in graph.pairs if i == start_idx] \
            + [(costs_gauss[start_idx, i], s) for i, j, s in graph.pairs if j == start_idx]
        if options:
            _, saddle = min(options, key=lambda o: o[0])
            var = noise.variance(0.0, landscape)
            out["eyring_kramers"] = 2 * (saddle.f - graph.minima[start_idx].f) / var
            out["kramers_saddle"] = list(saddle.x)
            out["kramers_variance"] = var
    elif start_idx in w:
        out["eyring_kramers"] = 0.0
    return out
