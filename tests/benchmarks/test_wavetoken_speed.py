"""Speed and memory of the wavetoken pipeline (run with `make bench`; never part of `make test`).

- tokenizer encode throughput, side by side on the same contexts (1024 series x 512 steps, NaNs
  and shorter series included): WaveToken's wavelet tokenizer built as the pipeline builds it
  (``pretraining.build_tokenizer`` with conf/base's variant ``wavetoken``), our Chronos bins
  (``bin_tokenizer.MeanScaleUniformBins``) and chronos-forecasting's ``MeanScaleUniformBins``
  (the reference it equals id for id), at V = 4096 and 1024; series per second in extra_info;
- scoring throughput on the same sample forecasts (500 series x 100 samples x 12 steps): our
  ``quantiles_from_samples`` + ``weighted_quantile_loss`` + ``mase`` against gluonts'
  ``evaluate_forecasts`` with ``MASE()`` and ``MeanWeightedSumQuantileLoss`` (the values they
  return are equal: tests/pipelines/wavetoken/test_peer_gluonts.py); forecasts per second;
- one training step of the default CPU model, on 1 and on 2 threads;
- the whole default run (`kedro run --pipeline=wavetoken`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.

Benchmarks record numbers; none asserts a wall-clock time.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from icml25.pipelines.wavetoken import metrics as fm
from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.model import Seq2SeqConfig, Seq2SeqForecaster
from icml25.pipelines.wavetoken.params import TokenizerParams
from icml25.pipelines.wavetoken.pretraining import build_tokenizer
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer

N_SERIES, CONTEXT = 1024, 512
N_FORECASTS, N_SAMPLES, HORIZON, FREQ = 500, 100, 12, "M"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def contexts() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.normal(size=(N_SERIES, CONTEXT)), axis=1)
    x[rng.random(x.shape) < 0.02] = np.nan  # missing values inside contexts
    x[: N_SERIES // 4, : CONTEXT // 3] = np.nan  # a quarter are shorter series
    return x


def pipeline_wavelet_tokenizer() -> WaveletTokenizer:
    """conf/base's ``wavetoken`` variant, built by the pipeline's own factory."""
    conf = yaml.safe_load((ROOT / "conf/base/parameters_wavetoken.yml").read_text())
    params = TokenizerParams(**conf["wavetoken"]["variants"]["wavetoken"])
    tokenizer = build_tokenizer(params, context_length=CONTEXT)
    assert isinstance(tokenizer, WaveletTokenizer)
    return tokenizer


def chronos_reference(vocab_size: int):
    chronos = pytest.importorskip("chronos.chronos")
    config = chronos.ChronosConfig(
        tokenizer_class="MeanScaleUniformBins",
        tokenizer_kwargs={"low_limit": -15.0, "high_limit": 15.0},
        context_length=CONTEXT, prediction_length=64, n_tokens=vocab_size, n_special_tokens=2,
        pad_token_id=0, eos_token_id=1, use_eos_token=True, model_type="seq2seq",
        num_samples=20, temperature=1.0, top_k=50, top_p=1.0,
    )
    return config.create_tokenizer()


@pytest.mark.benchmark(group="tokenizer-encode")
@pytest.mark.parametrize(
    "name",
    ["wavetoken", "ours_bins_4096", "chronos_forecasting_4096", "ours_bins_1024",
     "chronos_forecasting_1024"],
)
def test_tokenizer_encode_throughput(benchmark, contexts, name):
    if name == "wavetoken":
        encode, data = pipeline_wavelet_tokenizer().context_input, contexts
    elif name.startswith("ours_bins"):
        vocab = int(name.rsplit("_", 1)[1])
        encode = MeanScaleUniformBins(vocab_size=vocab, context_length=CONTEXT).context_input
        data = contexts
    else:  # the reference takes a torch tensor (zero-copy view of the same contexts)
        vocab = int(name.rsplit("_", 1)[1])
        encode, data = chronos_reference(vocab).context_input_transform, torch.from_numpy(contexts)
    ids, _, _ = benchmark(encode, data)
    assert tuple(ids.shape) == (N_SERIES, CONTEXT + 1)
    benchmark.extra_info["series_per_second"] = N_SERIES / benchmark.stats.stats.mean


@pytest.fixture(scope="module")
def sample_forecasts() -> tuple[list[np.ndarray], np.ndarray]:
    """(series = history + future, float32-exact; samples [n, S, H])."""
    rng = np.random.default_rng(1)
    series = []
    for _ in range(N_FORECASTS):
        length = int(rng.integers(40, 300)) + HORIZON
        t = np.arange(length)
        y = 100 + 10 * np.sin(2 * np.pi * t / 12) + np.cumsum(rng.normal(size=length))
        series.append(y.astype(np.float32).astype(np.float64))
    truth = np.stack([s[-HORIZON:] for s in series])
    samples = truth[:, None, :] + rng.normal(size=(N_FORECASTS, N_SAMPLES, HORIZON)) * 3
    return series, samples.astype(np.float32).astype(np.float64)


@pytest.mark.benchmark(group="metrics-scoring")
@pytest.mark.parametrize("name", ["ours", "gluonts_evaluate_forecasts"])
def test_scoring_throughput(benchmark, sample_forecasts, name):
    series, samples = sample_forecasts
    histories = [s[:-HORIZON] for s in series]
    y = np.stack([s[-HORIZON:] for s in series])
    levels = list(fm.QUANTILE_LEVELS)
    season = fm.seasonality(FREQ)
    if name == "ours":
        def score():
            q = fm.quantiles_from_samples(samples, levels)
            return (fm.weighted_quantile_loss(y, q, levels),
                    fm.mase(y, q[:, levels.index(0.5)], histories, season))

        wql, mase = benchmark(score)
    else:
        split = pytest.importorskip("gluonts.dataset.split")
        from gluonts.dataset.common import ListDataset
        from gluonts.ev.metrics import MASE, MeanWeightedSumQuantileLoss
        from gluonts.model.evaluation import evaluate_forecasts
        from gluonts.model.forecast import SampleForecast

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = pd.Period("2001-01", freq=FREQ)
            dataset = ListDataset([{"start": start, "target": s} for s in series], freq=FREQ)
            test_data = split.split(dataset, offset=-HORIZON)[1].generate_instances(
                prediction_length=HORIZON, windows=1)
            inputs = list(test_data.input)

        def fresh_forecasts():  # SampleForecast caches its sorted samples: new ones each round
            forecasts = [SampleForecast(samples=samples[i],
                                        start_date=e["start"] + len(e["target"]))
                         for i, e in enumerate(inputs)]
            return (forecasts,), {}

        def score(forecasts):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table = evaluate_forecasts(
                    forecasts, test_data=test_data,
                    metrics=[MASE(), MeanWeightedSumQuantileLoss(quantile_levels=levels)])
            return (float(table["mean_weighted_sum_quantile_loss"].iloc[0]),
                    float(table["MASE[0.5]"].iloc[0]))

        logging.getLogger("gluonts").setLevel(logging.ERROR)
        wql, mase = benchmark.pedantic(score, setup=fresh_forecasts, rounds=5, iterations=1)
    benchmark.extra_info["wql"] = wql
    benchmark.extra_info["mase"] = mase
    benchmark.extra_info["forecasts_per_second"] = N_FORECASTS / benchmark.stats.stats.mean


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
