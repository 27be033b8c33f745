"""`kedro run` without --pipeline: every paper on conf/test in one Kedro run, then the scorecard.

Each paper's own end-to-end test runs it on conf/test and tests/test_project.py checks that
``__default__`` holds every paper's nodes with the scorecard after every claims node, so this run
of all of them together (about 200 s on 2 cores) is left to ``make test-full``.
"""

from __future__ import annotations

import json

import mlflow
import pytest

from icml25.pipeline_registry import paper_pipeline_names


@pytest.mark.slow
@pytest.mark.whole_project
def test_every_paper_and_the_scorecard_run_in_one_session(kedro_project, run_pipeline):
    run_pipeline("__default__", env="test")
    papers = paper_pipeline_names()
    for name in papers:
        claims = json.loads((kedro_project / f"data/08_reporting/{name}/claims.json").read_text())
        assert claims["pipeline"] == name and claims["n_claims"] >= 1
    scorecard = json.loads((kedro_project / "data/08_reporting/scorecard.json").read_text())
    assert scorecard["n_run"] == len(papers)
    rows = {row["name"]: row for row in scorecard["papers"]}
    for name in papers:
        assert rows[name]["n_claims"] >= 1 and rows[name]["run"]["env"] == "test"

    # one parent run; each paper's variant runs are tagged with their own pipeline
    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["icml25"], output_format="list")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    tagged = {r.data.tags.get("icml25.pipeline") for r in runs} - {None}
    assert tagged == set(papers)
