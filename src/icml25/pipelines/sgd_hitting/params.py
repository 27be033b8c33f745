"""Parameters of the sgd_hitting pipeline (``conf/*/parameters_sgd_hitting.yml``), validated once.

Bad input the issue names fails here, before any work, with the full key: a step size ≤ 0 (or
η·λ_max ≥ 2 at a minimum: divergence), a noise law without a finite moment generating function
(Student-t) where the theory needs one, a start point outside the landscape's domain.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.sgd_hitting.landscapes import build_landscape


class LandscapeParams(ParamsModel):
    """A built-in landscape, or ``kind: custom`` with ``factory: "module:attr"`` (a callable
    returning a :class:`~icml25.pipelines.sgd_hitting.landscapes.Landscape`, called with
    ``**options``)."""

    kind: Literal["tilted_double_well", "three_well", "camel", "mexican_hat", "cosine_bumps",
                  "sine_neuron", "custom"]
    options: dict[str, Any] = Field(default_factory=dict)
    factory: str | None = None

    @model_validator(mode="after")
    def _builds(self) -> LandscapeParams:
        try:
            build_landscape(self.kind, self.options, self.factory)
        except TypeError as err:
            raise ValueError(f"options do not fit landscape {self.kind!r}: {err}") from None
        return self


class NoiseParams(ParamsModel):
    """A noise law. Beyond the built-in kinds: ``covariance`` (a full constant Σ, Gaussian),
    ``scale_fn: "module:attr"`` (a state-dependent σ(x), ``scale_fn(coords, xp)`` → one array
    per coordinate), ``kind: custom`` with ``law: "module:attr"`` called with ``**options``
    (the unit law ξ, see :mod:`~icml25.pipelines.sgd_hitting.noise_laws`)."""

    kind: Literal["gaussian", "rademacher", "centred_exp", "minibatch", "student_t", "custom"]
    scale: float | list[float] = 1.0
    batch: int = Field(default=1, ge=1)
    nu: float = Field(default=3.0, gt=0)
    covariance: list[list[float]] | None = None
    scale_fn: str | None = None
    law: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("scale")
    @classmethod
    def _scale(cls, v: float | list[float]) -> float | list[float]:
        vals = v if isinstance(v, list) else [v]
        if not vals or any(not math.isfinite(s) or s < 0 for s in vals):
            raise ValueError(f"noise scale must be finite and ≥ 0, got {v}")
        return v

    @model_validator(mode="after")
    def _light_tails(self) -> NoiseParams:
        if self.kind == "student_t":
            raise ValueError("noise 'student_t' has no finite moment generating function: it is "
                             "outside the theory (large-deviation costs and E are undefined)")
        if (self.law is not None) != (self.kind == "custom"):
            raise ValueError("law: a custom noise kind needs law 'module:attr', and only it")
        from icml25.pipelines.sgd_hitting.noise_laws import noise_from_config
        noise_from_config(self.model_dump())  # imports the callables, checks Σ and the law
        return self

    def constant_scales(self) -> list[float]:
        return self.scale if isinstance(self.scale, list) else [self.scale]


class TargetParams(ParamsModel):
    kind: Literal["ball", "halfline", "annulus"]
    radius: float = Field(gt=0)
    radius0: float = Field(default=1.0, gt=0)


class AnchorParams(ParamsModel):
    """A reference value measured while this reproduction was designed
    (``docs/papers/sgd_hitting.md``, "Metrics"): a run should reproduce it within twice its
    tolerance."""

    metric: Literal["slope", "slope_logtau", "local_slope", "median_slope", "mean_at_eta"]
    value: float
    tolerance: float = Field(gt=0)
    eta: float | None = None


class ExperimentParams(ParamsModel):
    landscape: str
    noise: NoiseParams
    solver: Literal["mc", "exact"]
    etas: list[float] = Field(min_length=2)
    start: list[float] | None = None
    start_minimum: int | None = Field(default=None, ge=0)
    target: TargetParams
    n_chains: int = Field(default=1000, ge=1)
    max_steps: int = Field(default=2_000_000, ge=1)
    stop_fraction: float = Field(default=0.95, gt=0, le=1)
    median: bool = False
    grid_refine: float = Field(default=1.0, gt=0)
    walls: tuple[float, float] | None = None
    compare: Literal["slope", "local_slope", "median_slope"] = "slope"
    anchor: AnchorParams | None = None

    @field_validator("etas")
    @classmethod
    def _etas(cls, etas: list[float]) -> list[float]:
        bad = [e for e in etas if not math.isfinite(e) or e <= 0]
        if bad:
            raise ValueError(f"step sizes must be finite and > 0, got {bad}")
        if len(set(etas)) != len(etas):
            raise ValueError(f"step sizes must be distinct, got {etas}")
        return etas

    @model_validator(mode="after")
    def _start(self) -> ExperimentParams:
        if (self.start is None) == (self.start_minimum is None):
            raise ValueError("give exactly one of 'start' (coordinates) or 'start_minimum'")
        return self


class GmamParams(ParamsModel):
    n_nodes: int = Field(default=150, ge=10)
    rounds: int = Field(default=10, ge=1)
    lbfgs_iter: int = Field(default=30, ge=1)


class DerivedParams(ParamsModel):
    """Which experiments the cross-experiment checks use."""

    noise_order: list[str] = Field(default_factory=list)
    batch_ratio: tuple[str, str] | None = None
    batch_ratio_exact: tuple[str, str] | None = None
    no_spurious: tuple[str, str] | None = None  # (flat experiment, reference experiment)
    bounded_depth: list[str] = Field(default_factory=list)


@lru_cache(maxsize=64)
def _max_curvature(kind: str, options_json: str, factory: str | None = None) -> float:
    """Largest Hessian eigenvalue over the landscape's minima (cached per landscape)."""
    from icml25.pipelines.sgd_hitting.critical_points import find_critical_points

    landscape = build_landscape(kind, json.loads(options_json), factory)
    pts = find_critical_points(landscape, 4001 if landscape.dim == 1 else 400)
    return max((max(p.eig) for p in pts if p.kind == "minimum"), default=0.0)


