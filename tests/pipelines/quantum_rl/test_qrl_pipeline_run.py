"""End to end: `kedro run --pipeline=quantum_rl --env=test` through a real KedroSession, and the
refusals of bad parameters before any work."""

from __future__ import annotations

import json
import math

import mlflow
import pandas as pd
import pytest

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.quantum_rl.params import QuantumRLParams


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


@pytest.mark.slow
def test_quantum_rl_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("quantum_rl", env="test")
    out = kedro_project / "data/08_reporting/quantum_rl"
    metrics = json.loads((out / "metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert {"qucrl", "ucrl2", "qucrl_classical", "oracle", "random"} <= variants
    names = {k for k in metrics["per_seed"]["qucrl"]}
    for variant in variants:
        assert set(metrics["per_seed"][variant]) == names  # same metric names everywhere
    for env in ("riverswim_6", "garnet_10"):
        for variant in ("qucrl", "ucrl2"):
            for stem in ("regret_T", "slope", "epochs", "coverage", "evi_ms", "steps_per_s"):
                assert _finite(metrics["metrics"][variant][f"{stem}_{env}"]), (variant, stem)
            assert len(metrics["per_seed"][variant][f"regret_T_{env}"]) == 2  # seeds [0, 1]
    # the random bracket has linear regret, the oracle's is small
    assert metrics["metrics"]["random"]["regret_T_riverswim_6"] > 0.1 * 0.4286 * 3000
    assert abs(metrics["metrics"]["oracle"]["regret_T_riverswim_6"]) < 0.05 * 3000
    assert metrics["optimal"]["riverswim_6"]["rho_star"] == pytest.approx(0.42862, abs=1e-5)
    assert metrics["estimator"]["estimator:quantum"]["error_slope"] < -0.6
    # one estimator table per seed: the slope claims pair over the two seeds
    assert len(metrics["estimator"]["estimator:quantum"]["error_slope_per_seed"]) == 2

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "quantum_rl" and claims["run"]["env"] == "test"
    assert claims["run"]["seeds"] == [0, 1]
    assert claims["n_claims"] == len(claims["claims"]) == 9
    assert claims["confidence"] == 0.90
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] is (claim["verdict"] == "holds")
        if claim["baseline"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    assert {p.name for p in (out / "figures").iterdir()} == {
        "regret_riverswim_6.png", "regret_garnet_10.png", "estimator_error.png",
        "constants_riverswim_6.png", "regret_ablations_riverswim_6.png",
        "regret_ablations_garnet_10.png"}

    model_out = kedro_project / "data/07_model_output/quantum_rl"
    curves = pd.read_parquet(model_out / "regret_curves.parquet")
    assert set(curves.columns) == {"variant", "env", "seed", "t", "regret", "realised_regret"}
    assert curves.t.max() == 3000
    epochs = pd.read_parquet(model_out / "epoch_logs.parquet")
    assert (epochs.covered_pairs <= epochs.visited_pairs).all()
    runs = pd.read_parquet(model_out / "run_summary.parquet")
    assert (runs.wall_seconds > 0).all()
    # one set of tables per seed shard: seed i of [0, 1] is run (by every agent) in shard i % n,
    # and the merged run table holds each shard's runs once
    n = seed_shards()
    shard_runs = [pd.read_parquet(model_out / f"shards/run_summary_shard_{k}.parquet")
                  for k in range(n)]
    for k, shard in enumerate(shard_runs):
        assert set(shard["seed"]) <= {i for i in (0, 1) if i % n == k}
    assert sum(len(shard) for shard in shard_runs) == len(runs)

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["quantum_rl"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert variants <= set(children)
    assert children["qucrl"].data.tags["icml25.role"] == "method"
    assert children["ucrl2"].data.tags["icml25.role"] == "baseline"
    assert "regret_T_riverswim_6" in children["ucrl2"].data.metrics
    # rho*, the circuit check and the per-MDP comparison are on the pipeline run, equal to
    # metrics.json's values
    report = json.loads((kedro_project / "data/08_reporting/quantum_rl/metrics.json").read_text())
    logged = parent[0].data.metrics
    for env in ("riverswim_6", "garnet_10"):
        assert logged[f"rho_star.{env}"] == pytest.approx(report["optimal"][env]["rho_star"])
        assert logged[f"per_mdp.{env}.regret_T_minus.ucrl2"] == pytest.approx(
            report["per_mdp"][env]["regret_T_minus.ucrl2"])
    if not report["circuit"]["skipped"]:
        assert logged["circuit.max_tv"] == pytest.approx(report["circuit"]["max_tv"])
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(
        children["qucrl"].info.run_id)}
    assert any(a.startswith("final_estimates_") for a in artifacts)


def test_bad_parameters_stop_the_run_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError) as err:
        run_pipeline("quantum_rl", env="test", params={"quantum_rl": {"delta": 1.5, "T": 0}})
    assert "quantum_rl.delta: got 1.5" in str(err.value)
    assert "quantum_rl.T: got 0" in str(err.value)
    assert not any((kedro_project / "data/07_model_output").iterdir())


@pytest.mark.parametrize(("override", "message"), [
    ({"delta": 1.5}, r"quantum_rl\.delta: got 1\.5"),
    ({"delta": 0.0}, r"quantum_rl\.delta: got 0\.0"),
    ({"T": 0}, r"quantum_rl\.T: got 0"),
    ({"estimator": {"K": 4}}, r"quantum_rl\.estimator\.K: got 4"),
    ({"agents": {"q": {"kind": "optimistic", "role": "method", "c": -1.0}}},
     r"quantum_rl\.agents\.q\.c: got -1\.0"),
    ({"seeds": [0, 0]}, r"quantum_rl\.seeds"),
])
def test_bad_parameters_are_refused_with_their_full_key(override, message):
    params = {**_base_params(e={"kind": "riverswim", "n_states": 6}), **override}
    with pytest.raises(ParameterError, match=message):
        validate_parameters(QuantumRLParams, params, "quantum_rl")


def _base_params(**envs) -> dict:
    return {
        "seeds": [0], "T": 100, "delta": 0.05, "claim_env": "e",
        "envs": envs, "estimator": {"K": 7},
        "agents": {"q": {"kind": "optimistic", "role": "method"}},
        "estimator_scaling": {"p_values": [0.5], "log2_n": [6, 8], "reps": 2, "seed": 0},
        "circuit": {"enabled": False},
        "claims": [{"claim": "x", "metric": "m", "method": "q", "threshold": 1.0,
                    "relation": "better", "direction": "lower"}],
    }


def test_explicit_transition_matrix_and_rewards_are_validated():
    good = {"kind": "explicit", "P": [[[1.0, 0.0]], [[0.5, 0.5]]], "r": [[0.2], [1.0]]}
    validate_parameters(QuantumRLParams, _base_params(e=good), "quantum_rl")
    rows = {**good, "P": [[[0.7, 0.2]], [[0.5, 0.5]]]}
    with pytest.raises(ParameterError, match=r"quantum_rl\.envs\.e\.P: .*row\[0, 0\] sums to 0\.9"):
        validate_parameters(QuantumRLParams, _base_params(e=rows), "quantum_rl")
    negative = {**good, "r": [[-0.2], [1.0]]}
    with pytest.raises(ParameterError, match=r"quantum_rl\.envs\.e\.r: .*no negative reward"):
        validate_parameters(QuantumRLParams, _base_params(e=negative), "quantum_rl")
    nan = {**good, "P": [[[float("nan"), 1.0]], [[0.5, 0.5]]]}
    with pytest.raises(ParameterError, match=r"quantum_rl\.envs\.e\.P: .*nan"):
        validate_parameters(QuantumRLParams, _base_params(e=nan), "quantum_rl")
    shape = {**good, "r": [[0.2, 0.1], [1.0, 0.0]]}
    with pytest.raises(ParameterError, match=r"quantum_rl\.envs\.e: .*r has shape"):
        validate_parameters(QuantumRLParams, _base_params(e=shape), "quantum_rl")


def test_references_between_parameters_are_checked():
    params = _base_params(e={"kind": "riverswim", "n_states": 6})
    params["agents"]["q"]["envs"] = ["nowhere"]
    with pytest.raises(ParameterError, match="unknown environments"):
        validate_parameters(QuantumRLParams, params, "quantum_rl")
    params = _base_params(e={"kind": "riverswim", "n_states": 6})
    params["claim_env"] = "other"
    with pytest.raises(ParameterError, match="claim_env"):
        validate_parameters(QuantumRLParams, params, "quantum_rl")
    params = _base_params(e={"kind": "garnet", "n_states": 4, "n_actions": 2, "branching": 5})
    with pytest.raises(ParameterError, match="branching 5 > n_states 4"):
        validate_parameters(QuantumRLParams, params, "quantum_rl")


@pytest.mark.slow
def test_paper_code_path_runs_on_cpu_at_tiny_size(kedro_project, run_pipeline):
    """conf/paper (RiverSwim-12, the long-horizon agents) with tiny horizons and one seed."""
    run_pipeline("quantum_rl", env="paper", params={"quantum_rl": {
        "T": 400, "seeds": [0], "progress": False,
        "agents": {"qucrl_1e7": {"T": 800}, "ucrl2_1e7": {"T": 800}},
        "estimator_scaling": {"reps": 3, "log2_n": [6, 8]},
        "circuit": {"enabled": False},
    }})
    out = kedro_project / "data/paper/08_reporting/quantum_rl"  # conf/paper writes under data/paper
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["horizon"]["qucrl_1e7"] == 800 and metrics["horizon"]["qucrl"] == 400
    assert _finite(metrics["metrics"]["qucrl"]["regret_T_riverswim_12"])
    assert metrics["circuit"]["skipped"] is True
    claims = json.loads((out / "claims.json").read_text())
    circuit_claim = next(c for c in claims["claims"] if c["method"] == "circuit:aer")
    assert circuit_claim["verdict"] == "inconclusive" and circuit_claim["method_value"] is None
