"""Parameters of the wavetoken pipeline (``conf/*/parameters_wavetoken.yml``), validated once.

Every choice the paper leaves unconfirmed (docs/papers/wavetoken.md) is a parameter here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

#: The tokenizer variants every run trains, in wiring order. Their settings live under
#: ``wavetoken.variants.<name>``; the wiring (one train and one forecast node per seed shard) is
#: fixed here so kedro-viz shows it and runners can spread it.
VARIANTS = ("wavetoken", "chronos_bins_1024", "chronos_bins_4096", "chronos_bins_std")
#: The node group that trains the ablation variants a run selects (``wavetoken.ablations``):
#: any other entry of ``wavetoken.variants``, defined in conf alone.
ABLATIONS = "ablations"
STAT_BASELINES = ("seasonal_naive", "naive", "auto_ets", "auto_arima", "auto_theta")


class DatasetSpec(ParamsModel):
    """``wavetoken.data.datasets.<name>``: where a named dataset comes from and its calendar
    (:mod:`icml25.pipelines.wavetoken.user_data`); every field may be left out."""

    loader: str | None = None       # "module:attribute" of an installed package
    kwargs: dict[str, Any] = Field(default_factory=dict)
    freq: str | None = None         # pandas frequency; inferred from timestamps if None
    horizon: int | None = Field(default=None, gt=0)
    season: int | None = Field(default=None, gt=0)
    columns: list[str] | None = None  # a wide table's series columns
    item_id: str = "item_id"
    timestamp: str = "timestamp"
    target: str = "target"

    @field_validator("freq")
    @classmethod
    def _freq(cls, freq: str | None) -> str | None:
        if freq is not None:
            import pandas as pd
            try:
                pd.tseries.frequencies.to_offset(freq)
            except ValueError as err:
                raise ValueError(f"freq {freq!r} is not a pandas frequency string") from err
        return freq


class DataParams(ParamsModel):
    in_domain: list[str] = Field(min_length=1)
    zero_shot: list[str] = Field(min_length=1)
    max_series_per_dataset: int | None = Field(default=None, gt=0)
    datasets: dict[str, DatasetSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _disjoint(self) -> DataParams:
        both = sorted(set(self.in_domain) & set(self.zero_shot))
        if both:
            raise ValueError(f"datasets {both} are both in_domain and zero_shot (zero-shot data "
                             "must never be trained on)")
        return self


class KernelSynthParams(ParamsModel):
    n_train: int = Field(gt=0)
    n_test: int = Field(gt=0)
    length: int = Field(ge=64)
    seed: int = Field(ge=0)
    #: worker processes drawing the series (0: one per CPU core); the series do not depend on it
    n_jobs: int = Field(default=1, ge=0)


class TSMixupParams(ParamsModel):
    n_mixes: int = Field(ge=0)
    k_max: int = Field(default=3, ge=1)
    min_length: int = Field(default=128, ge=16)
    max_length: int = Field(default=2048, ge=16)
    alpha: float = Field(default=1.5, gt=0)
    seed: int = Field(ge=0)

    @model_validator(mode="after")
    def _lengths(self) -> TSMixupParams:
        if self.min_length > self.max_length:
            raise ValueError(f"min_length {self.min_length} > max_length {self.max_length}")
        return self


class StressParams(ParamsModel):
    n_series: int = Field(gt=0)
    seed: int = Field(ge=0)


class TokenizerParams(ParamsModel):
    kind: Literal["wavelet", "bins"]
    role: Literal["method", "baseline", "ablation"]
    vocab_size: int = Field(ge=8)
    limits: tuple[float, float] = (-15.0, 15.0)
    scaling: Literal["standard", "mean"]
    wavelet: str = "bior2.2"
    level: int = Field(default=1, ge=1, le=6)
    threshold: Literal["none", "visushrink", "fdrc", "cdf"] = "none"
    threshold_q: float = Field(default=0.05, gt=0, lt=1)
    threshold_targets: bool = False
    seeds: Seeds | None = None

    @field_validator("limits")
    @classmethod
    def _ordered(cls, limits: tuple[float, float]) -> tuple[float, float]:
        if not limits[0] < limits[1]:
            raise ValueError(f"limits must be (low, high) with low < high, got {limits}")
        return limits


class ModelParams(ParamsModel):
    d_model: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    n_encoder_layers: int = Field(ge=1)
    n_decoder_layers: int = Field(ge=1)
    d_ff: int = Field(gt=0)
    dropout: float = Field(ge=0, lt=1)
    position: Literal["learned", "t5_relative"] = "learned"
    backend: Literal["torch", "hf_t5"] = "torch"

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.backend == "hf_t5" and self.position != "t5_relative":
            raise ValueError("backend hf_t5 is transformers' T5: set position: t5_relative")
        return self


class TrainParams(ParamsModel):
    steps: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    lr: float = Field(gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    grad_clip: float | None = Field(default=1.0, ge=0)
    min_past: int = Field(default=60, ge=1)
    nan_injection_max: float = Field(default=0.2, ge=0, lt=1)
    kernelsynth_share: float = Field(default=0.1, ge=0, le=1)
    amp: bool = False
    log_every: int = Field(default=20, gt=0)
    checkpoint_every: int = Field(default=0, ge=0)
    checkpoint_dir: str = "data/06_models/wavetoken/checkpoints"
    # gradient accumulation: each step's batch in this many equal parts, one forward and
    # backward each (activations of one part alive at a time); the same step as the whole batch
    micro_batches: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _micro_batches_divide_the_batch(self) -> TrainParams:
        if self.batch_size % self.micro_batches:
            raise ValueError(f"micro_batches {self.micro_batches} does not divide batch_size "
                             f"{self.batch_size}")
        return self


class SamplingParams(ParamsModel):
    n_samples: int = Field(default=20, gt=0)
    temperature: float = Field(default=1.0, gt=0)
    top_k: int | None = Field(default=50, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    batch_size: int = Field(default=64, gt=0)


class BaselineParams(ParamsModel):
    models: list[Literal[STAT_BASELINES]] = Field(min_length=1)  # type: ignore[valid-type]
    max_history: int | None = Field(default=None, gt=0)

    @field_validator("models")
    @classmethod
    def _has_normaliser(cls, models: list[str]) -> list[str]:
        if "seasonal_naive" not in models:
            raise ValueError("seasonal_naive is required: every relative score is normalised by it")
        return models


class ScalingBudget(ParamsModel):
    """One training budget of the compute-scaling study: a width and a number of steps."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    d_model: int = Field(gt=0)
    d_ff: int = Field(gt=0)
    steps: int = Field(gt=0)


