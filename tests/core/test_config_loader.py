"""ProjectConfigLoader's fast parameters equal Kedro's OmegaConfigLoader's, values and types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader

from icml25.core import config_loader as fast
from icml25.core.config_loader import ProjectConfigLoader
from icml25.settings import CONFIG_LOADER_ARGS

ROOT = Path(__file__).resolve().parents[2]
ENVS = sorted(p.name for p in (ROOT / "conf").iterdir() if p.is_dir() and p.name != "base")


def _typed(value):
    """The tree with every leaf's type beside it, so 1 and 1.0 and True differ."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


def _both(conf: Path, env: str, runtime_params=None, **args):
    kwargs = {**CONFIG_LOADER_ARGS, **args}
    ours = ProjectConfigLoader(str(conf), env=env, runtime_params=runtime_params, **kwargs)
    kedro = OmegaConfigLoader(str(conf), env=env, runtime_params=runtime_params, **kwargs)
    return ours, kedro


def _layered(conf: Path, env: str) -> bool:
    return len(fast.environment_chain(conf, "base", env)) > 2


def _omegaconf_path(loader: ProjectConfigLoader, monkeypatch) -> None:
    """Send ``loader``'s parameters down OmegaConf's path (its fallback)."""
    def refuse(self):
        raise fast._Fallback("forced by the test")

    monkeypatch.setattr(loader, "_plain_parameters", refuse.__get__(loader))


@pytest.mark.parametrize("env", ["base", *ENVS])
def test_parameters_equal_kedros_in_every_environment(env, monkeypatch):
    ours, kedro = _both(ROOT / "conf", env)
    if _layered(ROOT / "conf", env):  # Kedro alone has no layers: our OmegaConf path is the judge
        _omegaconf_path(kedro := ProjectConfigLoader(str(ROOT / "conf"), env=env,
                                                     **CONFIG_LOADER_ARGS), monkeypatch)
    expected = kedro["parameters"]
    # the project's own files take the fast path to its end (a fallback would append nothing)
    calls = []
    original = fast.ProjectConfigLoader._plain_parameters

    def counted(self):
        result = original(self)
        calls.append(1)
        return result

    monkeypatch.setattr(fast.ProjectConfigLoader, "_plain_parameters", counted)
    got = ours["parameters"]
    assert calls == [1]
    assert _typed(got) == _typed(expected)
    assert "wavetoken" in got and len(got) >= 20


def _conf(tmp_path: Path, files: dict[str, str], env_files: dict[str, str] | None = None,
          globals_text: str = "data_root: data\nn: 3\n") -> Path:
    conf = tmp_path / "conf"
    for env, contents in (("base", files), ("test", env_files or {})):
        (conf / env).mkdir(parents=True, exist_ok=True)
        for name, text in contents.items():
            (conf / env / name).write_text(text)
    (conf / "base" / "globals.yml").write_text(globals_text)
    return conf


TRICKY = """\
a:
  float_e: 1e-3
  float_dot: 3.
  exp_plus: 1.5e+2
  int: 10
  neg: -7
  inf: .inf
  nan_text: nan
  date_like: 2024-01-02
  yes_word: yes
  on: on
  null_word: ~
  empty:
  octal_like: 0o17
  hex: 0x1F
  underscore: 1_000
  sexagesimal: 1:30
  quoted: "1e-3"
  path: ${globals:data_root}/01_raw/a
  whole: ${globals:n}
  list: [1, 2.5, "x", null, {k: v}]
  nested: {deep: {deeper: [true, false]}}
_hidden_key: 1
"""


def test_yaml_types_globals_and_the_soft_merge_equal_kedros(tmp_path):
    conf = _conf(tmp_path, {"parameters_a.yml": TRICKY, "parameters_b.yml": "b: {x: 1, y: [1]}\n"},
                 {"parameters_a.yml": "a: {int: 11, nested: {deep: {extra: 1}}, list: [0]}\n",
                  "parameters_b.yml": "b: {y: null, z: {w: 2}}\n"})
    for env in ("base", "test"):
        ours, kedro = _both(conf, env)
        got, expected = ours["parameters"], kedro["parameters"]
        assert _typed(got) == _typed(expected), env
    assert got["a"]["int"] == 11 and got["a"]["path"] == "data/01_raw/a" and got["a"]["whole"] == 3
    assert got["a"]["nested"]["deep"] == {"deeper": [True, False], "extra": 1}
    destructive, kedro_d = _both(conf, "test", merge_strategy={})
    assert _typed(destructive["parameters"]) == _typed(kedro_d["parameters"])
    assert destructive["parameters"]["a"] == {"int": 11, "nested": {"deep": {"extra": 1}},
                                              "list": [0]}


