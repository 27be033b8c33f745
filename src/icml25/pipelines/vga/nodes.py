"""Kedro nodes of the vga pipeline: thin wrappers around the method modules.

Each node validates ``params:vga`` into :class:`VgaParams`, does one step of the pipeline
(generate -> check -> layouts -> images -> train/evaluate models, baselines, MLLM ->
metrics, claims, figures) and returns plain tables, dicts or state dicts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from icml25.core.chat import ChatClient
from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import shard_seeds
from icml25.pipelines.vga.gate import apply_control_gate
from icml25.pipelines.vga.graphs import TASK_CLASSES
from icml25.pipelines.vga.params import MODELS, VgaParams

if TYPE_CHECKING:
    from icml25.pipelines.vga.render import RenderConfig

mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
figures = lazy_module("icml25.pipelines.vga.figures")
scoring = lazy_module("icml25.pipelines.vga.scoring")

logger = logging.getLogger(__name__)
PIPELINE = "vga"


def _params(params: dict[str, Any]) -> VgaParams:
    return validate_parameters(VgaParams, params, PIPELINE)


def _render_cfg(p: VgaParams) -> RenderConfig:
    from icml25.pipelines.vga.render import RenderConfig
    r = p.render
    return RenderConfig(size=r.size, node_radius=r.node_radius, edge_width=r.edge_width,
                        supersample=r.supersample, backend=r.backend,
                        edge_grey=r.edge_grey, min_node_dist_radii=r.min_node_dist_radii,
                        min_edge_clearance_radii=r.min_edge_clearance_radii)


def _protocol(p: VgaParams) -> dict[str, dict[str, Any]]:
    return {t: {"train_layout": c.train_layout, "train_layouts": c.training_layouts,
                "eval_layouts": list(c.eval_layouts),
                "test_layout": c.test_layout} for t, c in p.data.tasks.items()}


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict."""
    return partition() if callable(partition) else partition


def _check_images(images: pd.DataFrame) -> None:
    if images is None or len(images) == 0:
        raise ValueError("vga images table is empty; run render_images first")
    if images["png"].isna().any() or images["label"].isna().any():
        raise ValueError("vga images table has missing images or labels")


# ----------------------------------------------------------------------------------- data
def generate_graphs(params: dict[str, Any]) -> pd.DataFrame:
    """Balanced, leakage-free instances of every task with exact labels."""
    from icml25.pipelines.vga.generator import generate_graphs as _generate_graphs
    p = _params(params)
    d = p.data
    return pd.concat([_generate_graphs({t: c.p}, (c.sizes or d.sizes).model_dump(), d.n_nodes,
                                       d.seed, d.max_attempts_per_sample, p.progress)
                      for t, c in d.tasks.items()], ignore_index=True)


