"""Parameters of the ctbench pipeline (``conf/*/parameters_ctbench.yml``), validated once.

Choices the paper does not fix for this CPU setting are parameters here: the network, the
per-ε training settings and per-method overrides, the certification budget (PGD steps/restarts,
size of the full-CROWN subset) and the model-selection rule (validation split instead of the
test set).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

#: The training algorithms ``certified_training.train_certified`` implements, in the paper's order.
ALGORITHMS = ("standard", "pgd", "ibp", "crown_ibp", "sabr", "mtl_ibp")
#: The trained variants the pipeline wires, each with its own ``methods.<name>`` entry: every
#: algorithm under its own name, plus ``mtl_ibp_equal``, MTL-IBP on the common schedule. The
#: default trains ``mtl_ibp`` 4x longer at ε = 0.1 (where the length study found it converges),
#: so the equal-training-budget claim compares IBP with ``mtl_ibp_equal``.
METHODS = (*ALGORITHMS, "mtl_ibp_equal")
#: The networks ``networks.build_network`` builds by name.
NETWORKS = ("mlp", "small_cnn", "cnn7")
#: The ε settings the pipeline wires (one train + certify node pair per method and setting).
SETTINGS = ("eps0_1", "eps0_3")


class DataParams(ParamsModel):
    dataset: Literal["mnist5k", "digits"] = "mnist5k"
    test_fraction: float = Field(default=0.2, gt=0, lt=1)
    val_fraction: float = Field(default=0.08, gt=0, lt=1)
    split_seed: int = Field(default=0, ge=0)
    cache: str | None = "data/01_raw/ctbench/mnist5k.npz"
    max_train: int | None = Field(default=None, gt=1)
    max_test: int | None = Field(default=None, gt=1)

    @model_validator(mode="after")
    def _fractions(self) -> DataParams:
        if self.test_fraction + self.val_fraction >= 1:
            raise ValueError("test_fraction + val_fraction must leave training data (< 1)")
        return self


class NetworkParams(ParamsModel):
    name: Literal[NETWORKS] = "mlp"  # type: ignore[valid-type]
    width: int = Field(default=256, gt=0)
    depth: int = Field(default=2, ge=1)
    linear: int = Field(default=100, gt=0)
    batch_norm: bool = False


class MethodParams(ParamsModel):
    role: Literal["method", "baseline"] = "method"
    #: the algorithm this variant trains; None: the variant's own name (one of ALGORITHMS)
    algorithm: Literal[ALGORITHMS] | None = None  # type: ignore[valid-type]
    #: the setting's schedule stretched by this factor: epochs, ε-ramp end and learning-rate
    #: milestones times ``epochs_scale`` (the warm-up before the ramp is kept)
    epochs_scale: int = Field(default=1, ge=1)
    robust_weight: float = Field(default=0.7, ge=0, le=1)
    l1: float = Field(default=0.0, ge=0)
    fast_init: bool = True
    fast_reg: float = Field(default=0.5, ge=0)
    eps_shrinkage: float = Field(default=0.4, gt=0, le=1)
    ibp_coef: float = Field(default=0.1, ge=0, le=1)
    attack_range_scale: float = Field(default=1.0, gt=0)
    train_steps: int = Field(default=5, ge=1)
    restarts: int = Field(default=1, ge=1)


class TrainParams(ParamsModel):
    epochs: int = Field(gt=0)
    batch_size: int = Field(gt=1)
    ramp_start: int = Field(ge=0)
    ramp_end: int = Field(gt=0)
    milestones: list[int] = Field(default_factory=list)
    lr: float = Field(default=5e-4, gt=0)
    lr_decay: float = Field(default=0.2, gt=0, le=1)
    grad_clip: float = Field(default=10.0, gt=0)
    selection: Literal["best_val", "final"] = "best_val"
    val_pgd_steps: int = Field(default=5, ge=1)

    @model_validator(mode="after")
    def _schedule(self) -> TrainParams:
        if not self.ramp_start < self.ramp_end <= self.epochs:
            raise ValueError(f"need ramp_start < ramp_end <= epochs, got {self.ramp_start}, "
                             f"{self.ramp_end}, {self.epochs}")
        if any(not 0 < m <= self.epochs for m in self.milestones):
            raise ValueError(f"milestones {self.milestones} must lie in 1..epochs")
        return self


class SettingParams(ParamsModel):
    eps_test: float = Field(ge=0, le=1)
    eps_train: float = Field(ge=0, le=1)
    #: a disabled setting trains and certifies nothing (its nodes return empty outputs) and its
    #: claims are not judged: a setting is only reported where its schedule trains it to
    #: convergence (``docs/papers/ctbench.md``)
    enabled: bool = True
    methods: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: overrides of the global ``train`` schedule for this setting (epochs, ramp, milestones, …)
    train: dict[str, Any] = Field(default_factory=dict)
    #: claims about this setting, judged only when it is enabled
    claims: list[ClaimSpec] = Field(default_factory=list)

    @field_validator("methods")
    @classmethod
    def _overrides(cls, methods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        unknown = sorted(set(methods) - set(METHODS))
        if unknown:
            raise ValueError(f"overrides for unknown methods {unknown}; known: {list(METHODS)}")
        for name, override in methods.items():
            if "algorithm" in override:
                raise ValueError(f"{name}: a setting cannot change the algorithm a variant "
                                 "trains; set it in ctbench.methods")
            try:  # every MethodParams field has a default: this checks the overridden values
                MethodParams.model_validate(override)
            except ValidationError as err:
                detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                   for e in err.errors())
                raise ValueError(f"{name}: {detail}") from None
        return methods

    @field_validator("train")
    @classmethod
    def _train(cls, train: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(train) - set(TrainParams.model_fields))
        if unknown:
            raise ValueError(f"unknown train overrides {unknown}; known: "
                             f"{sorted(TrainParams.model_fields)}")
        return train

    @model_validator(mode="after")
    def _eps(self) -> SettingParams:
        if self.eps_train < self.eps_test:
            raise ValueError(f"eps_train {self.eps_train} < eps_test {self.eps_test}: the "
                             "model would never be trained at the certified radius")
        return self


class CertParams(ParamsModel):
    pgd_steps: int = Field(default=20, ge=1)
    pgd_restarts: int = Field(default=3, ge=1)
    crown_samples: int = Field(default=100, ge=0)
    crown_chunk: int = Field(default=8, ge=1)
    batch_size: int = Field(default=250, ge=1)
    subset_seed: int = Field(default=0, ge=0)


class CtbenchParams(ParamsModel):
    seeds: Seeds
    device: str = "cpu"
    num_threads: int = Field(default=1, ge=0)
    parallel_seeds: int = Field(default=1, ge=1)
    progress: bool = True
    data: DataParams
    network: NetworkParams
    settings: dict[str, SettingParams]
    train: TrainParams
    methods: dict[str, MethodParams]
    cert: CertParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("settings")
    @classmethod
    def _settings(cls, settings: dict[str, SettingParams]) -> dict[str, SettingParams]:
        if set(settings) != set(SETTINGS):
            raise ValueError(f"settings must be exactly {list(SETTINGS)}, got {sorted(settings)}")
        return settings

    @field_validator("methods")
    @classmethod
    def _methods(cls, methods: dict[str, MethodParams]) -> dict[str, MethodParams]:
        if set(methods) != set(METHODS):
            raise ValueError(f"methods must be exactly {list(METHODS)}, got {sorted(methods)}")
        for name, method in methods.items():
            if name in ALGORITHMS and method.algorithm not in (None, name):
                raise ValueError(f"methods.{name}.algorithm: the variant {name} trains "
                                 f"{name}, got {method.algorithm!r}")
            if name not in ALGORITHMS and method.algorithm is None:
                raise ValueError(f"methods.{name}.algorithm: name the algorithm it trains, one "
                                 f"of {list(ALGORITHMS)}")
        return methods

    @model_validator(mode="after")
    def _enabled(self) -> CtbenchParams:
        for name, setting in self.settings.items():
            try:
                TrainParams.model_validate({**self.train.model_dump(), **setting.train})
            except ValidationError as err:
                detail = "; ".join(e["msg"] for e in err.errors())
                raise ValueError(f"settings.{name}.train: {detail}") from None
        for name in METHODS:
            algorithm = self.algorithm(name)
            if algorithm == name:
                continue
            for setting in SETTINGS:
                twin, main = self.method(setting, name), self.method(setting, algorithm)
                if twin.epochs_scale != 1:
                    raise ValueError(f"{name} is {algorithm} on the common schedule: its "
                                     f"epochs_scale at {setting} must be 1, got "
                                     f"{twin.epochs_scale}")
                diff = sorted(k for k, v in twin.model_dump().items()
                              if k not in ("algorithm", "epochs_scale")
                              and v != getattr(main, k))
                if diff:
                    raise ValueError(f"{name} must train {algorithm} with {algorithm}'s "
                                     f"settings; at {setting} they differ in {diff} (set "
                                     f"them in both methods.{name} and methods.{algorithm})")
        if not any(s.enabled for s in self.settings.values()):
            raise ValueError("settings: every ε setting is disabled; enable at least one")
        for claim in self.claims:
            for name, setting in self.settings.items():
                if claim.metric.endswith(f"_{name}") and not setting.enabled:
                    raise ValueError(f"claim {claim.claim!r} is about the disabled setting "
                                     f"{name}; move it to settings.{name}.claims")
        return self

    @property
    def enabled_settings(self) -> list[str]:
        """The enabled ε settings, in :data:`SETTINGS` order."""
        return [s for s in SETTINGS if self.settings[s].enabled]

    def all_claims(self) -> list[ClaimSpec]:
        """The global claims and those of every enabled setting."""
        return [*self.claims, *(c for s in self.enabled_settings for c in self.settings[s].claims)]

    def train_for(self, setting: str, method: str | None = None) -> TrainParams:
        """The training schedule of ``setting`` (the global one with its overrides), stretched
        by ``method``'s ``epochs_scale`` at that setting when a method is named."""
        t = TrainParams.model_validate({**self.train.model_dump(),
                                        **self.settings[setting].train})
        k = 1 if method is None else self.method(setting, method).epochs_scale
        if k == 1:
            return t
        return t.model_copy(update={"epochs": k * t.epochs, "ramp_end": k * t.ramp_end,
                                    "milestones": [k * m for m in t.milestones]})

    def method(self, setting: str, name: str) -> MethodParams:
        """A method's parameters with the setting's overrides applied (validated again)."""
        base = self.methods[name].model_dump()
        base.update(self.settings[setting].methods.get(name, {}))
        return MethodParams.model_validate(base)

    def algorithm(self, name: str) -> str:
        """The algorithm variant ``name`` trains (``certified_training.MethodConfig.method``)."""
        return self.methods[name].algorithm or name
