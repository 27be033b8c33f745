"""ε settings that are off (ε = 0.3 in the default config): nothing trained or certified, their
claims not judged, their tables skipped; per-setting schedules; refusals of bad combinations."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from pydantic import ValidationError

from icml25.pipelines.ctbench.nodes import _merge_shards, certify_method, train_method
from icml25.pipelines.ctbench.params import CtbenchParams

ROOT = Path(__file__).resolve().parents[3]


def test_default_config_disables_eps0_3_with_its_own_schedule_and_claims(ctbench_base):
    p = CtbenchParams.model_validate(ctbench_base())
    assert p.enabled_settings == ["eps0_1"]
    assert all(not c.metric.endswith("_eps0_3") for c in p.all_claims())
    assert any(c.metric.endswith("_eps0_3") for c in p.settings["eps0_3"].claims)
    assert p.train_for("eps0_3").epochs == 90 and p.train_for("eps0_1").epochs == p.train.epochs
    raw = ctbench_base()
    raw["settings"]["eps0_3"]["enabled"] = True
    on = CtbenchParams.model_validate(raw)
    assert len(on.all_claims()) == len(p.all_claims()) + len(p.settings["eps0_3"].claims)


def test_bad_setting_combinations_are_refused_by_name(ctbench_base):
    raw = ctbench_base()
    raw["claims"].append(dict(raw["settings"]["eps0_3"]["claims"][0]))
    with pytest.raises(ValidationError, match="disabled setting eps0_3"):
        CtbenchParams.model_validate(raw)
    raw = ctbench_base()
    raw["settings"]["eps0_1"]["enabled"] = False
    with pytest.raises(ValidationError, match="every ε setting is disabled"):
        CtbenchParams.model_validate(raw)
    raw = ctbench_base()
    raw["settings"]["eps0_3"]["train"]["epochs"] = 10  # ramp to 48 beyond 10 epochs
    with pytest.raises(ValidationError, match=r"settings\.eps0_3\.train: .*ramp_end <= epochs, got 1, 48, 10"):
        CtbenchParams.model_validate(raw)
    raw = ctbench_base()
    raw["settings"]["eps0_3"]["train"]["epoch"] = 10
    with pytest.raises(ValidationError, match=r"unknown train overrides \['epoch'\]"):
        CtbenchParams.model_validate(raw)


def test_a_disabled_setting_trains_and_certifies_nothing_and_its_tables_are_skipped(ctbench_base):
    params = {"ctbench": ctbench_base()}
    assert train_method(pd.DataFrame(), params["ctbench"], setting="eps0_3", method="ibp") == {}
    fake_models = {"seed_0": {"state_dict": {}, "metadata": {}}}
    assert certify_method(fake_models, pd.DataFrame(), params["ctbench"], setting="eps0_3",
                          method="standard").empty
    on = pd.DataFrame([{"method": "ibp", "seed": 0, "sample": 0}])
    merged = _merge_shards((on, pd.DataFrame(), pd.DataFrame()), 1)
    assert len(merged) == 1 and merged[0]["method"].iloc[0] == "ibp"


# ------------------------------------------------- stretched schedules and the equal-budget twin
def test_default_stretches_mtl_ibp_4x_at_eps0_1_and_keeps_its_twin_on_the_common_schedule(ctbench_base):
    p = CtbenchParams.model_validate(ctbench_base())
    t, long = p.train_for("eps0_1", "ibp"), p.train_for("eps0_1", "mtl_ibp")
    assert (t.epochs, t.ramp_start, t.ramp_end, t.milestones) == (120, 1, 60, [84, 102])
    # the length study's 480-epoch schedule: ramp over the first half, decays at 70 / 85 %
    assert (long.epochs, long.ramp_start, long.ramp_end, long.milestones) == (480, 1, 240,
                                                                              [336, 408])
    assert p.train_for("eps0_1", "mtl_ibp_equal") == t
    assert p.algorithm("mtl_ibp_equal") == "mtl_ibp" and p.algorithm("sabr") == "sabr"
    # ε = 0.3 has its own schedule and no stretch
    assert p.train_for("eps0_3", "mtl_ibp") == p.train_for("eps0_3", "mtl_ibp_equal")
    # the equal-budget claim compares IBP with the twin, the table's claims use mtl_ibp
    by_claim = {c.claim: c.method for c in p.all_claims()}
    assert by_claim["MTL-IBP's natural accuracy is higher than IBP's at equal training budget "
                    "(ε = 0.1)"] == "mtl_ibp_equal"
    assert by_claim["MTL-IBP training certifies ≥ 60% at ε = 0.1"] == "mtl_ibp"


def test_paper_config_trains_every_method_on_one_schedule(ctbench_base):
    from omegaconf import OmegaConf
    paper = yaml.safe_load((ROOT / "conf/paper/parameters_ctbench.yml").read_text())["ctbench"]
    merged = OmegaConf.to_container(OmegaConf.merge(ctbench_base(), paper))  # Kedro's soft merge
    p = CtbenchParams.model_validate(merged)
    for setting in p.enabled_settings:
        assert {p.train_for(setting, m).epochs for m in p.methods} == {70}


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r["methods"]["mtl_ibp_equal"].pop("algorithm"),
     r"methods\.mtl_ibp_equal\.algorithm: name the algorithm"),
    (lambda r: r["methods"]["sabr"].update(algorithm="ibp"),
     r"methods\.sabr\.algorithm: the variant sabr trains sabr"),
    (lambda r: r["methods"]["mtl_ibp_equal"].update(ibp_coef=0.3),
     r"mtl_ibp_equal must train mtl_ibp with mtl_ibp's settings; at eps0_1 they differ in "
     r"\['ibp_coef'\]"),
    (lambda r: r["settings"]["eps0_3"]["methods"].pop("mtl_ibp_equal"),
     r"at eps0_3 they differ in \['ibp_coef', 'l1', 'robust_weight'\]"),
    (lambda r: r["settings"]["eps0_1"]["methods"].update(mtl_ibp_equal={"epochs_scale": 2}),
     r"epochs_scale at eps0_1 must be 1, got 2"),
    (lambda r: r["settings"]["eps0_1"]["methods"].update(sabr={"algorithm": "ibp"}),
     r"sabr: a setting cannot change the algorithm"),
    (lambda r: r["methods"]["mtl_ibp"].update(epochs_scale=0),
     r"epochs_scale\n  Input should be greater than or equal to 1"),
])
def test_bad_variants_are_refused_by_name(edit, message, ctbench_base):
    raw = ctbench_base()
    edit(raw)
    with pytest.raises(ValidationError, match=message):
        CtbenchParams.model_validate(raw)


def _tiny(raw: dict) -> dict:
    """The default's methods and claims on sklearn digits, a 16-wide MLP, 2 epochs, one seed."""
    raw.update(seeds=[0], progress=False, num_threads=1, parallel_seeds=1,
               network={"name": "mlp", "width": 16, "depth": 1})
    raw["data"].update(dataset="digits", max_train=96, max_test=20)
    raw["train"].update(epochs=2, ramp_start=0, ramp_end=1, milestones=[2], batch_size=32,
                        val_pgd_steps=1)
    raw["settings"]["eps0_1"]["methods"]["mtl_ibp"]["epochs_scale"] = 2
    return raw


