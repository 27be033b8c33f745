"""End to end: `kedro run --pipeline=sgd_hitting --env=test` through a real KedroSession,
and the refusals of bad parameters before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.sgd_hitting.params import SgdHittingParams
from icml25.pipelines.sgd_hitting.predictions import VARIANTS


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_sgd_hitting_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("sgd_hitting", env="test")
    out = kedro_project / "data/08_reporting/sgd_hitting"

    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == set(VARIANTS)
    names = {k for k in metrics["metrics"]["w_graph"] if not k.endswith("_std")}
    for variant in VARIANTS:
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    m = metrics["metrics"]
    # the theory's exponents are computed from the landscapes, here checked against
    # the reference values computed while this room was designed
    assert m["w_graph"]["l2_exact_middle.predicted"] == pytest.approx(1.0438, abs=2e-3)
    assert m["first_barrier"]["l2_exact_middle.predicted"] == pytest.approx(0.7339, abs=2e-3)
    assert m["w_graph"]["l1_exact_exp.predicted"] == pytest.approx(0.44793, rel=1e-3)
    assert m["gaussian_approx"]["l1_exact_exp.predicted"] == pytest.approx(0.31533, rel=1e-3)
    assert m["w_graph"]["l3_mc.predicted"] == pytest.approx(2 * 0.578724 / 4.5**2, rel=1e-2)
    assert m["w_graph"]["l4_mc.predicted"] == 0.0
    assert len(metrics["per_seed"]["w_graph"]["l3_mc.r2"]) == 2  # test seeds [0, 1]
    for key in ("l1_mc_gaussian.measured_slope", "l3_mc.measured_slope", "l3_mc.ks_max",
                "l3_mc.slope_ci_low", "nn_exact_b1.local_slope",
                "nn_exact_b1.measured_slope", "l2_exact_middle.median_slope"):
        assert _finite(m["w_graph"][key]), key
    assert metrics["chain_steps_per_second"] > 0
    energies = metrics["energies"]
    assert energies["l2_exact_middle"]["markov_chain_energy"] == pytest.approx(1.0438, rel=0.02)

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "sgd_hitting" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 20
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["method_value"] == pytest.approx(m[claim["method"]][claim["metric"]])
    assert {p.name for p in (out / "figures").iterdir()} == {
        "landscapes.png", "scaling_fits.png", "hitting_time_histograms.png",
        "slopes_by_noise.png", "slopes_by_batch.png"}

    mc = pd.read_parquet(kedro_project / "data/07_model_output/sgd_hitting/mc_hitting_times.parquet")
    assert set(mc["seed"]) == {0, 1} and (mc["tau"] >= 0).all()
    # one table per seed shard: seed i of [0, 1] is simulated by shard i % n
    n = seed_shards()
    for k in range(n):
        shard = pd.read_parquet(kedro_project / "data/07_model_output/sgd_hitting"
                                / f"mc_hitting_times_shard_{k}.parquet")
        assert set(shard["seed"]) == {i for i in (0, 1) if i % n == k}

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["sgd_hitting"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert set(VARIANTS) <= set(children)
    assert children["w_graph"].data.tags["icml25.role"] == "method"
    assert children["first_barrier"].data.tags["icml25.role"] == "baseline"
    assert set(children["w_graph"].data.metrics) == set(children["gaussian_approx"].data.metrics)
    assert "l1_exact_exp.rel_error" in children["gaussian_approx"].data.metrics


BAD = [
    ({"experiments": {"l1_mc_gaussian": {"etas": [0.1, -0.05]}}},
     r"sgd_hitting\.experiments\.l1_mc_gaussian\.etas: .*step sizes must be finite and > 0"),
    ({"experiments": {"l1_mc_gaussian": {"etas": [0.1, 0.0]}}},
     r"sgd_hitting\.experiments\.l1_mc_gaussian\.etas"),
    ({"experiments": {"l1_mc_gaussian": {"noise": {"kind": "student_t"}}}},
     r"sgd_hitting\.experiments\.l1_mc_gaussian\.noise: .*no finite moment generating"),
    ({"experiments": {"l4_mc": {"start": [5.0, 0.0]}}},
     r"experiments\.l4_mc\.start: .*outside the domain"),
    ({"experiments": {"l3_mc": {"etas": [0.2, 0.1]}}},
     r"experiments\.l3_mc\.etas: η·λ_max = 2\.45 ≥ 2"),
    ({"experiments": {"l1_mc_gaussian": {"landscape": "nowhere"}}},
     r"experiments\.l1_mc_gaussian\.landscape: 'nowhere' is not one of"),
    ({"gmam": {"n_nodes": 3}}, r"sgd_hitting\.gmam\.n_nodes: got 3"),
]


@pytest.fixture(scope="module")
def test_params():
    root = Path(__file__).resolve().parents[3] / "conf"
    base = yaml.safe_load((root / "base/parameters_sgd_hitting.yml").read_text())
    test = yaml.safe_load((root / "test/parameters_sgd_hitting.yml").read_text())
    return OmegaConf.to_container(OmegaConf.merge(base, test))["sgd_hitting"]


@pytest.mark.parametrize(("override", "message"), BAD)
def test_bad_parameters_are_refused_with_their_full_key(test_params, override, message):
    """The same validation the project hook runs before the first node (validate_parameters)."""
    tree = OmegaConf.to_container(OmegaConf.merge(test_params, override))
    with pytest.raises(ParameterError, match=message):
        validate_parameters(SgdHittingParams, tree, "sgd_hitting")


@pytest.mark.parametrize(("override", "message"), [BAD[0], BAD[2]])
def test_bad_parameters_stop_the_run_before_any_work(kedro_project, run_pipeline, override,
                                                     message):
    with pytest.raises(ParameterError, match=message):
        run_pipeline("sgd_hitting", env="test", params={"sgd_hitting": override})
    assert not (kedro_project / "data/07_model_output/sgd_hitting").exists()
