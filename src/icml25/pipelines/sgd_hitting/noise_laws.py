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

Beyond these closed forms (each configured in ``conf``, see ``noise_from_config``):
- a state-dependent scale ``σ(x)``: ``Z(x) = σ(x) ξ`` with ξ one of the unit laws above, given
  as a Python callable ``"module:attr"`` with the signature of a landscape's gradient
  (``scale_fn(coords, xp)`` → one array per coordinate); then ``H(x, p) = H_ξ(σ(x) p)``;
- a full constant covariance Σ for Gaussian noise, ``Z = L ξ`` with ``Σ = L Lᵀ`` (Cholesky);
- a user-defined law (``kind: custom``): a callable ``"module:attr"`` returning an object with
  ``sample(rng, shape)`` (NumPy ``Generator``), ``log_mgf(p)``, ``variance``, ``continuous`` and
  either ``cdf(z)`` and ``support`` (continuous) or ``atoms`` = (values, weights) (atomic);
  it is the law of ξ, checked to be centred, and is scaled by ``scale`` or ``σ(x)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from icml25.pipelines.sgd_hitting.landscapes import Landscape


class OutsideTheoryError(ValueError):
    """A noise law without a finite moment generating function where the theory needs one."""


KINDS = ("gaussian", "rademacher", "centred_exp", "minibatch", "student_t", "custom")


