"""Kedro nodes of the quantum_rl pipeline: thin wrappers around the method modules.

Each node validates ``params:quantum_rl`` into :class:`QuantumRLParams` and does one step of the
pipeline: MDPs -> optimal gains -> estimator scaling and circuit check -> agents ->
metrics, claims, MLflow child runs and figures.
"""

from __future__ import annotations

import logging
import math
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.mdp import TabularMDP, average_reward_lp, relative_value_iteration
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_shards, shard_seeds
from icml25.pipelines.quantum_rl.environments import build_mdp
from icml25.pipelines.quantum_rl.params import QuantumRLParams

if TYPE_CHECKING:
    from icml25.pipelines.quantum_rl.agents import AgentConfig

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

logger = logging.getLogger(__name__)
PIPELINE = "quantum_rl"
TITLE = "Quantum speedups in regret analysis of average-reward MDPs (Q-UCRL, ICML 2025)"


def _params(params: dict[str, Any]) -> QuantumRLParams:
    return validate_parameters(QuantumRLParams, params, PIPELINE)


def _mdp(entry: dict[str, Any], name: str) -> TabularMDP:
    return TabularMDP(np.asarray(entry["P"]), np.asarray(entry["r"]), name=name)


# ------------------------------------------------------------------------------------ data
def make_mdps(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every configured environment as validated ``P`` (S, A, S) and ``r`` (S, A) arrays."""
    p = _params(params)
    out = {}
    for name, spec in p.envs.items():
        mdp = build_mdp(name, spec.model_dump())
        out[name] = {"P": mdp.P, "r": mdp.r, "kind": spec.kind,
                     "n_states": mdp.n_states, "n_actions": mdp.n_actions}
    return out


def solve_optimal(mdps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``rho*`` by relative value iteration, cross-checked by the occupancy LP (HiGHS)."""
    out = {}
    for name, entry in mdps.items():
        mdp = _mdp(entry, name)
        rho, bias, policy = relative_value_iteration(mdp.P, mdp.r, tol=1e-11)
        rho_lp = average_reward_lp(mdp.P, mdp.r)
        if abs(rho - rho_lp) > 1e-6:
            raise RuntimeError(f"{name}: RVI gain {rho:.8f} and LP gain {rho_lp:.8f} disagree "
                               "(is the MDP communicating?)")
        out[name] = {"rho_star": rho, "rho_star_lp": rho_lp, "policy": policy.tolist(),
                     "bias": bias.tolist(), "n_states": mdp.n_states,
                     "n_actions": mdp.n_actions}
        logger.info("quantum_rl: %s rho* = %.6f (LP %.6f)", name, rho, rho_lp)
    return out


def estimator_scaling(params: dict[str, Any]) -> pd.DataFrame:
    """Mean |p_hat - p| of the quantum and classical estimators for n = 2^k (the estimator
    check), with the pipeline's K (``auto``: Q-UCRL's K on the claim environment) and kappa;
    one table per seed of ``seeds`` (generator ``[estimator_scaling.seed, seed]``), stacked with
    a ``seed`` column."""
    from icml25.pipelines.quantum_rl.amplitude_estimation import (
        auto_k,
        estimator_error_table,
        union_bound_delta,
    )
    p = _params(params)
    cfg = p.estimator_scaling
    K = p.estimator.K
    if K == "auto":  # the K that Q-UCRL uses on the claim environment at horizon T
        S, A = build_mdp(p.claim_env, p.envs[p.claim_env].model_dump()).P.shape[:2]
        K = auto_k(union_bound_delta(p.delta, S, A, p.T))
    rows = []
    for seed in p.seeds:  # one independent table per seed: the slope claims pair over seeds
        rng = np.random.default_rng([cfg.seed, seed])
        rows += [{**row, "seed": seed} for row in estimator_error_table(
            np.asarray(cfg.p_values), np.arange(cfg.log2_n[0], cfg.log2_n[1] + 1), cfg.reps, K,
            p.estimator.kappa, rng, progress=p.progress)]
    return pd.DataFrame(rows)


def check_circuits(params: dict[str, Any]) -> dict[str, Any]:
    """TV distance between qiskit-aer AE histograms and the analytic pmf (skipped w/o qiskit)."""
    from icml25.pipelines.quantum_rl.circuits import circuit_check
    p = _params(params)
    cfg = p.circuit
    if not cfg.enabled:
        return {"skipped": True, "reason": "circuit.enabled is false", "cases": []}
    result = circuit_check([tuple(c) for c in cfg.cases],
                           [(list(r), t, m) for r, t, m in cfg.row_cases], cfg.shots, cfg.seed)
    if result["skipped"]:
        logger.warning("quantum_rl: circuit check skipped: %s", result["reason"])
    return result


# ---------------------------------------------------------------------------------- agents
def agent_config(p: QuantumRLParams, name: str) -> AgentConfig:
    from icml25.pipelines.quantum_rl.agents import AgentConfig
    agent = p.agents[name]
    est = agent.estimator_overrides or p.estimator
    return AgentConfig(kind=agent.kind, estimator=agent.estimator, radius=agent.radius,
                       c=agent.c, eps_rule=agent.eps_rule, delta=p.delta, K=est.K,
                       kappa=est.kappa, budget_mode=est.budget_mode,
                       fallback_radius=est.fallback_radius, aperiodic=p.evi.aperiodic,
                       evi_max_sweeps=p.evi.max_sweeps, reward_known=p.reward_known)


def run_seed_rng(seed: int, env: str) -> np.random.Generator:
    """The generator of one (seed, environment) run; the same for every agent."""
    return np.random.default_rng([seed, zlib.crc32(env.encode())])


EPOCH_COLUMNS = ["variant", "env", "seed", "epoch", "t_start", "length", "evi_sweeps",
                 "evi_seconds", "evi_converged", "optimistic_gain", "visited_pairs",
                 "covered_pairs", "mean_radius", "quantum_updates", "fallback_updates"]
CURVE_COLUMNS = ["variant", "env", "seed", "t", "regret", "realised_regret"]
RUN_COLUMNS = ["variant", "env", "seed", "T", "wall_seconds", "evi_seconds", "evi_calls", "K"]


def _jobs(p: QuantumRLParams, shard: int = 0, n_shards: int = 1) -> list[tuple[str, str, int]]:
    """(agent, env, seed) in the order one loop runs them, each agent's seeds restricted to shard
    ``shard`` of ``n_shards`` (``agent_seeds(agent)[shard::n_shards]``)."""
    return [(agent, env, seed) for agent in p.agents for env in p.agent_envs(agent)
            for seed in shard_seeds(p.agent_seeds(agent), shard, n_shards)]


def run_agents(mdps: dict[str, dict[str, Any]], optimal: dict[str, Any],
               params: dict[str, Any], shard: int = 0, n_shards: int = 1
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Every agent on every environment for the seeds of shard ``shard`` of ``n_shards`` (each
    agent's ``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`): regret curves at
    log-spaced checkpoints, per-epoch logs, per-run timings and the final estimates ``P_hat``,
    ``N``. A run draws from its own generator (:func:`run_seed_rng` of seed and environment), so
    it does not depend on the shard; a shard without a seed gives empty tables."""
    from icml25.pipelines.quantum_rl.agents import log_checkpoints, run_agent
    p = _params(params)
    jobs = _jobs(p, shard, n_shards)
    curves, epochs, runs, finals = [], [], [], {}
    for agent, env, seed in tqdm(jobs, desc=f"quantum_rl agents (seed shard {shard})",
                                 disable=not p.progress):
        T = p.agent_horizon(agent)
        mdp = _mdp(mdps[env], env)
        opt = optimal[env]
        checkpoints = log_checkpoints(T, p.checkpoints)
        result = run_agent(mdp, opt["rho_star"], np.asarray(opt["policy"]), T,
                           agent_config(p, agent), run_seed_rng(seed, env), checkpoints)
        key = {"variant": agent, "env": env, "seed": seed}
        curves.append(pd.DataFrame({**key, "t": checkpoints, "regret": result.regret,
                                    "realised_regret": result.realised_regret}))
        if result.epochs:
            epochs.append(pd.DataFrame(result.epochs).assign(**key))
        runs.append({**key, "T": T, "wall_seconds": result.wall_seconds,
                     "evi_seconds": result.evi_seconds, "evi_calls": result.evi_calls,
                     "K": result.K if result.K is not None else -1})
        if result.P_hat is not None:
            finals[f"{agent}/{env}/seed_{seed}"] = {
                "P_hat": result.P_hat, "N": result.N,
                **({"r_hat": result.r_hat} if result.r_hat is not None else {})}
    epoch_frame = (pd.concat(epochs, ignore_index=True)[EPOCH_COLUMNS] if epochs
                   else pd.DataFrame(columns=EPOCH_COLUMNS))
    if not runs:
        return (pd.DataFrame(columns=CURVE_COLUMNS), epoch_frame,
                pd.DataFrame(columns=RUN_COLUMNS), finals)
    return (pd.concat(curves, ignore_index=True), epoch_frame, pd.DataFrame(runs), finals)


def _in_job_order(frame: pd.DataFrame, order: dict[tuple[str, str, int], int],
                  name: str) -> pd.DataFrame:
    """``frame``'s rows sorted by their run's position in one loop (stable: a run's rows keep
    the order its shard wrote them in)."""
    keys = list(zip(frame["variant"], frame["env"], frame["seed"].astype(int), strict=True))
    unknown = sorted({k for k in keys if k not in order})
    if unknown:
        raise ValueError(f"quantum_rl: the seed shards' {name} hold runs {unknown[:3]} that the "
                         f"parameters do not define; re-run the seed shards")
    return frame.iloc[np.argsort([order[k] for k in keys], kind="stable")]


def merge_agents(params: dict[str, Any], *shard_tables: pd.DataFrame
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One (curves, epochs, runs) from every seed shard's three tables (in shard order), rows
    in the order one loop over agents, environments and seeds writes them (shard ``k`` of ``n``
    holds each agent's ``seeds[k::n]``, :func:`icml25.core.sweep.interleave_shards`). Every run
    must be in exactly one shard."""
    p = _params(params)
    if not shard_tables or len(shard_tables) % 3:
        raise ValueError(f"quantum_rl: {len(shard_tables)} shard tables do not split into "
                         f"(curves, epochs, runs) per shard")
    shards = [shard_tables[i:i + 3] for i in range(0, len(shard_tables), 3)]
    for agent in p.agents:
        for env in p.agent_envs(agent):
            per_shard = [[int(s) for s in runs.loc[(runs["variant"] == agent)
                                                   & (runs["env"] == env), "seed"]]
                         if len(runs) else [] for _, _, runs in shards]
            found = interleave_shards(per_shard)
            if found != list(p.agent_seeds(agent)):
                raise ValueError(f"quantum_rl: the seed shards hold {agent} runs on {env} for "
                                 f"seeds {found}, the parameters give "
                                 f"{p.agent_seeds(agent)}; re-run the seed shards")
    order = {job: i for i, job in enumerate(_jobs(p))}
    tables = []
    for j, (name, columns) in enumerate((("regret_curves", CURVE_COLUMNS),
                                         ("epoch_logs", EPOCH_COLUMNS),
                                         ("run_summary", RUN_COLUMNS))):
        parts = [s[j] for s in shards if len(s[j])]
        if not parts:
            tables.append(pd.DataFrame(columns=columns))
            continue
        tables.append(_in_job_order(pd.concat(parts, ignore_index=True), order, name)
                      .reset_index(drop=True))
    return tables[0], tables[1], tables[2]


def merge_final_estimates(params: dict[str, Any], *shard_finals: dict[str, Any]
                          ) -> dict[str, Any]:
    """Every seed shard's final estimates, keyed ``agent/env/seed_<seed>`` in the order one loop
    writes them; a key of no run of the parameters (a stale shard) is refused."""
    p = _params(params)
    by_key = {key: value for finals in shard_finals for key, value in finals.items()}
    names = [f"{a}/{e}/seed_{s}" for a, e, s in _jobs(p)]
    stray = sorted(set(by_key) - set(names))
    if stray:
        raise ValueError(f"quantum_rl: final estimates {stray[:3]} match no run of the "
                         f"parameters; re-run the seed shards")
    return {key: by_key[key] for key in names if key in by_key}


# ------------------------------------------------------------------------------ evaluation
def _artifacts(finals: dict[str, Any], variant: str, folder: Path) -> list[Path]:
    paths = []
    for key, value in finals.items():
        if key.split("/")[0] == variant:
            path = folder / variant / f"final_estimates_{key.replace('/', '_')}.npz"
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, **value)
            paths.append(path)
    return paths


def evaluate(curves: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame,
             finals: dict[str, Any], estimator_table: pd.DataFrame,
             circuit_metrics: dict[str, Any], optimal: dict[str, Any], params: dict[str, Any],
             run_info: dict[str, Any], confidence: float = 0.90
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own results; MLflow child runs.

    ``confidence``: the level of every claim's one-sided bounds (``params:claims_confidence``)."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    from icml25.pipelines.quantum_rl.evaluation import (
        check_curves,
        estimator_slopes,
        mlflow_summary,
        per_mdp_comparison,
        variant_metrics,
    )
    p = _params(params)
    check_curves(curves)
    envs = {e: (optimal[e]["n_states"], optimal[e]["n_actions"]) for e in p.envs}
    variants = list(p.agents)
    metrics = variant_metrics(curves, epochs, runs, variants, envs,
                              {v: p.agent_seeds(v) for v in variants})
    slopes = estimator_slopes(estimator_table)
    circuit_tv = {"circuit:aer": {"max_tv": circuit_metrics.get("max_tv", math.nan)
                                  if not circuit_metrics.get("skipped") else math.nan}}
    claim_metrics = {**metrics, **slopes, **circuit_tv}
    method = next(v for v, a in p.agents.items() if a.role == "method")
    per_mdp = per_mdp_comparison(metrics, method, [v for v, a in p.agents.items()
                                                   if a.kind == "optimistic" and v != method],
                                 list(p.envs))
    figures = [f"figures/regret_{e}.png" for e in p.envs] + ["figures/estimator_error.png"]
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], claim_metrics, run_info,
                           p.seeds, title=TITLE, figures=figures, confidence=confidence,
                           seeds_of={v: p.agent_seeds(v) for v in variants})
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra={
        "optimal": {e: {k: optimal[e][k] for k in ("rho_star", "rho_star_lp", "policy")}
                    for e in p.envs},
        "estimator": slopes,
        "circuit": circuit_metrics,
        "per_mdp": {"method": method, **per_mdp},
        "horizon": {v: p.agent_horizon(v) for v in variants},
        "roles": {v: p.agents[v].role for v in variants},
        "agents": {v: p.agents[v].model_dump(exclude_none=True) for v in variants},
    })
    if mlflow.active_run() is not None:
        roles = {v: p.agents[v].role for v in variants}
        means = seed_means(metrics)
        variant_params = {v: {**p.agents[v].model_dump(exclude_none=True),
                              "T": p.agent_horizon(v), "delta": p.delta} for v in variants}
        # NaN: agent not run on that environment, or no epochs
        with tempfile.TemporaryDirectory() as tmp:
            artifacts = {v: _artifacts(finals, v, Path(tmp)) for v in variants}
            log_variants(PIPELINE, means, roles, params_by_variant=variant_params,
                         artifacts_by_variant=artifacts, nan_ok=True)
        summary = mlflow_summary({e: optimal[e] for e in p.envs}, circuit_metrics, per_mdp)
        log_claim_counts(claims, **{f"{k}.{m}": v for k, d in slopes.items() for m, v in d.items()
                                    if not isinstance(v, list)}, **summary)
    return report, claims


