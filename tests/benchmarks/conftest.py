"""What every paper's benchmark measures the same way: its default run, end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

KEDRO = str(Path(sys.executable).parent / "kedro")


def run_kedro(project: Path, *args: str) -> tuple[float, float]:
    """``kedro run <args>`` in ``project``; returns (wall seconds, peak RSS MiB of that run).

    The peak comes from ``wait4`` on this child alone (its own waited-for subprocesses
    included), so runs measured one after the other in a session do not mix. The run's log and
    progress bars go to ``<project>/kedro_run_<n>.log`` (a file, not a pipe: an hour of progress
    bars would fill a pipe nobody reads and stall the run); its tail is raised on failure.
    """
    log = project / f"kedro_run_{len(list(project.glob('kedro_run_*.log')))}.log"
    start = time.perf_counter()
    with log.open("wb") as sink:
        proc = subprocess.Popen([KEDRO, "run", *args], cwd=project, stdout=sink,
                                stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"kedro run {' '.join(args)} failed (log: {log}):\n"
                           f"{log.read_bytes().decode(errors='replace')[-3000:]}")
    return seconds, usage.ru_maxrss / 1024


@pytest.fixture
def default_run(benchmark, kedro_project):
    """``default_run(pipeline)``: the pipeline's default configuration (conf/base) run once in a
    throw-away project; wall time and peak RSS go into the benchmark's extra_info."""

    def measure(pipeline: str, *extra: str) -> dict[str, float]:
        result: dict[str, float] = {}

        def once() -> None:
            result["wall_seconds"], result["peak_rss_mib"] = run_kedro(
                kedro_project, f"--pipeline={pipeline}", *extra)

        benchmark.pedantic(once, rounds=1, iterations=1)
        benchmark.extra_info.update(result)
        print(f"default {pipeline} run: {result['wall_seconds']:.0f} s, "
              f"peak RSS {result['peak_rss_mib']:.0f} MiB")
        return result

    return measure


@pytest.fixture(name="run_kedro")
def run_kedro_fixture():
    """:func:`run_kedro` for benchmarks that time several runs themselves."""
    return run_kedro
