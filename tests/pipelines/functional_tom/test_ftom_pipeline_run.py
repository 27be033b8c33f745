"""End to end: `kedro run --pipeline=functional_tom --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pandas as pd
import pytest

from icml25.core.params import ParameterError


def test_functional_tom_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("functional_tom", env="test")
    out = kedro_project / "data/08_reporting/functional_tom"
    metrics = json.loads((out / "metrics.json").read_text())
    agents = set(metrics["metrics"])
    assert {"oracle", "random", "frequency_br", "lag1_br", "bayes_planner", "tabular_rmax",
            "meta_policy", "meta_tom_br", "meta_tom_only", "llm.lm", "llm.qa",
            "llm.social_qa"} <= agents
    names = set(metrics["metrics"]["oracle"])
    assert all(set(metrics["metrics"][a]) == names for a in agents)
    for agent in ("oracle", "random", "lag1_br", "tabular_rmax"):
        for stat in ("regret", "tom_regret", "tom_accuracy", "gap"):
            value = metrics["metrics"][agent][f"paper.ipd.tft.{stat}"]
            assert value is not None and math.isfinite(value), (agent, stat)
    assert metrics["metrics"]["oracle"]["max_abs_regret_deterministic"] == pytest.approx(0.0)
    assert metrics["metrics"]["meta_policy"]["meta.ipd.tft.regret"] is not None
    llm = metrics["metrics"]["llm.qa"]
    assert math.isfinite(llm["llm.rps.single.regret"])
    assert 0 <= llm["llm.rps.single.invalid_rate"] <= 1
    assert len(metrics["per_seed"]["random"]["paper.rps.single.regret"]) == 2
    cells = pd.DataFrame(metrics["cells"])
    assert {"regret_se", "tom_accuracy_se", "n"} <= set(cells.columns)

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "functional_tom" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 10
    assert claims["confidence"] == 0.90
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] is (claim["verdict"] == "holds")
        if claim["baseline"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    oracle = next(c for c in claims["claims"] if c["method"] == "oracle")
    assert oracle["verdict"] == "holds" and oracle["test"] == "exact"  # known answer: zero
    assert {p.name for p in (out / "figures").iterdir()} == {
        "heatmap_literal_vs_functional.png", "tom_vs_regret.png", "cumulative_regret.png"}

    logs = pd.read_parquet(kedro_project / "data/07_model_output/functional_tom/llm_logs.parquet")
    assert len(logs) and logs["raw"].notna().all()  # raw answers are kept
    assert logs.loc[logs["agent"] == "llm.lm", "raw"].str.len().gt(0).all()
    models = kedro_project / "data/06_models/functional_tom/meta"
    # conf/test's one meta seed [0] is trained by seed shard 0; any other shard is empty
    assert sorted(p.relative_to(models).as_posix() for p in models.rglob("*.safetensors")) == [
        "shard_0/ipd_policy_seed_0.safetensors", "shard_0/ipd_tom_only_seed_0.safetensors",
        "shard_0/rps_policy_seed_0.safetensors"]

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["functional_tom"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert agents <= set(children)
    assert children["meta_policy"].data.tags["icml25.role"] == "method"
    assert children["lag1_br"].data.tags["icml25.role"] == "baseline"
    assert "paper.ipd.tft.regret" in children["lag1_br"].data.metrics
    assert "meta/training/ipd_policy_seed_0" in children


def test_bad_parameter_stops_the_run_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"functional_tom\.meta\.steps"):
        run_pipeline("functional_tom", env="test",
                     params={"functional_tom": {"meta": {"steps": 0}}})
    assert not (kedro_project / "data/01_raw/functional_tom").exists()
