"""Knowledge swapping: the losses, the stage loop and the stage orders (LtF, FtL and baselines).

The paper's learning and forgetting losses and its LtF / FtL stage orders, after the official
classification code (``image-classification/train/exchange_fltf.py`` / ``exchange_fftl.py`` of
github.com/xingmingyu123456/KnowledgeSwapping, read for facts only):

- learning stage: ``L = CE(f(x_l), y_l) + w_r CE(f(x_r), y_r) + alpha G`` (``w_r = beta``
  officially; 1.0 in the equal-weights ablation);
- forgetting stage: ``L = CE(f(x_k), y_k) + beta ReLU(BND - CE(f(x_f), y_f)) + alpha G``, the keep
  set being retain ∪ learn in LtF and retain only in FtL;
- an epoch is one pass over the keep loader; the other loader is cycled, one batch of each per
  step; the lr follows ``lr_e = min + (lr - min)(1 + cos(pi e / E)) / 2`` per epoch, restarted at
  each stage, with the same AdamW (and its moments) across stages.

Everything here is plain torch, usable without Kedro.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from tqdm.auto import tqdm

from icml25.core.lazy_import import lazy_module

if TYPE_CHECKING:
    from icml25.pipelines.knowledge_swap.vit import ViT

torch = lazy_module("torch")
nn = lazy_module("torch.nn")
F = lazy_module("torch.nn.functional")

Arrays = tuple[np.ndarray, np.ndarray]
TensorSet = tuple["torch.Tensor", "torch.Tensor"]  # quoted: torch loads when a swap runs
SET_NAMES = ("retain_train", "retain_test", "forget_train", "forget_test", "learn_train",
             "learn_test")
EVAL_SETS = ("retain", "forget", "learn")
StageKind = Literal["learn", "forget", "joint", "finetune"]


class SwapDataError(ValueError):
    """Swap data that cannot be used: missing or empty set, NaN, wrong shape or labels."""


# ------------------------------------------------------------------------------ data checks
def check_swap_sets(sets: dict[str, Arrays], n_pre: int, n_learn: int,
                    forget_labels: list[int]) -> None:
    """Refuse bad data with a clear message: every set present and non-empty, images
    ``[n, H, W]`` finite in [0, 1], labels in the right ranges (retain/forget among the
    pretrained classes and apart from each other; learn labels ``N_pre .. N_pre + K - 1``)."""
    for name in SET_NAMES:
        if name not in sets:
            raise SwapDataError(f"swap data: set {name!r} is missing; expected {list(SET_NAMES)}")
        x, y = sets[name]
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise SwapDataError(f"swap data {name}: images must be [n, H, W] and labels [n], got "
                                f"{x.shape} and {y.shape}")
        if len(y) == 0:
            raise SwapDataError(f"swap data {name}: empty set")
        if not np.isfinite(x).all():
            raise SwapDataError(f"swap data {name}: images contain NaN or inf")
        if x.min() < 0 or x.max() > 1:
            raise SwapDataError(f"swap data {name}: pixel values must lie in [0, 1], got "
                                f"[{x.min():.3g}, {x.max():.3g}]")
    forget = set(forget_labels)
    for split in ("train", "test"):
        r = set(np.unique(sets[f"retain_{split}"][1]).tolist())
        f = set(np.unique(sets[f"forget_{split}"][1]).tolist())
        learn = set(np.unique(sets[f"learn_{split}"][1]).tolist())
        if r & forget or not r <= set(range(n_pre)):
            raise SwapDataError(f"swap data retain_{split}: labels {sorted(r)} must be pretrained "
                                f"classes (0..{n_pre - 1}) outside the forget set {sorted(forget)}")
        if not f <= forget:
            raise SwapDataError(f"swap data forget_{split}: labels {sorted(f)} are not all in the "
                                f"forget set {sorted(forget)}")
        if not learn <= set(range(n_pre, n_pre + n_learn)):
            raise SwapDataError(f"swap data learn_{split}: labels {sorted(learn)} must be new "
                                f"classes {n_pre}..{n_pre + n_learn - 1}")


def subset_indices(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A random ``fraction`` of ``range(n)`` (at least one element), as the official
    ``torch.randperm(n)[: int(n * 0.1)]``."""
    k = max(1, int(n * fraction))
    return np.sort(rng.permutation(n)[:k])


