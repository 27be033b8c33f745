"""The merges of sortformer's seed shards (``seeds[k::n]``): diarizers per variant, and the
multi-speaker ASR cpWER tables back in seed-list order."""

from __future__ import annotations

import pandas as pd
import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.sortformer.nodes import (
    CPWER_COLUMNS,
    _merge_model_shards,
    merge_cpwer_tables,
)

SEEDS = [7, 3, 11, 0, 5]


def _models(variant: str, n: int) -> list[dict]:
    return [{f"seed_{s}": {"metadata": {"variant": variant, "seed": s}}
             for s in shard_seeds(SEEDS, k, n)} for k in range(n)]


def _cpwer(n: int) -> list[pd.DataFrame]:
    rows = [[{"variant": v, "seed": s, "n_speakers": c, "cpwer": 0.1 * s + c,
              "errors_words": 3} for s in shard_seeds(SEEDS, k, n)
             for v in ("asr_none", "asr_oracle") for c in (0, 2)] for k in range(n)]
    return [pd.DataFrame(r, columns=CPWER_COLUMNS) for r in rows]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_each_variant_gets_all_its_seeds_back_for_any_shard_count(n):
    merged = _merge_model_shards((*_models("pil", n), *_models("hybrid", n)), n)
    assert len(merged) == 2
    for variant, bundle in zip(("pil", "hybrid"), merged, strict=True):
        assert set(bundle) == {f"seed_{s}" for s in SEEDS}
        assert {m["metadata"]["variant"] for m in bundle.values()} == {variant}


def test_model_shards_that_do_not_fit_the_shard_count_are_refused():
    with pytest.raises(ValueError, match="5 model shards do not split into variants of 2"):
        _merge_model_shards(tuple(_models("pil", 5)), 2)
    shards = _models("pil", 2)
    with pytest.raises(ValueError, match=r"\['seed_11', 'seed_5', 'seed_7'\] found in two seed"):
        _merge_model_shards((shards[0], shards[0]), 2)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_cpwer_rows_come_back_in_seed_list_order_for_any_shard_count(n):
    merged = merge_cpwer_tables(*_cpwer(n))
    expected = merge_cpwer_tables(*_cpwer(1))
    assert list(merged["seed"].drop_duplicates()) == SEEDS
    assert list(merged.columns) == CPWER_COLUMNS
    pd.testing.assert_frame_equal(merged, expected)


def test_no_cpwer_rows_when_the_asr_study_is_off():
    empty = [pd.DataFrame(columns=CPWER_COLUMNS) for _ in range(3)]
    merged = merge_cpwer_tables(*empty)
    assert merged.empty and list(merged.columns) == CPWER_COLUMNS


def test_cpwer_shards_of_the_wrong_sizes_are_refused():
    shards = _cpwer(2)
    with pytest.raises(ValueError, match="do not split a seed list"):
        merge_cpwer_tables(shards[1], shards[0])
