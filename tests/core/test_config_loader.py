"""ProjectConfigLoader's fast parameters equal Kedro's OmegaConfigLoader's, values and types."""

from __future__ import annotations

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


@pytest.mark.parametrize("env", ["base", *ENVS])
def test_parameters_equal_kedros_in_every_environment(env, monkeypatch):
    ours, kedro = _both(ROOT / "conf", env)
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
