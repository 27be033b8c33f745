"""judge_claims' and plot_figures' merge of the seed shards back into seed-list order, per
setting."""

from __future__ import annotations

import pytest

from icml25.core.sweep import shard_seeds
from icml25.pipelines.knowledge_swap.nodes import _split_shards
from icml25.pipelines.knowledge_swap.params import SWAP_VARIANTS

SEEDS = [3, 1, 4, 15, 9]
SETTINGS = ["a", "b"]


def test_inputs_split_into_backbones_and_per_setting_oracles_and_variants():
    n = 2
    models = [{f"seed_{s}": f"model {s}" for s in shard_seeds(SEEDS, k, n)} for k in range(n)]
    oracles = [{f"{name}.seed_{s}": f"oracle {name} {s}" for name in SETTINGS
                for s in shard_seeds(SEEDS, k, n)} for k in range(n)]
    results = [{name: [{"seed": s, "variant": v, "setting": name}
                       for s in shard_seeds(SEEDS, k, n)] for name in SETTINGS}
               for v in SWAP_VARIANTS for k in range(n)]
    pretrained, by_setting = _split_shards(n, (*models, *oracles, *results), SETTINGS)
    assert sorted(pretrained) == sorted(f"seed_{s}" for s in SEEDS)
    assert len(by_setting) == 2
    for name, (oracle, merged) in zip(SETTINGS, by_setting, strict=True):
        assert oracle == {f"seed_{s}": f"oracle {name} {s}" for s in SEEDS}
        assert list(merged) == list(SWAP_VARIANTS)
        for v, runs in merged.items():
            assert [(r["variant"], r["setting"], r["seed"]) for r in runs] == [
                (v, name, s) for s in SEEDS]
    with pytest.raises(ValueError, match=r"expected \d+ seed-shard inputs \(2 shards\)"):
        _split_shards(n, tuple(models), SETTINGS)
    with pytest.raises(ValueError, match=r"no setting 'c'; re-run the swaps"):
        _split_shards(n, (*models, *oracles, *results), ["a", "c"])
