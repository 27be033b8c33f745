"""The paper config's memory fixes (docs/scale.md): the training split stays float16 with each
task's clips a view of the cached array, and the validation loss runs in batches."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icml25.pipelines.acorn.encoder import AcornModel, EncoderConfig
from icml25.pipelines.acorn.multitask import target_stats, train_model, validation_loss
from icml25.pipelines.acorn.nodes import _task_data


def _split(n_per_task: dict[str, int], seed: int = 0):
    rng = np.random.default_rng(seed)
    tasks = [t for t, n in n_per_task.items() for _ in range(n)]
    n = len(tasks)
    meta = pd.DataFrame({"split": "train", "task": tasks, "source_id": rng.integers(0, 3, n),
                         "label": np.where(np.isin(tasks, ["los", "multipath"]),
                                           rng.integers(0, 2, n), rng.normal(0, 3, n))})
    clips = {"train": rng.standard_normal((n, 2, 400)).astype(np.float16)}
    return meta, clips


def test_float16_training_split_is_a_view_with_the_float32_values():
    meta, clips = _split({"los": 3, "doa": 4, "range": 2})
    half = _task_data(meta, clips, "train", keep_float16=True)
    full = _task_data(meta, clips, "train")
    cache = torch.from_numpy(clips["train"])
    for task in ("los", "doa", "range"):
        assert half[task].audio.dtype == torch.float16
        assert half[task].audio.untyped_storage().data_ptr() == cache.untyped_storage().data_ptr()
        assert full[task].audio.dtype == torch.float32
        assert torch.equal(half[task].audio.float(), full[task].audio)
        np.testing.assert_array_equal(half[task].target, full[task].target)


def test_non_contiguous_rows_are_gathered():
    meta, clips = _split({"los": 2, "doa": 2})
    order = [0, 2, 1, 3]  # tasks interleaved: los, doa, los, doa
    meta, clips = meta.iloc[order].reset_index(drop=True), {"train": clips["train"][order]}
    data = _task_data(meta, clips, "train", keep_float16=True)
    assert torch.equal(data["los"].audio, torch.from_numpy(clips["train"][[0, 2]]))
    assert torch.equal(data["doa"].audio, torch.from_numpy(clips["train"][[1, 3]]))


def test_training_on_float16_clips_equals_training_on_their_float32_copy():
    meta, clips = _split({"los": 6, "doa": 6})
    cfg = EncoderConfig(d=16, layers=1, heads=2, dropout=0.0, doa_head="lag", lag_bands=2,
                        lag_channels=4, lag_kernel=3, lag_window=12, max_tdoa=9.33)
    runs = []
    for keep in (True, False):
        data = _task_data(meta, clips, "train", keep_float16=keep)
        model, _ = train_model(cfg, data, data, epochs=2, batch_size=4, lr=1e-3,
                               weight_decay=0.0, seed=0)
        runs.append(model.state_dict())
    for name, value in runs[0].items():
        assert torch.equal(value, runs[1][name]), name


def test_batched_validation_loss_is_the_item_mean():
    meta, clips = _split({"los": 7, "doppler": 5, "doa": 6})
    data = _task_data(meta, clips, "train")
    torch.manual_seed(0)
    cfg = EncoderConfig(d=16, layers=1, heads=2, dropout=0.0, n_sources=4, doa_head="lag",
                        lag_bands=2, lag_channels=4, lag_kernel=3, lag_window=12, max_tdoa=9.33)
    model = AcornModel(cfg).eval()
    stats = target_stats(data, ("doa",))
    whole = validation_loss(model, data, stats, batch_size=128)
    batched = validation_loss(model, data, stats, batch_size=3)
    assert abs(whole - batched) < 1e-5 * max(1.0, abs(whole))
    # each task's loss is that task's item mean: a task alone, in batches of 2 or in one
    los = validation_loss(model, {"los": data["los"]}, stats, batch_size=2)
    assert abs(los - validation_loss(model, {"los": data["los"]}, stats)) < 1e-6


# ---------------------------------------------------------------- Doppler scenes of long clips
def test_doppler_scenes_of_paper_clips_keep_the_source_away_from_the_array():
    """4-s clips (the paper config): an approaching source at up to 40 m/s covers 160 m, more
    than the drawn 12-30 m; d0 is raised so that the scene and its mirror (-v) render."""
    from icml25.pipelines.acorn import channels as ch
    from icml25.pipelines.acorn.scenes import (
        DOPPLER_MIN_RANGE,
        DOPPLER_TAIL_S,
        SceneConfig,
        doppler_min_start_range,
        sample_scene,
    )
    cfg = SceneConfig(clip_s=4.0)
    rng = np.random.default_rng(0)
    t = np.arange(-DOPPLER_TAIL_S, cfg.clip_s, 1 / ch.FS)
    for _ in range(200):
        row = sample_scene("doppler", rng, cfg, 0)
        assert row["d0"] >= 12.0
        for v in (row["v"], -row["v"]):
            for off in (-cfg.mic_spacing / 2, cfg.mic_spacing / 2):
                heard = (row["d0"] + off + v * t) / (1 + v / ch.SPEED_OF_SOUND)
                assert heard.min() >= DOPPLER_MIN_RANGE - 1e-9
    # the bound is tight: a source starting just inside it comes closer than the minimum
    v = -40.0
    d0 = doppler_min_start_range(v, cfg) - cfg.mic_spacing / 2 - 0.5
    assert (d0 + v * t[-1]) / (1 + v / ch.SPEED_OF_SOUND) < DOPPLER_MIN_RANGE
    with pytest.raises(ch.SceneError, match="passes through"):
        ch.render_moving_source(np.ones(8 * ch.FS), v, 150.0, 4 * ch.FS, start=0.2)


def test_doppler_scenes_of_default_clips_are_drawn_as_before():
    """At the CPU default's 0.25-s clips the bound is below the drawn 12 m for every speed the
    default allows, so the default scenes are unchanged."""
    from icml25.pipelines.acorn.scenes import SceneConfig, doppler_min_start_range
    cfg = SceneConfig(clip_s=0.25, mic_spacing=0.2)
    assert max(doppler_min_start_range(v, cfg) for v in np.linspace(-40, 40, 161)) < 12.0


# ---------------------------------------------------------------- rendering at paper counts
def test_rendering_in_worker_processes_and_float16_gives_the_same_clips(noise_scenes):
    from icml25.pipelines.acorn import scenes
    meta, sources = noise_scenes(14)
    serial = scenes.render_split(meta, sources, 800)
    parallel = scenes.render_split(meta, sources, 800, n_jobs=2)  # 70 rows: 2 processes
    assert serial.dtype == parallel.dtype == np.float32
    assert np.array_equal(serial, parallel)
    half = scenes.render_split(meta, sources, 800, dtype=np.float16, n_jobs=2)
    assert half.dtype == np.float16 and np.array_equal(half, serial.astype(np.float16))
    with pytest.raises(ValueError, match="n_jobs must be >= 0"):
        scenes.render_split(meta, sources, 800, n_jobs=-1)
