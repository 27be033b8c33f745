"""End to end: `kedro run --pipeline=frugal --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pytest

from icml25.core.params import ParameterError
from icml25.core.sweep import seed_shards
from icml25.pipelines.frugal.nodes import METRICS
from icml25.pipelines.frugal.params import VARIANTS


def test_frugal_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("frugal", env="test")
    out = kedro_project / "data/08_reporting/frugal"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == set(VARIANTS)
    for variant in VARIANTS:
        values = metrics["metrics"][variant]
        assert set(METRICS) | {"test_ppl_over_adamw"} <= set(values)
        assert math.isfinite(values["test_ppl"]) and values["test_ppl"] > 1
        assert values["state_floats_formula_abs_error"] == 0, variant
    assert len(metrics["per_seed"]["adamw"]["test_ppl"]) == 2  # test seeds [0, 1]
    # every variant on the same seeds: the claims pair them by seed
    assert {len(metrics["per_seed"][v]["test_ppl"]) for v in VARIANTS} == {2}
    assert metrics["per_seed"]["adamw"]["test_ppl_over_adamw"] == [1.0, 1.0]
    assert metrics["metrics"]["signsgd"]["state_floats"] == 0
    assert metrics["corpus"]["source"] == "stdlib_docs" and len(metrics["corpus"]["sha256"]) == 64
    split = metrics["corpus"]["split"]
    assert split["n_duplicates_removed"] > 0  # the stdlib repeats docstrings
    assert split["n_unique"] == split["n_train"] + split["n_val"] + split["n_test"]
    assert split["n_docs"] == metrics["corpus"]["n_docs"] == split["n_unique"] + \
        split["n_duplicates_removed"]
    # learning rates chosen on the validation split: the grid's best setting is the one used
    sel = metrics["lr_selection"]
    assert sel["split"] == "val" and sel["seeds"] == [100]
    adamw = sel["variants"]["adamw"]
    assert adamw["selected_by"] == "validation" and len(adamw["grid"]) == 2
    best = min(adamw["grid"], key=lambda row: row["val_ppl"])
    assert metrics["lr"]["adamw"] == best["lr"] == adamw["chosen"]["lr"]
    block = sel["variants"]["frugal_block_025"]
    assert sel["variants"]["frugal_logits_free"]["chosen"] == block["chosen"]
    assert sel["variants"]["frugal_logits_free"]["selected_by"] == "lr_from frugal_block_025"
    assert sel["variants"]["galore_025"]["selected_by"] == "configured"
    assert metrics["lr"]["galore_025"] == 3.0e-2
    assert metrics["curves"]["frugal_block_025"]["0"]

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "frugal" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 10
    assert claims["confidence"] == 0.90 and claims["run"]["seeds"] == [0, 1]
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert claim["n_seeds"] == 2 and claim["ci_level"] == 0.90
        if claim["baseline"] in metrics["metrics"]:
            assert claim["baseline_value"] == pytest.approx(
                metrics["metrics"][claim["baseline"]][claim["metric"]])
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
    exact = next(c for c in claims["claims"] if c["metric"] == "state_floats_rho_abs_error")
    # 4 layers x 7 tensors, rho 0.25: the blocks align with one layer
    assert exact["verdict"] == "holds" and exact["test"] == "exact"
    for metric, baseline in [("state_floats", "galore_025"), ("state_floats", "adamw")]:
        memory = next(c for c in claims["claims"]
                      if c["metric"] == metric and c["baseline"] == baseline)
        assert memory["verdict"] == "holds" and memory["test"] == "exact"
    assert {p.name for p in (out / "figures").iterdir()} == {"test_ppl_curves.png",
                                                             "ppl_vs_state_memory.png"}
    assert (out / "results_table.csv").read_text().count("\n") == len(VARIANTS) + 1
    # one folder per seed shard: seed i of [0, 1] is trained by shard i % n
    n = seed_shards()
    models = kedro_project / "data/07_model_output/frugal/models/frugal_block_025"
    assert sorted(p.relative_to(models).as_posix() for p in models.rglob("*.safetensors")) == [
        f"shard_{i % n}/seed_{i}.safetensors" for i in (0, 1)]

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["frugal"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    tags = parent[0].data.tags
    assert tags["frugal.corpus.sha256"] == metrics["corpus"]["sha256"]
    assert tags["frugal.corpus.sha256_test"] == split["sha256_test"]
    assert tags["frugal.corpus.python_version"] == metrics["corpus"]["python_version"]
    assert parent[0].data.metrics["frugal.corpus.n_duplicates_removed"] == \
        split["n_duplicates_removed"]
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in VARIANTS:
        assert "test_ppl" in children[variant].data.metrics
        assert children[variant].data.params["kind"]
    assert children["frugal_block_025"].data.tags["icml25.role"] == "method"
    assert children["galore_025"].data.tags["icml25.role"] == "baseline"
    curve = mlflow.MlflowClient().get_metric_history(
        children["frugal_block_025"].info.run_id, "curve/test_ppl/seed_1")
    assert [m.step for m in curve] == [6, 12]  # conf/test: eval every 6 of 12 steps


@pytest.mark.parametrize("override, message", [
    ({"optimizers": {"frugal_block_025": {"density": 1.5}}},
     r"frugal\.optimizers\.frugal_block_025\.density: got 1\.5"),
    ({"optimizers": {"galore_025": {"update_gap": 0}}},
     r"frugal\.optimizers\.galore_025\.update_gap: got 0"),
    ({"optimizers": {"frugal_svd_025": {"proj_logits": True}}},
     r"frugal\.optimizers\.frugal_svd_025: .*need projector: block"),
    ({"model": {"d": 15}}, r"frugal\.model: .*divisible"),
])
def test_bad_parameters_stop_before_any_work(kedro_project, run_pipeline, override, message):
    with pytest.raises(ParameterError, match=message):
        run_pipeline("frugal", env="test", params={"frugal": override})
    assert not any((kedro_project / "data/01_raw").iterdir())
