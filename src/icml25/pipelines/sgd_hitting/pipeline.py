"""Wiring of the sgd_hitting pipeline (spec ``sgd_hitting.md``, "Kedro pipeline sketch").

validated parameters → critical points → transition costs (HJ in 1-D, gMAM in 2-D) → energies (W-graphs) and the
competing predictions → Monte-Carlo and exact hitting times → scaling fits → metrics, claims
and figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.sgd_hitting import nodes
from icml25.pipelines.sgd_hitting.params import SgdHittingParams

PARAMETERS = SgdHittingParams
NS = "sgd_hitting"
P = f"{NS}.config"  # the validated parameters, written by the first node


def create_pipeline(**kwargs) -> Pipeline:
    d = f"{NS}."
    return Pipeline([
        node(nodes.resolve_parameters, "params:sgd_hitting", P, name="resolve_parameters",
             namespace=NS),
        node(nodes.find_critical_points, P, d + "critical_points", name="find_critical_points",
             namespace=NS),
        node(nodes.compute_costs, [d + "critical_points", P], d + "cost_matrices",
             name="compute_costs", namespace=NS),
        node(nodes.compute_energies, [d + "cost_matrices", d + "critical_points", P],
             d + "energies", name="compute_energies", namespace=NS),
        node(nodes.simulate_hitting_times, [d + "critical_points", P],
             d + "mc_hitting_times", name="simulate_hitting_times", namespace=NS),
        node(nodes.exact_hitting_times, [d + "critical_points", P],
             d + "exact_hitting_times", name="exact_hitting_times", namespace=NS),
        node(nodes.fit_scaling,
             [d + "mc_hitting_times", d + "exact_hitting_times", d + "energies",
              d + "critical_points", P],
             d + "scaling_fits", name="fit_scaling", namespace=NS),
        node(nodes.judge_claims, [d + "scaling_fits", d + "energies", P, "run_info"],
             [d + "metrics", d + "claims"], name="judge_claims", namespace=NS),
        node(nodes.make_plots,
             [d + "critical_points", d + "cost_matrices", d + "energies", d + "scaling_fits",
              d + "mc_hitting_times", P, d + "metrics"],
             d + "figures", name="make_plots", namespace=NS),
    ])
