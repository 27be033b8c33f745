"""The CPU dry run of a paper config end to end (docs/scale.md): the fastest covered paper runs
through a real KedroSession on conf/paper_check, writes its outputs and its paper_check.json, and
logs the paper_check metrics to its own MLflow store. ``make paper-check`` runs every covered
paper. The fastest covered paper's dry run took two minutes or more on the project's 2-core
machine (docs/scale.md's table), over the minute a test of `make test` may take: it is marked
``paper_check`` and runs in `make test-full` and `make paper-check-test`. sparse_iht's dry run
(about 40 s, no network trained) runs in `make test`."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")

#: a covered paper whose dry run is among the fastest (measured: docs/scale.md's table) and
#: needs nothing outside the project (frugal's paper corpus is a Debian package)
FASTEST = "wavetoken"


@pytest.mark.paper_check
def test_the_fastest_dry_run_writes_its_outputs_and_paper_check(run_pipeline, kedro_project):
    run_pipeline(FASTEST, env="paper_check")
    tree = kedro_project / "data" / "paper_check"
    claims = json.loads((tree / "08_reporting" / FASTEST / "claims.json").read_text())
    assert claims["claims"]
    report = json.loads((tree / "08_reporting" / FASTEST / "paper_check.json").read_text())
    assert report["layers"] == ["base", "paper", "paper_check"]
    assert report["unmeasured"] == []
    step = report["per_step"]
    assert step["parameters"] > 0 and step["flops"] > 0 and step["activation_bytes"] > 0
    assert report["paper"]["steps_formula_matches_dry_run"] is True
    h100 = report["h100"]
    assert math.isclose(h100["seconds"], h100["steps"] * h100["flops_per_step"]
                        / (h100["mfu"] * h100["peak_flops"]))
    assert report["dry_run"]["peak_rss_bytes"] > 0 and report["dry_run"]["optimizer_steps"] > 0
    # the run's own MLflow store got the metrics
    with sqlite3.connect(tree / "mlflow.db") as db:
        keys = {k for (k,) in db.execute("select distinct key from metrics")}
    assert {"paper_check.parameters", "paper_check.flops_per_step",
            "paper_check.h100_hours"} <= keys
    assert not (kedro_project / "data" / "paper").exists()  # nothing lands in the paper tree


def test_a_dry_run_without_training_reports_its_time_and_memory(run_pipeline, kedro_project):
    """sparse_iht (no network; about 40 s): the part of the dry runs that fits `make test`."""
    run_pipeline("sparse_iht", env="paper_check")
    tree = kedro_project / "data" / "paper_check"
    assert json.loads((tree / "08_reporting" / "sparse_iht" / "claims.json").read_text())["claims"]
    report = json.loads((tree / "08_reporting" / "sparse_iht" / "paper_check.json").read_text())
    assert report["models"] == [] and "no training step" in report["paper"]["note"]
    assert report["dry_run"]["wall_seconds"] > 0 and report["dry_run"]["peak_rss_bytes"] > 0
    with sqlite3.connect(tree / "mlflow.db") as db:
        keys = {k for (k,) in db.execute("select distinct key from metrics")}
    assert {"paper_check.dry_run_seconds", "paper_check.dry_run_peak_rss_bytes"} <= keys
