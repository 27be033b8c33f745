"""The merge of twa's seed shards (``seeds[k::n]``, the first seed's runs taken from the
selection) back into the results one loop over seeds writes, and the refusal of shards of
another seed list or selection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from icml25.core.sweep import shard_seeds
from icml25.pipelines.twa import nodes

ROOT = Path(__file__).resolve().parents[3]
SEEDS = [7, 3, 11, 0, 5]
PARAMS = yaml.safe_load((ROOT / "conf/base/parameters_twa.yml").read_text())["twa"] | {
    "seeds": SEEDS}
CHOSEN = ["twa_l1", "dpo_sft0.5", "sft_all"]


def _run(seed: int, name: str) -> tuple[dict[str, float], np.ndarray]:
    return {"test_oracle_mqm": float(seed + CHOSEN.index(name))}, np.arange(4.0) + seed


def _selection() -> dict:
    runs = {s: {name: _run(s, name) for name in CHOSEN} for s in SEEDS[:1]}
    chosen = {name: {"lr": 1e-3, "hparams": "-", "dev": 1.0, "step": 2} for name in CHOSEN}
    return {"chosen": chosen, "ul_scale": 1.0, "sft_weight": 0.5, "grid": [],
            "base": ({"test_oracle_mqm": 9.0}, np.zeros(4)), "seeds": runs,
            "base_info": {}, "others": {}}


def _shards(n: int) -> list[dict]:
    return [{s: {name: _run(s, name) for name in CHOSEN} for s in shard_seeds(SEEDS, k, n)}
            for k in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_results_come_back_in_seed_list_order(n):
    results = nodes.merge_methods(_selection(), PARAMS, *_shards(n))
    assert list(results["variants"]) == ["base", *CHOSEN, "twa", "dpo"]
    assert results["variants"]["sft_all"]["test_oracle_mqm"] == [s + 2.0 for s in SEEDS]
    assert results["variants"]["twa"] == results["variants"]["twa_l1"]
    assert results["segments"]["dpo_sft0.5"] == [list(np.arange(4.0) + s) for s in SEEDS]
    assert results["selected"]["twa"] == {"ul_scale": 1.0, "variant": "twa_l1"}


def test_shards_of_another_seed_list_or_selection_are_refused():
    shards = _shards(2)
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_methods(_selection(), PARAMS, shards[1], shards[0])
    with pytest.raises(ValueError, match=r"seeds \[7, 3, 11, 0, 5\], params:twa.seeds is"):
        nodes.merge_methods(_selection(), PARAMS | {"seeds": [7, 3, 11, 0, 6]}, *shards)
    shards[1][3].pop("sft_all")
    with pytest.raises(ValueError, match="seed 3's runs are"):
        nodes.merge_methods(_selection(), PARAMS, *shards)


def test_the_first_seed_is_never_trained_twice_and_an_empty_shard_trains_nothing():
    selection = _selection()
    # shard 0 of 5 holds the first seed alone: its runs are the selection's, nothing is built
    assert nodes.run_method_seeds({}, None, {}, None, selection, PARAMS, 0, 5) == {
        7: selection["seeds"][7]}
    assert nodes.run_method_seeds({}, None, {}, None, selection, PARAMS, 5, 6) == {}


def test_ablation_seeds_train_the_claims_variants_on_every_seed_and_the_rest_on_the_first():
    chosen = [*CHOSEN, "twa_seq"]  # twa_seq: no claim names it

    def run(seed: int, name: str) -> tuple[dict[str, float], np.ndarray]:
        return {"test_oracle_mqm": float(seed + chosen.index(name))}, np.arange(4.0) + seed

    params = PARAMS | {"ablation_seeds": 2}
    selection = _selection()
    selection["chosen"] = {name: {"lr": 1e-3, "hparams": "-", "dev": 1.0, "step": 2}
                           for name in chosen}
    selection["seeds"] = {7: {name: run(7, name) for name in chosen}}
    p = nodes._params(params)
    assert nodes.claim_variants(p, selection) == CHOSEN
    plan = {s: nodes.seed_variants(p, selection, s) for s in SEEDS}
    assert plan == {7: chosen, 3: chosen, 11: CHOSEN, 0: CHOSEN, 5: CHOSEN}
    shards = [{s: {name: run(s, name) for name in plan[s]} for s in shard_seeds(SEEDS, k, 2)}
              for k in range(2)]
    results = nodes.merge_methods(selection, params, *shards)
    assert results["variants"]["twa_seq"]["test_oracle_mqm"] == [10.0, 6.0]  # seeds 7, 3
    assert results["seeds_of"]["twa_seq"] == [7, 3]
    assert results["seeds_of"]["twa"] == results["seeds_of"]["sft_all"] == SEEDS
    assert len(results["segments"]["twa_seq"]) == 2 and len(results["segments"]["twa"]) == 5
    shards[1][3].pop("twa_seq")  # seed 3 is one of the first two: it must train every variant
    with pytest.raises(ValueError, match=r"twa\.ablation_seeds ask for"):
        nodes.merge_methods(selection, params, *shards)
