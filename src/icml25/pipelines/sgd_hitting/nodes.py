"""Kedro nodes of the sgd_hitting pipeline: thin wrappers around the method modules.

Each node validates ``params:sgd_hitting`` into :class:`SgdHittingParams` and does one step of
the pipeline: critical points → transition costs (HJ / gMAM) → energies and
competing predictions (W-graphs) → Monte-Carlo and exact hitting times → scaling fits →
metrics, claims and figures.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.core.workers import resolve_workers
from icml25.pipelines.sgd_hitting.params import SgdHittingParams
from icml25.pipelines.sgd_hitting.predictions import VARIANTS, cost_matrix, predict

mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
xp = lazy_module("icml25.pipelines.sgd_hitting.experiments")
mc = lazy_module("icml25.pipelines.sgd_hitting.monte_carlo")

logger = logging.getLogger(__name__)
PIPELINE = "sgd_hitting"
ROLES = {v: ("method" if v == "w_graph" else "baseline") for v in VARIANTS}


def _params(params: dict[str, Any]) -> SgdHittingParams:
    return validate_parameters(SgdHittingParams, params, PIPELINE)


def _check_table(frame: pd.DataFrame, name: str, columns: list[str]) -> None:
    if frame is None or len(frame) == 0:
        raise ValueError(f"{name}: empty table")
    missing = sorted(set(columns) - set(frame.columns))
    if missing:
        raise ValueError(f"{name}: missing columns {missing}")
    numeric = frame[[c for c in columns if frame[c].dtype.kind in "fi"]]
    if numeric.isna().any().any() and name != "critical_points":
        raise ValueError(f"{name}: NaN values in {numeric.columns[numeric.isna().any()].tolist()}")


# ------------------------------------------------------------------------------ theory
def resolve_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """The validated parameter tree with every default filled in (``config.json``).

    The later nodes read it instead of ``params:sgd_hitting``: the run's configuration is saved
    next to its outputs, and the parameters are logged to MLflow once, not once per node.
    """
    return _params(params).model_dump(mode="json")


def find_critical_points(params: dict[str, Any]) -> pd.DataFrame:
    """Critical points of every landscape (grid + Newton/Brent), classified by the Hessian."""
    from icml25.core.device import set_threads
    p = _params(params)
    set_threads(p.num_threads)
    return xp.critical_points_table(p)


def compute_costs(critical_points: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Ṽ between adjacent minima for each (landscape, noise) an experiment uses: the exact
    law (HJ in 1-D, gMAM in 2-D) and its Gaussian approximation; with the gMAM paths."""
    from icml25.core.device import set_threads
    p = _params(params)
    set_threads(p.num_threads)
    _check_table(critical_points, "critical_points", ["landscape", "id", "x", "f", "kind"])
    out: dict[str, Any] = {}
    names = list(p.experiments)
    for name in tqdm(names, desc="sgd_hitting costs", disable=not p.progress, leave=False):
        r = xp.resolve(p, name, critical_points)
        key = xp.noise_key(p.experiments[name].landscape, r.noise)
        if key in out:
            continue
        t0 = time.perf_counter()
        costs, paths = cost_matrix(r.landscape, r.graph, r.noise, False, p.gmam.model_dump())
        if r.noise.kind == "gaussian":  # constant covariance: the approximation is exact
            gauss = costs
        else:
            gauss, _ = cost_matrix(r.landscape, r.graph, r.noise, True, p.gmam.model_dump())
        out[key] = {"landscape": p.experiments[name].landscape, "noise": r.noise.name,
                    "scale": list(r.noise.scale), "minima": [list(m.x) for m in r.graph.minima],
                    "minima_f": [m.f for m in r.graph.minima], "targets": r.graph.targets,
                    "pairs": [[i, j, list(s.x)] for i, j, s in r.graph.pairs],
                    "costs": costs.tolist(), "costs_gaussian": gauss.tolist(), "paths": paths,
                    "seconds": time.perf_counter() - t0}
        logger.info("sgd_hitting costs %s: %s", key, np.round(costs, 5).tolist())
    return xp.jsonable(out)


