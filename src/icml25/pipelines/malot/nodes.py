"""Kedro nodes of the malot pipeline: thin wrappers around the method modules
(docs/papers/malot.md). Each node validates ``params:malot`` into :class:`MalotParams` first."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.pipelines.malot.params import LOT_VARIANTS, ROLES, VARIANTS, MalotParams
from icml25.pipelines.malot.synthetic import correction_records, generate_theorems

if TYPE_CHECKING:
    from icml25.pipelines.malot.minilean import Settings

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")

logger = logging.getLogger(__name__)
PIPELINE = "malot"
MINIF2F_FIELDS = ("id", "split", "formal_statement", "informal_stmt")
#: Environment variable naming the miniF2F file when ``malot.minif2f.path`` is left at its
#: default (a clone outside the shared workspace points it at its own copy).
MINIF2F_ENV = "ICML25_MINIF2F"
#: Offset between the LoT agents' generator seeds of successive evaluation sets (synthetic,
#: miniF2F): each set samples from its own stream.
LOT_SET_SEED_STRIDE = 1_000_003


def _params(params: dict[str, Any]) -> MalotParams:
    return validate_parameters(MalotParams, params, PIPELINE)


def _settings(p: MalotParams) -> Settings:
    from icml25.pipelines.malot.minilean import Settings
    return Settings(z3_timeout_s=p.verifier.z3_timeout_s, proof_timeout_s=p.verifier.timeout_s,
                    z3_rlimit=p.verifier.z3_rlimit, proof_rlimit=p.verifier.proof_rlimit,
                    max_steps=p.verifier.max_steps, max_chars=p.verifier.max_chars)


# ------------------------------------------------------------------------------------ data
def read_minif2f(path: Path) -> pd.DataFrame:
    """miniF2F records (one JSON object a line) as (split, name, statement, nl); a corrupt line,
    a missing field or an empty file is an error naming the line."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not valid JSON ({err.msg})") from None
        missing = [f for f in MINIF2F_FIELDS if f not in record]
        if missing:
            raise ValueError(f"{path}:{number}: missing fields {missing}")
        statement = str(record["formal_statement"])
        cut = statement.rfind(":=")
        if cut < 0:
            raise ValueError(f"{path}:{number}: formal_statement has no ':='")
        rows.append({"split": record["split"], "name": record["id"],
                     "statement": statement[:cut].rstrip() + " := by",
                     "nl": str(record["informal_stmt"])})
    if not rows:
        raise ValueError(f"{path}: no miniF2F records")
    return pd.DataFrame(rows)


def minif2f_path(p: MalotParams) -> Path:
    """``malot.minif2f.path``; when left at its default, ``$ICML25_MINIF2F`` overrides it."""
    from icml25.pipelines.malot.params import MiniF2FParams

    default = MiniF2FParams.model_fields["path"].default
    env = os.environ.get(MINIF2F_ENV)
    if p.minif2f.path == default and env:
        return Path(env).expanduser()
    return Path(p.minif2f.path)


def load_minif2f(params: dict[str, Any]) -> pd.DataFrame:
    """miniF2F statements from ``malot.minif2f.path`` (never copied into the project); an empty
    table when the file is absent, unless ``malot.minif2f.required``."""
    p = _params(params)
    path = minif2f_path(p)
    if not path.exists():
        if p.minif2f.required:
            raise FileNotFoundError(f"malot.minif2f.path: {path} does not exist (or set "
                                    f"${MINIF2F_ENV})")
        logger.warning("malot: miniF2F file %s absent; evaluating on synthetic theorems only",
                       path)
        return pd.DataFrame(columns=["split", "name", "statement", "nl"])
    frame = read_minif2f(path)
    return frame[frame["split"].isin(p.minif2f.splits)].reset_index(drop=True)


