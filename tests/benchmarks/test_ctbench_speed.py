"""Speed and memory of the ctbench pipeline (run with `make bench`; never part of `make test`).

- bound throughput (samples per second) of IBP, CROWN-IBP and full CROWN on the default network
  (MLP 784-256-256-10) and on the small CNN, at ε = 0.1 on MNIST-sized inputs;
- the whole default run (`kedro run --pipeline=ctbench`, conf/base): wall time and peak RSS in the
  benchmark's extra_info.
"""

from __future__ import annotations

import pytest
import torch

from icml25.pipelines.ctbench.bounds import (
    crown,
    crown_ibp,
    ibp,
    input_box,
    margin_spec,
    network_ops,
)
from icml25.pipelines.ctbench.networks import build_network

BATCH = {"ibp": 1000, "crown_ibp": 1000, "crown": 20}


@pytest.mark.benchmark(group="bound-throughput")
@pytest.mark.parametrize("net_name", ["mlp", "small_cnn"])
@pytest.mark.parametrize("bound", ["ibp", "crown_ibp", "crown"])
def test_bound_throughput(benchmark, net_name, bound):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        net = build_network(net_name, (1, 28, 28), 10).eval()
        ops = network_ops(net, (1, 28, 28))
        n = BATCH[bound] if net_name == "mlp" else max(BATCH[bound] // 4, 5)
        x, y = torch.rand(n, 1, 28, 28), torch.randint(0, 10, (n,))
        lower, upper = input_box(x, 0.1)
        spec = margin_spec(y, 10)

        def run():
            with torch.no_grad():
                if bound == "ibp":
                    return ibp(ops, lower, upper, spec).lower
                if bound == "crown_ibp":
                    return crown_ibp(ops, lower, upper, spec)[0]
                return crown(ops, lower, upper, spec, chunk=8)[0]

        out = benchmark(run)
        assert out.shape == (n, 9)
        benchmark.extra_info["samples_per_second"] = n / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("ctbench")
