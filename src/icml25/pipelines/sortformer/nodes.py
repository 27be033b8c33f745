"""Kedro nodes of the sortformer pipeline: thin wrappers around the method modules.

Each node validates ``params:sortformer`` into :class:`SortformerParams`, does one step of the
pipeline and returns tables, dicts or state dicts.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from icml25.core.claims import claims_report, metrics_report, with_unit_values
from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.sweep import interleave_frames, shard_seeds
from icml25.pipelines.sortformer.params import ROLES, VARIANTS, SortformerParams
from icml25.pipelines.sortformer.postprocessing import (
    PostProcessing,
    probabilities_to_segments,
    random_search,
)
from icml25.pipelines.sortformer.rttm import frames_to_segments
from icml25.pipelines.sortformer.scoring import count_accuracy, cpwer, der_components

if TYPE_CHECKING:
    from collections.abc import Sequence

    from icml25.pipelines.sortformer.diarizer_training import OptimConfig
    from icml25.pipelines.sortformer.model import Diarizer, DiarizerConfig

matplotlib = lazy_module("matplotlib")
mlflow = lazy_module("mlflow")
pd = lazy_module("pandas")
msasr = lazy_module("icml25.pipelines.sortformer.msasr")

logger = logging.getLogger(__name__)
PIPELINE = "sortformer"
EVAL_SPLITS = ("test", "test_inpool")


def _params(params: dict[str, Any]) -> SortformerParams:
    return validate_parameters(SortformerParams, params, PIPELINE)


def _audio(utterances: pd.DataFrame) -> dict[str, np.ndarray]:
    from icml25.pipelines.sortformer.speaker_bank import from_bytes
    required = {"utterance", "speaker", "split", "kind", "n_samples", "audio"}
    missing = required - set(utterances.columns)
    if missing or utterances.empty:
        raise ValueError(f"speaker bank: empty or missing columns {sorted(missing)}")
    return {r.utterance: from_bytes(r.audio) for r in utterances.itertuples()}


# -- 1. data ---------------------------------------------------------------------------------

def build_speaker_bank(params: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """TTS identities (train/test disjoint) and their trimmed utterances (sentences and words)."""
    from icml25.pipelines.sortformer.speaker_bank import build_bank, make_speakers
    p = _params(params)
    s = p.speakers
    specs = make_speakers(s.n_train, s.n_test, s.seed, s.train_variants, s.test_variants,
                          s.train_pitches, s.test_pitches, s.espeak_voices, s.train_flite,
                          s.test_flite, s.flite_share)
    bank = build_bank(specs, s.n_utterances, tuple(s.words_range), s.seed,
                      asr_words=p.msasr.enabled, progress=p.progress, workers=s.workers)
    speakers = pd.DataFrame([asdict(x) for x in specs])
    return speakers, bank


def simulate_sessions(utterances: pd.DataFrame, speakers: pd.DataFrame, params: dict[str, Any]
                      ) -> tuple[pd.DataFrame, str, dict[str, Any]]:
    """Session metadata of every split, their RTTM and the measured overlap/silence ratios."""
    from dataclasses import replace

    from icml25.pipelines.sortformer.simulator import (
        SAMPLE_RATE,
        SimConfig,
        session_rttm,
        session_stats,
        simulate_split,
        swap_first_turns,
    )
    p = _params(params)
    sim = p.sim
    cfg = SimConfig(duration_s=sim.duration_s, count_weights=tuple(sim.count_weights),
                    p_switch=sim.p_switch, p_overlap=sim.p_overlap,
                    overlap_range=tuple(sim.overlap_range), silence_mean_s=sim.silence_mean_s,
                    gain_db=sim.gain_db, snr_range=tuple(sim.snr_range), rir=sim.rir,
                    rt60_range=tuple(sim.rt60_range))
    train_spk = sorted(speakers.loc[speakers["split"] == "train", "speaker"])
    test_spk = sorted(speakers.loc[speakers["split"] == "test", "speaker"])
    plan = {"train": (train_spk, sim.n_train), "val": (train_spk, sim.n_val),
            "test": (test_spk, sim.n_test), "test_inpool": (train_spk, sim.n_test_inpool)}
    frames = [simulate_split(utterances, spk, n, cfg, sim.seed + 1000 * i, split)
              for i, (split, (spk, n)) in enumerate(plan.items())]
    durations = {r.utterance: r.n_samples / SAMPLE_RATE for r in utterances.itertuples()}
    if sim.swap_augment > 0:  # arrival-order augmentation: twins of the train sessions in which
        # the k-th and (k+1)-th arrivals' first turns are exchanged, for each k of swap_pairs
        train = frames[0]
        for k in sim.swap_pairs:
            multi = sorted(n for n, g in train.groupby("session")
                           if g["speaker"].nunique() >= k + 2)
            rng = np.random.default_rng([sim.seed, 77] if k == 0 else [sim.seed, 77, k])
            chosen = set(rng.permutation(multi)[: round(sim.swap_augment * len(multi))].tolist())
            suffix = "_swapped" if k == 0 else f"_swapped{k}"
            frames.append(pd.concat([swap_first_turns(g, durations, suffix, k) for n, g in
                                     train.groupby("session", sort=True) if n in chosen]
                                    or [train[:0]], ignore_index=True))
    r = p.robustness
    if r.enabled:  # held-out swap test: unseen speakers, >= 2 speakers, and each one's twin
        weights = [0.0, *sim.count_weights[1:]] if len(sim.count_weights) > 1 else [0.0, 1.0]
        swap_cfg = replace(cfg, count_weights=tuple(weights))
        a = simulate_split(utterances, test_spk, r.n_swap, swap_cfg, sim.seed + 9000 + r.seed,
                           "swap")
        b = pd.concat([swap_first_turns(g, durations) for _, g in
                       a.groupby("session", sort=True)], ignore_index=True)
        b["split"] = "swap_twin"
        frames += [a, b]
        plan |= {"swap": (test_spk, r.n_swap), "swap_twin": (test_spk, r.n_swap)}
    sessions = pd.concat(frames, ignore_index=True)
    stats = {split: session_stats(sessions[sessions["split"] == split]) for split in plan}
    stats["targets"] = {"overlap_ratio": 0.12, "silence_ratio": 0.10}
    logger.info("sortformer sessions: %s", {k: (round(v["overlap_ratio"], 3),
                                                round(v["silence_ratio"], 3))
                                            for k, v in stats.items() if k != "targets"})
    return sessions, session_rttm(sessions), stats


def compute_features(sessions: pd.DataFrame, utterances: pd.DataFrame, params: dict[str, Any]
                     ) -> dict[str, dict[str, list]]:
    """Render every session and compute its log-mel (stored as ``features_dtype``), 80 ms
    labels and the band SNR of the speech gate per 80 ms frame (``vad_gate.band_snr_db``; kept
    in memory)."""
    from icml25.pipelines.sortformer.features import log_mel
    from icml25.pipelines.sortformer.simulator import probe_clip
    p = _params(params)
    audio = _audio(utterances)
    out: dict[str, dict[str, list]] = {}
    groups = list(sessions.groupby(["split", "session"], sort=True))
    gate = p.postprocessing.vad_gate
    spec = (p.model.n_mels, p.max_speakers, p.frame_s, gate.n_bands, gate.floor_quantile)
    featurised = _featurise_in_processes([g for _, g in groups], audio, spec, p.sim.n_jobs)
    for ((split, name), _), (feats, labels, snr) in tqdm(
            zip(groups, featurised, strict=True), total=len(groups),
            desc="sortformer: render + features", disable=not p.progress, mininterval=2):
        d = out.setdefault(split, {"names": [], "feats": [], "labels": [], "snr_db": []})
        d["names"].append(name)
        d["feats"].append(feats.astype(p.features_dtype, copy=False))
        d["labels"].append(labels)
        d["snr_db"].append(snr)
    sim = p.sim
    n_frames = round(sim.duration_s / p.frame_s)
    for i in range(sim.n_train_empty):  # speech-free training clips: silence, white, pink noise
        rng = np.random.default_rng([sim.seed, 55, i])
        kind = ("silence", "white", "pink")[i % 3]
        clip = probe_clip(kind, sim.duration_s, float(rng.uniform(-70.0, -10.0)),
                          int(rng.integers(2**31)))
        d = out["train"]
        d["names"].append(f"train_empty_{i:04d}")
        d["feats"].append(log_mel(clip, p.model.n_mels).astype(p.features_dtype, copy=False))
        d["labels"].append(np.zeros((n_frames, p.max_speakers), np.float32))
        d["snr_db"].append(_band_snr(clip, n_frames, p))
    return out


def _band_snr(clip: np.ndarray, n_frames: int, p: SortformerParams) -> np.ndarray:
    """The speech gate's band SNR (dB) of each of ``n_frames`` output frames of one clip."""
    from icml25.pipelines.sortformer.vad_gate import band_snr_db
    g = p.postprocessing.vad_gate
    return band_snr_db(clip, n_frames, p.frame_s, g.n_bands, g.floor_quantile)


