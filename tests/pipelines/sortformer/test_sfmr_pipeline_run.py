"""End to end: `kedro run --pipeline=sortformer --env=test` through a real KedroSession, and
parameter refusals before any work."""

from __future__ import annotations

import json
import math

import mlflow
import pytest

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.sortformer.params import SortformerParams

pytestmark = pytest.mark.usefixtures("one_thread")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_sortformer_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("sortformer", env="test")
    out = kedro_project / "data/08_reporting/sortformer"
    metrics = json.loads((out / "metrics.json").read_text())
    diar = {"pil", "sort", "hybrid", "clustering", "clustering_oracle_k"}
    asr = {"asr_none", "asr_sortformer", "asr_oracle"}
    assert diar | asr == set(metrics["metrics"])
    names = {k for k in metrics["metrics"]["hybrid"] if not k.endswith("_std")}
    for variant in diar:
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    for name in ("der_c025_test", "der_c0_test", "f1_pil_test", "f1_ats_test", "der_c025_inpool"):
        assert _finite(metrics["metrics"]["hybrid"][name]), name
    assert len(metrics["per_seed"]["hybrid"]["der_c025_test"]) == 2  # test seeds [0, 1]
    assert _finite(metrics["metrics"]["asr_sortformer"]["cpwer_all"])
    stats = metrics["session_stats"]
    assert set(stats) >= {"train", "val", "test", "test_inpool"}

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "sortformer" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 10
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]), claim["claim"]
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
        assert claim["n_pairs"] == 2  # paired over the test seeds [0, 1]
        if claim["baseline"] == "clustering":  # deterministic: its one value on both seeds
            assert len(metrics["per_seed"]["clustering"][claim["metric"]]) == 1
            value = metrics["metrics"]["clustering"][claim["metric"]]
            if _finite(value):
                assert claim["baseline_value"] == pytest.approx(value)

    assert {p.name for p in (out / "figures").iterdir()} == {
        "activity.png", "der_by_speakers.png", "f1_ats_vs_pil.png"}
    raw = kedro_project / "data/01_raw/sortformer"
    assert (raw / "sessions.rttm").read_text().startswith("SPEAKER ")
    models = kedro_project / "data/06_models/sortformer"
    # one folder per seed shard: seed i of [0, 1] is trained by shard i % n
    n = seed_shards()
    assert sorted(p.relative_to(models / "hybrid").as_posix()
                  for p in (models / "hybrid").rglob("*.safetensors")) == [
        f"shard_{i % n}/seed_{i}.safetensors" for i in (0, 1)]

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["sortformer"], output_format="list")
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in diar:
        assert "der_c025_test" in children[variant].data.metrics, variant
    for variant in asr:
        assert "cpwer_all" in children[variant].data.metrics, variant
    assert children["hybrid"].data.tags["icml25.role"] == "method"
    assert children["pil"].data.tags["icml25.role"] == "baseline"
    assert "hybrid/training/seed 0" in children


def _tree(kedro_project):
    from kedro.config import OmegaConfigLoader

    loader = OmegaConfigLoader(str(kedro_project / "conf"), base_env="base", default_run_env="test",
                               merge_strategy={"parameters": "soft"})
    return loader["parameters"]["sortformer"]


@pytest.mark.parametrize(("path", "value", "message"), [
    (("model", "d_model"), 31, "sortformer.model"),
    (("sim", "count_weights"), [0.2, 0.2, 0.2, 0.2, 0.2], "sortformer.sim.count_weights"),
    (("speakers", "test_variants"), ["m1"], "sortformer.speakers"),
    (("optim", "lr"), -1.0, "sortformer.optim.lr"),
    (("msasr", "model", "inject_at"), "decoder", "sortformer.msasr.model.inject_at"),
    (("seeds",), [0, 0], "sortformer.seeds"),
])
def test_bad_parameters_are_refused_with_their_full_key(kedro_project, path, value, message):
    tree = _tree(kedro_project)
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ParameterError, match=message.replace(".", r"\.")):
        validate_parameters(SortformerParams, tree, "sortformer")


def test_bad_parameters_stop_the_run_before_any_node(kedro_project, run_pipeline):
    with pytest.raises(Exception, match=r"sortformer\.optim\.epochs"):
        run_pipeline("sortformer", env="test", params={"sortformer": {"optim": {"epochs": 0}}})
    assert not (kedro_project / "data/01_raw/sortformer").exists()
