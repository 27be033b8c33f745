"""Scale-out measurements (run with `make bench`; never part of `make test`).

The `__default__` pipeline (every paper, then the scorecard) run twice in one benchmark: once
with Kedro's SequentialRunner and once with icml25's DaskRunner on a 2-worker LocalCluster.
Both wall times land in the benchmark's extra_info. `ICML25_BENCH_ENV` picks the configuration
environment (default `base`; `test` gives a quick measurement of the same code path).
"""

from __future__ import annotations

import os

import pytest


@pytest.mark.benchmark(group="scale-out")
def test_default_pipeline_sequential_vs_dask_two_workers(benchmark, kedro_project, run_kedro):
    env = f"--env={os.environ.get('ICML25_BENCH_ENV', 'base')}"
    times: dict[str, float] = {}

    def both() -> None:
        times["sequential_s"], _ = run_kedro(kedro_project, env)
        times["dask_2_workers_s"], _ = run_kedro(  # same project: every output is rewritten
            kedro_project, env, "--runner=icml25.runners.DaskRunner")

    benchmark.pedantic(both, rounds=1, iterations=1)
    benchmark.extra_info.update(times)
    benchmark.extra_info["speedup"] = times["sequential_s"] / times["dask_2_workers_s"]
    benchmark.extra_info["env"] = os.environ.get("ICML25_BENCH_ENV", "base")
