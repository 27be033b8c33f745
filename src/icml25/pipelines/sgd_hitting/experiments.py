"""One experiment = a landscape, a noise law, a start, U and a ladder of step sizes.

Plain functions (no Kedro) that resolve an experiment from its parameters and the computed
critical points, run the Monte-Carlo or exact solver over its step sizes, fit the scaling law
and turn everything into comparable metrics (measured slope, each variant's predicted
exponent, its relative error).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from icml25.pipelines.sgd_hitting import exact_solver as ex
from icml25.pipelines.sgd_hitting import monte_carlo as mc
from icml25.pipelines.sgd_hitting.critical_points import CriticalPoint, find_critical_points
from icml25.pipelines.sgd_hitting.landscapes import Landscape, Target, build_landscape
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw, noise_from_config
from icml25.pipelines.sgd_hitting.params import ExperimentParams, SgdHittingParams
from icml25.pipelines.sgd_hitting.predictions import (
    VARIANTS,
    MinimaGraph,
    eyring_kramers_time,
    minima_graph,
    start_and_target,
)
from icml25.pipelines.sgd_hitting.scaling_fits import bootstrap_slope, scaling_fit

logger = logging.getLogger(__name__)


@dataclass
class Resolved:
    name: str
    landscape: Landscape
    graph: MinimaGraph
    noise: NoiseLaw
    x0: np.ndarray
    start_idx: int
    target: Target


def landscape_of(p: SgdHittingParams, name: str) -> Landscape:
    cfg = p.landscapes[name]
    return build_landscape(cfg.kind, cfg.options, cfg.factory, f"landscapes.{name}")


def critical_points_table(p: SgdHittingParams) -> pd.DataFrame:
    """Critical points of every configured landscape (grid + root finding)."""
    rows = []
    for name in p.landscapes:
        land = landscape_of(p, name)
        for k, pt in enumerate(find_critical_points(land, 4001 if land.dim == 1 else 400)):
            rows.append({"landscape": name, "id": k, "x": pt.x[0],
                         "y": pt.x[1] if land.dim > 1 else math.nan, "f": pt.f,
                         "eig_min": min(pt.eig), "eig_max": max(pt.eig), "kind": pt.kind,
                         "dim": land.dim})
    table = pd.DataFrame(rows)
    if table.empty:
        raise ValueError("no critical points found in any landscape")
    return table


def points_from_table(table: pd.DataFrame, name: str, landscape: Landscape) -> \
        list[CriticalPoint]:
    rows = table[table["landscape"] == name].sort_values("id")
    if rows.empty:
        raise ValueError(f"critical_points: no rows for landscape {name!r}")
    pts = []
    for r in rows.itertuples():
        x = np.array([r.x] if landscape.dim == 1 else [r.x, r.y], float)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"critical_points: non-finite coordinates for {name!r}")
        eig = np.linalg.eigvalsh(landscape.hessian(x))
        pts.append(CriticalPoint(tuple(x), float(r.f), tuple(float(v) for v in eig),
                                 str(r.kind)))
    return pts


def noise_key(landscape: str, noise: NoiseLaw) -> str:
    return f"{landscape}|{noise.key}"


def resolve(p: SgdHittingParams, name: str, table: pd.DataFrame) -> Resolved:
    e = p.experiments[name]
    land = landscape_of(p, e.landscape)
    graph = minima_graph(land, points_from_table(table, e.landscape, land))
    x0, idx, target = start_and_target(land, graph, e.start, e.start_minimum,
                                       e.target.model_dump())
    noise = noise_from_config(e.noise.model_dump(), f"experiments.{name}.noise")
    return Resolved(name, land, graph, noise, x0, idx, target)


def max_curvature(r: Resolved) -> float:
    """The largest Hessian eigenvalue over the landscape's minima (η·λ < 2 is required)."""
    return max((max(m.eig) for m in r.graph.minima), default=0.0)


def run_seed(seed: int, experiment_index: int, eta_index: int) -> int:
    """Independent, reproducible stream per (seed, experiment, step size)."""
    return int(np.random.SeedSequence([seed, experiment_index, eta_index]).generate_state(1)[0])