def plot_results(curves: pd.DataFrame, estimator_table: pd.DataFrame, optimal: dict[str, Any],
                 metrics: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Regret curves per environment (log-log), estimator error vs n, and R(T)/coverage against
    the radius constant on the claim environment."""
    from icml25.pipelines.quantum_rl.evaluation import (
        constants_figure,
        estimator_figure,
        regret_figure,
    )
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _params(params)
    main = [v for v, a in p.agents.items() if a.role != "ablation"]
    method = next(v for v, a in p.agents.items() if a.role == "method")
    ablations = [method, *(v for v, a in p.agents.items() if a.role == "ablation")]
    figures = {}
    for env in p.envs:
        rho = optimal[env]["rho_star"]
        figures[f"regret_{env}.png"] = regret_figure(curves, env, rho, main)
        if any(env in p.agent_envs(v) for v in ablations[1:]):
            figures[f"regret_ablations_{env}.png"] = regret_figure(curves, env, rho, ablations,
                                                                   " ablations")
    figures["estimator_error.png"] = estimator_figure(estimator_table, metrics["estimator"])
    env = p.claim_env
    rows = []
    for name, agent in p.agents.items():
        if (agent.kind != "optimistic" or env not in p.agent_envs(name)
                or agent.estimator_overrides is not None or agent.T is not None):
            continue  # only the radius constant varies in this figure
        family = f"{agent.estimator} estimator, {agent.radius} radius"
        m, per_seed = metrics["metrics"][name], metrics["per_seed"][name]
        rows.append({"family": family, "c": agent.c, "regret_T": m[f"regret_T_{env}"],
                     "regret_T_std": m.get(f"regret_T_{env}_std") or 0.0,
                     "coverage": float(np.nanmean(np.asarray(per_seed[f"coverage_{env}"],
                                                             dtype=float)))})
    if rows:
        figures[f"constants_{env}.png"] = constants_figure(pd.DataFrame(rows), env, p.delta)
    plt.close("all")
    return figures
