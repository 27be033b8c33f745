"""Speed and memory of the sgd_hitting pipeline (run with `make bench`; never part of `make test`).

- the many-chains SGD simulator: chain-steps per second (the issue's throughput number) on the
  tilted double well (1-D), the camel (2-D) and the sine neuron (mini-batch noise), with the
  NumPy backend and the torch backend on the CPU;
- one exact 1-D solve (kernel build + sparse LU) at the smallest default step size;
- the whole default run (`kedro run --pipeline=sgd_hitting`, conf/base): wall time and peak
  RSS recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import pytest
import torch

from icml25.pipelines.sgd_hitting import exact_solver as ex
from icml25.pipelines.sgd_hitting.landscapes import Target, camel, sine_neuron, tilted_double_well
from icml25.pipelines.sgd_hitting.monte_carlo import simulate_hitting_times
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw

CASES = {
    "l1_gaussian": (tilted_double_well(0.1), NoiseLaw("gaussian"), 0.07, (-0.945649,),
                    Target("right_of", threshold=1.046681 - 0.25), 2000),
    "camel_sigma4.5": (camel(), NoiseLaw("gaussian", (4.5, 4.5)), 0.012, (1.747552, -0.873776),
                       Target("ball", center=(0.0, 0.0), radius=0.25), 1000),
    "sine_neuron_b1": (sine_neuron(), NoiseLaw("minibatch", batch=1), 0.065, (3.25746,),
                       Target("ball", center=(1.0,), radius=0.2), 1000),
}


@pytest.mark.benchmark(group="sgd-chains")
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_simulator_chain_steps_per_second(benchmark, case, backend):
    land, noise, eta, x0, target, n = CASES[case]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sample = benchmark.pedantic(
            simulate_hitting_times, args=(land, noise, eta, x0, target, n, 0, 20_000),
            kwargs={"backend": backend}, rounds=1, iterations=1)
    finally:
        torch.set_num_threads(before)
    rate = sample.chain_steps / sample.seconds
    benchmark.extra_info.update({"chain_steps": sample.chain_steps,
                                 "chain_steps_per_second": rate})
    print(f"{case} [{backend}]: {rate / 1e6:.1f} M chain-steps/s")


@pytest.mark.benchmark(group="exact-solver")
def test_exact_solve_at_the_smallest_default_step(benchmark):
    land, noise = tilted_double_well(0.1), NoiseLaw("gaussian")
    target = Target("right_of", threshold=1.046681 - 0.25)
    mean = benchmark(ex.solve_mean, land, noise, 0.021, target, -0.945649,
                     ex.default_spacing(noise, 0.021), (-3.0, 1.2))
    assert mean > 1e8


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("sgd_hitting")
