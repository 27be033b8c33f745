"""Wiring of the steerable pipeline (spec ``steerable.md``, "Kedro pipeline sketch").

MNIST subset -> rotated splits -> one train + evaluate node pair per 2D variant (namespace
``steerable.<variant>``; protocols and seeds loop inside); synthetic voxel shapes -> one pair per
3D variant (``steerable.<variant>_3d``) -> metrics, claims and figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.steerable import nodes
from icml25.pipelines.steerable.params import VARIANTS, VARIANTS_3D, SteerableParams

PARAMETERS = SteerableParams
P = "params:steerable"


def _for_variant(func, variant: str):
    bound = partial(func, variant=variant)
    return update_wrapper(bound, func)


def _variant_nodes(variant: str) -> list:
    ns = f"steerable.{variant}"
    return [
        node(_for_variant(nodes.train_variant, variant), inputs=["steerable.splits_2d", P],
             outputs=f"{ns}.models", name="train", namespace=ns, tags=["training"]),
        node(_for_variant(nodes.evaluate_variant, variant),
             inputs=[f"{ns}.models", "steerable.splits_2d", P], outputs=f"{ns}.scores",
             name="evaluate", namespace=ns),
    ]


def _variant_nodes_3d(variant: str) -> list:
    ns = f"steerable.{variant}"
    return [
        node(_for_variant(nodes.train_variant_3d, variant), inputs=["steerable.splits_3d", P],
             outputs=f"{ns}.models", name="train", namespace=ns, tags=["training"]),
        node(_for_variant(nodes.evaluate_variant_3d, variant),
             inputs=[f"{ns}.models", "steerable.splits_3d", P], outputs=f"{ns}.scores",
             name="evaluate", namespace=ns),
    ]


def create_pipeline(**kwargs) -> Pipeline:
    ns = "steerable"
    data = [
        node(nodes.load_mnist, P, "steerable.mnist_raw", name="load_mnist", namespace=ns),
        node(nodes.make_splits_2d, ["steerable.mnist_raw", P], "steerable.splits_2d",
             name="make_rotated_splits", namespace=ns),
        node(nodes.make_voxel_shapes, P, "steerable.splits_3d", name="make_voxel_shapes",
             namespace=ns),
    ]
    variants = [n for v in VARIANTS for n in _variant_nodes(v)]
    variants += [n for v in VARIANTS_3D for n in _variant_nodes_3d(v)]
    scores = [f"steerable.{v}.scores" for v in VARIANTS]
    scores_3d = [f"steerable.{v}.scores" for v in VARIANTS_3D]
    report = [
        node(nodes.judge_claims, [P, "run_info", *scores, *scores_3d],
             ["steerable.metrics", "steerable.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures, [P, *scores, *scores_3d], "steerable.figures",
             name="plot_figures",
             namespace=ns),
    ]
    return Pipeline(data + variants + report)
