"""End to end: `kedro run --pipeline=ctbench --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pandas as pd
import pytest

from icml25.core.params import ParameterError
from icml25.core.sweep import seed_shards

pytestmark = pytest.mark.usefixtures("one_thread")

METHODS = ("standard", "pgd", "ibp", "crown_ibp", "sabr", "mtl_ibp", "mtl_ibp_equal")


def test_ctbench_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("ctbench", env="test")
    out = kedro_project / "data/08_reporting/ctbench"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == set(METHODS)
    names = {k for k in metrics["metrics"]["ibp"] if not k.endswith("_std")}
    for method in METHODS:
        assert {k for k in metrics["metrics"][method] if not k.endswith("_std")} == names
        for setting in ("eps0_1", "eps0_3"):
            m = metrics["metrics"][method]
            for key in ("nat_acc", "pgd_acc", "cert_acc", "cert_ibp_acc", "cert_crown_ibp_acc",
                        "cert_crown_subset_acc", "train_seconds", "relu_unstable"):
                assert math.isfinite(m[f"{key}_{setting}"]), (method, key, setting)
            assert m[f"cert_acc_{setting}"] <= m[f"pgd_acc_{setting}"] <= m[f"nat_acc_{setting}"]
        assert len(metrics["per_seed"][method]["nat_acc_eps0_1"]) == 2  # test seeds [0, 1]

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "ctbench" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 13
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert isinstance(claim["holds"], bool)
        if claim["method"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    order = next(c for c in claims["claims"] if c["metric"] == "ordering_violations")
    assert order["verdict"] == "holds" and order["method_value"] == 0
    # the accuracy claims pair over the 100 capped test images
    units = [c for c in claims["claims"] if c["metric"] != "ordering_violations"]
    assert all(c["unit"] == "test_image" and c["n_pairs"] == 100 for c in units)

    assert (out / "figures" / "certified_accuracy.png").stat().st_size > 1000
    # one folder and one certification table per seed shard: seed i of [0, 1] is in shard i % n
    n = seed_shards()
    models = kedro_project / "data/06_models/ctbench"
    ibp = models / "eps0_1" / "ibp"
    assert sorted(p.relative_to(ibp).as_posix() for p in ibp.rglob("*.safetensors")) == [
        f"shard_{i % n}/seed_{i}.safetensors" for i in (0, 1)]
    assert (models / "standard" / "shard_0" / "seed_0.safetensors").exists()
    out_dir = kedro_project / "data/07_model_output/ctbench"
    table = pd.concat([pd.read_parquet(out_dir / f"eps0_1_sabr_shard_{k}_certification.parquet")
                       for k in range(n)], ignore_index=True)
    assert len(table) == 2 * 100  # two seeds x 100 capped test images
    assert not (table["certified"] & ~table["pgd_robust"]).any()
    assert not (table["pgd_robust"] & ~table["correct"]).any()
    assert table.groupby("seed")["in_crown_subset"].sum().tolist() == [10, 10]
    assert (kedro_project / "data/01_raw/ctbench/images.parquet").exists()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["ctbench"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for method in METHODS:
        assert "cert_acc_eps0_1" in children[method].data.metrics
    assert children["ibp"].data.tags["icml25.role"] == "method"
    assert children["pgd"].data.tags["icml25.role"] == "baseline"
    assert "ibp/training/eps0_1/seed 0" in children


def test_bad_parameter_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"ctbench\.settings\.eps0_1\.eps_test: got -0\.1"):
        run_pipeline("ctbench", env="test",
                     params={"ctbench": {"settings": {"eps0_1": {"eps_test": -0.1}}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


def test_bad_method_override_names_its_key(kedro_project, run_pipeline):
    with pytest.raises(ParameterError,
                       match=r"ctbench\.settings\.eps0_3\.methods: .*sabr: eps_shrinkage"):
        run_pipeline("ctbench", env="test", params={"ctbench": {"settings": {"eps0_3": {
            "methods": {"sabr": {"eps_shrinkage": 1.5}}}}}})
