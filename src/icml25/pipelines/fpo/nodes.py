"""Kedro nodes of the fpo pipeline: thin wrappers over world, lm, sae, align and evaluate."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import shard_seeds
from icml25.pipelines.fpo.params import FPOParams
from icml25.pipelines.fpo.world import (
    EOS,
    Prompt,
    World,
    legal_bigrams,
    make_world,
    rescale_reward,
    reward,
    sample_prompt,
    write_response,
)

if TYPE_CHECKING:
    from icml25.pipelines.fpo.align import LossSettings, Pairs
    from icml25.pipelines.fpo.sae import SparseAutoencoder

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

logger = logging.getLogger(__name__)
PIPELINE = "fpo"


def _params(params: dict[str, Any]) -> FPOParams:
    return validate_parameters(FPOParams, params, PIPELINE)


def _loss_settings(p: FPOParams, method: str) -> LossSettings:
    from icml25.pipelines.fpo.align import LossSettings
    cfg = getattr(p.loss, method)
    return LossSettings(beta=cfg.beta, alpha=getattr(cfg, "alpha", 0.5),
                        gamma=getattr(cfg, "gamma", 0.5), k=getattr(cfg, "k", 16),
                        union_topk=getattr(cfg, "union_topk", True),
                        stopgrad=getattr(cfg, "stopgrad", True),
                        pooling=getattr(cfg, "pooling", "masked_mean"))


def _model(p: FPOParams, world: World, state: dict[str, Any] | None = None):
    from icml25.pipelines.fpo.lm import build_model
    m = p.model
    model = build_model(world, m.d_model, m.n_layers, m.n_heads, m.d_ff, m.max_seq_len)
    if state is not None:
        model.load_state_dict(state["state_dict"])
    model.eval()
    return model


def _sae(state: dict[str, Any]) -> SparseAutoencoder:
    from icml25.pipelines.fpo.sae import SparseAutoencoder
    cfg = state["metadata"]["config"]
    sae = SparseAutoencoder(cfg["d"], cfg["m"], cfg["kind"], cfg["k_sae"])
    sae.load_state_dict(state["state_dict"])
    for q in sae.parameters():
        q.requires_grad_(False)
    return sae


def _prompt_row(p: Prompt) -> dict[str, Any]:
    return {"topic": p.topic, "tone": p.tone, "length": p.length, "words": " ".join(p.words)}


def _row_prompt(row: Any) -> Prompt:
    return Prompt(int(row.topic), int(row.tone), str(row.length), tuple(str(row.words).split()))


# ------------------------------------------------------------------------------- data

def make_world_node(params: dict[str, Any]) -> dict[str, Any]:
    """The vocabulary with categories, topics and sentiments, and the legal bigrams."""
    _params(params)
    world = make_world()
    return {"tokens": list(world.tokens), "category": world.category, "topic": world.topic,
            "sentiment": world.sentiment,
            "legal_bigrams": sorted(f"{a} {b}" for a, b in legal_bigrams(world))}


def make_sft_corpus(params: dict[str, Any]) -> pd.DataFrame:
    """The SFT corpus: prompts with responses of the noisy writer (p_follow)."""
    p = _params(params)
    world = make_world()
    rng = np.random.default_rng(p.data_seed)
    rows = []
    for _ in range(p.data.n_sft):
        prompt = sample_prompt(world, rng)
        response = write_response(world, prompt, rng, p.data.p_follow)
        rows.append({**_prompt_row(prompt), "response": " ".join(response),
                     "reward": reward(world, prompt, response)})
    return pd.DataFrame(rows)


def _corpus_ids(corpus: pd.DataFrame, world: World) -> tuple[list[list[int]], list[list[int]]]:
    if corpus.empty:
        raise ValueError("fpo.sft_corpus is empty")
    prompts = [world.ids(_row_prompt(r).tokens()) for r in corpus.itertuples()]
    responses = [world.ids(str(r).split()) for r in corpus["response"]]
    return prompts, responses


def train_sft_node(corpus: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """The SFT model (the reference π_ref of every method)."""
    from icml25.core.device import seed_everything, set_threads
    from icml25.core.tracking import log_metrics, variant_run
    from icml25.pipelines.fpo.lm import train_sft
    p = _params(params)
    set_threads(p.num_threads)
    seed_everything(p.data_seed)
    world = make_world()
    prompts, responses = _corpus_ids(corpus, world)
    model = _model(p, world)
    losses = train_sft(model, prompts, responses, world, p.model.sft_steps,
                       p.model.sft_batch_size, p.model.lr, p.data_seed, p.progress)
    logger.info("fpo SFT: %d steps, final loss %.3f", len(losses), float(np.mean(losses[-20:])))
    if mlflow.active_run() is not None:
        with variant_run("sft", run_name="sft/training", role="baseline", pipeline=PIPELINE):
            for i in range(0, len(losses), max(1, len(losses) // 100)):
                log_metrics({"sft_loss": losses[i]}, step=i)
    return {"state_dict": model.state_dict(),
            "metadata": {"config": model.config.to_dict(), "losses": losses}}


def train_sae_node(sft: dict[str, Any], corpus: pd.DataFrame,
                   params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The SAE on the SFT model's residual stream at ``sae.layer`` (response tokens)."""
    from icml25.core.device import set_threads
    from icml25.pipelines.fpo.lm import response_activations
    from icml25.pipelines.fpo.sae import train_sae
    p = _params(params)
    set_threads(p.num_threads)
    world = make_world()
    model = _model(p, world, sft)
    prompts, responses = _corpus_ids(corpus.iloc[:p.sae.n_sequences], world)
    acts = response_activations(model, prompts, responses, world, p.sae.layer)
    s = p.sae
    sae, stats = train_sae(acts, s.m, s.steps, p.data_seed, s.kind, s.k_sae, s.l1, s.target_l0,
                           s.lr, s.batch_size, progress=p.progress)
    report = {"fvu": stats.fvu, "l0": stats.l0, "dead_fraction": stats.dead_fraction,
              "l1_coefficient": stats.l1_coefficient, "steps": stats.steps,
              "n_activations": int(acts.shape[0]), "layer": s.layer, "m": s.m, "kind": s.kind}
    logger.info("fpo SAE: FVU %.3f, L0 %.1f, dead %.1f%%", stats.fvu, stats.l0,
                100 * stats.dead_fraction)
    return {"state_dict": sae.state_dict(), "metadata": {"config": sae.config(), **report}}, report


