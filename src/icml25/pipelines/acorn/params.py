"""Parameters of the acorn pipeline (``conf/*/parameters_acorn.yml``), validated once.

Every choice the paper leaves open (see ``docs/papers/acorn.md``) is a parameter here; physically
impossible settings (a speed at or above the speed of sound, an array as wide as the room) are
refused before any work.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.acorn.channels import SPEED_OF_SOUND
from icml25.pipelines.acorn.qa import TASKS

#: The learned variants, in wiring order (one train and one predict node each).
VARIANTS = ("acorn_phase", "magnitude_only")
ENGINES = ("espeak-ng", "flite")

Range = tuple[float, float]


def _ordered(value: Range, name: str) -> Range:
    if not value[0] <= value[1]:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {list(value)}")
    return value


class SourceParams(ParamsModel):
    n_utterances: int = Field(ge=3)
    engines: list[Literal[ENGINES]] = Field(min_length=1)  # type: ignore[valid-type]
    synthetic_per_family: int = Field(ge=3)
    synthetic_seconds: float = Field(gt=0.2, le=30)
    split_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    use_packaged_wavs: bool = True
    seed: int = Field(ge=0)

    @field_validator("split_fractions")
    @classmethod
    def _fractions(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if min(value) <= 0 or abs(sum(value) - 1.0) > 1e-6:
            raise ValueError(f"train/val/test fractions must be positive and sum to 1, got "
                             f"{list(value)}")
        return value


TaskCounts = dict[Literal[TASKS], int]  # type: ignore[valid-type]


class DataParams(ParamsModel):
    clip_s: float = Field(ge=0.1, le=10.0)
    mic_spacing: float = Field(gt=0)
    snr_db: Range = (5.0, 40.0)
    speed: Range = (-40.0, 40.0)
    room_size: tuple[Range, Range, Range] = ((5.0, 12.0), (4.0, 10.0), (2.5, 4.0))
    t60: Range = (0.2, 1.0)
    weak_t60: Range = (0.1, 0.35)
    strong_t60: Range = (0.6, 1.5)
    n_train: TaskCounts
    n_val: TaskCounts
    n_test: TaskCounts
    n_t2: int = Field(ge=0, description="items per task (los, multipath, doa) of the ISM test")
    n_ood: int = Field(ge=0, description="items per task (los, multipath, doa) with sirens")
    #: every test Doppler scene also rendered with the opposite speed (symmetry metrics)
    doppler_mirror: bool = True
    #: the train split's Doppler scenes as mirror pairs (v and -v, same source and noise; the
    #: count n_train.doppler unchanged): the approaching/receding physics as augmentation
    doppler_mirror_train: bool = False
    seed: int = Field(ge=0)
    #: processes that render the clips (0: one per CPU core); the clips do not depend on it
    n_jobs: int = Field(default=1, ge=0)

    @field_validator("snr_db", "t60", "weak_t60", "strong_t60")
    @classmethod
    def _ranges(cls, value: Range, info) -> Range:
        return _ordered(value, info.field_name)

    @field_validator("speed")
    @classmethod
    def _subsonic(cls, value: Range) -> Range:
        _ordered(value, "speed")
        if max(abs(value[0]), abs(value[1])) >= SPEED_OF_SOUND:
            raise ValueError(f"source speeds {list(value)} m/s reach the speed of sound "
                             f"({SPEED_OF_SOUND} m/s); the moving-source model needs |v| < c")
        return value

    @field_validator("n_train", "n_val", "n_test")
    @classmethod
    def _all_tasks(cls, value: dict[str, int], info) -> dict[str, int]:
        if set(value) != set(TASKS) or min(value.values()) < 2:
            raise ValueError(f"{info.field_name} needs at least 2 items for each task of "
                             f"{list(TASKS)}, got {value}")
        return value

    @model_validator(mode="after")
    def _geometry(self) -> DataParams:
        for i, r in enumerate(self.room_size):
            _ordered(r, f"room_size[{i}]")
            if r[0] <= 0:
                raise ValueError(f"room_size[{i}] must be positive, got {list(r)}")
        narrowest = self.room_size[0][0]
        if self.mic_spacing >= narrowest:
            raise ValueError(f"mic_spacing {self.mic_spacing} m: the microphone array is as wide "
                             f"as or wider than the narrowest room ({narrowest} m)")
        if self.weak_t60[1] >= self.strong_t60[0]:
            raise ValueError("weak_t60 and strong_t60 must not overlap (multipath classes)")
        return self


class LagHeadParams(ParamsModel):
    """Geometry of the lag DoA head (``acorn.model.lag_head``; lag_head.LagDoAHead)."""

    bands: int = Field(default=8, ge=1, description="learned frequency weightings")
    channels: int = Field(default=16, ge=1, description="width of the circular lag CNN")
    kernel: int = Field(default=9, ge=1, description="odd kernel of the lag CNN (lags)")
    temperature: float = Field(default=50.0, gt=0, description="initial softmax temperature")
    window: int = Field(default=16, ge=1, description="soft-argmax over lags |l| <= window")

    @field_validator("kernel")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError(f"kernel must be odd so the lag CNN is centred, got {value}")
        return value


class ModelParams(ParamsModel):
    d: int = Field(gt=0)
    layers: int = Field(ge=1)
    heads: int = Field(ge=1)
    mc_mode: Literal["stack", "tokens"] = "stack"
    #: phase maps: `relative` = mic 1's absolute phase + inter-channel phase differences of
    #: the other mics (IPD), `absolute` = every mic's own phase (see encoder.stft_features)
    phase: Literal["absolute", "relative"] = "relative"
    dropout: float = Field(default=0.1, ge=0, lt=1)
    #: DoA head antisymmetric under the microphone swap by construction (encoder.AcornModel)
    swap_antisymmetric: bool = True
    #: the phase encoder's DoA readout: `lag` = learned generalised cross-correlation with a
    #: soft-argmax over lags (lag_head.py; common-delay invariant and inter-channel-delay
    #: equivariant by construction), `token` = MLP on the task token. The magnitude-only
    #: control always uses `token` (it has no phase to correlate).
    doa_head: Literal["lag", "token"] = "lag"
    lag_head: LagHeadParams = Field(default_factory=lambda: LagHeadParams())
    #: with `lag`: keep training the token DoA head as an auxiliary task, so the DoA batches
    #: still train the encoder (the answer stays the lag head's)
    doa_token_aux: bool = True

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d % self.heads:
            raise ValueError(f"d {self.d} is not divisible by heads {self.heads}")
        return self


class TrainParams(ParamsModel):
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    augment: bool = True
    #: label-aware physics augmentation (multitask.physics_augment)
    swap_augment: bool = True
    reverse_augment: bool = True
    delay_augment: int = Field(default=2, ge=0, description="max inter-channel delay (samples)")
    unknown_source_rate: float = Field(default=0.15, ge=0, lt=1)


class AcornParams(ParamsModel):
    seeds: Seeds
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    sources: SourceParams
    data: DataParams
    model: ModelParams
    train: TrainParams
    n_examples: int = Field(default=5, ge=1, le=5)
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _delay_in_range(self) -> AcornParams:
        from icml25.pipelines.acorn.channels import FS
        max_tdoa = self.data.mic_spacing * FS / SPEED_OF_SOUND
        if self.train.delay_augment > max_tdoa:
            raise ValueError(f"train.delay_augment {self.train.delay_augment} samples exceeds "
                             f"the array's largest TDoA {max_tdoa:.2f} samples "
                             f"(data.mic_spacing {self.data.mic_spacing} m)")
        if self.model.doa_head == "lag" and self.model.lag_head.window < max_tdoa:
            raise ValueError(f"model.lag_head.window {self.model.lag_head.window} samples is "
                             f"narrower than the array's largest TDoA {max_tdoa:.2f} samples "
                             f"(data.mic_spacing {self.data.mic_spacing} m)")
        clip_n = round(self.data.clip_s * FS)
        reach = self.model.lag_head.window + self.model.lag_head.kernel // 2
        if self.model.doa_head == "lag" and reach >= clip_n:
            raise ValueError(f"model.lag_head.window + kernel // 2 = {reach} lags needs clips "
                             f"longer than {reach} samples (data.clip_s {self.data.clip_s} s)")
        return self
