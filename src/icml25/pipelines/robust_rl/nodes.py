"""Kedro nodes of the robust_rl pipeline: thin wrappers around the method modules.

Each node validates ``params:robust_rl`` into :class:`RobustRLParams`, does one step of the spec's
pipeline sketch (``robust_rl.md``) and returns plain tables and dicts.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import matplotlib
import mlflow
import numpy as np
import pandas as pd

from icml25.core.claims import claims_report, metrics_report
from icml25.core.device import resolve_device, seed_everything, set_threads
from icml25.core.mdp import TabularMDP
from icml25.core.params import validate_parameters
from icml25.core.tracking import log_metrics, log_variants, variant_run
from icml25.pipelines.robust_rl import tabular_study as ts
from icml25.pipelines.robust_rl.environments import make_env
from icml25.pipelines.robust_rl.fa_linear_study import run_fa_linear
from icml25.pipelines.robust_rl.params import RobustRLParams
from icml25.pipelines.robust_rl.reduction import reduction_discount
from icml25.pipelines.robust_rl.report import (
    dqn_metrics,
    fa_linear_metrics,
    plot_cartpole,
    plot_fa_linear,
    plot_gap_vs_eps,
    plot_gap_vs_n,
    tabular_metrics,
)
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

logger = logging.getLogger(__name__)
PIPELINE = "robust_rl"


def _params(params: dict[str, Any]) -> RobustRLParams:
    return validate_parameters(RobustRLParams, params, PIPELINE)


def _sets(p: RobustRLParams) -> list[UncertaintySet]:
    return [UncertaintySet(u.type, u.radius) for u in p.uncertainty]


def _study_config(p: RobustRLParams) -> ts.StudyConfig:
    t = p.tabular
    return ts.StudyConfig(eps=t.eps, gamma_fixed=t.gamma_fixed,
                          H=None if t.H == "auto" else float(t.H), c_H=t.c_H,
                          drvi_tol=t.drvi_tol, rrvi_tol=t.rrvi_tol, qlearning=t.qlearning,
                          q_step_power=t.q_step_power)


def _mdp(entry: dict) -> TabularMDP:
    return TabularMDP(np.asarray(entry["P"]), np.asarray(entry["r"]), name=entry["name"])


# ------------------------------------------------------------------------------------ data
def make_envs(params: dict[str, Any]) -> dict[str, dict]:
    """The tabular environments ``{name: {P, r, name}}``; a non-communicating one is refused."""
    p = _params(params)
    out = {}
    for env in p.envs:
        mdp = make_env(env.kind, label=f"robust_rl.envs {env.name}", **env.kwargs())
        out[env.name] = {"P": mdp.P, "r": mdp.r, "name": env.name, "kind": env.kind}
        logger.info("robust_rl env %s: S=%d A=%d", env.name, mdp.n_states, mdp.n_actions)
    return out


def compute_ground_truth(models: dict[str, dict], params: dict[str, Any]) -> dict[str, Any]:
    """``g*``, ``h*``, ``pi*``, ``Sp(h*)`` per environment and set, by robust RVI on the TRUE
    model, plus the reduction discount the true span would give (logged beside the estimates)."""
    p = _params(params)
    truth: dict[str, Any] = {}
    for name, entry in models.items():
        mdp = _mdp(entry)
        truth[name] = {}
        for uset in _sets(p):
            gt = ts.ground_truth(mdp, uset, tol=p.tabular.rrvi_tol)
            gt["gamma_from_true_span"] = {
                f"{e:g}": reduction_discount(e, p.tabular.c_H * gt["span_h_star"]).gamma
                for e in p.tabular.eps}
            truth[name][uset.label] = gt
            logger.info("robust_rl truth %s %s: g*=%.4f Sp(h*)=%.3f robust-vs-nominal gap=%.4f",
                        name, uset.label, gt["g_star"], gt["span_h_star"],
                        gt["robust_vs_nominal_gap"])
    return truth


def sample_models(models: dict[str, dict], params: dict[str, Any]) -> dict[str, dict]:
    """``{env: {(N, seed): P_hat}}``: N generative samples per (s, a) from the true kernel."""
    p = _params(params)
    return {name: ts.sample_empirical_models(_mdp(entry), p.tabular.N_grid, p.seeds, stream=i,
                                             progress=p.progress)
            for i, (name, entry) in enumerate(models.items())}


# -------------------------------------------------------------------------------- methods
def plan_policies(models: dict[str, dict], empirical: dict[str, dict],
                  params: dict[str, Any]) -> pd.DataFrame:
    """The reduction (DRVI at gamma = 1 - eps/H) and every tabular baseline on every P_hat."""
    p = _params(params)
    cfg = _study_config(p)
    rows = []
    for i, (name, entry) in enumerate(models.items()):
        mdp = _mdp(entry)
        for uset in _sets(p):
            rows += ts.plan_policies(mdp, uset, empirical[name], cfg, stream=i,
                                     progress=p.progress)
    frame = pd.DataFrame(rows)
    frame["env"] = frame["env"].astype(str)
    return frame


def evaluate_policies(policies: pd.DataFrame, models: dict[str, dict], truth: dict[str, Any],
                      params: dict[str, Any]) -> pd.DataFrame:
    """Exact robust gains on the set centred at the TRUE kernel and the gaps ``g* - g^pi``."""
    p = _params(params)
    if policies.empty:
        raise ValueError("robust_rl: no policies to evaluate (empty policy table)")
    out = []
    for i, (name, entry) in enumerate(models.items()):
        mdp = _mdp(entry)
        for uset in _sets(p):
            sub = policies[(policies["env"] == name) & (policies["set"] == uset.label)]
            rows = [{**r, "policy": list(r["policy"])} for r in sub.to_dict("records")]
            out += ts.evaluate_policies(mdp, uset, truth[name][uset.label], rows,
                                        n_sampled_kernels=p.tabular.n_sampled_kernels,
                                        tol=p.tabular.rrvi_tol, stream=i, progress=p.progress)
    gaps = pd.DataFrame(out).drop(columns=["policy"])
    bad = gaps[~np.isfinite(gaps["gap"])]
    if len(bad):
        raise ValueError(f"robust_rl: non-finite gaps for {bad[['env', 'set', 'method']].values}")
    return gaps


def fa_linear(params: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Robust linear Q-learning at the reduction's discount and its two baselines."""
    p = _params(params)
    if not p.fa_linear.enabled:
        return pd.DataFrame(columns=["variant", "seed", "step"]), {"enabled": False}
    rows, summary = run_fa_linear(p.fa_linear, progress=p.progress)
    logger.info("robust_rl fa_linear: g*=%.4f H=%.3f gamma=%.4f", summary["g_star"],
                summary["H"], summary["gamma"])
    return pd.DataFrame(rows), {"enabled": True, **summary}


