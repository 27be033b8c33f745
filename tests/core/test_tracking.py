import math
import warnings

import mlflow
import pytest

from icml25.core.tracking import (
    COMMIT_TAG,
    ENV_TAG,
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    NEWEST_ALIAS,
    check_same_metric_names,
    flatten_params,
    log_claim_counts,
    log_variants,
    register_logged_model,
    seed_mean,
    seed_means,
    tag_experiment_kind,
    variant_run,
    variant_run_ids,
)


def test_flatten_params():
    assert flatten_params({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": "x"}) == {
        "a.b": "1", "a.c.d": "[1, 2]", "e": "x"}


def test_metric_names_must_match():
    assert check_same_metric_names({"a": {"x": 1, "y": 2}, "b": {"y": 1, "x": 3}}) == ["x", "y"]
    with pytest.raises(ValueError, match="identical metric names"):
        check_same_metric_names({"a": {"x": 1}, "b": {"y": 1}})


def test_variants_are_child_runs_with_identical_metric_names(mlflow_tmp):
    mlflow.set_experiment("demo")
    with mlflow.start_run(run_name="parent") as parent:
        ids = log_variants(
            "demo",
            {"method": {"wql": 0.5, "mase": 0.7}, "baseline": {"wql": 0.6, "mase": float("nan")}},
            roles={"method": "method", "baseline": "baseline"},
            params_by_variant={"method": {"tokenizer": {"vocab": 1024}}},
        )
    runs = mlflow.search_runs(experiment_names=["demo"], output_format="list")
    children = {r.info.run_name: r for r in runs if r.info.run_id != parent.info.run_id}
    assert set(children) == {"method", "baseline"}
    for name, run in children.items():
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["icml25.variant"] == name
        assert run.info.run_id == ids[name]
    assert children["method"].data.metrics == {"wql": 0.5, "mase": 0.7}
    assert children["baseline"].data.metrics == {"wql": 0.6}  # NaN is not logged
    assert children["method"].data.params == {"tokenizer.vocab": "1024"}
    assert children["baseline"].data.tags["icml25.role"] == "baseline"


def test_missing_role_is_an_error(mlflow_tmp):
    with pytest.raises(ValueError, match="no role"):
        log_variants("demo", {"a": {"x": 1.0}}, roles={})


def test_variant_run_ids_finds_only_variant_runs_of_the_active_parent(mlflow_tmp):
    mlflow.set_experiment("demo")
    assert variant_run_ids("demo") == {}
    with mlflow.start_run(run_name="parent"):
        ids = log_variants("demo", {"a": {"x": 1.0}, "b": {"x": 2.0}},
                           roles={"a": "method", "b": "baseline"})
        with variant_run("a", run_name="a/training/seed 0", role="method", pipeline="demo"):
            pass
        # another paper's variants under the same parent (kedro run of every pipeline)
        log_variants("other", {"c": {"y": 1.0}}, roles={"c": "method"})
        assert variant_run_ids("demo") == ids
        assert set(variant_run_ids("other")) == {"c"}


def test_seed_means_skip_missing_seeds_and_give_nan_without_a_warning_when_none_ran():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Mean of empty slice"
        means = seed_means({"a": {"x": [1.0, float("nan"), 3.0], "y": [float("nan")] * 2},
                            "b": {"x": 4, "y": []}})
    assert means["a"]["x"] == 2.0 and means["b"]["x"] == 4.0
    assert math.isnan(means["a"]["y"]) and math.isnan(means["b"]["y"])
    assert seed_mean([1.0, float("inf"), 2.0]) == 1.5


def test_claim_counts_and_verdict_tags_land_on_the_active_run(mlflow_tmp):
    mlflow.set_experiment("demo")
    claims = {"claims": [{"claim": "a beats b", "verdict": "holds"},
                         {"claim": "a is below 1.1", "verdict": "fails"},
                         {"claim": "a matches c", "verdict": "inconclusive"},
                         {"claim": "a beats d", "verdict": "holds"}]}
    with mlflow.start_run() as run:
        log_claim_counts(claims, throughput=12.5)
    data = mlflow.get_run(run.info.run_id).data
    assert data.metrics == {"claims_holding": 2.0, "claims_failing": 1.0,
                            "claims_inconclusive": 1.0, "claims_total": 4.0, "throughput": 12.5}
    assert data.tags["claim.01.verdict"] == "holds"
    assert data.tags["claim.02.verdict"] == "fails"
    assert data.tags["claim.03.verdict"] == "inconclusive"
    assert data.tags["claim.03.claim"] == "a matches c"


def test_nan_ok_skips_not_applicable_metrics_with_one_info_line(mlflow_tmp, caplog):
    mlflow.set_experiment("demo")
    metrics = {"a": {"x": 1.0, "y": float("nan")}, "b": {"x": float("nan"), "y": 2.0}}
    roles = {"a": "method", "b": "baseline"}
    with mlflow.start_run(), caplog.at_level("INFO", logger="icml25.core.tracking"):
        ids = log_variants("demo", metrics, roles, nan_ok=True)
    records = [r for r in caplog.records if r.name == "icml25.core.tracking"]
    assert [r.levelname for r in records] == ["INFO"]
    assert "2 variant metrics are NaN" in records[0].getMessage()
    assert mlflow.get_run(ids["a"]).data.metrics == {"x": 1.0}
    assert mlflow.get_run(ids["b"]).data.metrics == {"y": 2.0}
    caplog.clear()
    with mlflow.start_run(), caplog.at_level("INFO", logger="icml25.core.tracking"):
        log_variants("demo", metrics, roles)  # default: one warning per skipped metric
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2 and "not logged to MLflow" in warned[0].getMessage()


def test_training_runs_are_children_of_their_variant_run_whichever_comes_first(mlflow_tmp):
    mlflow.set_experiment("demo")
    with mlflow.start_run(run_name="parent") as parent:
        # a training node logs curves before the evaluation node logs the variants
        with variant_run("a", run_name="a/training/seed 0", role="method", pipeline="demo",
                         params={"seed": 0}):
            mlflow.log_metric("loss", 1.0, step=0)
        ids = log_variants("demo", {"a": {"x": 1.0}, "b": {"x": 2.0}},
                           roles={"a": "method", "b": "baseline"},
                           params_by_variant={"a": {"lr": 0.1}})
        with variant_run("b", run_name="b/training/seed 0", role="baseline", pipeline="demo"):
            pass
    runs = {r.info.run_name: r for r in mlflow.search_runs(experiment_names=["demo"],
                                                           output_format="list")}
    assert sorted(runs) == ["a", "a/training/seed 0", "b", "b/training/seed 0", "parent"]
    assert runs["a"].info.run_id == ids["a"]  # the run the curves made, resumed
    assert runs["a"].data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert runs["a"].data.metrics == {"x": 1.0} and runs["a"].data.params == {"lr": "0.1"}
    assert runs["a/training/seed 0"].data.tags["mlflow.parentRunId"] == ids["a"]
    assert runs["a/training/seed 0"].data.params == {"seed": "0"}
    assert runs["b/training/seed 0"].data.tags["mlflow.parentRunId"] == ids["b"]
    assert {r.info.status for r in runs.values()} == {"FINISHED"}


def test_experiments_get_the_model_training_kind_unless_they_have_one(mlflow_tmp):
    client = mlflow.MlflowClient()
    plain = client.create_experiment("plain")
    assert tag_experiment_kind(plain) is True
    assert client.get_experiment(plain).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    assert EXPERIMENT_KIND == "custom_model_development"
    chosen = client.create_experiment("chosen", tags={EXPERIMENT_KIND_TAG: "genai_development"})
    assert tag_experiment_kind(chosen) is False
    assert client.get_experiment(chosen).tags[EXPERIMENT_KIND_TAG] == "genai_development"


MODEL_CODE = """
import mlflow


class Identity(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return model_input


mlflow.models.set_model(Identity())
"""


def _log_and_register(tmp_path, env: str | None, commit: str = "abc1234"):
    code = tmp_path / "identity_model.py"  # a model logged from code, not pickled
    code.write_text(MODEL_CODE)
    with mlflow.start_run(run_name="pipeline") as pipeline_run:
        if env is not None:
            mlflow.set_tags({ENV_TAG: env, COMMIT_TAG: commit})
        with variant_run("m", run_name="m/registered model", role="method", pipeline="demo"):
            info = mlflow.pyfunc.log_model(name="model", python_model=str(code),
                                           pip_requirements=[])
            version = register_logged_model(info.model_uri, "demo_model")
    return pipeline_run, version


def test_models_are_registered_from_base_local_and_paper_runs_with_env_commit_and_alias(
        mlflow_tmp, tmp_path):
    mlflow.set_experiment("demo")
    client = mlflow.MlflowClient()
    _, first = _log_and_register(tmp_path, "local")
    _, second = _log_and_register(tmp_path, "paper", commit="def5678")
    assert (str(first.version), str(second.version)) == ("1", "2")
    stored = client.get_model_version("demo_model", "2")
    assert stored.tags == {"env": "paper", "commit": "def5678"}
    assert client.get_model_version("demo_model", "1").tags["env"] == "local"
    assert str(client.get_model_version_by_alias("demo_model", NEWEST_ALIAS).version) == "2"


@pytest.mark.parametrize("env", ["test", None])
def test_test_runs_and_runs_outside_kedro_register_nothing(mlflow_tmp, tmp_path, env):
    mlflow.set_experiment("demo")
    _, version = _log_and_register(tmp_path, env)
    assert version is None
    assert mlflow.MlflowClient().search_registered_models() == []


def test_two_workers_opening_one_variant_keep_a_single_variant_run(mlflow_tmp, monkeypatch):
    from icml25.core import tracking

    mlflow.set_experiment("demo")
    with mlflow.start_run(run_name="parent") as parent:
        # worker 1 made the variant's run; worker 2 looked for it just before
        with variant_run("a", run_name="a/training/seed 0", role="method", pipeline="demo"):
            pass
        real = tracking._variant_main_run
        looks = []

        def late_look(*args):
            looks.append(args)
            return None if len(looks) == 1 else real(*args)

        monkeypatch.setattr(tracking, "_variant_main_run", late_look)
        with variant_run("a", run_name="a/training/seed 1", role="method", pipeline="demo"):
            pass
        monkeypatch.setattr(tracking, "_variant_main_run", real)
        ids = variant_run_ids("demo")
    runs = mlflow.search_runs(experiment_names=["demo"], output_format="list")
    named_a = [r for r in runs if r.info.run_name == "a"]
    assert len(named_a) == 1 and ids == {"a": named_a[0].info.run_id}  # the loser's is deleted
    assert named_a[0].data.tags["mlflow.parentRunId"] == parent.info.run_id
    for seed in (0, 1):
        (curve,) = [r for r in runs if r.info.run_name == f"a/training/seed {seed}"]
        assert curve.data.tags["mlflow.parentRunId"] == named_a[0].info.run_id
