"""Kedro nodes of the functional_tom pipeline: thin wrappers around the method modules.

Each node validates ``params:functional_tom`` into :class:`FunctionalTomParams`, does one step of
the pipeline and returns plain tables, dicts or state dicts.

Suites of scenarios: ``paper`` (the paper's cells: every game x the paper's partner families at
the paper's horizon), ``meta`` (the meta-trained transformer's cells at its training horizon:
training and held-out families; every reference agent plays them too, so comparisons are on the
same episodes) and ``llm`` (the LLM agents' smoke-test cells).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import shard_seeds
from icml25.pipelines.functional_tom.games import Game, make_game
from icml25.pipelines.functional_tom.optimal_play import solve
from icml25.pipelines.functional_tom.params import FunctionalTomParams
from icml25.pipelines.functional_tom.partners import (
    FAMILIES,
    build_partner,
    family_available,
    sample_partner_spec,
)
from icml25.pipelines.functional_tom.reference_agents import (
    make_reference_agent,
    random_closed_form,
)

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
plots = lazy_module("icml25.pipelines.functional_tom.plots")

logger = logging.getLogger(__name__)
PIPELINE = "functional_tom"
SUITES = ("paper", "meta", "llm")
META_AGENTS = {"meta_policy": "policy", "meta_tom_br": "tom_br", "meta_tom_only": "tom_only"}


def _params(params: dict[str, Any]) -> FunctionalTomParams:
    return validate_parameters(FunctionalTomParams, params, PIPELINE)


def _games(p: FunctionalTomParams) -> dict[str, Game]:
    return {name: make_game(name, g.kind, g.actions, g.payoff, g.partner_payoff, g.synonyms)
            for name, g in p.games.items()}


def _log_frame(rows: list[pd.DataFrame]) -> pd.DataFrame:
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in (
            ("scenario_id", "int64"), ("agent", "str"), ("t", "int64"), ("a", "int64"),
            ("b", "int64"), ("r", "float64"), ("bhat", "int64"), ("p_b", "float64"),
            ("r_star", "float64"), ("r_tom", "float64"), ("invalid", "bool"),
            ("invalid_prediction", "bool"), ("raw", "str"))})
    return pd.concat(rows, ignore_index=True)


def _tag(log: pd.DataFrame, scenario_id: int, agent: str) -> pd.DataFrame:
    from icml25.pipelines.functional_tom.episodes import LOG_COLUMNS
    log = log[list(LOG_COLUMNS)].copy()
    log.insert(0, "agent", agent)
    log.insert(0, "scenario_id", scenario_id)
    return log


# --- 1. scenarios and optimal values ------------------------------------------------------------
def build_scenarios(params: dict[str, Any]) -> pd.DataFrame:
    """One row per episode: suite, seed, game, partner family and spec (JSON), episode seed."""
    p = _params(params)
    games = _games(p)
    cells: list[tuple[str, str, str, int, int]] = []
    for game in games:
        cells += [("paper", game, f, p.horizon, p.episodes_per_cell) for f in p.paper_families]
    if p.meta.enabled:
        for game in p.meta.games:
            cells += [("meta", game, f, p.meta.T_train, p.episodes_per_cell)
                      for f in p.meta.train_families + p.meta.heldout_families]
    if p.llm.backend != "none":
        for game in p.llm.games:
            cells += [("llm", game, f, p.llm.horizon, p.llm.episodes_per_cell)
                      for f in p.llm.families]
    rows = []
    for seed in p.seeds:
        for suite, game_name, family, horizon, n_ep in cells:
            game = games[game_name]
            if not family_available(game, family):
                continue
            for ep in range(n_ep):
                key = [seed, SUITES.index(suite), list(games).index(game_name),
                       FAMILIES.index(family), ep]
                episode_seed = int(np.random.SeedSequence(key).generate_state(1)[0])
                spec = sample_partner_spec(game, family, np.random.default_rng(episode_seed),
                                           first_move=p.tft_first_move, episode=ep)
                rows.append({"suite": suite, "seed": seed, "game": game_name, "family": family,
                             "episode": ep, "episode_seed": episode_seed, "horizon": horizon,
                             "partner": json.dumps(spec, sort_keys=True)})
    frame = pd.DataFrame(rows)
    frame.insert(0, "scenario_id", np.arange(len(frame), dtype=np.int64))
    return frame


def compute_optimal_values(scenarios: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """V*_T, V_min and r*_t per scenario by backward DP; uniform play's closed-form regret per
    step against single-state partners (NaN otherwise)."""
    p = _params(params)
    games = _games(p)
    rows = []
    for row in scenarios.itertuples(index=False):
        game = games[row.game]
        partner = build_partner(game, json.loads(row.partner))
        opt = solve(game, partner, int(row.horizon))
        closed = (random_closed_form(game, opt, partner) if partner.n_states == 1
                  else float("nan"))
        rows.append({"scenario_id": row.scenario_id, "v_star": opt.v_star, "v_min": opt.v_worst,
                     "closed_form": closed, "r_star": opt.r_star.tolist()})
    return pd.DataFrame(rows)


# --- 2. agents ----------------------------------------------------------------------------------
def run_reference_agents(scenarios: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Every reference agent against every scenario (all suites): per-round logs."""
    from icml25.pipelines.functional_tom.episodes import run_episode
    p = _params(params)
    games = _games(p)
    ref = p.reference
    logs = []
    bar = tqdm(total=len(scenarios) * len(ref.agents), desc="functional_tom reference agents",
               disable=not p.progress)
    solved: dict = {}
    for row in scenarios.itertuples(index=False):
        game = games[row.game]
        partner = build_partner(game, json.loads(row.partner))
        key = (row.game, partner.name, int(row.horizon))
        if key not in solved:
            solved[key] = solve(game, partner, int(row.horizon))
        for name in ref.agents:
            agent = make_reference_agent(name, ref.rmax.m, ref.rmax.gamma, ref.rmax.sweeps,
                                         ref.bayes_eps)
            result = run_episode(game, partner, agent, solved[key],
                                 seed=int(row.episode_seed) + 1, give_partner=name == "oracle")
            logs.append(_tag(result.log, int(row.scenario_id), name))
            bar.update()
    bar.close()
    return _log_frame(logs)


