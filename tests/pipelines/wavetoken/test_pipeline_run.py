"""End to end: `kedro run --pipeline=wavetoken --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from icml25.core.params import ParameterError


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_wavetoken_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("wavetoken", env="test")
    out = kedro_project / "data/08_reporting/wavetoken"

    metrics = json.loads((out / "metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert {"wavetoken", "chronos_bins_1024", "chronos_bins_4096", "chronos_bins_std",
            "seasonal_naive", "naive", "auto_ets"} <= variants
    names = {k for k in metrics["metrics"]["wavetoken"] if not k.endswith("_std")}
    for variant in variants:
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    for name in ("agg_rel_wql_real", "agg_rel_mase_real", "rel_wql_kernelsynth",
                 "rel_wql_sparse_spikes", "rel_wql_chirps"):
        assert _finite(metrics["metrics"]["wavetoken"][name]), name
    # seasonal naive is the normaliser of every relative score
    assert metrics["metrics"]["seasonal_naive"]["agg_rel_wql_real"] == pytest.approx(1.0)
    assert len(metrics["per_seed"]["wavetoken"]["agg_rel_wql_real"]) == 2  # test seeds [0, 1]

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "wavetoken" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 10
    assert claims["confidence"] == pytest.approx(0.90)
    per_unit = metrics["per_unit"]
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        if claim["unit"] == "dataset":  # log ratios: their mean is log of the aggregate
            agg = claim["metric"].replace("log_rel_", "agg_rel_")
            assert claim["n_pairs"] == len(per_unit["wavetoken"][claim["metric"]]) == 4  # 2 + 2
            assert claim["method_value"] == pytest.approx(
                np.mean(np.log(metrics["per_seed"]["wavetoken"][agg])))
            assert claim["n_seeds"] == 2
        elif claim["baseline"] in metrics["metrics"]:  # synthetic sets: paired over the seeds
            assert claim["n_pairs"] == 2
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
            assert claim["baseline_value"] == pytest.approx(
                metrics["metrics"][claim["baseline"]][claim["metric"]])
    # each synthetic series' share of its set's WQL averages to the set's relative WQL
    shares = per_unit["wavetoken"]["rel_wql_chirps_by_series"]
    assert len(shares) == 2  # conf/test: stress.n_series 2
    assert np.mean([np.mean(v) for v in shares.values()]) == pytest.approx(
        metrics["metrics"]["wavetoken"]["rel_wql_chirps"])
    exact = next(c for c in claims["claims"] if c["metric"] == "transform_roundtrip_max_error")
    assert exact["verdict"] == "holds" and exact["test"] == "exact"
    assert exact["method_value"] < 1e-9
    bound = next(c for c in claims["claims"] if c["metric"] == "quantisation_error_over_bound")
    assert bound["verdict"] == "holds" and bound["method_value"] <= 1.0

    assert {p.name for p in (out / "figures").iterdir()} == {"sparse_spikes.png", "chirps.png"}
    # conf/test's one ablation runs both seeds; no pretrained checkpoint: no such row
    assert len(metrics["per_seed"]["wavetoken_haar"]["agg_rel_wql_real"]) == 2
    assert "chronos_pretrained" not in metrics["metrics"]
    assert pd.read_parquet(kedro_project / "data/07_model_output/wavetoken/"
                           "pretrained_forecasts.parquet").empty
    models = kedro_project / "data/06_models/wavetoken"
    # conf/test's two seeds over the default three seed shards: one seed per shard node, the
    # third shard empty
    assert sorted(str(p.relative_to(models / "wavetoken"))
                  for p in (models / "wavetoken").rglob("*.safetensors")) == [
        "shard_0/seed_0.safetensors", "shard_1/seed_1.safetensors"]
    assert not any((models / "checkpoints").glob("*/checkpoint.pt"))  # removed after success

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["wavetoken"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and parent[0].info.run_name == "wavetoken"
    # the pipeline's parent run carries the verdict counts and each claim's verdict as a tag
    counts = {v: sum(c["verdict"] == v for c in claims["claims"])
              for v in ("holds", "fails", "inconclusive")}
    assert parent[0].data.metrics["claims_holding"] == counts["holds"]
    assert parent[0].data.metrics["claims_failing"] == counts["fails"]
    assert parent[0].data.metrics["claims_inconclusive"] == counts["inconclusive"]
    assert parent[0].data.metrics["claims_total"] == 10
    for i, claim in enumerate(claims["claims"], start=1):
        assert parent[0].data.tags[f"claim.{i:02d}.verdict"] == claim["verdict"]
        assert parent[0].data.tags[f"claim.{i:02d}.claim"] == claim["claim"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert mlflow.active_run() is None
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    client = mlflow.MlflowClient()
    for variant in variants:
        run = children[variant]
        assert run.data.tags["mlflow.parentRunId"] == parent[0].info.run_id
        assert "agg_rel_wql_real" in run.data.metrics
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "forecasts.png" in artifacts, variant
        assert run.data.params, variant
    assert children["wavetoken"].data.tags["icml25.role"] == "method"
    assert children["chronos_bins_1024"].data.tags["icml25.role"] == "baseline"
    # training curves and the logged model are children of their variant's run
    assert (children["wavetoken/training/seed 0"].data.tags["mlflow.parentRunId"]
            == children["wavetoken"].info.run_id)
    assert (children["wavetoken/registered model"].data.tags["mlflow.parentRunId"]
            == children["wavetoken"].info.run_id)

    # the method's model is logged with a signature and an input example, and it serves; a
    # conf/test run adds no version to the model registry (base, local and paper runs do)
    assert client.search_model_versions("name='wavetoken'") == []
    (logged,) = mlflow.search_logged_models(
        experiment_ids=[parent[0].info.experiment_id], output_format="list")
    assert logged.source_run_id == children["wavetoken/registered model"].info.run_id
    model = mlflow.pyfunc.load_model(logged.model_uri)
    # logged from code (pyfunc_model.py), not cloudpickled: no python_model.pkl travels with it
    assert model.metadata.flavors["python_function"].get("model_code_path")
    files = mlflow.artifacts.download_artifacts(logged.model_uri)
    assert not list(Path(files).rglob("*.pkl"))
    assert model.metadata.signature is not None
    assert model.metadata.saved_input_example_info is not None
    frame = pd.DataFrame(np.linspace(10.0, 20.0, 2 * 32).reshape(2, 32),
                         columns=[f"t{i}" for i in range(32)])  # conf/test: context_length 32
    forecast = model.predict(frame)
    assert forecast.shape == (2, 3 * 8)  # median, q10, q90 for prediction_length 8
    assert np.isfinite(forecast.to_numpy()).all()


def test_bad_parameter_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"wavetoken\.model\.d_model: got -3"):
        run_pipeline("wavetoken", env="test", params={"wavetoken": {"model": {"d_model": -3}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


def test_wavelet_lengths_are_checked_against_the_level(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match="prediction_length 9 must be divisible"):
        run_pipeline("wavetoken", env="test", params={"wavetoken": {"prediction_length": 9}})


@pytest.mark.parametrize("backend", ["torch", "hf_t5"])
def test_paper_code_path_runs_on_cpu_at_tiny_size(kedro_project, run_pipeline, backend):
    """conf/paper's choices (T5 relative positions, AMP, KernelSynth share) on the test sizes,
    with our model and with transformers' T5 (tied weights stored through the model dataset)."""
    if backend == "hf_t5":
        pytest.importorskip("transformers")
    run_pipeline("wavetoken", env="test", params={"wavetoken": {
        "model": {"position": "t5_relative", "backend": backend},
        "train": {"amp": True, "kernelsynth_share": 0.1},
        "seeds": [0],
    }})
    claims = json.loads((kedro_project / "data/08_reporting/wavetoken/claims.json").read_text())
    assert claims["run"]["seeds"] == [0]
    assert all(_finite(c["method_value"]) for c in claims["claims"])
