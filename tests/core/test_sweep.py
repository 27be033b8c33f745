"""Seed shards: every seed lands in exactly one shard node, for any seed list."""

import pytest

from icml25.core.datasets import OptionalPartitionedDataset
from icml25.core.sweep import SHARDS_ENV, interleave_shards, seed_shards, shard_seeds


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