# -------------------------------------------------------------------------------- solvers
def run_exact(r: Resolved, e: ExperimentParams) -> list[dict[str, Any]]:
    rows = []
    walls = e.walls if e.walls is not None else r.landscape.box[0]
    for eta in e.etas:
        h = ex.default_spacing(r.noise, eta, walls=walls) / e.grid_refine
        kernel = ex.build_kernel(r.landscape, r.noise, eta, r.target, h, e.walls,
                                 curvature=max_curvature(r))
        try:
            sol = ex.solve_hitting_time(kernel, float(r.x0[0]))
            status = "ok" if math.isfinite(sol.mean) else "unreachable"
        except ex.IllConditionedSolve as err:
            logger.warning("sgd_hitting %s at η = %g: %s; left out of the fits", r.name, eta, err)
            sol, status = ex.ExactSolution(math.nan, math.inf, math.nan, 0), "ill_conditioned"
        mean = sol.mean
        # float64 resolves E τ while the condition number ‖I-P‖·max u stays far below 1/ε
        trusted = bool(status == "ok" and 0 <= mean < ex.TRUST_LIMIT
                       and sol.condition < ex.CONDITION_LIMIT)
        median = math.nan
        if e.median and trusted:
            median = ex.median_hitting_time(kernel, float(r.x0[0]))
        rows.append({"experiment": r.name, "eta": eta, "mean": mean, "median": median,
                     "n_states": len(kernel.transient), "h": h, "trusted": trusted,
                     "condition": sol.condition, "residual": sol.residual, "status": status})
    return rows


# ---------------------------------------------------------------------------------- fits
def fit_mc(frame: pd.DataFrame, r: Resolved, e: ExperimentParams, n_boot: int,
           rng: np.random.Generator) -> dict[str, Any]:
    """Fits of one seed's Monte-Carlo sample (all step sizes of one experiment)."""
    samples, means, medians, ks, etas, hits, diverged = [], [], [], [], [], [], []
    for eta, g in frame.groupby("eta", sort=False):
        # diverged chains (non-finite states) are no hits and no censored times: left out
        bad = g["diverged"].to_numpy(bool) if "diverged" in g else np.zeros(len(g), bool)
        diverged.append(int(bad.sum()))
        g = g[~bad]
        if g.empty:
            raise ValueError(f"{r.name}: every chain diverged at η = {eta}")
        tau = g["tau"].to_numpy()
        cens = g["censored"].to_numpy(bool)
        m = mc.censored_mean(tau, cens)
        samples.append((float(eta), tau, cens))
        etas.append(float(eta))
        means.append(m)
        medians.append(mc.censored_median(tau, cens))
        ks.append(mc.ks_exponential(tau, cens, m))
        hits.append(float((~cens).mean()))
    fit = scaling_fit(etas, means, normalise=True)
    raw = scaling_fit(etas, means, normalise=False)
    med = scaling_fit(etas, medians, normalise=True)
    lo, hi = (bootstrap_slope(samples, mc.censored_mean, n_boot, rng) if n_boot
              else (math.nan, math.nan))
    return {
        "etas": etas, "means": means, "medians": medians, "ks": ks, "hit_fraction": hits,
        "diverged_chains": diverged, "diverged_total": int(sum(diverged)),
        "slope": fit["slope"], "slope_ci": [lo, hi], "r2": fit["r2"],
        "intercept": fit["intercept"], "local_slopes": fit["local_slopes"],
        "local_slope": fit["local_slope"], "slope_logtau": raw["slope"],
        "r2_logtau": raw["r2"], "median_slope": med["slope"],
        "ks_max": float(np.nanmax(ks)) if len(ks) else math.nan,
    }


def fit_exact(frame: pd.DataFrame) -> dict[str, Any]:
    frame = frame[frame["trusted"]]
    if len(frame) < 2:
        raise ValueError("exact solver: fewer than two trusted step sizes (E τ < 1e13)")
    etas, means, medians = (frame[c].tolist() for c in ("eta", "mean", "median"))
    fit = scaling_fit(etas, means)
    raw = scaling_fit(etas, means, normalise=False)
    med = scaling_fit(etas, medians) if np.all(np.isfinite(medians)) else \
        {"slope": math.nan, "local_slope": math.nan}
    return {"etas": etas, "means": means, "medians": medians, "slope": fit["slope"],
            "r2": fit["r2"], "intercept": fit["intercept"], "local_slopes": fit["local_slopes"],
            "local_slope": fit["local_slope"], "slope_logtau": raw["slope"],
            "r2_logtau": raw["r2"], "median_slope": med["slope"],
            "median_local_slope": med["local_slope"], "slope_ci": [math.nan, math.nan],
            "ks_max": math.nan, "diverged_total": 0,
            "max_condition": float(frame["condition"].max()) if "condition" in frame
            else math.nan}


