"""Parameters of the twa pipeline (``conf/*/parameters_twa.yml``), validated before any work.

Every choice the paper leaves open is a parameter here (``loss.*``, ``filter_threshold``,
``dpo.*``); see ``docs/papers/twa.md`` for the values chosen and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds


class LangParams(ParamsModel):
    nouns: int = Field(ge=3)
    adjectives: int = Field(ge=1)
    verbs: int = Field(ge=1)
    adverbs: int = Field(ge=1)
    prepositions: int = Field(ge=1)
    conjunctions: int = Field(ge=2)
    zipf: float = Field(gt=0)

    def sizes(self) -> dict[str, int]:
        return {"N": self.nouns, "ADJ": self.adjectives, "V": self.verbs, "ADV": self.adverbs,
                "P": self.prepositions, "CONJ": self.conjunctions}


class DataParams(ParamsModel):
    n_base_pairs: int = Field(gt=0)
    n_ft_sources: int = Field(gt=0)
    n_dev: int = Field(gt=0)
    n_test: int = Field(gt=0)
    n_test_hard: int = Field(ge=0)
    min_len: int = Field(ge=4)
    max_len: int = Field(ge=4)
    hard_min_len: int = Field(ge=4)
    hard_max_len: int = Field(ge=4)

    @model_validator(mode="after")
    def _ranges(self) -> DataParams:
        if self.min_len > self.max_len:
            raise ValueError(f"min_len {self.min_len} > max_len {self.max_len}")
        if self.hard_min_len > self.hard_max_len:
            raise ValueError(f"hard_min_len {self.hard_min_len} > hard_max_len "
                             f"{self.hard_max_len}")
        return self


class ModelParams(ParamsModel):
    d_model: int = Field(gt=0)
    enc_layers: int = Field(ge=1)
    dec_layers: int = Field(ge=1)
    heads: int = Field(gt=0)
    ff: int = Field(gt=0)
    dropout: float = Field(ge=0, lt=1)
    max_len: int = Field(ge=8)
    base_steps: int = Field(gt=0)
    ckpt_every: int = Field(gt=0)
    target_error_free: float = Field(gt=0, le=1)
    lr: float = Field(gt=0)
    batch: int = Field(gt=0)

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")
        return self


class SystemsParams(ParamsModel):
    source: Literal["others"] = "others"
    other_budgets: list[float] = Field(min_length=1)
    temperature: float = Field(gt=0)
    corrupt_errors: tuple[int, int]

    @model_validator(mode="after")
    def _check(self) -> SystemsParams:
        if any(not 0 < b <= 1 for b in self.other_budgets):
            raise ValueError(f"other_budgets must lie in (0, 1], got {self.other_budgets}")
        lo, hi = self.corrupt_errors
        if not 1 <= lo <= hi:
            raise ValueError(f"corrupt_errors must be [lo, hi] with 1 <= lo <= hi, got "
                             f"{self.corrupt_errors}")
        return self


class AnnotatorParams(ParamsModel):
    p_widen: float = Field(ge=0, le=1)
    p_miss: float = Field(ge=0, lt=1)
    max_errors: int = Field(ge=1)


class LossWeights(ParamsModel):
    major: float = Field(gt=0)
    minor: float = Field(gt=0)
    punct: float = Field(gt=0)
    nontranslation: float = Field(gt=0)


class LossParams(ParamsModel):
    ul_scale: list[float] = Field(min_length=1)
    omission_spans: Literal["source_side", "gap_token"] = "source_side"
    weights: LossWeights
    clamp_eps: float = Field(gt=0, lt=1)

    @model_validator(mode="after")
    def _grid(self) -> LossParams:
        if any(v <= 0 for v in self.ul_scale):
            raise ValueError(f"ul_scale grid values must be > 0, got {self.ul_scale}")
        if 1.0 not in self.ul_scale:
            raise ValueError("ul_scale grid must contain 1 (the paper's form; span vs token UL "
                             "is compared there)")
        return self


def _positive_grid(values: list[float], what: str) -> list[float]:
    if any(v <= 0 for v in values):
        raise ValueError(f"{what} grid values must be > 0, got {values}")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} grid has duplicates: {values}")
    return values


class DpoParams(ParamsModel):
    beta: list[float] = Field(min_length=1)
    sft_weight: list[float] = Field(min_length=1)
    max_pairs_per_source: int = Field(gt=0)

    @model_validator(mode="after")
    def _grids(self) -> DpoParams:
        _positive_grid(self.beta, "beta")
        if any(w < 0 for w in self.sft_weight):
            raise ValueError(f"sft_weight grid values must be >= 0, got {self.sft_weight}")
        return self


class FinetuneParams(ParamsModel):
    steps: int = Field(gt=0)
    lr: list[float] = Field(min_length=1)
    batch: int = Field(gt=0)
    warmup: float = Field(ge=0, le=1)
    filter_threshold: float = Field(ge=0)
    eval_every: int = Field(gt=0)
    with_references: bool = True

    @model_validator(mode="after")
    def _check(self) -> FinetuneParams:
        _positive_grid(self.lr, "lr")
        if self.eval_every > self.steps:
            raise ValueError(f"eval_every {self.eval_every} > steps {self.steps}: no checkpoint "
                             "would be evaluated on dev")
        return self


REAL_METHODS = ("sft_all", "filter_sft", "dpo", "twa", "twa_token_ul", "twa_offtraj", "twa_seq")


class RealParams(ParamsModel):
    """The real-data branch: local MQM TSV file(s) and a local HF seq2seq checkpoint."""

    mqm_tsv_paths: list[str] = Field(default_factory=list)
    hf_model_path: str | None = Field(default=None, validate_default=True)
    merge_raters: Literal["per_rater", "union"] = "per_rater"
    methods: list[Literal[REAL_METHODS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["sft_all", "filter_sft", "dpo", "twa"], min_length=1)
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    steps: int = Field(default=100, gt=0)
    batch: int = Field(default=8, gt=0)
    lr: float = Field(default=1e-5, gt=0)
    warmup: float = Field(default=0.05, ge=0, le=1)
    ul_scale: float = Field(default=1.0, gt=0)
    dpo_beta: float = Field(default=0.1, gt=0)
    dpo_sft_weight: float = Field(default=1.0, ge=0)
    heldout_fraction: float = Field(default=0.1, ge=0, lt=1)
    max_source_tokens: int = Field(default=256, gt=0)
    max_target_tokens: int = Field(default=256, gt=0)
    save_dir: str | None = "data/06_models/twa/real"

    @property
    def enabled(self) -> bool:
        return bool(self.mqm_tsv_paths)

    @field_validator("mqm_tsv_paths")
    @classmethod
    def _tsv_exist(cls, paths: list[str]) -> list[str]:
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            raise ValueError(f"existing local MQM TSV files; not found: {missing}")
        return paths

    @field_validator("hf_model_path")
    @classmethod
    def _checkpoint(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            if info.data.get("mqm_tsv_paths"):
                raise ValueError("a local seq2seq checkpoint directory when mqm_tsv_paths is set")
            return path
        if not (Path(path) / "config.json").is_file():
            raise ValueError(f"a checkpoint directory with a config.json; {path} has none")
        return path


class EvalParams(ParamsModel):
    n_perm: int = Field(gt=0)
    batch: int = Field(default=256, gt=0)


class TwaParams(ParamsModel):
    seed: int = Field(ge=0)
    seeds: Seeds
    # variants no claim names (grid points not selected, descriptive ablations) run on the first
    # `ablation_seeds` seeds only; the claims' variants run on every seed (None: all on all)
    ablation_seeds: int | None = Field(default=None, ge=1)
    device: Literal["cpu"] = "cpu"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    lang: LangParams
    data: DataParams
    model: ModelParams
    systems: SystemsParams
    annotator: AnnotatorParams
    loss: LossParams
    dpo: DpoParams
    finetune: FinetuneParams
    eval: EvalParams
    real: RealParams = Field(default_factory=RealParams)
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _lengths(self) -> TwaParams:
        # target <= 2x source words (+ suffixes, "."); the model must hold the longest one
        if 2 * max(self.data.max_len, self.data.hard_max_len) + 2 > self.model.max_len:
            raise ValueError(f"model.max_len {self.model.max_len} is too small for sentences "
                             f"of up to {max(self.data.max_len, self.data.hard_max_len)} "
                             "source words (needs 2 * words + 2)")
        return self
