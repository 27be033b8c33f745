"""Parameters of the vga pipeline (``conf/*/parameters_vga.yml``), validated once before any work.

Every choice the paper leaves open (training layout per task, pair arrangement, sampler
densities) is a parameter here; infeasible settings (a task whose classes cannot all occur at
the configured graph sizes, an unknown layout) fail with the full key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds
from icml25.pipelines.vga.gate import chance_claim_task
from icml25.pipelines.vga.graphs import MAX_DP_NODES, TASKS, GraphTaskError, check_task_sizes

#: The trained vision variants, in wiring order (one train and one evaluate node each).
MODELS = ("cnn", "vit")
Layout = Literal["kk", "planar", "random"]


class SizesParams(ParamsModel):
    train: int = Field(gt=0)
    val: int = Field(gt=0)
    test: int = Field(gt=0)


class TaskParams(ParamsModel):
    p: tuple[float, float] = Field(description="range of the G(n, p) edge probability")
    sizes: SizesParams | None = None  # this task's split sizes instead of vga.data.sizes
    train_layout: Layout
    # several training layouts (the control): each training / validation graph is drawn in one
    # of them, in turn within its class; train_layout must be one of them and names the
    # in-distribution layout of the metrics (acc_<task>_train_layout, ood_gap_<task>)
    train_layouts: list[Layout] | None = Field(default=None, min_length=1)
    eval_layouts: list[Layout] = Field(min_length=1)
    test_layout: Layout

    @property
    def training_layouts(self) -> list[str]:
        return list(self.train_layouts) if self.train_layouts else [self.train_layout]

    @field_validator("p")
    @classmethod
    def _p(cls, p: tuple[float, float]) -> tuple[float, float]:
        if not 0 < p[0] <= p[1] <= 1:
            raise ValueError(f"p must be (low, high) with 0 < low <= high <= 1, got {p}")
        return p

    @model_validator(mode="after")
    def _layouts(self) -> TaskParams:
        if len(set(self.eval_layouts)) != len(self.eval_layouts):
            raise ValueError(f"eval_layouts {self.eval_layouts} repeat a layout")
        if self.train_layouts is not None:
            if len(set(self.train_layouts)) != len(self.train_layouts):
                raise ValueError(f"train_layouts {self.train_layouts} repeat a layout")
            if self.train_layout not in self.train_layouts:
                raise ValueError(f"train_layout {self.train_layout!r} is not in train_layouts "
                                 f"{self.train_layouts}")
            missing = [lo for lo in self.train_layouts if lo not in self.eval_layouts]
            if missing:
                raise ValueError(f"eval_layouts {self.eval_layouts} must include every "
                                 f"training layout; missing {missing}")
        if self.train_layout not in self.eval_layouts:
            raise ValueError(f"eval_layouts {self.eval_layouts} must include the train_layout "
                             f"{self.train_layout!r} (the in-distribution control)")
        if self.test_layout not in self.eval_layouts:
            raise ValueError(f"test_layout {self.test_layout!r} is not in eval_layouts "
                             f"{self.eval_layouts}")
        return self


class DataParams(ParamsModel):
    seed: int = Field(ge=0)
    n_nodes: list[int] = Field(min_length=1)
    sizes: SizesParams
    max_attempts_per_sample: int = Field(default=500, gt=0)
    n_brute_force: int = Field(default=20, ge=0)
    pair_left_layout: Layout = "kk"
    random_min_dist_radii: float = Field(default=3.0, ge=0)
    tasks: dict[str, TaskParams] = Field(min_length=1)

    @field_validator("n_nodes")
    @classmethod
    def _n_nodes(cls, n_nodes: list[int]) -> list[int]:
        if any(n < 4 or n > MAX_DP_NODES for n in n_nodes) or len(set(n_nodes)) != len(n_nodes):
            raise ValueError(f"n_nodes must be distinct sizes in 4..{MAX_DP_NODES}, got {n_nodes}")
        return n_nodes

    @model_validator(mode="after")
    def _tasks(self) -> DataParams:
        unknown = sorted(set(self.tasks) - set(TASKS))
        if unknown:
            raise ValueError(f"unknown tasks {unknown}; known: {list(TASKS)}")
        for task in self.tasks:
            try:
                check_task_sizes(task, self.n_nodes)
            except GraphTaskError as err:
                raise ValueError(f"vga.data.tasks.{task}: {err}") from None
        return self


class RenderParams(ParamsModel):
    size: int = Field(ge=32, le=1024)
    node_radius: float = Field(default=2.5, gt=0)
    edge_width: float = Field(default=1.0, gt=0)
    supersample: int = Field(default=4, ge=1, le=8)
    backend: Literal["pil", "matplotlib"] = "pil"
    fill: float = Field(default=0.84, gt=0, le=1)
    edge_grey: int = Field(default=0, ge=0, le=254)  # edges' grey level; nodes are black
    # readability: a drawing with two nodes closer than this many node radii (2 = touching), or
    # a node centre this close to an edge it is not an end of, is re-drawn, else refused
    min_node_dist_radii: float = Field(default=3.0, ge=2)
    min_edge_clearance_radii: float = Field(default=1.4, ge=1)


class ModelParams(ParamsModel):
    kind: Literal["cnn", "vit"]
    lr: float = Field(gt=0)
    widths: list[int] | None = None
    depths: list[int] | None = None
    patch: int | None = Field(default=None, gt=0)
    dim: int | None = Field(default=None, gt=0)
    depth: int | None = Field(default=None, gt=0)
    heads: int | None = Field(default=None, gt=0)
    mlp: int | None = Field(default=None, gt=0)
    # read-out and stem (models.py): pooling of the features / patch tokens, the normalisation
    # before the head, a full-resolution conv stem (channels; 0 = none), the CNN's patchify size
    pool: Literal["cls", "mean", "sum"] | None = None
    head_norm: Literal["layer", "batch", "none"] = "layer"
    conv_stem: int = Field(default=0, ge=0)
    stem: int = Field(default=4, gt=0)

    @model_validator(mode="after")
    def _shape(self) -> ModelParams:
        if self.kind == "cnn":
            if not self.widths or not self.depths or len(self.widths) != len(self.depths):
                raise ValueError("cnn needs widths and depths of the same non-zero length")
            if min(self.widths) < 1 or min(self.depths) < 1:
                raise ValueError("cnn widths and depths must be positive")
            if self.pool == "cls":
                raise ValueError("cnn pool must be mean or sum (cls is the ViT's read-out)")
        else:
            missing = [k for k in ("patch", "dim", "depth", "heads", "mlp")
                       if getattr(self, k) is None]
            if missing:
                raise ValueError(f"vit needs {missing}")
            if self.dim % self.heads:
                raise ValueError(f"vit dim {self.dim} is not divisible by heads {self.heads}")
        return self

    def model_kwargs(self, image_size: int) -> dict:
        common = {"head_norm": self.head_norm, "conv_stem": self.conv_stem}
        if self.kind == "cnn":
            return {"widths": list(self.widths), "depths": list(self.depths),
                    "stem": self.stem, "pool": self.pool or "mean", **common}
        return {"image_size": image_size, "patch": self.patch, "dim": self.dim,
                "depth": self.depth, "heads": self.heads, "mlp": self.mlp,
                "pool": self.pool or "cls", **common}


class TrainParams(ParamsModel):
    epochs: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    weight_decay: float = Field(default=0.05, ge=0)
    warmup_epochs: float = Field(default=1.0, ge=0)
    grad_clip: float | None = Field(default=1.0, ge=0)
    track_test_each_epoch: bool = True
    augment: bool = True   # dihedral symmetries (legitimate, unused by the paper)
    # before each validation, re-estimate the BatchNorm statistics on this many training
    # batches with the current weights (vision.recalibrate_batchnorm; 0 = off)
    bn_recalibrate_batches: int = Field(default=0, ge=0)


class BaselineParams(ParamsModel):
    lr_c: float = Field(default=1.0, gt=0)


class MllmParams(ParamsModel):
    enabled: bool = False
    base_url: str = ""
    model: str = ""
    n_per_task: int = Field(default=100, gt=0)
    max_tokens: int = Field(default=1024, gt=0)
    temperature: float = Field(default=0.0, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)
    retries: int = Field(default=2, ge=0)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _endpoint(self) -> MllmParams:
        if self.enabled and not (self.base_url and self.model):
            raise ValueError("enabled needs base_url and model (an OpenAI-compatible endpoint)")
        return self


class GateParams(ParamsModel):
    """The learning gate of the chance-level claims (``gate.apply_control_gate``)."""

    task: str = "node_count"
    min_acc: float = Field(default=0.9, gt=0, le=1)


class VgaParams(ParamsModel):
    seeds: Seeds
    device: str = "auto"
    num_threads: int = Field(default=1, ge=0)
    progress: bool = True
    data: DataParams
    render: RenderParams
    models: dict[str, ModelParams]
    train: TrainParams
    baselines: BaselineParams = BaselineParams()
    mllm: MllmParams = MllmParams()
    gap_tasks: list[str] = Field(default=["ham_path", "ham_cycle", "shortest_path", "chordless"])
    examples_per_task: int = Field(default=4, ge=1, le=12)
    control_gate: GateParams = GateParams()
    claims: list[ClaimSpec] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _models(cls, models: dict[str, ModelParams]) -> dict[str, ModelParams]:
        if set(models) != set(MODELS):
            raise ValueError(f"models must be exactly {list(MODELS)}, got {sorted(models)}")
        for name, spec in models.items():
            if spec.kind != name:
                raise ValueError(f"models.{name}.kind must be {name!r}")
        return models

    @model_validator(mode="after")
    def _consistent(self) -> VgaParams:
        unknown = sorted(set(self.gap_tasks) - set(self.data.tasks))
        if unknown:
            raise ValueError(f"vga.gap_tasks {unknown} are not among vga.data.tasks")
        gate = self.control_gate
        for claim in self.claims:
            task = chance_claim_task(claim.model_dump())
            if task is None:
                continue
            if gate.task not in self.data.tasks:
                raise ValueError(f"vga.control_gate.task {gate.task!r} (the control of the "
                                 f"chance-level claim {claim.claim!r}) is not among "
                                 f"vga.data.tasks {sorted(self.data.tasks)}")
            if task not in self.data.tasks:
                raise ValueError(f"vga claim {claim.claim!r}: task {task!r} of metric "
                                 f"{claim.metric!r} is not among vga.data.tasks")
            layout = self.data.tasks[task].test_layout
            control_layouts = self.data.tasks[gate.task].eval_layouts
            if layout not in control_layouts:
                raise ValueError(
                    f"vga claim {claim.claim!r}: its test layout {layout!r} is not among the "
                    f"eval_layouts {control_layouts} of vga.control_gate.task {gate.task!r}, "
                    "so the claim's learning gate has no control to read")
        vit = self.models["vit"]
        if self.render.size % vit.patch:
            raise ValueError(f"vga.render.size {self.render.size} is not divisible by "
                             f"vga.models.vit.patch {vit.patch}")
        return self
