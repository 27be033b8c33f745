"""Parameters of the sortformer pipeline (``conf/*/parameters_sortformer.yml``), validated once.

Every choice the paper leaves open is a parameter here (kernel axis/scale, injection
point, PIL matching rule, post-processing search).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

#: The diarizer loss variants, in wiring order: the method (hybrid) and its two controls.
VARIANTS = ("pil", "sort", "hybrid")
ROLES = {"hybrid": "method", "pil": "baseline", "sort": "baseline", "clustering": "baseline",
         "clustering_oracle_k": "baseline", "asr_sortformer": "method", "asr_none": "baseline",
         "asr_oracle": "baseline"}


def _range(lo: float, hi: float, v: tuple[float, float], name: str) -> tuple[float, float]:
    if not lo <= v[0] <= v[1] <= hi:
        raise ValueError(f"{name} must be (low, high) with {lo} <= low <= high <= {hi}, got {v}")
    return v


class SpeakerParams(ParamsModel):
    n_train: int = Field(ge=2)
    n_test: int = Field(ge=2)
    n_utterances: int = Field(ge=2)
    words_range: tuple[int, int] = (3, 6)
    seed: int = Field(default=0, ge=0)
    espeak_voices: list[str] = Field(min_length=1)
    train_variants: list[str] = Field(min_length=1)
    test_variants: list[str] = Field(min_length=1)
    train_pitches: list[int] = Field(min_length=1)
    test_pitches: list[int] = Field(min_length=1)
    train_flite: list[str] = Field(default_factory=list)
    test_flite: list[str] = Field(default_factory=list)
    flite_share: float = Field(default=0.2, ge=0, le=1)
    workers: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _disjoint(self) -> SpeakerParams:
        _range(1, 30, self.words_range, "words_range")
        shared = sorted({*(set(self.train_variants) & set(self.test_variants)),
                         *(set(self.train_flite) & set(self.test_flite))})
        pitches = sorted(set(self.train_pitches) & set(self.test_pitches))
        if shared or pitches:
            raise ValueError(f"test speakers must be unseen in training: traits {shared} and "
                             f"pitches {pitches} appear in both pools")
        if any(not 0 <= p <= 99 for p in self.train_pitches + self.test_pitches):
            raise ValueError("espeak-ng pitches must be in 0..99")
        return self


class SimParams(ParamsModel):
    duration_s: float = Field(gt=2.0)
    n_train: int = Field(ge=1)
    n_val: int = Field(ge=1)
    n_test: int = Field(ge=1)
    n_test_inpool: int = Field(ge=1)
    count_weights: list[float] = Field(min_length=1, max_length=6)
    p_switch: float = Field(default=0.85, ge=0, le=1)
    p_overlap: float = Field(default=0.4, ge=0, le=1)
    overlap_range: tuple[float, float] = (0.2, 1.0)
    silence_mean_s: float = Field(default=0.2, gt=0)
    gain_db: float = Field(default=3.0, ge=0)
    snr_range: tuple[float, float] = (15.0, 40.0)
    rir: Literal["none", "synthetic", "shoebox"] = "synthetic"
    rt60_range: tuple[float, float] = (0.2, 0.6)
    seed: int = Field(default=0, ge=0)
    #: training sessions without speech (silence, white or pink noise; all-zero labels)
    n_train_empty: int = Field(default=0, ge=0)
    #: share of the >= 2-speaker training sessions also trained with their first two speakers'
    #: first turns exchanged (arrival-order augmentation)
    swap_augment: float = Field(default=0.0, ge=0, le=1)
    #: processes that render and featurise the sessions (0: one per CPU core); the features
    #: do not depend on it
    n_jobs: int = Field(default=1, ge=0)
    #: which neighbouring arrivals the twins exchange: k swaps the first turns of the k-th and
    #: (k+1)-th speakers to arrive (0-based); a session gets one twin per k it has speakers for
    swap_pairs: list[int] = Field(default_factory=lambda: [0], min_length=1)

    @model_validator(mode="after")
    def _ranges(self) -> SimParams:
        if any(w < 0 for w in self.count_weights) or sum(self.count_weights) <= 0:
            raise ValueError("count_weights must be non-negative with a positive sum")
        if len(set(self.swap_pairs)) != len(self.swap_pairs) or not all(
                0 <= k <= len(self.count_weights) - 2 for k in self.swap_pairs):
            raise ValueError(f"swap_pairs: got {self.swap_pairs}; expected distinct arrival "
                             f"indices k with 0 <= k <= {len(self.count_weights) - 2} (k and k+1 "
                             "must both be among the simulated speakers)")
        _range(0.0, 10.0, self.overlap_range, "overlap_range")
        _range(-20.0, 100.0, self.snr_range, "snr_range")
        _range(0.05, 2.0, self.rt60_range, "rt60_range")
        return self


class ModelParams(ParamsModel):
    n_mels: int = Field(default=80, ge=8)
    conv_channels: int = Field(default=16, ge=1)
    d_model: int = Field(default=128, ge=8)
    n_layers: int = Field(default=4, ge=1)
    n_heads: int = Field(default=4, ge=1)
    d_ff: int = Field(default=512, ge=8)
    dropout: float = Field(default=0.1, ge=0, lt=1)
    encoder: Literal["transformer", "conformer_lite"] = "transformer"

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        return self


class LossParams(ParamsModel):
    ats_weight: float = Field(default=0.5, gt=0)
    pil_weight: float = Field(default=0.5, gt=0)
    pil_match: Literal["dot", "bce"] = "dot"


class OptimParams(ParamsModel):
    lr: float = Field(default=1e-3, gt=0)
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = Field(default=1e-3, ge=0)
    warmup_steps: int = Field(default=100, ge=1)
    min_lr: float = Field(default=1e-5, gt=0)
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    grad_clip: float = Field(default=1.0, gt=0)


class VadGateParams(ParamsModel):
    """The band-SNR speech gate on the posteriors (``vad_gate.py``): frames whose spectrum rises
    less than ``threshold_db`` above the recording's per-band ``floor_quantile`` noise floor get
    probability 0 before the post-processing rules."""

    enabled: bool = True
    threshold_db: float = Field(default=4.0, gt=0, le=40)
    floor_quantile: float = Field(default=0.1, ge=0, lt=1)
    n_bands: int = Field(default=24, ge=1, le=128)


class PostProcessingParams(ParamsModel):
    n_trials: int = Field(default=20, ge=0)
    seed: int = Field(default=0, ge=0)
    vad_gate: VadGateParams = VadGateParams()


class ClusteringParams(ParamsModel):
    thresholds: list[float] = Field(min_length=1)
    vad_db: float = Field(default=30.0, gt=0)
    window_s: float = Field(default=1.5, gt=0)
    hop_s: float = Field(default=0.75, gt=0)
    n_mfcc: int = Field(default=20, ge=2)


class AsrModelParams(ParamsModel):
    n_mels: int = Field(default=40, ge=8)
    conv_channels: int = Field(default=8, ge=1)
    d_model: int = Field(default=96, ge=16)
    enc_layers: int = Field(default=2, ge=1)
    dec_layers: int = Field(default=2, ge=1)
    n_heads: int = Field(default=4, ge=1)
    d_ff: int = Field(default=256, ge=8)
    dropout: float = Field(default=0.1, ge=0, lt=1)
    kernel_scale: float = Field(default=1.0, gt=0)
    unit_rows: bool = False
    inject_at: Literal["encoder_output", "pre_encoder"] = "encoder_output"
    label_smoothing: float = Field(default=0.1, ge=0, lt=1)

    @model_validator(mode="after")
    def _heads(self) -> AsrModelParams:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        return self


class MsasrParams(ParamsModel):
    enabled: bool = True
    n_train: int = Field(ge=1)
    n_test: int = Field(ge=1)
    count_weights: list[float] = Field(default=[1 / 3, 1 / 3, 1 / 3], min_length=1,
                                       max_length=4)
    seed: int = Field(default=0, ge=0)
    model: AsrModelParams
    optim: OptimParams


class RobustnessParams(ParamsModel):
    """Held-out checks of every diarizer: the first-two-speakers swap test and speech-free
    probes (silence, white and pink noise). ``near_gap_s`` splits the swap pairs by the gap
    between the first two arrivals' onsets (``swap_order_rate_near`` / ``_far``)."""

    enabled: bool = True
    n_swap: int = Field(default=200, ge=1)
    near_gap_s: float = Field(default=0.8, gt=0)
    probe_s: float = Field(default=15.0, gt=0)
    probe_levels_db: list[float] = Field(default=[-50.0, -20.0], min_length=1)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _levels(self) -> RobustnessParams:
        if any(not -120.0 <= x <= 0.0 for x in self.probe_levels_db):
            raise ValueError(f"probe_levels_db must be in [-120, 0] dB full scale, got "
                             f"{self.probe_levels_db}")
        return self


