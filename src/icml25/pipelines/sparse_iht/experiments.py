"""The sparse_iht experiments as plain functions returning tidy tables (no Kedro).

- :func:`run_synthetic`: constrained sparse regression (synthetic) over settings × seeds ×
  k, for IHT-2SP and every first-order baseline; the gap is measured against the truth (``w̄ ∈
  Γ``) or against the oracle (binding Γ);
- :func:`run_small_exhaustive`: the same methods on small instances, with the gap measured
  against the best k̄-sparse feasible point found by exhaustive search;
- :func:`run_stochastic`: HSG-HT-2SP against IHT-2SP at equal sample-gradient counts (IFO);
- :func:`run_zeroth_order`: HZO-HT-2SP against SZOHT at several q (a smaller
  synthetic regression reached only through function values);
- :func:`run_index_tracking` and :func:`run_index_real`: sparse index tracking in the
  non-negative budget set against the exhaustive optimum, on generated factor-model markets
  (one per seed) and on real prices.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from icml25.pipelines.sparse_iht import algorithms as alg
from icml25.pipelines.sparse_iht import index_tracking as tracking
from icml25.pipelines.sparse_iht.baselines import (
    best_on_support,
    best_sparse_feasible,
    lasso_baselines,
    omp_project,
)
from icml25.pipelines.sparse_iht.params import (
    IndexTrackingParams,
    RealDataParams,
    SettingParams,
    SmallParams,
    StochasticParams,
    SyntheticParams,
    ZerothOrderParams,
    k_of,
)
from icml25.pipelines.sparse_iht.problems import (
    LeastSquares,
    SyntheticProblem,
    constraint_for,
    make_sparse_regression,
    support_recall_precision,
)
from icml25.pipelines.sparse_iht.projections import Constraint, feasibility_violation
from icml25.pipelines.sparse_iht.real_data import breast_cancer_experiment, diabetes_experiment

#: First-order methods with a per-iteration history (traced at ``trace_ratio``).
ITERATIVE = ("iht_2sp", "iht_then_project", "exact_iht", "iht_2sp_warm")


def _row(problem: LeastSquares, truth: SyntheticProblem, gamma: Constraint, w: np.ndarray,
         k: int, reference: float) -> dict:
    value = problem.value(w)
    recall, precision = support_recall_precision(w, truth.support)
    return {
        "objective": value,
        "reference": reference,
        "gap": (value - reference) / reference,
        "recall": recall,
        "precision": precision,
        "nnz": int(np.count_nonzero(w)),
        "violation": feasibility_violation(w, k, gamma),
    }


def _progress(items: Iterable, show: bool, desc: str):
    return tqdm(items, desc=desc, disable=not show, leave=False)


def synthetic_instance(cfg: SyntheticParams | SmallParams, setting: SettingParams,
                       seed: int) -> SyntheticProblem:
    return make_sparse_regression(cfg.n, cfg.d, cfg.k_bar, cfg.rho, cfg.sigma, seed,
                                  signed=setting.signed)


def run_synthetic(cfg: SyntheticParams, seeds: list[int], rtol: float = 1e-6,
                  progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every first-order method on every (setting, seed, k). Returns (results, traces)."""
    rows, traces = [], []
    jobs = [(name, s, seed) for name, s in cfg.named.items() for seed in seeds]
    for name, setting, seed in _progress(jobs, progress, "sparse_iht synthetic"):
        truth = synthetic_instance(cfg, setting, seed)
        problem = LeastSquares(truth.X, truth.y)
        gamma = constraint_for(setting.kind, setting.scale, truth.w_true)
        dense = alg.dense_reference(problem, gamma, cfg.dense_iterations)
        if setting.binding:
            ref_run = alg.oracle(problem, gamma, truth.support, cfg.dense_iterations)
            reference = ref_run.final
        else:
            reference = problem.value(truth.w_true)
        base = {"setting": name, "kind": setting.kind, "binding": setting.binding, "seed": seed}
        lasso = lasso_baselines(problem, gamma, cfg.ks, cfg.lasso_alphas)
        for ratio, k in zip(cfg.k_ratios, cfg.ks, strict=True):
            at = {**base, "k": k, "k_ratio": ratio}
            runs = {
                "iht_2sp": alg.iht_2sp(problem, k, gamma, cfg.iterations),
                "iht_then_project": alg.iht_then_project(problem, k, gamma, cfg.iterations),
                "exact_iht": alg.exact_projection_iht(problem, k, gamma, cfg.iterations),
                "iht_2sp_warm": alg.iht_2sp(problem, k, gamma, cfg.iterations, w0=dense.w),
            }
            for method, run in runs.items():
                rows.append({**at, "method": method, **_row(problem, truth, gamma, run.w, k,
                                                            reference),
                             "max_violation": run.max_violation if method != "iht_then_project"
                             else feasibility_violation(run.w, k, gamma),
                             "iterations_to_tol": run.iterations_to_tolerance(rtol),
                             "ifo_to_tol": run.cost_to_tolerance(rtol),
                             "seconds": run.seconds})
                if ratio == cfg.trace_ratio:
                    traces.append(pd.DataFrame({
                        "setting": name, "seed": seed, "k": k, "method": method,
                        "iteration": np.arange(run.objective.size), "ifo": run.cost,
                        "objective": run.objective,
                        "gap": (run.objective - reference) / reference,
                        "violation": run.extra["violation"]}))
            raw, refit = lasso[k]
            statics = {"lasso": raw, "lasso_refit": refit,
                       "omp_project": omp_project(problem, k, gamma)}
            for method, w in statics.items():
                rows.append({**at, "method": method,
                             **_row(problem, truth, gamma, w, k, reference),
                             "max_violation": feasibility_violation(w, k, gamma)})
        # references without a sparsity level: dense (lower bound) and, if binding, the oracle
        d_row = _row(problem, truth, gamma, dense.w, problem.d, reference)
        rows.append({**base, "k": problem.d, "k_ratio": np.nan, "method": "dense_reference",
                     **d_row, "max_violation": dense.max_violation,
                     "iterations_to_tol": dense.iterations_to_tolerance(rtol),
                     "ifo_to_tol": dense.cost_to_tolerance(rtol), "seconds": dense.seconds})
    return pd.DataFrame(rows), pd.concat(traces, ignore_index=True)


