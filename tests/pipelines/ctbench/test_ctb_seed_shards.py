"""judge_claims' merge of the certification tables' seed shards."""

from __future__ import annotations

import pandas as pd
import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.ctbench.nodes import _merge_shards, _seed_threads

SEEDS = [2, 10, 1]


def _table(method: str, seeds: list[int]) -> pd.DataFrame:
    # certify_method's order: models by their seed_<s> key, then the test samples
    keys = sorted(f"seed_{s}" for s in seeds)
    return pd.DataFrame([{"method": method, "seed": int(k[5:]), "sample": i}
                         for k in keys for i in range(3)])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_each_method_gets_one_table_in_seed_key_order(n):
    shards = tuple(_table(m, shard_seeds(SEEDS, k, n)) for m in ("ibp", "sabr") for k in range(n))
    merged = _merge_shards(shards, n)
    assert len(merged) == 2
    for method, table in zip(("ibp", "sabr"), merged, strict=True):
        pd.testing.assert_frame_equal(table, _table(method, SEEDS))
    assert merged[0]["seed"].tolist()[::3] == [1, 10, 2]  # "seed_1" < "seed_10" < "seed_2"


def test_tables_that_do_not_split_into_shards_are_refused():
    with pytest.raises(ValueError, match="do not split into 2 seed shards"):
        _merge_shards((_table("ibp", [0]),) * 3, 2)


@pytest.mark.parametrize(("omp", "parallel", "n_seeds", "expected"), [
    (None, 3, 3, 3),   # no budget set: parallel_seeds as configured
    (None, 3, 1, 1),   # one seed in the shard: one thread
    ("1", 3, 3, 1),    # a Dask worker (OMP_NUM_THREADS=1): the runner parallelises, not threads
    ("2", 3, 3, 2),
    ("x", 4, 3, 3),    # not an integer: no budget
    (None, 2, 0, 1),   # a shard without a seed still gets a valid pool
])
def test_seed_threads_never_exceed_the_seeds_or_the_thread_budget(monkeypatch, omp, parallel,
                                                                 n_seeds, expected):
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert _seed_threads(parallel, n_seeds) == expected
