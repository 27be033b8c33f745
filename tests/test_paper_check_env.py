"""conf/paper_check, the CPU dry run of the paper configs: its own data tree and store, and the
start-of-run refusal of a room it does not cover or of a device other than the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from icml25 import settings
from icml25.preflight import PreflightError, check_cpu_dry_run

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
COVERED = sorted(p.stem.removeprefix("parameters_")
                 for p in (CONF / "paper_check").glob("parameters_*.yml"))


def _loader(env: str):
    return settings.CONFIG_LOADER_CLASS(str(CONF), env=env, **settings.CONFIG_LOADER_ARGS)


def test_paper_check_is_a_cpu_dry_run_with_its_own_tree_and_store():
    loader = _loader("paper_check")
    assert loader["globals"]["cpu_dry_run"] is True
    catalog = loader["catalog"]
    assert catalog["{name}.claims"]["filepath"] == "data/paper_check/08_reporting/{name}/claims.json"
    assert loader["mlflow"]["tracking"]["experiment"]["create_experiment_kwargs"] == {
        "artifact_location": "data/paper_check/mlruns"}


@pytest.mark.parametrize("room", COVERED)
def test_every_covered_room_runs_on_the_cpu(room):
    params = _loader("paper_check")["parameters"]
    check_cpu_dry_run("paper_check", CONF, {room: params[room]}, ROOT)  # raises if not


def test_a_device_other_than_cpu_is_refused_naming_key_and_file(tmp_path):
    (tmp_path / "conf" / "paper_check").mkdir(parents=True)
    (tmp_path / "conf" / "paper_check" / "parameters_room.yml").write_text("room: {}\n")
    conf = tmp_path / "conf"
    with pytest.raises(PreflightError, match=r"parameter room\.train\.device is 'cuda'.*"
                                             r"set it to cpu in conf/paper_check/parameters_room"):
        check_cpu_dry_run("paper_check", conf, {"room": {"train": {"device": "cuda"}}}, tmp_path)
    with pytest.raises(PreflightError, match=r"parameter room\.device is 'auto'"):
        check_cpu_dry_run("paper_check", conf, {"room": {"device": "auto", "x": 1}}, tmp_path)
    check_cpu_dry_run("paper_check", conf, {"room": {"device": "cpu", "m": {"device": "cpu"}}})


def test_a_room_without_a_dry_run_config_is_refused(tmp_path):
    (tmp_path / "paper_check").mkdir()
    with pytest.raises(PreflightError, match=r"frugal has no CPU dry run yet.*"
                                             r"parameters_frugal\.yml does not exist"):
        check_cpu_dry_run("paper_check", tmp_path, {"frugal": {"device": "cpu"}})


@pytest.mark.parametrize("room", COVERED)
def test_every_covered_room_validates_and_keeps_a_step_formula(room):
    from icml25.core.paper_check import count_from_parameters
    from icml25.core.params import validate_parameters
    from icml25.pipeline_registry import parameter_models

    params = _loader("paper_check")["parameters"]
    paper = _loader("paper")["parameters"]
    validate_parameters(parameter_models()[room], params[room], room)
    spec = (params.get("paper_check") or {}).get(room) or {}  # none: a room with no training
    for key in ("steps", "batch"):
        if key not in spec:
            continue
        assert count_from_parameters(spec[key], params[room], room) >= 1
        # the dry run cuts counts, never above the paper's
        assert (count_from_parameters(spec[key], params[room], room)
                <= count_from_parameters(spec[key], paper[room], room))
