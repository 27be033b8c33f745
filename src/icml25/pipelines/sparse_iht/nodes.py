"""Node functions of the sparse_iht pipeline: thin wrappers over the room's plain modules."""

from __future__ import annotations

from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.pipelines.sparse_iht.params import SparseIHTParams, k_of
from icml25.pipelines.sparse_iht.problems import constraint_for

plt = lazy_module("matplotlib.pyplot")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
evaluation = lazy_module("icml25.pipelines.sparse_iht.evaluation")
experiments = lazy_module("icml25.pipelines.sparse_iht.experiments")
plots = lazy_module("icml25.pipelines.sparse_iht.plots")

PIPELINE = "sparse_iht"
FIGURES = ("tradeoff", "curves", "zeroth_order", "support_recall", "real_data",
           "index_tracking")


def _params(params: dict[str, Any]) -> SparseIHTParams:
    return validate_parameters(SparseIHTParams, params, PIPELINE)


def _threads(p: SparseIHTParams):
    """BLAS thread limit: these small dense products run fastest on one thread on 2 cores."""
    return threadpool_limits(p.num_threads or None)


def make_synthetic(params: dict[str, Any]) -> pd.DataFrame:
    """The generated synthetic instances, one row per (setting, seed): the truth and Γ.

    The designs themselves are regenerated from their seed inside each experiment (they are
    deterministic in it); this table records what was generated for DVC and inspection.
    """
    p = _params(params)
    rows = []
    for name, setting in p.synthetic.named.items():
        for seed in p.seeds:
            truth = experiments.synthetic_instance(p.synthetic, setting, seed)
            gamma = constraint_for(setting.kind, setting.scale, truth.w_true)
            rows.append({"setting": name, "seed": seed, "kind": setting.kind,
                         "scale": setting.scale, "n": p.synthetic.n, "d": p.synthetic.d,
                         "k_bar": p.synthetic.k_bar, "support": truth.support.tolist(),
                         "w_true_support_values": truth.w_true[truth.support].tolist(),
                         "radius": gamma.radius, "lower": gamma.lower, "upper": gamma.upper,
                         "budget": gamma.budget, "y_norm": float(np.linalg.norm(truth.y))})
    return pd.DataFrame(rows)


