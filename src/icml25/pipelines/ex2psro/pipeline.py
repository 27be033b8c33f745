"""Wiring of the ex2psro pipeline (spec ``ex2psro.md``, "Kedro pipeline sketch").

instance set -> PSRO runs (every method x seed) -> combined-game evaluation (with extra
unregularised best responses) -> metrics, claims and figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.ex2psro import nodes
from icml25.pipelines.ex2psro.params import Ex2psroParams

PARAMETERS = Ex2psroParams
P = "params:ex2psro"


def create_pipeline(**kwargs) -> Pipeline:
    ns = "ex2psro"
    return Pipeline([
        node(nodes.make_instances, P, "ex2psro.instances", name="make_instances", namespace=ns),
        node(nodes.run_all_psro, ["ex2psro.instances", P], "ex2psro.psro_runs",
             name="run_psro", namespace=ns, tags=["training"]),
        node(nodes.evaluate_runs, ["ex2psro.psro_runs", "ex2psro.instances", P],
             "ex2psro.evaluation", name="evaluate_runs", namespace=ns),
        node(nodes.judge_claims, ["ex2psro.evaluation", P, "run_info"],
             ["ex2psro.metrics", "ex2psro.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_curves, ["ex2psro.evaluation", P], "ex2psro.figures",
             name="plot_curves", namespace=ns),
    ])
