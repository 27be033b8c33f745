"""Speed and memory of the sortformer pipeline (run with `make bench`; never part of `make test`).

- training throughput of the default diarizer (sessions per second) with PIL, Sort and hybrid
  loss on the same batches (the paper reports ~2% extra epoch time for the hybrid);
- diarizer inference real-time factor on 6 s sessions;
- the whole default run (`kedro run --pipeline=sortformer`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import pytest
import torch

from icml25.pipelines.sortformer.model import Diarizer, DiarizerConfig
from icml25.pipelines.sortformer.sort_loss import hybrid_loss

#: the default model of conf/base/parameters_sortformer.yml
DEFAULT = DiarizerConfig(n_mels=40, conv_channels=8, d_model=96, n_layers=3, n_heads=4,
                         d_ff=384, dropout=0.1)
BATCH, FEAT_FRAMES, LABEL_FRAMES = 8, 601, 75  # 6 s sessions


@pytest.mark.benchmark(group="sortformer-train-step")
@pytest.mark.parametrize("loss", ["pil", "sort", "hybrid"])
def test_training_step_throughput(benchmark, loss):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = Diarizer(DEFAULT)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(BATCH, FEAT_FRAMES, DEFAULT.n_mels)
        y = (torch.rand(BATCH, LABEL_FRAMES, 4) > 0.7).float()
        ats, pil = {"pil": (0.0, 1.0), "sort": (1.0, 0.0), "hybrid": (0.5, 0.5)}[loss]

        def step():
            opt.zero_grad()
            value = hybrid_loss(model(x)[:, :LABEL_FRAMES], y, None, ats, pil)
            value.backward()
            opt.step()
            return value.item()

        benchmark(step)
        benchmark.extra_info["sessions_per_second"] = BATCH / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="sortformer-inference")
def test_inference_real_time_factor(benchmark):
    torch.manual_seed(0)
    model = Diarizer(DEFAULT).eval()
    x = torch.randn(16, FEAT_FRAMES, DEFAULT.n_mels)

    def run():
        with torch.no_grad():
            return model(x)

    benchmark(run)
    benchmark.extra_info["real_time_factor"] = benchmark.stats.stats.mean / (16 * 6.0)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("sortformer")
