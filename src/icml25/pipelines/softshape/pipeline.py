"""Wiring of the softshape pipeline (spec ``softshape.md``, "Kedro pipeline sketch").

shipped UCR sets + synthetic CBF -> folds and preprocessing -> SoftShape, its ablations and the
baselines on the same folds -> metrics, claims, figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.softshape import nodes
from icml25.pipelines.softshape.params import SoftshapeParams

PARAMETERS = SoftshapeParams
P = "params:softshape"


def create_pipeline(**kwargs) -> Pipeline:
    ns = "softshape"
    return Pipeline([
        node(nodes.load_ucr_sets, P, "softshape.raw", name="load_ucr_sets", namespace=ns),
        node(nodes.generate_cbf, P, "softshape.cbf", name="generate_cbf", namespace=ns),
        node(nodes.prepare_folds, ["softshape.raw", "softshape.cbf", P], "softshape.prepared",
             name="prepare_folds", namespace=ns),
        node(nodes.train_softshape, ["softshape.prepared", P],
             ["softshape.models", "softshape.method_results", "softshape.score_maps"],
             name="train_softshape", namespace=ns, tags=["training"]),
        node(nodes.train_ablations, ["softshape.prepared", P], "softshape.ablation_results",
             name="train_ablations", namespace=ns, tags=["training"]),
        node(nodes.run_baselines, ["softshape.prepared", P], "softshape.baseline_results",
             name="run_baselines", namespace=ns, tags=["training"]),
        node(nodes.evaluate,
             ["softshape.method_results", "softshape.ablation_results",
              "softshape.baseline_results", P, "run_info"],
             ["softshape.table", "softshape.metrics", "softshape.claims"],
             name="evaluate", namespace=ns),
        node(nodes.plot_figures,
             ["softshape.score_maps", "softshape.prepared", "softshape.metrics", P],
             "softshape.figures", name="plot_figures", namespace=ns),
    ])
