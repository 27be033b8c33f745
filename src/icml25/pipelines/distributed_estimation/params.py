"""Parameters of the distributed_estimation pipeline, validated before any node runs.

``conf/*/parameters_distributed_estimation.yml``. Every choice the paper leaves open is a
parameter here (see ``docs/papers/distributed_estimation.md``): the target functions
(``functions``: D1, D2 or a Python callable ``"module:attr"``) and the statistical models
(``models``: the noise, σ(x), the target's range and the clipping interval). Bad input fails with
its full key: a bit budget ``l < 0``, a smoothness outside the Haar range ``(0, 1]``, a callable
that cannot be imported, a sweep naming a model that is not defined, or a sweep point with
``n·m`` too small for any estimate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.distributed_estimation.functions import (
    NOISES,
    ModelSpec,
    resolve_callable,
)
from icml25.pipelines.distributed_estimation.simulator import LAYERED, SIMULATED
from icml25.pipelines.distributed_estimation.theory import SMOOTHNESS_RANGE

Protocol = Literal[(*SIMULATED, LAYERED)]  # type: ignore[valid-type]


def _callable_ref(ref: str) -> str:
    resolve_callable(ref, "callable")  # imports it: a typo fails here, before any node runs
    return ref


class FunctionParams(ParamsModel):
    kind: Literal["d1", "d2", "callable"]
    s: float = Field(description="smoothness used by the theory (D1: effective s = 1 for Haar)")
    c: float = Field(default=0.1, gt=0, le=0.2)
    levels: int = Field(default=12, ge=1, le=14)
    seed: int = Field(default=7, ge=0)
    callable: str | None = Field(default=None, description="'module:attr' of f(x) on [0, 1]")

    @field_validator("callable")
    @classmethod
    def _importable(cls, ref: str | None) -> str | None:
        return None if ref is None else _callable_ref(ref)

    @model_validator(mode="after")
    def _kind(self) -> FunctionParams:
        if (self.kind == "callable") != (self.callable is not None):
            raise ValueError("callable: 'module:attr' is given exactly when kind is 'callable'")
        return self

    @field_validator("s")
    @classmethod
    def _smoothness(cls, s: float) -> float:
        lo, hi = SMOOTHNESS_RANGE
        if not lo < s <= hi:
            raise ValueError(f"smoothness must lie in ({lo}, {hi}] (Haar histograms), got {s}")
        return s


class ModelParams(ParamsModel):
    """One statistical model (``models.<name>``), see :class:`functions.ModelSpec`."""

    noise: Literal[NOISES]  # type: ignore[valid-type]
    sigma: float | list[float] | str | None = Field(
        default=None, description="Gaussian σ(x): a constant, polynomial coefficients "
        "[a0, a1, ...] in x, or 'module:attr'")
    range: list[float] | None = Field(
        default=None, description="[a, b]: map the function affinely onto [a, b]; null: as given")
    clip: list[float] | None = Field(default=None, description="[lo, hi] of the rounding "
                                     "reduction; null: the default rule (sim.clip_z)")
    law: str | None = Field(default=None, description="noise 'law': 'module:attr' of law(f, x) "
                            "returning a frozen scipy.stats distribution of Y")

    @field_validator("sigma")
    @classmethod
    def _sigma(cls, sigma):
        if isinstance(sigma, str):
            return _callable_ref(sigma)
        if isinstance(sigma, list) and not sigma:
            raise ValueError("polynomial coefficients of σ(x) must not be empty")
        if isinstance(sigma, float | int) and not sigma > 0:
            raise ValueError(f"σ must be > 0, got {sigma}")
        return sigma

    @field_validator("law")
    @classmethod
    def _law(cls, ref: str | None) -> str | None:
        return None if ref is None else _callable_ref(ref)

    @field_validator("range", "clip")
    @classmethod
    def _interval(cls, pair: list[float] | None) -> list[float] | None:
        if pair is not None and (len(pair) != 2 or not pair[0] < pair[1]):
            raise ValueError(f"must be an interval [a, b] with a < b, got {pair}")
        return pair

    @model_validator(mode="after")
    def _consistent(self) -> ModelParams:
        if (self.noise == "gaussian") != (self.sigma is not None):
            raise ValueError("sigma is given exactly for Gaussian noise")
        if (self.noise == "law") != (self.law is not None):
            raise ValueError("law: 'module:attr' is given exactly for noise 'law'")
        if self.noise == "density" and self.clip is not None:
            raise ValueError("a density has no clipping interval")
        if self.noise == "bernoulli" and self.clip not in (None, [0.0, 1.0]):
            raise ValueError("binary Y is its own rounding bit: clip must be [0, 1] or null")
        return self

    def spec(self) -> ModelSpec:
        sigma = tuple(self.sigma) if isinstance(self.sigma, list) else self.sigma
        return ModelSpec(self.noise, sigma=sigma,
                         target_range=tuple(self.range) if self.range else None,
                         clip=tuple(self.clip) if self.clip else None, law=self.law)


class SweepParams(ParamsModel):
    role: Literal["n_sweep", "m_sweep", "l_sweep", "regression", "phase"]
    function: str
    model: str = "density"
    axis: Literal["n", "m", "l"]
    m: list[int] = Field(min_length=1)
    n: list[int] = Field(min_length=1)
    l: list[int] = Field(min_length=1)  # noqa: E741 - the paper's name for the bit budget
    protocols: list[Protocol] = Field(min_length=1)  # type: ignore[valid-type]
    seeds: Seeds | None = None
    check_flat: bool = False

    @field_validator("l")
    @classmethod
    def _bits(cls, values: list[int]) -> list[int]:
        bad = [v for v in values if v < 0]
        if bad:
            raise ValueError(f"bit budget l must be >= 0 bits per terminal, got {bad}")
        return values

    @field_validator("m", "n")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values):
            raise ValueError(f"must be positive integers, got {values}")
        return values

    @model_validator(mode="after")
    def _shape(self) -> SweepParams:
        for key in ("m", "n", "l"):
            vals = getattr(self, key)
            if key != self.axis and len(vals) != 1 and self.role != "phase":
                raise ValueError(f"{key} must hold one value (the sweep runs along {self.axis})")
            if vals != sorted(set(vals)):
                raise ValueError(f"{key} must be strictly increasing, got {vals}")
        if self.role == "phase" and self.axis != "n":
            raise ValueError("the phase sweep runs along n (for each l)")
        return self


class GridParams(ParamsModel):
    k_log2_min: int = Field(default=1, ge=1)
    k_log2_max: int = Field(default=9, le=12)
    c_v: float = Field(default=1.0, gt=0)
    medium_log: Literal["continuous", "one_plus"] = "continuous"

    @model_validator(mode="after")
    def _order(self) -> GridParams:
        if self.k_log2_min > self.k_log2_max:
            raise ValueError("k_log2_min must be <= k_log2_max")
        return self

    @property
    def k_grid(self) -> list[int]:
        return [2**j for j in range(self.k_log2_min, self.k_log2_max + 1)]


class SimParams(ParamsModel):
    base_seed: int = Field(ge=0)
    width_factor: float = Field(default=3.0, gt=1)
    quant_bits: Literal[1, 2] = 2
    clip_z: float = Field(default=3.0, gt=0)
    min_total_samples: int = Field(default=8, ge=2)
    advantage: float = Field(default=1.5, gt=1)
    min_slope_points: int = Field(default=3, ge=2)


class DistributedEstimationParams(ParamsModel):
    seeds: Seeds
    progress: bool = True
    functions: dict[str, FunctionParams] = Field(min_length=1)
    models: dict[str, ModelParams] = Field(min_length=1)
    grid: GridParams
    sim: SimParams
    sweeps: dict[str, SweepParams] = Field(min_length=1)
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> DistributedEstimationParams:
        for name, sweep in self.sweeps.items():
            if sweep.function not in self.functions:
                raise ValueError(f"sweeps.{name}.function {sweep.function!r} is not one of "
                                 f"functions {sorted(self.functions)}")
            if sweep.model not in self.models:
                raise ValueError(f"sweeps.{name}.model {sweep.model!r} is not one of "
                                 f"models {sorted(self.models)}")
            density = self.models[sweep.model].noise == "density"
            if (sweep.role == "regression") == density:
                raise ValueError(f"sweeps.{name}: role {sweep.role} needs "
                                 f"{'a regression' if density else 'a density'} model, got "
                                 f"{sweep.model!r} (noise {self.models[sweep.model].noise})")
            smallest = min(sweep.m) * min(sweep.n)
            if smallest < self.sim.min_total_samples:
                raise ValueError(f"sweeps.{name}: n·m = {smallest} is too small for any estimate "
                                 f"(need >= sim.min_total_samples = {self.sim.min_total_samples})")
        return self

    def seeds_of(self, sweep: str) -> list[int]:
        return self.sweeps[sweep].seeds or self.seeds
