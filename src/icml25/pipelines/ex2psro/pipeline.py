"""Wiring of the ex2psro pipeline (docs/papers/ex2psro.md).

instance set -> PSRO runs, one node per seed shard (namespace ``ex2psro.psro.shard_<k>``; shard
``k`` of ``n`` runs every configured method for ``seeds[k::n]``, see :mod:`icml25.core.sweep`;
the methods are chosen by parameters, so they stay inside the shard) -> one extra unregularised
best response per run to its final meta-strategy -> combined-game evaluation (cross-simulation) of
every shard's runs in method and seed order with those responses ->
metrics, claims and figures. The seed shards are separate nodes, so a parallel runner spreads
them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.ex2psro import nodes
from icml25.pipelines.ex2psro.params import Ex2psroParams

PARAMETERS = Ex2psroParams
P = "params:ex2psro"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    ns = "ex2psro"
    n = seed_shards()
    shards = [f"ex2psro.psro.shard_{k}" for k in range(n)]
    return Pipeline([
        node(nodes.make_instances, P, "ex2psro.instances", name="make_instances", namespace=ns),
        *(node(_bind(nodes.run_all_psro, shard=k, n_shards=n), ["ex2psro.instances", P],
               f"{shard}.runs", name="run_psro", namespace=shard, tags=["training"])
          for k, shard in enumerate(shards)),
        node(nodes.train_extra_best_responses,
             ["ex2psro.instances", P, *(f"{s}.runs" for s in shards)],
             "ex2psro.extra_best_responses", name="train_extra_best_responses", namespace=ns),
        node(nodes.evaluate_runs, ["ex2psro.instances", P, "ex2psro.extra_best_responses",
                                   *(f"{s}.runs" for s in shards)],
             "ex2psro.evaluation", name="evaluate_runs", namespace=ns),
        node(nodes.judge_claims,
             ["ex2psro.evaluation", P, "run_info", "params:claims_confidence"],
             ["ex2psro.metrics", "ex2psro.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_curves, ["ex2psro.evaluation", P], "ex2psro.figures",
             name="plot_curves", namespace=ns),
    ])
