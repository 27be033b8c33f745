"""Speed and memory of the sparse_iht pipeline (run with `make bench`; never part of `make test`).

- the two-step projection on d = 500 (projections per second) against the exact one;
- IHT-2SP iterations per second and HSG-HT-2SP sample gradients per second at the default size
  (n = 150, d = 500, k = 20);
- zeroth-order function queries per second (n = 200, d = 100);
- the whole default run (`kedro run --pipeline=sparse_iht`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.sparse_iht import algorithms as alg
from icml25.pipelines.sparse_iht.problems import LeastSquares, make_sparse_regression
from icml25.pipelines.sparse_iht.projections import (
    Constraint,
    exact_sparse_projection,
    two_step_projection,
)


@pytest.fixture(scope="module")
def default_problem() -> LeastSquares:
    truth = make_sparse_regression(150, 500, 10, 0.5, 0.3, seed=0)
    return LeastSquares(truth.X, truth.y)


@pytest.mark.benchmark(group="projection")
@pytest.mark.parametrize("which", ["two_step", "exact"])
def test_projection_throughput(benchmark, which):
    v = np.random.default_rng(0).normal(size=500)
    gamma = Constraint("nonneg")
    project = two_step_projection if which == "two_step" else exact_sparse_projection
    benchmark(project, v, 20, gamma)
    benchmark.extra_info["projections_per_second"] = 1 / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="first-order")
def test_iht_2sp_iterations_per_second(benchmark, default_problem):
    gamma = Constraint("nonneg")
    benchmark(alg.iht_2sp, default_problem, 20, gamma, 200)
    benchmark.extra_info["iterations_per_second"] = 200 / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="first-order")
def test_hsg_ht_2sp_sample_gradients_per_second(benchmark, default_problem):
    gamma = Constraint("nonneg")
    run = benchmark(alg.hsg_ht_2sp, default_problem, 20, gamma, b0=8, tau=1.1,
                    extra_full_steps=100, rng=np.random.default_rng(0))
    benchmark.extra_info["ifo_per_second"] = run.cost[-1] / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="zeroth-order")
def test_zeroth_order_queries_per_second(benchmark):
    truth = make_sparse_regression(200, 100, 5, 0.5, 0.1, seed=0)
    problem = LeastSquares(truth.X, truth.y)
    run = benchmark(alg.hzo_ht_2sp, problem, 10, Constraint("nonneg"), q0=5, rho_q=1.02,
                    iterations=200, s2=100, mu=1e-4, rng=np.random.default_rng(0))
    benchmark.extra_info["queries_per_second"] = run.cost[-1] / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("sparse_iht")
