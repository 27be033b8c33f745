"""The merge of distributed_estimation's seed shards (each sweep's repetitions ``seeds[k::n]``)
back into the table one loop writes (sweep, point, K, repetition, protocol): the oracle-K
curves and their bootstrap read it in that order, and foreign shards are refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from icml25.core.sweep import shard_seeds
from icml25.pipelines.distributed_estimation import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]


@pytest.fixture(scope="module")
def params():
    base = yaml.safe_load((ROOT / "conf/base/parameters_distributed_estimation.yml").read_text())
    test = yaml.safe_load((ROOT / "conf/test/parameters_distributed_estimation.yml").read_text())
    merged = OmegaConf.to_container(OmegaConf.merge(base, test))["distributed_estimation"]
    return merged | {"seeds": SEEDS}


def _table(params: dict, shard: int, n: int) -> pd.DataFrame:
    """A shard's rows as simulate_protocols writes them, two protocols per run."""
    p = nodes._params(params)
    rows = [{"sweep": name, "model": sweep.model, "protocol": proto, "m": pt.m, "n": pt.n,
             "l": pt.l, "K": k, "rep": rep, "ise": float(rep + k), "bits_max": 1.0,
             "applicable": True}
            for name, sweep in p.sweeps.items() for pt in nodes._points(sweep)
            for k in p.grid.k_grid for rep in shard_seeds(p.seeds_of(name), shard, n)
            for proto in ("full", "bf")]
    return pd.DataFrame(rows) if rows else pd.DataFrame()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_rows_come_back_in_the_order_of_one_loop(params, n):
    shards = [_table(params, k, n) for k in range(n)]
    pd.testing.assert_frame_equal(nodes.merge_simulations(params, *shards), _table(params, 0, 1))


def test_shards_of_another_seed_list_or_sweep_are_refused(params):
    shards = [_table(params, k, 2) for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_simulations(params, shards[1], shards[0])
    with pytest.raises(ValueError, match=r"repetitions hold seeds \[5\] that the seed list of sweep"):
        nodes.merge_simulations(params | {"seeds": [7, 3, 11, 0, 6]}, *shards)
    ghost = shards[0].assign(sweep="ghost")
    with pytest.raises(ValueError, match=r"sweeps \['ghost'\]"):
        nodes.merge_simulations(params, ghost, shards[1])
    off_grid = shards[0].assign(K=shards[0]["K"] + 1000)
    with pytest.raises(ValueError, match="no point of its grid"):
        nodes.merge_simulations(params, off_grid, shards[1])


def test_a_shard_without_repetitions_simulates_nothing(params):
    functions = nodes.make_functions(params)
    assert nodes.simulate_protocols(functions, params, shard=5, n_shards=6).empty
