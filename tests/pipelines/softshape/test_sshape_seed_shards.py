"""evaluate's merge of the seed shards' result rows back into one node's row order."""

from __future__ import annotations

import pandas as pd
import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.softshape.nodes import _merge_rows

SEEDS = [4, 0, 9]


def _rows(variant: str, seeds: list[int]) -> list[dict]:
    # the loop order of run_softshape_variant / run_aeon: data set, fold, seed
    return [{"variant": variant, "dataset": d, "fold": f, "seed": s, "accuracy": 0.1 * s + f}
            for d in ("GunPoint", "CBF") for f in (0, 1) for s in seeds]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_rows_come_back_in_the_order_of_one_node(n):
    full = pd.DataFrame(_rows("mini_rocket", SEEDS) + _rows("nn_dtw", SEEDS[:1]))
    # nn_dtw runs for the first seed only, which shard 0 holds
    shards = tuple(pd.DataFrame(_rows("mini_rocket", shard_seeds(SEEDS, k, n))
                                + (_rows("nn_dtw", SEEDS[:1]) if k == 0 else []),
                                columns=full.columns) for k in range(n))
    pd.testing.assert_frame_equal(_merge_rows(shards), full)


def test_shards_without_rows_merge_to_an_empty_table():
    empty = pd.DataFrame(columns=["variant", "dataset", "fold", "seed", "accuracy"])
    assert _merge_rows((empty, empty)).empty