def test_the_twin_trains_its_algorithm_exactly_and_the_stretch_trains_longer(ctbench_base):
    from icml25.pipelines.ctbench.nodes import load_data, split_data
    raw = _tiny(ctbench_base())
    split = split_data(load_data(raw), raw)
    long = train_method(split, raw, setting="eps0_1", method="mtl_ibp")["seed_0"]
    twin = train_method(split, raw, setting="eps0_1", method="mtl_ibp_equal")["seed_0"]
    assert long["metadata"]["epochs"] == 4 and twin["metadata"]["epochs"] == 2
    assert len(long["metadata"]["history"]) == 2 * len(twin["metadata"]["history"])
    assert twin["metadata"]["algorithm"] == long["metadata"]["algorithm"] == "mtl_ibp"
    assert twin["metadata"]["method"] == "mtl_ibp_equal"
    # without the stretch, mtl_ibp is the twin to the last bit: same algorithm, settings, seed
    raw["settings"]["eps0_1"]["methods"]["mtl_ibp"]["epochs_scale"] = 1
    same = train_method(split, raw, setting="eps0_1", method="mtl_ibp")["seed_0"]
    assert same["state_dict"].keys() == twin["state_dict"].keys()
    assert all(torch.equal(same["state_dict"][k], twin["state_dict"][k])
               for k in twin["state_dict"])
