"""DVC (issue 34): stages per paper and config environment whose outs cover their catalog, a
report stage that runs on a fresh clone with only some papers' results and keeps its previous
scorecard when it fails, and a ``dvc metrics show`` table of one narrow row per paper."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).with_name("dvc")
ENVS = {"base": "", "test": "-test"}
PAPERS = [p["name"] for p in yaml.safe_load(
    (ROOT / "conf/base/parameters_report.yml").read_text())["report"]["papers"]]
LOCK = yaml.safe_load((ROOT / "dvc.lock").read_text()) if (ROOT / "dvc.lock").exists() else {}


def _stages() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _paths(entries) -> list[str]:
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries or []]


def _data_root(env: str) -> str:
    path = ROOT / "conf" / env / "globals.yml"
    return yaml.safe_load(path.read_text())["data_root"]


def _catalog_paths(paper: str, pipeline: str | None = None):
    """The paths of ``pipeline``'s catalog entries in ``catalog_<paper>.yml`` (``pipeline``
    defaults to the paper; a study such as ``wavetoken_scaling`` keeps its entries in its room's
    file), without the pipeline's free inputs (a user's own tables, which it never writes)."""
    from icml25.pipeline_registry import register_pipelines

    pipeline = pipeline or paper
    free_inputs = register_pipelines()[pipeline].inputs()

    def walk(entry):
        while isinstance(entry, dict):
            for key in ("filepath", "path"):
                if key in entry:
                    yield entry[key]
            entry = entry.get("dataset")

    catalog = yaml.safe_load((ROOT / f"conf/base/catalog_{paper}.yml").read_text())
    for name, entry in catalog.items():
        if name.startswith(f"{pipeline}.") and name not in free_inputs:
            yield from walk(entry)
    for name in ("claims", "metrics"):  # the factories of conf/base/catalog.yml
        yield f"${{globals:data_root}}/08_reporting/{pipeline}/{name}.json"


def test_one_stage_per_paper_and_environment_plus_the_reports():
    from icml25.pipeline_registry import study_pipelines

    expected = {f"{p}{suffix}" for p in [*PAPERS, *study_pipelines()] for suffix in ENVS.values()}
    assert set(_stages()) == expected | {"report", "report-test"}


@pytest.mark.parametrize("env", sorted(ENVS))
def test_a_study_stage_declares_every_catalog_path_of_its_pipeline(env):
    """wavetoken_scaling: its own outputs (it re-creates the wavetoken data sets with the same
    content, which the wavetoken stage declares), with its run cache persistent."""
    stage = _stages()[f"wavetoken_scaling{ENVS[env]}"]
    assert stage["cmd"].startswith("kedro run --pipeline=wavetoken_scaling")
    assert ("" if env == "base" else f"--env={env}") in stage["cmd"]
    root = _data_root(env)
    declared = _paths(stage.get("outs")) + _paths(stage.get("plots"))
    for path in _catalog_paths("wavetoken", "wavetoken_scaling"):
        concrete = path.replace("${globals:data_root}", root).split("{")[0]
        if "{" in path:  # a factory: every file it can write is declared (one per slot)
            assert any(d.startswith(concrete) or concrete.startswith(d + "/")
                       for d in declared), concrete
        else:
            assert any(concrete == d or concrete.startswith(d + "/") for d in declared), concrete
    cache = next(o for o in stage["outs"] if isinstance(o, dict))
    assert cache == {f"{root}/07_model_output/wavetoken_scaling": {"persist": True}}


@pytest.mark.parametrize("env", sorted(ENVS))
@pytest.mark.parametrize("paper", PAPERS)
def test_a_paper_stage_runs_its_env_and_declares_every_catalog_path(paper, env):
    stage = _stages()[f"{paper}{ENVS[env]}"]
    assert stage["cmd"] == f"kedro run --pipeline={paper}" + ("" if env == "base" else
                                                               f" --env={env}")
    assert {f"src/icml25/pipelines/{paper}", "src/icml25/core", "conf/base/catalog.yml",
            f"conf/base/catalog_{paper}.yml"} <= set(stage["deps"])
    params = {next(iter(p)) for p in stage["params"]}
    assert f"conf/base/parameters_{paper}.yml" in params
    if env != "base":  # the env's values layered over base's
        assert f"conf/{env}/parameters_{paper}.yml" in params
    root = _data_root(env)
    declared = _paths(stage.get("outs")) + _paths(stage.get("plots"))
    assert all(p.startswith(f"{root}/0") for p in declared), declared
    for path in _catalog_paths(paper):
        concrete = path.replace("${globals:data_root}", root).split("{")[0]
        assert any(concrete == d or concrete.startswith(d + "/") for d in declared), (
            f"{paper}{ENVS[env]}: {concrete} is written by the pipeline but not a DVC out")


@pytest.mark.parametrize("env", sorted(ENVS))
def test_the_report_stage_tolerates_absent_papers_and_keeps_its_outs(env):
    stage = _stages()[f"report{ENVS[env]}"]
    root = _data_root(env)
    folders = [d for d in stage["deps"] if d.startswith(root)]
    assert folders == [f"{root}/08_reporting/{p}" for p in sorted(PAPERS)]
    tracked = set(subprocess.run(["git", "ls-files", f"{root}/08_reporting"], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.split())
    # on a fresh clone every dependency exists (DVC refuses to run with a missing one)
    assert {f"{d}/.gitkeep" for d in folders} <= tracked
    outs = list(stage["outs"]) + list(stage.get("metrics", []))
    assert all(isinstance(o, dict) and next(iter(o.values())).get("persist") for o in outs)
    summaries = [f"{root}/08_reporting/scorecard/{p}.json" for p in sorted(PAPERS)]
    if env == "base":  # the project's metrics: one summary per paper, not the metrics.json
        assert _paths(stage["metrics"]) == summaries
        assert [n for n, s in _stages().items() if "metrics" in s] == ["report"]
    else:
        assert summaries == _paths(stage["outs"])[3:]


def test_dvc_accepts_the_project_file():
    result = subprocess.run([str(DVC), "stage", "list"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^wavetoken-test\s", result.stdout, re.M)


def test_the_lock_records_only_base_stages_that_exist():
    """dvc.lock records the default (base) runs whose outputs the docs' results come from."""
    for name in LOCK.get("stages", {}):
        assert name in _stages() and not name.endswith("-test"), name


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{DVC.parent}{os.pathsep}{os.environ['PATH']}",
           "OMP_NUM_THREADS": "1", "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_report_stage_on_a_fresh_clone_with_some_papers(tmp_path):
    """``git clone`` of the project, two papers' committed results copied in, ``dvc repro -s
    report``: the scorecard shows the two and "not run" for the rest, ``dvc metrics show``
    prints one row per paper; a report that then fails leaves every previous file as it was."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    present = ["frugal", "wavetoken"]
    for name in present:
        for doc in ("claims.json", "metrics.json"):
            shutil.copy(ROOT / "results" / name / doc, clone / "data/08_reporting" / name / doc)

    result = _run([str(DVC), "repro", "-s", "report"], clone)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reporting = clone / "data/08_reporting"
    card = json.loads((reporting / "scorecard.json").read_text())
    assert card["n_run"] == len(present) and card["n_papers"] == len(PAPERS)
    statuses = {row["name"]: row["status"] for row in card["papers"]}
    assert all((statuses[p] == "not run") == (p not in present) for p in PAPERS)
    claims = json.loads((ROOT / "results/wavetoken/claims.json").read_text())
    summary = json.loads((reporting / "scorecard/wavetoken.json").read_text())
    assert (summary["status"], summary["claims"], summary["holds"]) == (
        "run", claims["n_claims"], claims["n_holds"])
    assert json.loads((reporting / "scorecard/acorn.json").read_text())["status"] == "not run"

    shown = _run([str(DVC), "metrics", "show"], clone)
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if "scorecard/" in line]
    assert len(rows) == len(PAPERS)
    assert max(len(line) for line in shown.stdout.splitlines()) < 200
    header = shown.stdout.splitlines()[0].split()
    assert header == ["Path", "claims", "fails", "holds", "inconclusive", "metric", "status",
                      "value", "vs"]

    names = ["scorecard.json", "scorecard.md", "scorecard.html", "scorecard/wavetoken.json",
             "scorecard/acorn.json"]
    before = {n: (reporting / n).read_bytes() for n in names}
    (reporting / "wavetoken/claims.json").write_text(
        '{"pipeline": "wavetoken", "claims": [{"claim": "no verdict"}]}')
    failed = _run([str(DVC), "repro", "-s", "report"], clone)
    assert failed.returncode != 0
    assert "wavetoken" in failed.stdout + failed.stderr
    assert {n: (reporting / n).read_bytes() for n in names} == before

    dry = _run([str(DVC), "repro", "--dry", "-s", "wavetoken-test"], clone)
    assert "kedro run --pipeline=wavetoken --env=test" in dry.stdout, dry.stdout + dry.stderr