@dataclass(frozen=True)
class NoiseLaw:
    """One noise law. ``kind`` ∈ gaussian | rademacher | centred_exp | minibatch | student_t |
    custom.

    ``scale``: per-coordinate standard deviations (Gaussian: σ per axis, constant covariance
    ``diag(scale²)``); Rademacher ±scale; centred exponential ``scale·(E - 1)``, E ~ Exp(1);
    Student-t ``scale · t_ν``; custom ``scale · ξ``. ``batch``: the mini-batch size b (with
    replacement). ``covariance``: a full constant Σ (Gaussian only; replaces ``scale``).
    ``scale_fn``: a state-dependent σ(x) (replaces ``scale``). ``law``: the unit law ξ of a
    custom kind. ``label``: the names of the callables, for keys and logs.
    """

    kind: str
    scale: tuple[float, ...] = (1.0,)
    batch: int = 1
    nu: float = 3.0
    covariance: tuple[tuple[float, ...], ...] | None = None
    scale_fn: Callable[..., Any] | None = field(default=None, compare=False)
    law: Any = field(default=None, compare=False)
    label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"noise kind {self.kind!r}: expected one of {KINDS}")
        if any(not math.isfinite(s) or s < 0 for s in self.scale):
            raise ValueError(f"noise scale {self.scale}: expected finite non-negative values")
        if self.batch < 1:
            raise ValueError(f"noise batch {self.batch}: expected a positive integer")
        if self.kind == "custom" and self.law is None:
            raise ValueError("noise kind 'custom' needs a law (a callable named 'module:attr')")
        if self.kind == "custom":
            check_unit_law(self.law, self.label or "custom law")
        if self.covariance is not None:
            if self.kind != "gaussian":
                raise ValueError(f"noise covariance: a full covariance is for Gaussian noise, "
                                 f"got kind {self.kind!r}")
            cov = np.asarray(self.covariance, float)
            if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.all(np.isfinite(cov)) \
                    or not np.allclose(cov, cov.T, rtol=1e-12, atol=1e-14):
                raise ValueError(f"noise covariance {self.covariance}: expected a finite "
                                 "symmetric square matrix")
            try:
                chol = np.linalg.cholesky(cov)
            except np.linalg.LinAlgError:
                raise ValueError(f"noise covariance {self.covariance}: not positive "
                                 "definite") from None
            object.__setattr__(self, "_chol", chol)
            object.__setattr__(self, "scale", tuple(float(v) for v in np.sqrt(np.diag(cov))))
        if self.scale_fn is not None and self.kind == "minibatch":
            raise ValueError("noise scale_fn: mini-batch noise is set by the data, not a scale")
        if self.scale_fn is not None and self.covariance is not None:
            raise ValueError("noise: give either a covariance or a scale_fn, not both")

    # -------------------------------------------------------------------------- properties
    @property
    def name(self) -> str:
        if self.kind == "minibatch":
            return f"minibatch_b{self.batch}"
        return f"custom_{self.label}" if self.kind == "custom" else self.kind

    @property
    def key(self) -> str:
        """What identifies the law (the cost cache key)."""
        parts = [self.kind, str(list(self.scale)), f"b{self.batch}"]
        if self.covariance is not None:
            parts.append(f"cov{[list(r) for r in self.covariance]}")
        if self.label:
            parts.append(self.label)
        return "|".join(parts)

    @property
    def state_dependent(self) -> bool:
        return self.scale_fn is not None

    @property
    def isotropic_constant(self) -> bool:
        """Σ = σ² I, the same at every state (where Eyring–Kramers applies)."""
        if self.state_dependent or self.kind in ("minibatch", "custom"):
            return False
        if self.covariance is not None:
            cov = np.asarray(self.covariance, float)
            return bool(np.allclose(cov, cov[0, 0] * np.eye(len(cov)), rtol=1e-12))
        return len({round(s, 12) for s in self.scale}) == 1

    @property
    def finite_mgf(self) -> bool:
        """Light tails (the theory's assumption): every law here except Student-t."""
        return self.kind != "student_t"

    @property
    def continuous(self) -> bool:
        if self.kind == "custom":
            return bool(self.law.continuous)
        return self.kind in ("gaussian", "centred_exp", "student_t")

    def require_finite_mgf(self, context: str) -> None:
        if not self.finite_mgf:
            raise OutsideTheoryError(
                f"{context}: noise {self.kind!r} has no finite moment generating function; it "
                "is outside the theory (costs, energies and predictions are undefined)")

    def sd(self, axis: int = 0) -> float:
        """The constant scale on ``axis`` (the marginal sd for a full covariance)."""
        if self.state_dependent:
            raise ValueError(f"noise {self.name}: σ(x) depends on the state ({self.label}); "
                             "there is no constant scale")
        return float(self.scale[axis] if len(self.scale) > axis else self.scale[-1])

    def sd_at(self, x: Any) -> np.ndarray:
        """σ(x) of the first coordinate at the 1-D states ``x`` (constant laws: broadcast)."""
        x = np.asarray(x, float)
        if not self.state_dependent:
            return np.full(x.shape, self.sd())
        out = self.scale_fn((x,), np)
        out = out[0] if isinstance(out, tuple | list) else out
        return np.broadcast_to(np.asarray(out, float), x.shape).copy()

    def covariance_matrix(self, dim: int) -> np.ndarray:
        """The constant covariance Σ of Z (full, or ``diag(scale²)``)."""
        if self.covariance is not None:
            return np.asarray(self.covariance, float)
        var = 1.0 if self.kind != "custom" else float(self.law.variance)
        return np.diag([self.sd(k) ** 2 * var for k in range(dim)])

    # ------------------------------------------------------------------------------ sampling
    def draw(self, rng: Any, shape: tuple[int, ...], xp: Any = np, n_samples: int = 0,
             device: Any = None, dtype: Any = None) -> Any:
        """A block of draws of the unit law ξ for ``shape``, or for mini-batches sample indices
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
            if self.kind == "custom":
                return np.asarray(self.law.sample(rng, shape), float).reshape(shape)
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
        if self.kind == "custom":  # the user's NumPy sampler, seeded from the torch stream
            seed = int(xp.randint(0, 2**62, (1,), generator=rng, device=device).item())
            values = self.law.sample(np.random.default_rng(seed), shape)
            return xp.as_tensor(np.asarray(values, float).reshape(shape), dtype=dtype,
                                device=device)
        return xp.randint(0, n_samples, (*shape, self.batch), **kw)

    def values(self, draw: Any, coords: tuple[Any, ...], xp: Any = np) -> list[Any]:
        """Z at the states ``coords`` from one step's unit draws ``draw`` (shape (d, m)):
        ``scale·ξ`` per axis, ``L ξ`` for a full covariance, ``σ(x)·ξ`` state-dependent."""
        dim = len(coords)
        if self.covariance is not None:
            chol = self._chol  # type: ignore[attr-defined]
            return [sum(float(chol[a, k]) * draw[k] for k in range(a + 1) if chol[a, k] != 0)
                    for a in range(dim)]
        if self.state_dependent:
            s = self.scale_fn(coords, xp)
            s = s if isinstance(s, tuple | list) else (s,) * dim
            return [s[a] * draw[a] for a in range(dim)]
        return [self.sd(a) * draw[a] for a in range(dim)]

    # --------------------------------------------------------------------- 1-D large deviations
    def xi(self, landscape: Landscape, x: float) -> np.ndarray:
        """Centred per-sample gradient deviations ``ξ_i(x) = g_i(x) - f'(x)`` (finite sums)."""
        if landscape.per_sample_grad is None:
            raise ValueError(f"noise minibatch needs a finite-sum landscape; {landscape.name} "
                             "has no per-sample gradients")
        g = np.asarray(landscape.per_sample_grad((np.asarray([x], float),), np)).reshape(-1)
        return g - g.mean()

    def _unit_log_mgf(self, q: float) -> float:
        """log E exp(q ξ) of the unit law."""
        if self.kind == "gaussian":
            return 0.5 * q * q
        if self.kind == "rademacher":
            a = abs(q)
            return a + math.log1p(math.exp(-2 * a)) - math.log(2.0)  # log cosh, overflow-safe
        if self.kind == "centred_exp":
            return -q - math.log1p(-q) if q < 1 else math.inf
        if self.kind == "student_t":
            return 0.0 if q == 0 else math.inf
        return float(self.law.log_mgf(q))

    def _scale_at(self, x: float) -> float:
        return float(self.sd_at(np.array([x]))[0]) if self.state_dependent else self.sd()

    def log_mgf(self, p: float, x: float = 0.0, landscape: Landscape | None = None) -> float:
        """``H(x, p) = log E exp(p Z(x))`` in 1-D; ``inf`` where the mgf does not exist."""
        if self.kind != "minibatch":
            return self._unit_log_mgf(self._scale_at(x) * p)
        xi = self.xi(landscape, x)
        b = self.batch
        return b * (special.logsumexp(p * xi / b) - math.log(len(xi)))

    def log_mgf_at(self, x: float, landscape: Landscape | None = None) -> Any:
        """``p ↦ H(x, p)`` at a fixed state (the finite-sum deviations computed once)."""
        if self.kind != "minibatch":
            s = self._scale_at(x)
            return lambda p: self._unit_log_mgf(s * p)
        xi = self.xi(landscape, x)
        b, log_n = self.batch, math.log(len(xi))

        def h(p: float) -> float:
            a = p * xi / b
            top = a.max()
            return b * (top + math.log(np.exp(a - top).sum()) - log_n)
        return h

    def p_limit(self) -> tuple[float, float]:
        """The open interval of p on which ``H(·, p)`` is finite (constant scale)."""
        s = self.sd()
        if self.kind == "centred_exp":
            return (-math.inf, 1.0 / s if s > 0 else math.inf)
        if self.kind == "student_t":
            return (0.0, 0.0)
        return (-math.inf, math.inf)

    def unit_variance(self) -> float:
        if self.kind == "student_t":
            return self.nu / (self.nu - 2) if self.nu > 2 else math.inf
        if self.kind == "custom":
            return float(self.law.variance)
        return 1.0

    def variance(self, x: float = 0.0, landscape: Landscape | None = None,
                 axis: int = 0) -> float:
        """Var Z(x) (per coordinate): what the Gaussian approximation B1 keeps."""
        if self.kind == "minibatch":
            return float(np.mean(self.xi(landscape, x) ** 2)) / self.batch
        s = self._scale_at(x) if self.state_dependent else self.sd(axis)
        return s**2 * self.unit_variance()

    # ------------------------------------------------------------------------ exact kernels
    def cdf(self, z: np.ndarray, scale: Any = None) -> np.ndarray:
        """CDF of Z (continuous laws, 1-D) at ``z``; ``scale`` (broadcastable to ``z``) is
        σ(x) for state-dependent laws (default: the constant scale)."""
        s = self.sd() if scale is None else scale
        if self.kind == "gaussian":
            return special.ndtr(z / s)
        if self.kind == "centred_exp":
            u = np.maximum(z / s + 1.0, 0.0)
            return -np.expm1(-u)
        if self.kind == "student_t":
            return stats.t.cdf(z / s, self.nu)
        if self.kind == "custom" and self.continuous:
            return np.clip(np.asarray(self.law.cdf(np.asarray(z / s, float)), float), 0, 1)
        raise ValueError(f"noise {self.kind!r} is atomic; use atoms()")

    def support(self, scale: Any = None) -> tuple[Any, Any]:
        """An interval holding all but ~1e-17 of the mass of Z (continuous laws)."""
        s = self.sd() if scale is None else scale
        if self.kind == "gaussian":
            return (-9.0 * s, 9.0 * s)
        if self.kind == "centred_exp":
            return (-s, 40.0 * s)
        if self.kind == "custom":
            lo, hi = self.law.support
            return (lo * s, hi * s)
        return (-1e3 * s, 1e3 * s)

    def atoms(self, landscape: Landscape, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Atomic laws at the states ``x`` (shape (n,)): values (n, m) and weights (m,)."""
        if self.kind in ("rademacher", "custom"):
            if self.kind == "rademacher":
                unit, weights = np.array([-1.0, 1.0]), np.array([0.5, 0.5])
            else:
                unit, weights = (np.asarray(a, float) for a in self.law.atoms)
            s = self.sd_at(x)
            return s[:, None] * unit[None, :], weights
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


def check_unit_law(law: Any, what: str) -> None:
    """A user-defined unit law must be centred with finite positive variance, a finite log-mgf
    near 0 and either a CDF with a support or atoms summing to one; a clear error otherwise."""
    for attr in ("sample", "log_mgf", "variance", "continuous"):
        if not hasattr(law, attr):
            raise ValueError(f"{what}: a noise law needs '{attr}' (sample, log_mgf, variance, "
                             "continuous, and cdf + support or atoms)")
    var = float(law.variance)
    if not math.isfinite(var) or var <= 0:
        raise ValueError(f"{what}: variance {var} must be finite and > 0")
    if abs(float(law.log_mgf(0.0))) > 1e-12 or not all(
            math.isfinite(float(law.log_mgf(q))) for q in (-1e-3, 1e-3)):
        raise ValueError(f"{what}: log_mgf must be 0 at p = 0 and finite near 0 (light tails)")
    if law.continuous:
        if not hasattr(law, "cdf") or not hasattr(law, "support"):
            raise ValueError(f"{what}: a continuous law needs cdf(z) and support = (lo, hi)")
        lo, hi = (float(v) for v in law.support)
        if not lo < 0 < hi:
            raise ValueError(f"{what}: support {law.support} must contain 0")
        z_neg, z_pos = np.linspace(lo, 0.0, 100_001), np.linspace(0.0, hi, 100_001)
        f_neg = np.asarray(law.cdf(z_neg), float)
        f_pos = np.asarray(law.cdf(z_pos), float)
        if np.any(np.diff(f_neg) < -1e-12) or np.any(np.diff(f_pos) < -1e-12) \
                or f_neg[0] > 1e-9 or f_pos[-1] < 1 - 1e-9 or f_pos[0] < f_neg[-1] - 1e-12:
            raise ValueError(f"{what}: cdf must rise from 0 to 1 over the support")
        # E ξ = ∫ (1 - F) over z > 0 minus ∫ F over z < 0
        mean = float(np.trapezoid(1 - f_pos, z_pos) - np.trapezoid(f_neg, z_neg))
    else:
        if not hasattr(law, "atoms"):
            raise ValueError(f"{what}: an atomic law needs atoms = (values, weights)")
        values, weights = (np.asarray(a, float) for a in law.atoms)
        if values.shape != weights.shape or np.any(weights < 0) or \
                abs(weights.sum() - 1) > 1e-12:
            raise ValueError(f"{what}: atoms need values and non-negative weights summing to 1")
        mean = float(values @ weights)
    if abs(mean) > 1e-6 * math.sqrt(var):
        raise ValueError(f"{what}: the law must be centred (E ξ = 0), got E ξ = {mean:.3g}")


def noise_from_config(config: dict[str, Any], where: str = "noise") -> NoiseLaw:
    """A :class:`NoiseLaw` from its parameter block: ``kind``, ``scale``, ``batch``, ``nu``,
    ``covariance`` (a full Σ, Gaussian), ``scale_fn`` (``"module:attr"``, a state-dependent
    σ(x)), ``law`` and ``options`` (``kind: custom``: ``"module:attr"`` called with
    ``**options`` returns the unit law ξ). ``where`` names the key in errors."""
    from icml25.core.named_callable import load_callable

    cfg = {k: v for k, v in dict(config).items() if v is not None}
    scale = cfg.pop("scale", 1.0)
    scale = tuple(float(s) for s in scale) if isinstance(scale, list | tuple) else (float(scale),)
    labels = []
    if "covariance" in cfg:
        cfg["covariance"] = tuple(tuple(float(v) for v in row) for row in cfg["covariance"])
    if "scale_fn" in cfg:
        labels.append(f"scale_fn={cfg['scale_fn']}")
        cfg["scale_fn"] = load_callable(cfg["scale_fn"], f"{where}.scale_fn")
    options = cfg.pop("options", {}) or {}
    if "law" in cfg:
        labels.insert(0, f"{cfg['law']}{sorted(options.items()) if options else ''}")
        factory = load_callable(cfg["law"], f"{where}.law")
        try:
            cfg["law"] = factory(**options)
        except TypeError as err:
            raise ValueError(f"{where}.options: do not fit the law {labels[0]!r}: {err}") \
                from None
    try:
        return NoiseLaw(scale=scale, label=",".join(labels), **cfg)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