def make_preferences(sft: dict[str, Any], params: dict[str, Any]
                     ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Train and dev preference pairs sampled from the SFT model and labelled by r*."""
    from icml25.core.device import set_threads
    from icml25.pipelines.fpo.align import make_pairs
    p = _params(params)
    set_threads(p.num_threads)
    world = make_world()
    model = _model(p, world, sft)
    rng = np.random.default_rng(p.data_seed + 1)
    frames, report = [], {}
    for split, n in (("train", p.pref.n_train), ("dev", p.pref.n_dev)):
        prompts = [sample_prompt(world, rng) for _ in range(n)]
        pairs = make_pairs(model, world, prompts, p.pref.samples, p.pref.temperature,
                           p.pref.max_new, p.pref.min_gap, p.pref.bt_noise_tau,
                           p.data_seed + (0 if split == "train" else 7), p.model.max_seq_len,
                           p.progress)
        if len(pairs) == 0:
            raise ValueError(f"fpo: no {split} preference pair survived the filters "
                             f"{pairs.skipped}; raise pref.n_{split} or lower pref.min_gap")
        report[split] = {"pairs": len(pairs), "prompts": n, "skipped": pairs.skipped}
        logger.info("fpo %s pairs: %d of %d prompts (skipped %s)", split, len(pairs), n,
                    pairs.skipped)
        frames.append(pairs_to_frame(pairs, world, split))
    return pd.concat(frames, ignore_index=True), report


def pairs_to_frame(pairs: Pairs, world: World, split: str) -> pd.DataFrame:
    return pd.DataFrame([{"split": split, **_prompt_row(pr), "chosen": " ".join(world.words(w)),
                          "rejected": " ".join(world.words(l_))}
                         for pr, w, l_ in zip(pairs.prompts, pairs.chosen, pairs.rejected,
                                              strict=True)])


def frame_to_pairs(frame: pd.DataFrame, world: World, split: str, max_seq_len: int) -> Pairs:
    """Pairs of one split from the preference table; malformed rows are counted and skipped."""
    from icml25.pipelines.fpo.align import clean_pairs
    required = {"split", "topic", "tone", "length", "words", "chosen", "rejected"}
    missing = required - set(frame.columns)
    if missing:
        raise ValueError(f"fpo preference table lacks columns {sorted(missing)}")
    rows = frame[frame["split"] == split]
    if rows.empty:
        raise ValueError(f"fpo preference table has no {split!r} rows")
    prompts = [_row_prompt(r) for r in rows.itertuples()]
    return clean_pairs(prompts, [world.ids(pr.tokens()) for pr in prompts],
                       [world.ids(str(c).split()) for c in rows["chosen"]],
                       [world.ids(str(c).split()) for c in rows["rejected"]], max_seq_len,
                       world.index[EOS])


def cache_reference_node(sft: dict[str, Any], sae_state: dict[str, Any],
                         preferences: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """FPO's offline reference cache over the training pairs (one pass, no gradient)."""
    from icml25.core.device import set_threads
    from icml25.pipelines.fpo.align import cache_reference, pairs_sha256
    p = _params(params)
    set_threads(p.num_threads)
    world = make_world()
    pairs = frame_to_pairs(preferences, world, "train", p.model.max_seq_len)
    cache = cache_reference(_model(p, world, sft), _sae(sae_state), pairs, world, p.sae.layer)
    return {"state_dict": {"avg_w": cache.avg_w, "avg_l": cache.avg_l, "feat_w": cache.feat_w,
                           "feat_l": cache.feat_l, "fsum_w": cache.fsum_w,
                           "fsum_l": cache.fsum_l, "pair_digests": cache.digests},
            "metadata": {"pairs": len(pairs), "layer": p.sae.layer,
                         "pairs_sha256": pairs_sha256(cache.digests)}}


# -------------------------------------------------------------------------- alignment

def _aligner(sft: dict[str, Any], sae_state: dict[str, Any], cache_state: dict[str, Any],
             preferences: pd.DataFrame, p: FPOParams, method: str):
    """``run(lr, seed)``: align the SFT model with ``method`` at learning rate ``lr`` from
    ``seed`` alone (the SFT model is copied, never changed), and the world and dev pairs the
    learning rate is picked on."""
    from icml25.core.device import seed_everything
    from icml25.pipelines.fpo.align import ReferenceCache, align
    world = make_world()
    sft_model = _model(p, world, sft)
    sae = _sae(sae_state)
    st = cache_state["state_dict"]
    cache = ReferenceCache(st["avg_w"], st["avg_l"], st["feat_w"], st["feat_l"],
                           st.get("fsum_w"), st.get("fsum_l"), st.get("pair_digests"))
    train = frame_to_pairs(preferences, world, "train", p.model.max_seq_len)
    cache.check_pairs(train, "fpo.reference_cache (catalog_fpo.yml)")
    dev = frame_to_pairs(preferences, world, "dev", p.model.max_seq_len)
    settings = _loss_settings(p, method)
    a = p.align

    def run(lr: float, seed: int):
        seed_everything(seed)
        return align(method, sft_model, sae, cache, train, world, p.sae.layer, settings, lr,
                     a.epochs, a.batch_size, a.warmup, seed, p.progress,
                     desc=f"fpo {method} lr {lr:g} seed {seed}")

    return run, world, dev


def _policy_record(result, method: str, seed: int, lr: float,
                   dev_reward_by_lr: dict[str, float]) -> dict[str, Any]:
    return {"state_dict": result.policy.state_dict(),
            "metadata": {"method": method, "seed": seed, "lr": lr,
                         "dev_reward_by_lr": dev_reward_by_lr,
                         "history": result.history, "step_ms": result.step_ms,
                         "saved_bytes": result.saved_bytes,
                         "ref_forwards_per_step": result.ref_forwards_per_step}}


def select_learning_rate(sft: dict[str, Any], sae_state: dict[str, Any],
                         cache_state: dict[str, Any], preferences: pd.DataFrame,
                         params: dict[str, Any], method: str) -> dict[str, Any]:
    """One method's learning rate, picked on dev with the first seed (greedy mean r* of each
    ``align.lr_grid`` entry): ``{seed_<first>: policy state + training log}`` of the first seed
    trained at the chosen rate, whose metadata (``lr``, ``dev_reward_by_lr``) every seed shard
    of the method trains at; empty when the method is not in ``align.methods``."""
    from icml25.core.device import set_threads
    from icml25.pipelines.fpo.align import mean_reward
    p = _params(params)
    set_threads(p.num_threads)
    if method not in p.align.methods:
        return {}
    run, world, dev = _aligner(sft, sae_state, cache_state, preferences, p, method)
    dev_prompts = dev.prompts[:p.align.n_dev_select]
    first = p.seeds[0]
    grid = {}
    for lr in p.align.lr_grid:
        result = run(lr, first)
        grid[lr] = (mean_reward(result.policy, world, dev_prompts, p.pref.max_new, first), result)
        logger.info("fpo %s lr %g: dev mean r* %.3f", method, lr, grid[lr][0])
    best_lr = max(grid, key=lambda lr: grid[lr][0])
    return {f"seed_{first}": _policy_record(grid[best_lr][1], method, first, best_lr,
                                            {f"{lr:g}": v for lr, (v, _) in grid.items()})}


def align_method(sft: dict[str, Any], sae_state: dict[str, Any], cache_state: dict[str, Any],
                 preferences: pd.DataFrame, selection: dict[str, Any], params: dict[str, Any],
                 method: str, shard: int = 0, n_shards: int = 1) -> dict[str, Any]:
    """One method trained at the learning rate ``selection`` picked (:func:`select_learning_rate`)
    for each seed of shard ``shard`` of ``n_shards`` (``seeds[shard::n_shards]``,
    :func:`icml25.core.sweep.shard_seeds`); the first seed's policy is the selection's own run.
    Returns ``{seed_<s>: policy state + training log}``, empty when the shard has no seed or the
    method is not in ``align.methods``. Each seed's policy depends on that seed alone."""
    from icml25.core.device import set_threads
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if method not in p.align.methods or not seeds:
        return {}
    first = p.seeds[0]
    if list(selection) != [f"seed_{first}"]:
        raise ValueError(f"fpo {method}: the learning-rate selection holds {sorted(selection)}, "
                         f"expected the first seed's policy seed_{first}; re-run select_lr")
    chosen = _entry(selection[f"seed_{first}"])
    best_lr, by_lr = chosen["metadata"]["lr"], chosen["metadata"]["dev_reward_by_lr"]
    set_threads(p.num_threads)
    run = None
    out = {}
    for seed in seeds:
        if seed == first:
            out[f"seed_{seed}"] = chosen
            continue
        if run is None:
            run, _, _ = _aligner(sft, sae_state, cache_state, preferences, p, method)
        out[f"seed_{seed}"] = _policy_record(run(best_lr, seed), method, seed, best_lr, by_lr)
    return out


def _merge_policy_shards(policies: tuple[dict[str, Any], ...]
                         ) -> list[tuple[str, dict[str, Any]]]:
    """Every method's policies from its seed shards, method by method in the order the
    methods first appear and by partition name within one, as the unsharded loop read them."""
    by_method: dict[str, dict[str, dict[str, Any]]] = {}
    for bundle in policies:
        for key, value in bundle.items():
            entry = _entry(value)
            seen = by_method.setdefault(entry["metadata"]["method"], {})
            if key in seen:
                raise ValueError(f"fpo: {entry['metadata']['method']} {key} found in two seed "
                                 f"shards")
            seen[key] = entry
    return [(key, bundle[key]) for bundle in by_method.values() for key in sorted(bundle)]


# ------------------------------------------------------------------------- evaluation

def _entry(value: Any) -> dict[str, Any]:
    return value() if callable(value) else value


def evaluate_policies(sft: dict[str, Any], sae_state: dict[str, Any], preferences: pd.DataFrame,
                      params: dict[str, Any], *policies: dict[str, Any]
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generations of SFT and every aligned policy (``policies``: every method's seed shards) on
    the evaluation prompts at each temperature, judged by r*; returns (per-response table,
    per-variant-seed metric table)."""
    from icml25.core.device import set_threads
    from icml25.pipelines.fpo.evaluate import (
        bootstrap_ci,
        diversity,
        drift,
        length_controlled_win_rate,
        length_matched_win_rate,
        pair_accuracy,
        win_scores,
    )
    from icml25.pipelines.fpo.lm import generate
    p = _params(params)
    set_threads(p.num_threads)
    world = make_world()
    sft_model = _model(p, world, sft)
    sae = _sae(sae_state)
    dev = frame_to_pairs(preferences, world, "dev", p.model.max_seq_len)
    rng = np.random.default_rng(p.data_seed + 99)
    prompts = ([sample_prompt(world, rng) for _ in range(p.eval.n_prompts)]
               + [sample_prompt(world, rng, hard=True) for _ in range(p.eval.n_hard)])
    pids = [world.ids(pr.tokens()) for pr in prompts]
    models: dict[str, dict[int, tuple[Any, dict[str, Any]]]] = {"sft": {}}
    for seed in p.seeds:
        models["sft"][seed] = (sft_model, {"step_ms": np.nan, "saved_bytes": np.nan,
                                           "ref_forwards_per_step": np.nan, "lr": np.nan})
    for _, entry in _merge_policy_shards(policies):
        meta = entry["metadata"]
        model = _model(p, world, entry)
        models.setdefault(meta["method"], {})[int(meta["seed"])] = (model, meta)
    gens, rows = [], []
    rewards: dict[tuple[str, int, float], np.ndarray] = {}
    lengths: dict[tuple[str, int, float], np.ndarray] = {}
    n_jobs = sum(len(v) for v in models.values()) * len(p.eval.temperatures)
    done = 0
    for variant, by_seed in models.items():
        for seed, (model, _) in by_seed.items():
            for ti, temp in enumerate(p.eval.temperatures):
                outs = generate(model, pids, world, p.pref.max_new, temp,
                                seed * 101 + ti, progress=False)
                r = np.array([reward(world, pr, world.words(o))
                              for pr, o in zip(prompts, outs, strict=True)])
                ln = np.array([len([t for t in o if t != world.index[EOS]]) for o in outs])
                rewards[(variant, seed, temp)], lengths[(variant, seed, temp)] = r, ln
                gens += [{"variant": variant, "seed": seed, "temperature": temp, "prompt": i,
                          "hard": i >= p.eval.n_prompts, "response": " ".join(world.words(o)),
                          "reward": float(ri)} for i, (o, ri) in enumerate(zip(outs, r,
                                                                                 strict=True))]
                done += 1
                if p.progress:
                    logger.info("fpo evaluation %d/%d: %s seed %d T=%g mean r* %.3f", done,
                                n_jobs, variant, seed, temp, r.mean())
    for variant, by_seed in models.items():
        for seed, (model, meta) in by_seed.items():
            row: dict[str, Any] = {"variant": variant, "seed": seed}
            for temp in p.eval.temperatures:
                t = f"t{temp:g}"
                r, ln = rewards[(variant, seed, temp)], lengths[(variant, seed, temp)]
                r_sft, ln_sft = rewards[("sft", seed, temp)], lengths[("sft", seed, temp)]
                wins = win_scores(r, r_sft)
                lo, hi = bootstrap_ci(wins, p.eval.n_boot, seed)
                matched, n_matched = length_matched_win_rate(wins, ln, ln_sft,
                                                             p.eval.length_match_tol)
                row |= {f"mean_reward_{t}": float(r.mean()),
                        f"score_1_10_{t}": float(rescale_reward(r.mean())),
                        f"mean_reward_hard_{t}": float(r[p.eval.n_prompts:].mean())
                        if p.eval.n_hard else float("nan"),
                        f"win_vs_sft_{t}": float(wins.mean()), f"win_vs_sft_{t}_ci_low": lo,
                        f"win_vs_sft_{t}_ci_high": hi,
                        f"lc_win_vs_sft_{t}": length_controlled_win_rate(wins, ln, ln_sft),
                        f"len_matched_win_vs_sft_{t}": matched,
                        f"len_matched_share_vs_sft_{t}": n_matched / len(wins),
                        f"tie_rate_vs_sft_{t}": float((wins == 0.5).mean()),
                        f"mean_length_{t}": float(ln.mean())}
                if ("fpo", seed, temp) in rewards:
                    row[f"fpo_win_rate_against_{t}"] = float(
                        win_scores(rewards[("fpo", seed, temp)], r).mean())
            sample_t = max(p.eval.temperatures)
            n_div = min(p.eval.n_diversity, len(pids))
            outs = generate(model, pids[:n_div], world, p.pref.max_new, sample_t, seed * 7 + 3)
            row |= diversity(model, pids[:n_div], outs, world)
            row["accuracy"] = pair_accuracy(model, dev, world)
            row |= drift(model, sft_model, sae, dev, world, p.sae.layer, p.loss.fpo.k)
            row |= {"step_ms": float(meta.get("step_ms", np.nan)),
                    "saved_mib": float(meta.get("saved_bytes", np.nan)) / 2 ** 20,
                    "ref_forwards_per_step": float(meta.get("ref_forwards_per_step", np.nan)),
                    "lr": float(meta.get("lr", np.nan))}
            rows.append(row)
    table = pd.DataFrame(rows)
    simpo = table[table["variant"] == "simpo"].set_index("seed")["step_ms"]
    table["step_time_ratio_to_simpo"] = [
        row.step_ms / simpo[row.seed] if row.seed in simpo.index else np.nan
        for row in table.itertuples()]
    return pd.DataFrame(gens), table


def prompt_metrics(generations: pd.DataFrame, metrics: dict[str, dict[str, list[float]]],
                   claims: list[dict[str, Any]]) -> dict[str, Any]:
    """The metrics the claims are judged on: the per-seed metrics, except that a metric a claim
    pairs over the evaluation prompts (``unit: prompt``) becomes ``{prompt: [per-seed values]}``
    from the judged generations — ``mean_reward_<t>`` (r* of the response),
    ``win_vs_sft_<t>`` (score against SFT's response of the same seed) and
    ``fpo_win_rate_against_<t>`` (FPO's score against the variant's response of the same seed);
    a seed's mean over the prompts is that seed's metric."""
    from icml25.pipelines.fpo.evaluate import win_scores
    per_prompt = {c["metric"] for c in claims if c.get("unit") is not None}
    for c in claims:
        unit = c.get("unit")
        if unit is not None and unit != "prompt":
            raise ValueError(f"fpo: claim {c['claim']!r} pairs over {unit!r}; only 'prompt'")
        if unit is None and c["metric"] in per_prompt:
            raise ValueError(f"fpo: {c['metric']!r} judged both per prompt and per seed; give "
                             "every claim on it unit: prompt")
    out: dict[str, Any] = {v: dict(m) for v, m in metrics.items()}
    if not per_prompt:
        return out
    temps = {f"t{t:g}": float(t) for t in generations["temperature"].unique()}
    rewards: dict[tuple[str, str], np.ndarray] = {}  # (variant, t) -> seeds x prompts
    for (variant, temp), g in generations.groupby(["variant", "temperature"], sort=False):
        table = g.pivot(index="seed", columns="prompt", values="reward").sort_index()
        rewards[(variant, f"t{temp:g}")] = table.to_numpy(dtype=float)
    for metric in per_prompt:
        kind, _, t = metric.rpartition("_")
        if t not in temps or kind not in ("mean_reward", "win_vs_sft", "fpo_win_rate_against"):
            raise ValueError(f"fpo: no per-prompt values for {metric!r}; per-prompt metrics are "
                             f"mean_reward_, win_vs_sft_, fpo_win_rate_against_ at {sorted(temps)}")
        for variant in metrics:
            r = rewards[(variant, t)]
            if kind == "mean_reward":
                vals = r
            elif kind == "win_vs_sft":
                vals = win_scores(r, rewards[("sft", t)])
            else:
                vals = win_scores(rewards[("fpo", t)], r)
            out[variant][metric] = {f"p{i:04d}": vals[:, i].tolist()
                                    for i in range(vals.shape[1])}
    return out


def judge_claims(table: pd.DataFrame, generations: pd.DataFrame, sae_report: dict[str, Any],
                 preference_report: dict[str, Any], params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float = 0.90
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the evaluation table; MLflow child runs.

    Reward and win-rate claims with ``unit: prompt`` pair the variants over the evaluation
    prompts (each prompt's value averaged over the seeds, :func:`prompt_metrics`); every other
    claim pairs over the seeds."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    if table.empty:
        raise ValueError("fpo evaluation table is empty")
    metric_cols = [c for c in table.columns if c not in ("variant", "seed")]
    metrics = {v: {c: g.sort_values("seed")[c].astype(float).tolist() for c in metric_cols}
               for v, g in table.groupby("variant", sort=False)}
    seeds_of = {v: sorted(int(s) for s in g["seed"]) for v, g in table.groupby("variant")}
    specs = [c.model_dump() for c in p.claims]
    claims = claims_report(PIPELINE, specs, prompt_metrics(generations, metrics, specs),
                           run_info, p.seeds, title="FPO: feature-level constrained preference "
                           "optimisation (ICML 2025)", figures=["figures/fpo_overview.png"],
                           confidence=confidence, seeds_of=seeds_of)
    report = metrics_report(PIPELINE, metrics, run_info, p.seeds,
                            extra={"sae": sae_report, "preferences": preference_report})
    if mlflow.active_run() is not None:
        roles = {v: "method" if v == "fpo" else "baseline" for v in metrics}
        means = seed_means(metrics)
        loss_params = {m: getattr(p.loss, m).model_dump() for m in p.align.methods}
        log_variants(PIPELINE, means, roles,
                     params_by_variant={v: loss_params.get(v, {"kind": "sft"}) for v in metrics})
        log_claim_counts(claims, sae_fvu=sae_report["fvu"], sae_l0=sae_report["l0"])
    return report, claims


def plot_overview(table: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Mean reward, win rate vs SFT, sequential KL and feature MSE per method (seed means with
    the spread), the paper's Fig. 3-4 quantities side by side."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _params(params)
    order = ["sft", *[m for m in ("dpo", "simpo", "tdpo1", "tdpo2", "fpo")
                      if m in p.align.methods]]
    panels = [("mean_reward_t0", "mean r* (greedy)"), ("win_vs_sft_t0", "win rate vs SFT"),
              ("seq_kl", "sequential KL to reference"), ("feature_mse", "SAE feature MSE"),
              ("step_ms", "step time (ms)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.2))
    for ax, (col, title) in zip(axes, panels, strict=True):
        g = table.groupby("variant")[col]
        mean, std = g.mean().reindex(order), g.std().reindex(order).fillna(0)
        colors = ["#c0392b" if v == "fpo" else "#7f8c8d" for v in order]
        ax.bar(order, mean.to_numpy(), yerr=std.to_numpy(), color=colors, capsize=3)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
        if col == "win_vs_sft_t0":
            ax.axhline(0.5, color="k", lw=0.8, ls="--")
    fig.suptitle("fpo — methods on the synthetic preference task (mean ± sd over seeds)",
                 fontsize=10)
    fig.tight_layout()
    return {"fpo_overview.png": fig}

