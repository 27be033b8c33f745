"""Speed and memory of the acorn pipeline (run with `make bench`; never part of `make test`).

- simulated clips per second of the channel simulator (component model and the
  pyroomacoustics ISM re-render of T2), per task family, 0.25-s two-mic clips (issue 22);
- training throughput (clips per second) of the default encoder with and without phase;
- the whole default run (`kedro run --pipeline=acorn`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icml25.pipelines.acorn import scenes
from icml25.pipelines.acorn.encoder import AcornModel, EncoderConfig
from icml25.pipelines.acorn.sources import SYNTHETIC_FAMILIES, synthetic_source

N_PER_TASK = 40


@pytest.fixture(scope="module")
def bank() -> tuple[list[np.ndarray], pd.DataFrame]:
    rng = np.random.default_rng(0)
    audio = [synthetic_source(f, 32000, rng) for f in SYNTHETIC_FAMILIES for _ in range(3)]
    return audio, pd.DataFrame({"split": ["train"] * len(audio)})


@pytest.mark.benchmark(group="simulate")
@pytest.mark.parametrize("task", ["los", "multipath", "doppler", "doa", "range", "doa_ism"])
def test_simulated_clips_per_second(benchmark, bank, task):
    audio, index = bank
    name = task.removesuffix("_ism")
    meta = scenes.sample_split({name: N_PER_TASK}, "train", scenes.SceneConfig(), index, 0,
                               simulator="ism" if task.endswith("_ism") else "component")
    clip_n = scenes.SceneConfig().clip_n
    out = benchmark.pedantic(scenes.render_split, args=(meta, audio, clip_n), rounds=1,
                             iterations=1)
    assert out.shape == (N_PER_TASK, 2, clip_n)
    benchmark.extra_info["clips_per_second"] = N_PER_TASK / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="train-step")
@pytest.mark.parametrize("use_phase", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_training_throughput_default_encoder(benchmark, use_phase, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = AcornModel(EncoderConfig(d=64, layers=2, heads=4, use_phase=use_phase))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, src = torch.randn(32, 2, 4000), torch.zeros(32, dtype=torch.long)

        def step() -> float:
            opt.zero_grad()
            loss = model(x, "doa", src).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.item()

        benchmark.pedantic(step, rounds=5, iterations=1, warmup_rounds=1)
        benchmark.extra_info["clips_per_second"] = 32 / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("acorn")
