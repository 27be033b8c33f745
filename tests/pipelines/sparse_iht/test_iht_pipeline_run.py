"""End to end: `kedro run --pipeline=sparse_iht --env=test` through a real KedroSession, and the
refusals of bad parameters and bad data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.sparse_iht import nodes
from icml25.pipelines.sparse_iht.params import SparseIHTParams

ROOT = Path(__file__).resolve().parents[3]


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _base_params() -> dict:
    return yaml.safe_load((ROOT / "conf/base/parameters_sparse_iht.yml").read_text())["sparse_iht"]


def test_sparse_iht_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("sparse_iht", env="test")
    out = kedro_project / "data/08_reporting/sparse_iht"

    metrics = json.loads((out / "metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert {"iht_2sp", "iht_then_project", "exact_iht", "iht_2sp_warm", "lasso", "lasso_refit",
            "omp_project", "dense_reference", "exhaustive_best", "hsg_ht_2sp", "hzo_ht_2sp",
            "szoht_q10", "szoht_q40"} == variants
    names = set(metrics["metrics"]["iht_2sp"])
    for variant in variants:
        assert set(metrics["metrics"][variant]) <= names | {f"{n}_std" for n in names}
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == {
            k for k in names if not k.endswith("_std")}
    for s in ("nonneg", "l2_binding"):
        for r in ("k1", "k1.5", "k2", "k3"):
            assert _finite(metrics["metrics"]["iht_2sp"][f"{s}.{r}.gap"])
            assert metrics["metrics"]["iht_2sp"][f"{s}.{r}.violation"] == 0
    assert len(metrics["per_seed"]["iht_2sp"]["nonneg.k2.gap"]) == 2  # test seeds [0, 1]
    assert metrics["metrics"]["iht_2sp"]["max_violation"] <= 1e-12
    assert _finite(metrics["metrics"]["hsg_ht_2sp"]["stochastic.rel_vs_equal_ifo"])
    assert _finite(metrics["metrics"]["hzo_ht_2sp"]["zo.excess_final"])
    assert metrics["k_grid"] == {"1": 3, "1.5": 5, "2": 6, "3": 9}

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "sparse_iht" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 16
    assert claims["run"]["seeds"] == [0, 1]
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["n_pairs"] == (1 if claim["test"] == "exact"
                                    and claim["metric"] == "max_violation_all_seeds" else 2)
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        if claim["method"] in metrics["metrics"] and claim["baseline"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    feasible = next(c for c in claims["claims"] if c["metric"] == "max_violation_all_seeds")
    assert feasible["test"] == "exact" and feasible["verdict"] == "holds"
    assert feasible["method_value"] <= 1e-12
    ifo = next(c for c in claims["claims"] if c["metric"] == "stochastic.ifo_ratio")
    assert ifo["test"] == "exact" and ifo["verdict"] in ("holds", "fails")

    figures = {p.name for p in (out / "figures").iterdir()}
    assert figures == {"tradeoff.png", "curves.png", "zeroth_order.png", "support_recall.png",
                       "real_data.png", "index_tracking.png"}
    # index tracking: generated markets per seed, the real index as one deterministic value
    for variant in ("iht_2sp", "iht_2sp_warm", "lasso_refit", "omp_project", "exhaustive_best"):
        for dataset in ("synthetic", "nasdaq"):
            for k in (2, 3):
                for m in ("objective", "gap_best", "te_in", "te_out"):
                    assert _finite(metrics["metrics"][variant][f"index.{dataset}.k{k}.{m}"])
                assert metrics["metrics"][variant][f"index.{dataset}.k{k}.gap_best"] >= -1e-9
    assert len(metrics["per_seed"]["iht_2sp"]["index.synthetic.k2.gap_best"]) == 2
    assert len(metrics["per_seed"]["iht_2sp"]["index.nasdaq.k2.gap_best"]) == 1
    assert metrics["metrics"]["exhaustive_best"]["index.nasdaq.k3.gap_best"] == 0
    tracking = pd.concat([pd.read_parquet(
        kedro_project / f"data/07_model_output/sparse_iht/{name}.parquet")
        for name in ("index_results", "index_real_results")])
    sparse = tracking[tracking["method"] != "dense_reference"]
    assert (sparse["violation"] <= 1e-12).all() and (sparse["nnz"] <= sparse["k"]).all()
    assert set(tracking["dataset"]) == {"synthetic", "nasdaq"}
    for dataset, k in (("breast_cancer", 3), ("breast_cancer", 5), ("diabetes", 5)):
        assert _finite(metrics["metrics"]["iht_2sp"][f"{dataset}.k{k}.test_objective"])
    assert 0.5 < metrics["metrics"]["iht_2sp"]["breast_cancer.k5.test_accuracy"] <= 1
    real = pd.read_parquet(kedro_project / "data/07_model_output/sparse_iht/real_results.parquet")
    assert (real["violation"] <= 1e-9).all() and set(real["seed"]) == {0, 1}
    model_out = kedro_project / "data/07_model_output/sparse_iht"
    fo = pd.read_parquet(model_out / "fo_results.parquet")
    assert set(fo["seed"]) == {0, 1} and fo["objective"].notna().all()
    assert (fo[fo["method"].isin(["iht_2sp", "iht_2sp_warm"])]["max_violation"] <= 1e-12).all()
    assert (kedro_project / "data/01_raw/sparse_iht/synthetic_problems.parquet").exists()
    # one table per experiment and seed shard: seed i of [0, 1] is run by shard i % n
    n = seed_shards()
    for k in range(n):
        for experiment in ("first_order", "exhaustive", "stochastic", "zeroth_order",
                           "real_data", "index_tracking"):
            shard = pd.read_parquet(model_out / f"shards/{experiment}_results_shard_{k}.parquet")
            assert (set(shard["seed"]) if len(shard) else set()) == {
                i for i in (0, 1) if i % n == k}, (experiment, k)

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["sparse_iht"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and parent[0].info.run_name == "sparse_iht"
    assert {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert variants <= set(children)
    assert children["iht_2sp"].data.tags["icml25.role"] == "method"
    assert children["iht_then_project"].data.tags["icml25.role"] == "baseline"
    assert "nonneg.k2.gap" in children["iht_2sp"].data.metrics
    assert "nonneg.k2.gap" in children["lasso_refit"].data.metrics
    assert parent[0].data.metrics["claims_total"] == claims["n_claims"]
    assert children["iht_2sp"].data.params["projection"].startswith("2SP")
    assert "fixed q = 40" in children["szoht_q40"].data.params["gradient"]


@pytest.mark.parametrize("override,message", [
    ({"synthetic": {"k_ratios": [1.0, 30.0]}},
     r"sparse_iht\.synthetic: .*k = 90 .* is larger than the dimension d = 60"),
    ({"synthetic": {"settings": [{"name": "nonneg", "kind": "nonneg", "scale": -1.0}]}},
     r"sparse_iht\.synthetic\.settings\.0\.scale: got -1\.0; .*infeasible"),
])
def test_bad_parameters_stop_before_any_work(kedro_project, run_pipeline, override, message):
    with pytest.raises(ParameterError, match=message):
        run_pipeline("sparse_iht", env="test", params={"sparse_iht": override})
    assert not any((kedro_project / "data/01_raw").iterdir())


@pytest.mark.parametrize("path,value,message", [
    (("synthetic", "settings", 2, "kind"), "simplex", r"synthetic\.settings\.2\.kind: got 'simplex'"),
    (("synthetic", "settings", 0, "signed"), True, "signed truth is infeasible"),
    (("synthetic", "settings", 1, "name"), "nonneg", "setting names must be distinct"),
    (("small", "settings", 0, "kind"), "box", "exhaustive search is implemented for"),
    (("zeroth_order", "mu"), 1e-9, "cancels"),
    # the zeroth-order estimator divides by q·μ: degenerate values are parameter errors
    (("zeroth_order", "mu"), 0.0, r"sparse_iht\.zeroth_order\.mu: got 0\.0; expected .*greater than 0"),
    (("zeroth_order", "q0"), 0, r"sparse_iht\.zeroth_order\.q0: got 0; expected .*greater than 0"),
    (("zeroth_order", "szoht_q"), [0, 10], r"sparse_iht\.zeroth_order\.szoht_q: got \[0, 10\]"),
    (("zeroth_order", "q_max"), 0, r"sparse_iht\.zeroth_order\.q_max: got 0"),
    (("stochastic", "setting"), "missing", "is not one of synthetic.settings"),
    (("seeds",), [1, 1], "distinct"),
    (("small", "d"), 80, r"small\.d"),
    (("zeroth_order", "k"), 500, r"zeroth_order: .*k = 500 is larger than the dimension"),
    (("stochastic", "tau"), 1.0, r"sparse_iht\.stochastic\.tau: got 1\.0"),
    (("synthetic", "k_bar"), 600, r"k_bar = 600 is larger than the dimension d = 500"),
    (("real_data", "diabetes", "ks"), [3, 12], r"diabetes\.ks: .*k = 12 is larger than the dim"),
])
def test_parameter_validation_names_the_key(path, value, message, assert_refused):
    assert_refused(SparseIHTParams, _base_params(), "sparse_iht", path, value, message)


def test_base_and_paper_parameters_validate():
    validate_parameters(SparseIHTParams, _base_params(), "sparse_iht")
    paper = yaml.safe_load((ROOT / "conf/paper/parameters_sparse_iht.yml").read_text())
    merged = _base_params()
    for key, value in paper["sparse_iht"].items():
        merged[key] = {**merged[key], **value} if isinstance(value, dict) else value
    p = validate_parameters(SparseIHTParams, merged, "sparse_iht")
    assert p.synthetic.d == 10_000 and len(p.seeds) == 20


def test_empty_or_missing_tables_get_a_clear_error():
    params = _base_params()
    with pytest.raises(ValueError, match="synthetic_problems is empty"):
        nodes.run_first_order(pd.DataFrame(), params)
    problems = nodes.make_synthetic(params)
    stale = problems.copy()
    stale.at[0, "support"] = [0, 1, 2]
    with pytest.raises(ValueError, match="stale or corrupt"):
        nodes.run_first_order(stale, params)
    with pytest.raises(ValueError, match="lacks column"):
        nodes.run_first_order(problems.drop(columns=["budget"]), params)
    with pytest.raises(ValueError, match="fo_results is empty"):
        nodes.judge_claims(pd.DataFrame(), pd.DataFrame({"a": [1]}), pd.DataFrame({"a": [1]}),
                           pd.DataFrame({"a": [1]}), pd.DataFrame({"a": [1]}),
                           pd.DataFrame({"a": [1]}), pd.DataFrame({"a": [1]}), params,
                           {"env": "test"})
