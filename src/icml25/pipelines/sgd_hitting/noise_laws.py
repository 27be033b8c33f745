"""Gradient-noise laws of SGD ``x_{n+1} = x_n - η (∇f(x_n) + Z_{n+1}(x_n))`` and their log-mgfs.

The large-deviation costs of the paper depend on the whole law of Z through its cumulant
generating function ``H(x, p) = log E exp(<p, Z(x)>)``. Each law here gives
- ``draw(rng, shape, xp)``: a block of samples (NumPy ``Generator`` or ``torch.Generator``);
- ``log_mgf(x, p)``: H for scalar ``p`` in 1-D (``inf`` where the mgf does not exist);
- ``variance(x)``: the variance, for the Gaussian approximation (baseline B1);
- ``cdf`` (continuous laws) or ``atoms`` (discrete laws), for the exact 1-D kernel.

Closed forms for unit variance: Gaussian p²/2, Rademacher log cosh p,
centred Exp(1) ``-p - log(1-p)``. The finite-sum mini-batch with replacement of size b has
``H_b(x, p) = b · log mean_i exp(p ξ_i(x) / b)``, ``ξ_i = g_i - ∇f`` (so ``L_b = b L_1``).
Student-t has no finite mgf: it is kept only as a contrast, flagged outside the theory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from icml25.pipelines.sgd_hitting.landscapes import Landscape


class OutsideTheoryError(ValueError):
    """A noise law without a finite moment generating function where the theory needs one."""


@dataclass(frozen=True)
class NoiseLaw:
    """One noise law. ``kind`` ∈ gaussian | rademacher | centred_exp | minibatch | student_t.

    ``scale``: per-coordinate standard deviations (Gaussian: σ per axis, constant covariance
    ``diag(scale²)``); Rademacher ±scale; centred exponential ``scale·(E - 1)``, E ~ Exp(1);
    Student-t ``scale · t_ν``. ``batch``: the mini-batch size b (with replacement).
    """

    kind: str
    scale: tuple[float, ...] = (1.0,)
    batch: int = 1
    nu: float = 3.0

    def __post_init__(self) -> None:
        kinds = ("gaussian", "rademacher", "centred_exp", "minibatch", "student_t")
        if self.kind not in kinds:
            raise ValueError(f"noise kind {self.kind!r}: expected one of {kinds}")
        if any(not math.isfinite(s) or s < 0 for s in self.scale):
            raise ValueError(f"noise scale {self.scale}: expected finite non-negative values")
        if self.batch < 1:
            raise ValueError(f"noise batch {self.batch}: expected a positive integer")

    # -------------------------------------------------------------------------- properties
    @property
    def name(self) -> str:
        if self.kind == "minibatch":
            return f"minibatch_b{self.batch}"
        return self.kind

    @property
    def finite_mgf(self) -> bool:
        """Light tails (the theory's assumption): every law here except Student-t."""
        return self.kind != "student_t"

    @property
    def continuous(self) -> bool:
        return self.kind in ("gaussian", "centred_exp", "student_t")

    def require_finite_mgf(self, context: str) -> None:
        if not self.finite_mgf:
            raise OutsideTheoryError(
                f"{context}: noise {self.kind!r} has no finite moment generating function; it "
                "is outside the theory (costs, energies and predictions are undefined)")

    def sd(self, axis: int = 0) -> float:
        return float(self.scale[axis] if len(self.scale) > axis else self.scale[-1])

    # ------------------------------------------------------------------------------ sampling
    def draw(self, rng: Any, shape: tuple[int, ...], xp: Any = np, n_samples: int = 0,
             device: Any = None, dtype: Any = None) -> Any:
        """A block of draws for ``shape``: values of Z, or for mini-batches sample indices
        of shape ``(*shape, batch)`` in ``[0, n_samples)``."""
        if xp is np:
            if self.kind == "gaussian":
                return rng.standard_normal(shape)
            if self.kind == "rademacher":
                return rng.integers(0, 2, size=shape).astype(np.float64) * 2.0 - 1.0
            if self.kind == "centred_exp":
                return rng.standard_exponential(shape) - 1.0
            if self.kind == "student_t":
                return rng.standard_t(self.nu, size=shape)
            return rng.integers(0, n_samples, size=(*shape, self.batch))
        kw = {"generator": rng, "device": device}
        if self.kind == "gaussian":
            return xp.randn(shape, dtype=dtype, **kw)
        if self.kind == "rademacher":
            return xp.randint(0, 2, shape, **kw).to(dtype) * 2 - 1
        if self.kind == "centred_exp":
            return xp.empty(shape, dtype=dtype, device=device).exponential_(generator=rng) - 1
        if self.kind == "student_t":
            z = xp.randn(shape, dtype=dtype, **kw)
            chi2 = 2 * xp._standard_gamma(xp.full(shape, self.nu / 2, dtype=dtype,
                                                   device=device), generator=rng)
            return z / xp.sqrt(chi2 / self.nu)
        return xp.randint(0, n_samples, (*shape, self.batch), **kw)

    # --------------------------------------------------------------------- 1-D large deviations
    def xi(self, landscape: Landscape, x: float) -> np.ndarray:
        """Centred per-sample gradient deviations ``ξ_i(x) = g_i(x) - f'(x)`` (finite sums)."""
        if landscape.per_sample_grad is None:
            raise ValueError(f"noise minibatch needs a finite-sum landscape; {landscape.name} "
                             "has no per-sample gradients")
        g = np.asarray(landscape.per_sample_grad((np.asarray([x], float),), np)).reshape(-1)
        return g - g.mean()

    def log_mgf(self, p: float, x: float = 0.0, landscape: Landscape | None = None) -> float:
        """``H(x, p) = log E exp(p Z(x))`` in 1-D; ``inf`` where the mgf does not exist."""
        s = self.sd()
        if self.kind == "gaussian":
            return 0.5 * (s * p) ** 2
        if self.kind == "rademacher":
            q = abs(s * p)
            return q + math.log1p(math.exp(-2 * q)) - math.log(2.0)  # log cosh, overflow-safe
        if self.kind == "centred_exp":
            q = s * p
            return -q - math.log1p(-q) if q < 1 else math.inf
        if self.kind == "student_t":
            return 0.0 if p == 0 else math.inf
        xi = self.xi(landscape, x)
        b = self.batch
        return b * (special.logsumexp(p * xi / b) - math.log(len(xi)))

    def log_mgf_at(self, x: float, landscape: Landscape | None = None) -> Any:
        """``p ↦ H(x, p)`` at a fixed state (the finite-sum deviations computed once)."""
        if self.kind != "minibatch":
            return lambda p: self.log_mgf(p, x, landscape)
        xi = self.xi(landscape, x)
        b, log_n = self.batch, math.log(len(xi))

        def h(p: float) -> float:
            a = p * xi / b
            top = a.max()
            return b * (top + math.log(np.exp(a - top).sum()) - log_n)
        return h

    def p_limit(self) -> tuple[float, float]:
        """The open interval of p on which ``H(·, p)`` is finite."""
        s = self.sd()
        if self.kind == "centred_exp":
            return (-math.inf, 1.0 / s if s > 0 else math.inf)
        if self.kind == "student_t":
            return (0.0, 0.0)
        return (-math.inf, math.inf)

    def variance(self, x: float = 0.0, landscape: Landscape | None = None,
                 axis: int = 0) -> float:
        """Var Z(x) (per coordinate): what the Gaussian approximation B1 keeps."""
        if self.kind == "minibatch":
            return float(np.mean(self.xi(landscape, x) ** 2)) / self.batch
        if self.kind == "student_t":
            return self.sd(axis) ** 2 * self.nu / (self.nu - 2) if self.nu > 2 else math.inf
        return self.sd(axis) ** 2

    # ------------------------------------------------------------------------ exact kernels
    def cdf(self, z: np.ndarray) -> np.ndarray:
        """CDF of Z (continuous laws, 1-D)."""
        s = self.sd()
        if self.kind == "gaussian":
            return special.ndtr(z / s)
        if self.kind == "centred_exp":
            u = np.maximum(z / s + 1.0, 0.0)
            return -np.expm1(-u)
        if self.kind == "student_t":
            return stats.t.cdf(z / s, self.nu)
        raise ValueError(f"noise {self.kind!r} is atomic; use atoms()")

    def support(self) -> tuple[float, float]:
        """An interval holding all but ~1e-17 of the mass of Z (continuous laws)."""
        s = self.sd()
        if self.kind == "gaussian":
            return (-9.0 * s, 9.0 * s)
        if self.kind == "centred_exp":
            return (-s, 40.0 * s)
        return (-1e3 * s, 1e3 * s)

    def atoms(self, landscape: Landscape, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Atomic laws at the states ``x`` (shape (n,)): values (n, m) and weights (m,)."""
        if self.kind == "rademacher":
            s = self.sd()
            return np.tile(np.array([-s, s]), (len(x), 1)), np.array([0.5, 0.5])
        if self.kind == "minibatch":
            g = np.asarray(landscape.per_sample_grad((np.asarray(x, float),), np))  # (N, n)
            xi = (g - g.mean(0, keepdims=True)).T  # (n, N)
            n_s, b = xi.shape[1], self.batch
            values, weights = xi, np.full(n_s, 1.0 / n_s)
            for _ in range(b - 1):  # law of the sum over b draws with replacement
                values = (values[:, :, None] + xi[:, None, :]).reshape(len(x), -1)
                weights = np.outer(weights, np.full(n_s, 1.0 / n_s)).reshape(-1)
            return values / b, weights
        raise ValueError(f"noise {self.kind!r} is continuous; use cdf()")


def noise_from_config(config: dict[str, Any]) -> NoiseLaw:
    """A :class:`NoiseLaw` from its parameter block (``kind``, ``scale``, ``batch``, ``nu``)."""
    cfg = dict(config)
    scale = cfg.pop("scale", 1.0)
    scale = tuple(float(s) for s in scale) if isinstance(scale, list | tuple) else (float(scale),)
    return NoiseLaw(scale=scale, **cfg)
