from pathlib import Path

from icml25.hooks import absolute_sqlite_uri, experiment_name


def test_relative_sqlite_store_is_anchored_at_the_project_root(tmp_path):
    assert absolute_sqlite_uri("sqlite:///mlflow.db", tmp_path) == (
        f"sqlite:///{(tmp_path / 'mlflow.db').resolve().as_posix()}")
    absolute = f"sqlite:///{Path('/srv/mlflow.db').as_posix()}"
    assert absolute_sqlite_uri(absolute, tmp_path) == absolute
    assert absolute_sqlite_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    assert absolute_sqlite_uri(None, tmp_path) is None


def test_experiment_is_named_after_the_pipelines():
    assert experiment_name(["wavetoken"]) == "wavetoken"
    assert experiment_name(["__default__"]) == "icml25"
    assert experiment_name(None) == "icml25"
    assert experiment_name(["a", "b"]) == "a+b"
