"""``make paper-check``'s driver: every covered paper's CPU dry run, the one-core ones side by side.

``python -m icml25.core.paper_check_run [--skip ROOM ...] [--rooms ROOM ...] [--lanes N]`` runs
``python -m icml25 --pipeline=<room> --env=paper_check`` for every paper with a
``conf/paper_check/parameters_<room>.yml`` (docs/scale.md), each in its own process, with its
output in ``data/paper_check/logs/<room>.log``.

A room whose dry run uses one core declares it, ``paper_check.<room>.cores: 1`` (torch on one
thread, one process, no worker pool; OpenBLAS is held to one thread for every room). Those rooms
run first, as many at a time as there are cores (``--lanes``, default: the CPUs this process may
use), each process pinned to a core of its own, so each still measures one-core rates. The rooms
that use every core run after them, one at a time, alone on the machine. On a one-core machine
or with ``--lanes 1`` everything runs one at a time.

A failed room stops the dispatch of new ones; the rooms already running finish, the failed
room's log tail is printed, and the exit status is 1. ``data/paper_check/paper_check_run.json``
records each room's lane, core, wall time and exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Job", "covered_rooms", "main", "one_core_rooms", "plan"]

DATA_ROOT = Path("data/paper_check")
TAIL_LINES = 80


@dataclass
class Job:
    room: str
    one_core: bool
    wall: float | None = None      # seconds, once finished
    returncode: int | None = None
    core: int | None = None        # the CPU a one-core room was pinned to
    log: Path | None = None


def covered_rooms(conf: Path) -> list[str]:
    """The papers with a dry-run config, sorted."""
    return sorted(p.stem.removeprefix("parameters_")
                  for p in (conf / "paper_check").glob("parameters_*.yml"))


def one_core_rooms(parameters: dict[str, Any], rooms: list[str]) -> set[str]:
    """The rooms whose ``paper_check.<room>.cores`` is 1 (absent: the room uses every core;
    any other value is an error naming the key)."""
    blocks = parameters.get("paper_check") or {}
    out = set()
    for room in rooms:
        cores = (blocks.get(room) or {}).get("cores")
        if cores is None:
            continue
        if isinstance(cores, bool) or not isinstance(cores, int) or cores != 1:
            raise ValueError(f"paper_check.{room}.cores: got {cores!r}; the only value is 1 "
                             f"(a one-core dry run); leave it out for a room that uses every core")
        out.add(room)
    return out


def plan(rooms: list[str], one_core: set[str], last_wall: dict[str, float]) -> tuple[
        list[Job], list[Job]]:
    """(one-core jobs, longest first by the last recorded wall; every-core jobs, in order)."""
    single = sorted((r for r in rooms if r in one_core), key=lambda r: -last_wall.get(r, 0.0))
    return ([Job(r, True) for r in single], [Job(r, False) for r in rooms if r not in one_core])


def _last_walls(project: Path, rooms: list[str]) -> dict[str, float]:
    walls = {}
    for room in rooms:
        path = project / "results" / room / "paper_check.json"
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            walls[room] = float(json.loads(path.read_text())["dry_run"]["wall_seconds"])
    return walls


def _init_store(project: Path) -> None:
    """Set up the dry runs' MLflow store once, before several dry runs open it at once: a Kedro
    context of ``--env=paper_check`` lets kedro-mlflow create the store's tables and its
    configured experiment (each dry run would otherwise race to create that same experiment;
    each room then logs to an experiment of its own, and SQLite serialises their writes)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project)
    with KedroSession.create(project_path=project, env="paper_check") as session:
        session.load_context()


def _tail(path: Path, n: int = TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError as exc:
        return f"(no log: {exc})"


def _command(room: str) -> list[str]:
    """One dry run: ``kedro run`` without the CLI's plugin discovery (``python -m icml25``)."""
    return [sys.executable, "-m", "icml25", f"--pipeline={room}", "--env=paper_check"]


def _run(job: Job, project: Path, logs: Path, core: int | None) -> None:
    job.log = logs / f"{job.room}.log"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if job.one_core:
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    job.core = core
    cmd = _command(job.room)
    where = (f"one core, cpu {core}" if core is not None
             else "one core, not pinned" if job.one_core else "every core")
    print(f"== paper-check: {job.room}: started ({where})", flush=True)
    start = time.perf_counter()
    with job.log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)
        if core is not None:
            # pinned from here (preexec_fn is unsafe with the lanes' threads); the interpreter
            # has started no thread of its own yet, and every later thread and child inherits it
            with contextlib.suppress(ProcessLookupError):   # it has already exited
                os.sched_setaffinity(proc.pid, {core})
        job.returncode = proc.wait()
    job.wall = time.perf_counter() - start
    status = "ok" if job.returncode == 0 else f"FAILED (exit {job.returncode})"
    print(f"== paper-check: {job.room}: {status} in {job.wall:.1f} s ({where}); log {job.log}",
          flush=True)


