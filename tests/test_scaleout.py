"""Scale-out: a paper pipeline on a 2-worker Dask LocalCluster, and under torchrun with two
data-parallel gloo processes, gives the sequential run's metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from icml25.runners import DaskRunner
from icml25.runners.dask import configure


def _run(project, runner=None) -> dict:
    bootstrap_project(project)
    with KedroSession.create(project_path=project, env="test") as session:
        session.run(pipeline_names=["wavetoken"], runner=runner)
    return json.loads((project / "data/08_reporting/wavetoken/metrics.json").read_text())


def _torchrun(project: Path) -> dict:
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "kedro", "run",
         "--pipeline=wavetoken", "--env=test"],
        cwd=project, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "joined process group: rank 1 of 2" in proc.stdout + proc.stderr
    return json.loads((project / "data/08_reporting/wavetoken/metrics.json").read_text())


def _close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for variant in b:
        for name, value in b[variant].items():
            assert a[variant][name] == pytest.approx(value, rel=1e-6, abs=1e-9), (variant, name)


@pytest.mark.slow
def test_wavetoken_on_dask_and_under_torchrun_matches_sequential(kedro_project):
    sequential = _run(kedro_project)
    dask = _run(kedro_project, DaskRunner(n_workers=2, threads_per_worker=1))
    assert dask["metrics"] == sequential["metrics"]
    assert dask["per_seed"] == sequential["per_seed"]

    # two data-parallel processes: DDP's averaged gradients may differ from the single-process
    # ones in the last float bits, hence the tolerance
    _close(_torchrun(kedro_project)["metrics"], sequential["metrics"])

    # the variants' runs a worker opened are children of the Dask run's parent, as sequentially
    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["wavetoken"], output_format="list")
    parents = sorted((r for r in runs if "mlflow.parentRunId" not in r.data.tags),
                     key=lambda r: r.info.start_time)
    assert len(parents) == 3  # sequential, Dask, torchrun (rank 0 only)
    for parent in parents:
        children = {r.info.run_name for r in runs
                    if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
        assert {"wavetoken", "chronos_bins_1024"} <= children
    assert parents[1].info.status == "FINISHED"


def test_cluster_settings_come_from_arguments_then_conf_then_defaults():
    configure({"n_workers": 3})
    try:
        assert DaskRunner().settings()["n_workers"] == 3
        assert DaskRunner(n_workers=1).settings()["n_workers"] == 1
        assert DaskRunner().settings()["address"] is None
        with pytest.raises(ValueError, match=r"dask\.threads_per_worker: got 0"):
            DaskRunner(threads_per_worker=0).settings()
        with pytest.raises(ValueError, match="unknown keys"):
            configure({"workers": 2})
    finally:
        configure(None)
