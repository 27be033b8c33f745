"""The project's house rules: every registered pipeline has its stage, its test config, its
README row and valid parameters in every config environment."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kedro.config import OmegaConfigLoader

from icml25.core.params import validate_parameters
from icml25.pipeline_registry import (
    REPORT,
    paper_pipeline_names,
    parameter_models,
    register_pipelines,
    study_pipelines,
)

ROOT = Path(__file__).resolve().parents[1]
ENVS = ("base", "test", "paper")
PAPERS = paper_pipeline_names()


def _dvc_stages() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _config(env: str) -> OmegaConfigLoader:
    from icml25.settings import CONFIG_LOADER_ARGS

    args = {**CONFIG_LOADER_ARGS, "default_run_env": env}
    return OmegaConfigLoader(str(ROOT / "conf"), env=env, **args)


def test_registry_has_every_room_and_a_default_that_ends_with_report():
    pipelines = register_pipelines()
    assert set(pipelines) == {*PAPERS, REPORT, "__default__", *study_pipelines()}
    assert set(study_pipelines()) == {"wavetoken_scaling"}
    default = pipelines["__default__"]
    assert {n.name for n in default.nodes} == {
        n.name for name in (*PAPERS, REPORT) for n in pipelines[name].nodes}
    order = [n.name for n in default.nodes]
    scorecard = order.index("build_scorecard")
    for name in PAPERS:
        producer = next(n for n in pipelines[name].nodes if f"{name}.claims" in n.outputs)
        assert order.index(producer.name) < scorecard


def _out_paths(stage: dict) -> list[str]:
    return [o if isinstance(o, str) else next(iter(o)) for o in stage.get("outs", [])]


@pytest.mark.parametrize("name", PAPERS)
def test_each_paper_has_dvc_stages_test_config_and_readme_row(name):
    """A base stage (`dvc repro <name>`) and a test one (`dvc repro <name>-test`) per paper."""
    stages = _dvc_stages()
    for stage_name, env_flag, root in ((name, "", "data"), (f"{name}-test", " --env=test",
                                                             "data/test")):
        stage = stages.get(stage_name)
        assert stage is not None, f"dvc.yaml has no stage {stage_name!r}"
        assert stage["cmd"] == f"kedro run --pipeline={name}{env_flag}"
        assert f"src/icml25/pipelines/{name}" in stage["deps"]
        params = [next(iter(p)) for p in stage["params"]]
        assert f"conf/base/parameters_{name}.yml" in params
        # the claims' level is a parameter of every paper's verdicts
        assert {"conf/base/parameters.yml": ["claims_confidence"]} in stage["params"]
        outs = _out_paths(stage)
        for result in ("metrics.json", "claims.json"):
            assert f"{root}/08_reporting/{name}/{result}" in outs, (stage_name, result)
    assert "conf/test/parameters_" + name + ".yml" in [
        next(iter(p)) for p in stages[f"{name}-test"]["params"]]
    assert (ROOT / "conf" / "test" / f"parameters_{name}.yml").exists()
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"^\|.*`kedro run --pipeline={name}`.*\|$", readme, re.M), (
        f"README.md pipeline table has no row for {name}")


def test_report_stages_read_every_papers_reporting_folder():
    stages = _dvc_stages()
    for stage_name, env_flag, root in ((REPORT, "", "data"), (f"{REPORT}-test", " --env=test",
                                                              "data/test")):
        stage = stages[stage_name]
        assert stage["cmd"] == f"kedro run --pipeline=report{env_flag}"
        for name in PAPERS:
            assert f"{root}/08_reporting/{name}" in stage["deps"], (stage_name, name)
            # the folder exists on a fresh clone, so the report runs with any subset of papers
            assert (ROOT / root / "08_reporting" / name / ".gitkeep").exists()


@pytest.mark.parametrize("env", ENVS)
def test_parameters_validate_in_every_environment(env):
    params = _config(env)["parameters"]
    for name, model in parameter_models().items():
        validate_parameters(model, params.get(name), name)


def test_readme_lists_all_nineteen_papers_of_the_report():
    params = _config("base")["parameters"]["report"]["papers"]
    readme = (ROOT / "README.md").read_text()
    assert len(params) == 19
    for paper in params:
        assert f"`kedro run --pipeline={paper['name']}`" in readme


def test_dvc_config_has_a_local_default_remote_and_no_analytics():
    out = subprocess.run([Path(sys.executable).parent / "dvc", "remote", "list"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^local\s+{re.escape(str(ROOT / '.dvc-storage'))}\s+\(default\)", out, re.M)
    config = (ROOT / ".dvc" / "config").read_text()
    assert "remote = local" in config and "analytics = false" in config


def test_telemetry_is_off():
    assert (ROOT / ".telemetry").read_text().strip() == "consent: false"


def test_default_dvc_remote_works_on_a_fresh_copy(tmp_path):
    """`dvc push` into the committed default remote, with no setup beyond the repo's files."""
    dvc = str(Path(sys.executable).parent / "dvc")
    project = tmp_path / "clone"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / ".dvc").mkdir()
    (project / ".dvc" / "config").write_text((ROOT / ".dvc" / "config").read_text())
    data = project / "data" / "01_raw"
    data.mkdir(parents=True)
    (data / "series.csv").write_text("t,value\n0,1.0\n1,2.0\n")
    for args in (["add", "data/01_raw/series.csv"], ["push"]):
        subprocess.run([dvc, *args], cwd=project, check=True, capture_output=True, text=True)
    stored = [p for p in (project / ".dvc-storage").rglob("*") if p.is_file()]
    assert len(stored) == 1 and stored[0].read_text() == "t,value\n0,1.0\n1,2.0\n"
