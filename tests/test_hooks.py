from pathlib import Path

from icml25.hooks import absolute_sqlite_uri, experiment_name, sqlite_path


def test_relative_sqlite_store_is_anchored_at_the_project_root(tmp_path):
    assert absolute_sqlite_uri("sqlite:///mlflow.db", tmp_path) == (
        f"sqlite:///{(tmp_path / 'mlflow.db').resolve().as_posix()}")
    absolute = f"sqlite:///{Path('/srv/mlflow.db').as_posix()}"
    assert absolute_sqlite_uri(absolute, tmp_path) == absolute
    assert absolute_sqlite_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    assert absolute_sqlite_uri(None, tmp_path) is None


def test_the_file_of_an_anchored_sqlite_store_is_found_to_create_its_folder(tmp_path):
    uri = absolute_sqlite_uri("sqlite:///data/test/mlflow.db", tmp_path)
    assert sqlite_path(uri) == (tmp_path / "data/test/mlflow.db").resolve()
    assert sqlite_path("sqlite:///mlflow.db") is None  # relative: anchor it first
    assert sqlite_path("http://127.0.0.1:5000") is None
    assert sqlite_path(None) is None


def test_experiment_is_named_after_the_pipelines():
    assert experiment_name(["wavetoken"]) == "wavetoken"
    assert experiment_name(["__default__"]) == "icml25"
    assert experiment_name(None) == "icml25"
    assert experiment_name(["a", "b"]) == "a+b"


def test_parameters_are_logged_once_per_run(monkeypatch):
    import mlflow

    from icml25.hooks import MlflowParamsOnceHook

    calls = []
    monkeypatch.setattr(mlflow, "log_param", lambda name, value: calls.append((name, value)))
    hook = MlflowParamsOnceHook()
    hook.run_id = "run-a"
    for _ in range(3):  # three nodes reading the same parameters
        hook._log_param("model.d_model", 64)
        hook._log_param("seeds", [0, 1])
    assert calls == [("model.d_model", 64), ("seeds", [0, 1])]
    hook._log_param("model.d_model", 128)  # a changed value still goes to MLflow (which refuses it)
    hook.run_id = "run-b"  # a new run logs everything again
    hook._log_param("model.d_model", 64)
    assert calls[2:] == [("model.d_model", 128), ("model.d_model", 64)]


def test_kedro_mlflow_hook_is_replaced_not_doubled():
    from kedro.framework.hooks.manager import (
        _create_hook_manager,
        _register_hooks,
        _register_hooks_entry_points,
    )
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    from icml25 import settings

    manager = _create_hook_manager()
    _register_hooks(manager, settings.HOOKS)
    _register_hooks_entry_points(manager, settings.DISABLE_HOOKS_FOR_PLUGINS)
    mlflow_hooks = [p for p in manager.get_plugins() if isinstance(p, MlflowHook)]
    assert [type(h).__name__ for h in mlflow_hooks] == ["MlflowParamsOnceHook"]
