"""Speed and memory of the fpo pipeline (run with `make bench`; never part of `make test`).

- one alignment step of every method on the default model (the paper's cost comparison: FPO
  and SimPO run no reference model, DPO and TDPO do; TDPO also computes a full-vocabulary KL),
  with the bytes autograd saves for the backward pass in the extra_info;
- incremental (KV-cache) sampling throughput of the default model;
- the whole default run (`kedro run --pipeline=fpo`, conf/base): wall time and peak RSS.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.fpo.align import LossSettings, cache_reference, clean_pairs, pair_stats
from icml25.pipelines.fpo.lm import build_model, generate
from icml25.pipelines.fpo.losses import METHODS, margin_u, preference_loss
from icml25.pipelines.fpo.sae import SparseAutoencoder
from icml25.pipelines.fpo.world import EOS, make_world, sample_prompt, write_response

pytestmark = pytest.mark.usefixtures("one_thread")
WORLD = make_world()


@pytest.fixture(scope="module")
def setting():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    prompts = [sample_prompt(WORLD, rng) for _ in range(16)]
    pids = [WORLD.ids(p.tokens()) for p in prompts]
    ch = [WORLD.ids(write_response(WORLD, p, rng, 1.0)) for p in prompts]
    rj = [WORLD.ids(write_response(WORLD, p, rng, 0.0)) for p in prompts]
    pairs = clean_pairs(prompts, pids, ch, rj, 64, WORLD.index[EOS])
    sft = build_model(WORLD, 48, 3, 4, 128, 64).eval()
    sae = SparseAutoencoder(48, 384)
    for q in sae.parameters():
        q.requires_grad_(False)
    return sft, sae, pairs, cache_reference(sft, sae, pairs, WORLD, layer=2)


@pytest.mark.benchmark(group="fpo-align-step")
@pytest.mark.parametrize("method", METHODS)
def test_alignment_step(benchmark, setting, method):
    sft, sae, pairs, cache = setting
    policy = build_model(WORLD, 48, 3, 4, 128, 64)
    policy.load_state_dict(sft.state_dict())
    opt = torch.optim.Adam(policy.parameters(), lr=1e-4)
    settings = LossSettings(beta=2.0 if method == "simpo" else 0.1, k=16)
    saved = [0]

    def step():
        def pack(t):
            saved[0] += t.numel() * t.element_size()
            return t

        saved[0] = 0
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            stats = pair_stats(method, policy, sft, sae, cache, pairs, range(len(pairs)), WORLD,
                               2, settings)
            loss = preference_loss(margin_u(method, stats, settings.beta))
        opt.zero_grad()
        loss.backward()
        opt.step()

    benchmark(step)
    benchmark.extra_info["autograd_saved_mib"] = saved[0] / 2 ** 20


@pytest.mark.benchmark(group="fpo-sampling")
def test_kv_cache_sampling_throughput(benchmark, setting):
    sft = setting[0]
    rng = np.random.default_rng(1)
    pids = [WORLD.ids(sample_prompt(WORLD, rng).tokens()) for _ in range(256)]
    outs = benchmark(generate, sft, pids, WORLD, 48, 1.0, 0)
    assert len(outs) == 256
    if benchmark.stats is not None:  # None under --benchmark-disable
        benchmark.extra_info["responses_per_second"] = 256 / benchmark.stats.stats.mean


def test_default_run(default_run):
    result = default_run("fpo")
    assert result["wall_seconds"] > 0