CURVE_COLUMNS = ["model", "game", "kind", "seed", "step", "loss"]


def _meta_model_keys(p: FunctionalTomParams, seeds: list[int]) -> list[tuple[str, str, int]]:
    """The (game, kind, seed) meta-training jobs for ``seeds``: policy models per game, then the
    ToM-only models, seed by seed within each game."""
    m = p.meta
    return ([(g, "policy", s) for g in m.games for s in seeds]
            + [(g, "tom_only", s) for g in m.tom_only_games for s in seeds])


def train_meta_agents(params: dict[str, Any], shard: int = 0, n_shards: int = 1
                      ) -> tuple[dict[str, Any], pd.DataFrame]:
    """Meta-train one in-context transformer per (game, seed) (+ ToM-only models) for the meta
    seeds of shard ``shard`` of ``n_shards`` (``meta_seeds[shard::n_shards]``,
    :func:`icml25.core.sweep.shard_seeds`): state dicts for the model partition and the training
    curves, both empty when the shard has no seed. Each model depends on its game, kind and seed
    alone, so the shards may run in any order."""
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.functional_tom.meta_agent import (
        MetaConfig,
        model_record,
        train_meta_agent,
    )
    p = _params(params)
    games = _games(p)
    m = p.meta
    seeds = shard_seeds(p.meta_seeds(), shard, n_shards)
    models, curves = {}, []
    if not m.enabled or not seeds:
        return models, pd.DataFrame(columns=CURVE_COLUMNS)
    set_threads(p.num_threads)
    jobs = _meta_model_keys(p, seeds)
    for game_name, kind, seed in tqdm(jobs, desc=f"functional_tom meta-training (shard {shard})",
                                      disable=not p.progress):
        seed_everything(seed)
        game = games[game_name]
        cfg = MetaConfig(game.n_actions, m.d_model, m.layers, m.heads, m.d_ff, m.T_train)
        model, curve = train_meta_agent(
            game, m.train_families, cfg, steps=m.steps, batch_size=m.batch, lr=m.lr,
            weight_decay=m.weight_decay, grad_clip=m.grad_clip, eps_start=m.eps_start,
            eps_end=m.eps_end, seed=seed, policy_weight=1.0 if kind == "policy" else 0.0,
            progress=p.progress, device=resolve_device(m.device))
        key = f"{game_name}_{kind}_seed_{seed}"
        models[key] = model_record(model, curve, {"game": game_name, "kind": kind, "seed": seed,
                                                  "train_families": m.train_families})
        curves += [{"model": key, "game": game_name, "kind": kind, "seed": seed, **c}
                   for c in curve]
    return models, pd.DataFrame(curves)


