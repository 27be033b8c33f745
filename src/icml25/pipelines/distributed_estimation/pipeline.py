"""Wiring of the distributed_estimation pipeline (see ``docs/papers/distributed_estimation.md``).

true functions -> theory grid (R_th, regimes, boundaries) and the terminals-and-decoder simulation
of every protocol, one node per seed shard (namespace ``distributed_estimation.sim.shard_<k>``;
shard ``k`` of ``n`` runs every sweep for its repetitions ``seeds[k::n]``, see
:mod:`icml25.core.sweep`), merged back in the order of one loop -> oracle-K curves and slopes ->
metrics, claims, MLflow child runs -> figures. The seed shards are separate nodes, so a parallel
runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.distributed_estimation import nodes
from icml25.pipelines.distributed_estimation.params import DistributedEstimationParams

PARAMETERS = DistributedEstimationParams
P = "params:distributed_estimation"
NS = "distributed_estimation"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    d = f"{NS}."
    n = seed_shards()
    shards = [f"{NS}.sim.shard_{k}" for k in range(n)]
    return Pipeline([
        node(nodes.make_functions, P, d + "true_functions", name="make_functions",
             namespace=NS),
        node(nodes.theory_grid, [d + "true_functions", P],
             [d + "theory_rates", d + "regime_boundaries"], name="theory_grid", namespace=NS),
        *(node(_bind(nodes.simulate_protocols, shard=k, n_shards=n), [d + "true_functions", P],
               f"{shard}.results", name="simulate_protocols", namespace=shard,
               tags=["simulation", "training"])
          for k, shard in enumerate(shards)),
        node(nodes.merge_simulations, [P, *(f"{s}.results" for s in shards)],
             d + "sim_results", name="merge_simulations", namespace=NS),
        node(nodes.summarise, [d + "sim_results", d + "theory_rates", P],
             [d + "curves", d + "slope_table"], name="fit_slopes", namespace=NS),
        node(nodes.evaluate,
             [d + "curves", d + "slope_table", d + "sim_results", d + "regime_boundaries", P,
              "run_info", "params:claims_confidence"],
             [d + "metrics", d + "claims"], name="evaluate", namespace=NS),
        node(nodes.make_plots,
             [d + "curves", d + "theory_rates", d + "regime_boundaries", d + "true_functions",
              P, d + "metrics"],
             d + "figures", name="make_plots", namespace=NS),
    ])
