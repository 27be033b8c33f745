"""The merge of a steerable variant's seed-shard scores (each protocol's ``seeds[k::n]``) into
the table one evaluate node over all the variant's models writes (models by key
``<protocol>_seed<s>``, sorted), and the refusal of shards of another seed list, protocol or
variant."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.steerable import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_steerable.yml").read_text())[
    "steerable"] | {"seeds": SEEDS, "protocol_seeds": {"up_rot": [2, 1]}}


def _scores(variant: str, shard: int, n: int) -> pd.DataFrame:
    """Rows as an evaluate node writes them: models by sorted key, two metrics per model."""
    p = nodes._params(PARAMS)
    protocols = p.protocols_3d if variant.endswith("_3d") else p.protocols_of(variant)
    keys = sorted((f"{pr}_seed{s}", pr, s) for pr in protocols
                  for s in shard_seeds(p.seeds_of(variant, pr), shard, n))
    rows = [{"variant": variant, "protocol": pr, "seed": s, "metric": m, "value": float(s)}
            for _, pr, s in keys for m in ("acc", "n_params")]
    return pd.DataFrame(rows) if rows else pd.DataFrame()


@pytest.mark.parametrize("variant", ["steer_tf", "steer_tf_3d"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_scores_come_back_in_model_key_order(variant, n):
    shards = [_scores(variant, k, n) for k in range(n)]
    merged = nodes.merge_scores(PARAMS, *shards, variant=variant)
    pd.testing.assert_frame_equal(merged, _scores(variant, 0, 1))


def test_shards_of_another_seed_list_protocol_or_variant_are_refused():
    shards = [_scores("steer_tf", k, 2) for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_scores(PARAMS, shards[1], shards[0], variant="steer_tf")
    with pytest.raises(ValueError, match=r"\(rot_rot\) hold seeds \[5\] that the seed list of"):
        nodes.merge_scores(PARAMS | {"seeds": [7, 3, 11, 0, 6]}, *shards, variant="steer_tf")
    missing = shards[0][~((shards[0]["seed"] == 5) & (shards[0]["protocol"] == "rot_rot"))]
    with pytest.raises(ValueError, match=r"\(rot_rot\) hold seeds \[7, 3, 11, 0\], the seed list of"):
        nodes.merge_scores(PARAMS, missing, shards[1], variant="steer_tf")
    with pytest.raises(ValueError, match=r"protocols \['rot_rot'\] the parameters do not run"):
        nodes.merge_scores(PARAMS | {"protocols_3d": ["up_rot"]},
                           *(s.assign(variant="cnn_3d") for s in shards), variant="cnn_3d")
    with pytest.raises(ValueError, match=r"hold scores of \['steer_tf'\]"):
        nodes.merge_scores(PARAMS, *shards, variant="cnn")
