"""Wiring of the fpo pipeline (``docs/papers/fpo.md``).

world and SFT corpus -> SFT model -> SAE on its residual stream -> preference pairs sampled from
the SFT model and labelled by the known reward -> FPO's offline reference cache -> per method
(DPO, SimPO, TDPO-1, TDPO-2, FPO) a learning-rate selection on dev with the first seed
(``fpo.<method>.select_lr``), then one alignment node per seed shard at that rate (namespace
``fpo.<method>.shard_<k>``; shard ``k`` of ``n`` trains ``seeds[k::n]``, see
:mod:`icml25.core.sweep`; the first seed's policy is the selection's run) -> generations of
every shard's policies judged by r* -> metrics, claims and figures. Methods and seeds are
separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.fpo import nodes
from icml25.pipelines.fpo.losses import METHODS
from icml25.pipelines.fpo.params import FPOParams

PARAMETERS = FPOParams
P = "params:fpo"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


ALIGN_INPUTS = ["fpo.sft_model", "fpo.sae", "fpo.reference_cache", "fpo.preferences"]


def _align_nodes(method: str, n_shards: int) -> list:
    """The learning-rate selection of ``method`` and its ``n_shards`` seed-shard nodes."""
    selection = f"fpo.{method}.lr_selection"
    return [
        node(_bind(nodes.select_learning_rate, method=method), [*ALIGN_INPUTS, P], selection,
             name="select_lr", namespace=f"fpo.{method}", tags=["training"]),
        *(node(_bind(nodes.align_method, method=method, shard=k, n_shards=n_shards),
               [*ALIGN_INPUTS, selection, P], f"fpo.{method}.shard_{k}.policies", name="align",
               namespace=f"fpo.{method}.shard_{k}", tags=["training"])
          for k in range(n_shards)),
    ]


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
    n = seed_shards()
    aligned = [a for m in METHODS for a in _align_nodes(m, n)]
    evaluation = [
        node(nodes.evaluate_policies,
             ["fpo.sft_model", "fpo.sae", "fpo.preferences", P,
              *(f"fpo.{m}.shard_{k}.policies" for m in METHODS for k in range(n))],
             ["fpo.generations", "fpo.evaluation"], name="evaluate_policies", namespace=ns),
        node(nodes.judge_claims,
             ["fpo.evaluation", "fpo.generations", "fpo.sae_stats", "fpo.preference_report", P,
              "run_info", "params:claims_confidence"],
             ["fpo.metrics", "fpo.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_overview, ["fpo.evaluation", P], "fpo.figures", name="plot_overview",
             namespace=ns),
    ]
    return Pipeline(data + aligned + evaluation)
