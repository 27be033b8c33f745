"""Parameters of the quantum_rl pipeline (``conf/*/parameters_quantum_rl.yml``), validated once.

Every choice the paper leaves open (docs/papers/quantum_rl.md) is a parameter here: the number of
median runs ``K`` (or ``auto``), oracle calls per Grover iterate ``kappa``, the coordinate budget
mode, the radius constants ``c`` of every agent, the EVI tolerance rule and the fallback radius.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.mdp import validate_kernel
from icml25.core.params import ParamsModel, Seeds


class EnvParams(ParamsModel):
    """One environment: ``riverswim`` (S states, 2 actions), ``garnet`` (random ergodic, one fixed
    instance per ``seed``), ``two_state`` (the closed-form toy) or ``explicit`` (P and r given)."""

    kind: Literal["riverswim", "garnet", "two_state", "explicit"]
    n_states: int | None = Field(default=None, ge=2)
    n_actions: int | None = Field(default=None, ge=1)
    branching: int | None = Field(default=None, ge=1)
    uniform_mix: float = Field(default=0.05, ge=0, le=1)
    seed: int = Field(default=0, ge=0)
    P: list[list[list[float]]] | None = None
    r: list[list[float]] | None = None

    @field_validator("P")
    @classmethod
    def _kernel(cls, P: list | None) -> list | None:
        if P is None:
            return P
        try:
            validate_kernel(np.asarray(P, dtype=float), what="row")
        except ValueError as err:  # MDPError, or ragged nested lists
            raise ValueError(f"transition matrix refused: {err}") from None
        return P

    @field_validator("r")
    @classmethod
    def _rewards(cls, r: list | None) -> list | None:
        if r is None:
            return r
        try:
            arr = np.asarray(r, dtype=float)
        except ValueError as err:
            raise ValueError(f"rewards must be a rectangular (S, A) array: {err}") from None
        if arr.ndim != 2 or not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
            raise ValueError("rewards must be a finite (S, A) array in [0, 1] (no negative reward)")
        return r

    @model_validator(mode="after")
    def _complete(self) -> EnvParams:
        if self.kind == "riverswim" and self.n_states is None:
            raise ValueError("riverswim needs n_states")
        if self.kind == "garnet":
            missing = [k for k in ("n_states", "n_actions", "branching")
                       if getattr(self, k) is None]
            if missing:
                raise ValueError(f"garnet needs {missing}")
            if self.branching > self.n_states:
                raise ValueError(f"branching {self.branching} > n_states {self.n_states}")
            if self.uniform_mix <= 0:
                raise ValueError("garnet uniform_mix must be > 0 (it makes the MDP ergodic)")
        if self.kind == "explicit":
            if self.P is None or self.r is None:
                raise ValueError("explicit environments need P (S x A x S) and r (S x A)")
            shape = np.shape(self.r)
            if shape != np.shape(self.P)[:2]:
                raise ValueError(f"r has shape {shape}; expected (S, A) = {np.shape(self.P)[:2]}")
        return self


class EstimatorParams(ParamsModel):
    """Quantum mean estimation: median of ``K`` AE runs (odd, or ``auto`` = smallest odd K with
    binomial tail <= delta / (2 S^2 A T)), ``kappa`` oracle calls per Grover iterate and the
    coordinate budget (``paper``: every next state gets all calls; ``split``: calls / S)."""

    K: int | Literal["auto"] = 7
    kappa: int = Field(default=1, ge=1)
    budget_mode: Literal["paper", "split"] = "paper"
    fallback_radius: Literal["max", "sum", "none"] = "max"

    @field_validator("K")
    @classmethod
    def _odd(cls, K: int | str) -> int | str:
        if isinstance(K, int) and (K < 1 or K % 2 == 0):
            raise ValueError(f"K must be a positive odd integer or 'auto'; got {K}")
        return K


class EVIParams(ParamsModel):
    aperiodic: float = Field(default=0.5, ge=0, lt=1)
    max_sweeps: int = Field(default=200_000, ge=1)


class AgentParams(ParamsModel):
    """One variant. ``optimistic`` agents take the estimator, the radius shape, its constant ``c``
    and the EVI tolerance rule (``inv`` = 1/t_e, ``inv_sqrt`` = 1/sqrt(t_e)); the estimator
    settings may be overridden per agent (K, budget_mode, ...). ``envs``/``seeds``/``T`` restrict
    an ablation to a subset (default: all)."""

    kind: Literal["optimistic", "oracle", "random"]
    role: Literal["method", "baseline", "ablation"]
    estimator: Literal["quantum", "classical"] = "classical"
    radius: Literal["quantum", "classical"] = "classical"
    c: float = Field(default=1.0, gt=0)
    eps_rule: Literal["inv", "inv_sqrt"] = "inv_sqrt"
    estimator_overrides: EstimatorParams | None = None
    envs: list[str] | None = None
    seeds: Seeds | None = None
    T: int | None = Field(default=None, ge=1)


class EstimatorScalingParams(ParamsModel):
    p_values: list[float] = Field(min_length=1)
    log2_n: tuple[int, int]
    reps: int = Field(ge=1)
    seed: int = Field(ge=0)

    @field_validator("p_values")
    @classmethod
    def _probabilities(cls, values: list[float]) -> list[float]:
        if any(not 0.0 <= p <= 1.0 for p in values):
            raise ValueError(f"p_values must lie in [0, 1]; got {values}")
        return values

    @field_validator("log2_n")
    @classmethod
    def _range(cls, rng: tuple[int, int]) -> tuple[int, int]:
        if not 1 <= rng[0] < rng[1] <= 30:
            raise ValueError(f"log2_n must be (low, high) with 1 <= low < high <= 30; got {rng}")
        return rng


class CircuitParams(ParamsModel):
    """The qiskit-aer check: Bernoulli AE circuits ``[p, m]`` and transition-row circuits
    ``[row, target, m]`` (row over 4 next states), ``shots`` each. Skipped without qiskit."""

    enabled: bool = True
    cases: list[tuple[float, int]] = Field(default_factory=list)
    row_cases: list[tuple[list[float], int, int]] = Field(default_factory=list)
    shots: int = Field(default=20_000, ge=1)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _cases(self) -> CircuitParams:
        for p, m in self.cases:
            if not 0.0 <= p <= 1.0 or not 1 <= m <= 10:
                raise ValueError(f"circuit case [{p}, {m}]: need p in [0, 1], m in [1, 10]")
        for row, target, m in self.row_cases:
            if len(row) != 4 or abs(sum(row) - 1.0) > 1e-9 or min(row) < 0:
                raise ValueError(f"row case {row}: need 4 probabilities summing to 1")
            if not 0 <= target < 4 or not 1 <= m <= 8:
                raise ValueError(f"row case target {target} / m {m}: need 0 <= target < 4, m <= 8")
        return self


class QuantumRLParams(ParamsModel):
    seeds: Seeds
    T: int = Field(ge=1)
    delta: float = Field(gt=0, lt=1)
    reward_known: bool = True
    checkpoints: int = Field(default=200, ge=2)
    progress: bool = True
    envs: dict[str, EnvParams] = Field(min_length=1)
    claim_env: str
    estimator: EstimatorParams
    evi: EVIParams = EVIParams()
    agents: dict[str, AgentParams] = Field(min_length=1)
    estimator_scaling: EstimatorScalingParams
    circuit: CircuitParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> QuantumRLParams:
        if self.claim_env not in self.envs:
            raise ValueError(f"claim_env {self.claim_env!r} is not one of envs {sorted(self.envs)}")
        methods = [n for n, a in self.agents.items() if a.role == "method"]
        if len(methods) != 1:
            raise ValueError(f"exactly one agent must have role 'method'; got {methods}")
        for name, agent in self.agents.items():
            unknown = sorted(set(agent.envs or []) - set(self.envs))
            if unknown:
                raise ValueError(f"agents.{name}.envs: unknown environments {unknown}")
        return self

    def agent_envs(self, agent: str) -> list[str]:
        return self.agents[agent].envs or list(self.envs)

    def agent_seeds(self, agent: str) -> list[int]:
        return self.agents[agent].seeds or self.seeds

    def agent_horizon(self, agent: str) -> int:
        return self.agents[agent].T or self.T
