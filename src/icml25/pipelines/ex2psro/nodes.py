"""Node functions of the ex2psro pipeline: thin wrappers around the method modules."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_shards, shard_seeds
from icml25.pipelines.ex2psro.bargaining import (
    EX2PSRO_INSTANCES,
    load_game,
    parse_instances,
)
from icml25.pipelines.ex2psro.harvest import HarvestGame
from icml25.pipelines.ex2psro.meta_solver import regret, welfare
from icml25.pipelines.ex2psro.params import Ex2psroParams
from icml25.pipelines.ex2psro.staghunt import StagHuntGame

if TYPE_CHECKING:
    from icml25.pipelines.ex2psro.psro import PSROConfig

matplotlib = lazy_module("matplotlib")
plt = lazy_module("matplotlib.pyplot")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

logger = logging.getLogger(__name__)
PIPELINE = "ex2psro"


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        out[key] = (_merge(out[key], value) if isinstance(value, dict)
                    and isinstance(out.get(key), dict) else value)
    return out


def _params(params: dict[str, Any]) -> Ex2psroParams:
    """The validated parameters; every variant's merged block is validated too, so a bad value
    anywhere fails the run before any work."""
    p = validate_parameters(Ex2psroParams, params, PIPELINE)
    for name in p.variants:
        _variant_params(params, name)
    return p


def _variant_params(params: dict[str, Any], name: str) -> Ex2psroParams:
    """Variant ``name``'s parameters: the base block with the variant's overrides (its own game
    and claims); the variant itself has no further variants."""
    override = dict(params["variants"][name])
    claims = override.pop("claims")
    merged = _merge({k: v for k, v in params.items() if k != "variants"}, override)
    merged["claims"] = claims
    return validate_parameters(Ex2psroParams, merged, f"{PIPELINE}.variants.{name}")


def _games(params: dict[str, Any]) -> list[tuple[str, Ex2psroParams]]:
    """``[(variant, params)]``: the main game (variant ``"main"``) first, then each variant."""
    p = _params(params)
    return [("main", p), *((name, _variant_params(params, name)) for name in p.variants)]


def _prefix(variant: str) -> str:
    return "" if variant == "main" else f"{variant}_"


def make_instances(params: dict[str, Any]) -> str:
    """The bargaining instance set, validated, saved as a text file under data/01_raw: the paper's
    20 instances, or ``game.instances_file`` when given (the Harvest maps are fixed in
    ``harvest.MAPS``)."""
    p = _params(params)
    if p.game.instances_file is None:
        text = EX2PSRO_INSTANCES
    else:
        path = Path(p.game.instances_file)
        if not path.is_file():
            raise FileNotFoundError(f"ex2psro.game.instances_file: {path} does not exist")
        text = path.read_text()
    try:
        parse_instances(text)
    except ValueError as err:
        raise ValueError(f"ex2psro.game.instances_file ({p.game.instances_file}): {err}") from None
    return text


def _game(p: Ex2psroParams, instances: str):
    if p.game.name == "harvest":
        return HarvestGame(p.game.map, p.game.max_steps)
    if p.game.name == "staghunt":
        g = p.game
        return StagHuntGame(g.rounds, g.stag, g.hare, g.sucker)
    return load_game(p.game.name, p.game.discount, instances, p.game.max_turns)


def _config(p: Ex2psroParams, explore: str, gro_weight: float) -> PSROConfig:
    from icml25.pipelines.ex2psro.psro import PSROConfig
    from icml25.pipelines.ex2psro.responses import SACConfig
    o, e, r = p.oracle, p.explore, p.psro.rrd
    sac = SACConfig(hidden=tuple(o.hidden), alpha=o.alpha, gamma=o.gamma, lr_pi=o.lr_pi,
                    lr_q=o.lr_q, tau=o.tau, value_clip=o.value_clip, batch=o.batch)
    return PSROConfig(
        iters=p.psro.iters, sims_per_entry=p.psro.sims_per_entry, rrd_lambda_init=r.lambda_init,
        rrd_lambda_final=r.lambda_final, rrd_steps=r.steps, rrd_dt=r.dt, rrd_max_steps=r.max_iters,
        oracle_steps=o.steps, learning_starts=o.learning_starts, update_every=o.update_every,
        buffer_size=o.buffer, sac=sac, explore=explore, n_top=e.n_top, bc_lr=e.bc_lr,
        bc_batch=e.bc_batch, bc_epochs=e.bc_epochs, bc_min_loss=e.bc_min_loss,
        lambda0=e.lambda0, k_lambda=e.K_lambda, gro_weight=gro_weight, progress=p.progress,
        oracle_episodes=o.episodes, rrd_scale=r.scale, rrd_floor=r.floor)


def _psro_job(instances: str, p: Ex2psroParams, variant: str, name: str, seed: int
              ) -> dict[str, Any]:
    """One PSRO run (method ``name``, ``seed``) of one game; it depends on these alone, so any
    process may run it."""
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.ex2psro.psro import run_psro
    set_threads(p.num_threads)
    seed_everything(seed)
    method = p.methods[name]
    run = run_psro(_game(p, instances), _config(p, method.explore, method.gro_weight), seed, name)
    return {**run, "variant": variant}


def run_all_psro(instances: str, params: dict[str, Any], shard: int = 0,
                 n_shards: int = 1) -> list[dict[str, Any]]:
    """Every configured PSRO variant (method, baselines, ablations) for each seed of shard
    ``shard`` of ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`),
    method by method; no run when the shard has no seed. A run depends on its game, method and
    seed alone (the game keeps no state between episodes), so the shards may run in any order
    and a shard's runs on ``n_workers`` processes, with the same results."""
    games = _games(params)
    seeds = shard_seeds(games[0][1].seeds, shard, n_shards)
    if not seeds:
        return []
    jobs = [(instances, p, variant, name, seed)
            for variant, p in games for name in p.methods for seed in seeds]
    return _map_jobs(_psro_job, jobs, games[0][1], f"PSRO runs of seed shard {shard}")


def _map_jobs(func, jobs: list[tuple], p: Ex2psroParams, desc: str) -> list:
    """``func(*job)`` for every job ``(instances, params, ...)``, in order, on ``p.n_workers``
    processes (:func:`icml25.core.workers.resolve_workers`). In the processes each job's own
    progress bars are off, and one bar counts the finished jobs instead."""
    from icml25.core.workers import process_map, resolve_workers
    workers = resolve_workers(p.n_workers, len(jobs), key="ex2psro.n_workers")
    if workers == 1:
        return [func(*job) for job in jobs]
    quiet = [(i, q.model_copy(update={"progress": False}), *rest) for i, q, *rest in jobs]
    return list(tqdm(process_map(func, quiet, workers), total=len(jobs),
                     desc=f"{desc} ({workers} processes)", disable=not p.progress))


def _merge_shards(p: Ex2psroParams, shard_runs: tuple[list[dict[str, Any]], ...]
                  ) -> list[dict[str, Any]]:
    """The runs of every seed shard in the order one loop trains them: method by method (in
    ``methods`` order), seed-list order within a method (shard ``k`` of ``n`` holds
    ``seeds[k::n]``; :func:`icml25.core.sweep.interleave_shards`)."""
    names = list(p.methods)
    stray = sorted({run["name"] for runs in shard_runs for run in runs} - set(names))
    if stray:
        raise ValueError(f"ex2psro: PSRO runs of {stray} match no method of "
                         f"params:ex2psro.methods; re-run the seed shards")
    merged = []
    for name in names:
        runs = interleave_shards([[r for r in shard if r["name"] == name] for shard in shard_runs])
        if [r["seed"] for r in runs] != list(p.seeds):
            raise ValueError(f"ex2psro: the seed shards hold {name} runs for seeds "
                             f"{[r['seed'] for r in runs]}, params:ex2psro.seeds is {p.seeds}")
        merged += runs
    return merged


def _runs_by_game(params: dict[str, Any], shard_runs: tuple[list[dict[str, Any]], ...]
                  ) -> list[tuple[str, Ex2psroParams, list[dict[str, Any]]]]:
    """``[(variant, params, runs)]``: each game's runs from every seed shard, in the order one
    loop over methods and seeds trains them (:func:`_merge_shards`)."""
    games = _games(params)
    stray = sorted({run.get("variant", "main") for runs in shard_runs for run in runs}
                   - {v for v, _ in games})
    if stray:
        raise ValueError(f"ex2psro: PSRO runs of the games {stray} match no entry of "
                         f"params:ex2psro.variants; re-run the seed shards")
    return [(variant, p, _merge_shards(p, tuple(
        [r for r in runs if r.get("variant", "main") == variant] for runs in shard_runs)))
        for variant, p in games]


def train_extra_best_responses(instances: str, params: dict[str, Any],
                               *shard_runs: list[dict[str, Any]]) -> dict[str, list]:
    """``{variant: [weights]}``: per game, one unregularised SAC best response to each run's
    final meta-strategy over that run's population (:func:`_extra_br_job`, learner-step budget
    ``eval.extra_br_steps``; none when it is 0), in run order, on ``n_workers`` processes
    (each response has its own seed, so the result is the same for any number)."""
    out: dict[str, list] = {}
    for variant, p, runs in _runs_by_game(params, shard_runs):
        if p.eval.extra_br_steps == 0:
            out[variant] = []
            continue
        jobs = [(instances, p, [None, *run["weights"][1:]], run["sigma"][-1],
                 p.eval.seed + 7919 * (r + 1), r) for r, run in enumerate(runs)]
        out[variant] = _map_jobs(_extra_br_job, jobs, p, f"extra best responses ({variant})")
    return out


def evaluate_runs(instances: str, params: dict[str, Any], extra_best_responses: dict[str, list],
                  *shard_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The main game's evaluation (:func:`evaluate_game`), with each variant's under
    ``variants``."""
    out: dict[str, Any] = {"variants": {}}
    for variant, p, runs in _runs_by_game(params, shard_runs):
        if variant not in extra_best_responses:
            raise ValueError(f"ex2psro: no extra best responses for the game {variant!r}; "
                             f"re-run train_extra_best_responses")
        evaluation = evaluate_game(instances, p, runs, list(extra_best_responses[variant]))
        if variant == "main":
            out.update(evaluation)
        else:
            out["variants"][variant] = evaluation
    return out


def evaluate_game(instances: str, p: Ex2psroParams, runs: list[dict[str, Any]],
                  extra_best_responses: list) -> dict[str, Any]:
    """Combined game over every policy of every run of one game (``runs``, in merged order)
    plus the extra best responses (one per run, :func:`train_extra_best_responses`, or none);
    per-iteration welfare and regret curves (regret: exact, from the combined matrix;
    ``own_regret``: in the run's own empirical game)."""
    from icml25.core.device import set_threads
    from icml25.core.workers import resolve_workers
    from icml25.pipelines.ex2psro.psro import cross_evaluate, make_policy
    if extra_best_responses and len(extra_best_responses) != len(runs):
        raise ValueError(f"ex2psro: {len(extra_best_responses)} extra best responses for "
                         f"{len(runs)} runs; re-run train_extra_best_responses")
    set_threads(p.num_threads)
    weights: list = [None]  # index 0: the uniform policy every population starts with
    index = []
    for run in runs:
        index.append([0, *list(range(len(weights), len(weights) + len(run["weights"]) - 1))])
        weights += run["weights"][1:]
    weights += extra_best_responses
    workers = resolve_workers(p.n_workers, len(weights) * (len(weights) + 1) // 2,
                              min_items=64, key="ex2psro.n_workers")
    combined = cross_evaluate(partial(_game, p, instances), [make_policy(w) for w in weights],
                              p.eval.sims_per_entry, p.eval.seed, p.progress, workers)
    rows = []
    for r, run in enumerate(runs):
        for k, sigma in enumerate(run["sigma"]):
            full = np.zeros(len(weights))
            full[index[r][: len(sigma)]] = sigma
            rows.append({"method": run["name"], "seed": run["seed"], "iteration": k,
                         "welfare": welfare(run["payoffs"][: len(sigma), : len(sigma)], sigma),
                         "welfare_combined": welfare(combined, full),
                         "regret": regret(combined, full),
                         "support": int(np.sum(sigma > 1e-3)),
                         "max_welfare_cell": float(np.max(
                             run["payoffs"][: len(sigma), : len(sigma)]
                             + run["payoffs"][: len(sigma), : len(sigma)].T)),
                         "rrd_lambda": run["rrd_lambda"][k],
                         "own_regret": run["own_regret"][k],
                         **{key: float(run[key]) for key in EPISODE_METRICS},
                         "kl_weight": run["kl_weight"][k] if k < len(run["kl_weight"]) else 0.0,
                         "bc_loss": run["bc_loss"][k] if k < len(run["bc_loss"]) else np.nan,
                         "kl_end": (run["oracle"][k]["kl_end"] if k < len(run["oracle"])
                                    else np.nan)})
    uniform = np.zeros(len(weights))
    uniform[0] = 1.0
    random_row = {"welfare": welfare(combined[:1, :1], np.ones(1)),
                  "welfare_combined": welfare(combined, uniform),
                  "regret": regret(combined, uniform), "support": 1,
                  "max_welfare_cell": float(2 * combined[0, 0]), "own_regret": 0.0,
                  "rrd_lambda": float("nan"), **dict.fromkeys(EPISODE_METRICS, float("nan"))}
    return {"curves": pd.DataFrame(rows), "combined": combined, "random": random_row,
            "n_policies": len(weights), "n_extra_br": len(weights) - sum(
                len(run["weights"]) - 1 for run in runs) - 1}


def _extra_br_job(instances: str, p: Ex2psroParams, population: list, sigma: np.ndarray,
                  seed: int, r: int) -> list:
    """The evaluation's unregularised SAC best response to one run's final meta-strategy
    ``sigma`` over its ``population`` (weights; ``None``: uniform), with a learner-step budget
    of ``eval.extra_br_steps``; it depends on its arguments alone."""
    from icml25.core.device import set_threads
    from icml25.pipelines.ex2psro.psro import PSROConfig, make_policy, train_response
    set_threads(p.num_threads)
    cfg = _config(p, "none", 1.0)
    cfg = PSROConfig(**{**cfg.__dict__, "oracle_steps": p.eval.extra_br_steps,
                        "oracle_episodes": None})
    br, _ = train_response(_game(p, instances), [make_policy(w) for w in population], sigma, cfg,
                           seed, desc=f"extra BR {r + 1}")
    return br


EPISODE_METRICS = ("episodes_total", "episodes_oracle", "episodes_estimation", "learner_steps")
FINAL_METRICS = ("welfare", "welfare_combined", "regret", "own_regret", "rrd_lambda", "support",
                 "max_welfare_cell", *EPISODE_METRICS)


def random_welfare_per_seed(curves: pd.DataFrame, seeds: list[int]) -> list[float]:
    """Uniform-random play's welfare for each seed: ``W`` of the one-policy population at
    iteration 0 of that seed's runs (every method starts from the same uniform policy and the same
    generator, so its runs of a seed share this estimate; the mean over methods is taken)."""
    start = curves[curves["iteration"] == 0]
    values = []
    for seed in seeds:
        rows = start[start["seed"] == seed]["welfare"].astype(float)
        if rows.empty:
            raise ValueError(f"ex2psro: no iteration-0 row for seed {seed}; re-run the seed shards")
        values.append(float(rows.mean()))
    return values


def _game_metrics(evaluation: dict[str, Any], p: Ex2psroParams, prefix: str
                  ) -> dict[str, dict[str, list[float]]]:
    """``{method: {<prefix>final_<metric>: per-seed values}}`` of one game, random included."""
    curves = evaluation["curves"]
    final = curves[curves["iteration"] == p.psro.iters]
    metrics: dict[str, dict[str, list[float]]] = {}
    for name in p.methods:
        rows = final[final["method"] == name].sort_values("seed")
        metrics[name] = {f"{prefix}final_{m}": rows[m].astype(float).tolist()
                         for m in FINAL_METRICS}
    rnd = evaluation["random"]
    metrics["random"] = {f"{prefix}final_{m}": [float(rnd[m])] for m in FINAL_METRICS}
    metrics["random"][f"{prefix}final_welfare"] = random_welfare_per_seed(curves, list(p.seeds))
    return metrics


def _curve_table(curves: pd.DataFrame, game: str) -> list[dict[str, Any]]:
    table = (curves.groupby(["method", "iteration"])[["welfare", "regret", "own_regret"]]
             .agg(["mean", "std"]).reset_index())
    table.columns = ["_".join(c).strip("_") for c in table.columns]
    table.insert(0, "game", game)
    return table.to_dict(orient="records")


def judge_claims(evaluation: dict[str, Any], params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float = 0.90
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own evaluation; MLflow child runs.

    Every claim pairs by seed (every method runs ``seeds``). ``random``'s ``final_welfare`` is
    per seed (:func:`random_welfare_per_seed`, the run's own empirical game, the scale of the
    methods' ``final_welfare``); its combined-game metrics are one evaluation each. A variant
    game's metrics and claims carry its name as prefix (``staghunt_final_welfare``).
    ``confidence``: the level of the claims' one-sided bounds (``params:claims_confidence``)."""
    from icml25.core.tracking import (
        log_claim_counts,
        log_metrics,
        log_variants,
        seed_means,
        variant_run,
    )
    p = _params(params)
    games = _games(params)
    metrics: dict[str, dict[str, list[float]]] = {}
    claim_specs: list[dict[str, Any]] = []
    curve_records: list[dict[str, Any]] = []
    per_game = []
    for variant, gp in games:
        ev = evaluation if variant == "main" else evaluation["variants"][variant]
        prefix = _prefix(variant)
        for name, values in _game_metrics(ev, gp, prefix).items():
            metrics.setdefault(name, {}).update(values)
        for claim in gp.claims:
            spec = claim.model_dump()
            spec["metric"] = prefix + spec["metric"]
            claim_specs.append(spec)
        game_label = gp.game.name if variant == "main" else variant
        curve_records += _curve_table(ev["curves"], game_label)
        per_game.append((variant, gp, ev, prefix))
    seeds_of = {name: list(p.seeds) for name in [*p.methods, "random"]}
    figures = ["figures/welfare_regret.png"] + [f"figures/{v}_welfare_regret.png"
                                                for v, *_ in per_game if v != "main"]
    claims = claims_report(PIPELINE, claim_specs, metrics, run_info, p.seeds,
                           title="Ex2PSRO (ICML 2025)", figures=figures, confidence=confidence,
                           seeds_of=seeds_of)
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra={
        "curves": curve_records,
        "combined_game_policies": evaluation["n_policies"],
        "extra_best_responses": evaluation["n_extra_br"],
        "games": {v: {"game": gp.game.model_dump(), "metric_prefix": pre,
                      "combined_game_policies": ev["n_policies"],
                      "rrd_threshold_scale": gp.psro.rrd.scale}
                  for v, gp, ev, pre in per_game},
        "welfare_scale": "sum of both players' expected returns, sigma^T (U + U^T) sigma",
        "regret_definition": "exact regret max_pi u(pi, sigma) - u(sigma, sigma), clipped at 0, "
                             "of the reported sigma in the combined empirical game "
                             "(final_regret) and in the run's own empirical game "
                             "(final_own_regret)"})
    if mlflow.active_run() is not None:
        roles = {n: m.role for n, m in p.methods.items()} | {"random": "baseline"}
        means = seed_means(metrics)
        log_variants(PIPELINE, means, roles,
                     params_by_variant={n: m.model_dump() for n, m in p.methods.items()},
                     nan_ok=True)
        for name in p.methods:
            with variant_run(name, run_name=f"{name}/curves", role=roles[name], pipeline=PIPELINE):
                for _variant, _gp, ev, prefix in per_game:
                    curves = ev["curves"]
                    mine = curves[curves["method"] == name]
                    mean = mine.groupby("iteration")[["welfare", "regret", "own_regret"]].mean()
                    for k, row in mean.iterrows():
                        log_metrics({f"{prefix}{m}": row[m] for m in mean.columns}, step=int(k))
                    # each seed's reported solution: exact regrets and episode counts
                    last = mine[mine["iteration"] == mine["iteration"].max()]
                    for _, row in last.iterrows():
                        log_metrics({f"{prefix}{m}_seed{int(row['seed'])}": row[m]
                                     for m in ("regret", "own_regret", *EPISODE_METRICS)})
        log_claim_counts(claims)
    return report, claims


def _plot_game(curves: pd.DataFrame, methods: list[str], random_welfare: float, title: str):
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for name in methods:
        stats = curves[curves["method"] == name].groupby("iteration")
        for ax, metric in zip(axes, ("welfare", "regret"), strict=True):
            mean, std = stats[metric].mean(), stats[metric].std().fillna(0.0)
            ax.plot(mean.index, mean.values, marker="o", label=name)
            ax.fill_between(mean.index, mean - std, mean + std, alpha=0.2)
    axes[0].axhline(random_welfare, color="grey", ls="--", label="random")
    axes[0].set(xlabel="PSRO iteration", ylabel="welfare W(sigma)", title=f"{title}: welfare")
    axes[1].set(xlabel="PSRO iteration", ylabel="regret (combined game)",
                title=f"{title}: regret")
    axes[0].legend()
    fig.tight_layout()
    return fig


def plot_curves(evaluation: dict[str, Any], params: dict[str, Any]) -> dict[str, plt.Figure]:
    """Welfare and regret of the meta-strategy against PSRO iteration (mean +- std over seeds),
    one figure per game."""
    matplotlib.use("Agg")
    figures = {}
    for variant, p in _games(params):
        ev = evaluation if variant == "main" else evaluation["variants"][variant]
        key = "welfare_regret.png" if variant == "main" else f"{variant}_welfare_regret.png"
        figures[key] = _plot_game(ev["curves"], list(p.methods), ev["random"]["welfare"],
                                  p.game.name if variant == "main" else variant)
    return figures