# ----------------------------------------------------------------------------------- losses
def bounded_forget_term(logits: torch.Tensor, labels: torch.Tensor, bnd: float) -> torch.Tensor:
    """``ReLU(BND - CE)``: maximises the forget-set CE until it reaches BND (GS-LoRA)."""
    return F.relu(bnd - F.cross_entropy(logits, labels))


def learn_loss(logits_l: torch.Tensor, y_l: torch.Tensor, logits_r: torch.Tensor,
               y_r: torch.Tensor, retain_weight: float, alpha: float,
               penalty: torch.Tensor) -> torch.Tensor:
    """``CE(learn) + w_r CE(retain) + alpha G``."""
    return (F.cross_entropy(logits_l, y_l) + retain_weight * F.cross_entropy(logits_r, y_r)
            + alpha * penalty)


def forget_loss(logits_k: torch.Tensor, y_k: torch.Tensor, logits_f: torch.Tensor,
                y_f: torch.Tensor, beta: float, bnd: float, alpha: float,
                penalty: torch.Tensor) -> torch.Tensor:
    """``CE(keep) + beta ReLU(BND - CE(forget)) + alpha G``."""
    return (F.cross_entropy(logits_k, y_k) + beta * bounded_forget_term(logits_f, y_f, bnd)
            + alpha * penalty)


def cosine_lr(epoch: int, epochs: int, lr: float, min_lr: float) -> float:
    """``min + (lr - min)(1 + cos(pi e / E)) / 2`` (timm's cosine, per epoch, no warm-up)."""
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * epoch / epochs))


# ----------------------------------------------------------------------------- the orders
@dataclass(frozen=True)
class Stage:
    """One swap stage: its loss, keep sets (an epoch is one pass over them), epoch factor and,
    for a learning stage, the retain CE weight (``None`` = beta, the official weight)."""

    kind: StageKind
    keep: tuple[str, ...]
    epoch_factor: int = 1
    retain_weight: float | None = None


_LEARN = Stage("learn", ("retain",))
_LEARN_EQUAL = Stage("learn", ("retain",), retain_weight=1.0)
_FORGET_LTF = Stage("forget", ("retain", "learn"))  # official MergedDataset(retain, learn)
_FORGET_FTL = Stage("forget", ("retain",))          # the learn set has not been seen yet

#: Every swap variant: the method, the paper's comparison, the project's baselines and
#: ablations (``docs/papers/knowledge_swap.md``, "Baselines").
PLANS: dict[str, tuple[Stage, ...]] = {
    "ltf": (_LEARN, _FORGET_LTF),
    "ftl": (_FORGET_FTL, _LEARN),
    "learn_only": (_LEARN,),
    "forget_only": (_FORGET_FTL,),
    "joint": (Stage("joint", ("retain",), epoch_factor=2),),
    "naive_ft": (Stage("finetune", ("retain", "learn")),),
    "ltf_equal": (_LEARN_EQUAL, _FORGET_LTF),
    "ftl_equal": (_FORGET_FTL, _LEARN_EQUAL),
}


@dataclass(frozen=True)
class SwapHyper:
    epochs: int = 5
    batch_size: int = 64
    lr: float = 1e-2
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    beta: float = 0.2
    alpha: float = 0.005
    bnd: float = 105.0
    rank: int = 8
    lora_alpha: float = 1.0
    lora_init_a: float = math.sqrt(50)
    train_head: bool = False
    norm_logs_per_epoch: int = 4


class BatchCycler:
    """Endless shuffled batches of one set (the "other" loader, cycled; reshuffled per pass)."""

    def __init__(self, data: TensorSet, batch_size: int, generator: torch.Generator) -> None:
        self.x, self.y = data
        self.batch_size = batch_size
        self.generator = generator
        self._it: Iterator[torch.Tensor] = iter(())

    def _epoch(self) -> Iterator[torch.Tensor]:
        perm = torch.randperm(len(self.y), generator=self.generator)
        return iter(perm.split(self.batch_size))

    def next(self) -> TensorSet:
        idx = next(self._it, None)
        if idx is None:
            self._it = self._epoch()
            idx = next(self._it)
        return self.x[idx], self.y[idx]


