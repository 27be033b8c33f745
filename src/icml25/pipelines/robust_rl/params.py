"""Parameters of the robust_rl pipeline (``conf/*/parameters_robust_rl.yml``), validated once.

Every choice the paper leaves unconfirmed (docs/papers/robust_rl.md) is a parameter here. Radii are checked against the
valid range of their set, accuracies ``eps`` must be positive, and span bounds ``H`` positive
(or ``auto``: ``c_H`` times the robust bias span estimated on the model at hand).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.robust_rl.uncertainty import UncertaintyError, check_radius

SpanBound = Literal["auto"] | float


def _check_eps(values: list[float]) -> list[float]:
    bad = [e for e in values if not e > 0]
    if bad:
        raise ValueError(f"eps (target accuracy) must be > 0; got {bad}")
    return values


def _check_span(value: SpanBound) -> SpanBound:
    if value != "auto" and not value > 0:
        raise ValueError(f"the span bound H must be > 0 or 'auto'; got {value}")
    return value


class EnvParams(ParamsModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    kind: Literal["garnet_sparse", "recycling_robot", "riverswim"]
    n_states: int | None = Field(default=None, ge=2)
    n_actions: int | None = Field(default=None, ge=1)
    branching: int | None = Field(default=None, ge=1)
    n_goals: int = Field(default=2, ge=1)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _garnet_sizes(self) -> EnvParams:
        if self.kind == "garnet_sparse":
            missing = [k for k in ("n_states", "n_actions", "branching") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"garnet_sparse needs {missing}")
            if self.branching > self.n_states or self.n_goals > self.n_states:
                raise ValueError("branching and n_goals must not exceed n_states")
        return self

    def kwargs(self) -> dict:
        if self.kind == "garnet_sparse":
            return {"n_states": self.n_states, "n_actions": self.n_actions,
                    "branching": self.branching, "seed": self.seed, "n_goals": self.n_goals}
        if self.kind == "riverswim":
            return {"n_states": self.n_states or 6}
        return {}


class UncertaintyParams(ParamsModel):
    type: Literal["contamination", "tv", "chi2", "kl"]
    radius: float

    @field_validator("radius")
    @classmethod
    def _radius(cls, radius: float, info: ValidationInfo) -> float:
        kind = info.data.get("type")
        if kind is None:
            return radius
        try:
            return check_radius(kind, radius)
        except UncertaintyError as err:
            raise ValueError(str(err)) from None


class TabularParams(ParamsModel):
    N_grid: list[int] = Field(min_length=2)
    eps: list[float] = Field(min_length=1)
    H: SpanBound = "auto"
    c_H: float = Field(default=2.0, gt=0)
    gamma_fixed: list[float] = Field(default=[0.9, 0.99])
    drvi_tol: float = Field(default=1e-8, gt=0)
    rrvi_tol: float = Field(default=1e-10, gt=0)
    qlearning: bool = True
    q_step_power: float = Field(default=0.7, gt=0.5, le=1.0)
    n_sampled_kernels: int = Field(default=20, ge=0)
    slope_floor: float = Field(default=1e-4, gt=0)
    # worker processes over the (environment, set) cells of planning and evaluation; 0: one per
    # CPU core. The cells are independent and seeded on their own: the tables do not depend on it
    n_workers: int = Field(default=1, ge=0)

    _eps = field_validator("eps")(classmethod(lambda cls, v: _check_eps(v)))
    _H = field_validator("H")(classmethod(lambda cls, v: _check_span(v)))

    @field_validator("N_grid")
    @classmethod
    def _grid(cls, grid: list[int]) -> list[int]:
        if any(n < 1 for n in grid) or sorted(set(grid)) != grid:
            raise ValueError(f"N_grid must be increasing positive integers; got {grid}")
        return grid

    @field_validator("gamma_fixed")
    @classmethod
    def _gammas(cls, gammas: list[float]) -> list[float]:
        if any(not 0 <= g < 1 for g in gammas):
            raise ValueError(f"fixed discounts must lie in [0, 1); got {gammas}")
        return gammas


class OneHotCheckParams(ParamsModel):
    """The convergence check of the linear learner where the tabular answer is known: one-hot
    features on a small Garnet-sparse model, same step schedule, behaviour, radius and discount
    rule as the feature study, compared with the tabular robust ``Q*``."""

    enabled: bool = True
    n_states: int = Field(default=10, ge=2)
    n_actions: int = Field(default=4, ge=1)
    branching: int = Field(default=3, ge=1)
    n_goals: int = Field(default=1, ge=1)
    instance_seed: int = Field(default=0, ge=0)
    steps: int = Field(default=100_000, ge=10)
    eval_every: int = Field(default=10_000, ge=1)
    alpha0: float | None = Field(default=None, gt=0, le=1)  # None: fa_linear.alpha0
    k0: float | None = Field(default=None, gt=0)            # None: fa_linear.k0

    @model_validator(mode="after")
    def _sizes(self) -> OneHotCheckParams:
        if self.branching > self.n_states or self.n_goals > self.n_states:
            raise ValueError("branching and n_goals must not exceed n_states")
        if self.steps < 10 * self.eval_every:
            raise ValueError(f"steps ({self.steps}) must be at least 10 x eval_every "
                             f"({self.eval_every}): convergence is read off the last 10%")
        return self


class FALinearParams(ParamsModel):
    enabled: bool = True
    n_states: int = Field(ge=2)
    n_actions: int = Field(ge=1)
    branching: int = Field(ge=1)
    n_goals: int = Field(default=2, ge=1)
    instance_seed: int = Field(default=0, ge=0)
    feature_dim: int = Field(ge=1)
    steps: int = Field(ge=10)
    eval_every: int = Field(ge=1)
    schedule: Literal["visit", "global"] = "visit"
    alpha0: float = Field(default=0.05, gt=0, le=1)
    k0: float = Field(default=1000.0, gt=0)
    global_alpha0: float = Field(default=0.05, gt=0, le=1)
    global_k0: float = Field(default=1e4, gt=0)
    explore: float = Field(default=0.1, ge=0, le=1)
    reservoir: int = Field(default=1000, ge=0)
    radius: float = Field(default=0.2, ge=0, le=1)
    eps: float = 0.05
    H: SpanBound = "auto"
    c_H: float = Field(default=2.0, gt=0)
    gamma_generic: float = Field(default=0.99, ge=0, lt=1)
    seeds: Seeds
    onehot: OneHotCheckParams = Field(default_factory=OneHotCheckParams)

    _eps = field_validator("eps")(classmethod(lambda cls, v: _check_eps([v])[0]))
    _H = field_validator("H")(classmethod(lambda cls, v: _check_span(v)))

    @model_validator(mode="after")
    def _sizes(self) -> FALinearParams:
        if self.branching > self.n_states or self.n_goals > self.n_states:
            raise ValueError("branching and n_goals must not exceed n_states")
        if self.steps < 10 * self.eval_every:
            raise ValueError(f"steps ({self.steps}) must be at least 10 x eval_every "
                             f"({self.eval_every}): convergence is read off the last 10%")
        return self


class GridParams(ParamsModel):
    length: list[float] = Field(min_length=1)
    masspole: list[float] = Field(min_length=1)
    force: list[float] = Field(min_length=1)
    action_noise: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _ranges(self) -> GridParams:
        for key in ("length", "masspole", "force"):
            if any(not v > 0 for v in getattr(self, key)):
                raise ValueError(f"{key} scales must be > 0")
        if any(not 0 <= p <= 1 for p in self.action_noise):
            raise ValueError("action_noise probabilities must lie in [0, 1]")
        return self


class FADQNParams(ParamsModel):
    enabled: bool = False
    steps: int = Field(ge=1)
    radius: float = Field(default=0.1, ge=0, le=1)
    eps: float = 0.05
    H: float = Field(gt=0)
    gamma_generic: float = Field(default=0.99, ge=0, lt=1)
    hidden: list[int] = Field(default=[64, 64], min_length=1)
    lr: float = Field(default=1e-3, gt=0)
    buffer: int = Field(default=100_000, ge=1)
    batch: int = Field(default=128, ge=1)
    target_update: int = Field(default=1000, ge=1)
    learning_starts: int = Field(default=1000, ge=1)
    explore_fraction: float = Field(default=0.1, gt=0, le=1)
    eval_steps: int = Field(ge=1)
    seeds: Seeds
    grid: GridParams
    claims: list[ClaimSpec] = Field(default_factory=list)

    _eps = field_validator("eps")(classmethod(lambda cls, v: _check_eps([v])[0]))


class RobustRLParams(ParamsModel):
    seeds: Seeds
    progress: bool = True
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    envs: list[EnvParams] = Field(min_length=1)
    uncertainty: list[UncertaintyParams] = Field(min_length=1)
    tabular: TabularParams
    fa_linear: FALinearParams
    fa_dqn: FADQNParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> RobustRLParams:
        names = [e.name for e in self.envs]
        if len(set(names)) != len(names):
            raise ValueError(f"environment names must be distinct; got {names}")
        labels = [(u.type, u.radius) for u in self.uncertainty]
        if len(set(labels)) != len(labels):
            raise ValueError(f"uncertainty sets must be distinct; got {labels}")
        return self
