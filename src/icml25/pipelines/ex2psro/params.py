"""Parameters of the ex2psro pipeline (``conf/*/parameters_ex2psro.yml``), validated once.

Choices the paper leaves unconfirmed (docs/papers/ex2psro.md) are parameters here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

EXPLORE = Literal["none", "ex2psro", "maxwelfare", "minwelfare", "prevbr", "uniform"]


class GameParams(ParamsModel):
    name: Literal["bargaining", "harvest"]
    discount: float = Field(default=0.99, gt=0, le=1)   # bargaining
    max_turns: int = Field(default=10, ge=2)             # bargaining
    instances_file: str | None = None                    # bargaining; None: the paper's 20
    map: Literal["sparse", "dense"] = "sparse"           # harvest
    max_steps: int = Field(default=1000, ge=1)           # harvest episode length


class RRDParams(ParamsModel):
    lambda_init: float = Field(ge=0)
    lambda_final: float = Field(ge=0)
    steps: int = Field(ge=1)
    dt: float = Field(default=1e-3, gt=0)
    max_iters: int = Field(default=50_000, ge=1)


class PSROParams(ParamsModel):
    iters: int = Field(ge=1)
    sims_per_entry: int = Field(ge=1)
    rrd: RRDParams


class OracleParams(ParamsModel):
    steps: int = Field(ge=1)
    batch: int = Field(default=64, ge=1)
    update_every: int = Field(default=10, ge=1)
    alpha: float = Field(default=0.01, ge=0)
    gamma: float = Field(default=0.99, gt=0, le=1)
    lr_pi: float = Field(default=3e-5, gt=0)
    lr_q: float = Field(default=3e-4, gt=0)
    tau: float = Field(default=0.005, gt=0, le=1)
    value_clip: float = Field(default=0.2, gt=0)
    hidden: list[int] = Field(default=[50, 50], min_length=1)
    buffer: int = Field(default=100_000, ge=1)
    learning_starts: int = Field(ge=1)

    @field_validator("hidden")
    @classmethod
    def _positive(cls, hidden: list[int]) -> list[int]:
        if any(h < 1 for h in hidden):
            raise ValueError(f"hidden widths must be positive, got {hidden}")
        return hidden


class ExploreParams(ParamsModel):
    n_top: int = Field(default=200, ge=2)
    bc_lr: float = Field(default=3e-4, gt=0)
    bc_batch: int = Field(default=128, ge=1)
    bc_epochs: int = Field(default=1, ge=1)
    bc_min_loss: float = Field(default=0.8, ge=0)
    lambda0: float = Field(default=0.1, ge=0)
    K_lambda: int = Field(default=5, ge=1)


class MethodParams(ParamsModel):
    role: Literal["method", "baseline", "ablation"]
    explore: EXPLORE
    gro_weight: float = Field(default=1.0, ge=0, le=1)


class EvalParams(ParamsModel):
    sims_per_entry: int = Field(ge=1)
    extra_br_steps: int = Field(ge=0)
    seed: int = Field(default=12345, ge=0)


class Ex2psroParams(ParamsModel):
    seeds: Seeds
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    game: GameParams
    psro: PSROParams
    oracle: OracleParams
    explore: ExploreParams
    methods: dict[str, MethodParams] = Field(min_length=1)
    eval: EvalParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("methods")
    @classmethod
    def _names(cls, methods: dict[str, MethodParams]) -> dict[str, MethodParams]:
        if "random" in methods:
            raise ValueError("'random' is the uniform-random baseline the pipeline always adds; "
                             "choose another method name")
        return methods
