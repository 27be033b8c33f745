"""End to end: `kedro run --pipeline=distributed_estimation --env=test` in a real KedroSession,
and the refusals of bad parameters and bad data."""

from __future__ import annotations

import json
import math

import mlflow
import numpy as np
import pandas as pd
import pytest

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.distributed_estimation import nodes
from icml25.pipelines.distributed_estimation.params import DistributedEstimationParams
from icml25.pipelines.distributed_estimation.simulator import Point, check_point

NAME = "distributed_estimation"


def test_distributed_estimation_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline(NAME, env="test")
    out = kedro_project / f"data/08_reporting/{NAME}"
    metrics = json.loads((out / "metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert {"layered", "centralised", "forward", "hash1bit", "localquant", "bf", "at",
            "bf_recursive", "at_noninteractive", "envelope", "layered_theory_k"} == variants
    names = set(metrics["metrics"]["layered"])
    for variant in variants:
        assert set(metrics["metrics"][variant]) == names
    assert math.isfinite(metrics["metrics"]["layered"]["ise.n_d2.n16"])
    assert metrics["metrics"]["layered"]["bits_max_over_budget"] <= 0

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == NAME and claims["run"]["env"] == "test"
    assert claims["run"]["seeds"] == [0, 1]
    assert claims["n_claims"] == len(claims["claims"]) == 15
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["metric"] in metrics["claim_metrics"]
        # judged on the per-seed values, one per repetition, not on the seed-mean curve
        per_seed = metrics["claim_metrics_per_seed"][claim["metric"]]
        assert len(per_seed) == 2
        if any(v is None for v in per_seed):  # not measurable at test size: never holds
            assert claim["method_value"] is None and claim["verdict"] == "inconclusive"
        else:
            assert claim["n_pairs"] == 2
            assert claim["method_value"] == pytest.approx(np.mean(per_seed))
    bits = next(c for c in claims["claims"] if c["metric"] == "bits_over_budget_max")
    assert bits["test"] == "exact" and bits["verdict"] == "holds"
    assert bits["method_value"] <= 0

    sim = pd.read_parquet(kedro_project / f"data/07_model_output/{NAME}/sim_results.parquet")
    used = sim[sim["applicable"] & sim["bits_max"].notna()]
    assert (used["bits_max"] <= used["l"]).all() and len(used) > 100
    assert set(sim["model"]) == {"density", "gaussian", "binary", "poisson", "heteroskedastic"}
    assert np.isfinite(sim.loc[sim["applicable"], "ise"]).all()
    # one table per seed shard: repetition i of [0, 1] is simulated by shard i % n, and the
    # merged table holds exactly the shards' rows
    n = seed_shards()
    shard_rows = 0
    for k in range(n):
        shard = pd.read_parquet(kedro_project / f"data/07_model_output/{NAME}/"
                                f"sim_results_shard_{k}.parquet")
        assert (set(shard["rep"]) if len(shard) else set()) == {i for i in (0, 1) if i % n == k}
        shard_rows += len(shard)
    assert shard_rows == len(sim)
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"n_d2.png", "n_d1.png", "m_d2.png", "l_d2.png", "phase_diagram.png",
            "regression.png", "k_opt.png", "bits_per_message.png"} <= figures
    assert (out / "slope_table.csv").exists()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=[NAME], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert children["layered"].data.tags["icml25.role"] == "method"
    assert children["forward"].data.tags["icml25.role"] == "baseline"
    assert "ise.n_d2.n16" in children["hash1bit"].data.metrics


def test_bad_bit_budget_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"distributed_estimation\.sweeps\.n_d2\.l"):
        run_pipeline(NAME, env="test", params={NAME: {"sweeps": {"n_d2": {"l": [-1]}}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


def _base(**sweep) -> dict:
    return {"seeds": [0], "functions": {"d2": {"kind": "d2", "s": 0.5}},
            "models": {"density": {"noise": "density"}, "g": {"noise": "gaussian", "sigma": 0.5}},
            "grid": {}, "sim": {"base_seed": 1},
            "sweeps": {"a": {"role": "n_sweep", "function": "d2", "axis": "n", "m": [64],
                             "n": [1, 4], "l": [2], "protocols": ["layered"], **sweep}},
            "claims": [{"claim": "x", "metric": "y", "method": "layered", "relation": "better",
                        "threshold": 1, "direction": "lower"}]}


def test_parameter_refusals_name_the_full_key():
    validate_parameters(DistributedEstimationParams, _base(), NAME)
    validate_parameters(DistributedEstimationParams, _base(l=[0]), NAME)  # l = 0: uninformed
    with pytest.raises(ParameterError, match=r"distributed_estimation\.sweeps\.a\.l: got \[-1\]"):
        validate_parameters(DistributedEstimationParams, _base(l=[-1]), NAME)
    bad_s = _base()
    bad_s["functions"]["d2"]["s"] = 1.5
    with pytest.raises(ParameterError, match=r"distributed_estimation\.functions\.d2\.s"):
        validate_parameters(DistributedEstimationParams, bad_s, NAME)
    with pytest.raises(ParameterError, match=r"n·m = 2 is too small for any estimate"):
        validate_parameters(DistributedEstimationParams, _base(m=[2], n=[1, 4]), NAME)
    with pytest.raises(ParameterError, match=r"sweeps\.a\.protocols"):
        validate_parameters(DistributedEstimationParams, _base(protocols=["magic"]), NAME)
    with pytest.raises(ParameterError, match=r"must hold one value"):
        validate_parameters(DistributedEstimationParams, _base(m=[64, 128]), NAME)


def test_simulator_refuses_bad_points():
    check_point(Point(100, 4, 0), 8)  # no bits: the uninformed estimate
    with pytest.raises(ValueError, match="l=-1 < 0"):
        check_point(Point(100, 4, -1), 8)
    with pytest.raises(ValueError, match="too small for any estimate"):
        check_point(Point(1, 4, 2), 8)


def test_bad_data_gets_a_clear_error():
    table = pd.DataFrame({"function": "d2", "model": "density", "s": 0.5, "cell": [0, 1],
                          "f": [1.0, np.nan], "sigma": np.nan, "lo": 0.0, "hi": 1.0})
    with pytest.raises(ValueError, match="NaN"):
        nodes.models_from_table(table)
    with pytest.raises(ValueError, match="empty"):
        nodes.models_from_table(table.iloc[:0])
    sim = pd.DataFrame({"sweep": ["a"], "model": ["density"], "protocol": ["bf"], "m": [1],
                        "n": [1], "l": [1], "K": [2], "rep": [0], "ise": [np.nan],
                        "bits_max": [1.0], "applicable": [True]})
    with pytest.raises(ValueError, match="NaN/inf ISE"):
        nodes._check_sim(sim)
    with pytest.raises(ValueError, match="lacks columns"):
        nodes._check_sim(sim.drop(columns=["ise"]))
