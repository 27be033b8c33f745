"""The merge of functional_tom's meta-training seed shards (``meta_seeds[k::n]``): training
curves back in the order one loop over all seeds writes them."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.functional_tom.nodes import (
    CURVE_COLUMNS,
    _meta_model_keys,
    _params,
    merge_meta_curves,
)

SEEDS = [7, 3, 11, 0, 5]
ROOT = Path(__file__).resolve().parents[3]
PARAMS = copy.deepcopy(yaml.safe_load(
    (ROOT / "conf/base/parameters_functional_tom.yml").read_text())["functional_tom"])
PARAMS["meta"] |= {"seeds": SEEDS, "games": ["rps", "ipd"], "tom_only_games": ["ipd"]}


def _curves(n: int) -> list[pd.DataFrame]:
    p = _params(PARAMS)
    shards = []
    for k in range(n):
        rows = [{"model": f"{g}_{kind}_seed_{s}", "game": g, "kind": kind, "seed": s,
                 "step": step, "loss": 1.0 / (step + 1) + s}
                for g, kind, s in _meta_model_keys(p, shard_seeds(SEEDS, k, n))
                for step in (0, 1)]
        shards.append(pd.DataFrame(rows, columns=CURVE_COLUMNS))
    return shards


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_curves_come_back_in_single_loop_order_for_any_shard_count(n):
    merged = merge_meta_curves(PARAMS, *_curves(n))
    pd.testing.assert_frame_equal(merged, merge_meta_curves(PARAMS, *_curves(1)))
    models = list(merged["model"].drop_duplicates())
    assert models == ([f"rps_policy_seed_{s}" for s in SEEDS]
                      + [f"ipd_policy_seed_{s}" for s in SEEDS]
                      + [f"ipd_tom_only_seed_{s}" for s in SEEDS])


def test_no_curves_when_meta_training_is_off_or_the_shards_are_empty():
    merged = merge_meta_curves(PARAMS, *(pd.DataFrame(columns=CURVE_COLUMNS) for _ in range(3)))
    assert merged.empty and list(merged.columns) == CURVE_COLUMNS


def test_a_model_in_two_shards_or_from_no_configured_seed_is_refused():
    shards = _curves(2)
    with pytest.raises(ValueError, match="rps_policy_seed_7 trained by two seed shards"):
        merge_meta_curves(PARAMS, shards[0], shards[0])
    stray = shards[0].assign(model="rps_policy_seed_99")
    with pytest.raises(ValueError, match=r"\['rps_policy_seed_99'\] match no game"):
        merge_meta_curves(PARAMS, stray)
