"""Wiring of the vga pipeline (spec ``vga.md``, "Kedro pipeline sketch").

generate graphs -> check labels -> layouts -> images -> one train + evaluate node pair per vision
model (namespace ``vga.<model>``), the pixel-free baselines and the optional MLLM -> predictions
-> scores, metrics, claims and figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.vga import nodes
from icml25.pipelines.vga.params import MODELS, VgaParams

PARAMETERS = VgaParams
P = "params:vga"


def _for_model(func, model: str):
    bound = partial(func, model=model)
    return update_wrapper(bound, func)


def _model_nodes(model: str) -> list:
    ns = f"vga.{model}"
    return [
        node(_for_model(nodes.train_model, model), inputs=["vga.images", P],
             outputs=f"{ns}.models", name="train", namespace=ns, tags=["training"]),
        node(_for_model(nodes.evaluate_model, model),
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
    models = [n for m in MODELS for n in _model_nodes(m)]
    model_preds = [f"vga.{m}.predictions" for m in MODELS]
    report = [
        node(nodes.run_baselines, ["vga.graphs", "vga.layouts", "vga.images", P],
             "vga.baseline_predictions", name="run_baselines", namespace=ns),
        node(nodes.mllm_eval, ["vga.images", P], "vga.mllm_responses", name="mllm_eval",
             namespace=ns),
        node(nodes.collect_predictions,
             [P, "vga.baseline_predictions", "vga.mllm_responses", *model_preds],
             "vga.predictions", name="collect_predictions", namespace=ns),
        node(nodes.score_predictions, "vga.predictions", "vga.scores",
             name="score_predictions", namespace=ns),
        node(nodes.judge_claims,
             ["vga.predictions", "vga.label_report", P, "run_info",
              *(f"vga.{m}.models" for m in MODELS)],
             ["vga.metrics", "vga.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures, ["vga.images", "vga.predictions", "vga.metrics", P],
             "vga.figures", name="plot_figures", namespace=ns),
    ]
    return Pipeline(data + models + report)