def parse_fragment(minif2f: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Per miniF2F statement: inside MiniLean's fragment or not, and why (coverage metric)."""
    from icml25.pipelines.malot.lean_syntax import OutOfFragment, parse_statement
    p = _params(params)
    rows = []
    for row in tqdm(minif2f.itertuples(), total=len(minif2f), desc="malot: fragment",
                    disable=not p.progress):
        try:
            parse_statement(row.statement)
            rows.append({"split": row.split, "name": row.name, "in_fragment": True, "reason": ""})
        except OutOfFragment as err:
            rows.append({"split": row.split, "name": row.name, "in_fragment": False,
                         "reason": err.construct})
    frame = pd.DataFrame(rows, columns=["split", "name", "in_fragment", "reason"])
    for split, group in frame.groupby("split"):
        logger.info("malot: MiniLean covers %d/%d miniF2F-%s statements", group["in_fragment"].sum(),
                    len(group), split)
    return frame


def generate_synthetic(params: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training and held-out synthetic theorems (disjoint seeds) and synthetic LoT-CD records."""
    p = _params(params)
    s, settings = p.synth, _settings(p)
    families = tuple(s.families)
    train = generate_theorems(s.n_train, s.seed, "train", s.coef_max, s.max_vars, families,
                              settings)
    heldout = generate_theorems(s.n_heldout, s.seed + 10_000, "heldout", s.coef_max, s.max_vars,
                                families, settings)
    theorems = pd.DataFrame([{**t, "split": "train"} for t in train] +
                            [{**t, "split": "heldout"} for t in heldout])
    heldout_statements = set(theorems.loc[theorems["split"] == "heldout", "statement"])
    leaked = [t["name"] for t in train if t["statement"] in heldout_statements]
    if leaked:
        logger.info("malot: %d training statements coincide with held-out ones; dropped",
                    len(leaked))
        theorems = theorems[~theorems["name"].isin(leaked)].reset_index(drop=True)
    records = correction_records([t for t in train if t["name"] not in leaked],
                                 s.corrections_per_theorem, s.seed + 20_000, settings)
    corrections = pd.DataFrame(records, columns=["name", "family", "statement", "nl",
                                                 "wrong_proof", "mutation", "errors", "proof"])
    return theorems, corrections


def evaluation_set(theorems: pd.DataFrame, minif2f: pd.DataFrame, coverage: pd.DataFrame,
                   p: MalotParams) -> list[dict[str, Any]]:
    """Held-out synthetic theorems plus the in-fragment miniF2F statements of the chosen split."""
    rows = [{**r, "set": "synthetic"} for r in
            theorems[theorems["split"] == "heldout"].to_dict("records")]
    if len(minif2f):
        inside = set(coverage.loc[coverage["in_fragment"] &
                                  (coverage["split"] == p.minif2f.evaluate_split), "name"])
        chosen = minif2f[minif2f["name"].isin(inside) &
                         (minif2f["split"] == p.minif2f.evaluate_split)]
        if p.minif2f.max_theorems:
            chosen = chosen.head(p.minif2f.max_theorems)
        rows += [{"name": r["name"], "statement": r["statement"], "nl": r["nl"],
                  "family": "minif2f", "set": "minif2f"} for r in chosen.to_dict("records")]
    return rows


def _agents(p: MalotParams, seed: int, fewshots: list[dict[str, Any]],
            endpoint: dict[str, Any] | None = None):
    if p.agent.backend == "symbolic":
        from icml25.pipelines.malot.symbolic_agent import PortfolioProver, RuleCorrector

        return PortfolioProver(seed), RuleCorrector(seed + 1)
    from icml25.pipelines.malot.model_agent import make_model_agent

    agent = make_model_agent(p.agent, seed, fewshots, credentials=endpoint or None)
    return agent, agent


def run_variants(theorems: pd.DataFrame, minif2f: pd.DataFrame, coverage: pd.DataFrame,
                 params: dict[str, Any], endpoint: dict[str, Any] | None = None,
                 shard: int = 0, n_shards: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MA-LoT (``x + k × y``) and whole-proof sampling (pass@(x + k·y)) on every evaluation
    theorem for the seeds of shard ``shard`` of ``n_shards`` (``seeds[shard::n_shards]``,
    :func:`icml25.core.sweep.shard_seeds`); returns every attempt and each theorem's solving
    round. The agents are seeded per (seed, theorem) and the verifier's cache only saves work,
    so a seed's rows do not depend on the shard; empty tables for a shard without a seed.
    ``endpoint`` is Kedro's ``malot_endpoint`` credentials entry (catalog ``malot.endpoint``),
    used by ``agent.backend: openai``."""
    from icml25.pipelines.malot.loop import ma_lot, whole_proof
    from icml25.pipelines.malot.verifier import make_verifier
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    b = p.budget
    verifier = make_verifier(p.verifier.backend, _settings(p), p.verifier.lean_project_dir,
                             p.verifier.timeout_s, p.verifier.workers, p.verifier.memory_mb)
    tasks = evaluation_set(theorems, minif2f, coverage, p)
    fewshots = theorems[theorems["split"] == "train"].head(64).to_dict("records")
    if not tasks:
        raise ValueError("malot: no evaluation theorems (synth.n_heldout and miniF2F are empty)")
    if not seeds:
        return pd.DataFrame(), pd.DataFrame()
    attempts, solved = [], []
    bar = tqdm(total=len(seeds) * len(VARIANTS) * len(tasks),
               desc=f"malot: proving (seed shard {shard})", disable=not p.progress)
    for seed in seeds:
        for variant in VARIANTS:
            for i, thm in enumerate(tasks):
                key = seed * 1_000_003 + i * 7919
                prover, corrector = _agents(p, key, fewshots, endpoint)
                if variant == "ma_lot":
                    out = ma_lot(thm, prover, corrector, verifier, b.x, b.rounds, b.y,
                                 b.corrections_per_proof, np.random.default_rng(key))
                else:
                    out = whole_proof(thm, prover, verifier, b.x, b.rounds, b.y)
                tag = {"variant": variant, "seed": seed, "set": thm["set"],
                       "family": thm["family"]}
                attempts += [{**tag, **a} for a in out["attempts"]]
                solved.append({**tag, "name": thm["name"], "generations": out["generations"],
                               "solved_round": (-1 if out["solved_round"] is None
                                                else out["solved_round"])})
                bar.update()
    bar.close()
    logger.info("malot: %d verifier calls (%d attempts, cache by sha256)", verifier.calls,
                len(attempts))
    return pd.DataFrame(attempts), pd.DataFrame(solved)


# ---------------------------------------------------------------- the LoT-Solver trained here
def _lot_stages(theorems: pd.DataFrame, corrections: pd.DataFrame):
    from icml25.pipelines.malot.lot_model import stage_examples

    train = theorems[theorems["split"] == "train"].to_dict("records")
    return stage_examples(train, corrections.to_dict("records"))


def train_lot_solver(theorems: pd.DataFrame, corrections: pd.DataFrame,
                     params: dict[str, Any], shard: int = 0, n_shards: int = 1
                     ) -> tuple[dict[str, Any], pd.DataFrame]:
    """One small LoT-Solver per seed of shard ``shard`` of ``n_shards`` (``seeds[shard::
    n_shards]``, :func:`icml25.core.sweep.shard_seeds`), trained with the LoT-TL stages on the
    training theorems and correction records (never on held-out ones), plus its
    no-correction-data ablation. The tokenizer depends on the data alone and every seed starts
    from ``seed_everything``, so a seed's models do not depend on the shard; nothing for a shard
    without a seed."""
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.malot.lot_model import (
        CD_PLACEHOLDER,
        OPENER,
        PLACEHOLDER,
        LeanTokenizer,
        RecipeConfig,
        train_recipe,
    )

    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not p.lot.enabled or not seeds:
        return {}, pd.DataFrame(columns=["seed", "phase", "step", "train_loss"])
    set_threads(p.lot.num_threads)
    stages = _lot_stages(theorems, corrections)
    tok = LeanTokenizer.train([f"{a} {b}" for pairs in stages.values() for a, b in pairs]
                              + [OPENER, PLACEHOLDER, CD_PLACEHOLDER])
    cfg = RecipeConfig(**{k: getattr(p.lot, k) for k in RecipeConfig.__dataclass_fields__})
    logger.info("malot: LoT-TL data: %s examples; vocabulary %d tokens",
                {k: len(v) for k, v in stages.items()}, len(tok))
    models, rows = {}, []
    for seed in seeds:
        seed_everything(seed)
        trained, history = train_recipe(tok, stages, cfg, seed, progress=p.progress)
        models[seed] = {k: {n: t.detach().clone() for n, t in m.state_dict().items()}
                        for k, m in trained.items()}
        rows += [{"seed": seed, **h} for h in history]
    bundle = {"vocab": tok.vocab, "config": dict(cfg.__dict__), "models": models}
    return bundle, pd.DataFrame(rows, columns=["seed", "phase", "step", "train_loss", "lr"])


def _load_lot(bundle: dict[str, Any], seed: int, which: str):
    from icml25.pipelines.malot.lot_model import LeanTokenizer, build_model

    tok = LeanTokenizer(bundle["vocab"])
    c = bundle["config"]
    model = build_model(len(tok), c["d_model"], c["n_layers"], c["n_heads"], c["d_ff"],
                        c["max_seq_len"])
    model.load_state_dict(bundle["models"][seed][which])
    return model.eval(), tok


def run_lot_variants(bundle: dict[str, Any], theorems: pd.DataFrame, minif2f: pd.DataFrame,
                     coverage: pd.DataFrame, params: dict[str, Any]
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trained models (of one seed shard: ``bundle`` holds the shard's seeds) in the MA-LoT
    loop and its baselines/ablations at equal generation count, on the same evaluation theorems
    as :func:`run_variants`; every agent samples from its own generator (seed, variant and
    evaluation set), so a synthetic theorem's samples are the same with or without miniF2F."""
    from icml25.core.device import set_threads
    from icml25.pipelines.malot.loop import ma_lot_many, whole_proof_many
    from icml25.pipelines.malot.lot_model import LotAgent
    from icml25.pipelines.malot.verifier import make_verifier

    p = _params(params)
    empty = pd.DataFrame(columns=["variant", "seed", "set", "family", "name", "generations",
                                  "solved_round", "tokens"])
    if not p.lot.enabled or not bundle:
        return pd.DataFrame(), empty
    set_threads(p.lot.num_threads)
    b, lot = p.budget, p.lot
    verifier = make_verifier(p.verifier.backend, _settings(p), p.verifier.lean_project_dir,
                             p.verifier.timeout_s, p.verifier.workers, p.verifier.memory_mb)
    tasks = evaluation_set(theorems, minif2f, coverage, p)
    plan = {  # variant: (model, prover CoT, corrector CoT, loop)
        "lot_ma_lot": ("full", True, True, "ma_lot"),
        "lot_whole_proof": ("full", True, True, "whole_proof"),
        "lot_selfcorrect_nocot": ("full", True, False, "ma_lot"),
        "lot_cot_off": ("full", False, False, "whole_proof"),
        "lot_no_cd_ma_lot": ("no_cd", True, True, "ma_lot"),
    }
    attempts, solved = [], []
    seeds = list(bundle["models"])
    bar = tqdm(total=len(seeds) * len(plan), desc="malot: LoT-Solver variants",
               disable=not p.progress)
    sets = list(dict.fromkeys(t["set"] for t in tasks))
    for seed in seeds:
        for variant, (which, cot, ccot, loop) in plan.items():
            model, tok = _load_lot(bundle, seed, which)
            tokens, overlong = 0, 0
            outs: list[dict[str, Any]] = [{} for _ in tasks]
            for k, name in enumerate(sets):
                # one agent (one sampling generator) per evaluation set, so the synthetic
                # theorems' samples do not depend on whether miniF2F joins the evaluation
                index = [i for i, t in enumerate(tasks) if t["set"] == name]
                part = [tasks[i] for i in index]
                agent = LotAgent(model, tok, seed * 7 + list(plan).index(variant)
                                 + k * LOT_SET_SEED_STRIDE, lot.temperature, lot.top_p,
                                 lot.thought_tokens, lot.proof_tokens, with_cot=cot,
                                 corrector_cot=ccot, batch_size=lot.sample_batch)
                if loop == "ma_lot":
                    rngs = [np.random.default_rng(seed * 1_000_003 + i * 7919) for i in index]
                    got = ma_lot_many(part, agent, verifier, b.x, b.rounds, b.y,
                                      b.corrections_per_proof, rngs)
                else:
                    got = whole_proof_many(part, agent, verifier, b.x, b.rounds, b.y)
                for i, out in zip(index, got, strict=True):
                    outs[i] = out
                tokens += agent.tokens_generated
                overlong += agent.overlong
            tokens = tokens / max(len(tasks), 1)
            for thm, out in zip(tasks, outs, strict=True):
                tag = {"variant": variant, "seed": seed, "set": thm["set"],
                       "family": thm["family"]}
                attempts += [{**tag, **a} for a in out["attempts"]]
                solved.append({**tag, "name": thm["name"], "generations": out["generations"],
                               "solved_round": (-1 if out["solved_round"] is None
                                                else out["solved_round"]), "tokens": tokens})
            if overlong:
                logger.info("malot: %s seed %d: %d prompts longer than the model's context "
                            "(answered with an empty proof)", variant, seed, overlong)
            bar.update()
    bar.close()
    return pd.DataFrame(attempts), pd.DataFrame(solved)


def _by_seed(tables: tuple[pd.DataFrame, ...], seeds: list[int], name: str,
             columns: list[str] | None = None) -> pd.DataFrame:
    """One table from the seed shards' tables (rows of a seed contiguous, seed-major as one loop
    writes them): seeds back in seed-list order (shard ``k`` of ``n`` holds ``seeds[k::n]``,
    :func:`icml25.core.sweep.interleave_frames`). No row at all gives ``columns`` (the table of a
    study that is off)."""
    if not any(len(t) for t in tables):
        return pd.DataFrame(columns=columns) if columns is not None else pd.DataFrame()
    merged = interleave_frames(tables, seeds, where=f"malot: the seed shards' {name} tables",
                               seeds_from="params:malot.seeds")
    return pd.concat(merged, ignore_index=True)


def _pairs(tables: tuple[pd.DataFrame, ...], what: str) -> tuple[tuple, tuple]:
    if len(tables) % 2:
        raise ValueError(f"malot: {len(tables)} {what} shard tables do not split into "
                         f"(attempts, solved) per shard")
    return tables[0::2], tables[1::2]


def merge_runs(params: dict[str, Any], *shard_tables: pd.DataFrame
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``attempts`` and ``solved`` of the prover variants from every seed shard's pair."""
    p = _params(params)
    attempts, solved = _pairs(shard_tables, "prover")
    return (_by_seed(attempts, p.seeds, "attempts"), _by_seed(solved, p.seeds, "solved rounds"))


def merge_lot_runs(params: dict[str, Any], *shard_tables: pd.DataFrame
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``lot_attempts`` and ``lot_solved`` from every LoT-Solver seed shard's pair; with the
    LoT-Solver off, the empty tables :func:`run_lot_variants` writes."""
    p = _params(params)
    attempts, solved = _pairs(shard_tables, "LoT-Solver")
    if not any(len(t) for t in (*attempts, *solved)):
        return run_lot_variants({}, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), params)
    return (_by_seed(attempts, p.seeds, "LoT-Solver attempts"),
            _by_seed(solved, p.seeds, "LoT-Solver solved rounds"))


def merge_lot_training(params: dict[str, Any], *shard_histories: pd.DataFrame) -> pd.DataFrame:
    """``lot_training`` (every seed's LoT-TL loss history) from every seed shard's history."""
    p = _params(params)
    return _by_seed(shard_histories, p.seeds, "LoT-Solver training histories",
                    columns=["seed", "phase", "step", "train_loss"])


def check_soundness(params: dict[str, Any]) -> pd.DataFrame:
    """MiniLean's soundness checks: the false-statement suite, the malformed proofs, the
    random-inequality property and the generated Lean-semantics family (``counterexample``:
    the statement is false, or for the family not proved true by z3)."""
    from icml25.pipelines.malot.soundness import (
        false_suite_results,
        lean_semantics_family,
        malformed_results,
        random_inequalities,
    )
    p = _params(params)
    settings = _settings(p)
    rows = [{**r, "suite": "false_statements", "counterexample": True}
            for r in false_suite_results(settings)]
    rows += [{**r, "suite": "malformed_proofs", "counterexample": True}
             for r in malformed_results(settings)]
    rows += [{**r, "suite": "random_inequalities"} for r in
             random_inequalities(p.soundness.random_inequalities, p.soundness.seed,
                                 settings=settings)]
    family = lean_semantics_family(p.soundness.lean_semantics_cases, p.soundness.seed,
                                   p.soundness.lean_semantics_proofs, settings)
    rows += [{**r, "suite": "lean_semantics", "counterexample": r["truth"] is not True}
             for r in family]
    return pd.DataFrame(rows, columns=["suite", "statement", "proof", "accepted",
                                       "counterexample", "verdict"])


# ------------------------------------------------------------------------------ evaluation
def variant_metrics(solved: pd.DataFrame, attempts: pd.DataFrame, rounds: int,
                    seeds: list[int]) -> dict[str, dict[str, list[float]]]:
    """Per variant, per seed: cumulative accuracy per round (synthetic held-out), the final
    accuracy on synthetic and miniF2F, round gains, verifier time per proof, generations."""
    from icml25.pipelines.malot.loop import cumulative_accuracy
    metrics: dict[str, dict[str, list[float]]] = {}
    present = set(solved["variant"]) if len(solved) else set()
    for variant in [v for v in ROLES if v in present]:
        out: dict[str, list[float]] = {}
        for seed in seeds:
            s = solved[(solved["variant"] == variant) & (solved["seed"] == seed)]
            a = attempts[(attempts["variant"] == variant) & (attempts["seed"] == seed)]
            syn = s[s["set"] == "synthetic"]
            curve = cumulative_accuracy([None if r < 0 else int(r) for r in syn["solved_round"]],
                                        rounds)
            for r, acc in enumerate(curve):
                out.setdefault(f"acc_minilean_round{r}", []).append(acc)
            out.setdefault("acc_minilean", []).append(curve[-1])
            for r in range(1, rounds + 1):
                out.setdefault(f"round_gain_{r}", []).append(curve[r] - curve[r - 1])
            out.setdefault("round_gain_total", []).append(curve[-1] - curve[0])
            mf = s[s["set"] == "minif2f"]
            out.setdefault("acc_minilean_minif2f", []).append(
                float((mf["solved_round"] >= 0).mean()) if len(mf) else math.nan)
            verified = a[a["verdict"] != "filtered_sorry"]
            out.setdefault("verify_time_per_proof_s", []).append(
                float(verified["verify_time"].mean()) if len(verified) else math.nan)
            out.setdefault("generations_per_theorem", []).append(float(s["generations"].mean()))
            out.setdefault("proofs_verified", []).append(float(len(verified)))
        gains = np.asarray(out["round_gain_total"])
        out["seeds_with_round_gain"] = [float((gains > 0).mean())]  # one value for the run
        out["round_gain_positive"] = [float(g > 0) for g in gains]  # per seed: 1 if rounds help
        metrics[variant] = out
    return metrics


def theorem_metrics(solved: pd.DataFrame, rounds: int, seeds: list[int]
                    ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per variant, per synthetic held-out theorem, per seed (``{variant: {metric: {theorem:
    [value per seed]}}}``): ``solved_by_theorem`` (1 if a complete proof was found within the
    whole budget, else 0; its mean over theorems is ``acc_minilean``) and the per-theorem round
    gains ``round_gain_<r>_by_theorem`` and ``round_gain_total_by_theorem`` (1 where round r,
    or the rounds together, turned the theorem from unsolved to solved). The claims pair the
    variants over these theorems: the problems, not the seeds, are the replication."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    if not len(solved):
        return out
    syn = solved[solved["set"] == "synthetic"]
    for variant in [v for v in ROLES if v in set(syn["variant"])]:
        rows = syn[syn["variant"] == variant]
        by_round: dict[int, dict[str, list[float]]] = {r: {} for r in range(rounds + 1)}
        for seed in seeds:
            s = rows[rows["seed"] == seed]
            for name, r_solved in zip(s["name"], s["solved_round"], strict=True):
                for r in range(rounds + 1):
                    by_round[r].setdefault(str(name), []).append(
                        float(0 <= int(r_solved) <= r))
        names = list(by_round[rounds])
        values = {"solved_by_theorem": {n: by_round[rounds][n] for n in names}}
        for r in range(1, rounds + 1):
            values[f"round_gain_{r}_by_theorem"] = {
                n: [b - a for a, b in zip(by_round[r - 1][n], by_round[r][n], strict=True)]
                for n in names}
        values["round_gain_total_by_theorem"] = {
            n: [b - a for a, b in zip(by_round[0][n], by_round[rounds][n], strict=True)]
            for n in names}
        out[variant] = values
    return out


def family_accuracy(solved: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per variant, per synthetic family: the share of held-out theorems solved within the
    whole budget, over theorems and seeds."""
    if not len(solved):
        return {}
    syn = solved[solved["set"] == "synthetic"]
    return {str(v): {str(f): float((g["solved_round"] >= 0).mean())
                     for f, g in rows.groupby("family")}
            for v, rows in syn.groupby("variant")}


def judge_claims(solved: pd.DataFrame, attempts: pd.DataFrame, lot_solved: pd.DataFrame,
                 lot_attempts: pd.DataFrame, coverage: pd.DataFrame, soundness: pd.DataFrame,
                 corrections: pd.DataFrame, lot_training: pd.DataFrame, params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from this run's own results; MLflow child runs.

    The claims are judged by :mod:`icml25.core.claims` at ``confidence`` (one-sided bounds):
    accuracy claims pair the variants over the synthetic held-out theorems
    (:func:`theorem_metrics`), the checker's soundness counts are exact."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    lot_tokens = ({v: float(g["tokens"].mean()) for v, g in lot_solved.groupby("variant")}
                  if len(lot_solved) else {})
    solved = pd.concat([solved, lot_solved.drop(columns=["tokens"], errors="ignore")],
                       ignore_index=True)
    attempts = pd.concat([attempts, lot_attempts], ignore_index=True)
    metrics = variant_metrics(solved, attempts, p.budget.rounds, p.seeds)
    false_rows = soundness[soundness["suite"] == "false_statements"]
    random_rows = soundness[soundness["suite"] == "random_inequalities"]
    malformed = soundness[soundness["suite"] == "malformed_proofs"]
    family = soundness[soundness["suite"] == "lean_semantics"]
    family_cases = family.drop_duplicates("statement")
    checker = {
        "false_suite_accepted": float(false_rows["accepted"].sum()),
        "false_suite_size": float(len(false_rows)),
        "malformed_accepted": float(malformed["accepted"].sum()),
        "malformed_size": float(len(malformed)),
        "random_accepted": float(random_rows["accepted"].sum()),
        "random_accepted_with_counterexample": float(
            (random_rows["accepted"] & random_rows["counterexample"]).sum()),
        "lean_semantics_cases": float(len(family_cases)),
        "lean_semantics_false_cases": float(family_cases["counterexample"].sum()),
        "lean_semantics_proofs_tried": float(len(family)),
        "lean_semantics_accepted_true": float(
            (family["accepted"] & ~family["counterexample"].astype(bool)).sum()),
        "lean_semantics_accepted_not_true": float(
            (family["accepted"] & family["counterexample"].astype(bool)).sum()),
    }
    for split, group in coverage.groupby("split"):
        checker[f"fragment_coverage_{split}"] = float(group["in_fragment"].mean())
        checker[f"fragment_in_{split}"] = float(group["in_fragment"].sum())
    by_theorem = theorem_metrics(solved, p.budget.rounds, p.seeds)
    claim_metrics = {v: {**values, **by_theorem.get(v, {})} for v, values in metrics.items()}
    claim_metrics["checker:minilean"] = checker
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], claim_metrics, run_info,
                           p.seeds, title="MA-LoT (ICML 2025)",
                           figures=["figures/rounds.png", "figures/lot_rounds.png",
                                    "figures/errors.png"],
                           confidence=confidence, seeds_of={v: p.seeds for v in metrics})
    histogram = (attempts[attempts["error_category"] != ""]
                 .groupby(["variant", "error_category"]).size().unstack(fill_value=0))
    # per-theorem values go to metrics.json's per_unit; MLflow gets the per-seed metrics only
    report = metrics_report(PIPELINE, {v: dict(claim_metrics[v]) for v in metrics}, run_info,
                            p.seeds, extra={
        "checker": checker,
        "budget": p.budget.model_dump(),
        "verifier_backend": p.verifier.backend,
        "agent_backend": p.agent.backend,
        "correction_records": len(corrections),
        "lot_generated_tokens_per_theorem": lot_tokens,
        "acc_minilean_by_family": family_accuracy(solved),
        "lot_final_train_loss": ({f"{ph}/seed{sd}": float(g["train_loss"].iloc[-1])
                                  for (ph, sd), g in lot_training.groupby(["phase", "seed"])}
                                 if len(lot_training) else {}),
        "error_categories": {v: {k: int(n) for k, n in row.items()}
                             for v, row in histogram.iterrows()},
        "fragment_out_reasons": coverage.loc[~coverage["in_fragment"], "reason"]
        .value_counts().head(15).to_dict() if len(coverage) else {},
    })
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        variant_params = {v: {"agent": p.agent.backend if v in VARIANTS else "lot_solver",
                              "verifier": p.verifier.backend, "budget": p.budget.model_dump(),
                              "kind": "prover + corrector" if "ma_lot" in v or "correct" in v
                              else "whole proof"}
                          for v in means}
        log_variants(PIPELINE, means, {v: ROLES[v] for v in means},
                     params_by_variant=variant_params)
        log_claim_counts(claims, **checker)
    return report, claims


def _accuracy_curves(ax: Any, metrics: dict[str, Any], series: list[tuple[str, str]],
                     gens: list[int], title: str, legend_size: int,
                     optional: bool = False) -> None:
    """Cumulative accuracy against generations (seed mean ± std) of each ``(variant, label)``
    in ``series``; with ``optional``, variants the run did not measure are left out."""
    for variant, label in series:
        vals = metrics["metrics"].get(variant) if optional else metrics["metrics"][variant]
        if optional and not vals:
            continue
        mean = [vals[f"acc_minilean_round{r}"] for r in range(len(gens))]
        std = [vals.get(f"acc_minilean_round{r}_std", 0.0) or 0.0 for r in range(len(gens))]
        ax.errorbar(gens, mean, yerr=std, marker="o", capsize=3, label=label)
    ax.set_xlabel("generations per theorem")
    ax.set_ylabel("cumulative accuracy (MiniLean)")
    ax.set_title(title)
    ax.legend(fontsize=legend_size)


def plot_results(metrics: dict[str, Any], attempts: pd.DataFrame,
                 params: dict[str, Any]) -> dict[str, Any]:
    """Table 2's curve (cumulative accuracy against generations) and the error histogram."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _params(params)
    b = p.budget
    gens = [b.x + r * b.y for r in range(b.rounds + 1)]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    _accuracy_curves(ax, metrics, [("ma_lot", f"MA-LoT ({b.x} + {b.rounds}×{b.y})"),
                                   ("whole_proof", "whole-proof pass@n")],
                     gens, "malot — synthetic held-out theorems", 8)
    fig.tight_layout()
    fig3, ax3 = plt.subplots(figsize=(5, 3.4))
    _accuracy_curves(ax3, metrics, [(v, v) for v in LOT_VARIANTS], gens,
                     "malot — LoT-Solver trained here, held-out theorems", 7, optional=True)
    fig3.tight_layout()
    fig2, ax2 = plt.subplots(figsize=(6, 3.4))
    errs = attempts[attempts["error_category"] != ""]
    table = errs.groupby(["error_category", "variant"]).size().unstack(fill_value=0)
    if len(table):
        table.plot.barh(ax=ax2)
    ax2.set_xlabel("failed attempts (all seeds)")
    ax2.set_title("malot — verifier error categories")
    fig2.tight_layout()
    return {"rounds.png": fig, "errors.png": fig2, "lot_rounds.png": fig3}
