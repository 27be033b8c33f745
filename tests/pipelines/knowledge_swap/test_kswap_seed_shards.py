"""judge_claims' and plot_figures' merge of the seed shards back into seed-list order."""

from __future__ import annotations

import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.knowledge_swap.nodes import _split_shards
from icml25.pipelines.knowledge_swap.params import SWAP_VARIANTS

SEEDS = [3, 1, 4, 15, 9]


def test_inputs_split_into_backbones_oracles_and_variants():
    n = 2
    models = [{f"seed_{s}": f"model {s}" for s in shard_seeds(SEEDS, k, n)} for k in range(n)]
    results = [[{"seed": s, "variant": v} for s in shard_seeds(SEEDS, k, n)]
               for v in SWAP_VARIANTS for k in range(n)]
    pretrained, oracle, merged = _split_shards(n, (*models, *models, *results))
    assert sorted(pretrained) == sorted(f"seed_{s}" for s in SEEDS) and oracle == pretrained
    assert list(merged) == list(SWAP_VARIANTS)
    for v, runs in merged.items():
        assert [(r["variant"], r["seed"]) for r in runs] == [(v, s) for s in SEEDS]
    with pytest.raises(ValueError, match=r"expected \d+ seed-shard inputs \(2 shards\)"):
        _split_shards(n, tuple(models))
