"""The merges of malot's seed shards (``seeds[k::n]``) back into the seed-major tables one loop
over seeds writes (attempts, solved rounds, LoT-Solver runs and training histories), the empty
tables of a LoT-Solver that is off, and the refusal of shards of another seed list."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.malot import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_malot.yml").read_text())["malot"] | {
    "seeds": SEEDS}


def _table(seeds: list[int], what: str) -> pd.DataFrame:
    """Seed-major rows, two variants and two theorems per seed."""
    rows = [{"variant": v, "seed": s, "name": f"t{i}", "what": what}
            for s in seeds for v in ("ma_lot", "whole_proof") for i in (0, 1)]
    return pd.DataFrame(rows) if rows else pd.DataFrame()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_runs_and_histories_come_back_in_seed_list_order(n):
    pairs = [t for k in range(n) for t in (_table(shard_seeds(SEEDS, k, n), "attempts"),
                                           _table(shard_seeds(SEEDS, k, n), "solved"))]
    for merge in (nodes.merge_runs, nodes.merge_lot_runs):
        attempts, solved = merge(PARAMS, *pairs)
        pd.testing.assert_frame_equal(attempts, _table(SEEDS, "attempts"))
        pd.testing.assert_frame_equal(solved, _table(SEEDS, "solved"))
    histories = [_table(shard_seeds(SEEDS, k, n), "history") for k in range(n)]
    pd.testing.assert_frame_equal(nodes.merge_lot_training(PARAMS, *histories),
                                  _table(SEEDS, "history"))


def test_a_lot_solver_that_is_off_merges_to_the_empty_tables_it_writes():
    off = PARAMS | {"lot": PARAMS["lot"] | {"enabled": False}}
    bundle, history = nodes.train_lot_solver(pd.DataFrame(), pd.DataFrame(), off, 0, 2)
    runs = nodes.run_lot_variants(bundle, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), off)
    attempts, solved = nodes.merge_lot_runs(off, *runs, *runs)
    pd.testing.assert_frame_equal(attempts, runs[0])
    pd.testing.assert_frame_equal(solved, runs[1])
    assert list(nodes.merge_lot_training(off, history, history).columns) == list(history.columns)


def test_shards_of_another_seed_list_are_refused():
    shards = [_table(shard_seeds(SEEDS, k, 2), "history") for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_lot_training(PARAMS, shards[1], shards[0])
    with pytest.raises(ValueError, match=r"hold seeds \[5\] that params:malot.seeds does not list"):
        nodes.merge_lot_training(PARAMS | {"seeds": [7, 3, 11, 0, 6]}, *shards)
    with pytest.raises(ValueError, match="do not split into"):
        nodes.merge_runs(PARAMS, shards[0])
