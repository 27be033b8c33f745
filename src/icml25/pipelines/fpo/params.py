"""Parameters of the fpo pipeline (``conf/*/parameters_fpo.yml``), validated before any work."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.fpo.losses import METHODS


class DataParams(ParamsModel):
    n_sft: int = Field(gt=0)
    p_follow: float = Field(ge=0.0, le=1.0)


class ModelParams(ParamsModel):
    d_model: int = Field(gt=0)
    n_layers: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    d_ff: int = Field(gt=0)
    max_seq_len: int = Field(ge=16)
    sft_steps: int = Field(gt=0)
    sft_batch_size: int = Field(gt=0)
    lr: float = Field(gt=0)

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model {self.d_model} must split into n_heads {self.n_heads} "
                             "heads of even size (rotary embeddings)")
        return self


class SAEParams(ParamsModel):
    layer: int = Field(gt=0, description="residual stream after this block (1-based)")
    m: int = Field(gt=0)
    kind: Literal["relu_l1", "topk"] = "relu_l1"
    k_sae: int = Field(default=16, gt=0)
    l1: float | None = Field(default=None, gt=0, description="None: adapt towards target_l0")
    target_l0: tuple[float, float] = (8.0, 32.0)
    steps: int = Field(gt=0)
    lr: float = Field(default=1e-3, gt=0)
    batch_size: int = Field(default=512, gt=0)
    n_sequences: int = Field(gt=0, description="SFT-corpus sequences whose activations train it")

    @model_validator(mode="after")
    def _target(self) -> SAEParams:
        lo, hi = self.target_l0
        if not 0 < lo <= hi:
            raise ValueError(f"target_l0 must be 0 < low <= high, got {self.target_l0}")
        if self.kind == "topk" and self.k_sae > self.m:
            raise ValueError(f"k_sae {self.k_sae} exceeds the SAE width m {self.m}")
        return self


class PrefParams(ParamsModel):
    n_train: int = Field(gt=0)
    n_dev: int = Field(gt=0)
    samples: int = Field(ge=2)
    temperature: float = Field(gt=0)
    min_gap: float = Field(ge=0)
    bt_noise_tau: float = Field(default=0.0, ge=0)
    max_new: int = Field(default=48, gt=0)


class AlignParams(ParamsModel):
    methods: list[Literal["dpo", "simpo", "tdpo1", "tdpo2", "fpo"]] = Field(
        default=list(METHODS), min_length=1)
    epochs: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    lr_grid: list[float] = Field(min_length=1)
    warmup: float = Field(ge=0, lt=1)
    n_dev_select: int = Field(gt=0, description="dev prompts whose greedy mean r* picks the lr")

    @model_validator(mode="after")
    def _lrs(self) -> AlignParams:
        if any(lr <= 0 for lr in self.lr_grid):
            raise ValueError(f"lr_grid must be positive, got {self.lr_grid}")
        if "fpo" not in self.methods:
            raise ValueError("methods must include fpo (the paper's method)")
        return self


class BetaOnly(ParamsModel):
    beta: float = Field(gt=0)


class SimPOLoss(ParamsModel):
    beta: float = Field(gt=0)
    gamma: float = Field(ge=0)


class TDPO2Loss(ParamsModel):
    beta: float = Field(gt=0)
    alpha: float = Field(ge=0)
    stopgrad: bool = True


class FPOLoss(ParamsModel):
    beta: float = Field(gt=0)
    alpha: float = Field(ge=0)
    k: int = Field(gt=0)
    union_topk: bool = True
    stopgrad: bool = True
    pooling: Literal["masked_mean", "padded_mean"] = Field(
        default="masked_mean",
        description="masked_mean: mean of the SAE codes over the response tokens (the paper); "
                    "padded_mean: the official repository's mean over the padded batch length")


class LossParams(ParamsModel):
    dpo: BetaOnly
    simpo: SimPOLoss
    tdpo1: BetaOnly
    tdpo2: TDPO2Loss
    fpo: FPOLoss


class EvalParams(ParamsModel):
    n_prompts: int = Field(gt=0)
    n_hard: int = Field(ge=0)
    temperatures: list[float] = Field(min_length=1)
    n_boot: int = Field(gt=0)
    n_diversity: int = Field(gt=0)
    length_match_tol: int = Field(default=2, ge=0, description="tokens: pairs this close in "
                                  "length enter the length-matched win rate")

    @model_validator(mode="after")
    def _temps(self) -> EvalParams:
        if any(t < 0 for t in self.temperatures) or 0.0 not in self.temperatures:
            raise ValueError(f"temperatures must be >= 0 and include 0 (greedy), got "
                             f"{self.temperatures}")
        return self


class FPOParams(ParamsModel):
    seeds: Seeds
    data_seed: int = Field(ge=0)
    progress: bool = True
    num_threads: int | None = Field(default=None, gt=0)
    data: DataParams
    model: ModelParams
    sae: SAEParams
    pref: PrefParams
    align: AlignParams
    loss: LossParams
    eval: EvalParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> FPOParams:
        if self.sae.layer > self.model.n_layers:
            raise ValueError(f"sae.layer {self.sae.layer} exceeds model.n_layers "
                             f"{self.model.n_layers}")
        if self.loss.fpo.k > self.sae.m:
            raise ValueError(f"loss.fpo.k {self.loss.fpo.k} exceeds the SAE width sae.m "
                             f"{self.sae.m}")
        if self.pref.max_new + 12 > self.model.max_seq_len:
            raise ValueError(f"model.max_seq_len {self.model.max_seq_len} cannot hold a prompt "
                             f"(up to 10 tokens) and pref.max_new {self.pref.max_new} tokens")
        return self
