"""The merge of sgd_hitting's Monte-Carlo seed shards (``seeds[k::n]``) back into the table one
loop over experiments, seeds and step sizes writes: fit_scaling bootstraps per seed from it, and
shards of another seed list or experiment set are refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from icml25.core.sweep import shard_seeds
from icml25.pipelines.sgd_hitting import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]


@pytest.fixture(scope="module")
def params():
    base = yaml.safe_load((ROOT / "conf/base/parameters_sgd_hitting.yml").read_text())
    test = yaml.safe_load((ROOT / "conf/test/parameters_sgd_hitting.yml").read_text())
    merged = OmegaConf.to_container(OmegaConf.merge(base, test))["sgd_hitting"]
    return merged | {"seeds": SEEDS}


def _mc(params: dict) -> list[str]:
    return [n for n, e in params["experiments"].items() if e["solver"] == "mc"]


def _table(params: dict, seeds: list[int]) -> pd.DataFrame:
    """Rows as the loop writes them: experiment, seed, η, two chains each."""
    rows = [{"experiment": name, "seed": seed, "eta": eta, "chain": c, "tau": 1.0 + c,
             "censored": False}
            for name in _mc(params) for seed in seeds
            for eta in params["experiments"][name]["etas"] for c in (0, 1)]
    return pd.DataFrame(rows) if rows else pd.DataFrame()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_chains_come_back_experiment_by_experiment_in_seed_list_order(params, n):
    assert len(_mc(params)) >= 2
    shards = [_table(params, shard_seeds(SEEDS, k, n)) for k in range(n)]
    pd.testing.assert_frame_equal(nodes.merge_hitting_times(params, *shards),
                                  _table(params, SEEDS))


def test_shards_of_another_seed_list_or_experiment_are_refused(params):
    shards = [_table(params, shard_seeds(SEEDS, k, 2)) for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_hitting_times(params, shards[1], shards[0])
    with pytest.raises(ValueError, match=r"hold seeds \[5\] that params:sgd_hitting.seeds"):
        nodes.merge_hitting_times(params | {"seeds": [7, 3, 11, 0, 6]}, *shards)
    ghost = shards[0].assign(experiment="ghost_mc")
    with pytest.raises(ValueError, match=r"experiments \['ghost_mc'\]"):
        nodes.merge_hitting_times(params, ghost, shards[1])