def _run_lanes(jobs: list[Job], cores: list[int | None], project: Path, logs: Path,
               failed: threading.Event) -> None:
    """Run ``jobs`` in one lane per entry of ``cores``: a lane pins its processes to its core
    (None: not pinned)."""
    todo: queue.Queue[Job] = queue.Queue()
    for job in jobs:
        todo.put(job)

    def lane(core: int | None) -> None:
        while not failed.is_set():
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            _run(job, project, logs, core)
            if job.returncode != 0:
                failed.set()

    threads = [threading.Thread(target=lane, args=(c,)) for c in cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path.cwd())
    parser.add_argument("--skip", nargs="*", default=[],
                        help="rooms to leave out (space- or comma-separated)")
    parser.add_argument("--rooms", nargs="*", default=None,
                        help="only these rooms (default: every covered room)")
    parser.add_argument("--lanes", type=int, default=None,
                        help="one-core dry runs at a time (default: the CPUs this process may use)")
    args = parser.parse_args(argv)
    project = args.project.resolve()
    conf = project / "conf"
    covered = covered_rooms(conf)
    skip = {r for s in args.skip for r in s.replace(",", " ").split()}
    wanted = ([r for s in args.rooms for r in s.replace(",", " ").split()]
              if args.rooms is not None else covered)
    unknown = sorted((set(wanted) | skip) - set(covered))
    if unknown:
        print(f"paper-check: no dry-run config for {unknown}: the covered rooms are {covered}",
              file=sys.stderr)
        return 2
    rooms = [r for r in covered if r in wanted and r not in skip]
    # CPU affinity is Linux's: elsewhere (macOS) the lanes run side by side unpinned
    can_pin = hasattr(os, "sched_getaffinity") and hasattr(os, "sched_setaffinity")
    cpus = sorted(os.sched_getaffinity(0)) if can_pin else list(range(os.cpu_count() or 1))
    lanes = args.lanes if args.lanes is not None else len(cpus)
    if lanes < 1:
        print(f"paper-check: --lanes: got {lanes}; expected >= 1", file=sys.stderr)
        return 2
    from icml25 import settings

    loader = settings.CONFIG_LOADER_CLASS(str(conf), env="paper_check",
                                          **settings.CONFIG_LOADER_ARGS)
    try:
        single = one_core_rooms(loader["parameters"], rooms)
    except ValueError as exc:
        print(f"paper-check: {exc}", file=sys.stderr)
        return 2
    first, rest = plan(rooms, single, _last_walls(project, rooms))
    logs = project / DATA_ROOT / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    width = max(1, min(lanes, len(first)))
    # one lane: nothing beside it, no pinning; more lanes than CPUs: not pinned either
    cores: list[int | None] = (list(cpus[:width]) if can_pin and 1 < width <= len(cpus)
                               else [None] * width)
    if width > 1:
        _init_store(project)
    print(f"== paper-check: {len(rooms)} papers; {len(first)} one-core dry runs {width} at a "
          f"time, then {len(rest)} on every core one at a time", flush=True)
    failed = threading.Event()
    start = time.perf_counter()
    _run_lanes(first, cores, project, logs, failed)
    if not failed.is_set():
        _run_lanes(rest, [None], project, logs, failed)
    total = time.perf_counter() - start
    jobs = first + rest
    record = {"total_seconds": round(total, 1), "lanes": lanes,
              "rooms": [{"room": j.room, "one_core": j.one_core, "core": j.core,
                         "wall_seconds": None if j.wall is None else round(j.wall, 1),
                         "returncode": j.returncode} for j in jobs]}
    (project / DATA_ROOT / "paper_check_run.json").write_text(json.dumps(record, indent=1))
    bad = [j for j in jobs if j.returncode not in (0, None)]
    for job in bad:
        print(f"\n== paper-check: {job.room} failed (exit {job.returncode}); the last "
              f"{TAIL_LINES} lines of {job.log}:\n{_tail(job.log)}", file=sys.stderr)
    not_run = [j.room for j in jobs if j.returncode is None]
    if bad:
        if not_run:
            print(f"== paper-check: not run after the failure: {not_run}", file=sys.stderr)
        return 1
    print(f"== paper-check: {len(jobs)} papers in {total:.0f} s ({total / 60:.1f} min)",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