def merge_meta_curves(params: dict[str, Any], *shard_curves: pd.DataFrame) -> pd.DataFrame:
    """The meta-training curves of every seed shard as one table, model by model in the order
    one loop over all meta seeds trains them (:func:`_meta_model_keys`)."""
    p = _params(params)
    order = [f"{g}_{k}_seed_{s}" for g, k, s in _meta_model_keys(p, p.meta_seeds())]
    by_model: dict[str, pd.DataFrame] = {}
    for curves in shard_curves:
        for key, g in curves.groupby("model", sort=False):
            if key in by_model:
                raise ValueError(f"functional_tom: meta model {key} trained by two seed shards")
            by_model[key] = g
    unknown = sorted(set(by_model) - set(order))
    if unknown:
        raise ValueError(f"functional_tom: meta-training curves of {unknown} match no game, kind "
                         f"and seed of params:functional_tom.meta")
    parts = [by_model[key] for key in order if key in by_model]
    if not parts:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict."""
    return partition() if callable(partition) else partition


def run_meta_agent(scenarios: pd.DataFrame, params: dict[str, Any],
                   *shard_models: dict[str, Any]) -> pd.DataFrame:
    """Greedy evaluation of the meta-trained variants on the ``meta`` suite (one batched
    rollout per cell): (a) policy head, (b) ToM head + myopic BR, (c) ToM-only model + BR.
    ``shard_models`` are the model partitions of every meta-training seed shard. A run seed
    whose trained model is absent uses the first trained seed of that game."""
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.functional_tom.meta_agent import evaluate_meta_agent, load_model
    p = _params(params)
    games = _games(p)
    set_threads(p.num_threads)
    device = resolve_device(p.meta.device)
    loaded = {}
    for models in shard_models:
        for k, v in models.items():
            if k in loaded:
                raise ValueError(f"functional_tom: meta model {k} trained by two seed shards")
            loaded[k] = load_model(_entry(v), device)
    meta = scenarios[scenarios["suite"] == "meta"]
    logs = []
    train_seeds = p.meta_seeds()
    groups = list(meta.groupby(["game", "seed", "family"], sort=True))
    for (game_name, seed, _family), cell in tqdm(groups, desc="functional_tom meta agent",
                                                 disable=not p.progress):
        model_seed = seed if seed in train_seeds else train_seeds[0]
        specs = [json.loads(s) for s in cell["partner"]]
        for agent, mode in META_AGENTS.items():
            kind = "tom_only" if mode == "tom_only" else "policy"
            model = loaded.get(f"{game_name}_{kind}_seed_{model_seed}")
            if model is None:
                continue
            act = "policy" if mode == "policy" else "tom_br"
            episode_logs = evaluate_meta_agent(model, games[game_name], specs,
                                               seed=int(cell["episode_seed"].iloc[0]), act_mode=act)
            logs += [_tag(log, int(sid), agent)
                     for log, sid in zip(episode_logs, cell["scenario_id"], strict=True)]
    return _log_frame(logs)


class InvalidAnswersError(RuntimeError):
    """The LLM agents' invalid-answer rate passed ``functional_tom.llm.max_invalid_rate``."""


def check_llm_endpoint(params: dict[str, Any], endpoint: dict[str, Any] | None = None
                       ) -> dict[str, Any]:
    """One probe request to the ``openai`` backend's endpoint at the start of the run, before
    any episode (the node runs right after ``build_scenarios``): an unreachable or failing
    endpoint stops the run here with :class:`~.llm_agent.EndpointError`, instead of every
    query of every episode spending its retries. Other backends need no probe."""
    from icml25.pipelines.functional_tom.llm_agent import probe_endpoint

    p = _params(params)
    if p.llm.backend != "openai":
        return {"backend": p.llm.backend, "probed": False}
    reply = probe_endpoint(p.llm.model_dump(), endpoint)
    logger.info("functional_tom: LLM endpoint answered its probe (%d characters)", len(reply))
    return {"backend": p.llm.backend, "probed": True}


