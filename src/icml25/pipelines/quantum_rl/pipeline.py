"""Wiring of the quantum_rl pipeline (docs/papers/quantum_rl.md).

MDPs -> optimal gains (RVI, cross-checked by the LP) -> every agent on every environment and seed,
one node per seed shard (namespace ``quantum_rl.agents.shard_<k>``; shard ``k`` of ``n`` runs
every agent for its ``seeds[k::n]``, see :mod:`icml25.core.sweep`; the agents are chosen by
parameters, so they stay inside the shard), merged back in agent, environment and seed order ->
metrics, claims and MLflow child runs -> figures; beside it the estimator-scaling table and the
qiskit-aer circuit check of the simulated amplitude estimation. The seed shards are separate
nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.quantum_rl import nodes
from icml25.pipelines.quantum_rl.params import QuantumRLParams

PARAMETERS = QuantumRLParams
P = "params:quantum_rl"
NS = "quantum_rl"


OUTPUTS = ("regret_curves", "epoch_logs", "run_summary", "final_estimates")


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    n = seed_shards()
    shards = [f"{NS}.agents.shard_{k}" for k in range(n)]
    return Pipeline([
        node(nodes.make_mdps, P, "quantum_rl.mdps", name="make_mdps", namespace=NS),
        node(nodes.solve_optimal, "quantum_rl.mdps", "quantum_rl.optimal", name="solve_optimal",
             namespace=NS),
        node(nodes.estimator_scaling, P, "quantum_rl.estimator_table", name="estimator_scaling",
             namespace=NS),
        node(nodes.check_circuits, P, "quantum_rl.circuit_metrics", name="check_circuits",
             namespace=NS),
        *(node(_bind(nodes.run_agents, shard=k, n_shards=n),
               ["quantum_rl.mdps", "quantum_rl.optimal", P], [f"{shard}.{o}" for o in OUTPUTS],
               name="run_agents", namespace=shard, tags=["training"])
          for k, shard in enumerate(shards)),
        node(nodes.merge_agents, [P, *(f"{s}.{o}" for s in shards for o in OUTPUTS[:3])],
             [f"{NS}.{o}" for o in OUTPUTS[:3]], name="merge_agents", namespace=NS),
        node(nodes.merge_final_estimates, [P, *(f"{s}.final_estimates" for s in shards)],
             f"{NS}.final_estimates", name="merge_final_estimates", namespace=NS),
        node(nodes.evaluate,
             ["quantum_rl.regret_curves", "quantum_rl.epoch_logs", "quantum_rl.run_summary",
              "quantum_rl.final_estimates", "quantum_rl.estimator_table",
              "quantum_rl.circuit_metrics", "quantum_rl.optimal", P, "run_info",
              "params:claims_confidence"],
             ["quantum_rl.metrics", "quantum_rl.claims"], name="evaluate", namespace=NS),
        node(nodes.plot_results,
             ["quantum_rl.regret_curves", "quantum_rl.estimator_table", "quantum_rl.optimal",
              "quantum_rl.metrics", P], "quantum_rl.figures", name="plot_results",
             namespace=NS),
    ])
