"""Wiring of the functional_tom pipeline (``docs/papers/functional_tom.md``).

scenarios -> optimal values -> reference agents / meta-trained transformers, one training node
per seed shard (namespace ``functional_tom.meta.shard_<k>``; shard ``k`` of ``n`` trains every
game's models for ``meta_seeds[k::n]``, see :mod:`icml25.core.sweep`), evaluated together with
their training curves merged in seed order / LLM agents -> per-episode scores -> metrics, claims
(MLflow child run per agent) and figures. The seed shards are separate nodes, so a parallel
runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.functional_tom import nodes
from icml25.pipelines.functional_tom.params import FunctionalTomParams

PARAMETERS = FunctionalTomParams
P = "params:functional_tom"
NS = "functional_tom"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    n = seed_shards()
    meta_shards = [f"functional_tom.meta.shard_{k}" for k in range(n)]
    training = [
        node(_bind(nodes.train_meta_agents, shard=k, n_shards=n), P,
             [f"{s}.models", f"{s}.train_curve"], name="train_meta_agents", namespace=s,
             tags=["training"])
        for k, s in enumerate(meta_shards)
    ]
    return Pipeline([*training,
        node(nodes.build_scenarios, P, "functional_tom.scenarios", name="build_scenarios",
             namespace=NS),
        node(nodes.compute_optimal_values, ["functional_tom.scenarios", P],
             "functional_tom.optimal", name="compute_optimal_values", namespace=NS),
        node(nodes.run_reference_agents, ["functional_tom.scenarios", P],
             "functional_tom.reference_logs", name="run_reference_agents", namespace=NS),
        node(nodes.merge_meta_curves, [P, *(f"{s}.train_curve" for s in meta_shards)],
             "functional_tom.meta_train_curve", name="merge_meta_curves", namespace=NS),
        node(nodes.run_meta_agent,
             ["functional_tom.scenarios", P, *(f"{s}.models" for s in meta_shards)],
             "functional_tom.meta_logs", name="run_meta_agent", namespace=NS),
        # one probe of an LLM endpoint right after build_scenarios (nodes of a level run by
        # name), before meta-training and any episode
        node(nodes.check_llm_endpoint, [P, "functional_tom.llm_endpoint"],
             "functional_tom.llm_endpoint_check", name="check_llm_endpoint", namespace=NS),
        node(nodes.run_llm_agents, ["functional_tom.scenarios", P, "functional_tom.llm_endpoint",
                                    "functional_tom.llm_endpoint_check"],
             "functional_tom.llm_logs", name="run_llm_agents", namespace=NS),
        node(nodes.score_episodes,
             ["functional_tom.reference_logs", "functional_tom.meta_logs",
              "functional_tom.llm_logs", "functional_tom.scenarios", "functional_tom.optimal"],
             "functional_tom.episode_scores", name="score_episodes", namespace=NS),
        node(nodes.plot_literal_vs_functional,
             ["functional_tom.episode_scores", "functional_tom.reference_logs",
              "functional_tom.meta_logs", "functional_tom.scenarios", "functional_tom.optimal"],
             "functional_tom.figures", name="plot_literal_vs_functional", namespace=NS),
        node(nodes.judge_claims,
             ["functional_tom.episode_scores", "functional_tom.meta_train_curve", P, "run_info",
              "params:claims_confidence"],
             ["functional_tom.metrics", "functional_tom.claims"], name="judge_claims",
             namespace=NS),
    ])
