"""Speed and memory of the distributed_estimation pipeline (`make bench`; never in `make test`).

- protocol throughput: terminals simulated per second for the layered protocol's sub-protocols
  (BF, AT) and the baselines at m = 4096, the default sweep size;
- the whole default run (`kedro run --pipeline=distributed_estimation`, conf/base): wall time and
  peak RSS recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.distributed_estimation import protocols as P
from icml25.pipelines.distributed_estimation.functions import d2_cells, make_model

M = 4096


@pytest.mark.benchmark(group="protocol-throughput")
@pytest.mark.parametrize("protocol,n,k", [("bf", 4, 64), ("at", 256, 16), ("at", 256, 2),
                                          ("hash1bit", 4, 64), ("forward", 4, 4),
                                          ("localquant", 256, 16)])
def test_protocol_terminals_per_second(benchmark, protocol, n, k):
    model = make_model("density", d2_cells(0.5))
    p = model.symbol_distribution(k)
    rng = np.random.default_rng(0)
    res = benchmark(P.PROTOCOLS[protocol], p, M, n, 2, rng, p_bound=model.p_bound(k))
    assert res.transcript.max_bits <= 2
    benchmark.extra_info["terminals_per_second"] = M / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("distributed_estimation")
