"""What the MLflow UI shows of a ``kedro run``: experiments of the model-training kind, and
run statuses that say how each pipeline ended (FINISHED, FAILED, KILLED by Ctrl-C).

Tiny pipelines run through real KedroSessions in a fresh interpreter (an interrupt that no
code catches ends the process, as Ctrl-C ends ``kedro run``); the MLflow store is read back
afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys

import mlflow

REGISTRY = '''
from kedro.pipeline import node, pipeline

from icml25.core.tracking import variant_run


def _stop(kind):
    def stop():
        with variant_run("v", role="method", pipeline="tiny", run_name="v/training/seed 0"):
            if kind == "interrupt":
                raise KeyboardInterrupt
            if kind == "fail":
                raise RuntimeError("the node failed")
        return True
    return stop


def register_pipelines():
    tiny = {name: pipeline([node(_stop(kind), None, "stopped", name="stop")])
            for name, kind in (("interrupted", "interrupt"), ("finishes", "ok"),
                               ("fails", "fail"), ("interrupted_at_exit", "interrupt"))}
    return {**tiny, "__default__": tiny["finishes"]}
'''

SCRIPT = '''
import sys
from pathlib import Path

from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

project = Path.cwd()
sys.path.insert(0, str(project))
bootstrap_project(project)
pipelines.configure("tiny_registry")


def run(name):
    with KedroSession.create(project_path=project, env="test") as session:
        session.run(pipeline_names=[name])


try:
    run("interrupted")  # Ctrl-C in a notebook: the process goes on
except KeyboardInterrupt:
    pass
run("finishes")  # the next pipeline closes the interrupted one first
try:
    run("fails")
except RuntimeError:
    pass
run("interrupted_at_exit")  # nothing catches it: the process ends, like `kedro run`
'''


def test_run_statuses_say_how_each_pipeline_ended_and_experiments_are_of_the_training_kind(
        kedro_project):
    (kedro_project / "tiny_registry.py").write_text(REGISTRY)
    (kedro_project / "run_tiny.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "run_tiny.py"], cwd=kedro_project,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr[-3000:]

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    client = mlflow.MlflowClient()
    expected = {"interrupted": "KILLED", "finishes": "FINISHED", "fails": "FAILED",
                "interrupted_at_exit": "KILLED"}
    for name, status in expected.items():
        experiment = client.get_experiment_by_name(name)
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development", name
        runs = {r.info.run_name: r for r in mlflow.search_runs(
            experiment_ids=[experiment.experiment_id], output_format="list")}
        # the pipeline run, its variant's run and that variant's training run
        assert sorted(runs) == sorted([name, "v", "v/training/seed 0"]), name
        assert {n: r.info.status for n, r in runs.items()} == dict.fromkeys(runs, status), name
        assert runs["v"].data.tags["mlflow.parentRunId"] == runs[name].info.run_id
        assert runs["v/training/seed 0"].data.tags["mlflow.parentRunId"] == runs["v"].info.run_id
        assert runs[name].data.tags["icml25.env"] == "test"
    # and so are kedro-mlflow's default experiment from mlflow.yml and MLflow's own
    for name in ("icml25", "Default"):
        experiment = client.get_experiment_by_name(name)
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development", name
