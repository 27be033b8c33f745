"""ε settings that are off (ε = 0.3 in the default config): nothing trained or certified, their
claims not judged, their tables skipped; per-setting schedules; refusals of bad combinations."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from pydantic import ValidationError

from icml25.pipelines.ctbench.nodes import _merge_shards, certify_method, train_method
from icml25.pipelines.ctbench.params import CtbenchParams

ROOT = Path(__file__).resolve().parents[3]


def _base() -> dict:
    raw = yaml.safe_load((ROOT / "conf/base/parameters_ctbench.yml").read_text())["ctbench"]
    raw["data"]["cache"] = None
    return raw


def test_default_config_disables_eps0_3_with_its_own_schedule_and_claims():
    p = CtbenchParams.model_validate(_base())
    assert p.enabled_settings == ["eps0_1"]
    assert all(not c.metric.endswith("_eps0_3") for c in p.all_claims())
    assert any(c.metric.endswith("_eps0_3") for c in p.settings["eps0_3"].claims)
    assert p.train_for("eps0_3").epochs == 90 and p.train_for("eps0_1").epochs == p.train.epochs
    raw = _base()
    raw["settings"]["eps0_3"]["enabled"] = True
    on = CtbenchParams.model_validate(raw)
    assert len(on.all_claims()) == len(p.all_claims()) + len(p.settings["eps0_3"].claims)


def test_bad_setting_combinations_are_refused_by_name():
    raw = _base()
    raw["claims"].append(dict(raw["settings"]["eps0_3"]["claims"][0]))
    with pytest.raises(ValidationError, match="disabled setting eps0_3"):
        CtbenchParams.model_validate(raw)
    raw = _base()
    raw["settings"]["eps0_1"]["enabled"] = False
    with pytest.raises(ValidationError, match="every ε setting is disabled"):
        CtbenchParams.model_validate(raw)
    raw = _base()
    raw["settings"]["eps0_3"]["train"]["epochs"] = 10  # ramp to 48 beyond 10 epochs
    with pytest.raises(ValidationError, match=r"settings\.eps0_3\.train: .*ramp_end <= epochs, got 1, 48, 10"):
        CtbenchParams.model_validate(raw)
    raw = _base()
    raw["settings"]["eps0_3"]["train"]["epoch"] = 10
    with pytest.raises(ValidationError, match=r"unknown train overrides \['epoch'\]"):
        CtbenchParams.model_validate(raw)


def test_a_disabled_setting_trains_and_certifies_nothing_and_its_tables_are_skipped():
    params = {"ctbench": _base()}
    assert train_method(pd.DataFrame(), params["ctbench"], setting="eps0_3", method="ibp") == {}
    fake_models = {"seed_0": {"state_dict": {}, "metadata": {}}}
    assert certify_method(fake_models, pd.DataFrame(), params["ctbench"], setting="eps0_3",
                          method="standard").empty
    on = pd.DataFrame([{"method": "ibp", "seed": 0, "sample": 0}])
    merged = _merge_shards((on, pd.DataFrame(), pd.DataFrame()), 1)
    assert len(merged) == 1 and merged[0]["method"].iloc[0] == "ibp"
