"""Wiring of the steerable pipeline (``docs/papers/steerable.md``).

MNIST subset -> rotated splits -> one train + evaluate node pair per 2D variant and seed shard
(namespace ``steerable.<variant>.shard_<k>``; protocols loop inside, shard ``k`` of ``n`` trains
each protocol's ``seeds[k::n]``, see :mod:`icml25.core.sweep`); synthetic voxel shapes -> the
same per 3D variant (``steerable.<variant>_3d.shard_<k>``) -> each variant's shard scores merged
(``steerable.<variant>.merge_scores``) -> metrics, claims and figures. The seed shards are
separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.steerable import nodes
from icml25.pipelines.steerable.params import VARIANTS, VARIANTS_3D, SteerableParams

PARAMETERS = SteerableParams
P = "params:steerable"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _variant_nodes(variant: str, n_shards: int, train, evaluate, splits: str) -> list:
    """Per seed shard a train + evaluate pair (namespace ``steerable.<variant>.shard_<k>``),
    then the merge of the shards' scores into the variant's table."""
    out = []
    for k in range(n_shards):
        ns = f"steerable.{variant}.shard_{k}"
        out += [
            node(_bind(train, variant=variant, shard=k, n_shards=n_shards), inputs=[splits, P],
                 outputs=f"{ns}.models", name="train", namespace=ns, tags=["training"]),
            node(_bind(evaluate, variant=variant), inputs=[f"{ns}.models", splits, P],
                 outputs=f"{ns}.scores", name="evaluate", namespace=ns),
        ]
    out.append(node(_bind(nodes.merge_scores, variant=variant),
                    inputs=[P, *(f"steerable.{variant}.shard_{k}.scores"
                                 for k in range(n_shards))],
                    outputs=f"steerable.{variant}.scores", name="merge_scores",
                    namespace=f"steerable.{variant}"))
    return out


def create_pipeline(**kwargs) -> Pipeline:
    ns = "steerable"
    data = [
        node(nodes.load_mnist, P, "steerable.mnist_raw", name="load_mnist", namespace=ns),
        node(nodes.make_splits_2d, ["steerable.mnist_raw", P], "steerable.splits_2d",
             name="make_rotated_splits", namespace=ns),
        node(nodes.make_voxel_shapes, P, "steerable.splits_3d", name="make_voxel_shapes",
             namespace=ns),
    ]
    n_shards = seed_shards()
    variants = [n for v in VARIANTS for n in _variant_nodes(
        v, n_shards, nodes.train_variant, nodes.evaluate_variant, "steerable.splits_2d")]
    variants += [n for v in VARIANTS_3D for n in _variant_nodes(
        v, n_shards, nodes.train_variant_3d, nodes.evaluate_variant_3d, "steerable.splits_3d")]
    scores = [f"steerable.{v}.scores" for v in VARIANTS]
    scores_3d = [f"steerable.{v}.scores" for v in VARIANTS_3D]
    report = [
        node(nodes.judge_claims, [P, "run_info", "params:claims_confidence", *scores, *scores_3d],
             ["steerable.metrics", "steerable.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures, [P, *scores, *scores_3d], "steerable.figures",
             name="plot_figures",
             namespace=ns),
    ]
    return Pipeline(data + variants + report)
