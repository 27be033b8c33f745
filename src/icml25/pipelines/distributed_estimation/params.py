"""Parameters of the distributed_estimation pipeline, validated before any node runs.

``conf/*/parameters_distributed_estimation.yml``. Every choice the paper leaves open is a
parameter here (see ``docs/papers/distributed_estimation.md``). Bad input fails with its full
key: a bit budget ``l < 1``, a smoothness outside the Haar range ``(0, 1]``, or a sweep point
with ``n·m`` too small for any estimate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.distributed_estimation.functions import MODELS
from icml25.pipelines.distributed_estimation.simulator import LAYERED, SIMULATED
from icml25.pipelines.distributed_estimation.theory import SMOOTHNESS_RANGE

Protocol = Literal[(*SIMULATED, LAYERED)]  # type: ignore[valid-type]


class FunctionParams(ParamsModel):
    kind: Literal["d1", "d2"]
    s: float = Field(description="smoothness used by the theory (D1: effective s = 1 for Haar)")
    c: float = Field(default=0.1, gt=0, le=0.2)
    levels: int = Field(default=12, ge=1, le=14)
    seed: int = Field(default=7, ge=0)

    @field_validator("s")
    @classmethod
    def _smoothness(cls, s: float) -> float:
        lo, hi = SMOOTHNESS_RANGE
        if not lo < s <= hi:
            raise ValueError(f"smoothness must lie in ({lo}, {hi}] (Haar histograms), got {s}")
        return s


class SweepParams(ParamsModel):
    role: Literal["n_sweep", "m_sweep", "l_sweep", "regression", "phase"]
    function: str
    model: Literal[MODELS] = "density"  # type: ignore[valid-type]
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
        bad = [v for v in values if v < 1]
        if bad:
            raise ValueError(f"bit budget b = l must be >= 1 bit per terminal, got {bad}")
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
        if self.role == "regression" and self.model == "density":
            raise ValueError("a regression sweep needs a regression model")
        if self.role != "regression" and self.model != "density":
            raise ValueError(f"role {self.role} is for density estimation")
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
            smallest = min(sweep.m) * min(sweep.n)
            if smallest < self.sim.min_total_samples:
                raise ValueError(f"sweeps.{name}: n·m = {smallest} is too small for any estimate "
                                 f"(need >= sim.min_total_samples = {self.sim.min_total_samples})")
        return self

    def seeds_of(self, sweep: str) -> list[int]:
        return self.sweeps[sweep].seeds or self.seeds