class SgdHittingParams(ParamsModel):
    seeds: Seeds
    device: str = "cpu"
    backend: Literal["numpy", "torch"] = "numpy"
    num_threads: int = Field(default=1, ge=0)
    n_workers: int = Field(default=1, ge=1)
    progress: bool = True
    block: int = Field(default=100, ge=1)
    n_boot: int = Field(default=200, ge=0)
    markov_eps: tuple[float, float] = (0.02, 0.01)
    gmam: GmamParams = GmamParams()
    landscapes: dict[str, LandscapeParams] = Field(min_length=1)
    experiments: dict[str, ExperimentParams] = Field(min_length=1)
    derived: DerivedParams = DerivedParams()
    figures: list[str] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("markov_eps")
    @classmethod
    def _eps(cls, eps: tuple[float, float]) -> tuple[float, float]:
        if not eps[0] > eps[1] > 0:
            raise ValueError(f"markov_eps must be (ε1, ε2) with ε1 > ε2 > 0, got {eps}")
        return eps

    @model_validator(mode="after")
    def _experiments(self) -> SgdHittingParams:
        for name, exp in self.experiments.items():
            key = f"experiments.{name}"
            if exp.landscape not in self.landscapes:
                raise ValueError(f"{key}.landscape: {exp.landscape!r} is not one of "
                                 f"{sorted(self.landscapes)}")
            land = self.landscapes[exp.landscape]
            landscape = build_landscape(land.kind, land.options, land.factory,
                                        f"landscapes.{exp.landscape}")
            if exp.start is not None:
                try:
                    landscape.check_inside(np.asarray(exp.start, float))
                except ValueError as err:
                    raise ValueError(f"{key}.start: {err}") from None
            if exp.noise.kind == "minibatch" and landscape.per_sample_grad is None:
                raise ValueError(f"{key}.noise: minibatch noise needs a finite-sum landscape "
                                 f"(sine_neuron); {land.kind} has no per-sample gradients")
            if landscape.dim > 1 and exp.solver == "exact":
                raise ValueError(f"{key}.solver: the exact solver is 1-D only")
            noise = exp.noise
            if noise.covariance is not None and len(noise.covariance) != landscape.dim:
                raise ValueError(f"{key}.noise.covariance: {len(noise.covariance)}×"
                                 f"{len(noise.covariance)} for a {landscape.dim}-D landscape")
            if exp.solver == "exact" and noise.kind != "minibatch" and noise.scale_fn is None \
                    and noise.covariance is None and min(noise.constant_scales()) <= 0:
                raise ValueError(f"{key}.noise.scale: σ = {noise.scale}; the exact solver needs "
                                 "σ > 0 (with no noise, I - P_TT is singular wherever the "
                                 "deterministic path misses U)")
            curvature = _max_curvature(land.kind, json.dumps(land.options, sort_keys=True),
                                       land.factory)
            worst = max(exp.etas) * curvature
            if worst >= 2:
                raise ValueError(f"{key}.etas: η·λ_max = {worst:.3g} ≥ 2 at a minimum of "
                                 f"{land.kind} (λ_max = {curvature:.3g}): SGD diverges")
        d = self.derived
        names = [*d.noise_order, *(d.batch_ratio or ()), *(d.batch_ratio_exact or ()),
                 *(d.no_spurious or ()), *d.bounded_depth]
        missing = sorted({n for n in names if n not in self.experiments})
        if missing:
            raise ValueError(f"derived: unknown experiments {missing}")
        return self