def check_labels(graphs: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Brute-force agreement, balance, validity and leakage = 0, or stop the run."""
    from icml25.pipelines.vga.label_checks import label_report
    p = _params(params)
    return label_report(graphs, p.data.n_brute_force, p.data.seed, p.data.n_nodes)


def compute_layouts(graphs: pd.DataFrame, label_report_: dict[str, Any],
                    params: dict[str, Any]) -> pd.DataFrame:
    """Positions of every (instance, layout) the protocol needs (after the label checks)."""
    from icml25.pipelines.vga.images import compute_layouts as _compute_layouts
    p = _params(params)
    if not label_report_.get("ok"):
        raise ValueError("vga label report is not ok; refusing to draw unverified instances")
    protocol = {t: (c.training_layouts, c.eval_layouts) for t, c in p.data.tasks.items()}
    return _compute_layouts(graphs, protocol, _render_cfg(p), p.data.pair_left_layout,
                            p.data.random_min_dist_radii, p.progress)


def render_images(graphs: pd.DataFrame, layouts: pd.DataFrame,
                  params: dict[str, Any]) -> pd.DataFrame:
    """PNG image of every (instance, layout)."""
    from icml25.pipelines.vga.images import render_images as _render_images
    p = _params(params)
    return _render_images(graphs, layouts, _render_cfg(p), p.progress)


# --------------------------------------------------------------------------------- models
def _task_arrays(images: pd.DataFrame, task: str, split: str, layout: str | list[str]):
    from icml25.pipelines.vga.vision import decode_stack
    layouts = [layout] if isinstance(layout, str) else list(layout)
    sel = images[(images["task"] == task) & (images["split"] == split)
                 & images["layout"].isin(layouts)]
    if sel.empty:
        raise ValueError(f"vga images: no {split} images of {task} in layout {layout}")
    return decode_stack(sel["png"]), sel["label"].to_numpy().astype(int), sel


def train_model(images: pd.DataFrame, params: dict[str, Any], model: str, shard: int = 0,
                n_shards: int = 1) -> dict[str, Any]:
    """Train ``model`` (cnn or vit) from scratch on every task, once per seed of shard ``shard``
    of ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`); state
    dicts with their training curves as metadata (one partition per task and seed, none when
    the shard has no seed). Each run depends on its task and seed alone."""
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.vga.vision import train_classifier
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {}
    _check_images(images)
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    spec = p.models[model]
    kwargs = spec.model_kwargs(p.render.size)
    out = {}
    jobs = [(t, s) for t in p.data.tasks for s in seeds]
    for task, seed in tqdm(jobs, desc=f"vga train {model}", disable=not p.progress):
        proto = p.data.tasks[task]
        x_tr, y_tr, _ = _task_arrays(images, task, "train", proto.training_layouts)
        x_va, y_va, _ = _task_arrays(images, task, "val", proto.training_layouts)
        tests = ({lo: _task_arrays(images, task, "test", lo)[:2] for lo in proto.eval_layouts}
                 if p.train.track_test_each_epoch else None)
        seed_everything(seed)
        trained = train_classifier(
            model, kwargs, len(TASK_CLASSES[task]), x_tr, y_tr, x_va, y_va, seed=seed,
            epochs=p.train.epochs, batch_size=p.train.batch_size, lr=spec.lr,
            weight_decay=p.train.weight_decay, warmup_epochs=p.train.warmup_epochs,
            grad_clip=p.train.grad_clip, device=device, test_sets=tests,
            augment=p.train.augment, bn_recalibrate_batches=p.train.bn_recalibrate_batches,
            progress=p.progress, desc=f"{model} {task} seed {seed}")
        out[f"{task}_seed{seed}"] = {
            "state_dict": {k: v.detach().cpu() for k, v in trained.model.state_dict().items()},
            "metadata": {"model": model, "kind": spec.kind, "kwargs": kwargs, "task": task,
                         "seed": seed, "num_classes": len(TASK_CLASSES[task]),
                         "best_epoch": trained.best_epoch,
                         "val_acc_by_epoch": trained.val_acc_by_epoch,
                         "test_acc_by_epoch": trained.test_acc_by_epoch,
                         "train_loss": trained.train_loss, "seconds": trained.seconds},
        }
    return out


def evaluate_model(models: dict[str, Any], images: pd.DataFrame, params: dict[str, Any],
                   model: str) -> pd.DataFrame:
    """Test-set predictions of the val-selected checkpoints on every evaluation layout (no row
    for a seed shard without a seed)."""
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.vga.baselines import PRED_COLUMNS
    from icml25.pipelines.vga.models import build_model
    from icml25.pipelines.vga.vision import predict
    p = _params(params)
    if not models:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PRED_COLUMNS})
    _check_images(images)
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    frames = []
    for key in tqdm(sorted(models), desc=f"vga evaluate {model}", disable=not p.progress):
        bundle = _entry(models[key])
        meta = bundle["metadata"]
        net = build_model(meta["kind"], meta["num_classes"], **meta["kwargs"])
        net.load_state_dict(bundle["state_dict"])
        net.to(device)
        for layout in p.data.tasks[meta["task"]].eval_layouts:
            x, y, sel = _task_arrays(images, meta["task"], "test", layout)
            frames.append(pd.DataFrame({
                "variant": model, "seed": meta["seed"], "task": meta["task"], "layout": layout,
                "sample_id": sel["sample_id"].to_numpy(), "label": y,
                "pred": predict(net, x, device=device)}))
    return pd.concat(frames, ignore_index=True)[list(PRED_COLUMNS)]


def run_baselines(graphs: pd.DataFrame, layouts: pd.DataFrame, images: pd.DataFrame,
                  params: dict[str, Any]) -> pd.DataFrame:
    """Majority, chance, oracle (exact solver), graph-statistics LR, pixel-distance LR."""
    from icml25.pipelines.vga.baselines import baseline_predictions
    p = _params(params)
    _check_images(images)
    return baseline_predictions(graphs, layouts, images, p.seeds, p.baselines.lr_c)


def mllm_eval(images: pd.DataFrame, params: dict[str, Any],
              endpoint: dict[str, Any] | None = None) -> pd.DataFrame:
    """Zero-shot answers of a multimodal LLM (empty, and no network call, when disabled).

    ``endpoint`` is Kedro's ``vga_mllm`` credentials entry (catalog ``vga.mllm_endpoint``),
    whose ``api_key`` authorises the calls to ``vga.mllm.base_url``."""
    from icml25.pipelines.vga.mllm import RESPONSE_COLUMNS, ask, sample_questions
    p = _params(params)
    cfg = p.mllm
    if not cfg.enabled:
        logger.info("vga: mllm disabled; no endpoint is called")
        return pd.DataFrame(columns=list(RESPONSE_COLUMNS))
    _check_images(images)
    client = ChatClient(cfg.base_url, cfg.model, api_key=(endpoint or {}).get("api_key"),
                        timeout_s=cfg.timeout_s, max_retries=cfg.retries)
    questions = sample_questions(images, {t: c.test_layout for t, c in p.data.tasks.items()},
                                 cfg.n_per_task, cfg.seed)
    return ask(client, questions, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
               progress=p.progress)


# -------------------------------------------------------------------------------- reports
def collect_predictions(params: dict[str, Any], baselines: pd.DataFrame,
                        mllm_responses: pd.DataFrame, *model_predictions: pd.DataFrame
                        ) -> pd.DataFrame:
    """Every variant's test predictions in one long table: the vision models' seed shards
    first, back in the order of one node per model (its checkpoints by ``<task>_seed<s>`` key),
    then the baselines and the MLLM."""
    from icml25.pipelines.vga.baselines import PRED_COLUMNS
    from icml25.pipelines.vga.mllm import responses_to_predictions
    p = _params(params)
    frames = [_merge_model_shards([f for f in model_predictions if len(f)]), baselines]
    if mllm_responses is not None and len(mllm_responses):
        frames.append(responses_to_predictions(mllm_responses, p.mllm.seed))
    out = pd.concat(frames, ignore_index=True)[list(PRED_COLUMNS)]
    if out[["label", "pred"]].isna().any().any():
        raise ValueError("vga predictions contain missing labels or answers")
    return out


def _merge_model_shards(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate the models' per-shard predictions, then order them as ``evaluate_model``
    orders one model's checkpoints (``sorted`` keys ``<task>_seed<s>``), models in first-seen
    order; the sort is stable, so the layouts and samples of a checkpoint keep their order."""
    from icml25.pipelines.vga.baselines import PRED_COLUMNS
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PRED_COLUMNS})
    table = pd.concat(frames, ignore_index=True)
    rank = {m: i for i, m in enumerate(dict.fromkeys(table["variant"]))}
    keys = pd.DataFrame({"model": table["variant"].map(rank),
                         "key": table["task"].astype(str) + "_seed" + table["seed"].astype(str)})
    order = keys.sort_values(["model", "key"], kind="stable").index
    return table.loc[order].reset_index(drop=True)


def score_predictions(predictions: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per (variant, seed, task, layout) — the long results table."""
    return scoring.score_table(predictions)


def judge_claims(predictions: pd.DataFrame, report: dict[str, Any], params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float, *models: dict[str, Any]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from this run's predictions; MLflow child runs.

    Claims are judged at ``confidence`` (``params:claims_confidence``). Per-seed metrics pair
    over seeds; the ``items_*`` metrics ({sample_id: [0/1 per seed]}) let a claim pair over
    the test graphs (``unit: item``)."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    protocol = _protocol(p)
    metrics = scoring.variant_metrics(predictions, protocol, p.gap_tasks)
    items = scoring.item_metrics(predictions, protocol, p.gap_tasks)
    judged = {v: {**values, **items.get(v, {})} for v, values in metrics.items()}
    seeds_of = {v: sorted(int(s) for s in g["seed"].unique())
                for v, g in predictions.groupby("variant", sort=False)}
    trained: dict[str, dict[str, Any]] = {}  # every seed shard of a model together
    for bundle in models:
        for key, entry in bundle.items():
            meta = _entry(entry)["metadata"]
            trained.setdefault(meta["model"], {})[key] = meta
    training: dict[str, Any] = {}
    for model, bundle in trained.items():
        for key in sorted(bundle):
            meta = bundle[key]
            training.setdefault(model, {})[key] = {
                "best_epoch": meta["best_epoch"], "val_acc_by_epoch": meta["val_acc_by_epoch"],
                "best_test_acc_over_epochs_optimistic": {
                    lo: max(v) for lo, v in meta["test_acc_by_epoch"].items()},
                "train_seconds": meta["seconds"]}
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], judged, run_info,
                           p.seeds, title="Visual Graph Arena (ICML 2025)",
                           figures=["figures/accuracy.png", "figures/examples.png"],
                           confidence=confidence, seeds_of=seeds_of)
    claims, gate_rows = apply_control_gate(claims, metrics, protocol, p.control_gate.task,
                                           p.control_gate.min_acc)
    extra = {"protocol": protocol, "label_report": report, "control_gate": gate_rows,
             "chance_band_95": chance_bands(predictions, protocol),
             "per_class_accuracy": scoring.per_class_accuracy(predictions),
             "confusion": scoring.confusion_matrices(predictions), "training": training}
    out = metrics_report(PIPELINE, judged, run_info, p.seeds, extra=extra)
    if mlflow.active_run() is not None:
        roles = {v: "method" if v in (*MODELS, "mllm") else "baseline" for v in metrics}
        means = seed_means(metrics)
        variant_params = {v: {"kind": "pixel-free reference"} for v in metrics}
        variant_params |= {m: {**p.models[m].model_dump(), **p.train.model_dump()}
                           for m in MODELS if m in metrics}
        if "mllm" in metrics:
            variant_params["mllm"] = {"model": p.mllm.model, "n_per_task": p.mllm.n_per_task}
        log_variants(PIPELINE, means, roles, params_by_variant=variant_params)
        log_claim_counts(claims)
    return out, claims


def chance_bands(predictions: pd.DataFrame, protocol: dict[str, dict[str, Any]]
                 ) -> dict[str, dict[str, float]]:
    """Per task: its number of test graphs (test layout) and the half-width of the ~95 % range
    of a chance-level answerer's accuracy on them, 1.96 sqrt(p (1 - p) / n), p = 1 / classes."""
    from icml25.pipelines.vga.gate import chance_band
    out = {}
    for task, proto in protocol.items():
        sel = predictions[(predictions["variant"] == "oracle") & (predictions["task"] == task)
                          & (predictions["layout"] == proto["test_layout"])]
        n = int(sel["sample_id"].nunique())
        if n:
            out[task] = {"n_test": n, "chance": 1 / len(TASK_CLASSES[task]),
                         "half_width": chance_band(n, len(TASK_CLASSES[task]))}
    return out


def plot_figures(images: pd.DataFrame, predictions: pd.DataFrame, metrics: dict[str, Any],
                 params: dict[str, Any]) -> dict[str, Any]:
    """``examples.png`` (same test graphs in both layouts, true and model answers) and
    ``accuracy.png`` (train vs test layout per task)."""
    p = _params(params)
    protocol = _protocol(p)
    per_seed = metrics["per_seed"]
    return {
        "examples.png": figures.examples_figure(images, predictions, protocol,
                                            p.examples_per_task, seed=p.seeds[0]),
        "accuracy.png": figures.accuracy_figure(per_seed, protocol),
    }
