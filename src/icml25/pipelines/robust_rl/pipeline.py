"""Wiring of the robust_rl pipeline (docs/papers/robust_rl.md).

environments -> ground truth (robust RVI on the true model) and empirical models (N samples per
(s, a)) -> policies of the reduction and the baselines -> exact evaluation -> linear-FA study,
robust DQN (paper config; one node per DQN variant and seed shard, namespace
``robust_rl.<variant>.shard_<k>``: shard ``k`` of ``n`` trains ``fa_dqn.seeds[k::n]``, see
:mod:`icml25.core.sweep`; merged back in variant and seed order) -> metrics, claims and figures.
The DQN seed shards are separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.robust_rl import nodes
from icml25.pipelines.robust_rl.params import RobustRLParams

PARAMETERS = RobustRLParams
P = "params:robust_rl"
NS = "robust_rl"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _dqn_shards(n: int) -> list:
    """Per DQN variant ``n`` seed-shard nodes, then one merge of every shard's tables."""
    out, tables = [], []
    for variant in nodes.DQN_VARIANTS:
        for k in range(n):
            shard = f"{NS}.{variant}.shard_{k}"
            out.append(node(_bind(nodes.fa_dqn, variant=variant, shard=k, n_shards=n), P,
                            [f"{shard}.dqn_models", f"{shard}.cartpole_eval",
                             f"{shard}.dqn_history"],
                            name="fa_dqn", namespace=shard, tags=["training"]))
            tables += [f"{shard}.cartpole_eval", f"{shard}.dqn_history"]
    out.append(node(nodes.merge_dqn, [P, *tables], [f"{NS}.cartpole_eval", f"{NS}.dqn_history"],
                    name="merge_dqn", namespace=NS))
    return out


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
        *_dqn_shards(seed_shards()),
        node(nodes.judge_claims,
             [d + "gaps", d + "truth", d + "fa_linear_trace", d + "fa_linear_summary",
              d + "cartpole_eval", P, "run_info", "params:claims_confidence"],
             [d + "metrics", d + "claims"], name="judge_claims", namespace=NS),
        node(nodes.log_linear_traces, [d + "fa_linear_trace", P], None,
             name="log_linear_traces", namespace=NS),
        node(nodes.plot_results,
             [d + "gaps", d + "truth", d + "fa_linear_trace", d + "cartpole_eval", P],
             d + "figures", name="plot_results", namespace=NS),
    ])
