"""Kedro nodes of the acorn pipeline: thin wrappers around the simulator, encoder and baselines.

Each node validates ``params:acorn`` into :class:`AcornParams`, does one step of the
pipeline and returns plain tables, dicts or state dicts.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.pipelines.acorn.params import VARIANTS, AcornParams
from icml25.pipelines.acorn.qa import TASKS

if TYPE_CHECKING:
    from icml25.pipelines.acorn.multitask import TaskData

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
torch = lazy_module("torch")
dsp = lazy_module("icml25.pipelines.acorn.dsp_baselines")
scenes = lazy_module("icml25.pipelines.acorn.scenes")

logger = logging.getLogger(__name__)
PIPELINE = "acorn"
TEST_SPLITS = ("test", "t2", "ood")
TRANSFER_TASKS = ("los", "multipath", "doa")


def _params(params: dict[str, Any]) -> AcornParams:
    return validate_parameters(AcornParams, params, PIPELINE)


def _entry(partition: Any) -> dict[str, Any]:
    """A model partition: PartitionedDataset hands out loaders, a run in memory the dict itself."""
    return partition() if callable(partition) else partition


def scene_config(p: AcornParams) -> scenes.SceneConfig:
    d = p.data
    return scenes.SceneConfig(clip_s=d.clip_s, mic_spacing=d.mic_spacing, snr_db=d.snr_db,
                              speed=d.speed, room_size=d.room_size, t60=d.t60,
                              weak_t60=d.weak_t60, strong_t60=d.strong_t60)


# ------------------------------------------------------------------------------- sources
def synthesize_speech(params: dict[str, Any]) -> dict[str, Any]:
    """Offline speech utterances (espeak-ng / flite), trimmed, unit RMS; stored as int16."""
    from icml25.pipelines.acorn.sources import speech_plan, synthesize_plan
    p = _params(params)
    plan = speech_plan(p.sources.n_utterances, list(p.sources.engines), p.sources.seed)
    audio = synthesize_plan(plan, progress=p.progress)
    peak = max(float(np.max(np.abs(a))) for a in audio)
    scale = 32000.0 / peak
    return {"index": plan.assign(n_samples=[a.size for a in audio]),
            "audio": [np.round(a * scale).astype(np.int16) for a in audio], "scale": scale}


def build_source_bank(speech: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Speech + synthetic families + packaged real clips, each item assigned to one split.

    Sirens are held out as the OOD family; packaged real recordings are test-only.
    """
    from icml25.pipelines.acorn.sources import (
        SYNTHETIC_FAMILIES,
        packaged_wavs,
        read_wav,
        split_labels,
        synthetic_source,
    )
    p = _params(params)
    rng = np.random.default_rng(p.sources.seed + 1)
    audio, rows = [], []
    for i, clip in enumerate(speech["audio"]):
        x = clip.astype(np.float32) / speech["scale"]
        if x.size == 0 or not np.all(np.isfinite(x)) or not np.any(x):
            raise ValueError(f"speech bank item {i} is empty, silent or non-finite")
        audio.append(x)
        rows.append({"family": "speech", "name": f"speech {i}"})
    n_synth = int(p.sources.synthetic_seconds * scenes.FS)
    for family in SYNTHETIC_FAMILIES:
        for j in range(p.sources.synthetic_per_family):
            audio.append(synthetic_source(family, n_synth, rng).astype(np.float32))
            rows.append({"family": family, "name": f"{family} {j}"})
    index = pd.DataFrame(rows)
    index["split"] = "train"
    for family, group in index.groupby("family"):
        if family == "siren":
            index.loc[group.index, "split"] = "ood"
        else:
            index.loc[group.index, "split"] = split_labels(len(group), p.sources.split_fractions,
                                                           rng)
    if p.sources.use_packaged_wavs:
        for name, path in packaged_wavs().items():
            audio.append(read_wav(path).astype(np.float32))
            index.loc[len(index)] = {"family": "real", "name": name, "split": "test"}
    index["n_samples"] = [a.size for a in audio]
    return {"index": index, "audio": audio}


