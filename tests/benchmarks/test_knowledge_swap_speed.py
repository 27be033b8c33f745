"""Speed and memory of the knowledge_swap pipeline (run with `make bench`; never in `make test`).

- one swap step of the default ViT-tiny (LoRA only, retain + learn batch of 2 x 64) and one
  pretraining step (full model, batch 64), on 1 and on 2 threads: images per second;
- the whole default run (`kedro run --pipeline=knowledge_swap`, conf/base): wall time and peak
  RSS in the benchmark's extra_info (issue budget: 10 min, 4 GB).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from icml25.pipelines.knowledge_swap.swap import SwapHyper, make_optimizer, prepare_swap_model
from icml25.pipelines.knowledge_swap.vit import ViT, ViTConfig, group_sparse_penalty

BATCH = 64


def _step_fn(kind: str):
    torch.manual_seed(0)
    model = ViT(ViTConfig())
    if kind == "swap":
        hp = SwapHyper()
        model, params = prepare_swap_model(model, 3, hp, seed=0)
        opt = make_optimizer(params, hp)
        n = 2 * BATCH
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
        n = BATCH
    x, y = torch.rand(n, 28, 28), torch.randint(0, 10, (n,))

    def step() -> float:
        loss = F.cross_entropy(model(x), y)
        if kind == "swap":
            loss = loss + 0.005 * group_sparse_penalty(model)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step, n


@pytest.mark.benchmark(group="knowledge-swap-step")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["swap", "pretrain"])
def test_training_step_throughput(benchmark, kind, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        step, n = _step_fn(kind)
        benchmark(step)
        benchmark.extra_info["images_per_second"] = n / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("knowledge_swap")