def _matrix(values: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.inf if v is None else float(v) for v in row] for row in values])


def compute_energies(cost_matrices: dict[str, Any], critical_points: pd.DataFrame,
                     params: dict[str, Any]) -> dict[str, Any]:
    """E by W-graph, the finite-chain cross-check and the predictions B1–B5 per experiment."""
    p = _params(params)
    out = {}
    for name, e in p.experiments.items():
        r = xp.resolve(p, name, critical_points)
        entry = cost_matrices.get(xp.noise_key(e.landscape, r.noise))
        if entry is None:
            raise ValueError(f"cost_matrices: no costs for experiment {name!r}")
        pred = predict(r.landscape, r.graph, _matrix(entry["costs"]),
                       _matrix(entry["costs_gaussian"]), r.start_idx, r.noise, p.markov_eps)
        pred["start"] = r.x0.tolist()
        pred["target"] = {"kind": r.target.kind, "center": list(r.target.center),
                          "centers": [list(c) for c in r.target.centers],
                          "radius": r.target.radius, "threshold": r.target.threshold,
                          "threshold_low": r.target.threshold_low}
        out[name] = pred
        logger.info("sgd_hitting %s: E = %.5f (finite chain %.5f), gaussian %.5f, first "
                    "barrier %.5f", name, pred["w_graph"], pred["markov_chain_energy"],
                    pred["gaussian_approx"], pred["first_barrier"])
    return xp.jsonable(out)


# ------------------------------------------------------------------------------ solvers
def _mc_job(params: dict[str, Any], critical_points: pd.DataFrame, name: str, seed: int,
            k: int) -> pd.DataFrame:
    """One (experiment, seed, η) Monte-Carlo run; a module-level function so that worker
    processes can run it (they rebuild the landscape from the parameters)."""
    from icml25.core.device import seed_everything, set_threads
    p = _params(params)
    set_threads(p.num_threads)
    e = p.experiments[name]
    r = xp.resolve(p, name, critical_points)
    index = list(p.experiments).index(name)
    eta = e.etas[k]
    seed_everything(seed)
    sample = mc.simulate_hitting_times(
        r.landscape, r.noise, eta, tuple(r.x0), r.target, e.n_chains,
        xp.run_seed(seed, index, k), e.max_steps, e.stop_fraction, p.block, p.backend, p.device,
        curvature=xp.max_curvature(r))
    logger.info("sgd_hitting MC %s seed %d η=%g: %d/%d hit by %d, mean %.4g, %.3g "
                "chain-steps/s", name, seed, eta, sample.n_hits, e.n_chains, sample.stop,
                mc.censored_mean(sample.tau, sample.censored),
                sample.chain_steps / max(sample.seconds, 1e-9))
    return pd.DataFrame({
        "experiment": name, "seed": seed, "eta": eta, "chain": np.arange(e.n_chains),
        "tau": sample.tau, "censored": sample.censored, "diverged": sample.diverged,
        "stop": sample.stop, "chain_steps": sample.chain_steps, "seconds": sample.seconds})


MC_COLUMNS = ["experiment", "seed", "eta", "chain", "tau", "censored", "diverged", "stop",
              "chain_steps", "seconds"]