def _gated(probs: list[np.ndarray], snr_db: list[np.ndarray], p: SortformerParams
           ) -> list[np.ndarray]:
    """The posteriors the post-processing rules see: every channel 0 in the frames the speech
    gate (``postprocessing.vad_gate``) calls non-speech; unchanged when the gate is off."""
    from icml25.pipelines.sortformer.vad_gate import gate_probabilities
    g = p.postprocessing.vad_gate
    if not g.enabled:
        return list(probs)
    return [gate_probabilities(pr, s, g.threshold_db)
            for pr, s in zip(probs, snr_db, strict=True)]


def _featurise(rows: pd.DataFrame, audio: dict[str, np.ndarray], n_mels: int,
               max_speakers: int, frame_s: float, n_bands: int, floor_quantile: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One session's log-mel features, arrival-ordered frame labels and the speech gate's band
    SNR per label frame (a function of its rows alone: the session's seed is in them)."""
    from icml25.pipelines.sortformer.features import log_mel
    from icml25.pipelines.sortformer.simulator import render_session, session_labels
    from icml25.pipelines.sortformer.vad_gate import band_snr_db
    wav = render_session(rows, audio)
    labels = session_labels(rows, max_speakers, frame_s)
    return (log_mel(wav, n_mels), labels,
            band_snr_db(wav, labels.shape[0], frame_s, n_bands, floor_quantile))


_WORKER_AUDIO: dict[str, np.ndarray] = {}


def _set_worker_audio(audio: dict[str, np.ndarray]) -> None:
    """A featurising worker's copy of the utterances, sent once per process."""
    _WORKER_AUDIO.clear()
    _WORKER_AUDIO.update(audio)


def _featurise_chunk(chunk: list[pd.DataFrame], spec: tuple) -> list:
    return [_featurise(rows, _WORKER_AUDIO, *spec) for rows in chunk]


def _featurise_in_processes(sessions: list[pd.DataFrame], audio: dict[str, np.ndarray],
                            spec: tuple, n_jobs: int):
    """:func:`_featurise` of every session, in order, by ``n_jobs`` worker processes (``0``:
    one per CPU core): the same arrays as one process, as each depends on its rows alone. The
    paper config's ~40,000 sessions of 90 s take 1.3 to 2.3 hours on one core (docs/scale.md)."""
    from icml25.core.workers import chunks, process_map, resolve_workers

    workers = resolve_workers(n_jobs, len(sessions), min_items=8,  # at least 8 sessions each
                              key="sortformer.sim.n_jobs")
    if workers == 1:
        yield from (_featurise(rows, audio, *spec) for rows in sessions)
        return
    jobs = [(part, spec) for part in chunks(sessions, workers)]
    for part in process_map(_featurise_chunk, jobs, workers, initializer=_set_worker_audio,
                            initargs=(audio,)):
        yield from part


# -- 2. diarizers ----------------------------------------------------------------------------

def _model_cfg(p: SortformerParams) -> DiarizerConfig:
    from icml25.pipelines.sortformer.model import DiarizerConfig
    m = p.model
    return DiarizerConfig(n_mels=m.n_mels, conv_channels=m.conv_channels, d_model=m.d_model,
                          n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
                          dropout=m.dropout, n_speakers=p.max_speakers, encoder=m.encoder)


def _optim(o) -> OptimConfig:
    from icml25.pipelines.sortformer.diarizer_training import OptimConfig
    return OptimConfig(lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay,
                       warmup_steps=o.warmup_steps, min_lr=o.min_lr, epochs=o.epochs,
                       batch_size=o.batch_size, grad_clip=o.grad_clip)


def train_variant(features: dict[str, dict[str, list]], params: dict[str, Any], variant: str,
                  shard: int = 0, n_shards: int = 1) -> dict[str, dict[str, Any]]:
    """One diarizer trained with the variant's loss for each seed of shard ``shard`` of
    ``n_shards`` (``seeds[shard::n_shards]``, :func:`icml25.core.sweep.shard_seeds`) ->
    ``{seed_<s>: state + metadata}``, empty when the shard has no seed. Each seed's diarizer
    depends on that seed alone, so the shards may run in any order."""
    from icml25.core.device import resolve_device, seed_everything, set_threads
    from icml25.pipelines.sortformer.diarizer_training import train_diarizer
    p = _params(params)
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not seeds:
        return {}
    set_threads(p.num_threads)
    device = resolve_device(p.device)
    loss = variant
    if variant == "hybrid":
        alpha = p.loss.ats_weight / (p.loss.ats_weight + p.loss.pil_weight)
        loss = f"hybrid:{alpha}"
    train = features["train"]
    out = {}
    for seed in seeds:
        seed_everything(seed)
        start = time.perf_counter()
        model, result = train_diarizer(train["feats"], train["labels"], loss, _model_cfg(p),
                                       _optim(p.optim), seed, p.loss.pil_match, p.progress,
                                       str(device))
        out[f"seed_{seed}"] = {
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "metadata": {"variant": variant, "seed": seed, "loss": loss,
                         "config": _model_cfg(p).to_dict(), "history": result.history,
                         "train_seconds": time.perf_counter() - start,
                         "steps": result.steps_done}}
    return out


def _merge_model_shards(models: tuple[dict[str, Any], ...], n_shards: int
                        ) -> list[dict[str, Any]]:
    """One ``{seed_<s>: model}`` bundle per variant from the variants' seed shards, given
    variant by variant, shard 0 to ``n_shards - 1`` within each (the order the pipeline wires
    them). A seed trained by two shards of one variant is refused."""
    if n_shards < 1 or len(models) % n_shards:
        raise ValueError(f"sortformer: {len(models)} model shards do not split into variants of "
                         f"{n_shards} seed shards")
    merged = []
    for start in range(0, len(models), n_shards):
        bundle: dict[str, Any] = {}
        for shard in models[start:start + n_shards]:
            twice = sorted(set(bundle) & set(shard))
            if twice:
                raise ValueError(f"sortformer: {twice} found in two seed shards of one variant")
            bundle |= shard
        merged.append(bundle)
    return merged


def _load(entry: Any) -> Diarizer:
    from icml25.pipelines.sortformer.model import Diarizer, DiarizerConfig
    entry = entry() if callable(entry) else entry
    model = Diarizer(DiarizerConfig(**entry["metadata"]["config"]))
    model.load_state_dict(entry["state_dict"])
    return model.eval()


def _scores(probs, labels, names, sessions, pp: PostProcessing, frame_s: float,
            seg_probs=None) -> dict[str, float]:
    """DER (segments from ``seg_probs``, the gated posteriors, else ``probs``, through ``pp``),
    count accuracy and the arrival-order F1 of the raw ``probs`` thresholded at 0.5."""
    from icml25.pipelines.sortformer.diarizer_training import arrival_f1
    from icml25.pipelines.sortformer.simulator import session_segments
    by = {n: g for n, g in sessions.groupby("session")}
    refs = [session_segments(by[n]) for n in names]
    seg_probs = probs if seg_probs is None else seg_probs
    hyps = [probabilities_to_segments(pr, pp, frame_s, float(by[n]["duration_s"].iloc[0]))
            for pr, n in zip(seg_probs, names, strict=True)]
    durs = [float(by[n]["duration_s"].iloc[0]) for n in names]
    out = {}
    for c, tag in ((0.25, "c025"), (0.0, "c0")):
        d = der_components(refs, hyps, durs, c)
        out[f"der_{tag}"] = d["der"]
        if c == 0.0:
            out |= {"miss_c0": d["miss"], "false_alarm_c0": d["false_alarm"],
                    "confusion_c0": d["confusion"]}
    ov = [i for i, n in enumerate(names) if _has_overlap(labels[i])]
    if ov:
        out["der_c025_overlap"] = der_components([refs[i] for i in ov], [hyps[i] for i in ov],
                                                 [durs[i] for i in ov], 0.25)["der"]
    else:
        out["der_c025_overlap"] = float("nan")
    out["count_accuracy"] = count_accuracy(refs, hyps)
    binar = [(np.asarray(h_p) >= 0.5).astype(np.float32) for h_p in probs]
    out |= arrival_f1(binar, labels)
    out["f1_gap"] = out["f1_pil"] - out["f1_ats"]
    if ov:  # arrival order where it is hardest: sessions with overlapped speech
        f1 = arrival_f1([binar[i] for i in ov], [labels[i] for i in ov])
        out["f1_gap_overlap"] = f1["f1_pil"] - f1["f1_ats"]
    else:
        out["f1_gap_overlap"] = float("nan")
    return out


def _has_overlap(labels: np.ndarray) -> bool:
    return bool((np.asarray(labels).sum(axis=1) >= 2).any())


def _val_der(probs, seg_probs, val, sessions, frame_s, pp: PostProcessing) -> float:
    return _scores(probs, val["labels"], val["names"], sessions, pp, frame_s,
                   seg_probs)["der_c025"]


def _diarize_clip(model, clip: np.ndarray, pp: PostProcessing, p: SortformerParams,
                  gate: bool) -> list:
    """Segments of one clip: the diarizer's posteriors, gated when ``gate``, through ``pp``."""
    from icml25.pipelines.sortformer.diarizer_training import infer
    from icml25.pipelines.sortformer.features import SAMPLE_RATE, log_mel
    n = round(len(clip) / SAMPLE_RATE / p.frame_s)
    probs = infer(model, [log_mel(clip, p.model.n_mels)], [n])[0]
    if gate:
        probs = _gated([probs], [_band_snr(clip, n, p)], p)[0]
    return probabilities_to_segments(probs, pp, p.frame_s, len(clip) / SAMPLE_RATE)


def evaluate_diarizers(features: dict[str, dict[str, list]], sessions: pd.DataFrame,
                       params: dict[str, Any], *models: dict[str, Any], n_shards: int = 1
                       ) -> pd.DataFrame:
    """Tune post-processing on val per model, then DER/F1/count accuracy on the test splits;
    ``models`` holds every variant's ``n_shards`` seed shards (:func:`_merge_model_shards`).
    With the speech gate on (``postprocessing.vad_gate``) the knobs are tuned on the gated
    posteriors, and the same model is also scored without the gate (its knobs tuned again on
    val): ``der_*_nogate`` and ``probe_segments_nogate`` measure what the gate changes."""
    from icml25.core.device import set_threads
    from icml25.pipelines.sortformer.diarizer_training import infer
    p = _params(params)
    gate_on = p.postprocessing.vad_gate.enabled
    set_threads(p.num_threads)
    rows = []
    jobs = [(key, bundle[key]) for bundle in _merge_model_shards(models, n_shards)
            for key in sorted(bundle)]
    val = features["val"]
    for _, entry in tqdm(jobs, desc="sortformer: evaluate diarizers", disable=not p.progress):
        model = _load(entry)
        meta = (entry() if callable(entry) else entry)["metadata"]
        nf = {s: [y.shape[0] for y in features[s]["labels"]] for s in ("val", *EVAL_SPLITS)}
        vprobs = infer(model, val["feats"], nf["val"])
        search_seed = p.postprocessing.seed + meta["seed"]
        pp, val_der = random_search(
            partial(_val_der, vprobs, _gated(vprobs, val["snr_db"], p), val, sessions,
                    p.frame_s), p.postprocessing.n_trials, search_seed)
        pp_off = pp if not gate_on else random_search(
            partial(_val_der, vprobs, vprobs, val, sessions, p.frame_s),
            p.postprocessing.n_trials, search_seed)[0]
        robust = {}
        if p.robustness.enabled:
            twins = [infer(model, features[k]["feats"],
                           [y.shape[0] for y in features[k]["labels"]])
                     for k in ("swap", "swap_twin")]
            robust = swap_scores(twins, features, p.robustness.near_gap_s, p.frame_s)
            robust |= _probe_scores(partial(_diarize_clip, model, pp=pp, p=p, gate=gate_on), p)
            off = robust if not gate_on else _probe_scores(
                partial(_diarize_clip, model, pp=pp_off, p=p, gate=False), p)
            robust["probe_segments_nogate"] = float(np.mean(
                [off[f"probe_segments_{k}"] for k in ("silence", "white", "pink")]))
        for split in EVAL_SPLITS:
            d = features[split]
            probs = infer(model, d["feats"], nf[split])
            s = _scores(probs, d["labels"], d["names"], sessions, pp, p.frame_s,
                        _gated(probs, d["snr_db"], p))
            raw = _scores(probs, d["labels"], d["names"], sessions, PostProcessing(), p.frame_s)
            off = s if not gate_on else _scores(probs, d["labels"], d["names"], sessions,
                                                pp_off, p.frame_s)
            rows.append({"variant": meta["variant"], "seed": meta["seed"], "split": split,
                         **s, "der_c025_nopp": raw["der_c025"], "val_der_c025": val_der,
                         "der_c025_nogate": off["der_c025"], "der_c0_nogate": off["der_c0"],
                         "pp": json.dumps(pp.to_dict()), **robust})
    return pd.DataFrame(rows)


#: metrics of the robustness checks (``robustness.enabled``), one value per model
ROBUST_METRICS = ("swap_order_rate", "swap_order_rate_near", "swap_order_rate_far",
                  "probe_segments_silence", "probe_segments_white", "probe_segments_pink",
                  "probe_speech_ratio", "probe_segments_nogate")
#: the swap test's per-model columns beside :data:`ROBUST_METRICS`: each pair's outcome (JSON)
#: and the number of near pairs
SWAP_COLUMNS = ("swap_pairs", "swap_n_near")


def _in_arrival_order(probs: np.ndarray, labels: np.ndarray) -> bool:
    """Channel 0 best matches the first arrival and channel 1 the second (dot-product match of
    the probabilities with each reference column)."""
    score = np.asarray(probs, np.float64).T @ np.asarray(labels, np.float64)  # (channels, K)
    return int(np.argmax(score[:, 0])) == 0 and int(np.argmax(score[:, 1])) == 1


def swap_pair_outcomes(probs_a, labels_a, probs_b, labels_b) -> np.ndarray:
    """Per session pair (a session and its twin with the first two speakers' first turns
    exchanged): True where both follow arrival order, i.e. the first two channels swap with
    the speakers."""
    pairs = list(zip(probs_a, labels_a, probs_b, labels_b, strict=True))
    if not pairs:
        raise ValueError("swap test: no session pairs")
    return np.array([_in_arrival_order(pa, ya) and _in_arrival_order(pb, yb)
                     for pa, ya, pb, yb in pairs], dtype=bool)


def swap_order_rate(probs_a, labels_a, probs_b, labels_b) -> float:
    """Share of session pairs in which both sessions follow arrival order
    (:func:`swap_pair_outcomes`)."""
    return float(np.mean(swap_pair_outcomes(probs_a, labels_a, probs_b, labels_b)))


def arrival_gap_s(labels: np.ndarray, frame_s: float) -> float:
    """Seconds between the first two arrivals' onsets (label columns 0 and 1, onsets as the
    Sort Loss defines them, :func:`sort_loss.arrival_times`; a twin of the swap test has the
    same gap, its first turns being exchanged in time)."""
    import torch

    from icml25.pipelines.sortformer.sort_loss import arrival_times
    y = np.asarray(labels, np.float32)
    if y.ndim != 2 or y.shape[1] < 2:
        raise ValueError("arrival gap: the session needs two speakers")
    onset = arrival_times(torch.from_numpy(y)[None])[0, :2].tolist()
    if max(onset) >= y.shape[0]:  # a column that never speaks
        raise ValueError("arrival gap: the session needs two speakers")
    return float((onset[1] - onset[0]) * frame_s)


def swap_scores(twins: Sequence[Sequence[np.ndarray]], features: dict[str, dict[str, list]],
                near_gap_s: float, frame_s: float) -> dict[str, Any]:
    """The swap test of one model: the pass rate over all pairs, over the pairs whose first two
    arrivals start less than ``near_gap_s`` apart (``_near``) and the others (``_far``; NaN
    when a group is empty), and each pair's outcome (``swap_pairs``: JSON ``{session: 0/1}``,
    the units the swap claims pair over)."""
    ok = swap_pair_outcomes(twins[0], features["swap"]["labels"], twins[1],
                            features["swap_twin"]["labels"])
    near = np.array([arrival_gap_s(y, frame_s) < near_gap_s for y in features["swap"]["labels"]])

    def rate(mask: np.ndarray) -> float:
        return float(ok[mask].mean()) if mask.any() else float("nan")

    return {"swap_order_rate": float(ok.mean()), "swap_order_rate_near": rate(near),
            "swap_order_rate_far": rate(~near), "swap_n_near": int(near.sum()),
            "swap_pairs": json.dumps({str(n): int(v) for n, v in
                                      zip(features["swap"]["names"], ok, strict=True)})}


def _probe_scores(diarize, p: SortformerParams) -> dict[str, float]:
    """Segments a diarizer outputs on speech-free clips (silence; white and pink noise at each
    of ``probe_levels_db``) and the share of their time marked as speech."""
    from icml25.pipelines.sortformer.simulator import probe_clip
    r = p.robustness
    counts: dict[str, list[int]] = {"silence": [], "white": [], "pink": []}
    speech = total = 0.0
    for kind in counts:
        for j, level in enumerate([r.probe_levels_db[0]] if kind == "silence"
                                  else r.probe_levels_db):
            clip = probe_clip(kind, r.probe_s, level, r.seed * 1000 + j)
            segs = diarize(clip)
            counts[kind].append(len(segs))
            n = round(r.probe_s / 0.01)
            active = np.zeros(n, bool)
            for g in segs:
                active[round(g.start / 0.01):round(g.end / 0.01)] = True
            speech += float(active.sum())
            total += n
    return {**{f"probe_segments_{k}": float(np.mean(v)) for k, v in counts.items()},
            "probe_speech_ratio": speech / total}


def run_clustering_baseline(sessions: pd.DataFrame, utterances: pd.DataFrame,
                            features: dict[str, dict[str, list]], params: dict[str, Any]
                            ) -> pd.DataFrame:
    """VAD + MFCC windows + agglomerative clustering; threshold tuned on val; oracle-K variant."""
    from icml25.pipelines.sortformer.clustering import cluster_diarize
    from icml25.pipelines.sortformer.simulator import render_session
    p = _params(params)
    c = p.clustering
    audio = _audio(utterances)
    by = {n: g for n, g in sessions.groupby("session")}
    kw = {"frame_s": p.frame_s, "vad_db": c.vad_db, "window_s": c.window_s, "hop_s": c.hop_s,
          "n_mfcc": c.n_mfcc}
    rendered: dict[str, np.ndarray] = {}

    def wav(name):
        if name not in rendered:
            rendered[name] = render_session(by[name], audio)
        return rendered[name]

    def frames_of(split, **extra):
        out = []
        for n, y in zip(features[split]["names"], features[split]["labels"], strict=True):
            f = cluster_diarize(wav(n), **kw, **extra)[: y.shape[0]]
            out.append(np.pad(f, ((0, y.shape[0] - f.shape[0]), (0, 0))))
        return out

    def scores(split, frames):
        d = features[split]
        hyps_as_probs = frames
        s = _scores_frames(hyps_as_probs, d["labels"], d["names"], sessions, p.frame_s,
                           p.max_speakers)
        return s

    val_der = {}
    for th in tqdm(c.thresholds, desc="sortformer: tune clustering threshold",
                   disable=not p.progress):
        val_der[th] = scores("val", frames_of("val", threshold=th))["der_c025"]
    best = min(val_der, key=val_der.get)
    robust = {}
    if p.robustness.enabled:
        twins = [[f[:, :p.max_speakers] if f.shape[1] >= 2 else
                  np.pad(f, ((0, 0), (0, 2 - f.shape[1]))) for f in frames_of(k, threshold=best)]
                 for k in ("swap", "swap_twin")]
        robust = swap_scores(twins, features, p.robustness.near_gap_s, p.frame_s)
        robust |= _probe_scores(lambda clip: frames_to_segments(
            cluster_diarize(clip, threshold=best, **kw), p.frame_s), p)
        robust["probe_segments_nogate"] = float(np.mean(  # it has no gate: its own VAD only
            [robust[f"probe_segments_{k}"] for k in ("silence", "white", "pink")]))
    oracle_robust = {}
    if p.robustness.enabled:  # the number of speakers is given: the speech-free probes do not apply
        twins = []
        for k in ("swap", "swap_twin"):
            tw = []
            for n, y in zip(features[k]["names"], features[k]["labels"], strict=True):
                f = cluster_diarize(wav(n), n_clusters=int(by[n]["speaker"].nunique()),
                                    **kw)[: y.shape[0]]
                tw.append(np.pad(f, ((0, y.shape[0] - f.shape[0]), (0, max(2 - f.shape[1], 0)))))
            twins.append(tw)
        oracle_robust = {m: float("nan") for m in ROBUST_METRICS} | swap_scores(
            twins, features, p.robustness.near_gap_s, p.frame_s)
    rows = []
    for split in EVAL_SPLITS:
        s = scores(split, frames_of(split, threshold=best))
        rows.append({"variant": "clustering", "seed": 0, "split": split, **s,
                     "der_c025_nopp": s["der_c025"], "val_der_c025": val_der[best],
                     "pp": f"threshold={best}", **robust})
        oracle = []
        for n, y in zip(features[split]["names"], features[split]["labels"], strict=True):
            k = int(by[n]["speaker"].nunique())
            f = cluster_diarize(wav(n), n_clusters=k, **kw)[: y.shape[0]]
            oracle.append(np.pad(f, ((0, y.shape[0] - f.shape[0]), (0, 0))))
        s = scores(split, oracle)
        rows.append({"variant": "clustering_oracle_k", "seed": 0, "split": split, **s,
                     "der_c025_nopp": s["der_c025"], "val_der_c025": float("nan"),
                     "pp": "oracle number of speakers", **oracle_robust})
    return pd.DataFrame(rows)


def _scores_frames(frames, labels, names, sessions, frame_s, k):
    """Scores of hard (frames, n_clusters) outputs: DER on all columns, F1 on the first K."""
    from icml25.pipelines.sortformer.simulator import session_segments
    probs = []
    for f in frames:
        f = f[:, :k]
        probs.append(np.pad(f, ((0, 0), (0, k - f.shape[1]))))
    s = _scores(probs, labels, names, sessions, PostProcessing(), frame_s)
    by = {n: g for n, g in sessions.groupby("session")}
    refs = [session_segments(by[n]) for n in names]
    hyps = [frames_to_segments(f, frame_s) for f in frames]
    durs = [float(by[n]["duration_s"].iloc[0]) for n in names]
    for c, tag in ((0.25, "c025"), (0.0, "c0")):
        d = der_components(refs, hyps, durs, c)
        s[f"der_{tag}"] = d["der"]
        if c == 0.0:
            s |= {"miss_c0": d["miss"], "false_alarm_c0": d["false_alarm"],
                  "confusion_c0": d["confusion"]}
    ov = [i for i, y in enumerate(labels) if _has_overlap(y)]
    s["der_c025_overlap"] = (der_components([refs[i] for i in ov], [hyps[i] for i in ov],
                                            [durs[i] for i in ov], 0.25)["der"]
                             if ov else float("nan"))
    s["count_accuracy"] = count_accuracy(refs, hyps)
    return s


# -- 3. multi-speaker ASR --------------------------------------------------------------------

def build_word_mixtures(utterances: pd.DataFrame, speakers: pd.DataFrame,
                        params: dict[str, Any]) -> pd.DataFrame:
    """LibriSpeechMix-style 1-3 speaker mixtures of isolated words (train: train speakers,
    test: unseen speakers)."""
    p = _params(params)
    m = p.msasr
    if not m.enabled:
        return pd.DataFrame(columns=["mixture", "split"])
    train_spk = sorted(speakers.loc[speakers["split"] == "train", "speaker"])
    test_spk = sorted(speakers.loc[speakers["split"] == "test", "speaker"])
    return pd.concat([
        msasr.build_mixtures(utterances, train_spk, m.n_train, m.count_weights, m.seed, "train"),
        msasr.build_mixtures(utterances, test_spk, m.n_test, m.count_weights, m.seed + 1, "test"),
    ], ignore_index=True)


CPWER_COLUMNS = ["variant", "seed", "n_speakers", "cpwer", "errors_words"]


def train_evaluate_msasr(mixtures: pd.DataFrame, utterances: pd.DataFrame,
                         hybrid_models: dict[str, Any], params: dict[str, Any], shard: int = 0,
                         n_shards: int = 1) -> pd.DataFrame:
    """AED without kernels, with the (frozen) hybrid diarizer's kernels and with oracle kernels,
    for each seed of shard ``shard`` of ``n_shards`` (``seeds[shard::n_shards]``, whose hybrid
    diarizers are ``hybrid_models``); cpWER on unseen-speaker mixtures by number of speakers.
    Each seed's rows depend on that seed alone."""
    from icml25.core.device import seed_everything, set_threads
    from icml25.pipelines.sortformer.diarizer_training import infer
    from icml25.pipelines.sortformer.features import log_mel
    from icml25.pipelines.sortformer.model import output_frames
    p = _params(params)
    m = p.msasr
    cols = CPWER_COLUMNS
    seeds = shard_seeds(p.seeds, shard, n_shards)
    if not m.enabled or not seeds:
        return pd.DataFrame(columns=cols)
    set_threads(p.num_threads)
    audio = _audio(utterances)
    data: dict[str, dict[str, list]] = {}
    for (split, _), g in mixtures.groupby(["split", "mixture"], sort=True):
        d = data.setdefault(split, {"feats": [], "tokens": [], "refs": [], "n": [], "oracle": []})
        wav = msasr.render_mixture(g, audio)
        f = log_mel(wav, m.model.n_mels)
        d["feats"].append(f)
        d["tokens"].append(msasr.sst_tokens(g))
        d["refs"].append(msasr.reference_transcripts(g))
        d["n"].append(int(g["n_speakers"].iloc[0]))
        d["oracle"].append(msasr.mixture_labels(g, output_frames(f.shape[0]), p.max_speakers))
        d.setdefault("diar_feats", []).append(log_mel(wav, p.model.n_mels))
    cfg = msasr.AsrConfig(n_mels=m.model.n_mels, conv_channels=m.model.conv_channels,
                          d_model=m.model.d_model, enc_layers=m.model.enc_layers,
                          dec_layers=m.model.dec_layers, n_heads=m.model.n_heads,
                          d_ff=m.model.d_ff, dropout=m.model.dropout,
                          n_speakers=p.max_speakers, kernel_scale=m.model.kernel_scale,
                          unit_rows=m.model.unit_rows, inject_at=m.model.inject_at,
                          label_smoothing=m.model.label_smoothing)
    rows = []
    for seed in seeds:
        seed_everything(seed)
        diarizer = _load(hybrid_models[f"seed_{seed}"])
        kernels = {"asr_none": None, "asr_oracle": {s: data[s]["oracle"] for s in data},
                   "asr_sortformer": {s: infer(diarizer, data[s]["diar_feats"],
                                               [o.shape[0] for o in data[s]["oracle"]])
                                      for s in data}}
        for variant, probs in kernels.items():
            model, _ = msasr.train_asr(data["train"]["feats"],
                                       None if probs is None else probs["train"],
                                       data["train"]["tokens"], cfg, _optim(m.optim), seed,
                                       p.progress, desc=f"sortformer: {variant} (seed {seed})")
            hyp_tokens = msasr.transcribe(model, data["test"]["feats"],
                                          None if probs is None else probs["test"])
            hyps = [msasr.tokens_to_transcripts(t) for t in hyp_tokens]
            refs = data["test"]["refs"]
            ns = np.asarray(data["test"]["n"])
            rows.append({"variant": variant, "seed": seed, "n_speakers": 0,
                         "cpwer": cpwer(refs, hyps), "errors_words": len(refs)})
            for k in sorted(set(ns.tolist())):
                idx = np.flatnonzero(ns == k)
                rows.append({"variant": variant, "seed": seed, "n_speakers": k,
                             "cpwer": cpwer([refs[i] for i in idx], [hyps[i] for i in idx]),
                             "errors_words": len(idx)})
    return pd.DataFrame(rows, columns=cols)


def merge_cpwer_tables(*shard_tables: pd.DataFrame) -> pd.DataFrame:
    """The cpWER tables of the seed shards as one table in seed-list order: shard ``k`` of ``n``
    holds the rows of ``seeds[k::n]``, seed by seed (:func:`icml25.core.sweep.interleave_frames`).
    """
    groups = interleave_frames(shard_tables, None, where="sortformer: the cpWER seed shards")
    if not groups:
        return pd.DataFrame(columns=CPWER_COLUMNS)
    return pd.concat(groups, ignore_index=True)[CPWER_COLUMNS]


# -- 4. report -------------------------------------------------------------------------------

def _diar_metrics(table: pd.DataFrame) -> dict[str, dict[str, list[float]]]:
    names = ["der_c025", "der_c0", "miss_c0", "false_alarm_c0", "confusion_c0",
             "der_c025_overlap", "der_c025_nopp", "count_accuracy", "f1_pil", "f1_ats", "f1_gap",
             "f1_gap_overlap", "der_c025_nogate", "der_c0_nogate"]
    out: dict[str, dict[str, list[float]]] = {}
    for variant, g in table.groupby("variant", sort=False):
        d = out.setdefault(str(variant), {})
        for split, gs in g.groupby("split"):
            suffix = "test" if split == "test" else "inpool"
            gs = gs.sort_values("seed")
            for n in names:
                d[f"{n}_{suffix}"] = [float(x) for x in gs[n]]
            if split == "test":  # one value per model, stored on its test row
                for n in ROBUST_METRICS:
                    if n in gs.columns:
                        d[n] = [float(x) for x in gs[n]]
    return out


def _swap_pairs(table: pd.DataFrame) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Each variant's swap-test outcomes per session pair over its seeds,
    ``{variant: {"swap_order_rate": {pair: [per seed 0/1]}}}``: the units of the swap claims
    (``unit: pair``). Empty when the robustness checks did not run."""
    if "swap_pairs" not in table.columns:
        return {}
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for variant, g in table[table["split"] == "test"].groupby("variant", sort=False):
        per_seed = [json.loads(x) for x in g.sort_values("seed")["swap_pairs"]
                    if isinstance(x, str)]
        if per_seed:
            out[str(variant)] = {"swap_order_rate": {
                pair: [float(d[pair]) for d in per_seed] for pair in sorted(per_seed[0])}}
    return out


def _swap_test_info(table: pd.DataFrame, p: SortformerParams) -> dict[str, Any]:
    """The swap test's size and how many of its pairs are "near" (first two onsets less than
    ``robustness.near_gap_s`` apart); ``{"enabled": False}`` when it did not run."""
    if not p.robustness.enabled or "swap_n_near" not in table.columns or table.empty:
        return {"enabled": False}
    return {"enabled": True, "n_pairs": p.robustness.n_swap,
            "near_gap_s": p.robustness.near_gap_s,
            "n_near": int(table["swap_n_near"].iloc[0]), "seed": p.robustness.seed}


def _asr_metrics(table: pd.DataFrame) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for (variant, k), g in table.groupby(["variant", "n_speakers"]):
        name = "cpwer_all" if k == 0 else f"cpwer_{k}spk"
        out.setdefault(str(variant), {})[name] = [float(x) for x in g.sort_values("seed")["cpwer"]]
    return out


#: baselines without a seed (``run_clustering_baseline`` runs them once, as seed 0)
DETERMINISTIC = ("clustering", "clustering_oracle_k")


def _per_seed_for_claims(metrics: dict[str, dict[str, list[float]]], seeds: list[int]
                         ) -> dict[str, dict[str, list[float]]]:
    """The claims' view: a deterministic baseline's single value repeated for every seed (it
    would be the same on each), so a claim pairs each seed of a model with it."""
    out = {}
    for variant, values in metrics.items():
        if variant in DETERMINISTIC:
            values = {m: (v * len(seeds) if len(v) == 1 else v) for m, v in values.items()}
        out[variant] = values
    return out


def claims_that_ran(specs: list[dict[str, Any]], metrics: dict[str, dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The claims whose method and baseline metrics the run produced, and the others with the
    reason (an optional stage that was turned off: ``msasr.enabled``, ``robustness.enabled``)."""
    kept, dropped = [], []
    for spec in specs:
        missing = [v for v in (spec["method"], spec.get("baseline")) if v is not None
                   and spec["metric"] not in metrics.get(v, {})]
        if missing:
            dropped.append({"claim": spec["claim"],
                            "reason": f"{spec['metric']} of {', '.join(missing)} was not "
                                      "computed (its stage did not run)"})
        else:
            kept.append(spec)
    return kept, dropped


def judge_claims(der_table: pd.DataFrame, clustering_table: pd.DataFrame,
                 cpwer_table: pd.DataFrame, stats: dict[str, Any], params: dict[str, Any],
                 run_info: dict[str, Any], confidence: float,
                 audio_check: dict[str, Any] | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metrics.json`` and ``claims.json`` from the run's own tables; MLflow child runs.
    Claims are paired over the seeds at ``confidence`` (``params:claims_confidence``); a claim
    whose metrics a turned-off stage would have produced is left out and listed under
    ``claims_not_run`` in ``metrics.json``."""
    from icml25.core.tracking import log_claim_counts, log_variants, seed_means
    p = _params(params)
    diar = _diar_metrics(pd.concat([der_table, clustering_table], ignore_index=True))
    asr = _asr_metrics(cpwer_table)
    metrics = {**diar, **asr}
    specs, not_run = claims_that_ran([c.model_dump() for c in p.claims], metrics)
    for d in not_run:
        logger.info("sortformer: claim not judged: %s (%s)", d["claim"], d["reason"])
    pairs = _swap_pairs(pd.concat([der_table, clustering_table], ignore_index=True))
    claims = claims_report(PIPELINE, specs,
                           with_unit_values(specs, _per_seed_for_claims(metrics, list(p.seeds)),
                                            pairs, PIPELINE), run_info,
                           p.seeds, title="Sortformer (ICML 2025)",
                           figures=["figures/activity.png", "figures/der_by_speakers.png",
                                    "figures/f1_ats_vs_pil.png"], confidence=confidence)
    per_pair = {v: {"pairs_swap_order_rate": t["swap_order_rate"]} for v, t in pairs.items()}
    report = metrics_report(PIPELINE, {v: {**metrics.get(v, {}), **per_pair.get(v, {})}
                                       for v in {**metrics, **per_pair}}, run_info, p.seeds,
                            extra={"session_stats": stats,
                                   "swap_test": _swap_test_info(der_table, p),
                                   "claims_not_run": not_run,
                                   "audio_check": audio_check or {"enabled": False},
                                   "vad_gate": p.postprocessing.vad_gate.model_dump(),
                                   "post_processing": {f"{r.variant}/seed_{r.seed}": r.pp
                                                       for r in der_table.itertuples()
                                                       if r.split == "test"}})
    if mlflow.active_run() is not None:
        for group in (diar, asr):
            if not group:
                continue
            means = seed_means(group)
            log_variants(PIPELINE, means, {v: ROLES.get(v, "baseline") for v in means},
                         params_by_variant={v: _variant_params(p, v) for v in means})
        log_claim_counts(claims, overlap_ratio_train=stats["train"]["overlap_ratio"],
                         silence_ratio_train=stats["train"]["silence_ratio"])
    return report, claims


def _variant_params(p: SortformerParams, variant: str) -> dict[str, Any]:
    if variant in VARIANTS:
        return {"loss": variant, "model": p.model.model_dump(), "optim": p.optim.model_dump(),
                "pil_match": p.loss.pil_match}
    if variant.startswith("clustering"):
        return p.clustering.model_dump()
    return {"kernels": variant.removeprefix("asr_"), "model": p.msasr.model.model_dump()}


def log_training_curves(params: dict[str, Any], *models: dict[str, Any], n_shards: int = 1
                        ) -> None:
    """Loss curves of every variant and seed as MLflow child runs (``train_loss`` by step);
    ``models`` holds every variant's ``n_shards`` seed shards."""
    from icml25.core.tracking import log_metrics, variant_run
    if mlflow.active_run() is None:
        return
    for bundle in _merge_model_shards(models, n_shards):
        for key in sorted(bundle):
            entry = bundle[key]() if callable(bundle[key]) else bundle[key]
            meta = entry["metadata"]
            with variant_run(meta["variant"], run_name=f"{meta['variant']}/training/seed "
                             f"{meta['seed']}", role=ROLES[meta["variant"]], pipeline=PIPELINE,
                             params={"seed": meta["seed"], "steps": meta["steps"],
                                     "train_seconds": round(meta["train_seconds"], 1)}):
                for h in meta["history"]:
                    if "train_loss" in h:
                        log_metrics({"train_loss": h["train_loss"]}, step=int(h["step"]))


def plot_figures(features: dict[str, dict[str, list]], der_table: pd.DataFrame,
                 clustering_table: pd.DataFrame, sessions: pd.DataFrame, params: dict[str, Any],
                 *models: dict[str, Any], n_shards: int = 1) -> dict[str, Any]:
    """Activity heatmaps (reference vs each variant) for three test sessions, DER by number of
    speakers, F1_ats against F1_pil; ``models`` holds every variant's ``n_shards`` seed
    shards."""
    from icml25.core.device import set_threads
    from icml25.pipelines.sortformer.diarizer_training import infer
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _params(params)
    set_threads(p.num_threads)
    test = features["test"]
    counts = [int((y.sum(0) > 0).sum()) for y in test["labels"]]
    picks = [i for i, c in enumerate(counts) if c >= 3][:3] or list(range(min(3, len(counts))))
    loaded = {}
    for bundle in _merge_model_shards(models, n_shards):
        key = sorted(bundle)[0]
        entry = bundle[key]() if callable(bundle[key]) else bundle[key]
        loaded[entry["metadata"]["variant"]] = _load(entry)
    fig, axes = plt.subplots(len(picks), 1 + len(loaded), figsize=(3.2 * (1 + len(loaded)),
                                                                   1.8 * len(picks)),
                             squeeze=False)
    nf = [y.shape[0] for y in test["labels"]]
    probs = {v: infer(m, [test["feats"][i] for i in picks], [nf[i] for i in picks])
             for v, m in loaded.items()}
    for r, i in enumerate(picks):
        axes[r, 0].imshow(test["labels"][i].T, aspect="auto", interpolation="nearest",
                          cmap="Greys", vmin=0, vmax=1)
        axes[r, 0].set_title(f"{test['names'][i]} reference" if r == 0 else test["names"][i],
                             fontsize=8)
        for c, (v, pr) in enumerate(probs.items(), start=1):
            axes[r, c].imshow(pr[r].T, aspect="auto", interpolation="nearest", cmap="viridis",
                              vmin=0, vmax=1)
            if r == 0:
                axes[r, c].set_title(f"{v} (seed {p.seeds[0]})", fontsize=8)
        for ax in axes[r]:
            ax.set_yticks(range(p.max_speakers))
            ax.set_xlabel("80 ms frame", fontsize=7)
    fig.tight_layout()

    # DER (c=0.25) by number of speakers, first seed, test split, tuned post-processing
    fig2, ax2 = plt.subplots(figsize=(5, 3.2))
    by = {n: g for n, g in sessions.groupby("session")}
    spk = np.asarray([int(by[n]["speaker"].nunique()) for n in test["names"]])
    for v, m in loaded.items():
        row = der_table[(der_table["variant"] == v) & (der_table["split"] == "test")
                        & (der_table["seed"] == p.seeds[0])].iloc[0]
        pp = PostProcessing(**json.loads(row["pp"]))
        pr = infer(m, test["feats"], nf)
        ders = []
        for k in range(1, p.max_speakers + 1):
            idx = np.flatnonzero(spk == k)
            if len(idx) == 0:
                ders.append(np.nan)
                continue
            ders.append(_scores([pr[i] for i in idx], [test["labels"][i] for i in idx],
                                [test["names"][i] for i in idx], sessions, pp,
                                p.frame_s)["der_c025"])
        ax2.plot(range(1, p.max_speakers + 1), ders, marker="o", label=v)
    ax2.set_xlabel("speakers in session")
    ax2.set_ylabel("DER (collar 0.25 s)")
    ax2.set_title("unseen-speaker test sessions", fontsize=9)
    ax2.legend(fontsize=8)
    fig2.tight_layout()

    fig3, ax3 = plt.subplots(figsize=(4, 4))
    table = pd.concat([der_table, clustering_table], ignore_index=True)
    for v, g in table[table["split"] == "test"].groupby("variant"):
        ax3.scatter(g["f1_pil"], g["f1_ats"], label=v, s=25)
    ax3.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    ax3.set_xlabel("F1 against best permutation (F1_pil)")
    ax3.set_ylabel("F1 against arrival order (F1_ats)")
    ax3.legend(fontsize=7)
    fig3.tight_layout()
    figures = {"activity.png": fig, "der_by_speakers.png": fig2, "f1_ats_vs_pil.png": fig3}
    return figures


__all__ = ["build_speaker_bank", "build_word_mixtures", "check_audio", "compute_features",
           "evaluate_diarizers", "judge_claims", "log_training_curves", "merge_cpwer_tables",
           "plot_figures", "run_clustering_baseline", "simulate_sessions",
           "train_evaluate_msasr", "train_variant"]


# -- 5. one recording ------------------------------------------------------------------------

def read_wav(path: str) -> tuple[np.ndarray, int]:
    """A wav file as float32 samples in [-1, 1] (first channel) and its sample rate."""
    from pathlib import Path

    from scipy.io import wavfile
    f = Path(path).expanduser()
    try:
        sr, x = wavfile.read(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"sortformer.audio_check.path: cannot read {str(f)!r} as wav: {err}"
                         ) from err
    x = np.asarray(x)
    if x.ndim == 2:
        x = x[:, 0]
    if x.dtype.kind == "i":
        x = x.astype(np.float64) / float(np.iinfo(x.dtype).max)
    elif x.dtype.kind == "u":
        x = (x.astype(np.float64) - 128.0) / 128.0
    if x.size == 0:
        raise ValueError(f"sortformer.audio_check.path: {str(f)!r} holds no samples")
    return x.astype(np.float32), int(sr)


def _reference_of(rttm_path: str, wav_path: str):
    from pathlib import Path

    from icml25.pipelines.sortformer.rttm import read_rttm
    sessions = read_rttm(Path(rttm_path).expanduser().read_text())
    if len(sessions) == 1:
        return next(iter(sessions.values()))
    stem = Path(wav_path).stem
    if stem not in sessions:
        raise ValueError(f"sortformer.audio_check.rttm: {rttm_path!r} describes "
                         f"{sorted(sessions)}, none of them named {stem!r} like the wav file")
    return sessions[stem]


def _onsets(hyp, ref) -> dict[str, float]:
    """How far the output starts from the first speech: the earliest output segment, and
    channel ``spk0`` (the first arrival's), in seconds (NaN when there is no output)."""
    t0 = min(g.start for g in ref)
    first = min((g.start for g in hyp), default=float("nan"))
    ch0 = min((g.start for g in hyp if g.speaker == "spk0"), default=float("nan"))
    return {"first_output_error_s": abs(first - t0), "channel0_onset_error_s": abs(ch0 - t0)}


def check_audio(utterances: pd.DataFrame, speakers: pd.DataFrame, der_table: pd.DataFrame,
                clustering_table: pd.DataFrame, params: dict[str, Any], *models: dict[str, Any],
                n_shards: int = 1) -> dict[str, Any]:
    """Diarize one recording with every trained diarizer (its tuned post-processing) and the
    clustering baseline (its tuned threshold): ``audio_check.path`` (a local wav) with its
    optional reference ``audio_check.rttm``, or else a synthesised ``audio_check.duration_s``
    session of 2 or more unseen speakers (the simulator's count weights without one-speaker). DER (collars 0.25 and 0) and the onset errors need a reference.
    Runs alone on a finished run's outputs: ``kedro run --pipeline=sortformer
    --nodes=sortformer.check_audio --params=sortformer.audio_check.path=<file.wav>``."""
    from icml25.core.device import set_threads
    from icml25.pipelines.sortformer.clustering import cluster_diarize
    from icml25.pipelines.sortformer.diarizer_training import infer
    from icml25.pipelines.sortformer.features import SAMPLE_RATE, log_mel, prepare_audio
    from icml25.pipelines.sortformer.model import output_frames
    from icml25.pipelines.sortformer.rttm import write_rttm
    from icml25.pipelines.sortformer.simulator import (
        SimConfig,
        render_session,
        session_segments,
        simulate_split,
    )
    p = _params(params)
    a = p.audio_check
    if not a.enabled:
        return {"enabled": False}
    set_threads(p.num_threads)
    if a.path is not None:
        x, sr = read_wav(a.path)
        wav = prepare_audio(x, sr)
        ref = _reference_of(a.rttm, a.path) if a.rttm is not None else None
        source = {"path": a.path, "rttm": a.rttm, "sample_rate": sr}
    else:
        sim = p.sim
        weights = [0.0, *sim.count_weights[1:]] if len(sim.count_weights) > 1 else [0.0, 1.0]
        cfg = SimConfig(duration_s=a.duration_s, count_weights=tuple(weights),
                        p_switch=sim.p_switch, p_overlap=sim.p_overlap,
                        overlap_range=tuple(sim.overlap_range),
                        silence_mean_s=sim.silence_mean_s, gain_db=sim.gain_db,
                        snr_range=tuple(sim.snr_range), rir=sim.rir,
                        rt60_range=tuple(sim.rt60_range))
        test_spk = sorted(speakers.loc[speakers["split"] == "test", "speaker"])
        rows = simulate_split(utterances, test_spk, 1, cfg, 7000 + a.seed, "audio_check")
        wav = render_session(rows, _audio(utterances))
        ref = session_segments(rows)
        source = {"path": None, "synthesised": f"{a.duration_s:g} s session of "
                  f"{rows['speaker'].nunique()} unseen speakers (seed {a.seed})"}
    duration = len(wav) / SAMPLE_RATE

    def score(hyp) -> dict[str, Any]:
        out: dict[str, Any] = {"n_segments": len(hyp),
                               "n_speakers": len({g.speaker for g in hyp})}
        if ref:
            for c, tag in ((0.25, "c025"), (0.0, "c0")):
                out[f"der_{tag}"] = der_components([ref], [hyp], [duration], c)["der"]
            out |= _onsets(hyp, ref)
        return out

    results: dict[str, Any] = {}
    rttm = {}
    feats = log_mel(wav, p.model.n_mels)
    for bundle in _merge_model_shards(models, n_shards):
        for key in sorted(bundle):
            entry = bundle[key]() if callable(bundle[key]) else bundle[key]
            meta = entry["metadata"]
            row = der_table[(der_table["variant"] == meta["variant"])
                            & (der_table["seed"] == meta["seed"]) & (der_table["split"] == "test")]
            if row.empty:
                raise ValueError(f"sortformer.der_table: no tuned post-processing for "
                                 f"{meta['variant']} seed {meta['seed']}")
            pp = PostProcessing(**json.loads(row["pp"].iloc[0]))
            probs = infer(_load(entry), [feats], [output_frames(feats.shape[0])])[0]
            probs = _gated([probs], [_band_snr(wav, probs.shape[0], p)], p)[0]
            hyp = probabilities_to_segments(probs, pp, p.frame_s, duration)
            results.setdefault(meta["variant"], {})[f"seed_{meta['seed']}"] = score(hyp)
            rttm.setdefault(meta["variant"], write_rttm(hyp, "audio_check"))
    th = clustering_table.loc[clustering_table["variant"] == "clustering", "pp"].iloc[0]
    threshold = float(str(th).removeprefix("threshold="))
    c = p.clustering
    frames = cluster_diarize(wav, threshold=threshold, frame_s=p.frame_s, vad_db=c.vad_db,
                             window_s=c.window_s, hop_s=c.hop_s, n_mfcc=c.n_mfcc)
    hyp = frames_to_segments(frames, p.frame_s)
    results["clustering"] = {"seed_0": score(hyp)}
    rttm["clustering"] = write_rttm(hyp, "audio_check")
    summary = {v: {m: float(np.nanmean([r[m] for r in per.values()]))
                   for m in next(iter(per.values()))} for v, per in results.items()}
    logger.info("sortformer audio check (%s): %s", source, {
        v: {m: round(x, 3) for m, x in s.items()} for v, s in summary.items()})
    return {"enabled": True, "source": source, "duration_s": duration,
            "reference_speakers": len({g.speaker for g in ref}) if ref else None,
            "mean": summary, "per_seed": results, "rttm": rttm}
