"""Wiring of the robust_rl pipeline (spec ``robust_rl.md``, "Kedro pipeline sketch").

environments -> ground truth (robust RVI on the true model) and empirical models (N samples per
(s, a)) -> policies of the reduction and the baselines -> exact evaluation -> linear-FA study,
robust DQN (paper config) -> metrics, claims and figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.robust_rl import nodes
from icml25.pipelines.robust_rl.params import RobustRLParams

PARAMETERS = RobustRLParams
P = "params:robust_rl"
NS = "robust_rl"


def create_pipeline(**kwargs) -> Pipeline:
    d = f"{NS}."
    return Pipeline([
        # named to sort first: a refused model stops the run before the FA studies start
        node(nodes.make_envs, P, d + "tabular_models", name="build_envs", namespace=NS),
        node(nodes.compute_ground_truth, [d + "tabular_models", P], d + "truth",
             name="ground_truth", namespace=NS),
        node(nodes.sample_models, [d + "tabular_models", P], d + "empirical_models",
             name="sample_models", namespace=NS),
        node(nodes.plan_policies, [d + "tabular_models", d + "empirical_models", P],
             d + "policies", name="plan_policies", namespace=NS),
        node(nodes.evaluate_policies, [d + "policies", d + "tabular_models", d + "truth", P],
             d + "gaps", name="evaluate_policies", namespace=NS),
        node(nodes.fa_linear, P, [d + "fa_linear_trace", d + "fa_linear_summary"],
             name="fa_linear", namespace=NS),
        node(nodes.fa_dqn, P, [d + "dqn_models", d + "cartpole_eval", d + "dqn_history"],
             name="fa_dqn", namespace=NS, tags=["training"]),
        node(nodes.judge_claims,
             [d + "gaps", d + "truth", d + "fa_linear_trace", d + "fa_linear_summary",
              d + "cartpole_eval", P, "run_info"],
             [d + "metrics", d + "claims"], name="judge_claims", namespace=NS),
        node(nodes.log_linear_traces, [d + "fa_linear_trace", P], None,
             name="log_linear_traces", namespace=NS),
        node(nodes.plot_results,
             [d + "gaps", d + "truth", d + "fa_linear_trace", d + "cartpole_eval", P],
             d + "figures", name="plot_results", namespace=NS),
    ])