def sample_scene_metadata(bank: dict[str, Any], params: dict[str, Any]) -> pd.DataFrame:
    """AQA-PHY metadata of every split: task, physics, label, question and answer per item."""
    p = _params(params)
    cfg, d = scene_config(p), p.data
    transfer = {t: d.n_t2 for t in TRANSFER_TASKS}
    ood = {t: d.n_ood for t in TRANSFER_TASKS}
    parts = [scenes.sample_split(d.n_train, "train", cfg, bank["index"], d.seed),
             scenes.sample_split(d.n_val, "val", cfg, bank["index"], d.seed + 1),
             scenes.sample_split(d.n_test, "test", cfg, bank["index"], d.seed + 2)]
    if d.n_t2:
        parts.append(scenes.sample_split(transfer, "t2", cfg, bank["index"], d.seed + 3,
                                         simulator="ism", source_split="test"))
    if d.n_ood:
        parts.append(scenes.sample_split(ood, "ood", cfg, bank["index"], d.seed + 4))
    meta = pd.concat(parts, ignore_index=True)
    if d.doppler_mirror_train:
        meta = _pair_train_doppler(meta)
    meta["item"] = np.arange(len(meta))   # = the row: a twin's mirror_of is its pair's item
    if d.doppler_mirror:
        meta = pd.concat([meta, _mirror_rows(meta)], ignore_index=True)
    return meta