def run_llm_agents(scenarios: pd.DataFrame, params: dict[str, Any],
                   endpoint: dict[str, Any] | None = None,
                   endpoint_check: dict[str, Any] | None = None) -> pd.DataFrame:
    """Every configured prompting strategy on the ``llm`` suite (skipped when ``llm.backend:
    none``). Endpoint failures are counted invalid answers inside the agent; an episode that
    fails for any other reason is logged and skipped, the finished ones are kept. An
    ``openai`` endpoint is probed once before the first episode (unless ``endpoint_check``,
    the output of :func:`check_llm_endpoint`, says it was); the run stops with
    :class:`InvalidAnswersError` as soon as the invalid action answers are certain to pass
    ``llm.max_invalid_rate`` of all the rounds it plays.
    ``endpoint`` is Kedro's ``functional_tom_llm`` credentials entry (catalog
    ``functional_tom.llm_endpoint``: ``base_url``, ``model``, ``api_key``), used by
    ``llm.backend: openai``."""
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.functional_tom.episodes import run_episode
    from icml25.pipelines.functional_tom.llm_agent import LLMAgent, make_backend
    from icml25.pipelines.functional_tom.prompts import (
        build_prompt,
        completion_prompt,
        describe_partner,
        game_description,
        parse_strategy,
    )

    p = _params(params)
    llm = p.llm
    cells = scenarios[scenarios["suite"] == "llm"]
    if llm.backend == "none" or cells.empty:
        return _log_frame([])
    games = _games(p)
    set_threads(p.num_threads)
    seed_everything(p.seeds[0])
    if llm.backend == "hf_tiny":
        from icml25.pipelines.functional_tom.llm_backends import build_tiny_llama

        corpus = []
        for game in games.values():
            corpus.append(game_description(game, llm.horizon))
            history = [(a, b, float(game.payoff[a, b])) for a in range(game.n_actions)
                       for b in range(game.n_actions)]
            for s in ("cot", "oracle_max", "social_qa"):
                corpus += build_prompt(game, llm.horizon, history, parse_strategy(s), "act",
                                       "", None, game.actions[0])[:2]
            corpus.append(completion_prompt(game, llm.horizon, history, parse_strategy("lm"),
                                            "predict")[0])
            corpus += [describe_partner(game, sample_partner_spec(game, f, np.random.default_rng(0)))
                       for f in ("single", "tft", "cycle", "anti", "wsls", "lag2_tft")]
        build_tiny_llama(llm.tiny_model_dir, corpus, seed=p.seeds[0])
    if llm.backend == "openai" and not (endpoint_check or {}).get("probed"):
        from icml25.pipelines.functional_tom.llm_agent import probe_endpoint

        probe_endpoint(llm.model_dump(), endpoint)
    backend = make_backend(llm.model_dump(), endpoint if llm.backend == "openai" else None,
                           llm.tiny_model_dir)
    logs = []
    strategies = [s for s in llm.strategies
                  if backend.supports_logprob or not parse_strategy(s).scored
                  or llm.lm_decoding == "greedy"]
    skipped = sorted(set(llm.strategies) - set(strategies))
    if skipped:
        logger.warning("functional_tom: backend %s gives no log-probabilities; skipping %s",
                       llm.backend, skipped)
    bar = tqdm(total=len(cells) * len(strategies), desc="functional_tom LLM agents",
               disable=not p.progress)
    failed, invalid = 0, 0
    planned = int(cells["horizon"].sum()) * len(strategies)  # action answers of the run
    for row in cells.itertuples(index=False):
        game = games[row.game]
        partner = build_partner(game, json.loads(row.partner))
        opt = solve(game, partner, int(row.horizon))
        for strategy in strategies:
            agent = LLMAgent(backend, strategy, llm.temperature, llm.max_new_tokens,
                             llm.lm_decoding, llm.max_history_rounds)
            try:
                result = run_episode(game, partner, agent, opt, seed=int(row.episode_seed) + 2,
                                     invalid_policy=llm.invalid_policy,
                                     give_partner=parse_strategy(strategy).base.startswith(
                                         "oracle"))
            except Exception as err:  # one broken episode must not lose the finished ones
                failed += 1
                logger.warning("functional_tom: LLM episode %s (%s) failed: %s",
                               row.scenario_id, strategy, err)
            else:
                logs.append(_tag(result.log, int(row.scenario_id), f"llm.{strategy}"))
                invalid += int(result.log["invalid"].sum())
            bar.update()
            if invalid > llm.max_invalid_rate * planned:
                bar.close()
                raise InvalidAnswersError(
                    f"functional_tom.llm: {invalid} of the run's {planned} LLM action answers "
                    f"are already invalid (unparseable or endpoint failures; last strategy "
                    f"{strategy}), more than functional_tom.llm.max_invalid_rate = "
                    f"{llm.max_invalid_rate}; check the endpoint and the raw answers")
    bar.close()
    if failed:
        logger.warning("functional_tom: %d LLM episodes failed and were skipped", failed)
    if planned:
        log = logger.warning if invalid > 0.1 * planned else logger.info
        log("functional_tom: %d of %d LLM action answers invalid (%s backend; the run stops "
            "above functional_tom.llm.max_invalid_rate = %.2f)", invalid, planned, llm.backend,
            llm.max_invalid_rate)
    return _log_frame(logs)