def run_first_order(problems: pd.DataFrame, params: dict[str, Any], shard: int = 0,
                    n_shards: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """IHT-2SP and the first-order baselines on every synthetic instance of the seeds of shard
    ``shard`` of ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`);
    two empty tables when the shard has no seed.

    The instances are regenerated from their seeds; the stored table must describe exactly the
    same instances (settings, seeds, supports, Γ), so a stale or corrupt table is refused.
    """
    p = _params(params)
    if problems is None or problems.empty:
        raise ValueError("sparse_iht.synthetic_problems is empty: nothing to run")
    expected = make_synthetic(params)
    keys = ["setting", "seed", "kind", "radius", "lower", "upper", "budget"]
    try:
        same = (len(problems) == len(expected)
                and problems[keys].reset_index(drop=True).equals(expected[keys])
                and all(list(a) == list(b) for a, b in zip(problems["support"],
                                                           expected["support"], strict=True)))
    except KeyError as err:
        raise ValueError(f"sparse_iht.synthetic_problems lacks column {err}") from None
    if not same:
        raise ValueError("sparse_iht.synthetic_problems does not match the instances the "
                         "parameters generate (stale or corrupt): re-run make_synthetic")
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return pd.DataFrame(), pd.DataFrame()
    with _threads(p):
        return experiments.run_synthetic(p.synthetic, seeds, p.rtol, p.progress)


def run_exhaustive(params: dict[str, Any], shard: int = 0, n_shards: int = 1) -> pd.DataFrame:
    """The small exhaustive-search instances of the seeds of shard ``shard`` of ``n_shards``."""
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return pd.DataFrame()
    with _threads(p):
        return experiments.run_small_exhaustive(p.small, seeds, p.synthetic.k_ratios,
                                                p.progress)


def run_stochastic(params: dict[str, Any], shard: int = 0,
                   n_shards: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HSG-HT-2SP against IHT-2SP for the seeds of shard ``shard`` of ``n_shards`` (each seed
    draws its mini-batches from its own generator, so a seed's rows do not depend on the shard)."""
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return pd.DataFrame(), pd.DataFrame()
    with _threads(p):
        return experiments.run_stochastic(p.stochastic, p.synthetic, seeds, p.progress)


def run_zeroth_order(params: dict[str, Any], shard: int = 0,
                     n_shards: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HZO-HT-2SP and SZOHT for the seeds of shard ``shard`` of ``n_shards`` (random directions
    from per-seed generators)."""
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return pd.DataFrame(), pd.DataFrame()
    with _threads(p):
        return experiments.run_zeroth_order(p.zeroth_order, seeds, p.progress)


def run_real_data(params: dict[str, Any], shard: int = 0, n_shards: int = 1) -> pd.DataFrame:
    """The real-data splits of the seeds of shard ``shard`` of ``n_shards``."""
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return pd.DataFrame()
    with _threads(p):
        return experiments.run_real_data(p.real_data, seeds, p.progress)


def run_index_tracking(params: dict[str, Any], shard: int = 0,
                       n_shards: int = 1) -> pd.DataFrame:
    """Index tracking on the generated markets of the seeds of shard ``shard`` of ``n_shards``."""
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return pd.DataFrame()
    with _threads(p):
        return experiments.run_index_tracking(p.index_tracking, seeds, p.progress)


def run_index_real(params: dict[str, Any]) -> pd.DataFrame:
    """Index tracking on the real prices (``index_tracking.real``; seed column -1)."""
    p = _params(params)
    with _threads(p):
        return experiments.run_index_real(p.index_tracking, p.progress)


def _merge(p: SparseIHTParams, name: str, shards: tuple[pd.DataFrame, ...],
           settings: list[str] | None) -> pd.DataFrame:
    """One table from the seed shards' tables, rows in the order one loop over every seed writes
    them: setting by setting (``settings``; ``None`` for a table without settings), seed-list
    order within a setting (shard ``k`` of ``n`` holds ``seeds[k::n]``,
    :func:`icml25.core.sweep.interleave_frames`), each seed's rows as its shard wrote them."""
    pieces: list[pd.DataFrame] = []
    for setting in settings or [None]:
        rows = []
        for frame in shards:
            if frame is not None and not frame.empty and setting is not None \
                    and "setting" not in frame:
                raise ValueError(f"sparse_iht.{name}: a seed shard's table lacks the setting "
                                 f"column; re-run the seed shards")
            rows.append(frame if frame is None or frame.empty or setting is None
                        else frame[frame["setting"] == setting])
        where = "" if setting is None else f" (setting {setting})"
        pieces += interleave_frames(rows, p.seeds, where=f"sparse_iht.{name}: the seed shards"
                                    f"{where}", seeds_from="params:sparse_iht.seeds")
    return pd.concat(pieces, ignore_index=True)


def _merge_tables(params: dict[str, Any], names: tuple[str, ...], instances: str | None,
                  shard_tables: tuple) -> tuple[pd.DataFrame, ...]:
    """``shard_tables``: every shard's tables in shard order, ``len(names)`` per shard;
    ``instances``: the parameter block whose settings the tables loop over outside the seeds
    (``synthetic`` or ``small``), ``None`` for tables of seeds only."""
    p = _params(params)
    settings = None if instances is None else list(getattr(p, instances).named)
    if len(shard_tables) % len(names):
        raise ValueError(f"sparse_iht: {len(shard_tables)} shard tables do not split into "
                         f"{len(names)} tables per shard")
    width = len(names)
    return tuple(_merge(p, name, tuple(shard_tables[i::width]), settings)
                 for i, name in enumerate(names))


def merge_first_order(params: dict[str, Any], *shard_tables: pd.DataFrame
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``fo_results`` and ``fo_traces`` from every shard's (results, traces)."""
    return _merge_tables(params, ("fo_results", "fo_traces"), "synthetic", shard_tables)


def merge_exhaustive(params: dict[str, Any], *shard_tables: pd.DataFrame) -> pd.DataFrame:
    """``small_results`` from every shard's results."""
    return _merge_tables(params, ("small_results",), "small", shard_tables)[0]


def merge_stochastic(params: dict[str, Any], *shard_tables: pd.DataFrame
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``stoch_results`` and ``stoch_traces`` from every shard's (results, traces)."""
    return _merge_tables(params, ("stoch_results", "stoch_traces"), None, shard_tables)


def merge_zeroth_order(params: dict[str, Any], *shard_tables: pd.DataFrame
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``zo_results`` and ``zo_traces`` from every shard's (results, traces)."""
    return _merge_tables(params, ("zo_results", "zo_traces"), None, shard_tables)


def merge_real_data(params: dict[str, Any], *shard_tables: pd.DataFrame) -> pd.DataFrame:
    """``real_results`` from every shard's results."""
    return _merge_tables(params, ("real_results",), None, shard_tables)[0]


def merge_index_tracking(params: dict[str, Any], *shard_tables: pd.DataFrame) -> pd.DataFrame:
    """``index_results`` (generated markets) from every shard's results."""
    return _merge_tables(params, ("index_results",), None, shard_tables)[0]


def judge_claims(fo_results: pd.DataFrame, small_results: pd.DataFrame,
                 stoch_results: pd.DataFrame, zo_results: pd.DataFrame,
                 real_results: pd.DataFrame, index_results: pd.DataFrame,
                 index_real_results: pd.DataFrame, params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float = 0.90
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own tables; MLflow child runs.
    Claims pair per-seed values by seed (every variant and derived check runs ``seeds``) at the
    level ``confidence`` (``params:claims_confidence``). Index tracking is reported as metrics
    only: the paper states no claim about it."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    for name, frame in (("fo_results", fo_results), ("small_results", small_results),
                        ("stoch_results", stoch_results), ("zo_results", zo_results),
                        ("real_results", real_results), ("index_results", index_results)):
        if frame is None or frame.empty:
            raise ValueError(f"sparse_iht.{name} is empty: the experiment produced no rows")
    metrics = evaluation.variant_metrics(fo_results, small_results, stoch_results, zo_results,
                                         p.seeds, real_results, index_results,
                                         index_real_results)
    relax = p.stochastic.k_ratio
    recall_ratio = 1.5 if 1.5 in p.synthetic.k_ratios else p.synthetic.k_ratios[1]
    derived = evaluation.claim_metrics(metrics, fo_results, small_results, stoch_results,
                                       zo_results, p.seeds, relax_ratio=relax,
                                       recall_ratio=recall_ratio,
                                       szoht_q=p.zeroth_order.szoht_q)
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], derived, run_info,
                           p.seeds, title="Sparse optimisation with the two-step projection "
                           "(ICML 2025)", figures=[f"figures/{f}.png" for f in FIGURES],
                           confidence=confidence,
                           seeds_of={v: list(p.seeds) for v in derived})
    checks = {k: v for k, v in derived.items() if ":" in k or k in ("2sp_methods",)}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra={
        "checks": checks,
        "k_grid": {f"{r:g}": k_of(r, p.synthetic.k_bar) for r in p.synthetic.k_ratios},
    })
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        roles = {v: evaluation.ROLES.get(v, "baseline") for v in means}
        described = {v: evaluation.DESCRIPTIONS.get(v, {
            "projection": "H_k (Γ ignored; evaluated at 2SP)",
            "gradient": f"zeroth order, fixed q = {v.removeprefix('szoht_q')}"})
            for v in means}
        # metrics that do not apply to a variant are NaN by design (identical names across
        # variants): counted in one line instead of a warning each
        log_variants(PIPELINE, means, roles, params_by_variant=described, nan_ok=True)
        log_claim_counts(claims)
    return report, claims


def make_plots(fo_results: pd.DataFrame, fo_traces: pd.DataFrame, small_results: pd.DataFrame,
               stoch_traces: pd.DataFrame, zo_traces: pd.DataFrame,
               real_results: pd.DataFrame, index_results: pd.DataFrame,
               index_real_results: pd.DataFrame) -> dict[str, plt.Figure]:
    """The trade-off, the objective curves (iterations, IFO, queries) and support recovery."""
    figures = {
        "tradeoff": plots.tradeoff_figure(fo_results, small_results),
        "curves": plots.curves_figure(fo_traces, stoch_traces),
        "zeroth_order": plots.zeroth_order_figure(zo_traces),
        "support_recall": plots.support_figure(fo_results),
        "real_data": plots.real_data_figure(real_results),
        "index_tracking": plots.index_tracking_figure(index_results, index_real_results),
    }
    return {f"{name}.png": fig for name, fig in figures.items()}
