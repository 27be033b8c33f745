"""End to end: `kedro run --pipeline=twa --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pandas as pd
import pytest

from icml25.core.params import ParameterError

pytestmark = pytest.mark.usefixtures("one_thread")

METHODS = {"base", "sft_all", "filter_sft", "dpo", "twa", "twa_token_ul", "twa_token_ul_l1",
           "twa_offtraj", "twa_seq", "twa_l1", "twa_l0.2", "dpo_sft0", "dpo_sft1"}


def test_twa_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("twa", env="test")
    out = kedro_project / "data/08_reporting/twa"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == METHODS
    names = {k for k in metrics["metrics"]["twa"] if not k.endswith("_std")}
    assert {"test_oracle_mqm", "test_error_free", "test_chrf", "test_bleu", "test_ter",
            "test_chrf_pp", "test_exact_match", "test_hard_oracle_mqm", "dev_oracle_mqm",
            "inspan_correct_dlogp", "inspan_wrong_dlogp", "test_p_vs_twa"} <= names
    for variant, values in metrics["metrics"].items():
        assert {k for k in values if not k.endswith("_std")} == names, variant
        assert math.isfinite(values["test_oracle_mqm"])
        assert len(metrics["per_seed"][variant]["test_oracle_mqm"]) == 2
    assert metrics["metrics"]["base"]["inspan_correct_dlogp"] == 0.0
    assert 0 <= metrics["data"]["error_free_share"] <= 1

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "twa" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 8
    for claim in claims["claims"]:
        assert isinstance(claim["holds"], bool)
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
        assert claim["baseline_value"] == pytest.approx(
            metrics["metrics"][claim["baseline"]][claim["metric"]])
    assert {p.name for p in (out / "figures").iterdir()} == {"test_oracle_mqm.png",
                                                             "within_span.png"}
    annotated = pd.read_parquet(kedro_project / "data/01_raw/twa/annotated.parquet")
    assert set(annotated["system"]) == {"other_0_greedy", "other_1_greedy", "other_0_sampled",
                                        "corrupted_reference"}
    assert (kedro_project / "data/06_models/twa/systems.safetensors").exists()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    variant_runs = {r.info.run_name for r in runs if r.data.tags.get("icml25.pipeline") == "twa"}
    assert variant_runs >= METHODS


@pytest.mark.parametrize("override, key", [
    ({"model": {"d_model": 15}}, "twa.model"),
    ({"loss": {"ul_scale": [0.2, 0.05]}}, "twa.loss"),
    ({"annotator": {"p_miss": 1.5}}, "twa.annotator.p_miss"),
    ({"systems": {"source": "self"}}, "twa.systems.source"),
])
def test_bad_parameters_fail_before_any_work(kedro_project, run_pipeline, override, key):
    with pytest.raises(Exception) as err:
        run_pipeline("twa", env="test", params={"twa": override})
    chain, e = [], err.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(x, ParameterError) and key in str(x) for x in chain), str(err.value)
    assert not (kedro_project / "data/01_raw/twa/corpus.parquet").exists()
