"""Kedro nodes of the distributed_estimation pipeline: thin wrappers around the method modules.

Each node validates ``params:distributed_estimation`` into :class:`DistributedEstimationParams`,
does one step of the pipeline and returns plain tables or dicts.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.pipelines.distributed_estimation import theory
from icml25.pipelines.distributed_estimation.functions import TrueModel, base_function, make_model
from icml25.pipelines.distributed_estimation.params import DistributedEstimationParams
from icml25.pipelines.distributed_estimation.simulator import Point, simulate_sweep

mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
analysis = lazy_module("icml25.pipelines.distributed_estimation.analysis")

logger = logging.getLogger(__name__)
PIPELINE = "distributed_estimation"
TITLE = "Distributed nonparametric estimation: from sparse to dense samples per terminal"
ROLES = {"layered": "method", "centralised": "baseline", "forward": "baseline",
         "hash1bit": "baseline", "localquant": "baseline", "bf": "ablation",
         "bf_recursive": "ablation", "at": "ablation", "at_noninteractive": "ablation",
         "layered_theory_k": "ablation", "envelope": "ablation"}
#: MLflow child runs compare the protocols on the density sweeps, where every one of them runs
#: (FULL, a sub-protocol of the layered scheme, applies only at a few points; see metrics.json).
COMPARED_ROLES = ("n_sweep", "m_sweep", "l_sweep")


def _params(params: dict[str, Any]) -> DistributedEstimationParams:
    return validate_parameters(DistributedEstimationParams, params, PIPELINE)


def _points(sweep) -> list[Point]:
    return [Point(m, n, l) for l in sweep.l for m in sweep.m for n in sweep.n]  # noqa: E741


# --------------------------------------------------------------------------------- functions
def make_functions(params: dict[str, Any]) -> pd.DataFrame:
    """The true functions on the fine grid, one block per (function, model) the sweeps use."""
    p = _params(params)
    frames = []
    for fname, model in sorted({(s.function, s.model) for s in p.sweeps.values()}):
        fp = p.functions[fname]
        g = base_function(fp.kind, fp.s, c=fp.c, levels=fp.levels, seed=fp.seed,
                          ref=fp.callable, key=f"{PIPELINE}.functions.{fname}")
        tm = make_model(model, g, clip_z=p.sim.clip_z, spec=p.models[model].spec())
        frames.append(pd.DataFrame({
            "function": fname, "model": model, "s": fp.s, "cell": np.arange(tm.f.size),
            "f": tm.f, "sigma": tm.sigma if tm.sigma is not None else np.nan,
            "lo": tm.lo, "hi": tm.hi, "noise": tm.noise, "law": tm.law or ""}))
        logger.info("%s: %s/%s on %d cells, range [%.3f, %.3f]", PIPELINE, fname, model,
                    tm.f.size, tm.f.min(), tm.f.max())
    return pd.concat(frames, ignore_index=True)


def models_from_table(table: pd.DataFrame) -> dict[tuple[str, str], TrueModel]:
    """Rebuild the :class:`TrueModel` objects from the ``true_functions`` table."""
    if table.empty:
        raise ValueError("true_functions is empty")
    out = {}
    for (fname, model), g in table.groupby(["function", "model"], sort=False):
        g = g.sort_values("cell")
        f = g["f"].to_numpy(float)
        if not np.all(np.isfinite(f)):
            raise ValueError(f"true_functions {fname}/{model}: f contains NaN or inf")
        noise = str(g["noise"].iloc[0]) if "noise" in g else ""
        if (noise or model) == "density" and f.min() <= 0:
            raise ValueError(f"true_functions {fname}: a density must stay above 0")
        sigma = g["sigma"].to_numpy(float)
        law = str(g["law"].iloc[0]) if "law" in g and g["law"].iloc[0] else None
        out[(fname, model)] = TrueModel(model, f, None if np.isnan(sigma).all() else sigma,
                                        float(g["lo"].iloc[0]), float(g["hi"].iloc[0]),
                                        noise=noise, law=law)
    return out


def _smoothness(table: pd.DataFrame, fname: str) -> float:
    return float(table.loc[table["function"] == fname, "s"].iloc[0])


# ------------------------------------------------------------------------------------ theory
def theory_grid(true_functions: pd.DataFrame, params: dict[str, Any],
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """R_th, its minimising K and regime at every sweep point; the closed-form boundaries."""
    p = _params(params)
    models = models_from_table(true_functions)
    k_grid = p.grid.k_grid
    rows, bounds = [], []
    for name, sweep in p.sweeps.items():
        tm = models[(sweep.function, sweep.model)]
        s = theory.check_smoothness(_smoothness(true_functions, sweep.function))
        bias = {k: tm.bias(k) for k in k_grid}
        for pt in _points(sweep):
            th = theory.theory_rate(bias.__getitem__, k_grid, pt.m, pt.n, pt.l,
                                    regression=tm.is_regression, scale=tm.scale, c_v=p.grid.c_v,
                                    medium_log=p.grid.medium_log,
                                    uninformed=tm.uninformed_ise())
            rows.append({"sweep": name, "model": sweep.model, "function": sweep.function,
                         "m": pt.m, "n": pt.n, "l": pt.l, "s": s, **th,
                         "bias_k_th": bias[th["k_th"]],
                         "closed_regime": theory.closed_form_regime(pt.m, pt.n, pt.l, s),
                         "closed_rate": theory.closed_form_rate(pt.m, pt.n, pt.l, s)})
        for m in sweep.m:
            for l_bits in sweep.l:
                exact = theory.rth_boundaries(
                    bias.__getitem__, k_grid, m, l_bits, max(sweep.n), tm.is_regression,
                    tm.scale, p.grid.c_v, p.grid.medium_log)
                bounds.append({"sweep": name, "axis": sweep.axis, "m": m, "l": l_bits, "s": s,
                               **theory.boundaries(m, l_bits, s), **exact})
    return pd.DataFrame(rows), pd.DataFrame(bounds)


# -------------------------------------------------------------------------------- simulation
def simulate_protocols(true_functions: pd.DataFrame, params: dict[str, Any], shard: int = 0,
                       n_shards: int = 1) -> pd.DataFrame:
    """Every protocol at every sweep point and K of the grid, for the repetitions (seeds) of
    shard ``shard`` of ``n_shards`` of each sweep (``seeds_of(sweep)[shard::n_shards]``,
    :func:`icml25.core.sweep.shard_seeds`). A run draws from a generator of its own
    (base seed, repetition, protocol, point, K), so its row does not depend on the shard; a sweep
    without a repetition in this shard adds no row, a shard without any an empty table."""
    p = _params(params)
    models = models_from_table(true_functions)
    frames = []
    for name, sweep in p.sweeps.items():
        reps = shard_seeds(p.seeds_of(name), shard, n_shards)
        if not reps:
            continue
        frame = simulate_sweep(
            name, models[(sweep.function, sweep.model)], _points(sweep), p.grid.k_grid,
            sweep.protocols, reps, p.sim.base_seed,
            width_factor=p.sim.width_factor, quant_bits=p.sim.quant_bits,
            min_total_samples=p.sim.min_total_samples, progress=p.progress)
        frames.append(frame)
        logger.info("%s: sweep %s, seed shard %d of %d done (%d runs, %.1f s of protocol time)",
                    PIPELINE, name, shard, n_shards, len(frame), frame["seconds"].sum())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def merge_simulations(params: dict[str, Any], *shards: pd.DataFrame) -> pd.DataFrame:
    """Every seed shard's rows in the order one loop writes them: sweep by sweep, then point and
    K of the grid, then repetitions in seed-list order (shard ``k`` of ``n`` holds
    ``seeds[k::n]``, :func:`icml25.core.sweep.interleave_frames`), protocols as simulated."""
    p = _params(params)
    frames = [f for f in shards if f is not None and not f.empty]
    for frame in frames:
        _check_sim(frame)
    stray = sorted({s for f in frames for s in f["sweep"]} - set(p.sweeps))
    if stray:
        raise ValueError(f"{PIPELINE}: the seed shards hold sweeps {stray} that params:"
                         f"{PIPELINE}.sweeps does not define; re-run the seed shards")
    pieces = []
    for name, sweep in p.sweeps.items():
        by_rep = interleave_frames(
            [frame[frame["sweep"] == name] if frame is not None and not frame.empty else None
             for frame in shards], p.seeds_of(name), key="rep",
            where=f"{PIPELINE}: the seed shards' sweep {name!r} repetitions",
            seeds_from=f"the seed list of sweep {name!r}")
        rows = pd.concat(by_rep)
        jobs = {(pt.m, pt.n, pt.l, k): i for i, (pt, k) in enumerate(
            (pt, k) for pt in _points(sweep) for k in p.grid.k_grid)}
        try:
            order = [jobs[key] for key in zip(rows["m"], rows["n"], rows["l"], rows["K"],
                                              strict=True)]
        except KeyError as err:
            raise ValueError(f"{PIPELINE}: sweep {name!r} has rows at (m, n, l, K) = {err} that "
                             f"are no point of its grid; re-run the seed shards") from None
        pieces.append(rows.iloc[np.argsort(order, kind="stable")])
    return pd.concat(pieces, ignore_index=True)


# ---------------------------------------------------------------------------------- analysis
def summarise(sim_results: pd.DataFrame, theory_rates: pd.DataFrame, params: dict[str, Any],
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Oracle-K curves with bootstrap CIs and the slope table."""
    p = _params(params)
    _check_sim(sim_results)
    curves = analysis.oracle_curves(sim_results, theory_rates, seed=p.sim.base_seed)
    slopes = analysis.slope_table(curves, _sweep_dicts(p))
    return curves, slopes


