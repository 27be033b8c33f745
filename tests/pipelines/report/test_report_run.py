"""End to end: the report pipeline through a real KedroSession on conf/test (the throw-away
project's conf/test writes its own data/)."""

import json

import mlflow
import pytest

from icml25.core.claims import claims_report

REPORTING = "data/08_reporting"


def test_report_runs_and_is_tracked_in_mlflow(kedro_project, run_pipeline):
    run_pipeline("report", env="test")
    card = json.loads((kedro_project / REPORTING / "scorecard.json").read_text())
    assert card["n_papers"] == 19
    statuses = {row["name"]: row["status"] for row in card["papers"]}
    assert all(statuses[name] == "not run" for name in statuses)  # nothing ran in this project
    assert card["report_run"]["env"] == "test"
    md = (kedro_project / REPORTING / "scorecard.md").read_text()
    assert "0 of 19 papers run" in md
    assert (kedro_project / REPORTING / "scorecard.html").read_text().startswith(
        "<!doctype html>")
    summaries = sorted((kedro_project / REPORTING / "scorecard").glob("*.json"))
    assert len(summaries) == 19
    assert json.loads(summaries[0].read_text())["status"] == "not run"

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["report"], output_format="list")
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["papers_run"] == 0.0
    assert run.data.metrics["claims_inconclusive"] == 0.0
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"scorecard.md", "scorecard.html"} <= artifacts


def _wavetoken_claims():
    return claims_report(
        "wavetoken",
        [{"claim": "c", "metric": "log_rel_wql_real", "method": "wavetoken",
          "baseline": "chronos_bins_1024", "relation": "better", "direction": "lower"}],
        {"wavetoken": {"log_rel_wql_real": [1.0, 1.1, 0.9]},
         "chronos_bins_1024": {"log_rel_wql_real": [2.0, 2.2, 1.9]}},
        {"env": "test"}, [0, 1, 2])


def test_report_reads_a_paper_result_through_the_catalog(kedro_project, run_pipeline):
    folder = kedro_project / REPORTING / "wavetoken"
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps(_wavetoken_claims()))
    run_pipeline("report", env="test")
    card = json.loads((kedro_project / REPORTING / "scorecard.json").read_text())
    row = next(r for r in card["papers"] if r["name"] == "wavetoken")
    assert row["status"] == "1 hold · 0 fail · 0 inconclusive (of 1)"
    assert (card["n_holds"], card["n_fails"], card["n_inconclusive"]) == (1, 0, 0)
    summary = json.loads((kedro_project / REPORTING / "scorecard/wavetoken.json").read_text())
    assert summary == {"status": "run", "claims": 1, "holds": 1, "fails": 0, "inconclusive": 0,
                       "metric": "log_rel_wql_real", "value": pytest.approx(1.0),
                       "vs": pytest.approx(2.0333333)}


def test_a_failing_report_keeps_the_previous_scorecard(kedro_project, run_pipeline):
    folder = kedro_project / REPORTING / "wavetoken"
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps(_wavetoken_claims()))
    run_pipeline("report", env="test")
    names = ("scorecard.json", "scorecard.md", "scorecard.html", "scorecard/wavetoken.json")
    before = {n: (kedro_project / REPORTING / n).read_bytes() for n in names}
    (folder / "claims.json").write_text('{"pipeline": "wavetoken", "claims": [{"claim": 1}]}')
    with pytest.raises(Exception, match="wavetoken"):
        run_pipeline("report", env="test")
    assert {n: (kedro_project / REPORTING / n).read_bytes() for n in names} == before
    assert not list((kedro_project / REPORTING).glob(".*.tmp"))
