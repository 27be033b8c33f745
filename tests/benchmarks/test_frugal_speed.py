"""Speed and memory of the frugal pipeline (run with `make bench`; never part of `make test`).

- optimiser step time on the default model (d 64, 4 layers, vocab 1024) with real gradients:
  every optimiser of the pipeline against AdamW (issue: FRUGAL's step at most 1.3x AdamW's);
  the ratio is recorded in extra_info, never asserted;
- training throughput (tokens/s) of one full step with AdamW and FRUGAL-block, 1 and 2 threads;
- the whole default run (`kedro run --pipeline=frugal`, conf/base): wall time and peak RSS.
"""

from __future__ import annotations

import pytest
import torch

from icml25.core.causal_lm import LlamaConfig, LlamaLM
from icml25.pipelines.frugal.params import OptimizerParams
from icml25.pipelines.frugal.pretraining import build_optimizer

BATCH, SEQ = 16, 64
CONFIGS = {
    "adamw": OptimizerParams(kind="adamw", role="baseline", lr=1e-3),
    "frugal_block_025": OptimizerParams(kind="frugal", role="method", lr=1e-3, update_gap=25),
    "frugal_block_0": OptimizerParams(kind="frugal", role="method", lr=1e-3, density=0.0),
    "frugal_svd_025": OptimizerParams(kind="frugal", role="method", lr=1e-3, projector="svd",
                                      update_gap=25),
    "galore_025": OptimizerParams(kind="galore", role="baseline", lr=1e-3, projector="svd",
                                  update_gap=25, state_free="no", proj_lr_scale=0.25,
                                  state_on_refresh="keep"),
    "badam_025": OptimizerParams(kind="badam", role="baseline", lr=1e-3, update_gap=25),
    "signsgd": OptimizerParams(kind="signsgd", role="baseline", lr=1e-3),
}
_STEP_MS: dict[str, float] = {}


def _model() -> LlamaLM:
    torch.manual_seed(0)
    return LlamaLM(LlamaConfig(vocab_size=1024, d_model=64, n_layers=4, n_heads=4, d_ff=176,
                               max_seq_len=SEQ))


@pytest.mark.benchmark(group="optimizer-step")
@pytest.mark.parametrize("name", list(CONFIGS))
def test_optimizer_step_time(benchmark, name):
    torch.set_num_threads(1)
    model = _model()
    opt = build_optimizer(model, CONFIGS[name], seed=0)
    ids = torch.randint(0, 1024, (BATCH, SEQ + 1))
    model.loss(ids).backward()  # real gradients, kept fixed: only the step is timed
    opt.step()
    benchmark(opt.step)  # amortised over refreshes (T = 25: one SVD every 25 steps)
    _STEP_MS[name] = benchmark.stats.stats.median * 1e3
    benchmark.extra_info["step_ms"] = _STEP_MS[name]
    if "adamw" in _STEP_MS:
        benchmark.extra_info["ratio_to_adamw"] = _STEP_MS[name] / _STEP_MS["adamw"]
        print(f"{name}: {_STEP_MS[name]:.3f} ms/step = "
              f"{_STEP_MS[name] / _STEP_MS['adamw']:.2f}x AdamW")


@pytest.mark.benchmark(group="train-step")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["adamw", "frugal_block_025"])
def test_training_throughput(benchmark, name, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = _model()
        opt = build_optimizer(model, CONFIGS[name], seed=0)
        ids = torch.randint(0, 1024, (BATCH, SEQ + 1))

        def step() -> float:
            opt.zero_grad()
            loss = model.loss(ids)
            loss.backward()
            opt.step()
            return float(loss)

        benchmark(step)
        benchmark.extra_info["tokens_per_second"] = BATCH * SEQ / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("frugal")