# --- 3. evaluation -------------------------------------------------------------------------------
def score_episodes(reference_logs: pd.DataFrame, meta_logs: pd.DataFrame,
                   llm_logs: pd.DataFrame, scenarios: pd.DataFrame,
                   optimal: pd.DataFrame) -> pd.DataFrame:
    """Per-episode metrics of every agent (Delta_F/T, Delta_ToM/T, ToM %, gap, invalid rate)."""
    from icml25.pipelines.functional_tom.scoring import score_episodes as _score
    logs = pd.concat([x for x in (reference_logs, meta_logs, llm_logs) if not x.empty],
                     ignore_index=True)
    return _score(logs, scenarios, optimal.drop(columns=["r_star"]))


def _role(agent: str) -> str:
    if agent == "meta_policy":
        return "method"
    return "ablation" if agent.startswith("meta_") else "baseline"


def judge_claims(scores: pd.DataFrame, curves: pd.DataFrame, params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float = 0.90
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own episode scores; every agent is an
    MLflow child run with the same metric names; the meta-training curves are logged too.

    Every agent plays the episodes of every evaluation seed, so the claims pair by seed;
    ``confidence`` is the level of their one-sided bounds (``params:claims_confidence``)."""
    from icml25.core.tracking import (
        log_claim_counts,
        log_metrics,
        log_variants,
        seed_means,
        variant_run,
    )
    from icml25.pipelines.functional_tom.scoring import agent_metrics, cell_table
    p = _params(params)
    metrics = agent_metrics(scores, p.paper_tabular_regret)
    cells = cell_table(scores)
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], metrics, run_info,
                           p.seeds, title="Theory of Mind benchmarks are broken for LLMs "
                           "(ICML 2025): literal vs functional ToM",
                           figures=[f"figures/{n}" for n in plots.FIGURES],
                           confidence=confidence,
                           seeds_of={agent: list(p.seeds) for agent in metrics})
    extra = {"cells": cells.to_dict(orient="records"),
             "episodes": {agent: int(n) for agent, n in scores["agent"].value_counts().items()}}
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds, extra=extra)
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        roles = {a: _role(a) for a in metrics}
        variant_params = {a: {"agent": a} for a in metrics}
        for a in metrics:
            if a.startswith("meta_"):
                variant_params[a] |= p.meta.model_dump()
            elif a == "tabular_rmax":
                variant_params[a] |= p.reference.rmax.model_dump()
            elif a.startswith("llm."):
                variant_params[a] |= {"backend": p.llm.backend, "model": p.llm.model or "",
                                      "model_path": p.llm.model_path or ""}
        log_variants(PIPELINE, means, roles, params_by_variant=variant_params)
        for key, curve in curves.groupby("model") if not curves.empty else []:
            with variant_run("meta_policy", role="method", pipeline=PIPELINE,
                             run_name=f"meta/training/{key}"):
                for row in curve.itertuples(index=False):
                    log_metrics({"loss": row.loss, "tom_loss": row.tom_loss,
                                 "policy_loss": row.policy_loss,
                                 "train_regret_per_step": row.train_regret_per_step},
                                step=int(row.step))
        log_claim_counts(claims)
    return report, claims


def plot_literal_vs_functional(scores: pd.DataFrame, reference_logs: pd.DataFrame,
                               meta_logs: pd.DataFrame, scenarios: pd.DataFrame,
                               optimal: pd.DataFrame) -> dict[str, Any]:
    """Heatmaps (regret / ToM % / gap per agent x cell), the ToM % vs regret scatter and the
    cumulative regret curves of the key cells."""
    from icml25.pipelines.functional_tom.scoring import cell_table
    matplotlib.use("Agg")
    logs = pd.concat([x for x in (reference_logs, meta_logs) if not x.empty], ignore_index=True)
    return plots.make_figures(cell_table(scores), logs, scenarios, optimal)
