"""Wiring of the softshape pipeline (docs/papers/softshape.md).

shipped UCR sets + synthetic CBF -> folds and preprocessing -> per seed shard (shard ``k`` of
``n`` takes ``seeds[k::n]``, see :mod:`icml25.core.sweep`) SoftShape
(``softshape.softshape.shard_<k>``), its ablations (``softshape.ablations.shard_<k>``) and the
baselines (``softshape.baselines.shard_<k>``) on the same folds -> metrics, claims, figures from
every shard. The ablations and baselines are chosen by parameters, which Kedro reads after it
builds the graph, so each is one node per shard looping over the configured ones; seeds are
separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.softshape import nodes
from icml25.pipelines.softshape.params import SoftshapeParams

PARAMETERS = SoftshapeParams
P = "params:softshape"
PREPARED = "softshape.prepared"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _shard_nodes(shard: int, n_shards: int) -> list:
    method, ablations, baselines = (f"softshape.{g}.shard_{shard}"
                                    for g in ("softshape", "ablations", "baselines"))
    return [
        node(_bind(nodes.train_softshape, shard=shard, n_shards=n_shards), [PREPARED, P],
             [f"{method}.models", f"{method}.results", f"{method}.score_maps"],
             name="train_softshape", namespace=method, tags=["training"]),
        node(_bind(nodes.train_ablations, shard=shard, n_shards=n_shards), [PREPARED, P],
             f"{ablations}.results", name="train_ablations", namespace=ablations,
             tags=["training"]),
        node(_bind(nodes.run_baselines, shard=shard, n_shards=n_shards), [PREPARED, P],
             f"{baselines}.results", name="run_baselines", namespace=baselines,
             tags=["training"]),
    ]


def create_pipeline(**kwargs) -> Pipeline:
    ns = "softshape"
    n = seed_shards()
    results = [f"softshape.{g}.shard_{k}.results"
               for g in ("softshape", "ablations", "baselines") for k in range(n)]
    return Pipeline([
        node(nodes.load_ucr_sets, P, "softshape.raw", name="load_ucr_sets", namespace=ns),
        node(nodes.generate_cbf, P, "softshape.cbf", name="generate_cbf", namespace=ns),
        node(nodes.prepare_folds, ["softshape.raw", "softshape.cbf", P], PREPARED,
             name="prepare_folds", namespace=ns),
        *(shard_node for k in range(n) for shard_node in _shard_nodes(k, n)),
        node(_bind(nodes.evaluate, n_shards=n),
             [P, "run_info", "params:claims_confidence", *results],
             ["softshape.table", "softshape.metrics", "softshape.claims"],
             name="evaluate", namespace=ns),
        node(nodes.plot_figures,
             [PREPARED, "softshape.metrics", P,
              *(f"softshape.softshape.shard_{k}.score_maps" for k in range(n))],
             "softshape.figures", name="plot_figures", namespace=ns),
    ])
