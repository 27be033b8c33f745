"""End to end: `kedro run --pipeline=softshape --env=test` through a real KedroSession."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.softshape.params import SoftshapeParams


def _method_results(project: Path, data_root: str = "data") -> pd.DataFrame:
    """SoftShape's result rows of every seed shard (shard k of n holds seeds[k::n])."""
    n = seed_shards()
    out = project / data_root / "07_model_output/softshape"
    return pd.concat([pd.read_csv(out / f"softshape_shard_{k}_results.csv") for k in range(n)],
                     ignore_index=True)


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_softshape_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("softshape", env="test")
    out = kedro_project / "data/08_reporting/softshape"

    metrics = json.loads((out / "metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert variants == {"softshape", "hard", "mini_rocket", "nn_dtw", "fcn"}
    names = {k for k in metrics["metrics"]["softshape"] if not k.endswith("_std")}
    for variant in variants:
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    soft = metrics["metrics"]["softshape"]
    for name in ("acc/GunPoint", "acc/ItalyPowerDemand", "acc/CBF", "mean_acc", "avg_rank",
                 "train_seconds", "infer_seconds", "cbf_score_ratio", "cbf_score_ratio_layer1",
                 "expert_max_share", "moe_balance_loss", "moe_balance_loss_train"):
        assert _finite(soft[name]), name
    assert 0.0 <= soft["mean_acc"] <= 1.0
    assert len(metrics["per_seed"]["softshape"]["mean_acc"]) == 2  # test seeds [0, 1]
    assert len(metrics["per_seed"]["nn_dtw"]["mean_acc"]) == 1  # deterministic: run once
    # the aeon baselines see the original UCR split: 1-NN DTW (full window) is deterministic
    # and must reproduce the published archive values exactly
    assert metrics["metrics"]["nn_dtw"]["acc/GunPoint"] == pytest.approx(0.9067, abs=1e-3)
    assert metrics["metrics"]["nn_dtw"]["acc/ItalyPowerDemand"] == pytest.approx(0.9504, abs=1e-3)
    # ablations ran on CBF only: their other data sets are not measured
    assert metrics["metrics"]["hard"]["acc/GunPoint"] is None
    assert _finite(metrics["metrics"]["hard"]["mean_acc_ablation_sets"])
    ranks = [metrics["metrics"][v]["avg_rank"] for v in ("softshape", "mini_rocket", "nn_dtw",
                                                          "fcn")]
    assert sum(ranks) == pytest.approx(1 + 2 + 3 + 4)  # ranks over 4 ranked variants
    load = metrics["expert_load"]
    assert set(load) == {"ItalyPowerDemand", "GunPoint", "CBF"}
    assert all(len(run) == 2 for run in load["GunPoint"]["per_run"])  # K = 2 experts

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "softshape" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 6
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        # paired over data sets: the mean over sets of their seed means is mean_acc
        metric = "mean_acc" if claim["unit"] == "dataset" else claim["metric"]
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][metric])
        if claim["baseline"] in metrics["metrics"]:
            assert claim["baseline_value"] == pytest.approx(
                metrics["metrics"][claim["baseline"]][metric])
        if claim["unit"] == "dataset":
            assert claim["n_pairs"] == 3 and claim["n_seeds"] == 2  # 2 UCR sets + CBF
    dtw = metrics["per_unit"]["nn_dtw"]["acc_by_dataset"]
    assert all(len(v) == 2 and v[0] == v[1] for v in dtw.values())  # fit once, both seeds

    assert {p.name for p in (out / "figures").iterdir()} == {
        "accuracy.png", "expert_load.png", "scores_CBF.png"}
    table = pd.read_csv(out / "accuracy_table.csv")
    assert set(table["variant"]) == variants
    results = _method_results(kedro_project)
    assert len(results) == 3 * 2  # data sets x seeds
    n = seed_shards()  # seed i of [0, 1] is trained by shard i % n
    models = kedro_project / "data/06_models/softshape/softshape"
    for i in (0, 1):
        assert len(list(models.glob(f"shard_{i % n}/*_seed{i}.safetensors"))) == 3
    assert len(list(models.rglob("*.safetensors"))) == 6

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["softshape"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and parent[0].info.run_name == "softshape"
    assert {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in variants:
        assert "acc/CBF" in children[variant].data.metrics, variant
    assert children["softshape"].data.tags["icml25.role"] == "method"
    assert children["hard"].data.tags["icml25.role"] == "ablation"
    assert children["mini_rocket"].data.tags["icml25.role"] == "baseline"
    assert "expert_max_share/GunPoint" in children["softshape/expert load"].data.metrics
    # the MoE balance loss: one curve per data set and seed, 0 in the warm-up epoch
    balance = children["softshape/balance loss"]
    assert "balance_loss_test/GunPoint/fold0/seed0" in balance.data.metrics
    curve = mlflow.tracking.MlflowClient().get_metric_history(
        balance.info.run_id, "balance_loss/GunPoint/fold0/seed0")
    by_step = {m.step: m.value for m in curve}
    assert by_step[1] == 0.0 and all(v > 0 for s, v in by_step.items() if s > 1)
    assert len(by_step) == results[(results["dataset"] == "GunPoint")
                                   & (results["seed"] == 0)]["epochs_run"].iloc[0]


def test_bad_parameter_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"softshape\.train\.epochs: got -3"):
        run_pipeline("softshape", env="test", params={"softshape": {"train": {"epochs": -3}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


def _base_params() -> dict:
    from kedro.config import OmegaConfigLoader

    from icml25.settings import CONFIG_LOADER_ARGS

    conf = Path(__file__).resolve().parents[3] / "conf"
    loader = OmegaConfigLoader(str(conf), **{**CONFIG_LOADER_ARGS, "default_run_env": "base"})
    return copy.deepcopy(dict(loader["parameters"]["softshape"]))


@pytest.mark.parametrize(("change", "message"), [
    ({"datasets": ["GunPoint", "Coffee"]}, r"softshape\.datasets: .*not shipped"),
    ({"train": {"warm_up": 80}}, r"softshape\.train: .*warm_up 80 >= epochs 80"),
    ({"ablations": {"datasets": ["OSULeaf"]}}, r"(?i)softshape: .*ablations\.datasets \['OSULeaf'\]"),
    ({"baselines": {"models": ["fcn"]}}, r"must include mini_rocket and nn_dtw"),
    ({"model": {"emb_dim": 130}}, r"softshape\.model: .*divisible by 4"),
    ({"model": {"shape_sizes": {"GunPoint": 1.5}}}, r"(?i)softshape\.model\.shape_sizes: .*gunpoint: ratio 1\.5"),
    ({"protocol": {"folds_to_run": [5]}}, r"folds_to_run \[5\] outside"),
])
def test_bad_parameters_are_refused_with_their_full_key(change, message):
    params = _base_params()
    for key, value in change.items():
        params[key] = {**params[key], **value} if isinstance(value, dict) else value
    with pytest.raises(ParameterError, match=message):
        validate_parameters(SoftshapeParams, params, "softshape")


def test_base_parameters_validate():
    validate_parameters(SoftshapeParams, _base_params(), "softshape")


def test_shape_sizes_follow_the_authors_table():
    """The authors' per-data-set table (a fixed size, or a ratio of the length for OSULeaf);
    CBF's entry there is 32."""
    sizes = _base_params()["model"]["shape_sizes"]
    assert sizes == {"ArrowHead": 16, "GunPoint": 32, "ItalyPowerDemand": 4, "OSULeaf": 0.1,
                     "ACSF1": 64, "PLAID": 4, "PickupGestureWiimoteZ": 4, "CBF": 32}


def test_paper_code_path_runs_on_cpu_at_tiny_size(kedro_project, run_pipeline):
    """conf/paper's choices (5-fold merged protocol, paper-era batches, every ablation, Rocket,
    a variable-length set) on tiny sizes and the CPU, with a multichannel set shipped inside
    aeon (BasicMotions, 6 channels) beside the univariate one."""
    run_pipeline("softshape", env="paper", params={"softshape": {
        "seeds": [0], "device": "cpu", "num_threads": 1, "progress": False,
        "datasets": ["PickupGestureWiimoteZ", "BasicMotions"],
        "cbf": {"n": 30, "length": 64},
        "protocol": {"folds_to_run": [0, 1]},
        "train": {"epochs": 2, "warm_up": 1, "patience": 2, "batch_mode": "paper"},
        "ablations": {"datasets": ["CBF"]},
        "baselines": {"models": ["mini_rocket", "rocket", "nn_dtw"], "n_jobs": 1},
        "plot_datasets": ["CBF"],
        "claims": [{"claim": "SoftShape's mean accuracy is higher than 1-NN DTW's",
                    "metric": "acc_by_dataset", "method": "softshape", "baseline": "nn_dtw",
                    "relation": "better", "direction": "higher", "unit": "dataset"}],
    }})
    out = kedro_project / "data/paper/08_reporting/softshape"  # conf/paper writes under data/paper
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"softshape", "hard", "no_moe", "no_inception",
                                       "no_sparsify", "mean_pool", "mini_rocket", "rocket",
                                       "nn_dtw"}
    assert _finite(metrics["metrics"]["softshape"]["acc/PickupGestureWiimoteZ"])
    for variant in ("softshape", "mini_rocket", "rocket", "nn_dtw"):
        assert _finite(metrics["metrics"][variant]["acc/BasicMotions"]), variant
    results = _method_results(kedro_project, "data/paper")
    assert sorted(set(results["fold"])) == [0, 1]  # two folds of the merged 5-fold protocol
    # fold sizes of the merged protocol: 60/20/20 of the 100 PickupGestureWiimoteZ series
    wii = results[results["dataset"] == "PickupGestureWiimoteZ"].iloc[0]
    assert (wii["n_train"], wii["n_val"], wii["n_test"]) == (60, 20, 20)
    motions = results[results["dataset"] == "BasicMotions"].iloc[0]  # 80 series, m 16, q 4
    assert (motions["n_train"], motions["n_test"], motions["n_shapes"]) == (48, 16, 22)
    claims = json.loads((out / "claims.json").read_text())
    assert claims["run"]["env"] == "paper" and claims["n_claims"] == 1
