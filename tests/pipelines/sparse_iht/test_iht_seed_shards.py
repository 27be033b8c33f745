"""The merge of sparse_iht's seed shards (``seeds[k::n]``) back into the tables one loop over
settings and seeds writes: evaluation aggregates per seed in that row order, and a shard run
for another seed list or setting list is refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.sparse_iht import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_sparse_iht.yml").read_text())[
    "sparse_iht"] | {"seeds": SEEDS}
SETTINGS = [s["name"] for s in PARAMS["synthetic"]["settings"]]


def _table(seeds: list[int], settings: list[str] | None) -> pd.DataFrame:
    """Rows as a loop writes them: setting, seed, then two rows per seed (k = 1, 2)."""
    rows = [{"setting": s, "seed": seed, "k": k, "value": f"{s}/{seed}/{k}"}
            for s in (settings or [None]) for seed in seeds for k in (1, 2)]
    if not rows:  # a shard without seeds writes an empty table
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    return frame if settings else frame.drop(columns=["setting"])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_tables_come_back_setting_by_setting_in_seed_list_order(n):
    assert len(SETTINGS) >= 2
    results = [_table(shard_seeds(SEEDS, k, n), SETTINGS) for k in range(n)]
    traces = [_table(shard_seeds(SEEDS, k, n), SETTINGS).assign(trace=True) for k in range(n)]
    shard_tables = [t for pair in zip(results, traces, strict=True) for t in pair]
    merged, merged_traces = nodes.merge_first_order(PARAMS, *shard_tables)
    pd.testing.assert_frame_equal(merged, _table(SEEDS, SETTINGS))
    pd.testing.assert_frame_equal(merged_traces, _table(SEEDS, SETTINGS).assign(trace=True))
    seeds_only = [_table(shard_seeds(SEEDS, k, n), None) for k in range(n)]
    pd.testing.assert_frame_equal(nodes.merge_real_data(PARAMS, *seeds_only),
                                  _table(SEEDS, None))
    pd.testing.assert_frame_equal(nodes.merge_index_tracking(PARAMS, *seeds_only),
                                  _table(SEEDS, None))


def test_shards_of_another_seed_list_or_order_are_refused():
    shards = [_table(shard_seeds(SEEDS, k, 2), None) for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_real_data(PARAMS, shards[1], shards[0])
    other = PARAMS | {"seeds": [7, 3, 11, 0, 6]}
    with pytest.raises(ValueError, match=r"hold seeds \[5\] that params:sparse_iht.seeds"):
        nodes.merge_real_data(other, *shards)
    with pytest.raises(ValueError, match="lacks the setting column"):
        nodes.merge_exhaustive(PARAMS, *shards)


def test_a_shard_without_seeds_runs_nothing():
    empty_shard = len(SEEDS)  # shard 5 of 6 takes seeds[5::6] = []
    assert nodes.run_real_data(PARAMS, shard=empty_shard, n_shards=6).empty
    assert nodes.run_index_tracking(PARAMS, shard=empty_shard, n_shards=6).empty
    results, traces = nodes.run_stochastic(PARAMS, shard=empty_shard, n_shards=6)
    assert results.empty and traces.empty
