"""The merge of an acorn variant's seed-shard predictions (shard ``k`` of ``n`` trains
``seeds[k::n]``) into the table one predict node over all the variant's models writes (seeds by
model key ``seed_<s>``, sorted), and the refusal of shards of another seed list or variant."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.acorn import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_acorn.yml").read_text())["acorn"] | {
    "seeds": SEEDS}


def _predictions(variant: str, seeds: list[int]) -> pd.DataFrame:
    """Rows as predict_variant writes them: models by sorted key, two items per model."""
    rows = [{"variant": variant, "seed": s, "split": "test", "task": "doa", "item": i,
             "pred": float(s + i)} for s in sorted(seeds, key=lambda s: f"seed_{s}")
            for i in (0, 1)]
    return pd.DataFrame(rows) if rows else pd.DataFrame()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_predictions_come_back_in_model_key_order(n):
    shards = [_predictions("acorn_phase", shard_seeds(SEEDS, k, n)) for k in range(n)]
    merged = nodes.merge_predictions(PARAMS, *shards, variant="acorn_phase")
    pd.testing.assert_frame_equal(merged, _predictions("acorn_phase", SEEDS))
    assert list(dict.fromkeys(merged["seed"])) == [0, 11, 3, 5, 7]  # "seed_0" < "seed_11" < ...


def test_shards_of_another_seed_list_or_variant_are_refused():
    shards = [_predictions("acorn_phase", shard_seeds(SEEDS, k, 2)) for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_predictions(PARAMS, shards[1], shards[0], variant="acorn_phase")
    with pytest.raises(ValueError, match=r"seeds \[5\] that params:acorn.seeds"):
        nodes.merge_predictions(PARAMS | {"seeds": [7, 3, 11, 0, 6]}, *shards,
                                variant="acorn_phase")
    missing = shards[0][shards[0]["seed"] != 5]
    with pytest.raises(ValueError, match=r"hold seeds \[7, 3, 11, 0\], params:acorn.seeds is"):
        nodes.merge_predictions(PARAMS, missing, shards[1], variant="acorn_phase")
    with pytest.raises(ValueError, match=r"hold predictions of \['acorn_phase'\]"):
        nodes.merge_predictions(PARAMS, *shards, variant="magnitude_only")


def test_a_shard_without_seeds_trains_and_predicts_nothing():
    assert nodes.train_variant(pd.DataFrame(), {}, PARAMS, "acorn_phase", shard=5,
                               n_shards=6) == {}
    assert nodes.predict_variant({}, pd.DataFrame(), {}, PARAMS, "acorn_phase").empty
