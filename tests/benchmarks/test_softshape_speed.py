"""Speed and memory of the softshape pipeline (run with `make bench`; never part of `make test`).

- SoftShape's training time next to MiniRocket's on the same GunPoint training split (issue:
  report both): one full-batch SoftShape step (forward + backward, 1 and 2 threads), a
  80-epoch SoftShape fit, and a MiniRocket fit (numba compiled once beforehand);
- inference throughput (series per second) of SoftShape;
- the whole default run (`kedro run --pipeline=softshape`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from icml25.pipelines.softshape.aeon_baselines import fit_predict
from icml25.pipelines.softshape.classifiers import TrainSettings, fit_softshape, predict_logits
from icml25.pipelines.softshape.model import SoftShape, SoftShapeConfig
from icml25.pipelines.softshape.ucr_data import fill_and_normalise, load_ucr, make_folds


@pytest.fixture(scope="module")
def gunpoint():
    data = load_ucr("GunPoint")
    (fold,) = make_folds(data, "original", 5, [0], 0)
    X = fill_and_normalise(data.X, fold.train).astype(np.float32)
    return X, data.y, fold


@pytest.mark.benchmark(group="softshape-train-step")
@pytest.mark.parametrize("threads", [1, 2])
def test_softshape_full_batch_step(benchmark, gunpoint, threads):
    X, y, fold = gunpoint
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = SoftShape(SoftShapeConfig(150, 32, 4, 2)).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.as_tensor(X[fold.train]).unsqueeze(1)
        t = torch.as_tensor(y[fold.train])

        def step():
            opt.zero_grad()
            logits, aux, _ = model(x, warm=False)
            loss = F.cross_entropy(logits, t) + 1e-3 * aux
            loss.backward()
            opt.step()
            return float(loss.detach())

        benchmark(step)
        benchmark.extra_info["series_per_second"] = len(t) / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="softshape-vs-minirocket-fit")
@pytest.mark.parametrize("model", ["softshape_80_epochs", "mini_rocket"])
def test_training_time_softshape_next_to_minirocket(benchmark, gunpoint, model):
    X, y, fold = gunpoint
    torch.set_num_threads(1)
    fit_idx = np.concatenate([fold.train, fold.val])
    if model == "mini_rocket":
        fit_predict("mini_rocket", X[fit_idx], y[fit_idx], X[fold.test[:5]], 0)  # JIT once
        out = benchmark.pedantic(
            lambda: fit_predict("mini_rocket", X[fit_idx], y[fit_idx], X[fold.test], 0),
            rounds=3, iterations=1)
        benchmark.extra_info["train_seconds"] = out.train_seconds
    else:
        config = SoftShapeConfig(150, 32, 4, 2)
        settings = TrainSettings(epochs=80, warm_up=25, patience=30)
        fit = benchmark.pedantic(
            lambda: fit_softshape(X[fold.train], y[fold.train], X[fold.val], y[fold.val],
                                  config, settings, 0, len(y)), rounds=1, iterations=1)
        benchmark.extra_info["train_seconds"] = fit.train_seconds
        start = time.perf_counter()
        predict_logits(fit.model, X[fold.test])
        benchmark.extra_info["inference_series_per_second"] = (
            len(fold.test) / (time.perf_counter() - start))


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("softshape")
