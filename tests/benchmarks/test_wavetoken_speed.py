"""Speed and memory of the wavetoken pipeline (run with `make bench`; never part of `make test`).

- tokenizer encode throughput: WaveToken's wavelet tokenizer against the Chronos-style bins on
  the same input, in one run (issue: at least as many series per second);
- one training step of the default CPU model, on 1 and on 2 threads;
- the whole default run (`kedro run --pipeline=wavetoken`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.model import Seq2SeqConfig, Seq2SeqForecaster
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer

N_SERIES, CONTEXT = 4096, 512


@pytest.fixture(scope="module")
def contexts() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.normal(size=(N_SERIES, CONTEXT)), axis=1)
    x[rng.random(x.shape) < 0.02] = np.nan  # missing values inside contexts
    x[: N_SERIES // 4, : CONTEXT // 3] = np.nan  # a quarter are shorter series
    return x


@pytest.mark.benchmark(group="tokenizer-encode")
@pytest.mark.parametrize("name", ["wavetoken_bior2.2_J1", "chronos_bins_4096"])
def test_tokenizer_encode_throughput(benchmark, contexts, name):
    tokenizer = (WaveletTokenizer(vocab_size=1024, wavelet="bior2.2", level=1)
                 if name.startswith("wavetoken") else MeanScaleUniformBins(vocab_size=4096))
    ids, _, _ = benchmark(tokenizer.context_input, contexts)
    assert ids.shape == (N_SERIES, CONTEXT + 1)
    benchmark.extra_info["series_per_second"] = N_SERIES / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="train-step")
@pytest.mark.parametrize("threads", [1, 2])
def test_training_step_default_model(benchmark, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = Seq2SeqForecaster(Seq2SeqConfig(vocab_size=1024, max_context_tokens=129,
                                                max_target_tokens=33))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ids = torch.randint(2, 1024, (16, 129))
        mask = torch.ones_like(ids, dtype=torch.bool)
        labels = torch.randint(2, 1024, (16, 33))

        def step():
            opt.zero_grad()
            loss = model.loss(ids, mask, labels)
            loss.backward()
            opt.step()
            return loss.item()

        benchmark(step)
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("wavetoken")
