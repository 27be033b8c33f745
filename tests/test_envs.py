"""Each config environment writes its own data tree and MLflow store.

``conf/<env>/globals.yml`` names the env's data root and every catalog path is
``${globals:data_root}/...``: base and local runs write ``data/`` (the DVC stages and the
committed results), conf/test ``data/test``, conf/paper ``data/paper``; the output folders named
in parameters follow the same root. Each env has its own MLflow store, so a test run never
touches the base store's experiments or model registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kedro.config import OmegaConfigLoader

from icml25 import settings

ROOT = Path(__file__).resolve().parents[1]
DATA_ROOTS = {None: "data", "base": "data", "local": "data", "test": "data/test",
              "paper": "data/paper", "medium": "data/medium",
              "paper_check": "data/paper_check"}
STORES = {None: "sqlite:///mlflow.db", "base": "sqlite:///mlflow.db",
          "local": "sqlite:///mlflow.db", "test": "sqlite:///data/test/mlflow.db",
          "paper": "sqlite:///data/paper/mlflow.db",
          "medium": "sqlite:///data/medium/mlflow.db",
          "paper_check": "sqlite:///data/paper_check/mlflow.db"}
#: parameters naming folders a run writes outside the catalog
OUTPUT_PARAMS = (("functional_tom", "llm", "tiny_model_dir"), ("twa", "real", "save_dir"),
                 ("wavetoken", "train", "checkpoint_dir"), ("ctbench", "data", "cache"),
                 ("report", "reporting_dir"))


def _loader(env: str | None) -> OmegaConfigLoader:
    # the project's loader: conf/paper_check is layered on conf/paper (icml25.core.config_loader)
    return settings.CONFIG_LOADER_CLASS(conf_source=str(ROOT / "conf"), env=env,
                                        **settings.CONFIG_LOADER_ARGS)


def _paths(entry: Any) -> Iterator[str]:
    if isinstance(entry, dict):
        for key, value in entry.items():
            if key in ("filepath", "path") and isinstance(value, str):
                yield value
            else:
                yield from _paths(value)


@pytest.mark.parametrize("env", list(DATA_ROOTS))
def test_every_catalog_path_lies_in_the_env_data_tree(env):
    root = DATA_ROOTS[env]
    catalog = _loader(env)["catalog"]
    paths = {name: list(_paths(entry)) for name, entry in catalog.items()}
    assert sum(map(len, paths.values())) > 150
    outside = {n: p for n, ps in paths.items() for p in ps if not p.startswith(root + "/")}
    assert outside == {}
    if root != "data":  # and nothing of the env lands in another env's tree
        assert all(not p.startswith(("data/test/", "data/paper/")) or p.startswith(root + "/")
                   for ps in paths.values() for p in ps)
    # factories keep their placeholders for Kedro to fill
    assert catalog["{name}.claims"]["filepath"] == f"{root}/08_reporting/{{name}}/claims.json"


@pytest.mark.parametrize("env", list(DATA_ROOTS))
def test_output_folders_named_in_parameters_follow_the_data_tree(env):
    params = _loader(env)["parameters"]
    for keys in OUTPUT_PARAMS:
        value = params
        for key in keys:
            value = value[key]
        if value is not None:  # conf/test has no MNIST cache
            assert value.startswith(DATA_ROOTS[env] + "/"), (keys, value)


def test_each_env_has_its_own_mlflow_store():
    uris = {env: _loader(env)["mlflow"]["server"]["mlflow_tracking_uri"] for env in STORES}
    assert uris == STORES
    artifacts = {env: _loader(env)["mlflow"]["tracking"]["experiment"]
                 .get("create_experiment_kwargs", {}).get("artifact_location")
                 for env in ("test", "paper")}
    assert artifacts == {"test": "data/test/mlruns", "paper": "data/paper/mlruns"}


def test_a_session_resolves_dataset_factories_in_the_env_tree(kedro_project):
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    # the real conf/test layout (the fixture points conf/test at the root tree)
    for name in ("globals.yml", "mlflow.yml"):
        (kedro_project / "conf/test" / name).write_text((ROOT / "conf/test" / name).read_text())
    bootstrap_project(kedro_project)
    with KedroSession.create(project_path=kedro_project, env="test") as session:
        catalog = session.load_context().catalog
        claims = catalog.get("wavetoken.claims")
        scorecard = catalog.get("report.scorecard")
    tree = (kedro_project / "data/test").resolve()
    assert Path(str(claims._filepath)) == tree / "08_reporting/wavetoken/claims.json"
    assert Path(str(scorecard._filepath)) == tree / "08_reporting/scorecard.json"
    assert (tree / "mlflow.db").exists()  # kedro-mlflow opened the env's own store
    assert not (kedro_project / "mlflow.db").exists()
