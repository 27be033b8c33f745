"""Wiring of the steerable pipeline (spec ``steerable.md``, "Kedro pipeline sketch").

MNIST subset -> rotated splits -> one train + evaluate node pair per variant (namespace
``steerable.<variant>``; protocols and seeds loop inside) -> metrics, claims and figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.steerable import nodes
from icml25.pipelines.steerable.params import VARIANTS, SteerableParams

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


def create_pipeline(**kwargs) -> Pipeline:
    ns = "steerable"
    data = [
        node(nodes.load_mnist, P, "steerable.mnist_raw", name="load_mnist", namespace=ns),
        node(nodes.make_splits_2d, ["steerable.mnist_raw", P], "steerable.splits_2d",
             name="make_rotated_splits", namespace=ns),
    ]
    variants = [n for v in VARIANTS for n in _variant_nodes(v)]
    scores = [f"steerable.{v}.scores" for v in VARIANTS]
    report = [
        node(nodes.judge_claims, [P, "run_info", *scores],
             ["steerable.metrics", "steerable.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures, [P, *scores], "steerable.figures", name="plot_figures",
             namespace=ns),
    ]
    return Pipeline(data + variants + report)
