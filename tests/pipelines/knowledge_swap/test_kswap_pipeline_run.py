"""End to end: `kedro run --pipeline=knowledge_swap --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pytest

from icml25.core.params import ParameterError
from icml25.core.sweep import seed_shards
from icml25.pipelines.knowledge_swap.params import ROLES

pytestmark = pytest.mark.usefixtures("one_thread")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


SETTINGS = {"shapes_f38": {"retain": 80, "forget": 20, "learn": 30},  # conf/test: test images
            "lines_f01234": {"retain": 50, "forget": 50, "learn": 20}}
N_CLAIMS = 9  # per setting (conf/base claims)


def test_knowledge_swap_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("knowledge_swap", env="test")
    out = kedro_project / "data/08_reporting/knowledge_swap"

    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {f"{s}/{v}" for s in SETTINGS for v in ROLES}
    assert set(metrics["settings"]) == set(SETTINGS)
    assert metrics["pretrain_domain"] == "mnist_digits"
    names = {k for k in metrics["metrics"]["shapes_f38/ltf"] if not k.endswith("_std")}
    for stage in ("start", "stage1", "final"):
        for part in ("retain", "forget", "learn"):
            assert f"acc_{part}_{stage}" in names
    for variant, values in metrics["metrics"].items():
        assert {k for k in values if not k.endswith("_std")} == names, variant
        assert all(_finite(v) for v in values.values()), variant
        assert all(0 <= values[f"acc_{p}_final"] <= 100 for p in ("retain", "forget", "learn"))
        assert len(metrics["per_seed"][variant]["acc_forget_final"]) == 2  # test seeds [0, 1]
    per_seed = metrics["per_seed"]
    for s in SETTINGS:
        # every swap of a seed starts from the same pretrained model, expanded head and LoRA init
        for part in ("retain", "forget", "learn"):
            start = per_seed[f"{s}/ltf"][f"acc_{part}_start"]
            for variant in ("ftl", "joint", "naive_ft", "forget_only"):
                assert per_seed[f"{s}/{variant}"][f"acc_{part}_start"] == start
            assert per_seed[f"{s}/swap_start"][f"acc_{part}_final"] == start
        assert per_seed[f"{s}/pretrained"]["acc_learn_final"] == [0.0, 0.0]
        assert len(metrics["curves"][f"{s}/ltf"][0]["curve"]) == 2  # 1 epoch per stage
    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "knowledge_swap" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == N_CLAIMS * len(SETTINGS)
    for claim in claims["claims"]:
        setting = claim["method"].split("/", 1)[0]
        assert claim["claim"].startswith(f"[{setting} (forget ")
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert isinstance(claim["holds"], bool)
        # paired over the test images of the claim's set in its setting
        assert claim["unit"] == "test_image"
        assert claim["n_pairs"] == SETTINGS[setting][claim["metric"].split("_")[1]]
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
        if claim["baseline"] in metrics["metrics"]:
            assert claim["baseline"].startswith(f"{setting}/")
            assert claim["baseline_value"] == pytest.approx(
                metrics["metrics"][claim["baseline"]][claim["metric"]])
    assert sum(c["baseline"].endswith("/swap_start") for c in claims["claims"]) == len(SETTINGS)

    assert {p.name for p in (out / "figures").iterdir()} == {
        f"{kind}_{s}.png" for kind in ("stage_accuracy", "lora_norms") for s in SETTINGS}
    # one folder per seed shard: seed i of [0, 1] is trained by shard i % n
    n = seed_shards()
    models = kedro_project / "data/06_models/knowledge_swap"
    assert sorted(p.relative_to(models / "pretrained").as_posix()
                  for p in (models / "pretrained").rglob("*.safetensors")) == [
        f"shard_{i % n}/seed_{i}.safetensors" for i in (0, 1)]
    for folder in ("retrain_oracle", "ltf", "ftl"):
        assert sorted(p.relative_to(models / folder).as_posix()
                      for p in (models / folder).rglob("*.safetensors")) == sorted(
            f"shard_{i % n}/{s}.seed_{i}.safetensors" for i in (0, 1) for s in SETTINGS)
    assert (kedro_project / "data/01_raw/knowledge_swap/mnist5k.npz").exists()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["knowledge_swap"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for s in SETTINGS:
        for variant, role in ROLES.items():
            run = children[f"{s}/{variant}"]
            assert run.data.tags["icml25.role"] == role
            assert "acc_forget_final" in run.data.metrics and "h_mean" in run.data.metrics
        assert f"{s}/ltf/curves/seed 0" in children


def test_bad_parameter_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"knowledge_swap\.swap\.bnd: got -1"):
        run_pipeline("knowledge_swap", env="test", params={"knowledge_swap": {"swap": {"bnd": -1}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


def test_a_class_to_forget_and_learn_at_once_is_refused(kedro_project, run_pipeline):
    params = {"knowledge_swap": {"data": {"settings": [
        {"name": "bad", "forget_classes": [3, "plus"], "learn_classes": ["plus"]}]}}}
    with pytest.raises(ParameterError, match="both in forget_classes and learn_classes"):
        run_pipeline("knowledge_swap", env="test", params=params)
    assert not any((kedro_project / "data/01_raw").iterdir())
