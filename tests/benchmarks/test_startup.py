"""Start-up measurements (run with `make bench`; never part of `make test`).

``kedro run --pipeline=<name>`` imports the registry and the one room it runs (the report
needs only the papers' names); ``kedro registry list`` imports every room's ``pipeline.py``,
``params.py`` and ``nodes.py``. Rooms import their heavy libraries where they are used
(icml25.core.lazy_import), so that cost stays small. Measured here, each in a fresh
interpreter on a temp copy of the project:

- importing ``icml25.settings`` (what Kedro reads to configure the project: MLflow and
  kedro-mlflow are imported only when a session registers its hooks);
- importing ``icml25.pipeline_registry`` and building every pipeline it registers;
- ``kedro registry list``;
- ``kedro run --pipeline=report --env=test``: the seconds until its first node starts
  ("Running node" in the log) and in all, twice: on a fresh MLflow store (the first run creates
  its tables) and on the store the first run left.

Wall times depend on the machine's load, which ``extra_info`` records next to them
(``os.getloadavg``), with the CPU seconds of the measured processes (``cpu_s``, user + system,
less sensitive to the load than wall times). ``kedro registry list`` and ``kedro run`` import
MLflow whatever the project does: kedro-mlflow's CLI plugin, which Kedro loads for every
command of a project, imports it at its top. ``ICML25_BENCH_SRC=/path/to/src`` measures another
checkout's sources with the same libraries, e.g. the code before a change
(``git archive <commit> src | tar -x``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

PYTHON = sys.executable
KEDRO = str(Path(sys.executable).parent / "kedro")
HEAVY = ("torch", "scipy", "sklearn", "pandas", "matplotlib", "mlflow", "transformers")


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("KEDRO_LOGGING_CONFIG", None)
    if os.environ.get("ICML25_BENCH_SRC"):
        env["PYTHONPATH"] = os.environ["ICML25_BENCH_SRC"]
    return env


def _info(benchmark, **extra: object) -> None:
    benchmark.extra_info.update(extra)
    benchmark.extra_info["load_1min"] = os.getloadavg()[0]
    benchmark.extra_info["src"] = os.environ.get("ICML25_BENCH_SRC", "installed icml25")


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _CpuPerRound:
    """CPU seconds of the subprocesses of each round: ``with cpu: ...``, then ``cpu.rounds``."""

    def __init__(self) -> None:
        self.rounds: list[float] = []

    def __enter__(self) -> None:
        self._start = _children_cpu()

    def __exit__(self, *exc: object) -> None:
        self.rounds.append(round(_children_cpu() - self._start, 3))


@pytest.mark.benchmark(group="start-up")
def test_settings_import(benchmark):
    code = (
        "import json, sys\n"
        "import icml25.settings\n"
        f"print(json.dumps([m for m in {(*HEAVY, 'kedro_mlflow')!r} if m in sys.modules]))\n"
    )
    loaded: list[list[str]] = []
    cpu = _CpuPerRound()

    def settings() -> None:
        with cpu:
            out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                                 check=True, env=_env())
        loaded.append(json.loads(out.stdout.strip().splitlines()[-1]))

    benchmark.pedantic(settings, rounds=3, iterations=1)
    _info(benchmark, heavy_libraries_imported=loaded[-1], cpu_s=cpu.rounds)


@pytest.mark.benchmark(group="start-up")
def test_registry_import_and_register(benchmark):
    code = (
        "import json, sys\n"
        "import icml25.pipeline_registry as registry\n"
        "pipelines = registry.register_pipelines()\n"
        "built = [pipelines[name] for name in pipelines]  # each is built when first read\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    loaded: list[list[str]] = []
    cpu = _CpuPerRound()

    def register() -> None:
        with cpu:
            out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                                 check=True, env=_env())
        loaded.append(json.loads(out.stdout.strip().splitlines()[-1]))

    benchmark.pedantic(register, rounds=3, iterations=1)
    _info(benchmark, heavy_libraries_imported=loaded[-1], cpu_s=cpu.rounds)


@pytest.mark.benchmark(group="start-up")
def test_kedro_registry_list(benchmark, kedro_project):
    listed: list[str] = []
    cpu = _CpuPerRound()

    def registry_list() -> None:
        with cpu:
            out = subprocess.run([KEDRO, "registry", "list"], cwd=kedro_project, env=_env(),
                                 capture_output=True, text=True, check=True)
        listed[:] = [line[2:] for line in out.stdout.splitlines() if line.startswith("- ")]

    benchmark.pedantic(registry_list, rounds=3, iterations=1)
    _info(benchmark, pipelines_listed=len(listed), cpu_s=cpu.rounds)
    assert "report" in listed and "__default__" in listed


def _run_report(project: Path) -> tuple[float | None, float, float]:
    """``kedro run --pipeline=report --env=test``: (seconds to its first node, seconds in all,
    CPU seconds in all)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    first = None
    proc = subprocess.Popen([KEDRO, "run", "--pipeline=report", "--env=test"], cwd=project,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if first is None and "Running node" in line:
            first = time.perf_counter() - start
    status = proc.wait()
    total = time.perf_counter() - start
    assert status == 0, "".join(lines[-40:])
    return first, total, round(_children_cpu() - cpu, 3)


@pytest.mark.benchmark(group="start-up")
def test_kedro_run_report_until_its_first_node(benchmark, kedro_project):
    runs: dict[str, tuple[float | None, float, float]] = {}

    def cold_then_warm() -> None:
        runs["fresh_store"] = _run_report(kedro_project)
        runs["existing_store"] = _run_report(kedro_project)

    benchmark.pedantic(cold_then_warm, rounds=1, iterations=1)
    _info(benchmark,
          first_node_s_fresh_mlflow_store=runs["fresh_store"][0],
          total_s_fresh_mlflow_store=runs["fresh_store"][1],
          cpu_s_fresh_mlflow_store=runs["fresh_store"][2],
          first_node_s_existing_mlflow_store=runs["existing_store"][0],
          total_s_existing_mlflow_store=runs["existing_store"][1],
          cpu_s_existing_mlflow_store=runs["existing_store"][2])
    assert runs["existing_store"][0] is not None, "no 'Running node' line in the log"
