"""The compute-scaling study of wavetoken (pipeline ``wavetoken_scaling``).

Does WaveToken's advantage over uniform bins at the same vocabulary persist as training compute
grows, and where would each tokenizer cross seasonal naive? Each tokenizer of
``wavetoken.scaling.variants`` is pretrained at every budget of ``wavetoken.scaling.budgets``
(a width ``d_model``/``d_ff`` and a number of steps; depth, heads, batch, data and recipe are the
main run's) with every seed of ``wavetoken.scaling.seeds``, and forecasts the real test sets.

- **Compute** is measured, not estimated: :func:`train_step_flops` counts the floating-point
  operations of one training step (forward and backward of a batch) with torch's
  ``FlopCounterMode`` (matrix products and attention; embeddings and element-wise ops are not
  counted), and a run's training FLOPs are that times its steps.
- **Scores** are the main run's: WQL and MASE per dataset, relative to seasonal naive, aggregated
  by geometric mean (``agg_rel_wql_real``; :mod:`icml25.pipelines.wavetoken.evaluation`). A
  (tokenizer, budget) pair is scored as the variant ``<tokenizer>@<budget>``; ``@largest`` and
  ``@smallest`` name the budgets with the most and the fewest FLOPs.
- **Extrapolation** (:func:`crossing_flops`): a least-squares line of log agg-relative WQL
  against log10 training FLOPs per tokenizer (seed means over budgets, and per seed for the
  spread); where it reaches 0 (ratio 1, seasonal naive) is the predicted crossing. The same fit
  without the smallest budget (``without_smallest``) shows how much that budget steers it.
- **Resuming**: every finished (tokenizer, budget, seed) run is cached under
  ``wavetoken.scaling.cache_dir`` by the hash of everything that defines it (parameters, the
  content of the corpus and of the evaluation sets, the source of the modules it runs), so an
  interrupted study restarts from the first unfinished run (and a run in progress from its
  checkpoint), and a change to any of them trains anew.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from icml25.core.lazy_import import lazy_module
from icml25.pipelines.wavetoken.params import ScalingBudget, WavetokenParams

if TYPE_CHECKING:
    import pandas as pd
else:  # the registry builds this pipeline without loading pandas
    pd = lazy_module("pandas")

logger = logging.getLogger(__name__)

SEP = "@"
"""Separator of a scored variant key: ``<tokenizer>@<budget>``."""


def variant_key(tokenizer: str, budget: str) -> str:
    return f"{tokenizer}{SEP}{budget}"


def budget_model_params(p: WavetokenParams, budget: ScalingBudget):
    """The main run's model parameters at the budget's width."""
    return p.model.model_copy(update={"d_model": budget.d_model, "d_ff": budget.d_ff})


def budget_train_params(p: WavetokenParams, budget: ScalingBudget):
    """The main run's training parameters with the budget's steps (checkpoints every 10 %)."""
    return p.train.model_copy(update={"steps": budget.steps,
                                      "checkpoint_every": max(1, budget.steps // 10),
                                      "log_every": max(1, budget.steps // 20)})


def train_step_flops(model, batch: Sequence[Any]) -> int:
    """FLOPs of one training step: forward and backward of ``model.loss(*batch)``, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (gradients are cleared afterwards)."""
    from torch.utils.flop_counter import FlopCounterMode

    model.train()
    counter = FlopCounterMode(display=False)
    with counter:
        loss = model.loss(*batch)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def n_parameters(model) -> int:
    return int(sum(t.numel() for t in model.parameters()))


#: the modules whose code decides a run's forecasts (the cache key hashes their source)
_RUN_MODULES = ("tokenizer", "wavelet_tokenizer", "bin_tokenizer", "model", "hf_t5", "pretraining",
                "windows", "forecaster", "metrics")


def code_digest() -> str:
    """Hash of the source of the modules a run depends on (and of the training loop), so a
    cached run is reused only by the code that produced it."""
    import hashlib

    import icml25.core.training as training

    digest = hashlib.sha256()
    here = Path(__file__).parent
    for path in [*(here / f"{m}.py" for m in _RUN_MODULES), Path(training.__file__)]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def frame_digest(frame: pd.DataFrame) -> str:
    """Hash of a table's content (the training corpus, the evaluation sets)."""
    return f"{int(pd.util.hash_pandas_object(frame, index=False).sum()) & (2**64 - 1):016x}"


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def run_one(corpus: pd.DataFrame, eval_sets: pd.DataFrame, p: WavetokenParams, tokenizer_name: str,
            budget: ScalingBudget, seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Pretrain one (tokenizer, budget, seed) model and forecast the real test sets, or read the
    finished run back from the cache; returns (quantile forecasts, run record)."""
    from icml25.core.device import resolve_device, seed_everything
    from icml25.pipelines.wavetoken import metrics as fm
    from icml25.pipelines.wavetoken.forecaster import forecast
    from icml25.pipelines.wavetoken.frames import (
        context_matrix,
        frame_to_eval_sets,
        frame_to_series,
        quantiles_to_frame,
    )
    from icml25.pipelines.wavetoken.hf_t5 import build_model
    from icml25.pipelines.wavetoken.pretraining import (
        build_tokenizer,
        make_batch_fn,
        model_config,
        pretrain,
        run_key,
    )

    tok_params = p.variants[tokenizer_name]
    model_params = budget_model_params(p, budget)
    train_params = budget_train_params(p, budget)
    key = run_key({"variant": tok_params.model_dump(), "model": model_params.model_dump(),
                   "train": train_params.model_dump(), "seed": seed, "C": p.context_length,
                   "H": p.prediction_length, "corpus": frame_digest(corpus),
                   "eval_sets": frame_digest(eval_sets), "sampling": p.sampling.model_dump(),
                   "levels": p.quantile_levels, "backend": p.model.backend,
                   "code": code_digest()})
    cache = Path(p.scaling.cache_dir)
    stem = f"{tokenizer_name}_{budget.name}_seed{seed}_{key}"
    table_path, record_path = cache / f"{stem}.parquet", cache / f"{stem}.json"
    label = variant_key(tokenizer_name, budget.name)
    if table_path.exists() and record_path.exists():
        logger.info("wavetoken_scaling: %s seed %d read from %s", label, seed, table_path)
        return pd.read_parquet(table_path), json.loads(record_path.read_text(encoding="utf-8"))

    device = resolve_device(p.device)
    tokenizer = build_tokenizer(tok_params, p.context_length)
    config = model_config(model_params, tokenizer.vocab_size, p.context_length,
                          p.prediction_length)
    mixes = frame_to_series(corpus, "tsmixup")
    kernelsynth = frame_to_series(corpus, "kernelsynth")
    # FLOPs of one step on the first batch of this run (every batch has the same shape)
    seed_everything(seed)
    probe = build_model(config, p.model.backend).to(device)
    batch = make_batch_fn(mixes, kernelsynth, tokenizer, train_params, p.context_length,
                          p.prediction_length, seed, device)(0)
    step_flops = train_step_flops(probe, batch)
    params_count = n_parameters(probe)
    del probe
    seed_everything(seed)
    model, result = pretrain(
        mixes, kernelsynth, tokenizer, config, train_params, p.context_length,
        p.prediction_length, seed, device, checkpoint_dir=cache / "checkpoints" / stem,
        progress=p.progress, desc=f"{label} seed {seed}", backend=p.model.backend)
    model.eval()
    frames = []
    for s in frame_to_eval_sets(eval_sets):
        if s.group not in ("in_domain", "zero_shot"):
            continue
        samples = forecast(
            model, tokenizer, context_matrix(s.histories, p.context_length), horizon=s.horizon,
            prediction_length=p.prediction_length, n_samples=p.sampling.n_samples,
            temperature=p.sampling.temperature, top_k=p.sampling.top_k, top_p=p.sampling.top_p,
            batch_size=p.sampling.batch_size, device=device, seed=seed, progress=False)
        q = fm.quantiles_from_samples(samples, p.quantile_levels)
        frames.append(quantiles_to_frame(label, seed, s.name, q, p.quantile_levels))
    table = pd.concat(frames, ignore_index=True)
    record = {
        "variant": label, "tokenizer": tokenizer_name, "budget": budget.name, "seed": seed,
        "d_model": budget.d_model, "d_ff": budget.d_ff, "steps": result.steps_done,
        "parameters": params_count, "step_flops": step_flops,
        "train_flops": float(step_flops) * result.steps_done,
        "train_seconds": round(result.seconds, 2),
        "final_loss": result.history[-1]["train_loss"] if result.history else float("nan"),
    }
    cache.mkdir(parents=True, exist_ok=True)
    _atomic_write(table_path, lambda path: table.to_parquet(path, index=False))
    _atomic_write(record_path, lambda path: path.write_text(json.dumps(record, indent=2),
                                                            encoding="utf-8"))
    logger.info("wavetoken_scaling: %s seed %d: %.3g training FLOPs in %.0f s, loss %.3f",
                label, seed, record["train_flops"], result.seconds, record["final_loss"])
    return table, record


def geometric_mean(values: Any) -> float:
    """exp(mean(log x)): how aggregate relative scores are averaged over seeds."""
    return float(np.exp(np.log(np.asarray(values, dtype=np.float64)).mean()))


def budget_means(runs: pd.DataFrame) -> pd.DataFrame:
    """One tokenizer's runs -> per budget (by FLOPs): mean training FLOPs and the seeds'
    geometric mean of the aggregate relative WQL (columns ``flops``, ``wql``)."""
    return runs.groupby("budget").agg(flops=("train_flops", "mean"),
                                      wql=("agg_rel_wql_real", geometric_mean)
                                      ).sort_values("flops")


def largest_and_smallest(runs: pd.DataFrame) -> tuple[str, str]:
    """Budget names with the most and the fewest mean training FLOPs."""
    flops = runs.groupby("budget")["train_flops"].mean().sort_values()
    return str(flops.index[-1]), str(flops.index[0])


def crossing_flops(flops: Sequence[float], log_rel: Sequence[float]) -> dict[str, float]:
    """Least-squares ``log_rel = a + b log10(flops)`` and where it crosses 0 (seasonal naive).

    Returns ``slope_per_decade`` (b), ``intercept`` (a), ``r2`` and ``crossing_flops`` =
    10^(-a/b) when the line descends (b < 0) and is still above 0 at the largest budget; it is
    the largest budget's FLOPs or less when the scores are already below 1 there, and ``inf``
    when the line does not descend. Needs at least two distinct budgets.
    """
    x = np.log10(np.asarray(flops, dtype=np.float64))
    y = np.asarray(log_rel, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if np.unique(x).size < 2:
        raise ValueError("crossing_flops: needs scores at two or more distinct budgets")
    b, a = np.polyfit(x, y, 1)
    fitted = a + b * x
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fitted) ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    crossing = float(10 ** (-a / b)) if b < 0 else float("inf")
    return {"slope_per_decade": float(b), "intercept": float(a), "r2": r2,
            "crossing_flops": crossing}


# ------------------------------------------------------------------------------------- nodes
PIPELINE = "wavetoken_scaling"


def _params(params: dict[str, Any]) -> WavetokenParams:
    from icml25.core.params import validate_parameters

    p = validate_parameters(WavetokenParams, params, "wavetoken")
    if p.scaling is None:
        raise ValueError("wavetoken.scaling is not set: the compute-scaling study needs its "
                         "variants, seeds and budgets (see conf/base/parameters_wavetoken.yml)")
    return p


def train_scaling(corpus: pd.DataFrame, eval_sets: pd.DataFrame, params: dict[str, Any],
                  position: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every budget and seed of the study's tokenizer number ``position``: quantile forecasts
    of the real test sets (variant ``<tokenizer>@<budget>``) and one record per run."""
    from tqdm.auto import tqdm

    from icml25.core.device import set_threads

    p = _params(params)
    name = p.scaling.variants[position]
    set_threads(p.num_threads)
    tables, records = [], []
    runs = [(b, s) for b in p.scaling.budgets for s in p.scaling.seeds]
    for budget, seed in tqdm(runs, desc=f"scaling {name}", disable=not p.progress):
        table, record = run_one(corpus, eval_sets, p, name, budget, seed)
        tables.append(table)
        records.append(record)
    return pd.concat(tables, ignore_index=True), pd.DataFrame(records)


def forecast_seasonal_naive(eval_sets: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Seasonal naive on the real test sets: the normaliser of every relative score."""
    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets, quantiles_to_frame
    from icml25.pipelines.wavetoken.stat_baselines import run_statsforecast

    p = _params(params)
    frames = []
    for s in frame_to_eval_sets(eval_sets):
        if s.group not in ("in_domain", "zero_shot"):
            continue
        out = run_statsforecast(s.histories, s.horizon, s.season, models=("seasonal_naive",),
                                levels=tuple(p.quantile_levels), max_history=None)
        frames.append(quantiles_to_frame("seasonal_naive", 0, s.name, out["seasonal_naive"],
                                         p.quantile_levels))
    return pd.concat(frames, ignore_index=True)


def evaluate_scaling(eval_sets: pd.DataFrame, params: dict[str, Any], naive: pd.DataFrame,
                     *tables: pd.DataFrame) -> pd.DataFrame:
    """WQL and MASE of every (tokenizer@budget, seed, real dataset) and of seasonal naive."""
    from icml25.pipelines.wavetoken.evaluation import score_forecasts
    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets

    p = _params(params)
    sets = [s for s in frame_to_eval_sets(eval_sets) if s.group in ("in_domain", "zero_shot")]
    return score_forecasts(sets, [naive, *tables], p.quantile_levels)


def _with_aliases(metrics: dict[str, Any], largest: str, smallest: str,
                  tokenizers: Sequence[str]) -> dict[str, Any]:
    out = dict(metrics)
    for t in tokenizers:
        out[variant_key(t, "largest")] = metrics[variant_key(t, largest)]
        out[variant_key(t, "smallest")] = metrics[variant_key(t, smallest)]
    return out


def scaling_gain(units: dict[str, Any], tokenizer: str, largest: str, smallest: str,
                 metric: str = "log_rel_wql_real") -> dict[str, list[float]]:
    """Per dataset and seed: the tokenizer's log relative score at the largest budget minus the
    one at the smallest (negative = it improved with compute)."""
    big = units[variant_key(tokenizer, largest)][metric]
    small = units[variant_key(tokenizer, smallest)][metric]
    return {d: [float(a - b) for a, b in zip(big[d], small[d], strict=True)]
            for d in big if d in small}


def judge_scaling(scores: pd.DataFrame, params: dict[str, Any], run_info: dict[str, Any],
                  confidence: float, *runs: pd.DataFrame
                  ) -> tuple[dict[str, Any], dict[str, Any], pd.DataFrame]:
    """``metrics.json``, ``claims.json`` and the scaling table (one row per tokenizer, budget and
    seed: FLOPs, parameters, seconds, aggregate relative WQL and MASE)."""
    from icml25.core.claims import claims_report, metrics_report
    from icml25.pipelines.wavetoken.evaluation import summarise_metrics, unit_metrics

    p = _params(params)
    runs_table = pd.concat(runs, ignore_index=True)
    largest, smallest = largest_and_smallest(runs_table)
    metrics = summarise_metrics(scores)
    units = unit_metrics(scores, pd.DataFrame(columns=["variant", "seed", "dataset", "group",
                                                       "series", "wql_share"]))
    tokenizers = list(p.scaling.variants)
    variant_metrics: dict[str, Any] = {v: {k: m[k] for k in ("agg_rel_wql_real",
                                                               "agg_rel_mase_real")}
                                       | units.get(v, {}) for v, m in metrics.items()}
    for v, g in runs_table.groupby("variant"):  # compute per run, seeds in ascending order
        g = g.sort_values("seed")
        variant_metrics[str(v)] |= {k: [float(x) for x in g[k]]
                                    for k in ("train_flops", "parameters", "train_seconds")}
    for t in tokenizers:
        variant_metrics[t] = {"log_rel_wql_real_gain": scaling_gain(units, t, largest, smallest),
                              "log_rel_mase_real_gain": scaling_gain(units, t, largest, smallest,
                                                                     "log_rel_mase_real")}
    claim_metrics = _with_aliases(variant_metrics, largest, smallest, tokenizers)
    seeds = list(p.scaling.seeds)
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.scaling.claims], claim_metrics,
                           run_info, seeds, title="WaveToken (ICML 2025): compute scaling",
                           figures=["figures/scaling.png"], confidence=confidence)
    table = runs_table.copy()
    agg = {(v, s): (wql, mase) for v, m in metrics.items() if SEP in v
           for s, wql, mase in zip(sorted(scores.loc[scores["variant"] == v, "seed"].unique()),
                                   m["agg_rel_wql_real"], m["agg_rel_mase_real"], strict=True)}
    table["agg_rel_wql_real"] = [agg[(v, s)][0] for v, s in zip(table["variant"], table["seed"],
                                                                 strict=True)]
    table["agg_rel_mase_real"] = [agg[(v, s)][1] for v, s in zip(table["variant"], table["seed"],
                                                                  strict=True)]
    table = table.sort_values(["tokenizer", "train_flops", "seed"]).reset_index(drop=True)
    fits: dict[str, Any] = {}
    for t, g in table.groupby("tokenizer"):
        mean = budget_means(g)
        fit = crossing_flops(mean["flops"], np.log(mean["wql"]))
        per_seed = [crossing_flops(gs["train_flops"], np.log(gs["agg_rel_wql_real"]))
                    for _, gs in g.groupby("seed")]
        fit["crossing_flops_per_seed"] = [f["crossing_flops"] for f in per_seed]
        fit["slope_per_decade_per_seed"] = [f["slope_per_decade"] for f in per_seed]
        # the same fit without the smallest budget, where a model may not have left its
        # initial plateau yet (with three or more budgets)
        if len(mean) >= 3:
            rest = mean[mean.index != smallest]
            fit["without_smallest"] = crossing_flops(rest["flops"], np.log(rest["wql"]))
        fits[str(t)] = fit
    report = metrics_report(PIPELINE, variant_metrics, run_info, seeds,
                            extra={"budgets": [b.model_dump() for b in p.scaling.budgets],
                                   "largest": largest, "smallest": smallest,
                                   "extrapolation": fits, "runs": table.to_dict("records")})
    _log_mlflow(table, fits, claims)
    return report, claims, table


def _log_mlflow(table: pd.DataFrame, fits: dict[str, Any], claims: dict[str, Any]) -> None:
    mlflow = lazy_module("mlflow")
    if mlflow.active_run() is None:
        return
    from icml25.core.tracking import log_claim_counts, log_metrics, variant_run

    for (tokenizer, budget), g in table.groupby(["tokenizer", "budget"], sort=False):
        first = g.iloc[0]
        with variant_run(variant_key(str(tokenizer), str(budget)), role="method"
                         if tokenizer == "wavetoken" else "baseline", pipeline=PIPELINE,
                         params={"tokenizer": tokenizer, "budget": budget,
                                 "d_model": int(first["d_model"]), "d_ff": int(first["d_ff"]),
                                 "steps": int(first["steps"]),
                                 "parameters": int(first["parameters"])}):
            log_metrics({"train_flops": float(g["train_flops"].mean()),
                         "agg_rel_wql_real": geometric_mean(g["agg_rel_wql_real"]),
                         "agg_rel_mase_real": geometric_mean(g["agg_rel_mase_real"]),
                         "train_seconds": float(g["train_seconds"].mean())})
    log_claim_counts(claims, **{f"{t}_slope_per_decade": f["slope_per_decade"]
                                for t, f in fits.items()})


def plot_scaling(table: pd.DataFrame, metrics: dict[str, Any]) -> dict[str, Any]:
    """Aggregate relative WQL against training FLOPs, per tokenizer: seeds as dots, the seed
    geometric mean as a line, the log-log fit extrapolated dashed to seasonal naive (1.0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fits = metrics["extra"]["extrapolation"] if "extra" in metrics else metrics["extrapolation"]
    fig, ax = plt.subplots(figsize=(10.5, 4.4))
    colours = {"wavetoken": "tab:blue"}
    x_max = float(table["train_flops"].max())
    for i, (t, g) in enumerate(table.groupby("tokenizer")):
        colour = colours.get(str(t), f"C{i + 1}")
        ax.scatter(g["train_flops"], g["agg_rel_wql_real"], s=14, alpha=0.5, color=colour)
        mean = budget_means(g)
        ax.plot(mean["flops"], mean["wql"], "-o", color=colour, label=f"{t} (seed mean)")
        fit = fits[str(t)]
        end = fit["crossing_flops"] if np.isfinite(fit["crossing_flops"]) else x_max * 10
        end = min(max(end, x_max), x_max * 1e4)
        xs = np.logspace(np.log10(mean["flops"].min()), np.log10(end), 50)
        crossing = (f"crosses 1 at {fit['crossing_flops']:.1e} FLOPs"
                    if np.isfinite(fit["crossing_flops"]) else "does not descend")
        ax.plot(xs, np.exp(fit["intercept"] + fit["slope_per_decade"] * np.log10(xs)), "--",
                color=colour, alpha=0.7,
                label=f"{t} fit: {fit['slope_per_decade']:+.3f} ln/decade, {crossing}")
        rest = fit.get("without_smallest")
        if rest is not None:
            end = rest["crossing_flops"] if np.isfinite(rest["crossing_flops"]) else x_max * 10
            end = min(max(end, x_max), x_max * 1e4)
            xs = np.logspace(np.log10(mean["flops"].iloc[1]), np.log10(end), 50)
            crossing = (f"crosses 1 at {rest['crossing_flops']:.1e}"
                        if np.isfinite(rest["crossing_flops"]) else "does not descend")
            ax.plot(xs, np.exp(rest["intercept"] + rest["slope_per_decade"] * np.log10(xs)),
                    ":", color=colour, lw=1.5,
                    label=f"{t} fit without the smallest: {rest['slope_per_decade']:+.3f}, "
                          f"{crossing}")
    ax.axhline(1.0, color="k", lw=1, ls=":", label="seasonal naive")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training FLOPs (measured, forward + backward)")
    ax.set_ylabel("aggregate relative WQL (real sets)")
    ax.set_title("wavetoken: compute scaling (lower is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return {"scaling.png": fig}
