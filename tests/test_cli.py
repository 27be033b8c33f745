"""``kedro run`` refuses bad input before any node runs, in one line (icml25.cli, icml25.preflight),
logs node progress without a line per dataset (conf/logging.yml), and starts without loading what
it does not use: the pipeline registry loads no heavy library, the project settings neither MLflow
nor kedro-mlflow, and kedro-mlflow's hook builds only the datasets that can be its metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from icml25.preflight import (
    PreflightError,
    check_environment,
    check_parameter_namespaces,
    check_writable,
    dataset_folders,
    store_folder,
    writable_problem,
)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
KEDRO = str(Path(sys.executable).with_name("kedro"))

# libraries that no room may import just to be registered (kedro run --pipeline=report and
# kedro registry list import every room's pipeline.py, params.py and nodes.py)
HEAVY = ("torch", "scipy", "sklearn", "matplotlib", "mlflow", "pandas", "transformers",
         "statsforecast", "sympy", "networkx", "cvxpy", "z3", "lark", "pywt")


# ------------------------------------------------------------------------------ start-up
def test_registering_every_pipeline_imports_no_heavy_library():
    """Behavioural check of the lazy imports: building all pipelines and their parameter
    models loads none of the heavy libraries (a fresh interpreter, so nothing else did)."""
    code = (
        "import json, sys\n"
        "import icml25.pipeline_registry as registry\n"
        "pipelines = registry.register_pipelines()\n"
        "nodes = sum(len(p.nodes) for name, p in pipelines.items() if name != '__default__')\n"
        "models = registry.parameter_models()\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'nodes': nodes, 'models': len(models), 'heavy': heavy}))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PROJECT_ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["nodes"] > 100 and result["models"] >= 20
    assert result["heavy"] == [], f"registering the pipelines imported {result['heavy']}"


def test_reading_one_pipeline_imports_that_room_alone():
    """``kedro run --pipeline=report`` reads one entry of the registry: the report room is
    imported, no paper room is, and the names (studies included) are still all listed."""
    code = (
        "import json, sys\n"
        "import icml25.pipeline_registry as registry\n"
        "pipelines = registry.register_pipelines()\n"
        "report = pipelines['report']\n"
        "model = registry.parameter_model('report')\n"
        "rooms = sorted(m.split('.')[2] for m in sys.modules\n"
        "               if m.startswith('icml25.pipelines.') and m.endswith('.pipeline'))\n"
        "sgd = pipelines['sgd_hitting']\n"
        "after_one = sorted(m.split('.')[2] for m in sys.modules\n"
        "                   if m.startswith('icml25.pipelines.') and m.endswith('.pipeline'))\n"
        "names = list(pipelines)\n"
        "print(json.dumps({'rooms': rooms, 'after_one': after_one, 'names': names,\n"
        "                  'report_nodes': len(report.nodes), 'model': model.__name__,\n"
        "                  'study': 'wavetoken_scaling' in pipelines,\n"
        "                  'missing': 'reprot' in pipelines}))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PROJECT_ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rooms"] == ["report"]
    assert result["after_one"] == ["report", "sgd_hitting"]
    assert result["report_nodes"] > 0 and result["model"]
    assert {"report", "__default__", "wavetoken", "wavetoken_scaling"} <= set(result["names"])
    assert result["study"] is True and result["missing"] is False


def test_a_lazy_module_imports_on_first_attribute_and_resolves_annotations():
    code = (
        "from __future__ import annotations\n"
        "import sys, typing\n"
        "from icml25.core.lazy_import import is_loaded, lazy_module\n"
        "fr = lazy_module('fractions')\n"
        "def half(x: fr.Fraction) -> fr.Fraction: return x / 2\n"
        "before = 'fractions' in sys.modules or is_loaded(fr)\n"
        "hints = typing.get_type_hints(half)\n"
        "print(before, hints['x'].__name__, half(fr.Fraction(1, 3)), is_loaded(fr))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "Fraction", "1/6", "True"]


def test_project_settings_import_neither_mlflow_nor_kedro_mlflow_until_hooks_are_registered():
    """Kedro reads settings.py for every command; its hooks (kedro-mlflow's among them) are built
    when a session registers them: the same hooks, in the same order, as before."""
    code = (
        "import json, sys\n"
        "from kedro.framework.hooks.manager import _create_hook_manager, _register_hooks\n"
        "import icml25.settings as settings\n"
        "at_import = [m for m in ('mlflow', 'kedro_mlflow', 'torch', 'pandas') if m in sys.modules]\n"
        "built_at_import = settings.HOOKS.built\n"
        "manager = _create_hook_manager()\n"
        "_register_hooks(manager, settings.HOOKS)\n"
        "from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook\n"
        "import icml25.hooks as hooks\n"
        "print(json.dumps({'at_import': at_import, 'built_at_import': built_at_import,\n"
        "    'registered': [type(h).__name__ for h in settings.HOOKS\n"
        "                   if manager.is_registered(h)],\n"
        "    'mlflow_hooks': [type(h).__qualname__ for h in settings.HOOKS\n"
        "                     if isinstance(h, MlflowHook)],\n"
        "    'same_class': type(settings.HOOKS[5]) is hooks.MlflowParamsOnceHook,\n"
        "    'same_instances': list(settings.HOOKS) == list(settings.HOOKS)}))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PROJECT_ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["at_import"] == [] and result["built_at_import"] is False
    assert result["registered"] == [
        "RunInfoHook", "PipelineExperimentHook", "ParameterValidationHook", "DistributedRankHook",
        "DaskConfigHook", "MlflowParamsOnceHook", "ConfigCheckHook", "OutputFolderCheckHook",
        "DryRunCheckHook", "CredentialsCheckHook", "PaperCheckHook"]
    assert result["mlflow_hooks"] == ["MlflowParamsOnceHook"]
    assert result["same_class"] and result["same_instances"]


def test_deferred_hooks_build_once_in_order_and_concatenate():
    from icml25.hooks import DeferredHooks

    calls = []
    a, b, c = object(), object(), object()
    first = DeferredHooks(lambda: calls.append("first") or (a, b))
    both = (c,) + first + (c,)  # noqa: RUF005 (unpacking `first` would build it)
    assert bool(first) and calls == []  # truthiness builds nothing (Kedro's settings loader)
    assert list(both) == [c, a, b, c] and calls == ["first"]
    assert list(first) == [a, b] and len(first) == 2 and first[-1] is b and calls == ["first"]
    assert first.built and "DeferredHooks((" in repr(first)


METRIC_CATALOG = {
    "metric": {"type": "kedro_mlflow.io.metrics.MlflowMetricDataset"},
    "metric_keyed": {"type": "kedro_mlflow.io.metrics.MlflowMetricDataset", "key": "own"},
    "history": {"type": "kedro_mlflow.io.metrics.MlflowMetricHistoryDataset"},
    "histories": {"type": "kedro_mlflow.io.metrics.MlflowMetricsHistoryDataset"},
    "table": {"type": "pandas.CSVDataset", "filepath": "t.csv"},
    "figure": {"type": "kedro_mlflow.io.artifacts.MlflowArtifactDataset",
               "dataset": {"type": "matplotlib.MatplotlibDataset", "filepath": "f.png"}},
    "memory": {"type": "MemoryDataset"},
    "own_type": {"type": "icml25.core.datasets.AtomicJSONDataset", "filepath": "o.json"},
}


def test_metric_datasets_are_named_as_kedro_mlflow_names_them_without_building_the_rest(
        tmp_path):
    """The project's kedro-mlflow hook gives each key-less metric dataset its catalog name exactly
    as kedro-mlflow's own hook does; the datasets whose type cannot be a metric dataset (here
    pandas, matplotlib through an artifact, kedro's MemoryDataset) are left unbuilt."""
    from kedro.io import DataCatalog
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    from icml25.hooks import MlflowParamsOnceHook

    def catalog() -> DataCatalog:
        config = {name: {k: (str(tmp_path / v) if k == "filepath" else v)
                         for k, v in entry.items()} for name, entry in METRIC_CATALOG.items()}
        config["figure"]["dataset"] = {**config["figure"]["dataset"],
                                       "filepath": str(tmp_path / "f.png")}
        return DataCatalog.from_config(config)

    def named(c: DataCatalog) -> dict[str, tuple[str | None, str | None]]:
        return {n: (getattr(c[n], "key", None), getattr(c[n], "_prefix", None))
                for n in ("metric", "metric_keyed", "history", "histories")}

    ours, theirs = catalog(), catalog()
    args = {"conf_catalog": {}, "conf_creds": {}, "parameters": {}, "save_version": None,
            "load_versions": {}}
    MlflowParamsOnceHook().after_catalog_created(catalog=ours, **args)
    MlflowHook().after_catalog_created(catalog=theirs, **args)
    assert named(ours) == named(theirs) == {
        "metric": ("metric", None), "metric_keyed": ("own", None),
        "history": ("history", None), "histories": (None, "histories")}
    # DataCatalog keeps entries it has not built in _lazy_datasets (kedro 1.x)
    assert set(ours._lazy_datasets) == {"table", "figure", "memory"}
    assert set(theirs._lazy_datasets) == set()


@pytest.mark.parametrize(("config", "expected"), [
    ({"type": "pandas.CSVDataset"}, True),
    ({"type": "kedro_datasets.json.JSONDataset"}, True),
    ({"type": "MemoryDataset"}, True),
    ({"type": "kedro.io.CachedDataset", "dataset": {"type": "MemoryDataset"}}, True),
    ({"type": "kedro_mlflow.io.artifacts.MlflowArtifactDataset",
      "dataset": "matplotlib.MatplotlibDataset"}, True),
    ({"type": "kedro_mlflow.io.artifacts.MlflowArtifactDataset",
      "dataset": {"type": "icml25.core.datasets.AtomicJSONDataset"}}, False),
    ({"type": "kedro_mlflow.io.metrics.MlflowMetricDataset"}, False),
    ({"type": "icml25.core.datasets.ArrayTreeDataset"}, False),
    ({"type": "no_such_package.Dataset"}, False),
    ({"filepath": "no type"}, False),
])
def test_which_dataset_types_cannot_be_kedro_mlflow_metric_datasets(config, expected):
    from icml25.hooks import cannot_be_a_metric_dataset

    assert cannot_be_a_metric_dataset(config) is expected


# --------------------------------------------------------------------------- the checks
def test_unknown_environment_names_it_and_the_closest_one(tmp_path):
    for env in ("base", "test", "paper"):
        (tmp_path / "conf" / env).mkdir(parents=True)
    check_environment(None, tmp_path / "conf")
    check_environment("test", tmp_path / "conf")
    with pytest.raises(PreflightError) as err:
        check_environment("tset", tmp_path / "conf", tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert "'tset'" in message and "conf/tset" in message and "did you mean 'test'" in message
    assert "base, paper, test" in message


def test_unknown_parameter_namespace_names_it_and_the_closest_one():
    pipelines, keys = ["report", "wavetoken", "twa"], ["wavetoken", "claims_confidence"]
    check_parameter_namespaces({"wavetoken": {"seeds": [0]}, "claims_confidence": 0.9},
                               pipelines, keys)
    with pytest.raises(PreflightError, match=r"'wavetokn'.*did you mean 'wavetoken'") as err:
        check_parameter_namespaces({"wavetokn": {"seeds": [0]}}, pipelines, keys)
    assert "\n" not in str(err.value)
    with pytest.raises(PreflightError, match=r"'zzz'.*namespaces: claims_confidence, report"):
        check_parameter_namespaces({"zzz": 1}, pipelines, keys)


def test_an_output_folder_below_a_file_is_refused_with_its_name(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "08_reporting").write_text("not a folder")
    assert writable_problem(tmp_path / "data" / "new" / "deeper") is None
    check_writable(tmp_path / "data" / "new", "x")
    with pytest.raises(PreflightError) as err:
        check_writable(tmp_path / "data" / "08_reporting" / "report", "report.scorecard",
                       tmp_path)
    assert str(err.value) == ("cannot write report.scorecard to data/08_reporting/report: "
                              "data/08_reporting is a file, not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert "is not writable" in writable_problem(folder / "sub")
    finally:
        folder.chmod(0o700)


def test_store_folder_of_mlflow_uris(tmp_path):
    assert store_folder("sqlite:///mlflow.db", tmp_path) == tmp_path
    assert store_folder("sqlite:///data/test/mlflow.db", tmp_path) == tmp_path / "data" / "test"
    assert store_folder("sqlite:////abs/store/mlflow.db", tmp_path) == Path("/abs/store")
    assert store_folder("data/test/mlruns", tmp_path) == tmp_path / "data" / "test" / "mlruns"
    assert store_folder("file:///abs/mlruns", tmp_path) == Path("/abs/mlruns")
    assert store_folder("http://127.0.0.1:5000", tmp_path) is None
    assert store_folder(None, tmp_path) is None


def test_dataset_folders_of_a_pipeline(tmp_path):
    from kedro.io import DataCatalog, MemoryDataset
    from kedro.pipeline import Pipeline, node
    from kedro_datasets.json import JSONDataset
    from kedro_datasets.partitions import PartitionedDataset

    catalog = DataCatalog(datasets={
        "doc": JSONDataset(filepath=str(tmp_path / "rep" / "doc.json")),
        "parts": PartitionedDataset(path=str(tmp_path / "parts"), dataset="json.JSONDataset"),
        "mem": MemoryDataset(),
    })
    pipeline = Pipeline([node(lambda: ({}, {}, 1), None, ["doc", "parts", "mem"], name="n")])
    assert dataset_folders(pipeline, catalog) == {tmp_path / "rep": ["doc"],
                                                  tmp_path / "parts": ["parts"]}


# ------------------------------------------------------------------- kedro run, refused
@pytest.fixture
def kedro_cli(kedro_project: Path):
    """``invoke(*args)`` runs icml25's ``kedro run`` in the temp project (click's CliRunner)."""
    from kedro.framework.startup import bootstrap_project

    from icml25.cli import run

    bootstrap_project(kedro_project)

    def invoke(*args: str):
        return CliRunner().invoke(run, list(args), catch_exceptions=True)

    return invoke


def _refused(result, *fragments: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _no_node_ran(project: Path) -> None:
    written = [p for p in (project / "data").rglob("*") if p.is_file()]
    assert not [p for p in written if "08_reporting" in p.parts], written


def test_run_refuses_an_unknown_environment(kedro_cli, kedro_project):
    _refused(kedro_cli("--pipeline=report", "--env=tset"),
             "unknown config environment 'tset'", "conf/tset", "did you mean 'test'")
    _no_node_ran(kedro_project)


def test_run_refuses_an_unknown_parameter_namespace(kedro_cli, kedro_project):
    _refused(kedro_cli("--pipeline=report", "--env=test", "--params=wavetokn.seeds=[0]"),
             "unknown parameter namespace 'wavetokn'", "did you mean 'wavetoken'")
    _no_node_ran(kedro_project)


def test_run_prints_a_parameter_error_without_a_traceback(kedro_cli, kedro_project):
    result = kedro_cli("--pipeline=report", "--env=test", "--params=report.papers=[]")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "Error: invalid parameters" in result.output
    assert "report.papers: got []" in result.output
    _no_node_ran(kedro_project)


def _reporting_dir(project: Path, env: str) -> Path:
    from kedro.config import OmegaConfigLoader

    from icml25.settings import CONFIG_LOADER_ARGS

    loader = OmegaConfigLoader(str(project / "conf"), env=env, **CONFIG_LOADER_ARGS)
    return project / loader["parameters"]["report"]["reporting_dir"]


def test_run_refuses_an_unwritable_reporting_folder_before_the_first_node(kedro_cli,
                                                                           kedro_project):
    reporting = _reporting_dir(kedro_project, "test")
    if reporting.exists():
        reporting.rmdir()
    reporting.parent.mkdir(parents=True, exist_ok=True)
    reporting.write_text("a file where the reporting folder should be")
    shown = reporting.relative_to(kedro_project).as_posix()
    line = _refused(kedro_cli("--pipeline=report", "--env=test"),
                    "cannot write report.", f"to {shown}",
                    f"{shown} is a file, not a folder")
    assert line.startswith("Error: cannot write report.")


def test_run_refuses_an_unwritable_mlflow_store(kedro_cli, kedro_project):
    (kedro_project / "blocked").write_text("a file where the MLflow store's folder should be")
    (kedro_project / "conf" / "blocked").mkdir()
    (kedro_project / "conf" / "blocked" / "mlflow.yml").write_text(
        "server:\n  mlflow_tracking_uri: sqlite:///blocked/mlflow.db\n")
    _refused(kedro_cli("--pipeline=report", "--env=blocked"),
             "cannot write the MLflow store", "blocked is a file, not a folder")


# --------------------------------------------------------------------------- logging
@pytest.mark.slow
def test_default_logging_shows_nodes_not_every_dataset_and_verbose_shows_them(kedro_project):
    """A real ``kedro run`` (subprocess): Kedro finds conf/logging.yml in the project root."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    env.pop("KEDRO_LOGGING_CONFIG", None)

    def run(**extra: str) -> str:
        out = subprocess.run([KEDRO, "run", "--pipeline=report", "--env=test"],
                             cwd=kedro_project, env={**env, **extra}, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout + out.stderr

    default = run()
    assert "conf/logging.yml" in default
    assert "Running node: build_scorecard" in default
    assert "Loading data from" not in default and "Saving data to" not in default
    verbose = run(KEDRO_LOGGING_CONFIG="conf/logging_verbose.yml")
    assert "Loading data from" in verbose and "Saving data to" in verbose
    assert "Running node: build_scorecard" in verbose
