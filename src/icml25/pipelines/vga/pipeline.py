"""Wiring of the vga pipeline (``docs/papers/vga.md``).

generate graphs -> check labels -> layouts -> images -> one train + evaluate node pair per vision
model and seed shard (namespace ``vga.<model>.shard_<k>``, shard ``k`` of ``n`` trains
``seeds[k::n]`` on every task, see :mod:`icml25.core.sweep`), the pixel-free baselines and the
optional MLLM -> predictions (every shard) -> scores, metrics, claims and figures. Models and
seeds are separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.vga import nodes
from icml25.pipelines.vga.params import MODELS, VgaParams

PARAMETERS = VgaParams
P = "params:vga"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _model_nodes(model: str, shard: int, n_shards: int) -> list:
    ns = f"vga.{model}.shard_{shard}"
    return [
        node(_bind(nodes.train_model, model=model, shard=shard, n_shards=n_shards),
             inputs=["vga.images", P], outputs=f"{ns}.models", name="train", namespace=ns,
             tags=["training"]),
        node(_bind(nodes.evaluate_model, model=model),
             inputs=[f"{ns}.models", "vga.images", P], outputs=f"{ns}.predictions",
             name="evaluate", namespace=ns),
    ]


def create_pipeline(**kwargs) -> Pipeline:
    ns = "vga"
    data = [
        node(nodes.generate_graphs, P, "vga.graphs", name="generate_graphs", namespace=ns),
        node(nodes.check_labels, ["vga.graphs", P], "vga.label_report", name="check_labels",
             namespace=ns),
        node(nodes.compute_layouts, ["vga.graphs", "vga.label_report", P], "vga.layouts",
             name="compute_layouts", namespace=ns),
        node(nodes.render_images, ["vga.graphs", "vga.layouts", P], "vga.images",
             name="render_images", namespace=ns),
    ]
    n_shards = seed_shards()
    shards = [f"vga.{m}.shard_{k}" for m in MODELS for k in range(n_shards)]
    models = [n for m in MODELS for k in range(n_shards) for n in _model_nodes(m, k, n_shards)]
    model_preds = [f"{s}.predictions" for s in shards]
    report = [
        node(nodes.run_baselines, ["vga.graphs", "vga.layouts", "vga.images", P],
             "vga.baseline_predictions", name="run_baselines", namespace=ns),
        node(nodes.mllm_eval, ["vga.images", P, "vga.mllm_endpoint"], "vga.mllm_responses",
             name="mllm_eval", namespace=ns),
        node(nodes.collect_predictions,
             [P, "vga.baseline_predictions", "vga.mllm_responses", *model_preds],
             "vga.predictions", name="collect_predictions", namespace=ns),
        node(nodes.score_predictions, "vga.predictions", "vga.scores",
             name="score_predictions", namespace=ns),
        node(nodes.judge_claims,
             ["vga.predictions", "vga.label_report", P, "run_info", "params:claims_confidence",
              *(f"{s}.models" for s in shards)],
             ["vga.metrics", "vga.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures, ["vga.images", "vga.predictions", "vga.metrics", P],
             "vga.figures", name="plot_figures", namespace=ns),
    ]
    return Pipeline(data + models + report)
