"""Wiring of the fpo pipeline (spec ``fpo.md``, "Kedro pipeline sketch").

world and SFT corpus -> SFT model -> SAE on its residual stream -> preference pairs sampled from
the SFT model and labelled by the known reward -> FPO's offline reference cache -> one alignment
node per method (namespace ``fpo.<method>``: DPO, SimPO, TDPO-1, TDPO-2, FPO; each picks its
learning rate on dev and trains every seed) -> generations judged by r* -> metrics, claims and
figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.fpo import nodes
from icml25.pipelines.fpo.losses import METHODS
from icml25.pipelines.fpo.params import FPOParams

PARAMETERS = FPOParams
P = "params:fpo"


def _align_node(method: str):
    func = update_wrapper(partial(nodes.align_method, method=method), nodes.align_method)
    return node(func, inputs=["fpo.sft_model", "fpo.sae", "fpo.reference_cache",
                              "fpo.preferences", P],
                outputs=f"fpo.{method}.policies", name="align", namespace=f"fpo.{method}",
                tags=["training"])


def create_pipeline(**kwargs) -> Pipeline:
    ns = "fpo"
    data = [
        node(nodes.make_world_node, P, "fpo.world", name="make_world", namespace=ns),
        node(nodes.make_sft_corpus, P, "fpo.sft_corpus", name="make_sft_corpus", namespace=ns),
        node(nodes.train_sft_node, ["fpo.sft_corpus", P], "fpo.sft_model", name="train_sft",
             namespace=ns, tags=["training"]),
        node(nodes.train_sae_node, ["fpo.sft_model", "fpo.sft_corpus", P],
             ["fpo.sae", "fpo.sae_stats"], name="train_sae", namespace=ns, tags=["training"]),
        node(nodes.make_preferences, ["fpo.sft_model", P],
             ["fpo.preferences", "fpo.preference_report"], name="make_preferences",
             namespace=ns),
        node(nodes.cache_reference_node, ["fpo.sft_model", "fpo.sae", "fpo.preferences", P],
             "fpo.reference_cache", name="cache_reference", namespace=ns),
    ]
    aligned = [_align_node(m) for m in METHODS]
    evaluation = [
        node(nodes.evaluate_policies,
             ["fpo.sft_model", "fpo.sae", "fpo.preferences", P,
              *(f"fpo.{m}.policies" for m in METHODS)],
             ["fpo.generations", "fpo.evaluation"], name="evaluate_policies", namespace=ns),
        node(nodes.judge_claims,
             ["fpo.evaluation", "fpo.sae_stats", "fpo.preference_report", P, "run_info"],
             ["fpo.metrics", "fpo.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_overview, ["fpo.evaluation", P], "fpo.figures", name="plot_overview",
             namespace=ns),
    ]
    return Pipeline(data + aligned + evaluation)
