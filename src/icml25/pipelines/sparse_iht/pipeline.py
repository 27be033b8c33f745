"""Wiring of the sparse_iht pipeline (see ``docs/papers/sparse_iht.md``).

generated instances -> each experiment (first-order methods and baselines, exhaustive small
instances, stochastic and zeroth-order variants, real data, index tracking on generated
markets) as one node per seed shard
(namespace ``sparse_iht.<experiment>.shard_<k>``; shard ``k`` of ``n`` runs ``seeds[k::n]``, see
:mod:`icml25.core.sweep`) -> one merge per experiment back into its tables in seed order ->
metrics and claims -> figures. Index tracking on real prices is one node (no seed). The seed shards are separate nodes, so a parallel runner spreads
them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.sparse_iht import nodes
from icml25.pipelines.sparse_iht.params import SparseIHTParams

PARAMETERS = SparseIHTParams
P = "params:sparse_iht"
NS = "sparse_iht"

#: experiment -> (shard node function, its extra inputs, its tables, merge node function,
#: the merged tables the rest of the pipeline reads)
EXPERIMENTS = {
    "first_order": (nodes.run_first_order, ["sparse_iht.synthetic_problems"],
                    ("results", "traces"), nodes.merge_first_order,
                    ["sparse_iht.fo_results", "sparse_iht.fo_traces"]),
    "exhaustive": (nodes.run_exhaustive, [], ("results",), nodes.merge_exhaustive,
                   "sparse_iht.small_results"),
    "stochastic": (nodes.run_stochastic, [], ("results", "traces"), nodes.merge_stochastic,
                   ["sparse_iht.stoch_results", "sparse_iht.stoch_traces"]),
    "zeroth_order": (nodes.run_zeroth_order, [], ("results", "traces"),
                     nodes.merge_zeroth_order,
                     ["sparse_iht.zo_results", "sparse_iht.zo_traces"]),
    "real_data": (nodes.run_real_data, [], ("results",), nodes.merge_real_data,
                  "sparse_iht.real_results"),
    "index_tracking": (nodes.run_index_tracking, [], ("results",), nodes.merge_index_tracking,
                       "sparse_iht.index_results"),
}


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _fan_out(n: int) -> list:
    out = []
    for name, (run, inputs, tables, merge, merged) in EXPERIMENTS.items():
        shards = [f"sparse_iht.{name}.shard_{k}" for k in range(n)]
        for k, shard in enumerate(shards):
            outputs = [f"{shard}.{t}" for t in tables]
            out.append(node(_bind(run, shard=k, n_shards=n), [*inputs, P],
                            outputs if len(outputs) > 1 else outputs[0],
                            name=f"run_{name}", namespace=shard, tags=["training"]))
        out.append(node(merge, [P, *(f"{s}.{t}" for s in shards for t in tables)], merged,
                        name=f"merge_{name}", namespace=NS))
    return out


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([
        node(nodes.make_synthetic, P, "sparse_iht.synthetic_problems", name="make_synthetic",
             namespace=NS),
        *_fan_out(seed_shards()),
        # real prices: one deterministic instance per index, not a seed sweep
        node(nodes.run_index_real, P, "sparse_iht.index_real_results", name="run_index_real",
             namespace=NS, tags=["training"]),
        node(nodes.judge_claims,
             ["sparse_iht.fo_results", "sparse_iht.small_results", "sparse_iht.stoch_results",
              "sparse_iht.zo_results", "sparse_iht.real_results", "sparse_iht.index_results",
              "sparse_iht.index_real_results", P, "run_info", "params:claims_confidence"],
             ["sparse_iht.metrics", "sparse_iht.claims"], name="judge_claims", namespace=NS),
        node(nodes.make_plots,
             ["sparse_iht.fo_results", "sparse_iht.fo_traces", "sparse_iht.small_results",
              "sparse_iht.stoch_traces", "sparse_iht.zo_traces", "sparse_iht.real_results",
              "sparse_iht.index_results", "sparse_iht.index_real_results"],
             "sparse_iht.figures", name="make_plots", namespace=NS),
    ])