def kramers_ratio(r: Resolved, pred: dict[str, Any], eta: float, mean: float) -> float:
    """Measured mean / Eyring–Kramers prediction at step size ``eta`` (NaN if not applicable)."""
    if pred.get("kramers_saddle") is None:
        return math.nan
    saddle = next(s for s in r.graph.saddles
                  if np.allclose(s.x, pred["kramers_saddle"], atol=1e-9))
    ek = eyring_kramers_time(r.landscape, r.graph.minima[r.start_idx], saddle,
                             pred["kramers_variance"], eta)
    return mean / ek


def anchor_deviation(fit: dict[str, Any], e: ExperimentParams) -> float:
    """|measured - reference| / (reference · tolerance): ≤ 2 means 'within twice the
    tolerance' (the project's reproduction criterion for design-time reference values)."""
    a = e.anchor
    if a is None:
        return math.nan
    if a.metric == "mean_at_eta":
        etas = np.asarray(fit["etas"])
        k = int(np.argmin(np.abs(etas - a.eta)))
        if abs(etas[k] - a.eta) > 1e-12:
            raise ValueError(f"anchor eta {a.eta} is not one of the step sizes {etas.tolist()}")
        measured = fit["means"][k]
    else:
        measured = fit[a.metric]
    return abs(measured - a.value) / (abs(a.value) * a.tolerance)


# ------------------------------------------------------------------------------- metrics
def experiment_metrics(name: str, fits: list[dict[str, Any]], pred: dict[str, Any],
                       e: ExperimentParams, kramers: list[float]) -> dict[str, dict[str, Any]]:
    """Per variant, the same metric names: the measured values (per seed) next to the
    variant's predicted exponent and its relative error."""
    measured = [f[e.compare] for f in fits]
    common = {
        f"{name}.measured_slope": measured,
        f"{name}.r2": [f["r2"] for f in fits],
        f"{name}.slope_logtau": [f["slope_logtau"] for f in fits],
        f"{name}.median_slope": [f["median_slope"] for f in fits],
        f"{name}.local_slope": [f["local_slope"] for f in fits],
        f"{name}.slope_ci_low": [_finite_or_nan(f["slope_ci"][0]) for f in fits],
        f"{name}.slope_ci_high": [_finite_or_nan(f["slope_ci"][1]) for f in fits],
        f"{name}.ks_max": [f["ks_max"] for f in fits],
        f"{name}.anchor_dev_over_tol": [anchor_deviation(f, e) for f in fits],
        f"{name}.diverged_chains": [float(f.get("diverged_total", 0)) for f in fits],
        f"{name}.max_condition": [_finite_or_nan(f.get("max_condition")) for f in fits],
    }
    out = {}
    for v in VARIANTS:
        value = pred[v]
        rel = [abs(value - m) / abs(m) if m and math.isfinite(value) else math.nan
               for m in measured]
        med_rel = [abs(value - f["median_slope"]) / abs(f["median_slope"])
                   if math.isfinite(f["median_slope"]) and math.isfinite(value) else math.nan
                   for f in fits]
        out[v] = {**common, f"{name}.predicted": value, f"{name}.rel_error": rel,
                  f"{name}.median_rel_error": med_rel,
                  f"{name}.kramers_ratio": kramers if v == "eyring_kramers"
                  else [math.nan] * len(fits)}
    return out


def _finite_or_nan(value: Any) -> float:
    return math.nan if value is None else float(value)


def jsonable(value: Any) -> Any:
    """JSON-safe copy (inf/NaN → None, numpy → Python)."""
    return json.loads(json.dumps(value, default=lambda o: o.tolist() if hasattr(o, "tolist")
                                 else str(o)).replace("NaN", "null")
                      .replace("-Infinity", "null").replace("Infinity", "null"))
