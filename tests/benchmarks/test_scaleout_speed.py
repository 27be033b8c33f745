"""Scale-out measurements (run with `make bench`; never part of `make test`).

The `__default__` pipeline (every paper, then the scorecard) run twice in one benchmark: once
with Kedro's SequentialRunner and once with icml25's DaskRunner on a 2-worker LocalCluster.
Both wall times, both peak RSS (of the `kedro run` process tree that was waited for; Dask
workers are children of the nanny, so the Dask figure is the largest single process) and the
claims whose verdict or value differ between the two runs land in the benchmark's extra_info.
`ICML25_BENCH_ENV` picks the configuration environment (default `base`; `test` gives a quick
measurement of the same code path).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def _claims(project: Path) -> dict[str, tuple[str, str]]:
    """``{"<pipeline>: <claim>": (verdict, method value as JSON)}`` of every claims.json the run
    wrote (JSON text, so that two NaNs compare equal)."""
    found = {}
    for path in sorted((project / "data" / "08_reporting").glob("*/claims.json")):
        report = json.loads(path.read_text())
        for claim in report["claims"]:
            found[f"{report['pipeline']}: {claim['claim']}"] = (
                claim["verdict"], json.dumps(claim.get("method_value")))
    return found


@pytest.mark.benchmark(group="scale-out")
def test_default_pipeline_sequential_vs_dask_two_workers(benchmark, kedro_project, run_kedro):
    env_name = os.environ.get("ICML25_BENCH_ENV", "base")
    env = f"--env={env_name}"
    info: dict[str, object] = {}

    def both() -> None:
        info["sequential_s"], info["sequential_peak_rss_mib"] = run_kedro(kedro_project, env)
        info["load_after_sequential"] = os.getloadavg()[1]
        sequential = _claims(kedro_project)
        info["dask_2_workers_s"], info["dask_peak_rss_mib"] = run_kedro(  # same project: every
            kedro_project, env, "--runner=icml25.runners.DaskRunner")    # output is rewritten
        info["load_after_dask"] = os.getloadavg()[1]
        dask = _claims(kedro_project)
        info["n_claims"] = len(sequential)
        info["claims_missing_on_dask"] = sorted(set(sequential) - set(dask))
        info["verdicts_differing"] = sorted(k for k in sequential.keys() & dask.keys()
                                            if sequential[k][0] != dask[k][0])
        info["values_differing"] = sorted(k for k in sequential.keys() & dask.keys()
                                          if sequential[k][1] != dask[k][1])

    benchmark.pedantic(both, rounds=1, iterations=1)
    benchmark.extra_info.update(info)
    benchmark.extra_info["speedup"] = info["sequential_s"] / info["dask_2_workers_s"]
    benchmark.extra_info["env"] = env_name
    assert info["n_claims"] > 0, "the sequential run wrote no claims.json"
    assert not info["claims_missing_on_dask"], info["claims_missing_on_dask"]
