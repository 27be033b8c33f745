"""Parameters of the ex2psro pipeline (``conf/*/parameters_ex2psro.yml``), validated once.

Choices the paper leaves unconfirmed (docs/papers/ex2psro.md) are parameters here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

EXPLORE = Literal["none", "ex2psro", "maxwelfare", "minwelfare", "prevbr", "uniform"]


class GameParams(ParamsModel):
    name: Literal["bargaining", "harvest", "staghunt"]
    discount: float = Field(default=0.99, gt=0, le=1)   # bargaining
    max_turns: int = Field(default=10, ge=2)             # bargaining
    instances_file: str | None = None                    # bargaining; None: the paper's 20
    map: Literal["sparse", "dense"] = "sparse"           # harvest
    max_steps: int = Field(default=1000, ge=1)           # harvest episode length
    rounds: int = Field(default=10, ge=1)                # stag hunt rounds per episode
    stag: float = 4.0                                    # stag hunt: both hunt stag
    hare: float = 3.0                                    # stag hunt: hunting hare, always
    sucker: float = 0.0                                  # stag hunt: hunting stag alone

    @model_validator(mode="after")
    def _stag_hunt_order(self) -> GameParams:
        if self.name == "staghunt" and not self.stag > self.hare > self.sucker:
            raise ValueError(f"stag hunt payoffs must satisfy stag > hare > sucker, got "
                             f"stag={self.stag}, hare={self.hare}, sucker={self.sucker}")
        return self


class RRDParams(ParamsModel):
    lambda_init: float = Field(ge=0)
    lambda_final: float = Field(ge=0)
    steps: int = Field(ge=1)
    dt: float = Field(default=1e-3, gt=0)
    max_iters: int = Field(default=50_000, ge=1)
    # payoff_range: thresholds are fractions of the game's payoff range; absolute: return units
    scale: Literal["payoff_range", "absolute"] = "payoff_range"
    floor: float = Field(default=1e-4, ge=0)   # the threshold never falls below this


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
    # environment episodes per oracle call; when set it is the budget instead of ``steps``, so
    # every method simulates the same number of episodes
    episodes: int | None = Field(default=None, ge=1)

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
    # processes for a seed shard's PSRO runs, the evaluation's extra best responses and its
    # cross-evaluation (0: one per CPU core); every result is the same for any number
    n_workers: int = Field(default=1, ge=0)
    progress: bool = True
    game: GameParams
    psro: PSROParams
    oracle: OracleParams
    explore: ExploreParams
    methods: dict[str, MethodParams] = Field(min_length=1)
    eval: EvalParams
    claims: list[ClaimSpec] = Field(min_length=1)
    # further games run beside ``game`` in the same run, each a partial override of this block
    # (game, psro, oracle, explore, eval) with its own claims; their metrics are named
    # ``<variant>_<metric>``
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("variants")
    @classmethod
    def _variant_keys(cls, variants: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        allowed = {"game", "psro", "oracle", "explore", "eval", "claims"}
        for name, override in variants.items():
            if not name.isidentifier():
                raise ValueError(f"variant name {name!r} must be an identifier")
            extra = set(override or {}) - allowed
            if extra:
                raise ValueError(f"variant {name!r}: unknown keys {sorted(extra)}; "
                                 f"allowed: {sorted(allowed)}")
            if "game" not in (override or {}) or "claims" not in override:
                raise ValueError(f"variant {name!r} needs its own 'game' and 'claims'")
        return variants

    @field_validator("methods")
    @classmethod
    def _names(cls, methods: dict[str, MethodParams]) -> dict[str, MethodParams]:
        if "random" in methods:
            raise ValueError("'random' is the uniform-random baseline the pipeline always adds; "
                             "choose another method name")
        return methods