def simulate_hitting_times(critical_points: pd.DataFrame, params: dict[str, Any],
                           shard: int = 0, n_shards: int = 1) -> pd.DataFrame:
    """Many SGD chains per (experiment, seed, η) for the seeds of shard ``shard`` of
    ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`):
    hitting times with censoring flags; an empty table when the shard has no seed.

    Runs are independent (own seed stream each, :func:`experiments.run_seed`), so ``n_workers``
    processes may share them and the seed shards may run anywhere; results do not depend on the
    number of workers or shards.
    """
    p = _params(params)
    _check_table(critical_points, "critical_points", ["landscape", "id", "x", "f", "kind"])
    names = [n for n, e in p.experiments.items() if e.solver == "mc"]
    seeds = shard_seeds(p.seeds, shard, n_shards)
    order = [(n, s, k) for n in names for s in seeds for k in range(len(p.experiments[n].etas))]
    # in a daemonic process (a Dask worker) one process; there the cluster runs the seed
    # shards side by side instead, and the results are the same either way
    workers = resolve_workers(p.n_workers, len(order), key="sgd_hitting.n_workers")
    # longest runs (smallest η) first so that workers finish together
    jobs = sorted(order, key=lambda j: p.experiments[j[0]].etas[j[2]] * (1 if workers > 1 else 0))
    bar = tqdm(total=len(jobs), desc=f"sgd_hitting Monte Carlo (seed shard {shard})",
               disable=not p.progress)
    results: dict[tuple[str, int, int], pd.DataFrame] = {}
    if workers > 1 and len(jobs) > 1:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_mc_job, dict(params), critical_points, *job): job
                       for job in jobs}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.set_postfix(experiment=futures[future][0])
                bar.update()
    else:
        for job in jobs:
            bar.set_postfix(experiment=job[0], seed=job[1], eta=p.experiments[job[0]].etas[job[2]])
            results[job] = _mc_job(dict(params), critical_points, *job)
            bar.update()
    bar.close()
    if not results:
        return pd.DataFrame(columns=MC_COLUMNS)
    return pd.concat([results[j] for j in order], ignore_index=True)


def merge_hitting_times(params: dict[str, Any], *shards: pd.DataFrame) -> pd.DataFrame:
    """The Monte-Carlo table of every seed shard in the order one loop writes it: experiment by
    experiment, seed-list order within an experiment (shard ``k`` of ``n`` holds ``seeds[k::n]``,
    :func:`icml25.core.sweep.interleave_frames`), η order within a seed."""
    p = _params(params)
    names = [n for n, e in p.experiments.items() if e.solver == "mc"]
    frames = [f for f in shards if f is not None and not f.empty]
    if not names:
        return pd.DataFrame(columns=MC_COLUMNS)
    for frame in frames:
        _check_table(frame, "a seed shard of mc_hitting_times", ["experiment", "seed"])
    stray = sorted({e for f in frames for e in f["experiment"]} - set(names))
    if stray:
        raise ValueError(f"sgd_hitting: Monte-Carlo shards hold experiments {stray} that are no "
                         f"Monte-Carlo experiment of the parameters; re-run the seed shards")
    pieces: list[pd.DataFrame] = []
    for name in names:
        pieces += interleave_frames(
            [None if f is None or f.empty else f[f["experiment"] == name] for f in shards],
            p.seeds, where=f"sgd_hitting: the seed shards' {name!r} chains",
            seeds_from="params:sgd_hitting.seeds")
    return pd.concat(pieces, ignore_index=True)


