"""fpo's seed shards: the merge of every method's shards back into the unsharded reading order,
and the shard nodes' refusal of a learning-rate selection of another seed list."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.fpo.nodes import _merge_policy_shards, align_method

SEEDS = [7, 3, 11, 0, 5]
ROOT = Path(__file__).resolve().parents[3]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_fpo.yml").read_text())["fpo"]


def _shards(method: str, n: int) -> list[dict]:
    # partitions as PartitionedDataset hands them out: loaders
    return [{f"seed_{s}": (lambda s=s: {"metadata": {"method": method, "seed": s}})
             for s in shard_seeds(SEEDS, k, n)} for k in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_policies_come_back_method_by_method_in_partition_order(n):
    merged = _merge_policy_shards((*_shards("dpo", n), *_shards("fpo", n)))
    assert [(e["metadata"]["method"], key) for key, e in merged] == [
        (m, f"seed_{s}") for m in ("dpo", "fpo") for s in sorted(SEEDS, key=lambda s: f"{s}")]


def test_a_seed_in_two_shards_of_a_method_is_refused():
    shards = _shards("dpo", 2)
    with pytest.raises(ValueError, match="fpo: dpo seed_7 found in two seed shards"):
        _merge_policy_shards((shards[0], shards[1], shards[0]))


def test_a_selection_made_with_another_first_seed_is_refused():
    params = copy.deepcopy(PARAMS) | {"seeds": [4, 5]}
    selection = {"seed_0": {"metadata": {"method": "dpo", "seed": 0, "lr": 1e-3}}}
    with pytest.raises(ValueError, match=r"holds \['seed_0'\], expected .* seed_4; re-run "
                                         r"select_lr"):
        align_method({}, {}, {}, None, selection, params, "dpo", shard=0, n_shards=2)
    # a shard with no seed trains nothing and reads nothing
    assert align_method({}, {}, {}, None, selection, params, "dpo", shard=2, n_shards=3) == {}