@pytest.mark.parametrize("text", [
    "a: ${b}\nb: 1\n",                      # a node interpolation
    "a: ${oc.env:HOME}\n",                  # another resolver
    "a: ???\n",                             # OmegaConf's missing value
    "a: ${globals:missing}\n",              # a globals key that does not exist
    "a: !!set {x, y}\n",                    # a type OmegaConf rejects
    "a: x ${globals:n} ${b}\nb: 1\n",       # mixed interpolations
])
def test_what_the_fast_path_cannot_decide_goes_to_omegaconf(tmp_path, text):
    conf = _conf(tmp_path, {"parameters.yml": text})
    ours, kedro = _both(conf, "base")
    try:
        expected = ("ok", _typed(kedro["parameters"]))
    except Exception as exc:
        expected = ("error", type(exc))
    try:
        got = ("ok", _typed(ours["parameters"]))
    except Exception as exc:
        got = ("error", type(exc))
    assert got == expected


def test_kedros_errors_stay_kedros(tmp_path):
    # two files of one environment sharing a key
    conf = _conf(tmp_path, {"parameters_a.yml": "x: {y: 1}\n", "parameters_b.yml": "x: {y: 2}\n"})
    ours, _ = _both(conf, "base")
    with pytest.raises(ValueError, match="Duplicate keys found"):
        ours["parameters"]
    # a key twice in one file
    conf = _conf(tmp_path / "dup", {"parameters.yml": "x: 1\nx: 2\n"})
    ours, kedro = _both(conf, "base")
    with pytest.raises(Exception) as kedro_error:
        kedro["parameters"]
    with pytest.raises(type(kedro_error.value)):
        ours["parameters"]
    # invalid YAML
    conf = _conf(tmp_path / "bad", {"parameters.yml": "x: [1, 2\n"})
    ours, _ = _both(conf, "base")
    with pytest.raises(Exception, match="Invalid YAML or JSON file"):
        ours["parameters"]


def test_runtime_params_and_set_keys_use_kedros_path(tmp_path):
    conf = _conf(tmp_path, {"parameters.yml": "a: {b: 1, c: 2}\n"})
    ours, kedro = _both(conf, "base", runtime_params={"a": {"b": 5}})
    assert ours["parameters"] == kedro["parameters"] == {"a": {"b": 5, "c": 2}}
    ours, _ = _both(conf, "base")
    ours["parameters"] = {"set": 1}
    assert ours["parameters"] == {"set": 1}


def test_the_project_reads_its_configuration_with_it():
    from icml25 import settings

    assert settings.CONFIG_LOADER_CLASS is ProjectConfigLoader
    assert issubclass(ProjectConfigLoader, OmegaConfigLoader)


# ----------------------------------------------------------------------- layered environments
def _layers(tmp_path: Path) -> Path:
    """base -> mid -> top (top declares ``_parent: mid``), every key type in each layer."""
    conf = tmp_path / "conf"
    layers = {
        "base": {"globals.yml": "data_root: data\nn: 1\n",
                 "parameters_a.yml": "a: {x: 1, y: 1, z: 1, path: '${globals:data_root}/p'}\n",
                 "catalog.yml": "d: {type: json.JSONDataset, filepath: '${globals:data_root}/d.json'}\n",
                 "mlflow.yml": "server: {uri: base, keep: 1}\n",
                 "dask.yml": "n_workers: 2\nthreads_per_worker: 1\n"},
        "mid": {"globals.yml": "data_root: data/mid\nn: 2\n",
                "parameters_a.yml": "a: {y: 2, z: 2}\n",
                "mlflow.yml": "server: {uri: mid}\n",
                "dask.yml": "n_workers: 8\n"},
        "top": {"globals.yml": "_parent: mid\ndata_root: data/top\n",
                "parameters_a.yml": "a: {z: 3, w: '${globals:n}'}\n",
                "mlflow.yml": "server: {uri: top}\n"},
    }
    for env, files in layers.items():
        (conf / env).mkdir(parents=True)
        for name, text in files.items():
            (conf / env / name).write_text(text)
    return conf