class AudioCheckParams(ParamsModel):
    """Diarize one recording with every trained model and the clustering baseline: ``path`` a
    local wav file (any rate; the first channel), ``rttm`` its reference (optional; DER and the
    first-speech onset need it). Without ``path`` a ``duration_s`` session of unseen speakers is
    synthesised (with its reference)."""

    enabled: bool = True
    path: str | None = None
    rttm: str | None = None
    duration_s: float = Field(default=30.0, gt=2.0)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _files(self) -> AudioCheckParams:
        from pathlib import Path
        if self.rttm is not None and self.path is None:
            raise ValueError("rttm is given without path: name the wav file it describes")
        for name, value, suffix in (("path", self.path, ".wav"), ("rttm", self.rttm, ".rttm")):
            if value is None:
                continue
            f = Path(value).expanduser()
            if not f.is_file():
                raise ValueError(f"{name}: no such file {value!r}")
            if f.suffix.lower() != suffix:
                raise ValueError(f"{name}: {value!r} is not a {suffix} file")
        return self


class SortformerParams(ParamsModel):
    seeds: Seeds
    device: str = "cpu"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    max_speakers: int = Field(default=4, ge=1, le=6)
    frame_s: float = Field(default=0.08, gt=0)
    #: storage of the sessions' log-mel features in memory (compute_features); batches are
    #: float32 either way. float16 halves the paper config's ~110 GB of training features
    features_dtype: Literal["float32", "float16"] = "float32"
    speakers: SpeakerParams
    sim: SimParams
    model: ModelParams
    loss: LossParams = LossParams()
    optim: OptimParams
    postprocessing: PostProcessingParams = PostProcessingParams()
    clustering: ClusteringParams
    msasr: MsasrParams
    robustness: RobustnessParams = RobustnessParams()
    audio_check: AudioCheckParams = AudioCheckParams()
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _frames(self) -> SortformerParams:
        if abs(self.frame_s - 0.08) > 1e-9:
            raise ValueError("frame_s must be 0.08: the x8 conv front end fixes 80 ms frames")
        if len(self.sim.count_weights) > self.max_speakers:
            raise ValueError(f"sim.count_weights has {len(self.sim.count_weights)} speaker "
                             f"counts but the model has {self.max_speakers} outputs")
        return self
