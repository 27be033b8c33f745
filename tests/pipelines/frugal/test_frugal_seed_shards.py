"""compare's merge of the seed shards (``seeds[k::n]``) back into seed-list order."""

from __future__ import annotations

import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.frugal.nodes import _merge_shards

SEEDS = [7, 3, 11, 0, 5]


def _shards(variant: str, n: int) -> list[dict]:
    return [{"variant": variant, "role": "method", "optimizer": {"lr": 0.1}, "shard": k,
             "n_shards": n, "runs": [{"seed": s} for s in shard_seeds(SEEDS, k, n)]}
            for k in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_runs_come_back_in_seed_list_order_for_any_shard_count(n):
    merged = _merge_shards(_shards("adamw", n) + _shards("galore_025", n))
    assert [m["variant"] for m in merged] == ["adamw", "galore_025"]
    for m in merged:
        assert [r["seed"] for r in m["runs"]] == SEEDS
        assert m["role"] == "method" and "shard" not in m


def test_a_missing_or_repeated_shard_is_refused():
    shards = _shards("adamw", 3)
    with pytest.raises(ValueError, match=r"adamw needs seed shards 0\.\.2 of 3, got \[0, 2\]"):
        _merge_shards([shards[0], shards[2]])
    with pytest.raises(ValueError, match="seed shard 1 of adamw given twice"):
        _merge_shards([*shards, shards[1]])
