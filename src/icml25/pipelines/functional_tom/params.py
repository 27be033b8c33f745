"""Parameters of the functional_tom pipeline (``conf/*/parameters_functional_tom.yml``).

Every choice the paper leaves unconfirmed (payoffs of IBS/IPD, TFT first move, R-Max m and gamma,
the invalid-answer rule, LLM decoding) is a parameter here; see ``docs/papers/functional_tom.md``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.functional_tom.games import KINDS
from icml25.pipelines.functional_tom.partners import FAMILIES
from icml25.pipelines.functional_tom.prompts import parse_strategy
from icml25.pipelines.functional_tom.reference_agents import REFERENCE_AGENTS

Family = Literal[FAMILIES]  # type: ignore[valid-type]


class GameParams(ParamsModel):
    kind: Literal[KINDS]  # type: ignore[valid-type]
    actions: list[str] = Field(min_length=2)
    payoff: list[list[float]]
    partner_payoff: list[list[float]]
    synonyms: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shapes(self) -> GameParams:
        n = len(self.actions)
        if len(set(a.lower() for a in self.actions)) != n:
            raise ValueError(f"actions must be distinct, got {self.actions}")
        for key in ("payoff", "partner_payoff"):
            arr = np.asarray(getattr(self, key), dtype=float)
            if arr.shape != (n, n):
                raise ValueError(f"{key} must be a {n}x{n} matrix (one row per action), got "
                                 f"shape {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{key} has non-finite entries")
        if self.kind == "rps" and n != 3:
            raise ValueError("an rps game has exactly three actions")
        unknown = sorted(set(self.synonyms) - set(self.actions))
        if unknown:
            raise ValueError(f"synonyms for unknown actions {unknown}")
        return self


class RMaxParams(ParamsModel):
    m: int = Field(default=1, ge=1)
    gamma: float = Field(default=0.95, gt=0, lt=1)
    sweeps: int = Field(default=60, ge=1)


class ReferenceParams(ParamsModel):
    agents: list[Literal[REFERENCE_AGENTS]] = Field(min_length=1)  # type: ignore[valid-type]
    rmax: RMaxParams = RMaxParams()
    bayes_eps: float = Field(default=0.01, gt=0, lt=1)


class MetaParams(ParamsModel):
    enabled: bool = True
    device: str = "cpu"  # auto | cpu | cuda | mps (paper scale: auto)
    games: list[str] = Field(min_length=1)
    seeds: Seeds | None = None
    d_model: int = Field(gt=0)
    layers: int = Field(ge=1)
    heads: int = Field(ge=1)
    d_ff: int = Field(gt=0)
    T_train: int = Field(ge=2)
    steps: int = Field(ge=1)
    batch: int = Field(ge=1)
    lr: float = Field(gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    grad_clip: float = Field(default=1.0, gt=0)
    eps_start: float = Field(ge=0, le=1)
    eps_end: float = Field(ge=0, le=1)
    train_families: list[Family] = Field(min_length=1)
    heldout_families: list[Family] = Field(default_factory=list)
    tom_only_games: list[str] = Field(default_factory=list)

    @field_validator("device")
    @classmethod
    def _device(cls, device: str) -> str:
        if device.split(":", 1)[0] not in ("auto", "cpu", "cuda", "mps"):
            raise ValueError(f"device {device!r} is not one of auto, cpu, cuda, mps")
        return device

    @model_validator(mode="after")
    def _check(self) -> MetaParams:
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise ValueError(f"d_model {self.d_model} must split into {self.heads} heads of even "
                             "size (rotary positions)")
        both = sorted(set(self.train_families) & set(self.heldout_families))
        if both:
            raise ValueError(f"families {both} are both trained on and held out")
        if "biased" in self.train_families:
            raise ValueError("train_families: biased partners are stochastic; the privileged "
                             "teacher needs deterministic ones")
        return self


class LLMParams(ParamsModel):
    backend: Literal["none", "hf", "hf_tiny", "openai"] = "none"
    model_path: str | None = None
    tiny_model_dir: str = "data/06_models/functional_tom/tiny_llm"
    base_url: str | None = None
    model: str | None = None
    strategies: list[str] = Field(default_factory=list)
    games: list[str] = Field(default_factory=list)
    families: list[Family] = Field(default_factory=list)
    horizon: int = Field(default=5, ge=1)
    episodes_per_cell: int = Field(default=2, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    max_new_tokens: int = Field(default=32, ge=1)
    lm_decoding: Literal["score", "greedy"] = "score"
    max_history_rounds: int | None = Field(default=None, ge=1)
    invalid_policy: Literal["random", "zero_reward"] = "random"
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    backoff_s: float = Field(default=0.5, ge=0)
    #: the run stops with an error once the share of invalid action answers (unparseable or an
    #: endpoint failure) of all the LLM rounds it plays is certain to pass this bound
    max_invalid_rate: float = Field(default=0.5, ge=0, le=1)
    device: str = "cpu"

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, strategies: list[str]) -> list[str]:
        for s in strategies:
            parse_strategy(s)
        return strategies

    @model_validator(mode="after")
    def _backend(self) -> LLMParams:
        if self.backend == "hf" and not self.model_path:
            raise ValueError("backend hf needs model_path (a local model folder)")
        if self.backend != "none" and not (self.strategies and self.games and self.families):
            raise ValueError("an LLM backend needs strategies, games and families")
        return self


class FunctionalTomParams(ParamsModel):
    seeds: Seeds
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    horizon: int = Field(ge=1)
    episodes_per_cell: int = Field(ge=1)
    tft_first_move: int | None = Field(default=0, ge=0)
    games: dict[str, GameParams] = Field(min_length=1)
    paper_families: list[Family] = Field(min_length=1)
    reference: ReferenceParams
    meta: MetaParams
    llm: LLMParams = LLMParams()
    paper_tabular_regret: dict[str, dict[str, float]] = Field(default_factory=dict)
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _cross(self) -> FunctionalTomParams:
        for key, games in (("meta.games", self.meta.games), ("llm.games", self.llm.games),
                           ("meta.tom_only_games", self.meta.tom_only_games)):
            unknown = sorted(set(games) - set(self.games))
            if unknown:
                raise ValueError(f"{key}: unknown games {unknown}; defined: {sorted(self.games)}")
        if self.tft_first_move is not None:
            small = [g for g, p in self.games.items() if self.tft_first_move >= len(p.actions)]
            if small:
                raise ValueError(f"tft_first_move {self.tft_first_move} is not an action of "
                                 f"{small}")
        for game, cells in self.paper_tabular_regret.items():
            if game not in self.games:
                raise ValueError(f"paper_tabular_regret: unknown game {game!r}")
            bad = sorted(set(cells) - set(self.paper_families))
            if bad:
                raise ValueError(f"paper_tabular_regret.{game}: families {bad} are not in "
                                 "paper_families")
        return self

    def meta_seeds(self) -> list[int]:
        return self.meta.seeds or self.seeds