def run_small_exhaustive(cfg: SmallParams, seeds: list[int], k_ratios: list[float],
                         progress: bool = True) -> pd.DataFrame:
    """IHT variants on small instances; gap against the exhaustive best k̄-sparse feasible R."""
    rows = []
    jobs = [(name, s, seed) for name, s in cfg.named.items() for seed in seeds]
    ks = [k_of(r, cfg.k_bar) for r in k_ratios]
    for name, setting, seed in _progress(jobs, progress, "sparse_iht exhaustive"):
        truth = synthetic_instance(cfg, setting, seed)
        problem = LeastSquares(truth.X, truth.y)
        gamma = constraint_for(setting.kind, setting.scale, truth.w_true)
        _, best = best_sparse_feasible(problem, cfg.k_bar, gamma)
        for ratio, k in zip(k_ratios, ks, strict=True):
            if k > cfg.d:
                continue
            runs = {
                "iht_2sp": alg.iht_2sp(problem, k, gamma, cfg.iterations),
                "iht_then_project": alg.iht_then_project(problem, k, gamma, cfg.iterations),
                "exact_iht": alg.exact_projection_iht(problem, k, gamma, cfg.iterations),
            }
            for method, run in runs.items():
                rows.append({"setting": name, "seed": seed, "k": k, "k_ratio": ratio,
                             "method": method, "objective": run.final, "best_sparse": best,
                             "gap_best": (run.final - best) / best,
                             "violation": feasibility_violation(run.w, k, gamma)})
    return pd.DataFrame(rows)


