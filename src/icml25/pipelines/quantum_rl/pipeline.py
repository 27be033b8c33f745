"""Wiring of the quantum_rl pipeline (spec ``quantum_rl.md``, "Kedro pipeline sketch").

MDPs -> optimal gains (RVI, cross-checked by the LP) -> every agent on every environment and seed
-> metrics, claims and MLflow child runs -> figures; beside it the estimator-scaling table and the
qiskit-aer circuit check of the simulated amplitude estimation.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.quantum_rl import nodes
from icml25.pipelines.quantum_rl.params import QuantumRLParams

PARAMETERS = QuantumRLParams
P = "params:quantum_rl"
NS = "quantum_rl"


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([
        node(nodes.make_mdps, P, "quantum_rl.mdps", name="make_mdps", namespace=NS),
        node(nodes.solve_optimal, "quantum_rl.mdps", "quantum_rl.optimal", name="solve_optimal",
             namespace=NS),
        node(nodes.estimator_scaling, P, "quantum_rl.estimator_table", name="estimator_scaling",
             namespace=NS),
        node(nodes.check_circuits, P, "quantum_rl.circuit_metrics", name="check_circuits",
             namespace=NS),
        node(nodes.run_agents, ["quantum_rl.mdps", "quantum_rl.optimal", P],
             ["quantum_rl.regret_curves", "quantum_rl.epoch_logs", "quantum_rl.run_summary",
              "quantum_rl.final_estimates"], name="run_agents", namespace=NS),
        node(nodes.evaluate,
             ["quantum_rl.regret_curves", "quantum_rl.epoch_logs", "quantum_rl.run_summary",
              "quantum_rl.final_estimates", "quantum_rl.estimator_table",
              "quantum_rl.circuit_metrics", "quantum_rl.optimal", P, "run_info"],
             ["quantum_rl.metrics", "quantum_rl.claims"], name="evaluate", namespace=NS),
        node(nodes.plot_results,
             ["quantum_rl.regret_curves", "quantum_rl.estimator_table", "quantum_rl.optimal",
              "quantum_rl.metrics", P], "quantum_rl.figures", name="plot_results",
             namespace=NS),
    ])