class ScalingParams(ParamsModel):
    """``wavetoken.scaling``: the compute-scaling study (pipeline ``wavetoken_scaling``)."""

    variants: list[str] = Field(min_length=2, max_length=2)
    seeds: Seeds
    budgets: list[ScalingBudget] = Field(min_length=2)
    cache_dir: str = "data/07_model_output/wavetoken_scaling/cache"
    claims: list[ClaimSpec] = Field(default_factory=list)

    @field_validator("budgets")
    @classmethod
    def _unique(cls, budgets: list[ScalingBudget]) -> list[ScalingBudget]:
        names = [b.name for b in budgets]
        if len(set(names)) != len(names):
            raise ValueError(f"budget names must be unique, got {names}")
        return budgets


class PretrainedParams(ParamsModel):
    """``wavetoken.pretrained``: a local Chronos checkpoint as a zero-shot baseline row."""

    path: str | None = None   # a folder in Hugging Face format; None = no such row
    name: str = Field(default="chronos_pretrained", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    n_samples: int | None = Field(default=None, gt=0)  # None: the run's sampling.n_samples
    batch_size: int = Field(default=32, gt=0)


class WavetokenParams(ParamsModel):
    seeds: Seeds
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    context_length: int = Field(gt=0)
    prediction_length: int = Field(gt=0)
    quantile_levels: list[float] = Field(default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    progress: bool = True
    data: DataParams
    kernelsynth: KernelSynthParams
    tsmixup: TSMixupParams
    stress: StressParams
    variants: dict[str, TokenizerParams]
    ablations: list[str] = Field(default_factory=list)
    model: ModelParams
    train: TrainParams
    sampling: SamplingParams
    baselines: BaselineParams
    plots: list[str] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(min_length=1)
    scaling: ScalingParams | None = None
    pretrained: PretrainedParams = Field(default_factory=PretrainedParams)

    @field_validator("variants")
    @classmethod
    def _variants(cls, variants: dict[str, TokenizerParams]) -> dict[str, TokenizerParams]:
        missing = [v for v in VARIANTS if v not in variants]
        if missing:
            raise ValueError(f"variants must define {list(VARIANTS)} (every run trains them); "
                             f"missing {missing}")
        bad = [v for v in variants if not v.isidentifier() or "@" in v]
        if bad:
            raise ValueError(f"variant names must be identifiers (letters, digits, _), got {bad}")
        return variants

    @property
    def run_variants(self) -> list[str]:
        """The variants this run trains: :data:`VARIANTS`, then the selected ablations."""
        return [*VARIANTS, *self.ablations]

    @model_validator(mode="after")
    def _lengths(self) -> WavetokenParams:
        for name, tok in self.variants.items():
            scaled = self.scaling is not None and name in self.scaling.variants
            if tok.kind == "wavelet" and (name in self.run_variants or scaled):
                block = 2**tok.level
                for key in ("context_length", "prediction_length"):
                    if getattr(self, key) % block:
                        raise ValueError(f"{key} {getattr(self, key)} must be divisible by "
                                         f"2^level = {block} for variant {name}")
        if self.pretrained.name in self.variants or self.pretrained.name in STAT_BASELINES:
            raise ValueError(f"pretrained.name {self.pretrained.name!r} is already a variant")
        unknown = [a for a in self.ablations if a not in self.variants]
        if unknown:
            raise ValueError(f"ablations {unknown} are not defined under wavetoken.variants "
                             f"(defined: {sorted(self.variants)})")
        main = [a for a in self.ablations if a in VARIANTS]
        if main or len(set(self.ablations)) != len(self.ablations):
            raise ValueError(f"ablations must be distinct extra variants, not {list(VARIANTS)}; "
                             f"got {self.ablations}")
        for claim in self.claims:
            for role in ("method", "baseline"):
                name = getattr(claim, role)
                if (name and not name.startswith("tokenizer:") and name in self.variants
                        and name not in self.run_variants):
                    raise ValueError(f"claim {claim.claim!r}: {role} {name!r} is a variant this "
                                     f"run does not train; add it to wavetoken.ablations")
        if self.scaling is not None:
            unknown = [v for v in self.scaling.variants if v not in self.variants]
            if unknown:
                raise ValueError(f"scaling.variants {unknown} are not variants of "
                                 f"wavetoken.variants ({sorted(self.variants)})")
            for b in self.scaling.budgets:
                if b.d_model % self.model.n_heads:
                    raise ValueError(f"scaling budget {b.name}: d_model {b.d_model} is not "
                                     f"divisible by model.n_heads {self.model.n_heads}")
        if self.quantile_levels != sorted(self.quantile_levels) or 0.5 not in self.quantile_levels:
            raise ValueError("quantile_levels must be increasing and contain 0.5 (the median)")
        return self

    def seeds_of(self, variant: str) -> list[int]:
        """A variant's seeds: its own list or the pipeline's (the configs set none of their own:
        a paired claim refuses variants that ran different seeds)."""
        return self.variants[variant].seeds or self.seeds