def make_optimizer(params: list[nn.Parameter], hp: SwapHyper) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (timm's ``create_optimizer``: none on 1-D)."""
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": hp.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return torch.optim.AdamW(groups, lr=hp.lr, betas=(0.9, 0.999))


def evaluate(model: nn.Module, tests: dict[str, TensorSet]) -> dict[str, float]:
    """Top-1 accuracy (%) on the retain, forget and learn test sets (argmax over all logits)."""
    from icml25.pipelines.knowledge_swap.vit import accuracy
    return {name: accuracy(model, *tests[name]) for name in EVAL_SETS}


def evaluate_items(model: nn.Module, tests: dict[str, TensorSet]) -> dict[str, list[float]]:
    """Per test image of each set: 100 where the top-1 prediction is the label, else 0 (the
    mean over a set is :func:`evaluate`'s accuracy)."""
    from icml25.pipelines.knowledge_swap.vit import predict
    return {name: ((predict(model, tests[name][0]) == tests[name][1]).float() * 100.0)
            .cpu().tolist() for name in EVAL_SETS}


def _cat(sets: list[TensorSet]) -> TensorSet:
    return torch.cat([s[0] for s in sets]), torch.cat([s[1] for s in sets])


def run_stage(model: ViT, opt: torch.optim.Optimizer, stage: Stage, train: dict[str, TensorSet],
              hp: SwapHyper, generator: torch.Generator,
              on_epoch: Callable[[int, dict[str, float]], None] | None = None,
              on_norms: Callable[[float], None] | None = None,
              desc: str = "stage", progress: bool = True) -> None:
    """Train ``model`` through one stage (loss by ``stage.kind``) with the shared optimizer."""
    from icml25.pipelines.knowledge_swap.vit import group_sparse_penalty
    keep = _cat([train[name] for name in stage.keep])
    n = len(keep[1])
    steps = math.ceil(n / hp.batch_size)
    epochs = hp.epochs * stage.epoch_factor
    learn = BatchCycler(train["learn"], hp.batch_size, generator)
    forget = BatchCycler(train["forget"], hp.batch_size, generator)
    w_r = hp.beta if stage.retain_weight is None else stage.retain_weight
    marks = {max(1, round(steps * (j + 1) / hp.norm_logs_per_epoch))
             for j in range(hp.norm_logs_per_epoch)}
    model.train()
    for epoch in tqdm(range(epochs), desc=desc, disable=not progress, leave=False):
        for group in opt.param_groups:
            group["lr"] = cosine_lr(epoch, epochs, hp.lr, hp.min_lr)
        perm = torch.randperm(n, generator=generator)
        ce_forget, losses = [], []
        for step, idx in enumerate(perm.split(hp.batch_size), start=1):
            xk, yk = keep[0][idx], keep[1][idx]
            parts = [(xk, yk)]
            if stage.kind in ("learn", "joint"):
                parts.append(learn.next())
            if stage.kind in ("forget", "joint"):
                parts.append(forget.next())
            logits = model(torch.cat([p[0] for p in parts])).split([len(p[1]) for p in parts])
            g = group_sparse_penalty(model)
            if stage.kind == "learn":
                loss = learn_loss(logits[1], parts[1][1], logits[0], yk, w_r, hp.alpha, g)
            elif stage.kind == "forget":
                loss = forget_loss(logits[0], yk, logits[1], parts[1][1], hp.beta, hp.bnd,
                                   hp.alpha, g)
            elif stage.kind == "joint":
                loss = (forget_loss(logits[0], yk, logits[2], parts[2][1], hp.beta, hp.bnd,
                                    hp.alpha, g) + F.cross_entropy(logits[1], parts[1][1]))
            else:
                loss = F.cross_entropy(logits[0], yk)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{desc}: loss became {loss.item()} at epoch {epoch}, "
                                         f"step {step} (logits exploded; lower swap.lr)")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if stage.kind in ("forget", "joint"):
                ce_forget.append(F.cross_entropy(logits[-1], parts[-1][1]).item())
            if on_norms is not None and step in marks:
                on_norms(epoch + step / steps)
        if on_epoch is not None:
            on_epoch(epoch, {"loss": float(np.mean(losses)),
                             "ce_forget": float(np.mean(ce_forget)) if ce_forget else math.nan,
                             "lr": opt.param_groups[0]["lr"]})


