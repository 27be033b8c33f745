"""Wiring of the acorn pipeline (see ``docs/papers/acorn.md``).

speech + synthetic sources -> scene metadata (AQA-PHY records) -> rendered clips -> one train
+ predict node pair per encoder variant and seed shard (namespace ``acorn.<variant>.shard_<k>``;
shard ``k`` of ``n`` trains ``seeds[k::n]``, see :mod:`icml25.core.sweep`), each variant's
shard predictions merged (``acorn.<variant>.merge_predictions``), and the classical / trivial
baselines -> scores -> metrics, claims and figures. The seed shards are separate nodes, so a
parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.acorn import nodes
from icml25.pipelines.acorn.params import VARIANTS, AcornParams

PARAMETERS = AcornParams
P = "params:acorn"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _variant_nodes(variant: str, n_shards: int) -> list:
    """Per seed shard a train + predict pair (namespace ``acorn.<variant>.shard_<k>``), then the
    merge of the shards' predictions into the variant's table."""
    out = []
    for k in range(n_shards):
        ns = f"acorn.{variant}.shard_{k}"
        out += [
            node(_bind(nodes.train_variant, variant=variant, shard=k, n_shards=n_shards),
                 inputs=["acorn.meta", "acorn.clips", P], outputs=f"{ns}.models",
                 name="train", namespace=ns, tags=["training"]),
            node(_bind(nodes.predict_variant, variant=variant),
                 inputs=[f"{ns}.models", "acorn.meta", "acorn.clips", P],
                 outputs=f"{ns}.predictions", name="predict", namespace=ns),
        ]
    out.append(node(_bind(nodes.merge_predictions, variant=variant),
                    inputs=[P, *(f"acorn.{variant}.shard_{k}.predictions"
                                 for k in range(n_shards))],
                    outputs=f"acorn.{variant}.predictions", name="merge_predictions",
                    namespace=f"acorn.{variant}"))
    return out


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
    n_shards = seed_shards()
    variants = [n for v in VARIANTS for n in _variant_nodes(v, n_shards)]
    predictions = [f"acorn.{v}.predictions" for v in VARIANTS]
    models = [f"acorn.{v}.shard_{k}.models" for v in VARIANTS for k in range(n_shards)]
    evaluation = [
        node(nodes.run_baselines, ["acorn.meta", "acorn.clips", P], "acorn.baseline_predictions",
             name="run_baselines", namespace=ns),
        node(nodes.evaluate, ["acorn.meta", P, "acorn.baseline_predictions", *predictions],
             "acorn.scores", name="evaluate", namespace=ns),
        node(nodes.item_errors,
             ["acorn.meta", "acorn.scores", P, "acorn.baseline_predictions", *predictions],
             "acorn.item_errors", name="item_errors", namespace=ns),
        node(nodes.judge_claims,
             ["acorn.scores", "acorn.item_errors", P, "run_info", "params:claims_confidence",
              *models],
             ["acorn.metrics", "acorn.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_figures,
             ["acorn.meta", "acorn.clips", "acorn.scores", P, "acorn.baseline_predictions",
              *predictions],
             "acorn.figures", name="plot_figures", namespace=ns),
    ]
    return Pipeline(data + variants + evaluation)