@pytest.mark.parametrize("path", ["fast", "omegaconf"])
def test_a_declared_parent_layers_every_key_in_order(tmp_path, monkeypatch, path):
    conf = _layers(tmp_path)
    loader = ProjectConfigLoader(str(conf), env="top", **CONFIG_LOADER_ARGS)
    if path == "omegaconf":
        _omegaconf_path(loader, monkeypatch)
    assert loader.environments() == ["base", "mid", "top"]
    # each layer over the one below: top's z, mid's y, base's x; globals merged the same way
    assert loader["parameters"] == {"a": {"x": 1, "y": 2, "z": 3, "w": 2,
                                          "path": "data/top/p"}}
    assert loader["globals"] == {"data_root": "data/top", "n": 2}  # _parent is not a global
    assert loader["catalog"]["d"]["filepath"] == "data/top/d.json"
    assert loader["mlflow"] == {"server": {"uri": "top", "keep": 1}}
    assert loader["dask"] == {"n_workers": 8, "threads_per_worker": 1}
    # the parent alone is the usual two-layer environment, as Kedro reads it
    mid = ProjectConfigLoader(str(conf), env="mid", **CONFIG_LOADER_ARGS)
    kedro_mid = OmegaConfigLoader(str(conf), env="mid", **CONFIG_LOADER_ARGS)
    assert mid.environments() == ["base", "mid"]
    for key in ("parameters", "catalog", "mlflow", "dask", "globals"):
        assert mid[key] == kedro_mid[key], key


def test_runtime_params_stay_on_top_of_every_layer(tmp_path):
    conf = _layers(tmp_path)
    loader = ProjectConfigLoader(str(conf), env="top", runtime_params={"a": {"z": 9, "y": 8}},
                                 **CONFIG_LOADER_ARGS)
    assert loader["parameters"]["a"] == {"x": 1, "y": 8, "z": 9, "w": 2, "path": "data/top/p"}


def test_a_destructive_merge_replaces_top_level_keys_layer_by_layer(tmp_path):
    conf = _layers(tmp_path)
    loader = ProjectConfigLoader(str(conf), env="top", **{**CONFIG_LOADER_ARGS,
                                                          "merge_strategy": {}})
    assert loader["parameters"] == {"a": {"z": 3, "w": 2}}
    assert loader["mlflow"] == {"server": {"uri": "top"}}


@pytest.mark.parametrize(("declared", "message"), [
    ("_parent: nowhere\n", r"top/globals.yml: _parent: 'nowhere' names no environment"),
    ("_parent: [mid]\n", r"top/globals.yml: _parent must name an environment"),
    ("_parent: top\n", r"top/globals.yml: _parent: 'top' makes a cycle"),
])
def test_a_bad_parent_is_refused_naming_the_file(tmp_path, declared, message):
    conf = _layers(tmp_path)
    (conf / "top" / "globals.yml").write_text(declared)
    with pytest.raises(fast.EnvironmentLayerError, match=message):
        ProjectConfigLoader(str(conf), env="top", **CONFIG_LOADER_ARGS)


def test_a_cycle_through_a_parent_names_the_declaring_file(tmp_path):
    conf = _layers(tmp_path)
    (conf / "mid" / "globals.yml").write_text("_parent: top\n")
    with pytest.raises(fast.EnvironmentLayerError,
                       match=r"mid/globals.yml: _parent: 'top' makes a cycle .*top -> mid -> top"):
        ProjectConfigLoader(str(conf), env="top", **CONFIG_LOADER_ARGS)


def test_a_missing_file_in_a_middle_layer_is_kedros_error(tmp_path):
    from kedro.config import MissingConfigException

    conf = _layers(tmp_path)
    for path in conf.rglob("parameters*"):
        path.unlink()
    loader = ProjectConfigLoader(str(conf), env="top", **CONFIG_LOADER_ARGS)
    with pytest.raises(MissingConfigException, match=r"base.* or .*mid.* or .*top"):
        loader["parameters"]


def test_paper_check_is_paper_with_counts_cut_and_its_own_data_tree():
    loader = ProjectConfigLoader(str(ROOT / "conf"), env="paper_check", **CONFIG_LOADER_ARGS)
    paper = ProjectConfigLoader(str(ROOT / "conf"), env="paper", **CONFIG_LOADER_ARGS)
    assert loader.environments() == ["base", "paper", "paper_check"]
    assert loader["globals"]["data_root"] == "data/paper_check"
    assert loader["mlflow"]["server"]["mlflow_tracking_uri"] == "sqlite:///data/paper_check/mlflow.db"
    params, paper_params = loader["parameters"], paper["parameters"]
    # a room without a paper_check file is exactly its paper config (paths aside)
    covered = {p.stem.removeprefix("parameters_") for p in (ROOT / "conf" / "paper_check")
               .glob("parameters_*.yml")}
    for room in set(paper_params) - covered:
        assert (json.dumps(params[room], sort_keys=True).replace("data/paper_check/", "data/paper/")
                == json.dumps(paper_params[room], sort_keys=True)), room
