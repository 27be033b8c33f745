"""The report pipeline: papers' claims.json/metrics.json -> scorecard.{json,md,html} and one
summary per paper (``scorecard/<name>.json``, what ``dvc metrics show`` prints)."""

from __future__ import annotations

from collections.abc import Sequence

from kedro.pipeline import Pipeline, node

from icml25.pipelines.report.nodes import build_scorecard
from icml25.pipelines.report.params import ReportParams

PARAMETERS = ReportParams


def create_pipeline(papers: Sequence[str] = (), **kwargs) -> Pipeline:
    """``papers``: the registered paper pipelines whose results the scorecard reads."""
    documents = [f"{name}.claims" for name in papers] + [f"{name}.metrics" for name in papers]
    return Pipeline([
        node(
            build_scorecard,
            inputs=["params:report", "run_info", *documents],
            outputs=["report.scorecard", "report.scorecard_md", "report.scorecard_html",
                     "report.summaries"],
            name="build_scorecard",
        ),
    ])
