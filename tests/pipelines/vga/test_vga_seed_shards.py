"""collect_predictions' merge of the vision models' seed shards into one node's row order."""

from __future__ import annotations

import pandas as pd
import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.vga.nodes import _merge_model_shards

SEEDS = [2, 10, 1]


def _predictions(model: str, seeds: list[int]) -> pd.DataFrame:
    # evaluate_model's order: checkpoints by sorted <task>_seed<s> key, then layouts, samples
    keys = sorted((f"{t}_seed{s}", t, s) for t in ("ham_path", "iso_easy") for s in seeds)
    return pd.DataFrame([{"variant": model, "seed": s, "task": t, "layout": lo,
                          "sample_id": i, "label": 1, "pred": i % 2}
                         for _, t, s in keys for lo in ("kk", "planar") for i in range(2)])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_predictions_come_back_in_one_nodes_order(n):
    shards = [_predictions(m, shard_seeds(SEEDS, k, n)) for m in ("cnn", "vit") for k in range(n)]
    expected = pd.concat([_predictions("cnn", SEEDS), _predictions("vit", SEEDS)],
                         ignore_index=True)
    pd.testing.assert_frame_equal(_merge_model_shards([s for s in shards if len(s)]), expected)
