"""Shared fixtures: a throw-away copy of the Kedro project to run pipelines in."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_LAYERS = (
    "01_raw", "02_intermediate", "03_primary", "04_feature", "05_model_input",
    "06_models", "07_model_output", "08_reporting",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "paper_check: the CPU dry run of a paper config end to end (minutes): "
                   "`make test-full` and `make paper-check-test`, not `make test`")


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """torch on one thread for a test module, restored afterwards: the tiny models of the tests
    are fastest on one thread (two on a shared 2-core machine are ~10x slower). Use it with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def make_project_copy(project: Path) -> Path:
    """Copy conf/ (without conf/local), pyproject.toml and .telemetry into ``project``, with
    empty data layers: a throw-away Kedro project whose runs stay inside it."""
    project.mkdir(parents=True)
    shutil.copytree(PROJECT_ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    # the copy is a throw-away tree of its own: its conf/test writes data/ and mlflow.db at its
    # root, where the end-to-end tests read them (tests/test_envs.py runs the real data/test
    # and data/test/mlflow.db layout)
    (project / "conf" / "test" / "globals.yml").write_text("data_root: data\n")
    (project / "conf" / "test" / "mlflow.yml").write_text(
        "server:\n  mlflow_tracking_uri: sqlite:///mlflow.db\n")
    for name in ("pyproject.toml", ".telemetry"):
        shutil.copy(PROJECT_ROOT / name, project / name)
    (project / "src").mkdir()  # kedro wants the folder; icml25 itself is installed
    for layer in DATA_LAYERS:
        (project / "data" / layer).mkdir(parents=True)
    return project


@pytest.fixture(scope="session")
def project_copy():
    """:func:`make_project_copy`, for fixtures of wider scope than ``kedro_project``."""
    return make_project_copy


@pytest.fixture
def kedro_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of conf/ and pyproject.toml in a temp folder, made the working directory.

    Pipelines run there through a real KedroSession write their data, and kedro-mlflow its
    sqlite store, inside the temp folder, never into the developer's checkout.
    """
    project = make_project_copy(tmp_path / "project")
    monkeypatch.chdir(project)
    previous_uri = mlflow.get_tracking_uri()
    yield project
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(previous_uri)


@pytest.fixture
def run_pipeline(kedro_project: Path):
    """``run_pipeline(name, env="test", params=None)`` runs a pipeline through a real
    KedroSession in the temp project and returns the session's run outputs."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    def _run(pipeline: str, env: str = "test", params: dict | None = None):
        bootstrap_project(kedro_project)
        with KedroSession.create(
            project_path=kedro_project, env=env, runtime_params=params
        ) as session:
            outputs = session.run(pipeline_names=[pipeline])
        for path in sorted((kedro_project / "data" / "08_reporting").glob("*/claims.json")):
            check_claims_document(json.loads(path.read_text()), where=str(path))
        return outputs

    return _run


def check_claims_document(doc: dict, where: str = "claims.json") -> None:
    """Fail unless ``doc`` follows ``claims.schema.json`` and its counts match its verdicts.

    Every end-to-end run through :func:`run_pipeline` passes its claims.json through this.
    """
    from icml25.core.claims import ClaimError, validate_claims_document

    try:
        validate_claims_document(doc, where)
    except ClaimError as err:
        pytest.fail(str(err))


@pytest.fixture
def mlflow_tmp(tmp_path: Path) -> Iterator[str]:
    """Point MLflow at a fresh sqlite store for one test."""
    previous = mlflow.get_tracking_uri()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(previous)


@pytest.fixture
def assert_refused():
    """``assert_refused(params_cls, tree, name, path, value, match)``: set ``tree[path] = value``
    (in place; pass a copy) and check that validating ``tree`` as ``params_cls`` under ``name``
    raises :class:`~icml25.core.params.ParameterError` matching the regex ``match``."""
    from icml25.core.params import ParameterError, validate_parameters

    def check(params_cls, tree: dict, name: str, path, value, match: str) -> None:
        node = tree
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(ParameterError, match=match):
            validate_parameters(params_cls, tree, name)

    return check