def run_stochastic(cfg: StochasticParams, synthetic: SyntheticParams, seeds: list[int],
                   progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HSG-HT-2SP vs IHT-2SP on one synthetic setting, compared at equal IFO counts."""
    setting = synthetic.named[cfg.setting]
    k = k_of(cfg.k_ratio, synthetic.k_bar)
    rows, traces = [], []
    for seed in _progress(seeds, progress, "sparse_iht stochastic"):
        truth = synthetic_instance(synthetic, setting, seed)
        problem = LeastSquares(truth.X, truth.y)
        gamma = constraint_for(setting.kind, setting.scale, truth.w_true)
        reference = problem.value(truth.w_true)
        hsg = alg.hsg_ht_2sp(problem, k, gamma, b0=cfg.b0, tau=cfg.tau,
                             extra_full_steps=cfg.extra_full_steps,
                             rng=np.random.default_rng(seed))
        full = alg.iht_2sp(problem, k, gamma, synthetic.iterations)
        # IHT-2SP's objective after the same number of sample gradients as HSG spent
        budget = hsg.cost[-1]
        t_equal = int(np.searchsorted(full.cost, budget, side="right") - 1)
        if full.cost[-1] < budget:
            raise ValueError(f"HSG-HT-2SP spent {budget:.0f} sample gradients, more than "
                             f"IHT-2SP's {full.cost[-1]:.0f}: raise synthetic.iterations")
        at_equal = float(full.objective[t_equal])
        rows.append({"seed": seed, "k": k, "hsg_objective": hsg.final, "hsg_ifo": budget,
                     "hsg_steps": hsg.objective.size - 1, "hsg_max_violation": hsg.max_violation,
                     "iht_equal_ifo_objective": at_equal, "iht_equal_ifo_steps": t_equal,
                     "iht_full_objective": full.final, "iht_full_ifo": full.cost[-1],
                     "reference": reference,
                     "rel_vs_equal_ifo": (hsg.final - at_equal) / at_equal,
                     "rel_vs_full": (hsg.final - full.final) / full.final,
                     "ifo_ratio": budget / full.cost[-1]})
        for method, run in (("hsg_ht_2sp", hsg), ("iht_2sp", full)):
            traces.append(pd.DataFrame({"seed": seed, "method": method, "ifo": run.cost,
                                        "objective": run.objective,
                                        "gap": (run.objective - reference) / reference}))
    return pd.DataFrame(rows), pd.concat(traces, ignore_index=True)


def run_zeroth_order(cfg: ZerothOrderParams, seeds: list[int],
                     progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HZO-HT-2SP (growing q_t) against SZOHT (fixed q), with first-order IHT-2SP as the oracle.

    Two excess measures per iterate: over the first-order IHT-2SP objective (the plotted one),
    and over the best point on the iterate's own support within Γ (the optimisation error with
    the support choice factored out). SZOHT uses one step for every q (``szoht_step_scale / L``,
    by default the first-order ``1/L``), so q is the only difference between its runs.
    """
    rows, traces = [], []
    s2 = cfg.s2 or cfg.d
    for seed in _progress(seeds, progress, "sparse_iht zeroth order"):
        truth = make_sparse_regression(cfg.n, cfg.d, cfg.k_bar, cfg.rho, cfg.sigma, seed)
        problem = LeastSquares(truth.X, truth.y)
        gamma = constraint_for(cfg.constraint, 1.0, truth.w_true)
        fo = alg.iht_2sp(problem, cfg.k, gamma, cfg.fo_iterations)

        def support_excess(w: np.ndarray, problem=problem, gamma=gamma) -> float:
            best = best_on_support(problem, np.flatnonzero(w), gamma)
            return (problem.value(w) - best) / best

        rng = np.random.default_rng(seed)
        runs = {"hzo_ht_2sp": alg.hzo_ht_2sp(
            problem, cfg.k, gamma, q0=cfg.q0, rho_q=cfg.rho_q, iterations=cfg.iterations,
            s2=s2, mu=cfg.mu, rng=rng, q_max=cfg.q_max, monitor=support_excess,
            monitor_every=cfg.eval_every)}
        eta = (cfg.szoht_step_scale / problem.L if cfg.szoht_step_scale is not None
               else alg.zo_step(min(cfg.szoht_q), cfg.d, problem.L))
        for q in cfg.szoht_q:
            runs[f"szoht_q{q}"] = alg.szoht(
                problem, cfg.k, gamma, q=q, iterations=cfg.szoht_iterations, s2=s2, mu=cfg.mu,
                eta=eta, rng=np.random.default_rng([seed, q]), monitor=support_excess,
                monitor_every=cfg.eval_every)
        for method, run in runs.items():
            excess = (run.objective - fo.final) / fo.final
            watched = np.array(run.extra["monitor"], dtype=float).reshape(-1, 2)
            tail = watched[watched[:, 0] > (1 - cfg.plateau_fraction) * (run.objective.size - 1)]
            rows.append({"seed": seed, "method": method, "objective": run.final,
                         "fo_objective": fo.final, "excess_final": float(excess[-1]),
                         "excess_tail": float(np.mean(excess[-max(1, int(
                             cfg.plateau_fraction * excess.size)):])),
                         "support_excess_final": support_excess(run.extra["feasible_w"]),
                         "support_excess_tail": float(np.mean(tail[:, 1])),
                         "queries": float(run.cost[-1]),
                         "max_violation": run.max_violation,
                         "recall": support_recall_precision(run.w, truth.support)[0]})
            every = max(1, (run.objective.size - 1) // 400)  # at most ~400 points per curve
            idx = np.arange(0, run.objective.size, every)
            traces.append(pd.DataFrame({"seed": seed, "method": method, "iteration": idx,
                                        "queries": run.cost[idx], "excess": excess[idx]}))
            traces.append(pd.DataFrame({"seed": seed, "method": f"{method}:support_excess",
                                        "iteration": watched[:, 0].astype(int),
                                        "queries": run.cost[watched[:, 0].astype(int)],
                                        "excess": watched[:, 1]}))
    return pd.DataFrame(rows), pd.concat(traces, ignore_index=True)


def run_real_data(cfg: RealDataParams, seeds: list[int], progress: bool = True) -> pd.DataFrame:
    """The real data on every seed's 70/30 split: breast cancer (logistic, ℓ2 ball) and diabetes
    (least squares, non-negative budget)."""
    rows = []
    for seed in _progress(seeds, progress, "sparse_iht real data"):
        bc = cfg.breast_cancer
        rows += breast_cancer_experiment(bc.ks, bc.radius, bc.iterations, seed, bc.n_c)
        db = cfg.diabetes
        rows += diabetes_experiment(db.ks, db.budget_fraction, db.iterations, seed)
    return pd.DataFrame(rows)


def run_index_tracking(cfg: IndexTrackingParams, seeds: list[int],
                       progress: bool = True) -> pd.DataFrame:
    """Index tracking on one generated factor-model market per seed (dataset ``synthetic``)."""
    m = cfg.synthetic
    rows = []
    for seed in _progress(seeds, progress, "sparse_iht index tracking"):
        data = tracking.synthetic_market(m.assets, m.factors, m.train, m.test, m.index_noise,
                                         seed, m.periods_per_year)
        rows += tracking.tracking_experiment(data, cfg.ks, cfg.budget, cfg.iterations,
                                             cfg.dense_iterations, cfg.lasso_alphas, seed=seed)
    return pd.DataFrame(rows)


def run_index_real(cfg: IndexTrackingParams, progress: bool = True) -> pd.DataFrame:
    """Index tracking on real prices, one instance per index (deterministic: no seed)."""
    real = cfg.real
    if real is None:
        return pd.DataFrame()
    prices = tracking.load_prices(real.path)
    source = real.path or "matplotlib's Stocks.csv"
    rows = []
    for index in _progress(real.indices, progress, "sparse_iht index tracking (real)"):
        data = tracking.price_returns(prices, real.assets, index.column, real.train, real.test,
                                      real.frequency, real.periods_per_year, name=index.name,
                                      source=source)
        rows += tracking.tracking_experiment(data, real.ks, cfg.budget, cfg.iterations,
                                             cfg.dense_iterations, cfg.lasso_alphas)
    frame = pd.DataFrame(rows)
    frame["seed"] = -1  # one deterministic instance: not a seed
    return frame
