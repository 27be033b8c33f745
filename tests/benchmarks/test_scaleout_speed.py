"""Scale-out measurements (run with `make bench`; never part of `make test`).

The `__default__` pipeline (every paper, then the scorecard) run twice in one benchmark: once
with Kedro's SequentialRunner and once with icml25's DaskRunner on a 2-worker LocalCluster.
Both wall times land in the benchmark's extra_info. `ICML25_BENCH_ENV` picks the configuration
environment (default `base`; `test` gives a quick measurement of the same code path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEDRO = str(Path(os.sys.executable).with_name("kedro"))


def _project(tmp: Path) -> Path:
    project = tmp / "project"
    (project / "src").mkdir(parents=True)
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    for name in ("pyproject.toml", ".telemetry"):
        shutil.copy(ROOT / name, project / name)
    return project


def _timed(project: Path, *extra: str) -> float:
    env = os.environ.get("ICML25_BENCH_ENV", "base")
    t0 = time.perf_counter()
    subprocess.run([KEDRO, "run", f"--env={env}", *extra], cwd=project, check=True,
                   capture_output=True, text=True)
    return time.perf_counter() - t0


@pytest.mark.benchmark(group="scale-out")
def test_default_pipeline_sequential_vs_dask_two_workers(benchmark, tmp_path):
    times: dict[str, float] = {}

    def both() -> None:
        times["sequential_s"] = _timed(_project(tmp_path / "seq"))
        times["dask_2_workers_s"] = _timed(
            _project(tmp_path / "dask"), "--runner=icml25.runners.DaskRunner")

    benchmark.pedantic(both, rounds=1, iterations=1)
    benchmark.extra_info.update(times)
    benchmark.extra_info["speedup"] = times["sequential_s"] / times["dask_2_workers_s"]
    benchmark.extra_info["env"] = os.environ.get("ICML25_BENCH_ENV", "base")
    assert times["dask_2_workers_s"] > 0
