"""Parameters of the softshape pipeline (``conf/*/parameters_softshape.yml``), validated once.

Every choice the paper and the reference code leave open (protocol, CBF shape size, epochs at
CPU scale; docs/papers/softshape.md) is a parameter here; bad values fail before any work with their full key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.softshape.ucr_data import shipped_set_names

#: SoftShape ablations (docs/papers/softshape.md, "Baselines"): each maps to flags of ``SoftShapeConfig``.
ABLATIONS = ("hard", "no_moe", "no_inception", "no_sparsify", "mean_pool")
BASELINES = ("mini_rocket", "rocket", "nn_dtw", "fcn")


class CBFParams(ParamsModel):
    n: int = Field(ge=6)
    length: int = Field(ge=64)
    test_fraction: float = Field(default=0.5, gt=0, lt=1)
    seed: int = Field(ge=0)


class ProtocolParams(ParamsModel):
    split: Literal["original", "cv"]
    n_folds: int = Field(default=5, ge=2)
    folds_to_run: list[int] = Field(default=[0], min_length=1)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _folds(self) -> ProtocolParams:
        bad = [f for f in self.folds_to_run if not 0 <= f < self.n_folds]
        if bad:
            raise ValueError(f"folds_to_run {bad} outside 0..n_folds-1 = 0..{self.n_folds - 1}")
        if len(set(self.folds_to_run)) != len(self.folds_to_run):
            raise ValueError(f"folds_to_run has repeats: {self.folds_to_run}")
        return self


class ModelParams(ParamsModel):
    emb_dim: int = Field(default=128, gt=0)
    depth: int = Field(default=2, ge=1)
    sparse_rate: float = Field(default=0.5, ge=0, lt=1)
    stride: int = Field(default=4, ge=1)
    dropout: float = Field(default=0.15, ge=0, lt=1)
    moe_loss_rate: float = Field(default=0.001, ge=0)
    router_init: Literal["zeros", "normal"] = "zeros"
    default_shape_size: int = Field(default=16, ge=1)
    #: per data set: a fixed size m (int) or a ratio of T (0 < float < 1), official table
    shape_sizes: dict[str, int | float] = Field(default_factory=dict)

    @field_validator("shape_sizes")
    @classmethod
    def _sizes(cls, sizes: dict[str, int | float]) -> dict[str, int | float]:
        for name, v in sizes.items():
            if isinstance(v, float) and not v.is_integer():
                if not 0 < v < 1:
                    raise ValueError(f"shape_sizes.{name}: ratio {v} must be in (0, 1)")
            elif v < 1:
                raise ValueError(f"shape_sizes.{name}: size {v} must be >= 1")
        return sizes

    @model_validator(mode="after")
    def _width(self) -> ModelParams:
        if self.emb_dim % 4:
            raise ValueError(f"emb_dim {self.emb_dim} must be divisible by 4 (the Inception "
                             "shared expert outputs 4 x emb_dim/4 channels)")
        return self


class TrainParams(ParamsModel):
    epochs: int = Field(gt=0)
    warm_up: int = Field(ge=0)
    lr: float = Field(default=0.001, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    batch_mode: Literal["large", "paper"] = "large"
    large_batch: int = Field(default=512, gt=0)
    patience: int = Field(gt=0)

    @model_validator(mode="after")
    def _warm(self) -> TrainParams:
        if self.warm_up >= self.epochs:
            raise ValueError(f"warm_up {self.warm_up} >= epochs {self.epochs}: sparsification "
                             "and the MoE would never be trained")
        return self


class AblationParams(ParamsModel):
    variants: list[Literal[ABLATIONS]] = Field(default_factory=list)  # type: ignore[valid-type]
    datasets: list[str] = Field(default_factory=list)
    seeds: Seeds | None = None


class FCNParams(ParamsModel):
    epochs: int = Field(gt=0)
    patience: int = Field(gt=0)
    batch_mode: Literal["large", "paper"] = "paper"
    seeds: Seeds | None = None


class BaselineParams(ParamsModel):
    models: list[Literal[BASELINES]] = Field(min_length=1)  # type: ignore[valid-type]
    n_jobs: int = Field(default=1, ge=1)
    #: at most this many fit (train + val) and test series per fold for the aeon baselines, a
    #: draw seeded by the fold (a count cut of the CPU dry run, whose 1-NN DTW over full PLAID /
    #: ACSF1 folds takes hours); null: every series, as every scored run does
    max_series: int | None = Field(default=None, ge=2)
    fcn: FCNParams


class SoftshapeParams(ParamsModel):
    seeds: Seeds
    device: str = "cpu"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    datasets: list[str] = Field(min_length=1)
    use_cbf: bool = True
    cbf: CBFParams
    protocol: ProtocolParams
    model: ModelParams
    train: TrainParams
    ablations: AblationParams
    baselines: BaselineParams
    plot_datasets: list[str] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("datasets")
    @classmethod
    def _unique(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError(f"repeated data sets in {names}")
        if "CBF" in names:
            raise ValueError("CBF is the synthetic set: switch it with use_cbf, not in datasets")
        shipped = shipped_set_names()
        missing = [n for n in names if n not in shipped]
        if missing:
            raise ValueError(f"{missing} are not shipped inside aeon/sktime (nothing is "
                             f"downloaded); shipped: {shipped}")
        return names

    @model_validator(mode="after")
    def _known(self) -> SoftshapeParams:
        names = set(self.all_datasets)
        extra = sorted(set(self.ablations.datasets) - names)
        if extra:
            raise ValueError(f"ablations.datasets {extra} are not among the run's data sets "
                             f"{sorted(names)}")
        if "mini_rocket" not in self.baselines.models or "nn_dtw" not in self.baselines.models:
            raise ValueError("baselines.models must include mini_rocket and nn_dtw (the claims "
                             "compare with them)")
        return self

    @property
    def all_datasets(self) -> list[str]:
        return [*self.datasets, *(["CBF"] if self.use_cbf else [])]
