"""Many SGD chains at once: hitting times of U and their censored estimators.

Simulator: all chains advance together, ``x ← x - η (∇f(x) + Z)`` written
per coordinate; noise is drawn in blocks of ``block`` steps; the chains that entered U are
dropped after each block (compaction). The first step in U is recorded exactly (every step is
checked, the block only sets how often the arrays are compacted). The run stops when a fraction
``stop_fraction`` of the chains has hit (type-II censoring: for exponential times 95 % is about
3 × the mean) or at ``max_steps``; the rest are censored at the stop time.
A chain whose state stops being finite (overflow to ±inf or NaN, checked at every step before
any clamping) has diverged: it is recorded as such with the step it diverged at, dropped, and
never counted as a hit; the estimators leave it out and the run reports how many there were.
NumPy float64 on the CPU, torch (any device) for the paper configuration.

Estimators: the censored-exponential MLE ``Σ_i min(τ_i, T) / #hits``; the median of
``min(τ_i, T)`` (valid when more than half hit) and ``median/ln 2``; percentile-bootstrap
confidence intervals over chains.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw

logger = logging.getLogger(__name__)


@dataclass
class HittingSample:
    """Hitting times of ``n`` chains; ``censored[i]`` means chain i had not hit by ``stop``;
    ``diverged[i]`` that its state became non-finite at step ``tau[i]`` (not a hit, not
    censored)."""

    tau: np.ndarray
    censored: np.ndarray
    stop: int
    chain_steps: int
    seconds: float
    diverged: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.diverged is None:
            self.diverged = np.zeros(len(self.tau), bool)

    @property
    def n_hits(self) -> int:
        return int((~self.censored & ~self.diverged).sum())

    @property
    def n_diverged(self) -> int:
        return int(self.diverged.sum())


def check_step_size(eta: float, curvature: float | None = None, what: str = "eta") -> None:
    """A step size must be a finite positive number, and ``η λ_max < 2`` (else GD diverges)."""
    if isinstance(eta, bool) or not isinstance(eta, int | float) or not math.isfinite(eta) \
            or eta <= 0:
        raise ValueError(f"{what}: got {eta!r}; the step size must be a finite number > 0")
    if curvature is not None and eta * curvature >= 2:
        raise ValueError(f"{what}: η·λ_max = {eta * curvature:.3g} ≥ 2: gradient descent "
                         "diverges at this step size")


def simulate_hitting_times(
    landscape: Landscape, noise: NoiseLaw, eta: float, x0: tuple[float, ...], target: Target,
    n_chains: int, seed: int, max_steps: int, stop_fraction: float = 0.95, block: int = 100,
    backend: str = "numpy", device: str = "cpu",
    on_block: Callable[[int], None] | None = None, curvature: float | None = None,
) -> HittingSample:
    """Run ``n_chains`` SGD chains from ``x0`` until U is hit (see module docstring).

    ``curvature``: the largest Hessian eigenvalue at the landscape's minima where it is known;
    ``η·curvature ≥ 2`` is refused (gradient descent diverges there)."""
    check_step_size(eta, curvature)
    landscape.check_inside(np.asarray(x0, float))
    if n_chains < 1 or max_steps < 0 or not 0 < stop_fraction <= 1:
        raise ValueError("n_chains ≥ 1, max_steps ≥ 0 and 0 < stop_fraction ≤ 1 required")
    if backend == "numpy":
        import numpy as xp
        rng: Any = np.random.default_rng(seed)
        dev = dtype = None

        def full(v: float) -> np.ndarray:
            return np.full(n_chains, float(v))

        def to_np(a: Any) -> np.ndarray:
            return np.asarray(a)
    else:
        import torch as xp
        dev, dtype = xp.device(device), xp.float64
        rng = xp.Generator(device=dev)
        rng.manual_seed(int(seed))

        def full(v: float) -> Any:
            return xp.full((n_chains,), float(v), dtype=dtype, device=dev)

        def to_np(a: Any) -> np.ndarray:
            return a.detach().cpu().numpy()

    dim = landscape.dim
    lo = [b[0] for b in landscape.box]
    hi = [b[1] for b in landscape.box]
    coords = [full(x0[k]) for k in range(dim)]
    tau = np.full(n_chains, -1, dtype=np.int64)
    diverged = np.zeros(n_chains, bool)
    inside0 = to_np(target.contains(tuple(coords), xp))
    tau[inside0] = 0
    alive = np.flatnonzero(~inside0)
    keep0 = alive if xp is np else xp.as_tensor(alive, device=dev)
    coords = [c[keep0] for c in coords]
    t, chain_steps, started = 0, 0, time.perf_counter()
    minibatch = noise.kind == "minibatch"
    if minibatch and landscape.selected_grad is None:
        raise ValueError(f"noise minibatch needs per-sample gradients; {landscape.name} has none")
    while alive.size and t < max_steps and n_chains - alive.size - diverged.sum() < \
            math.ceil(stop_fraction * (n_chains - diverged.sum())):
        m, k = alive.size, min(block, max_steps - t)
        if minibatch:
            draws = noise.draw(rng, (k, m), xp, n_samples=landscape.n_samples, device=dev)
        else:
            draws = noise.draw(rng, (k, dim, m), xp, device=dev, dtype=dtype)
        hits = np.zeros((k, m), bool) if xp is np else xp.zeros((k, m), dtype=xp.bool,
                                                                  device=dev)
        bad = np.zeros((k, m), bool) if xp is np else xp.zeros((k, m), dtype=xp.bool,
                                                                 device=dev)
        with np.errstate(over="ignore", invalid="ignore"):
            for s in range(k):
                c = tuple(coords)
                if minibatch:
                    coords = [c[0] - eta * landscape.selected_grad(c, draws[s], xp).mean(1)]
                else:
                    g = landscape.grad(c, xp)
                    z = noise.values(draws[s], c, xp)
                    coords = [c[d] - eta * (g[d] + z[d]) for d in range(dim)]
                finite = xp.isfinite(coords[0])
                for d in range(1, dim):
                    finite = finite & xp.isfinite(coords[d])
                # once non-finite, always flagged (the state never recovers)
                bad[s] = ~finite if s == 0 else bad[s - 1] | ~finite
                if landscape.clamp:
                    coords = [xp.clip(coords[d], lo[d], hi[d]) if xp is np
                              else coords[d].clamp(lo[d], hi[d]) for d in range(dim)]
                hits[s] = target.contains(tuple(coords), xp) & ~bad[s]
        hits_np = to_np(hits)
        bad_np = to_np(bad)
        any_hit = hits_np.any(0)
        first = hits_np.argmax(0)
        # a chain that hit before it diverged is a hit; one that diverged first is not
        first_bad = np.where(bad_np.any(0), bad_np.argmax(0), k)
        any_hit &= first < first_bad
        any_bad = bad_np.any(0) & ~any_hit
        tau[alive[any_hit]] = t + 1 + first[any_hit]
        tau[alive[any_bad]] = t + 1 + first_bad[any_bad]
        diverged[alive[any_bad]] = True
        chain_steps += m * k
        t += k
        if any_hit.any() or any_bad.any():
            keep = ~(any_hit | any_bad)
            alive = alive[keep]
            sel = keep if xp is np else xp.as_tensor(keep, device=dev)
            coords = [c[sel] for c in coords]
        if on_block is not None:
            on_block(k)
    if xp is not np and dev.type == "cuda":
        xp.cuda.synchronize()
    censored = tau < 0
    tau[censored] = t
    if diverged.any():
        logger.warning("sgd_hitting Monte Carlo on %s at η = %g: %d of %d chains diverged "
                       "(non-finite state); they are left out of the estimators, never counted "
                       "as hits", landscape.name, eta, int(diverged.sum()), n_chains)
    return HittingSample(tau, censored, t, chain_steps, time.perf_counter() - started,
                         diverged)


# -------------------------------------------------------------------------------- estimators
def censored_mean(tau: np.ndarray, censored: np.ndarray) -> float:
    """Censored-exponential MLE of the mean: total time on test over the number of hits."""
    tau = np.asarray(tau, float)
    censored = np.asarray(censored, bool)
    if tau.size == 0 or tau.shape != censored.shape:
        raise ValueError("censored_mean: tau and censored must be non-empty and of one shape")
    if np.any(~np.isfinite(tau)) or np.any(tau < 0):
        raise ValueError("censored_mean: hitting times must be finite and non-negative")
    hits = int((~censored).sum())
    return float(tau.sum() / hits) if hits else math.inf


def censored_median(tau: np.ndarray, censored: np.ndarray) -> float:
    """Median of the hitting times (censored values sit at the stop time, beyond every hit);
    NaN unless more than half of the chains hit."""
    tau = np.asarray(tau, float)
    if (~np.asarray(censored, bool)).mean() <= 0.5:
        return math.nan
    return float(np.median(tau))


def bootstrap_ci(tau: np.ndarray, censored: np.ndarray, stat: Callable, n_boot: int,
                 rng: np.random.Generator, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap over chains of ``stat(tau, censored)``."""
    n = len(tau)
    values = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        values.append(stat(tau[idx], censored[idx]))
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    a = (1 - level) / 2
    return float(np.quantile(values, a)), float(np.quantile(values, 1 - a))


def ks_exponential(tau: np.ndarray, censored: np.ndarray, mean: float) -> float:
    """Kolmogorov–Smirnov distance of τ/mean against Exp(1), over the uncensored range."""
    tau = np.asarray(tau, float)
    n = len(tau)
    hits = np.sort(tau[~np.asarray(censored, bool)])
    if hits.size == 0 or not math.isfinite(mean) or mean <= 0:
        return math.nan
    model = -np.expm1(-hits / mean)
    upper = np.arange(1, hits.size + 1) / n
    lower = np.arange(0, hits.size) / n
    return float(max(np.max(np.abs(upper - model)), np.max(np.abs(model - lower))))
