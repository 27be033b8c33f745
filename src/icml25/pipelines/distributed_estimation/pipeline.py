"""Wiring of the distributed_estimation pipeline (spec ``distributed_estimation.md``, "Kedro
pipeline sketch").

true functions -> theory grid (R_th, regimes, boundaries) and the terminals-and-decoder simulation
of every protocol -> oracle-K curves and slopes -> metrics, claims, MLflow child runs -> figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.distributed_estimation import nodes
from icml25.pipelines.distributed_estimation.params import DistributedEstimationParams

PARAMETERS = DistributedEstimationParams
P = "params:distributed_estimation"
NS = "distributed_estimation"


def create_pipeline(**kwargs) -> Pipeline:
    d = f"{NS}."
    return Pipeline([
        node(nodes.make_functions, P, d + "true_functions", name="make_functions",
             namespace=NS),
        node(nodes.theory_grid, [d + "true_functions", P],
             [d + "theory_rates", d + "regime_boundaries"], name="theory_grid", namespace=NS),
        node(nodes.simulate_protocols, [d + "true_functions", P], d + "sim_results",
             name="simulate_protocols", namespace=NS, tags=["simulation"]),
        node(nodes.summarise, [d + "sim_results", d + "theory_rates", P],
             [d + "curves", d + "slope_table"], name="fit_slopes", namespace=NS),
        node(nodes.evaluate,
             [d + "curves", d + "slope_table", d + "sim_results", d + "regime_boundaries", P,
              "run_info"],
             [d + "metrics", d + "claims"], name="evaluate", namespace=NS),
        node(nodes.make_plots,
             [d + "curves", d + "theory_rates", d + "regime_boundaries", d + "true_functions",
              P, d + "metrics"],
             d + "figures", name="make_plots", namespace=NS),
    ])
