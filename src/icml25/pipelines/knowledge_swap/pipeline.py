"""Wiring of the knowledge_swap pipeline (spec ``knowledge_swap.md``, "Kedro pipeline sketch").

MNIST subset + generated glyphs -> retain / forget / learn sets -> pretrained ViT per seed and
the retrain oracle -> one swap node per variant (namespace ``knowledge_swap.<variant>``: LtF,
FtL, learn-only, forget-only, joint, naive fine-tune, equal-weight ablations) -> metrics,
claims and figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.knowledge_swap import nodes
from icml25.pipelines.knowledge_swap.params import SWAP_VARIANTS, KnowledgeSwapParams

PARAMETERS = KnowledgeSwapParams
P = "params:knowledge_swap"
NS = "knowledge_swap"


def _for_variant(func, variant: str):
    bound = partial(func, variant=variant)
    return update_wrapper(bound, func)


def create_pipeline(**kwargs) -> Pipeline:
    data = [
        node(nodes.load_mnist, P, f"{NS}.mnist", name="load_mnist", namespace=NS),
        node(nodes.make_glyphs, P, f"{NS}.glyphs", name="make_glyphs", namespace=NS),
        node(nodes.split_sets, [f"{NS}.mnist", f"{NS}.glyphs", P], f"{NS}.swap_sets",
             name="split_sets", namespace=NS),
        node(nodes.pretrain_backbone, [f"{NS}.swap_sets", P], f"{NS}.pretrained",
             name="pretrain_backbone", namespace=NS, tags=["training"]),
        node(nodes.retrain_oracle, [f"{NS}.swap_sets", P], f"{NS}.retrain_oracle",
             name="retrain_oracle", namespace=NS, tags=["training"]),
    ]
    swaps = [
        node(_for_variant(nodes.swap_variant, v), [f"{NS}.pretrained", f"{NS}.swap_sets", P],
             [f"{NS}.{v}.results", f"{NS}.{v}.models"], name="swap", namespace=f"{NS}.{v}",
             tags=["training"])
        for v in SWAP_VARIANTS
    ]
    results = [f"{NS}.{v}.results" for v in SWAP_VARIANTS]
    report = [
        node(nodes.judge_claims,
             [f"{NS}.pretrained", f"{NS}.retrain_oracle", P, "run_info", *results],
             [f"{NS}.metrics", f"{NS}.claims"], name="judge_claims", namespace=NS),
        node(nodes.plot_figures, [P, *results], f"{NS}.figures", name="plot_figures",
             namespace=NS),
    ]
    return Pipeline(data + swaps + report)
