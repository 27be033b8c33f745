"""Wiring of the sgd_hitting pipeline (``docs/papers/sgd_hitting.md``).

validated parameters → critical points → transition costs (HJ in 1-D, gMAM in 2-D) → energies
(W-graphs) and the competing predictions → Monte-Carlo hitting times, one node per seed shard
(namespace ``sgd_hitting.mc.shard_<k>``; shard ``k`` of ``n`` runs every Monte-Carlo experiment
for ``seeds[k::n]``, see :mod:`icml25.core.sweep`; the experiments are chosen by parameters, so
they stay inside the shard), merged back in seed order, and exact hitting times → scaling fits →
metrics, claims and figures. The seed shards are separate nodes, so a parallel runner spreads
them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.sgd_hitting import nodes
from icml25.pipelines.sgd_hitting.params import SgdHittingParams

PARAMETERS = SgdHittingParams
NS = "sgd_hitting"
P = f"{NS}.config"  # the validated parameters, written by the first node


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    d = f"{NS}."
    n = seed_shards()
    shards = [f"{NS}.mc.shard_{k}" for k in range(n)]
    return Pipeline([
        node(nodes.resolve_parameters, "params:sgd_hitting", P, name="resolve_parameters",
             namespace=NS),
        node(nodes.find_critical_points, P, d + "critical_points", name="find_critical_points",
             namespace=NS),
        node(nodes.compute_costs, [d + "critical_points", P], d + "cost_matrices",
             name="compute_costs", namespace=NS),
        node(nodes.compute_energies, [d + "cost_matrices", d + "critical_points", P],
             d + "energies", name="compute_energies", namespace=NS),
        *(node(_bind(nodes.simulate_hitting_times, shard=k, n_shards=n),
               [d + "critical_points", P], f"{shard}.hitting_times",
               name="simulate_hitting_times", namespace=shard, tags=["training"])
          for k, shard in enumerate(shards)),
        node(nodes.merge_hitting_times, [P, *(f"{s}.hitting_times" for s in shards)],
             d + "mc_hitting_times", name="merge_hitting_times", namespace=NS),
        node(nodes.exact_hitting_times, [d + "critical_points", P],
             d + "exact_hitting_times", name="exact_hitting_times", namespace=NS),
        node(nodes.fit_scaling,
             [d + "mc_hitting_times", d + "exact_hitting_times", d + "energies",
              d + "critical_points", P],
             d + "scaling_fits", name="fit_scaling", namespace=NS),
        node(nodes.judge_claims, [d + "scaling_fits", d + "energies", P, "run_info",
                                  "params:claims_confidence"],
             [d + "metrics", d + "claims"], name="judge_claims", namespace=NS),
        node(nodes.make_plots,
             [d + "critical_points", d + "cost_matrices", d + "energies", d + "scaling_fits",
              d + "mc_hitting_times", P, d + "metrics"],
             d + "figures", name="make_plots", namespace=NS),
    ])
