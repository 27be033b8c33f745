"""Wiring of the acorn pipeline (spec ``acorn.md``, "Kedro pipeline sketch").

speech + synthetic sources -> scene metadata (AQA-PHY records) -> rendered clips -> one train
+ predict node pair per encoder variant (namespace ``acorn.<variant>``) and the classical /
trivial baselines -> scores -> metrics, claims and figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.acorn import nodes
from icml25.pipelines.acorn.params import VARIANTS, AcornParams

PARAMETERS = AcornParams
P = "params:acorn"


def _for_variant(func, variant: str):
    bound = partial(func, variant=variant)
    return update_wrapper(bound, func)


def _variant_nodes(variant: str) -> list:
    ns = f"acorn.{variant}"
    return [
        node(_for_variant(nodes.train_variant, variant),
             inputs=["acorn.meta", "acorn.clips", P], outputs=f"{ns}.models",
             name="train", namespace=ns, tags=["training"]),
        node(_for_variant(nodes.predict_variant, variant),
             inputs=[f"{ns}.models", "acorn.meta", "acorn.clips", P],
             outputs=f"{ns}.predictions", name="predict", namespace=ns),
    ]


def create_pipeline(**kwargs) -> Pipeline:
    ns = "acorn"
    data = [
        node(nodes.synthesize_speech, P, "acorn.speech_bank", name="synthesize_speech",
             namespace=ns),
        node(nodes.build_source_bank, ["acorn.speech_bank", P], "acorn.source_bank",
             name="build_source_bank", namespace=ns),
        node(nodes.sample_scene_metadata, ["acorn.source_bank", P], "acorn.meta",
             name="sample_scene_metadata", namespace=ns),
        node(nodes.render_clips, ["acorn.meta", "acorn.source_bank", P], "acorn.clips",
             name="render_clips", namespace=ns),
    ]
    variants = [n for v in VARIANTS for n in _variant_nodes(v)]
    predictions = [f"acorn.{v}.predictions" for v in VARIANTS]
    models = [f"acorn.{v}.models" for v in VARIANTS]
    evaluation = [
        node(nodes.run_baselines, ["acorn.meta", "acorn.clips", P], "acorn.baseline_predictions",
             name="run_baselines", namespace=ns),
        node(nodes.evaluate, ["acorn.meta", P, "acorn.baseline_predictions", *predictions],
             "acorn.scores", name="evaluate", namespace=ns),
        node(nodes.judge_claims, ["acorn.scores", P, "run_info", *models],
             ["acorn.metrics", "acorn.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures,
             ["acorn.meta", "acorn.clips", "acorn.scores", P, "acorn.baseline_predictions",
              *predictions],
             "acorn.figures", name="plot_figures", namespace=ns),
    ]
    return Pipeline(data + variants + evaluation)
