"""Parameters of the malot pipeline (``conf/*/parameters_malot.yml``), validated once before any
node runs. Every choice the paper leaves open is a parameter here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.malot.synthetic import FAMILIES

#: Variants evaluated by the pipeline: the method and its baselines at equal generation count.
#: ``ma_lot``/``whole_proof``: the agents of ``malot.agent`` (symbolic by default);
#: ``lot_*``: the small model trained here with the LoT-TL recipe (``malot.lot``).
VARIANTS = {"ma_lot": "method", "whole_proof": "baseline"}
LOT_VARIANTS = {
    "lot_ma_lot": "method",               # prover + corrector, both WITH long CoT
    "lot_whole_proof": "baseline",        # whole-proof pass@(x + k·y), WITH CoT
    "lot_selfcorrect_nocot": "ablation",  # corrector thought replaced by the placeholder
    "lot_cot_off": "ablation",            # prover only, WITHOUT CoT (pass@(x + k·y))
    "lot_no_cd_ma_lot": "ablation",       # model trained without correction data, MA-LoT loop
}
ROLES = {**VARIANTS, **LOT_VARIANTS}


class VerifierParams(ParamsModel):
    backend: Literal["minilean", "lean_repl"] = "minilean"
    z3_timeout_s: float = Field(default=20.0, gt=0, le=600)
    timeout_s: float = Field(default=20.0, gt=0, le=600)
    z3_rlimit: int = Field(default=5_000_000, ge=1000)
    proof_rlimit: int = Field(default=50_000_000, ge=1000)
    max_steps: int = Field(default=20_000, ge=10)
    max_chars: int = Field(default=20_000, gt=100)
    workers: int = Field(default=8, ge=1)
    memory_mb: int = Field(default=8192, ge=256)
    lean_project_dir: str | None = None


class AgentParams(ParamsModel):
    backend: Literal["symbolic", "openai", "hf"] = "symbolic"
    model_path: str | None = None
    base_url: str | None = None
    model: str | None = None
    temperature: float = Field(default=0.8, ge=0, le=2)
    top_p: float = Field(default=0.8, gt=0, le=1)
    max_tokens: int = Field(default=4096, gt=0)
    cot_fraction: float = Field(default=0.8, gt=0, le=1)
    fewshot: int = Field(default=3, ge=0)

    @model_validator(mode="after")
    def _endpoint(self) -> AgentParams:
        if self.backend == "openai" and not (self.base_url and self.model):
            raise ValueError("backend openai needs base_url and model (credentials may also come "
                             "from conf/local/credentials.yml: malot_endpoint)")
        if self.backend == "hf" and not self.model_path:
            raise ValueError("backend hf needs model_path (a local Hugging Face model folder)")
        return self


class BudgetParams(ParamsModel):
    """Budget ``x + k × y``: x prover samples, k rounds of y corrections (c per failed proof)."""

    x: int = Field(gt=0)
    rounds: int = Field(ge=0, le=16)
    y: int = Field(gt=0)
    corrections_per_proof: int = Field(gt=0)

    @model_validator(mode="after")
    def _divides(self) -> BudgetParams:
        if self.y % self.corrections_per_proof:
            raise ValueError(f"y {self.y} must be a multiple of corrections_per_proof "
                             f"{self.corrections_per_proof} (a round corrects y/c proofs)")
        return self


class SynthParams(ParamsModel):
    n_train: int = Field(ge=0)
    n_heldout: int = Field(gt=0)
    corrections_per_theorem: int = Field(default=2, ge=0)
    coef_max: int = Field(default=9, ge=1, le=99)
    max_vars: int = Field(default=3, ge=2, le=4)
    families: list[Literal[FAMILIES]] = Field(  # type: ignore[valid-type]
        default=list(FAMILIES), min_length=1)
    seed: int = Field(default=0, ge=0)


class MiniF2FParams(ParamsModel):
    path: str = "../shared/data/minif2f/minif2f_lean4.jsonl"
    splits: list[Literal["valid", "test"]] = Field(default=["valid", "test"], min_length=1)
    evaluate_split: Literal["valid", "test"] = "test"
    max_theorems: int | None = Field(default=None, gt=0)
    required: bool = False


class SoundnessParams(ParamsModel):
    random_inequalities: int = Field(default=100, ge=0)
    seed: int = Field(default=0, ge=0)
    #: generated statements on Lean's conventions (shadowing, x / 0, 0⁻¹, ℕ -, /, casts)
    lean_semantics_cases: int = Field(default=300, ge=0)
    #: proofs tried per generated statement (a seeded sample of the repertoire); null: all
    lean_semantics_proofs: int | None = Field(default=None, ge=1)


class LotParams(ParamsModel):
    """The small LoT-Solver trained here (LoT-TL in miniature), one per seed."""

    enabled: bool = True
    d_model: int = Field(default=96, ge=8)
    n_layers: int = Field(default=3, ge=1)
    n_heads: int = Field(default=4, ge=1)
    d_ff: int = Field(default=256, ge=8)
    max_seq_len: int = Field(default=256, ge=64, le=4096)
    batch_size: int = Field(default=16, ge=1)
    lr: float = Field(default=3e-3, gt=0, le=1)
    warmup: int = Field(default=30, ge=0)
    stage1_steps: int = Field(default=60, ge=0)
    stage2_steps: int = Field(default=200, ge=1)
    stage3_steps: int = Field(default=200, ge=1)
    replay: float = Field(default=0.25, ge=0, lt=1)
    weight_decay: float = Field(default=0.01, ge=0)
    thought_tokens: int = Field(default=40, ge=1)
    proof_tokens: int = Field(default=32, ge=1)
    sample_batch: int = Field(default=256, ge=1)
    temperature: float = Field(default=0.8, ge=0, le=2)
    top_p: float = Field(default=0.8, gt=0, le=1)
    num_threads: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _shapes(self) -> LotParams:
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model {self.d_model} must split into n_heads {self.n_heads} "
                             "heads of even size")
        if self.thought_tokens + self.proof_tokens + 16 >= self.max_seq_len:
            raise ValueError("thought_tokens + proof_tokens leave no room for the prompt in "
                             f"max_seq_len {self.max_seq_len}")
        return self


class MalotParams(ParamsModel):
    seeds: Seeds
    progress: bool = True
    verifier: VerifierParams
    agent: AgentParams
    budget: BudgetParams
    synth: SynthParams
    minif2f: MiniF2FParams
    soundness: SoundnessParams
    lot: LotParams = LotParams()
    claims: list[ClaimSpec] = Field(min_length=1)
