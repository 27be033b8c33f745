"""Seed shards: every seed lands in exactly one shard node, for any seed list."""

import pandas as pd
import pytest

from icml25.core.datasets import OptionalPartitionedDataset
from icml25.core.sweep import (
    SHARDS_ENV,
    interleave_frames,
    interleave_shards,
    seed_shards,
    shard_seeds,
)


@pytest.mark.parametrize("seeds", [[], [7], [0, 1], [0, 1, 2], [5, 3, 9, 1, 4, 8, 2]])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_shards_partition_the_seed_list(seeds, n):
    parts = [shard_seeds(seeds, k, n) for k in range(n)]
    assert sorted(s for part in parts for s in part) == sorted(seeds)
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1
    if len(seeds) <= n:
        assert all(len(p) <= 1 for p in parts)


def test_shard_count_comes_from_the_environment_and_is_validated():
    assert seed_shards({}) == 3
    assert seed_shards({SHARDS_ENV: " 5 "}) == 5
    with pytest.raises(ValueError, match=f"{SHARDS_ENV} must be an integer"):
        seed_shards({SHARDS_ENV: "three"})
    with pytest.raises(ValueError, match=r"in 1\.\.64"):
        seed_shards({SHARDS_ENV: "0"})
    with pytest.raises(ValueError, match="shard 3 of 3"):
        shard_seeds([1, 2], 3, 3)


def test_an_empty_shard_saves_and_loads_as_an_empty_dict(tmp_path):
    folder = tmp_path / "shard_2"
    ds = OptionalPartitionedDataset(path=str(folder), dataset="json.JSONDataset",
                                    filename_suffix=".json", overwrite=True)
    assert ds.load() == {}
    ds.save({"seed_4": {"loss": 0.5}})
    loaded = ds.load()
    assert list(loaded) == ["seed_4"] and loaded["seed_4"]() == {"loss": 0.5}
    # a re-run whose shard has no seed any more clears the stale partition
    ds.save({})
    assert ds.load() == {} and not list(folder.glob("*.json"))


@pytest.mark.parametrize("n_seeds", [0, 1, 2, 3, 4, 7, 10])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_interleave_shards_inverts_shard_seeds(n_seeds, n):
    seeds = [10 + 3 * i for i in range(n_seeds)]
    parts = [shard_seeds(seeds, k, n) for k in range(n)]
    assert interleave_shards(parts) == seeds


@pytest.mark.parametrize("parts", [[[1], [2, 3]], [[1, 2, 3], [4]], [[], [1]]])
def test_interleave_shards_refuses_lengths_no_seed_list_gives(parts):
    with pytest.raises(ValueError, match="shard lengths"):
        interleave_shards(parts)


def test_interleave_shards_needs_a_shard():
    with pytest.raises(ValueError, match="no shards"):
        interleave_shards([])


def _table(seeds, rows_per_seed=2, key="seed"):
    """A shard's table: ``rows_per_seed`` rows per seed, the row index telling them apart."""
    return pd.DataFrame([{key: s, "row": i, "value": 10 * s + i} for s in seeds
                         for i in range(rows_per_seed)])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_interleave_frames_gives_the_one_loop_order_for_any_shard_count(n):
    seeds = [7, 3, 11, 0, 5]
    shards = [_table(shard_seeds(seeds, k, n)) for k in range(n)]
    merged = interleave_frames(shards, seeds, where="room: the seed shards")
    pd.testing.assert_frame_equal(pd.concat(merged, ignore_index=True), _table(seeds))


def test_interleave_frames_sorts_a_shard_written_in_another_order_and_takes_other_keys():
    seeds = [7, 3, 11, 0, 5]
    shards = [_table(sorted(shard_seeds(seeds, k, 2)), key="rep") for k in range(2)]
    merged = interleave_frames(shards, seeds, where="room", key="rep")
    assert [int(g["rep"].iloc[0]) for g in merged] == seeds
    assert all(list(g["row"]) == [0, 1] for g in merged)  # a seed's rows keep their order


def test_interleave_frames_without_a_seed_list_keeps_the_shards_order():
    shards = [_table([4, 2]), None, _table([9]), pd.DataFrame()]
    with pytest.raises(ValueError, match="do not split a seed list"):
        interleave_frames(shards, None, where="room")
    merged = interleave_frames([_table([4, 2]), _table([9])], None, where="room")
    assert [int(g["seed"].iloc[0]) for g in merged] == [4, 9, 2]


def test_interleave_frames_refuses_foreign_missing_or_unlabelled_seeds():
    seeds = [7, 3, 11]
    shards = [_table(shard_seeds(seeds, k, 2)) for k in range(2)]
    with pytest.raises(ValueError, match=r"room X hold seeds \[11\] that params:x.seeds does not"):
        interleave_frames(shards, [7, 3], where="room X", seeds_from="params:x.seeds")
    with pytest.raises(ValueError, match=r"room X hold seeds \[7, 3\], params:x.seeds is \[7, 3, 4"):
        interleave_frames([_table([7]), _table([3])], [7, 3, 4], where="room X",
                          seeds_from="params:x.seeds")
    with pytest.raises(ValueError, match="room X: a shard's table has no 'seed' column"):
        interleave_frames([shards[0].rename(columns={"seed": "s"})], [7], where="room X")
    assert interleave_frames([None, pd.DataFrame()], [], where="room X") == []