def _mirrored(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (Doppler scenes) with the opposite radial speed: the same seed, so the same
    source, partial phases, start range and noise; approaching <-> receding, label and answer
    recomputed."""
    from icml25.pipelines.acorn.channels import doppler_shift_percent
    from icml25.pipelines.acorn.qa import answer
    rows = rows.copy()
    rows["v"] = -rows["v"].to_numpy(dtype=float)
    rows["label"] = doppler_shift_percent(rows["v"].to_numpy())
    rows["answer"] = [answer("doppler", y) for y in rows["label"]]
    return rows


def _pair_train_doppler(meta: pd.DataFrame) -> pd.DataFrame:
    """The train split's Doppler scenes as mirror pairs, their count unchanged: the first
    ceil(n/2) drawn scenes stay, the rest are replaced by the mirrors of the first ones (so the
    Doppler task trains on as many items and steps as without pairs, and every other task's
    scenes are the same draws). A twin's ``mirror_of`` is the row it mirrors."""
    rows = meta.index[(meta["split"] == "train") & (meta["task"] == "doppler")]
    keep, replace = rows[:(len(rows) + 1) // 2], rows[(len(rows) + 1) // 2:]
    meta = meta.copy()
    if "mirror_of" not in meta:
        meta["mirror_of"] = np.nan
    twins = _mirrored(meta.loc[keep[:len(replace)]])
    twins["mirror_of"] = keep[:len(replace)].to_numpy()
    twins.index = replace
    meta.loc[replace] = twins
    return meta


def _mirror_rows(meta: pd.DataFrame) -> pd.DataFrame:
    """Every test Doppler scene with the opposite radial speed (split ``mirror``; same seed,
    so the same source, partial phases and noise): approaching <-> receding, for the symmetry
    metrics. ``mirror_of`` is the test item it mirrors."""
    rows = _mirrored(meta[(meta["split"] == "test") & (meta["task"] == "doppler")])
    rows["mirror_of"] = rows["item"].to_numpy()
    rows["split"] = "mirror"
    rows["item"] = len(meta) + np.arange(len(rows))
    return rows


def _check_meta(meta: pd.DataFrame) -> None:
    if meta is None or len(meta) == 0:
        raise ValueError("acorn metadata: empty table")
    missing = {"task", "split", "label", "seed"} - set(meta.columns)
    if missing:
        raise ValueError(f"acorn metadata: missing columns {sorted(missing)}")
    if not np.all(np.isfinite(meta["label"].to_numpy(dtype=float))):
        raise ValueError("acorn metadata: labels contain NaN or inf")
    if not set(meta["task"]) <= set(TASKS):
        raise ValueError(f"acorn metadata: unknown tasks {sorted(set(meta['task']) - set(TASKS))}")


def render_clips(meta: pd.DataFrame, bank: dict[str, Any], params: dict[str, Any]
                 ) -> dict[str, np.ndarray]:
    """Render every split once per run (RAM cache, float16): {split: (n, 2, N)}."""
    p = _params(params)
    _check_meta(meta)
    clip_n = scene_config(p).clip_n
    out = {}
    for split, rows in meta.groupby("split", sort=False):
        start = time.perf_counter()
        audio = scenes.render_split(rows, bank["audio"], clip_n, progress=p.progress,
                                    desc=f"acorn render {split}", dtype=np.float16,
                                    n_jobs=p.data.n_jobs)
        seconds = time.perf_counter() - start
        logger.info("acorn render %s: %d clips in %.1f s (%.1f simulated clips/s)", split,
                    len(rows), seconds, len(rows) / max(seconds, 1e-9))
        out[str(split)] = audio
    return out


# -------------------------------------------------------------------------------- models
def _task_data(meta: pd.DataFrame, clips: dict[str, np.ndarray], split: str,
               keep_float16: bool = False) -> dict[str, TaskData]:
    """One split's clips per task. ``keep_float16``: the clips stay the cached float16 array
    (each task's rows a view of it where they are contiguous, as :func:`scenes.sample_split`
    writes them) and the training batches are cast to float32 one at a time
    (:func:`multitask.train_model`): the same values, without a float32 copy of the split (the
    paper config's 200,000 training clips of 4 s are 51 GB in float16, 102 GB in float32)."""
    from icml25.pipelines.acorn.multitask import TaskData
    rows = meta[meta["split"] == split].reset_index(drop=True)
    if len(rows) != len(clips[split]):
        raise ValueError(f"split {split}: {len(rows)} metadata rows but {len(clips[split])} clips")
    audio = torch.from_numpy(clips[split] if keep_float16 else clips[split].astype(np.float32))
    if not torch.isfinite(audio).all():
        raise ValueError(f"split {split}: clips contain NaN or inf")
    out = {}
    for task in TASKS:
        sel = np.flatnonzero(rows["task"].to_numpy() == task)
        if sel.size:
            src = (rows["source_id"].to_numpy()[sel] + 1 if task == "doppler"
                   else np.zeros(sel.size, dtype=int))
            contiguous = sel[-1] - sel[0] + 1 == sel.size
            task_audio = audio[sel[0]:sel[-1] + 1] if contiguous else audio[sel]
            out[task] = TaskData(task_audio, rows["label"].to_numpy(dtype=float)[sel], src)
    return out


def _max_tdoa(p: AcornParams) -> float:
    """The largest |TDoA| the two-mic array can produce, d·fs/c samples."""
    from icml25.pipelines.acorn.channels import FS, SPEED_OF_SOUND
    return p.data.mic_spacing * FS / SPEED_OF_SOUND


def train_variant(meta: pd.DataFrame, clips: dict[str, np.ndarray], params: dict[str, Any],
                  variant: str, shard: int = 0, n_shards: int = 1) -> dict[str, Any]:
    """Train one encoder variant once per seed of shard ``shard`` of ``n_shards``
    (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`); returns
    ``{seed_<s>: state dict + meta}``, empty for a shard without a seed. Every seed starts from
    :func:`seed_everything` and its own data order, so its model does not depend on the shard."""
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.acorn.encoder import EncoderConfig
    from icml25.pipelines.acorn.multitask import Augment, train_model
    from icml25.pipelines.acorn.sources import TONAL_CATALOGUE
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {}
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    cfg = EncoderConfig(d=p.model.d, layers=p.model.layers, heads=p.model.heads,
                        use_phase=variant == "acorn_phase", mc_mode=p.model.mc_mode,
                        phase=p.model.phase,
                        dropout=p.model.dropout, n_sources=len(TONAL_CATALOGUE) + 2,
                        swap_antisymmetric=p.model.swap_antisymmetric,
                        doa_head=p.model.doa_head if variant == "acorn_phase" else "token",
                        lag_bands=p.model.lag_head.bands, lag_channels=p.model.lag_head.channels,
                        lag_kernel=p.model.lag_head.kernel,
                        lag_temperature=p.model.lag_head.temperature,
                        lag_window=p.model.lag_head.window, max_tdoa=_max_tdoa(p),
                        doa_token_aux=p.model.doa_token_aux)
    t = p.train
    physics = Augment(swap=t.swap_augment, reverse=t.reverse_augment,
                      max_delay=t.delay_augment, max_tdoa=_max_tdoa(p),
                      unknown_source_rate=t.unknown_source_rate)
    train_data = _task_data(meta, clips, "train", keep_float16=True)
    val_data = _task_data(meta, clips, "val")
    models = {}
    for seed in seeds:
        seed_everything(seed)
        model, record = train_model(cfg, train_data, val_data, epochs=p.train.epochs,
                                    batch_size=p.train.batch_size, lr=p.train.lr,
                                    weight_decay=p.train.weight_decay, seed=seed, device=device,
                                    augment=p.train.augment, physics=physics,
                                    progress=p.progress,
                                    desc=f"acorn {variant} seed {seed}")
        logger.info("acorn %s seed %d: %d parameters, %d steps in %.0f s", variant, seed,
                    record["n_parameters"], record["steps"], record["seconds"])
        models[f"seed_{seed}"] = {"state_dict": model.state_dict(),
                                  "metadata": {"variant": variant, "seed": seed,
                                               "config": cfg.to_dict(), **record}}
    return models


def predict_variant(models: dict[str, Any], meta: pd.DataFrame, clips: dict[str, np.ndarray],
                    params: dict[str, Any], variant: str) -> pd.DataFrame:
    """Predictions of every seed's model (of one seed shard) on the test, T2 and OOD splits; an
    empty table for a shard without a model."""
    from icml25.core.device import resolve_device, set_threads
    from icml25.pipelines.acorn.encoder import AcornModel, EncoderConfig
    from icml25.pipelines.acorn.multitask import predict

    p = _params(params)
    if not models:
        return pd.DataFrame()
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    frames = []
    for key in sorted(models):
        entry = _entry(models[key])
        md = entry["metadata"]
        model = AcornModel(EncoderConfig(**md["config"]))
        model.load_state_dict(entry["state_dict"])
        model.to(device)
        stats = {k: tuple(v) for k, v in md["stats"].items()}
        for split in TEST_SPLITS:
            if split not in clips:
                continue
            rows = meta[meta["split"] == split].reset_index(drop=True)
            data = _task_data(meta, clips, split)
            preds = predict(model, data, stats, device=device)
            for task, pred in preds.items():
                items = rows.loc[rows["task"] == task, "item"].to_numpy()
                frames.append(pd.DataFrame({"variant": variant, "seed": int(md["seed"]),
                                            "split": split, "task": task, "item": items,
                                            "pred": pred}))
            if split == "test":
                frames += _symmetry_predictions(model, data, rows, stats, device, variant,
                                                int(md["seed"]))
        if "mirror" in clips:
            rows = meta[meta["split"] == "mirror"].reset_index(drop=True)
            data = {t: v for t, v in _task_data(meta, clips, "mirror").items()
                    if t == "doppler"}
            for task, pred in predict(model, data, stats, device=device).items():
                items = rows.loc[rows["task"] == task, "item"].to_numpy()
                frames.append(pd.DataFrame({"variant": variant, "seed": int(md["seed"]),
                                            "split": "mirror", "task": task, "item": items,
                                            "pred": pred}))
    return pd.concat(frames, ignore_index=True)


def _symmetry_predictions(model, data: dict[str, TaskData], rows: pd.DataFrame, stats, device,
                          variant: str, seed: int) -> list[pd.DataFrame]:
    """Predictions on the transformed test clips of :mod:`.symmetry` (splits ``sym_*``, the
    test item ids) and on the Doppler test items fed the "unknown source type" token."""
    from dataclasses import replace

    from icml25.pipelines.acorn.multitask import predict
    from icml25.pipelines.acorn.symmetry import transformed_inputs
    frames = []
    for task, d in data.items():
        items = rows.loc[rows["task"] == task, "item"].to_numpy()
        variants = {split: replace(d, audio=x)
                    for split, x in transformed_inputs(task, d.audio).items()}
        if task == "doppler":
            variants["sym_unknown"] = replace(
                d, source=np.full_like(d.source, model.unknown_source))
        for split, td in variants.items():
            pred = predict(model, {task: td}, stats, device=device)[task]
            frames.append(pd.DataFrame({"variant": variant, "seed": seed, "split": split,
                                        "task": task, "item": items, "pred": pred}))
    return frames


def merge_predictions(params: dict[str, Any], *shard_predictions: pd.DataFrame,
                      variant: str) -> pd.DataFrame:
    """One variant's predictions from its seed shards, seeds in the order :func:`predict_variant`
    over all of the variant's models writes them (by model key ``seed_<s>``, sorted), each seed's
    rows as its shard wrote them. Shard ``k`` of ``n`` must hold ``seeds[k::n]``
    (:func:`icml25.core.sweep.interleave_frames`)."""
    p = _params(params)
    stray = sorted({v for frame in shard_predictions if frame is not None and len(frame)
                    for v in frame["variant"]} - {variant})
    if stray:
        raise ValueError(f"acorn: the {variant} seed shards hold predictions of {stray}; "
                         f"re-run the seed shards")
    by_seed = interleave_frames(shard_predictions, p.seeds, where=f"acorn: the {variant} seed "
                                f"shards", seeds_from="params:acorn.seeds")
    by_key = {f"seed_{int(g['seed'].iloc[0])}": g for g in by_seed}
    return pd.concat([by_key[key] for key in sorted(by_key)], ignore_index=True)


# ----------------------------------------------------------------------------- baselines
def run_baselines(meta: pd.DataFrame, clips: dict[str, np.ndarray], params: dict[str, Any]
                  ) -> pd.DataFrame:
    """Classical DSP (GCC-PHAT, FFT peak, matched filter, logistic regression on blind
    features), the prior (majority class / training mean) and the random predictor."""
    from icml25.pipelines.acorn.sources import TONAL_CATALOGUE
    p = _params(params)
    _check_meta(meta)
    spacing = p.data.mic_spacing
    max_lag = spacing * scenes.FS / scenes.C + 1.0
    train = meta[meta["split"] == "train"]
    rows_of = {s: meta[meta["split"] == s].reset_index(drop=True) for s in clips}

    def features(split: str, task: str) -> tuple[np.ndarray, np.ndarray]:
        rows = rows_of[split]
        sel = np.flatnonzero(rows["task"].to_numpy() == task)
        x = clips[split][sel].astype(np.float64)
        return np.stack([dsp.blind_features(c, spacing) for c in x]), sel

    classifiers = {}
    for task in ("los", "multipath"):
        f, sel = features("train", task)
        classifiers[task] = dsp.fit_blind_classifier(
            f, rows_of["train"]["label"].to_numpy()[sel], seed=p.data.seed)
    from icml25.pipelines.acorn.symmetry import SPLITS as SYM_SPLITS
    from icml25.pipelines.acorn.symmetry import transformed_inputs
    all_splits = (*TEST_SPLITS, "mirror", *SYM_SPLITS)

    def predict_all(split: str, task: str, x: np.ndarray, sid: np.ndarray,
                    items: np.ndarray) -> list[pd.DataFrame]:
        """Classical DSP, prior and random predictions of one task's clips ``x``."""
        if task in classifiers:
            f = np.stack([dsp.blind_features(c, spacing) for c in x])
            pred = classifiers[task].predict(f).astype(float)
        elif task == "doa":
            pred = np.array([dsp.gcc_phat(c[0], c[1], max_lag)[0] for c in x])
        elif task == "doppler" and split == "sym_unknown":
            # FFT peak needs the rest frequency of a named source; with an unknown source
            # type the classical method has none and answers the training mean
            pred = np.full(len(x), float(np.mean(train.loc[train["task"] == task, "label"])))
        elif task == "doppler":
            pred = np.array([dsp.doppler_fft_peak(c, TONAL_CATALOGUE[int(s)])
                             for c, s in zip(x, sid, strict=True)])
        else:
            pred = np.array([dsp.matched_filter_range(c) for c in x])
        out = [pd.DataFrame({"variant": "classical_dsp", "seed": 0, "split": split,
                             "task": task, "item": items, "pred": pred})]
        y_train = train.loc[train["task"] == task, "label"].to_numpy(dtype=float)
        if task in ("los", "multipath"):
            prior = float(np.bincount(y_train.astype(int)).argmax())
        else:
            prior = float(np.mean(y_train))
        out.append(pd.DataFrame({"variant": "prior", "seed": 0, "split": split, "task": task,
                                 "item": items, "pred": prior}))
        for seed in p.seeds:
            rng = np.random.default_rng([seed, TASKS.index(task), all_splits.index(split)])
            if task in ("los", "multipath"):
                rand = rng.integers(0, 2 if task == "los" else 3, size=len(x))
            else:
                rand = rng.uniform(y_train.min(), y_train.max(), size=len(x))
            out.append(pd.DataFrame({"variant": "random", "seed": seed, "split": split,
                                     "task": task, "item": items, "pred": rand.astype(float)}))
        return out

    frames = []
    splits = [s for s in (*TEST_SPLITS, "mirror") if s in clips]
    bar = tqdm(total=sum(len(rows_of[s]) for s in splits), desc="acorn classical baselines",
               disable=not p.progress, leave=False)
    for split in splits:
        rows = rows_of[split]
        for task in TASKS:
            sel = np.flatnonzero(rows["task"].to_numpy() == task)
            if sel.size == 0:
                continue
            x = clips[split][sel].astype(np.float64)
            sid, items = rows["source_id"].to_numpy()[sel], rows["item"].to_numpy()[sel]
            frames += predict_all(split, task, x, sid, items)
            if split == "test":  # the transformed test clips of the symmetry metrics
                sym = {k: v.numpy() for k, v in transformed_inputs(task, torch.from_numpy(x))
                       .items()}
                if task == "doppler":
                    sym["sym_unknown"] = x
                for sym_split, xs in sym.items():
                    frames += predict_all(sym_split, task, xs, sid, items)
            bar.update(sel.size)
    bar.close()
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------- evaluation
def evaluate(meta: pd.DataFrame, params: dict[str, Any], baselines: pd.DataFrame,
             *predictions: pd.DataFrame) -> pd.DataFrame:
    """Paper metrics of every (variant, seed): one row per metric."""
    from icml25.pipelines.acorn.evaluation import score_predictions
    p = _params(params)
    return score_predictions(meta, pd.concat([baselines, *predictions], ignore_index=True),
                             p.data.mic_spacing, p.seeds, max_tdoa=_max_tdoa(p))


def item_errors(meta: pd.DataFrame, scores: pd.DataFrame, params: dict[str, Any],
                baselines: pd.DataFrame, *predictions: pd.DataFrame) -> dict[str, Any]:
    """Per test item and seed, each task's metric term (``items_<metric>``), for the claims
    that pair over test items (:func:`icml25.pipelines.acorn.evaluation.item_scores`)."""
    from icml25.pipelines.acorn.evaluation import item_scores
    p = _params(params)
    return item_scores(meta, pd.concat([baselines, *predictions], ignore_index=True), scores,
                       p.seeds)


def judge_claims(scores: pd.DataFrame, items: dict[str, Any], params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float,
                 *models: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own scores; MLflow child runs.

    Claims are judged at ``confidence`` (``params:claims_confidence``): per-seed metrics pair
    over seeds, ``items_<metric>`` ({item: [per seed]}) over the test items (``unit: item``)."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    from icml25.pipelines.acorn.evaluation import ROLES, derived_variants, summarise
    p = _params(params)
    metrics = summarise(scores)
    claim_metrics = {**metrics, **derived_variants(metrics)}
    for variant, tables in items.items():
        claim_metrics[variant] = {**claim_metrics.get(variant, {}), **tables}
    training: dict[str, dict[str, Any]] = {}
    for bundle in models:  # every variant's seed shards
        for key in sorted(bundle):
            md = _entry(bundle[key])["metadata"]
            training.setdefault(md["variant"], {})[key] = {
                "seconds": md["seconds"], "steps": md["steps"], "best_step": md["best_step"],
                "n_parameters": md["n_parameters"]}
    training = {v: {key: runs[key] for key in sorted(runs)} for v, runs in training.items()}
    claims = claims_report(PIPELINE, [c.model_dump() for c in p.claims], claim_metrics,
                           run_info, p.seeds,
                           title="ACORN: physical awareness from sound (ICML 2025)",
                           figures=["figures/examples.png", "figures/error_vs_condition.png"],
                           confidence=confidence)
    per_unit = {v: {**metrics.get(v, {}), **tables} for v, tables in items.items()}
    report = metrics_report(PIPELINE, {**metrics, **per_unit}, run_info, p.seeds,
                            extra={"derived": derived_variants(metrics), "training": training})
    if mlflow.active_run() is not None:
        means = seed_means(metrics)
        params_by = {v: {"kind": v} for v in metrics}
        for v in VARIANTS:
            params_by[v] = {**p.model.model_dump(), **p.train.model_dump(),
                            "use_phase": v == "acorn_phase"}
        log_variants(PIPELINE, means, {v: ROLES.get(v, "baseline") for v in metrics},
                     params_by_variant=params_by)
        log_claim_counts(claims)
    return report, claims


def plot_figures(meta: pd.DataFrame, clips: dict[str, np.ndarray], scores: pd.DataFrame,
                 params: dict[str, Any], baselines: pd.DataFrame,
                 *predictions: pd.DataFrame) -> dict[str, Any]:
    """Example spectrograms (magnitude, inter-channel phase) with their labels, and the error
    of every variant against SNR / T60 / |v|."""
    from icml25.pipelines.acorn.plots import plot_error_vs_condition, plot_examples
    matplotlib.use("Agg")
    p = _params(params)
    figures = {"examples.png": plot_examples(meta, clips, p.n_examples),
               "error_vs_condition.png": plot_error_vs_condition(
                   meta, pd.concat([baselines, *predictions], ignore_index=True))}
    del scores  # taken so the figures are drawn after evaluation
    return figures

