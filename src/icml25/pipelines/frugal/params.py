"""Parameters of the frugal pipeline (``conf/*/parameters_frugal.yml``), validated once.

Every choice the paper leaves open (state on refresh, block order, learning rates) is a
parameter here. Bad values stop the run before any work with the full key, e.g.
``frugal.optimizers.frugal_block_025.density``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

#: The optimiser variants the pipeline trains, in wiring order (one node each, namespace
#: ``frugal.<variant>``); their settings live under ``frugal.optimizers.<variant>``.
VARIANTS = (
    "adamw",
    "frugal_block_025",
    "frugal_block_0",
    "frugal_svd_025",
    "galore_025",
    "badam_025",
    "signsgd",
    "frugal_logits_free",
)


class MarkovParams(ParamsModel):
    vocab: int = Field(default=64, ge=2, le=94)
    alpha: float = Field(default=0.1, gt=0)
    n_docs: int = Field(default=200, ge=2)
    doc_len: int = Field(default=2000, ge=2)
    seed: int = Field(default=0, ge=0)


class DataParams(ParamsModel):
    """The corpus and its split: deduplicated documents, then train / validation (learning-rate
    selection) / test (the reported results), disjoint by document and by text."""

    source: Literal["stdlib_docs", "python_doc_deb", "synthetic_markov"] = "stdlib_docs"
    val_frac: float = Field(default=0.05, gt=0, lt=1)
    test_frac: float = Field(default=0.05, gt=0, lt=1)
    split_seed: int = Field(default=0, ge=0)
    min_chars: int = Field(default=40, ge=0)
    max_files: int | None = Field(default=None, gt=0)
    deb_sources: str = "/usr/share/doc/python3.11/html/_sources"
    include_stdlib: bool = False
    markov: MarkovParams = MarkovParams()

    @model_validator(mode="after")
    def _fractions(self) -> DataParams:
        if self.val_frac + self.test_frac >= 1:
            raise ValueError(f"val_frac + test_frac = {self.val_frac + self.test_frac} leaves no "
                             "training documents; expected a sum below 1")
        return self


class TokenizerParams(ParamsModel):
    kind: Literal["bpe", "char"] = "bpe"
    vocab: int = Field(default=1024, ge=260)


class ModelParams(ParamsModel):
    d: int = Field(gt=0)
    layers: int = Field(ge=1)
    heads: int = Field(ge=1)
    ff: int = Field(gt=0)
    seq: int = Field(ge=2)
    tie: bool = False

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d % self.heads or (self.d // self.heads) % 2:
            raise ValueError(f"d {self.d} must be divisible by heads {self.heads} with an even "
                             "head dimension (rotary embeddings)")
        return self


class TrainParams(ParamsModel):
    steps: int = Field(gt=0)
    batch: int = Field(gt=0)
    grad_accum: int = Field(default=1, ge=1)
    warmup: int = Field(ge=0)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    grad_clip: float | None = Field(default=None, ge=0)
    amp: bool = False
    log_every: int = Field(default=20, gt=0)
    eval_every: int = Field(default=100, gt=0)
    val_windows: int = Field(default=256, gt=0)
    eval_batch: int = Field(default=64, gt=0)
    rank_threshold: float = Field(default=1e-3, gt=0, lt=1)

    @model_validator(mode="after")
    def _warmup(self) -> TrainParams:
        if self.warmup >= self.steps:
            raise ValueError(f"warmup {self.warmup} must be shorter than steps {self.steps}")
        return self


class GridPoint(ParamsModel):
    """One setting of a learning-rate grid: ``lr`` and, where given, the FRUGAL / GaLore scales
    (unset = the variant's own value). A bare number in the grid is ``{lr: number}``."""

    lr: float = Field(gt=0)
    proj_lr_scale: float | None = Field(default=None, gt=0)
    inactive_lr_scale: float | None = Field(default=None, ge=0)


class OptimizerParams(ParamsModel):
    """One named optimiser configuration (a variant of the pipeline).

    ``lr_grid``: the settings tried on the validation split (``frugal.selection.seeds``); the
    one with the lowest validation perplexity is trained on every seed and reported on the test
    split. ``lr_from``: use the setting selected for another variant (an ablation that changes
    one thing). Neither: the configured ``lr`` and scales are used as they are.
    """

    kind: Literal["adamw", "frugal", "galore", "badam", "signsgd"]
    role: Literal["method", "baseline", "ablation"]
    lr: float = Field(gt=0)
    projector: Literal["block", "svd", "random", "randperm", "randk"] = "block"
    density: float = Field(default=0.25, ge=0, le=1)
    update_gap: int = Field(default=200, ge=1)
    state_free: Literal["sign_sgd", "sgd", "no"] = "sign_sgd"
    inactive_lr_scale: float = Field(default=1.0, ge=0)
    proj_lr_scale: float = Field(default=1.0, gt=0)
    state_on_refresh: Literal["reset", "keep", "reproject"] = "reset"
    block_order: Literal["descending", "ascending", "random"] = "descending"
    proj_logits: bool = False
    proj_embeds: bool = False
    proj_norms: bool = False
    weight_decay: float = Field(default=0.0, ge=0)
    seeds: Seeds | None = None
    lr_grid: list[GridPoint] | None = Field(default=None, min_length=1)
    lr_from: str | None = None

    @field_validator("lr_grid", mode="before")
    @classmethod
    def _bare_numbers(cls, grid):
        if isinstance(grid, list):
            return [{"lr": g} if isinstance(g, int | float) and not isinstance(g, bool) else g
                    for g in grid]
        return grid

    def with_point(self, point: GridPoint | dict) -> OptimizerParams:
        """This configuration at one grid setting (scales left unset keep their values)."""
        point = GridPoint.model_validate(point)
        update = {k: v for k, v in point.model_dump().items() if v is not None}
        return self.model_copy(update=update)

    @model_validator(mode="after")
    def _consistent(self) -> OptimizerParams:
        moves = self.proj_logits or self.proj_embeds or self.proj_norms
        if moves and self.projector != "block":
            raise ValueError("proj_logits/proj_embeds/proj_norms need projector: block (the "
                             f"{self.projector!r} projector splits matrices of the blocks only)")
        if self.kind == "galore" and self.projector not in ("svd", "random", "randperm"):
            raise ValueError(f"kind galore needs a matrix projector, got {self.projector!r}")
        if self.lr_grid is not None and self.lr_from is not None:
            raise ValueError("lr_grid and lr_from exclude each other: either select on this "
                             "variant's own grid or take another variant's selection")
        return self


class SelectionParams(ParamsModel):
    """Learning-rate selection on the validation split: every grid setting is trained on these
    seeds (kept apart from the reported ``seeds`` by default) and ranked by the mean final
    validation perplexity."""

    seeds: Seeds = Field(default_factory=lambda: [100])


class FrugalParams(ParamsModel):
    seeds: Seeds
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    data: DataParams = DataParams()
    tokenizer: TokenizerParams = TokenizerParams()
    model: ModelParams
    train: TrainParams
    optimizers: dict[str, OptimizerParams]
    selection: SelectionParams = SelectionParams()
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("optimizers")
    @classmethod
    def _variants(cls, optimizers: dict[str, OptimizerParams]) -> dict[str, OptimizerParams]:
        if set(optimizers) != set(VARIANTS):
            missing = sorted(set(VARIANTS) - set(optimizers))
            extra = sorted(set(optimizers) - set(VARIANTS))
            raise ValueError(f"optimizers must be exactly {list(VARIANTS)} "
                             f"(missing {missing}, unknown {extra})")
        return optimizers

    @model_validator(mode="after")
    def _lr_sources(self) -> FrugalParams:
        for name, cfg in self.optimizers.items():
            src = cfg.lr_from
            if src is None:
                continue
            if src not in self.optimizers or src == name:
                raise ValueError(f"optimizers.{name}.lr_from: got {src!r}; expected another "
                                 f"variant of {list(VARIANTS)}")
            if self.optimizers[src].lr_from is not None:
                raise ValueError(f"optimizers.{name}.lr_from: {src!r} takes its own setting "
                                 f"from {self.optimizers[src].lr_from!r}; name that variant")
        return self

    @model_validator(mode="after")
    def _tokenizer_fits(self) -> FrugalParams:
        if self.data.source == "synthetic_markov" and self.tokenizer.kind != "char":
            raise ValueError("data.source synthetic_markov needs tokenizer.kind: char")
        return self

    def seeds_of(self, variant: str) -> list[int]:
        """A variant's seeds: its own list (ablations may use fewer) or the pipeline's."""
        return self.optimizers[variant].seeds or self.seeds
