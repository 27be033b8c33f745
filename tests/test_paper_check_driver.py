"""``make paper-check``'s driver (icml25.core.paper_check_run): which rooms run on one core, that
those run side by side each pinned to a core of its own, the every-core rooms after them alone,
and that a failure stops the dispatch and names the room."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from icml25 import settings
from icml25.core import paper_check_run as run

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def _walk(tree: Any, path: str = ""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _walk(value, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _walk(value, f"{path}[{i}]")
    else:
        yield path, tree


def test_one_core_rooms_are_declared_and_keep_to_one_core():
    loader = settings.CONFIG_LOADER_CLASS(str(CONF), env="paper_check",
                                          **settings.CONFIG_LOADER_ARGS)
    params = loader["parameters"]
    rooms = run.covered_rooms(CONF)
    single = run.one_core_rooms(params, rooms)
    assert {"robust_rl", "distributed_estimation", "sparse_iht"} <= single
    assert single < set(rooms)
    for room in single:
        # every thread count and worker pool of a one-core room is 1
        for path, value in _walk(params[room], room):
            leaf = path.rsplit(".", 1)[-1]
            if leaf in ("num_threads", "n_workers"):
                assert value == 1, f"{path} is {value!r} in a one-core dry run"


@pytest.mark.parametrize("bad", [2, 0, "1", True, 1.0])
def test_a_bad_cores_value_names_the_key(bad):
    with pytest.raises(ValueError, match=r"paper_check\.room\.cores: got"):
        run.one_core_rooms({"paper_check": {"room": {"cores": bad}}}, ["room"])


def test_the_plan_runs_one_core_rooms_longest_first_then_the_rest_in_order():
    first, rest = run.plan(["a", "b", "c", "d"], {"b", "d", "c"}, {"b": 5.0, "d": 50.0})
    assert [j.room for j in first] == ["d", "b", "c"]
    assert all(j.one_core for j in first)
    assert [j.room for j in rest] == ["a"]


def _project(tmp_path: Path, rooms: dict[str, bool]) -> Path:
    conf = tmp_path / "conf"
    (conf / "base").mkdir(parents=True)
    (conf / "paper_check").mkdir()
    (conf / "base" / "parameters.yml").write_text("{}\n")
    for room, one_core in rooms.items():
        text = f"{room}:\n  x: 1\n"
        if one_core:
            text += f"paper_check:\n  {room}:\n    cores: 1\n"
        (conf / "paper_check" / f"parameters_{room}.yml").write_text(text)
    return tmp_path


def _fake_room(out: Path, fail: set[str]):
    """A dry run that records its CPU affinity and its start and end times."""
    def command(room: str) -> list[str]:
        code = (
            "import json, os, sys, time\n"
            "t0 = time.time(); time.sleep(0.6)\n"
            f"json.dump({{'cpus': sorted(os.sched_getaffinity(0)), 'start': t0, "
            f"'end': time.time(), 'omp': os.environ.get('OMP_NUM_THREADS'), "
            f"'blas': os.environ.get('OPENBLAS_NUM_THREADS')}}, "
            f"open({str(out / room)!r} + '.json', 'w'))\n"
            f"print('last line of {room}')\n"
            f"sys.exit({1 if room in fail else 0})\n")
        return [sys.executable, "-c", code]
    return command


def test_one_core_rooms_run_side_by_side_pinned_then_the_rest_alone(tmp_path, monkeypatch,
                                                                     capsys):
    cpus = sorted(os.sched_getaffinity(0))
    project = _project(tmp_path, {"a": False, "b": True, "c": True, "d": False})
    monkeypatch.setattr(run, "_command", _fake_room(tmp_path, set()))
    monkeypatch.setattr(run, "_init_store", lambda project: None)
    assert run.main(["--project", str(project), "--lanes", "2"]) == 0
    rec = {r: json.loads((tmp_path / f"{r}.json").read_text()) for r in "abcd"}
    assert all(r["blas"] == "1" for r in rec.values())
    assert rec["b"]["omp"] == rec["c"]["omp"] == "1"
    assert rec["a"]["omp"] == os.environ.get("OMP_NUM_THREADS")
    if len(cpus) >= 2:
        # b and c overlap in time, each on one CPU of its own
        assert len(rec["b"]["cpus"]) == len(rec["c"]["cpus"]) == 1
        assert rec["b"]["cpus"] != rec["c"]["cpus"]
        assert rec["b"]["start"] < rec["c"]["end"] and rec["c"]["start"] < rec["b"]["end"]
    # the every-core rooms: not pinned, after every one-core room, one at a time
    assert rec["a"]["cpus"] == rec["d"]["cpus"] == cpus
    one_core_end = max(rec["b"]["end"], rec["c"]["end"])
    assert rec["a"]["start"] >= one_core_end and rec["d"]["start"] >= rec["a"]["end"]
    summary = json.loads((project / run.DATA_ROOT / "paper_check_run.json").read_text())
    assert [r["room"] for r in summary["rooms"]] == ["b", "c", "a", "d"]
    assert all(r["returncode"] == 0 for r in summary["rooms"])
    out = capsys.readouterr().out
    assert "4 papers in" in out
    # each room says when it starts and how it ended, with where it ran
    assert "== paper-check: a: started (every core)" in out
    assert "== paper-check: a: ok in" in out
    if len(cpus) >= 2:
        assert "b: started (one core, cpu" in out


def test_one_lane_runs_everything_one_at_a_time_unpinned(tmp_path, monkeypatch):
    cpus = sorted(os.sched_getaffinity(0))
    project = _project(tmp_path, {"b": True, "c": True})
    monkeypatch.setattr(run, "_command", _fake_room(tmp_path, set()))
    monkeypatch.setattr(run, "_init_store", lambda project: pytest.fail("no store set-up in one lane"))
    assert run.main(["--project", str(project), "--lanes", "1"]) == 0
    b, c = (json.loads((tmp_path / f"{r}.json").read_text()) for r in "bc")
    assert b["cpus"] == c["cpus"] == cpus
    assert b["end"] <= c["start"] or c["end"] <= b["start"]


def test_a_failed_room_stops_the_dispatch_and_prints_its_log(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path, {"a": False, "b": True, "c": False})
    monkeypatch.setattr(run, "_command", _fake_room(tmp_path, {"b"}))
    monkeypatch.setattr(run, "_init_store", lambda project: None)
    assert run.main(["--project", str(project), "--lanes", "2"]) == 1
    err = capsys.readouterr().err
    assert "b failed (exit 1)" in err and "last line of b" in err
    assert "not run after the failure: ['a', 'c']" in err
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "c.json").exists()


def test_skip_and_unknown_rooms(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path, {"a": False, "b": True})
    monkeypatch.setattr(run, "_command", _fake_room(tmp_path, set()))
    assert run.main(["--project", str(project), "--skip", "b", "--lanes", "2"]) == 0
    assert (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()
    assert run.main(["--project", str(project), "--rooms", "zz"]) == 2
    assert "no dry-run config for ['zz']" in capsys.readouterr().err
    assert run.main(["--project", str(project), "--lanes", "0"]) == 2


def test_without_cpu_affinity_the_lanes_run_side_by_side_unpinned(tmp_path, monkeypatch, capsys):
    """Where the OS has no CPU affinity calls (macOS), one-core rooms still share the machine
    two at a time, without pinning."""
    cpus = sorted(os.sched_getaffinity(0))
    project = _project(tmp_path, {"b": True, "c": True})
    monkeypatch.setattr(run, "_command", _fake_room(tmp_path, set()))
    monkeypatch.setattr(run, "_init_store", lambda project: None)
    monkeypatch.delattr(run.os, "sched_setaffinity")
    assert run.main(["--project", str(project), "--lanes", "2"]) == 0
    b, c = (json.loads((tmp_path / f"{r}.json").read_text()) for r in "bc")
    assert b["cpus"] == c["cpus"] == cpus
    assert b["start"] < c["end"] and c["start"] < b["end"]
    assert "b: started (one core, not pinned)" in capsys.readouterr().out