def exact_hitting_times(critical_points: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Exact E τ (and medians) of 1-D SGD on a grid, per (experiment, η)."""
    from icml25.core.device import set_threads
    p = _params(params)
    set_threads(p.num_threads)
    rows = []
    names = [n for n, e in p.experiments.items() if e.solver == "exact"]
    for name in tqdm(names, desc="sgd_hitting exact solver", disable=not p.progress):
        r = xp.resolve(p, name, critical_points)
        rows += xp.run_exact(r, p.experiments[name])
    return pd.DataFrame(rows, columns=["experiment", "eta", "mean", "median", "n_states", "h",
                                       "trusted", "condition", "residual", "status"])


# --------------------------------------------------------------------------------- fits
def fit_scaling(mc_hitting_times: pd.DataFrame, exact_hitting_times: pd.DataFrame,
                energies: dict[str, Any], critical_points: pd.DataFrame,
                params: dict[str, Any]) -> dict[str, Any]:
    """Slopes of log(ητ) and log τ against 1/η, R², local and median slopes, bootstrap CIs,
    KS distances, Kramers ratios; throughput of the simulator."""
    p = _params(params)
    if any(e.solver == "mc" for e in p.experiments.values()):
        _check_table(mc_hitting_times, "mc_hitting_times",
                     ["experiment", "seed", "eta", "tau", "censored"])
    if any(e.solver == "exact" for e in p.experiments.values()):
        _check_table(exact_hitting_times, "exact_hitting_times",
                     ["experiment", "eta", "trusted"])
        # an untrusted solve may have no mean (NaN: float64 could not resolve it); a trusted one
        # must have one
        trusted = exact_hitting_times[exact_hitting_times["trusted"].astype(bool)]
        if len(trusted):
            _check_table(trusted, "exact_hitting_times (trusted rows)",
                         ["experiment", "eta", "mean"])
    _check_table(critical_points, "critical_points", ["landscape", "id", "x", "f", "kind"])
    out: dict[str, Any] = {}
    for name, e in p.experiments.items():
        r = xp.resolve(p, name, critical_points)
        pred = energies[name]
        if e.solver == "mc":
            rows = mc_hitting_times[mc_hitting_times["experiment"] == name]
            _check_table(rows, f"mc_hitting_times[{name}]", ["eta", "tau", "seed"])
            fits = []
            for seed in p.seeds:
                g = rows[rows["seed"] == seed]
                if g.empty:
                    raise ValueError(f"mc_hitting_times: no chains for {name!r}, seed {seed}")
                fit = xp.fit_mc(g, r, e, p.n_boot, np.random.default_rng(seed))
                small = int(np.argmin(fit["etas"]))
                fit["kramers_ratio"] = xp.kramers_ratio(
                    r, _with_inf(pred), fit["etas"][small], fit["means"][small])
                fit["seed"] = seed
                fits.append(fit)
            steps = rows.groupby(["seed", "eta"])[["chain_steps", "seconds"]].first().sum()
            out[name] = {"solver": "mc", "fits": fits,
                         "chain_steps": int(steps["chain_steps"]),
                         "seconds": float(steps["seconds"]),
                         "chain_steps_per_second": float(steps["chain_steps"] /
                                                         max(steps["seconds"], 1e-9))}
        else:
            rows = exact_hitting_times[exact_hitting_times["experiment"] == name]
            if rows.empty:
                raise ValueError(f"exact_hitting_times: no rows for {name!r}")
            fit = xp.fit_exact(rows)
            small = int(np.argmin(fit["etas"]))
            fit["kramers_ratio"] = xp.kramers_ratio(r, _with_inf(pred), fit["etas"][small],
                                                    fit["means"][small])
            out[name] = {"solver": "exact", "fits": [fit]}
    return xp.jsonable(out)


def _with_inf(pred: dict[str, Any]) -> dict[str, Any]:
    return {k: (math.nan if v is None and k in VARIANTS else v) for k, v in pred.items()}


# -------------------------------------------------------------------------------- claims
def _num(v: Any) -> float:
    return math.nan if v is None else float(v)


def collect_metrics(scaling_fits: dict[str, Any], energies: dict[str, Any],
                    p: SgdHittingParams) -> dict[str, dict[str, Any]]:
    """Per variant the same metric names (per-seed lists for Monte-Carlo quantities)."""
    metrics: dict[str, dict[str, Any]] = {v: {} for v in VARIANTS}
    for name, e in p.experiments.items():
        fits = [{k: (_num(v) if not isinstance(v, list) else v) for k, v in f.items()}
                for f in scaling_fits[name]["fits"]]
        pred = _with_inf(energies[name])
        kr = [_num(f.get("kramers_ratio")) for f in fits]
        for v, values in xp.experiment_metrics(name, fits, pred, e, kr).items():
            metrics[v].update(values)
    d = p.derived

    def slopes(name: str) -> np.ndarray:
        e = p.experiments[name]
        return np.array([_num(f[e.compare]) for f in scaling_fits[name]["fits"]])

    derived: dict[str, Any] = {}
    mc_names = [n for n, e in p.experiments.items() if e.solver == "mc"]
    if mc_names:  # chains that overflowed (never counted as hits), per seed over every MC run
        derived["mc.diverged_chains"] = np.sum(
            [[_num(f.get("diverged_total", 0)) for f in scaling_fits[n]["fits"]]
             for n in mc_names], axis=0).tolist()
    for a, b in zip(d.noise_order, d.noise_order[1:], strict=False):
        derived[f"order.{b}_minus_{a}"] = (slopes(b) - slopes(a)).tolist()
    for key, pair in (("batch_ratio", d.batch_ratio), ("batch_ratio_exact", d.batch_ratio_exact)):
        if pair:
            derived[f"{key}.measured"] = (slopes(pair[1]) / slopes(pair[0])).tolist()
            derived[f"{key}.predicted"] = (_num(energies[pair[1]]["w_graph"])
                                           / _num(energies[pair[0]]["w_graph"]))
    if d.no_spurious:
        flat, ref = d.no_spurious
        derived["no_spurious.abs_slope_over_reference_E"] = (
            np.abs(slopes(flat)) / _num(energies[ref]["w_graph"])).tolist()
        derived["no_spurious.E"] = _num(energies[flat]["w_graph"])
    for name in d.bounded_depth:
        h = _num(energies[name]["depth_bound_h"])
        derived[f"{name}.depth_bound_h"] = h
        derived[f"{name}.slope_over_h"] = (slopes(name) / h).tolist()
        derived[f"{name}.E_over_h"] = _num(energies[name]["w_graph"]) / h
    for v in VARIANTS:
        metrics[v].update(derived)
    return metrics


def judge_claims(scaling_fits: dict[str, Any], energies: dict[str, Any],
                 params: dict[str, Any], run_info: dict[str, Any],
                 confidence: float = 0.90) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own fits; MLflow child runs. Claims
    are judged at the level ``confidence`` (``params:claims_confidence``): Monte-Carlo metrics
    per seed of ``seeds`` (every prediction variant carries the same fits), exact-solver
    metrics as one deterministic number."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    metrics = collect_metrics(scaling_fits, energies, p)
    throughput = {n: {k: f[k] for k in ("chain_steps", "seconds", "chain_steps_per_second")}
                  for n, f in scaling_fits.items() if f["solver"] == "mc"}
    total_steps = sum(t["chain_steps"] for t in throughput.values())
    total_sec = sum(t["seconds"] for t in throughput.values())
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], metrics, run_info,
                           p.seeds, title="Global convergence time of SGD (ICML 2025)",
                           figures=[f"figures/{n}.png" for n in p.figures],
                           confidence=confidence, seeds_of={v: list(p.seeds) for v in metrics})
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra={
        "energies": energies, "throughput": throughput,
        "chain_steps_per_second": total_steps / total_sec if total_sec else None,
        "backend": p.backend, "device": p.device})
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        log_variants(PIPELINE, means, ROLES, params_by_variant={
            v: {"prediction": v, "noise_laws": "exact" if v != "gaussian_approx"
                else "gaussian, same variance"} for v in VARIANTS})
        log_claim_counts(claims, chain_steps_per_second=report["chain_steps_per_second"] or math.nan)
    return report, claims


def make_plots(critical_points: pd.DataFrame, cost_matrices: dict[str, Any],
               energies: dict[str, Any], scaling_fits: dict[str, Any],
               mc_hitting_times: pd.DataFrame, params: dict[str, Any],
               metrics: dict[str, Any]) -> dict[str, Any]:
    """Figures: landscapes with minima, saddles and gMAM paths; log(ητ) against 1/η with the
    theory and competing lines; τ/mean histograms against Exp(1); slope by noise law and by
    batch size. ``metrics`` only orders this node after the claims."""
    from icml25.pipelines.sgd_hitting.plots import build_figures

    p = _params(params)
    figures = build_figures(p, critical_points, cost_matrices, energies, scaling_fits,
                            mc_hitting_times)
    return {f"{k}.png": v for k, v in figures.items() if k in p.figures}
