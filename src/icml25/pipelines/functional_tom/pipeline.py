"""Wiring of the functional_tom pipeline (spec ``functional_tom.md``, section 6).

scenarios -> optimal values -> reference agents / meta-trained transformer / LLM agents ->
per-episode scores -> metrics, claims (MLflow child run per agent) and figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.functional_tom import nodes
from icml25.pipelines.functional_tom.params import FunctionalTomParams

PARAMETERS = FunctionalTomParams
P = "params:functional_tom"
NS = "functional_tom"


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([
        node(nodes.build_scenarios, P, "functional_tom.scenarios", name="build_scenarios",
             namespace=NS),
        node(nodes.compute_optimal_values, ["functional_tom.scenarios", P],
             "functional_tom.optimal", name="compute_optimal_values", namespace=NS),
        node(nodes.run_reference_agents, ["functional_tom.scenarios", P],
             "functional_tom.reference_logs", name="run_reference_agents", namespace=NS),
        node(nodes.train_meta_agents, P,
             ["functional_tom.meta_models", "functional_tom.meta_train_curve"],
             name="train_meta_agents", namespace=NS, tags=["training"]),
        node(nodes.run_meta_agent,
             ["functional_tom.meta_models", "functional_tom.scenarios", P],
             "functional_tom.meta_logs", name="run_meta_agent", namespace=NS),
        node(nodes.run_llm_agents, ["functional_tom.scenarios", P], "functional_tom.llm_logs",
             name="run_llm_agents", namespace=NS),
        node(nodes.score_episodes,
             ["functional_tom.reference_logs", "functional_tom.meta_logs",
              "functional_tom.llm_logs", "functional_tom.scenarios", "functional_tom.optimal"],
             "functional_tom.episode_scores", name="score_episodes", namespace=NS),
        node(nodes.plot_literal_vs_functional,
             ["functional_tom.episode_scores", "functional_tom.reference_logs",
              "functional_tom.meta_logs", "functional_tom.scenarios", "functional_tom.optimal"],
             "functional_tom.figures", name="plot_literal_vs_functional", namespace=NS),
        node(nodes.judge_claims,
             ["functional_tom.episode_scores", "functional_tom.meta_train_curve", P, "run_info"],
             ["functional_tom.metrics", "functional_tom.claims"], name="judge_claims",
             namespace=NS),
    ])
