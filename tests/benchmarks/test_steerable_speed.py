"""Speed and memory of the steerable pipeline (run with `make bench`; never part of `make test`).

- training throughput (images per second) of each 2D variant at the default (conf/base) size,
  on 1 and on 2 threads, and at the paper (conf/paper) size on the available device;
- the same for the 3D variants (voxel grids per second) at the default and paper sizes;
- the whole default run (`kedro run --pipeline=steerable`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from icml25.core.device import resolve_device
from icml25.pipelines.steerable.builders import (
    architecture,
    architecture_3d,
    build_network,
    build_network_3d,
)
from icml25.pipelines.steerable.params import SteerableParams

ROOT = Path(__file__).resolve().parents[2]
BATCH = 64


def _params(env: str) -> SteerableParams:
    tree = yaml.safe_load((ROOT / "conf/base/parameters_steerable.yml").read_text())["steerable"]
    if env != "base":
        override = yaml.safe_load((ROOT / f"conf/{env}/parameters_steerable.yml").read_text())
        for key, value in override["steerable"].items():
            if isinstance(value, dict) and isinstance(tree.get(key), dict):
                tree[key] = {**tree[key], **value}
            else:
                tree[key] = value
    return SteerableParams.model_validate(tree)


def _step(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device):
    """One Adam step of ``net`` on the fixed batch ``(x, y)``, as a benchmarkable callable."""
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return loss.item()

    return step


def _train_step(variant: str, env: str, device: torch.device):
    torch.manual_seed(0)
    net = build_network(architecture(_params(env), variant)).to(device)
    x = torch.rand(BATCH, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (BATCH,), device=device)
    return _step(net, x, y, device)


@pytest.mark.benchmark(group="train-step-default")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("variant", ["steer_tf", "steer_cnn", "cnn", "vit"])
def test_training_throughput_default_size(benchmark, variant, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        step = _train_step(variant, "base", torch.device("cpu"))
        benchmark(step)
        benchmark.extra_info["images_per_second"] = BATCH / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="train-step-paper")
@pytest.mark.parametrize("variant", ["steer_tf", "steer_cnn"])
def test_training_throughput_paper_size(benchmark, variant):
    device = resolve_device("auto")
    step = _train_step(variant, "paper", device)
    benchmark.pedantic(step, rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info["images_per_second"] = BATCH / benchmark.stats.stats.mean
    benchmark.extra_info["device"] = str(device)


def _train_step_3d(variant: str, env: str, device: torch.device, batch: int):
    torch.manual_seed(0)
    p = _params(env)
    net = build_network_3d(architecture_3d(p, variant)).to(device)
    g = p.data3d.grid
    x = torch.rand(batch, 1, g, g, g, device=device)
    y = torch.randint(0, 8, (batch,), device=device)
    return _step(net, x, y, device)


@pytest.mark.benchmark(group="train-step-3d-default")
@pytest.mark.parametrize("variant", ["steer_tf_3d", "steer_cnn_3d", "cnn_3d"])
def test_training_throughput_3d_default_size(benchmark, variant):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step = _train_step_3d(variant, "base", torch.device("cpu"), 32)
        benchmark(step)
        benchmark.extra_info["grids_per_second"] = 32 / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="train-step-3d-paper")
@pytest.mark.parametrize("variant", ["steer_tf_3d", "steer_cnn_3d"])
def test_training_throughput_3d_paper_size(benchmark, variant):
    device = resolve_device("auto")
    step = _train_step_3d(variant, "paper", device, 8)
    benchmark.pedantic(step, rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info["grids_per_second"] = 8 / benchmark.stats.stats.mean
    benchmark.extra_info["device"] = str(device)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("steerable")
