"""Kedro nodes of the robust_rl pipeline: thin wrappers around the method modules.

Each node validates ``params:robust_rl`` into :class:`RobustRLParams`, does one step of the
pipeline and returns plain tables and dicts.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.mdp import TabularMDP
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.core.workers import process_map, resolve_workers
from icml25.pipelines.robust_rl import tabular_study as ts
from icml25.pipelines.robust_rl.environments import make_env
from icml25.pipelines.robust_rl.fa_linear_study import run_fa_linear
from icml25.pipelines.robust_rl.params import RobustRLParams
from icml25.pipelines.robust_rl.reduction import reduction_discount
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

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
def _map_cells(func, jobs: list[tuple], n_workers: int) -> list:
    """``[func(*job) for job in jobs]`` in job order, in ``n_workers`` forked processes when more
    than one (each cell draws from generators seeded by its own seed, stream and N, so the
    result does not depend on the number of processes)."""
    workers = resolve_workers(n_workers, len(jobs), key="robust_rl.tabular.n_workers")
    if workers == 1:
        return [func(*job) for job in jobs]
    return list(process_map(func, jobs, workers, start_method="fork"))


def _plan_cell(entry: dict, uset: UncertaintySet, empirical: dict, cfg: ts.StudyConfig,
               stream: int, progress: bool) -> list[dict]:
    return ts.plan_policies(_mdp(entry), uset, empirical, cfg, stream=stream, progress=progress)


def _evaluate_cell(entry: dict, uset: UncertaintySet, truth: dict, rows: list[dict],
                   n_sampled_kernels: int, tol: float, stream: int,
                   progress: bool) -> list[dict]:
    return ts.evaluate_policies(_mdp(entry), uset, truth, rows,
                                n_sampled_kernels=n_sampled_kernels, tol=tol, stream=stream,
                                progress=progress)


def plan_policies(models: dict[str, dict], empirical: dict[str, dict],
                  params: dict[str, Any]) -> pd.DataFrame:
    """The reduction (DRVI at gamma = 1 - eps/H) and every tabular baseline on every P_hat, one
    (environment, set) cell per job (``tabular.n_workers`` processes)."""
    p = _params(params)
    cfg = _study_config(p)
    jobs = [(entry, uset, empirical[name], cfg, i, p.progress and p.tabular.n_workers == 1)
            for i, (name, entry) in enumerate(models.items()) for uset in _sets(p)]
    rows = [row for cell in _map_cells(_plan_cell, jobs, p.tabular.n_workers) for row in cell]
    frame = pd.DataFrame(rows)
    frame["env"] = frame["env"].astype(str)
    return frame


def evaluate_policies(policies: pd.DataFrame, models: dict[str, dict], truth: dict[str, Any],
                      params: dict[str, Any]) -> pd.DataFrame:
    """Exact robust gains on the set centred at the TRUE kernel and the gaps ``g* - g^pi``, one
    (environment, set) cell per job (``tabular.n_workers`` processes)."""
    p = _params(params)
    if policies.empty:
        raise ValueError("robust_rl: no policies to evaluate (empty policy table)")
    jobs = []
    for i, (name, entry) in enumerate(models.items()):
        for uset in _sets(p):
            sub = policies[(policies["env"] == name) & (policies["set"] == uset.label)]
            rows = [{**r, "policy": list(r["policy"])} for r in sub.to_dict("records")]
            jobs.append((entry, uset, truth[name][uset.label], rows,
                         p.tabular.n_sampled_kernels, p.tabular.rrvi_tol, i,
                         p.progress and p.tabular.n_workers == 1))
    out = [row for cell in _map_cells(_evaluate_cell, jobs, p.tabular.n_workers)
           for row in cell]
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


#: the DQN variants, keyed by role (the generic-discount variant's name carries its discount)
DQN_VARIANTS = ("robust_dqn", "dqn", "robust_dqn_generic")
_EVAL_COLUMNS = ["variant", "seed", "avg_reward"]
_HISTORY_COLUMNS = ["variant", "seed", "step"]


def _dqn_variants(p: RobustRLParams) -> dict[str, tuple[str, float, float]]:
    """``{role: (variant name, discount, radius)}``: robust DQN at the reduction's discount, DQN
    at the same discount, robust DQN at the generic discount."""
    c = p.fa_dqn
    gamma = reduction_discount(c.eps, c.H).gamma
    return {"robust_dqn": ("robust_dqn", gamma, c.radius), "dqn": ("dqn", gamma, 0.0),
            "robust_dqn_generic": (f"robust_dqn_gamma{c.gamma_generic:g}", c.gamma_generic,
                                   c.radius)}


def fa_dqn(params: dict[str, Any], variant: str = "robust_dqn", shard: int = 0,
           n_shards: int = 1) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """One DQN variant (``variant``, a key of :data:`DQN_VARIANTS`: robust DQN at the
    reduction's discount, DQN at the same discount, robust DQN at the generic discount) on the
    continuing CartPole for the seeds of shard ``shard`` of ``n_shards``
    (``fa_dqn.seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`), each evaluated
    on the perturbation grid. Every seed starts from :func:`seed_everything`, so its network and
    scores do not depend on the shard. Nothing when the DQN study is off or the shard has no
    seed."""
    from icml25.core.device import resolve_device, seed_everything, set_threads
    p = _params(params)
    c = p.fa_dqn
    if variant not in DQN_VARIANTS:
        raise ValueError(f"robust_rl: unknown DQN variant {variant!r}; expected one of "
                         f"{list(DQN_VARIANTS)}")
    seeds = shard_seeds(c.seeds, shard, n_shards)
    empty = pd.DataFrame(columns=_EVAL_COLUMNS)
    if not c.enabled or not seeds:
        return {}, empty, pd.DataFrame(columns=_HISTORY_COLUMNS)
    import torch  # noqa: F401  (only the DQN needs torch)

    from icml25.pipelines.robust_rl.robust_dqn import (
        DQNConfig,
        evaluate_grid,
        perturbation_grid,
        train_dqn,
    )

    set_threads(p.num_threads)
    device = resolve_device(p.device)
    name, g, radius = _dqn_variants(p)[variant]
    grid = perturbation_grid(c.grid.length, c.grid.masspole, c.grid.force, c.grid.action_noise)
    models, evals, history = {}, [], []
    for seed in seeds:
        seed_everything(seed)
        cfg = DQNConfig(steps=c.steps, gamma=g, radius=radius, hidden=tuple(c.hidden),
                        lr=c.lr, buffer=c.buffer, batch=c.batch,
                        target_update=c.target_update, learning_starts=c.learning_starts,
                        explore_fraction=c.explore_fraction)
        net, hist = train_dqn(cfg, seed, device, progress=p.progress,
                              desc=f"{name} seed {seed}")
        history += [{"variant": name, "seed": seed, **h} for h in hist]
        cells = evaluate_grid(net, grid, c.eval_steps, seed, device, progress=p.progress,
                              desc=f"{name} seed {seed} test grid")
        evals += [{"variant": name, "seed": seed, "gamma": g, "radius": radius, **cell}
                  for cell in cells]
        models[f"{name}_seed{seed}"] = {
            "state_dict": net.state_dict(),
            "metadata": {"variant": name, "seed": seed, "gamma": g, "radius": radius,
                         "hidden": list(c.hidden), "steps": c.steps}}
    return models, pd.DataFrame(evals), pd.DataFrame(history)


def merge_dqn(params: dict[str, Any], *shard_tables: pd.DataFrame
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``cartpole_eval`` and ``dqn_history`` from every DQN seed shard's (evals, history), in
    :data:`DQN_VARIANTS` order, ``len(shards)`` shards per variant, shards in order. Rows come back
    as one loop over variants and seeds writes them: variant by variant, seed-list order within
    a variant (shard ``k`` of ``n`` holds ``seeds[k::n]``,
    :func:`icml25.core.sweep.interleave_frames`)."""
    p = _params(params)
    c = p.fa_dqn
    per_variant, rest = divmod(len(shard_tables), 2 * len(DQN_VARIANTS))
    if rest or not per_variant:
        raise ValueError(f"robust_rl: {len(shard_tables)} DQN shard tables do not split into "
                         f"(evals, history) per shard of {len(DQN_VARIANTS)} variants")
    if not c.enabled:
        return pd.DataFrame(columns=_EVAL_COLUMNS), pd.DataFrame(columns=_HISTORY_COLUMNS)
    names = _dqn_variants(p)
    merged: tuple[list[pd.DataFrame], list[pd.DataFrame]] = ([], [])
    for i, role in enumerate(DQN_VARIANTS):
        tables = shard_tables[2 * per_variant * i:2 * per_variant * (i + 1)]
        name = names[role][0]
        for j, what in enumerate(("cartpole_eval", "dqn_history")):
            shards = tables[j::2]
            stray = sorted({v for t in shards if len(t) for v in t["variant"]} - {name})
            if stray:
                raise ValueError(f"robust_rl: the {role} seed shards hold {what} rows of "
                                 f"{stray}, not {name!r}; re-run the seed shards")
            merged[j].extend(interleave_frames(
                shards, c.seeds, where=f"robust_rl: the {role} seed shards' {what} tables",
                seeds_from="params:robust_rl.fa_dqn.seeds"))
    return pd.concat(merged[0], ignore_index=True), pd.concat(merged[1], ignore_index=True)


# ---------------------------------------------------------------------------- reporting
def judge_claims(gaps: pd.DataFrame, truth: dict[str, Any], fa_trace: pd.DataFrame,
                 fa_summary: dict[str, Any], cartpole: pd.DataFrame, params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float = 0.90
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from this run's own measurements; MLflow child runs
    (one per variant, the same metric names within each study). Claims pair variants by seed at
    the level ``confidence`` (``params:claims_confidence``): each study's variants ran the same
    seeds (``seeds``, ``fa_linear.seeds``, ``fa_dqn.seeds``), passed on as ``seeds_of``."""
    from icml25.core.tracking import log_claim_counts, log_variants
    from icml25.pipelines.robust_rl.report import (
        discount_summary,
        dqn_metrics,
        fa_linear_metrics,
        onehot_metrics,
        tabular_metrics,
    )
    p = _params(params)
    groups = {"tabular": tabular_metrics(gaps, truth, p.tabular.eps, p.tabular.slope_floor)}
    if fa_summary.get("enabled"):
        groups["fa_linear"] = fa_linear_metrics(fa_trace, fa_summary)
        if "onehot" in fa_summary:
            groups["fa_onehot"] = onehot_metrics(fa_trace)
    if p.fa_dqn.enabled:
        groups["fa_dqn"] = dqn_metrics(cartpole)
    metrics = {v: m for group in groups.values() for v, m in group.items()}
    specs = [c.model_dump() for c in p.claims]
    if p.fa_dqn.enabled:
        specs += [c.model_dump() for c in p.fa_dqn.claims]
    figures = ["figures/gap_vs_N.png"] + (["figures/fa_linear.png"]
                                          if fa_summary.get("enabled") else [])
    study_seeds = {"tabular": p.seeds, "fa_linear": p.fa_linear.seeds,
                   "fa_onehot": p.fa_linear.seeds, "fa_dqn": p.fa_dqn.seeds}
    seeds_of = {v: list(study_seeds[g]) for g, group in groups.items() for v in group}
    claims = claims_report(PIPELINE, specs, metrics, run_info, p.seeds,
                           title="Reduction framework for robust average-reward RL (ICML 2025)",
                           figures=figures, confidence=confidence, seeds_of=seeds_of)
    extra = {"truth": {env: {s: {k: v for k, v in gt.items() if k not in ("h_star", "pi_star")}
                             for s, gt in sets.items()} for env, sets in truth.items()},
             "fa_linear": {k: v for k, v in fa_summary.items() if k != "thetas"},
             "diagnostics": _diagnostics(gaps),
             "discount": discount_summary(gaps, truth),
             "variant_groups": {g: sorted(m) for g, m in groups.items()}}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra=extra)
    if mlflow.active_run() is not None:
        for name, group in groups.items():
            means = {v: {k: _mean(x) for k, x in m.items() if not k.endswith("_over_3eps")}
                     for v, m in group.items()}
            roles = {v: "ablation" if v.endswith("_global") else
                     "method" if v.startswith(("reduction", "robust_linear", "robust_dqn"))
                     and "gamma" not in v else "baseline" for v in group}
            log_variants(PIPELINE, means, roles,
                         params_by_variant={v: {"study": name} for v in group})
        log_claim_counts(claims, **discount_mlflow_metrics(extra["discount"], fa_summary))
    return report, claims


def discount_mlflow_metrics(discount: dict[str, dict[str, Any]], fa_summary: dict[str, Any]
                            ) -> dict[str, float]:
    """The reduction's discount on the pipeline run: per (env, set, eps) of the tabular study
    ``discount.<env>/<set>/eps<e>.<name>`` (``H_hat`` min/mean/max, raw and clamped discounts,
    the number of clamped models, the true span), and for the linear studies ``fa_linear.H``,
    ``.gamma_raw``, ``.gamma``, ``.gamma_clamped`` (1 when clamped), ``.span_h_star`` (the true
    span) and the same for ``fa_onehot``."""
    out = {f"discount.{key}.{name}": float(value) for key, row in discount.items()
           for name, value in row.items()}
    if fa_summary.get("enabled"):
        for prefix, block in (("fa_linear", fa_summary), ("fa_onehot", fa_summary.get("onehot"))):
            if not block:
                continue
            for name in ("H", "gamma_raw", "gamma", "gamma_clamped", "span_h_star"):
                out[f"{prefix}.{name}"] = float(block[name])
    return out


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
    from icml25.core.tracking import log_metrics, variant_run
    if mlflow.active_run() is None or fa_trace.empty:
        return
    for (variant, seed), rows in fa_trace.groupby(["variant", "seed"]):
        role = ("method" if variant in ("robust_linear", "robust_linear_onehot") else
                "ablation" if str(variant).endswith("_global") else "baseline")
        with variant_run(str(variant), role=role, pipeline=PIPELINE,
                         run_name=f"{variant}/training/seed {seed}", params={"seed": int(seed)}):
            for row in rows.itertuples():
                values = {"robust_gain": row.robust_gain, "theta_change": row.theta_change,
                          "mean_update_norm": row.mean_update_norm,
                          "min_visits": row.min_visits}
                if getattr(row, "q_rel_error", None) is not None and np.isfinite(row.q_rel_error):
                    values.update(q_error=row.q_error, q_rel_error=row.q_rel_error)
                log_metrics(values, step=int(row.step))


def plot_results(gaps: pd.DataFrame, truth: dict[str, Any], fa_trace: pd.DataFrame,
                 cartpole: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Gap vs N (log-log), gap vs eps against 3 eps, linear-learner traces, CartPole grid."""
    from icml25.pipelines.robust_rl.report import (
        plot_cartpole,
        plot_fa_linear,
        plot_gap_vs_eps,
        plot_gap_vs_n,
    )
    matplotlib.use("Agg")
    p = _params(params)
    figures = {"gap_vs_N.png": plot_gap_vs_n(gaps, truth),
               "gap_vs_eps.png": plot_gap_vs_eps(gaps, p.tabular.eps)}
    if not fa_trace.empty:
        figures["fa_linear.png"] = plot_fa_linear(fa_trace)
    if not cartpole.empty:
        figures["cartpole_grid.png"] = plot_cartpole(cartpole)
    return figures
