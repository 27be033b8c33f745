"""End to end: the report pipeline through a real KedroSession on conf/test."""

import json

import mlflow


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
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"scorecard.md", "scorecard.html"} <= artifacts


def test_report_reads_a_paper_result_through_the_catalog(kedro_project, run_pipeline):
    folder = kedro_project / "data/08_reporting/wavetoken"
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps({
        "pipeline": "wavetoken", "run": {"env": "test", "seeds": [0]},
        "claims": [{"claim": "c", "metric": "wql", "method": "a", "baseline": "b",
                    "method_value": 1.0, "baseline_value": 2.0, "holds": True}],
    }))
    run_pipeline("report", env="test")
    card = json.loads((kedro_project / "data/08_reporting/scorecard.json").read_text())
    row = next(r for r in card["papers"] if r["name"] == "wavetoken")
    assert row["status"] == "1/1 claims hold"