def prepare_swap_model(model: ViT, n_learn: int, hp: SwapHyper,
                       seed: int) -> tuple[ViT, list[nn.Parameter]]:
    """Expand the head, add LoRA (re-initialised under ``seed``), freeze all but LoRA."""
    from icml25.pipelines.knowledge_swap.vit import add_lora, expand_head, mark_only_lora_trainable
    generator = torch.Generator().manual_seed(seed)
    expand_head(model, n_learn, generator)
    torch.manual_seed(seed)
    add_lora(model, hp.rank, hp.lora_alpha, hp.lora_init_a)
    return model, mark_only_lora_trainable(model, hp.train_head)


def run_swap(model: ViT, variant: str, train: dict[str, TensorSet], tests: dict[str, TensorSet],
             n_learn: int, hp: SwapHyper, seed: int, progress: bool = True) -> dict[str, Any]:
    """Run one variant's stage plan on a copy-free pretrained ``model`` (modified in place).

    ``train``: the swap-time sets ``retain`` (subset), ``forget`` (subset), ``learn`` (full);
    ``tests``: the test sets ``retain``, ``forget``, ``learn``. Returns accuracies at the start,
    after each stage (``stage1``, ``stage2``; ``final`` = after the last), per-epoch curves, the
    per-block LoRA update norms over time and each test image's 0/100 correctness before any
    training (``correct_start``) and at the end (``correct_final``), per test set.
    """
    from icml25.pipelines.knowledge_swap.vit import lora_update_norms
    if variant not in PLANS:
        raise ValueError(f"unknown swap variant {variant!r}; known: {sorted(PLANS)}")
    started = time.perf_counter()
    model, trainable = prepare_swap_model(model, n_learn, hp, seed)
    opt = make_optimizer(trainable, hp)
    generator = torch.Generator().manual_seed(seed)
    acc = {"start": evaluate(model, tests)}
    correct_start = evaluate_items(model, tests)
    curve: list[dict[str, Any]] = []
    norms: dict[str, list] = {"time": [], "stage": [], "values": []}
    offset = 0.0
    for k, stage in enumerate(PLANS[variant], start=1):
        def on_epoch(epoch: int, stats: dict[str, float], k: int = k) -> None:
            curve.append({"stage": k, "kind": PLANS[variant][k - 1].kind, "epoch": epoch + 1,
                          **stats, **evaluate(model, tests)})

        def on_norms(t: float, k: int = k, offset: float = offset) -> None:
            norms["time"].append(offset + t)
            norms["stage"].append(k)
            norms["values"].append(lora_update_norms(model))

        run_stage(model, opt, stage, train, hp, generator, on_epoch, on_norms,
                  desc=f"{variant} stage {k} ({stage.kind}) seed {seed}", progress=progress)
        offset += hp.epochs * stage.epoch_factor
        acc[f"stage{k}"] = evaluate(model, tests)
    acc["final"] = acc[f"stage{len(PLANS[variant])}"]
    return {"variant": variant, "seed": seed, "acc": acc,
            "correct_start": correct_start, "correct_final": evaluate_items(model, tests),
            "curve": curve, "norms": norms,
            "stages": [s.kind for s in PLANS[variant]],
            "seconds": time.perf_counter() - started}


def h_mean(acc_retain: float, forget_start: float, forget_final: float) -> float:
    """Official H-mean ``2 Δf Acc_r / (Δf + Acc_r)`` with ``Δf = Acc_f,start - Acc_f`` (0 if
    both are 0)."""
    drop = forget_start - forget_final
    return 0.0 if drop + acc_retain == 0 else 2 * drop * acc_retain / (drop + acc_retain)
