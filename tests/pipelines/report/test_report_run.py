"""End to end: the report pipeline through a real KedroSession on conf/test."""

import json

import mlflow

from icml25.core.claims import claims_report


def test_report_runs_and_is_tracked_in_mlflow(kedro_project, run_pipeline):
    run_pipeline("report", env="test")
    card = json.loads((kedro_project / "data/08_reporting/scorecard.json").read_text())
    assert card["n_papers"] == 19
    statuses = {row["name"]: row["status"] for row in card["papers"]}
    assert all(statuses[name] == "not run" for name in statuses)  # nothing ran in this project
    assert card["report_run"]["env"] == "test"
    md = (kedro_project / "data/08_reporting/scorecard.md").read_text()
    assert "0 of 19 papers run" in md
    assert (kedro_project / "data/08_reporting/scorecard.html").read_text().startswith(
        "<!doctype html>")

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["report"], output_format="list")
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["papers_run"] == 0.0
    assert run.data.metrics["claims_inconclusive"] == 0.0
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"scorecard.md", "scorecard.html"} <= artifacts


def test_report_reads_a_paper_result_through_the_catalog(kedro_project, run_pipeline):
    folder = kedro_project / "data/08_reporting/wavetoken"
    folder.mkdir(parents=True)
    claims = claims_report(
        "wavetoken",
        [{"claim": "c", "metric": "wql", "method": "a", "baseline": "b", "relation": "better",
          "direction": "lower"}],
        {"a": {"wql": [1.0, 1.1, 0.9]}, "b": {"wql": [2.0, 2.2, 1.9]}},
        {"env": "test"}, [0, 1, 2])
    (folder / "claims.json").write_text(json.dumps(claims))
    run_pipeline("report", env="test")
    card = json.loads((kedro_project / "data/08_reporting/scorecard.json").read_text())
    row = next(r for r in card["papers"] if r["name"] == "wavetoken")
    assert row["status"] == "1 hold · 0 fail · 0 inconclusive (of 1)"
    assert (card["n_holds"], card["n_fails"], card["n_inconclusive"]) == (1, 0, 0)
