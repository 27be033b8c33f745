"""The merge of ex2psro's seed shards (``seeds[k::n]``, every method in each) back into the
order one loop over methods and seeds runs them: evaluate_runs' combined game indexes the
policies and seeds the extra best responses by that order."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.ex2psro.nodes import _merge_shards, _params

SEEDS = [7, 3, 11, 0, 5]
ROOT = Path(__file__).resolve().parents[3]
TREE = yaml.safe_load((ROOT / "conf/base/parameters_ex2psro.yml").read_text())["ex2psro"]
PARAMS = _params(copy.deepcopy(TREE) | {"seeds": SEEDS})
METHODS = list(PARAMS.methods)


def _shards(n: int) -> list[list[dict]]:
    return [[{"name": m, "seed": s} for m in METHODS for s in shard_seeds(SEEDS, k, n)]
            for k in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_runs_come_back_method_by_method_in_seed_list_order(n):
    assert len(METHODS) >= 2
    merged = _merge_shards(PARAMS, tuple(_shards(n)))
    assert [(r["name"], r["seed"]) for r in merged] == [(m, s) for m in METHODS for s in SEEDS]


def test_shards_of_another_seed_list_or_method_are_refused():
    shards = _shards(2)
    with pytest.raises(ValueError, match="do not split a seed list"):
        _merge_shards(PARAMS, (shards[1], shards[0]))
    other = _params(copy.deepcopy(TREE) | {"seeds": [7, 3, 11, 0, 6]})
    with pytest.raises(ValueError, match=r"seeds \[7, 3, 11, 0, 5\], params:ex2psro.seeds is"):
        _merge_shards(other, tuple(shards))
    stray = [[*shards[0], {"name": "ghost", "seed": 7}], shards[1]]
    with pytest.raises(ValueError, match=r"runs of \['ghost'\] match no method"):
        _merge_shards(PARAMS, tuple(stray))