def _check_sim(sim: pd.DataFrame) -> None:
    needed = {"sweep", "model", "protocol", "m", "n", "l", "K", "rep", "ise", "bits_max",
              "applicable"}
    missing = needed - set(sim.columns)
    if missing:
        raise ValueError(f"sim_results lacks columns {sorted(missing)}")
    if sim.empty:
        raise ValueError("sim_results is empty")
    bad = sim["applicable"] & ~np.isfinite(sim["ise"].astype(float))
    if bad.any():
        raise ValueError(f"sim_results has {int(bad.sum())} applicable runs with NaN/inf ISE")


def _sweep_dicts(p: DistributedEstimationParams) -> dict[str, dict]:
    return {name: sw.model_dump() for name, sw in p.sweeps.items()}


def _variant_metrics(curves: pd.DataFrame, sim: pd.DataFrame,
                     sweeps: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Per protocol, the same metric names: ISE and ratio at each point, bits used."""
    names = []
    for name, sw in sweeps.items():
        if sw["role"] not in COMPARED_ROLES:
            continue
        for r in curves[curves["sweep"] == name][["m", "n", "l"]].drop_duplicates().itertuples():
            names.append((name, r.m, r.n, r.l, f"{name}.{sw['axis']}{getattr(r, sw['axis'])}"))
    out: dict[str, dict[str, float]] = {}
    for protocol in ROLES:
        part = curves[curves["protocol"] == protocol].set_index(["sweep", "m", "n", "l"])
        metrics = {}
        for name, m, n, l_bits, label in names:
            key = (name, m, n, l_bits)
            found = key in part.index
            metrics[f"ise.{label}"] = float(part.loc[key, "ise"]) if found else math.nan
            metrics[f"ratio.{label}"] = float(part.loc[key, "ratio"]) if found else math.nan
        source = {"envelope": list(analysis.ENVELOPE_OF), "layered_theory_k": ["layered"]}
        used = sim[sim["protocol"].isin(source.get(protocol, [protocol])) & sim["applicable"]
                   & sim["bits_max"].notna()]
        metrics["bits_max_over_budget"] = (float((used["bits_max"] - used["l"]).max())
                                           if len(used) else math.nan)
        sent = used[used["l"] > 0]  # l = 0: nothing to use
        metrics["bits_used_fraction"] = (float((sent["bits_mean"] / sent["l"]).mean())
                                         if len(sent) else math.nan)
        out[protocol] = metrics
    return out


def evaluate(curves: pd.DataFrame, slope_table: pd.DataFrame, sim_results: pd.DataFrame,
             regime_boundaries: pd.DataFrame, params: dict[str, Any], run_info: dict[str, Any],
             confidence: float = 0.90) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from this run's own curves; MLflow child runs.

    Every claim is judged on its per-seed values (the claim metric recomputed on each
    repetition's own curve, at the oracle K of the mean curve), at the level ``confidence``
    (``params:claims_confidence``): a claim that holds on the seed-mean curve but fails on most
    seeds does not hold. The seed-mean-curve values stay in ``metrics.json`` under
    ``claim_metrics`` for the figures and tables."""
    from icml25.core.tracking import log_claim_counts, log_variants
    p = _params(params)
    sweeps = _sweep_dicts(p)
    claim_values = analysis.claim_metrics(curves, slope_table, sim_results, regime_boundaries,
                                          sweeps, advantage=p.sim.advantage,
                                          min_points=p.sim.min_slope_points)
    per_seed = []
    for r in range(len(p.seeds)):  # sweeps with fewer seeds (the phase plane) give NaN there
        one = analysis.per_seed_curves(curves, r)
        per_seed.append(analysis.claim_metrics(
            one, analysis.slope_table(one, sweeps), sim_results, regime_boundaries, sweeps,
            advantage=p.sim.advantage, min_points=p.sim.min_slope_points))
    spread = {k: [d[k] for d in per_seed] for k in claim_values}
    variants = _variant_metrics(curves, sim_results, sweeps)
    claims = claims_report(
        PIPELINE, [c.model_dump() for c in p.claims], {"layered": spread}, run_info,
        p.seeds, title=TITLE,
        figures=[f"figures/{n}.png" for n in (*_sweeps_of(p, "n_sweep"), "phase_diagram")],
        confidence=confidence, seeds_of={"layered": list(p.seeds)})
    slopes = slope_table.replace({np.nan: None}).to_dict(orient="records")
    report = metrics_report(PIPELINE, variants, run_info, p.seeds, extra={
        "claim_metrics": claim_values, "claim_metrics_per_seed": spread,
        "slopes": slopes, "boundaries": regime_boundaries.to_dict(orient="records"),
        "curves": curves.drop(columns=["ise_per_rep"]).replace({np.nan: None})
        .to_dict(orient="records")})
    if mlflow.active_run() is not None:
        log_variants(PIPELINE, variants, {v: ROLES[v] for v in variants},
                     params_by_variant={v: {"protocol": v, "k_grid": str(p.grid.k_grid)}
                                        for v in variants})
        log_claim_counts(claims, **{f"claim.{k}": v for k, v in claim_values.items()})
    return report, claims


def _sweeps_of(p: DistributedEstimationParams, role: str) -> list[str]:
    return [name for name, sw in p.sweeps.items() if sw.role == role]


def make_plots(curves: pd.DataFrame, theory_rates: pd.DataFrame, regime_boundaries: pd.DataFrame,
               true_functions: pd.DataFrame, params: dict[str, Any], metrics: dict[str, Any],
               ) -> dict[str, Any]:
    """Figures. ``metrics`` is taken so this node runs after the child runs."""
    from icml25.pipelines.distributed_estimation.plots import make_figures
    p = _params(params)
    models = models_from_table(true_functions)
    return make_figures(curves, theory_rates, regime_boundaries, models, _sweep_dicts(p),
                        p.grid.k_grid, p.grid.c_v, p.grid.medium_log)
