"""Wiring of the sparse_iht pipeline (spec ``sparse_iht.md``, "Kedro pipeline sketch").

generated instances -> first-order methods and baselines, exhaustive small instances,
stochastic and zeroth-order variants -> metrics and claims -> figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.sparse_iht import nodes
from icml25.pipelines.sparse_iht.params import SparseIHTParams

PARAMETERS = SparseIHTParams
P = "params:sparse_iht"
NS = "sparse_iht"


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([
        node(nodes.make_synthetic, P, "sparse_iht.synthetic_problems", name="make_synthetic",
             namespace=NS),
        node(nodes.run_first_order, ["sparse_iht.synthetic_problems", P],
             ["sparse_iht.fo_results", "sparse_iht.fo_traces"], name="run_first_order",
             namespace=NS),
        node(nodes.run_exhaustive, P, "sparse_iht.small_results", name="run_exhaustive",
             namespace=NS),
        node(nodes.run_stochastic, P, ["sparse_iht.stoch_results", "sparse_iht.stoch_traces"],
             name="run_stochastic", namespace=NS),
        node(nodes.run_zeroth_order, P, ["sparse_iht.zo_results", "sparse_iht.zo_traces"],
             name="run_zeroth_order", namespace=NS),
        node(nodes.run_real_data, P, "sparse_iht.real_results", name="run_real_data",
             namespace=NS),
        node(nodes.judge_claims,
             ["sparse_iht.fo_results", "sparse_iht.small_results", "sparse_iht.stoch_results",
              "sparse_iht.zo_results", "sparse_iht.real_results", P, "run_info"],
             ["sparse_iht.metrics", "sparse_iht.claims"], name="judge_claims", namespace=NS),
        node(nodes.make_plots,
             ["sparse_iht.fo_results", "sparse_iht.fo_traces", "sparse_iht.small_results",
              "sparse_iht.stoch_traces", "sparse_iht.zo_traces", "sparse_iht.real_results"],
             "sparse_iht.figures", name="make_plots", namespace=NS),
    ])