def fa_dqn(params: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """Robust DQN at the reduction's discount, DQN at the same discount, robust DQN at 0.99, on
    the continuing CartPole; each evaluated on the perturbation grid. Off unless enabled."""
    p = _params(params)
    c = p.fa_dqn
    empty = pd.DataFrame(columns=["variant", "seed", "avg_reward"])
    if not c.enabled:
        return {}, empty, pd.DataFrame(columns=["variant", "seed", "step"])
    import torch  # noqa: F401  (only the DQN needs torch)

    from icml25.pipelines.robust_rl.robust_dqn import (
        DQNConfig,
        evaluate_grid,
        perturbation_grid,
        train_dqn,
    )

    set_threads(p.num_threads)
    device = resolve_device(p.device)
    gamma = reduction_discount(c.eps, c.H).gamma
    variants = {"robust_dqn": (gamma, c.radius), "dqn": (gamma, 0.0),
                f"robust_dqn_gamma{c.gamma_generic:g}": (c.gamma_generic, c.radius)}
    grid = perturbation_grid(c.grid.length, c.grid.masspole, c.grid.force, c.grid.action_noise)
    models, evals, history = {}, [], []
    for variant, (g, radius) in variants.items():
        for seed in c.seeds:
            seed_everything(seed)
            cfg = DQNConfig(steps=c.steps, gamma=g, radius=radius, hidden=tuple(c.hidden),
                            lr=c.lr, buffer=c.buffer, batch=c.batch,
                            target_update=c.target_update, learning_starts=c.learning_starts,
                            explore_fraction=c.explore_fraction)
            net, hist = train_dqn(cfg, seed, device, progress=p.progress,
                                  desc=f"{variant} seed {seed}")
            history += [{"variant": variant, "seed": seed, **h} for h in hist]
            cells = evaluate_grid(net, grid, c.eval_steps, seed, device, progress=p.progress,
                                  desc=f"{variant} seed {seed} test grid")
            evals += [{"variant": variant, "seed": seed, "gamma": g, "radius": radius, **cell}
                      for cell in cells]
            models[f"{variant}_seed{seed}"] = {
                "state_dict": net.state_dict(),
                "metadata": {"variant": variant, "seed": seed, "gamma": g, "radius": radius,
                             "hidden": list(c.hidden), "steps": c.steps}}
    return models, pd.DataFrame(evals), pd.DataFrame(history)


# ---------------------------------------------------------------------------- reporting
def judge_claims(gaps: pd.DataFrame, truth: dict[str, Any], fa_trace: pd.DataFrame,
                 fa_summary: dict[str, Any], cartpole: pd.DataFrame, params: dict[str, Any],
                 run_info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from this run's own measurements; MLflow child runs
    (one per variant, the same metric names within each study)."""
    p = _params(params)
    groups = {"tabular": tabular_metrics(gaps, truth, p.tabular.eps, p.tabular.slope_floor)}
    if fa_summary.get("enabled"):
        groups["fa_linear"] = fa_linear_metrics(fa_trace, fa_summary)
    if p.fa_dqn.enabled:
        groups["fa_dqn"] = dqn_metrics(cartpole)
    metrics = {v: m for group in groups.values() for v, m in group.items()}
    specs = [c.model_dump() for c in p.claims]
    if p.fa_dqn.enabled:
        specs += [c.model_dump() for c in p.fa_dqn.claims]
    figures = ["figures/gap_vs_N.png"] + (["figures/fa_linear.png"]
                                          if fa_summary.get("enabled") else [])
    claims = claims_report(PIPELINE, specs, metrics, run_info, p.seeds,
                           title="Reduction framework for robust average-reward RL (ICML 2025)",
                           figures=figures)
    extra = {"truth": {env: {s: {k: v for k, v in gt.items() if k not in ("h_star", "pi_star")}
                             for s, gt in sets.items()} for env, sets in truth.items()},
             "fa_linear": {k: v for k, v in fa_summary.items() if k != "thetas"},
             "diagnostics": _diagnostics(gaps),
             "variant_groups": {g: sorted(m) for g, m in groups.items()}}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra=extra)
    if mlflow.active_run() is not None:
        for name, group in groups.items():
            means = {v: {k: _mean(x) for k, x in m.items() if not k.endswith("_over_3eps")}
                     for v, m in group.items()}
            roles = {v: "method" if v.startswith(("reduction", "robust_linear", "robust_dqn"))
                     and "gamma" not in v else "baseline" for v in group}
            log_variants(PIPELINE, means, roles,
                         params_by_variant={v: {"study": name} for v in group})
        log_metrics({"claims_holding": claims["n_holds"], "claims_total": claims["n_claims"]})
    return report, claims


def _diagnostics(gaps: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per (env, set): empirical models that were not communicating (plug-in fell back to a
    Blackwell discount) and robust RVI runs on P_hat that did not converge."""
    first = gaps[gaps["method"] == "robust_rvi_phat"]
    return {f"{env}/{s}": {"phat_not_communicating": int((~rows["phat_communicating"]).sum()),
                           "rrvi_not_converged": int((~rows["rrvi_converged"]).sum()),
                           "models": len(rows)}
            for (env, s), rows in first.groupby(["env", "set"], sort=False)}


def _mean(values: Any) -> float:
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    return float(np.mean(arr)) if arr.size and np.isfinite(arr).all() else math.nan


def log_linear_traces(fa_trace: pd.DataFrame, params: dict[str, Any]) -> None:
    """The linear learners' convergence traces as MLflow runs (one per variant and seed)."""
    if mlflow.active_run() is None or fa_trace.empty:
        return
    for (variant, seed), rows in fa_trace.groupby(["variant", "seed"]):
        role = "method" if variant == "robust_linear" else "baseline"
        with variant_run(str(variant), role=role, pipeline=PIPELINE,
                         run_name=f"{variant}/training/seed {seed}", params={"seed": int(seed)}):
            for row in rows.itertuples():
                log_metrics({"robust_gain": row.robust_gain, "theta_change": row.theta_change,
                             "mean_update_norm": row.mean_update_norm}, step=int(row.step))


def plot_results(gaps: pd.DataFrame, truth: dict[str, Any], fa_trace: pd.DataFrame,
                 cartpole: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Gap vs N (log-log), gap vs eps against 3 eps, linear-learner traces, CartPole grid."""
    matplotlib.use("Agg")
    p = _params(params)
    figures = {"gap_vs_N.png": plot_gap_vs_n(gaps, truth),
               "gap_vs_eps.png": plot_gap_vs_eps(gaps, p.tabular.eps)}
    if not fa_trace.empty:
        figures["fa_linear.png"] = plot_fa_linear(fa_trace)
    if not cartpole.empty:
        figures["cartpole_grid.png"] = plot_cartpole(cartpole)
    return figures
