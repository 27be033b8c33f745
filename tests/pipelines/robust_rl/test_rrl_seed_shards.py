"""The merge of robust_rl's DQN seed shards (per variant, ``fa_dqn.seeds[k::n]``) back into the
tables one loop over variants and seeds writes (the CartPole claims average over them), and the
refusal of shards of another seed list or variant."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from icml25.core.sweep import shard_seeds
from icml25.pipelines.robust_rl import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]


@pytest.fixture(scope="module")
def params():
    base = yaml.safe_load((ROOT / "conf/base/parameters_robust_rl.yml").read_text())
    test = yaml.safe_load((ROOT / "conf/test/parameters_robust_rl.yml").read_text())
    merged = OmegaConf.to_container(OmegaConf.merge(base, test))["robust_rl"]
    merged["fa_dqn"] = merged["fa_dqn"] | {"seeds": SEEDS, "enabled": True}
    return merged


def _names(params) -> list[str]:
    return [v[0] for v in nodes._dqn_variants(nodes._params(params)).values()]


def _tables(name: str, seeds: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(evals, history) of one variant's seeds: two grid cells and two steps per seed."""
    evals = pd.DataFrame([{"variant": name, "seed": s, "cell": c, "avg_reward": 0.1 * c + s}
                          for s in seeds for c in (0, 1)], columns=["variant", "seed", "cell",
                                                                   "avg_reward"])
    history = pd.DataFrame([{"variant": name, "seed": s, "step": t} for s in seeds
                            for t in (100, 200)], columns=["variant", "seed", "step"])
    return evals, history


def _shards(params, n: int) -> list[pd.DataFrame]:
    return [t for name in _names(params) for k in range(n)
            for t in _tables(name, shard_seeds(SEEDS, k, n))]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_dqn_tables_come_back_variant_by_variant_in_seed_list_order(params, n):
    evals, history = nodes.merge_dqn(params, *_shards(params, n))
    whole = [_tables(name, SEEDS) for name in _names(params)]
    pd.testing.assert_frame_equal(evals, pd.concat([e for e, _ in whole], ignore_index=True))
    pd.testing.assert_frame_equal(history, pd.concat([h for _, h in whole], ignore_index=True))


def test_shards_of_another_seed_list_or_variant_are_refused(params):
    shards = _shards(params, 2)
    swapped = [shards[2], shards[3], shards[0], shards[1], *shards[4:]]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_dqn(params, *swapped)
    other = params | {"fa_dqn": params["fa_dqn"] | {"seeds": [7, 3, 11, 0, 6]}}
    with pytest.raises(ValueError, match=r"hold seeds \[5\] that params:robust_rl.fa_dqn.seeds"):
        nodes.merge_dqn(other, *shards)
    wrong = [shards[4], shards[5], *shards[2:4], *shards[:2], *shards[6:]]
    with pytest.raises(ValueError, match="seed shards hold cartpole_eval rows of"):
        nodes.merge_dqn(params, *wrong)
    with pytest.raises(ValueError, match="do not split into"):
        nodes.merge_dqn(params, *shards[:-1])


def test_a_shard_without_seeds_trains_nothing(params):
    models, evals, history = nodes.fa_dqn(params, "dqn", shard=5, n_shards=6)
    assert models == {} and evals.empty and history.empty
    with pytest.raises(ValueError, match="unknown DQN variant 'ddqn'"):
        nodes.fa_dqn(params, "ddqn")
