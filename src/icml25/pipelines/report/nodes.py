"""Report nodes: thin wrappers around :mod:`icml25.pipelines.report.scorecard`."""

from __future__ import annotations

import logging
from typing import Any

import mlflow

from icml25.core.params import validate_parameters
from icml25.pipelines.report.params import ReportParams
from icml25.pipelines.report.scorecard import (
    collect,
    load_figures,
    to_html,
    to_markdown,
    totals_line,
)

logger = logging.getLogger(__name__)


def build_scorecard(params: dict[str, Any], run_info: dict[str, Any], *documents: Any) -> dict:
    """Collect every paper's claims and metrics into the scorecard (and log its totals)."""
    report = validate_parameters(ReportParams, params, "report")
    scorecard = collect([p.model_dump() for p in report.papers], documents)
    scorecard["report_run"] = run_info
    if mlflow.active_run() is not None:
        mlflow.log_metrics({
            "papers_run": scorecard["n_run"],
            "claims_total": scorecard["n_claims"],
            "claims_holding": scorecard["n_holds"],
            "claims_failing": scorecard["n_fails"],
            "claims_inconclusive": scorecard["n_inconclusive"],
        })
    logger.info("scorecard: %s", totals_line(scorecard))
    return scorecard


def render_markdown(scorecard: dict[str, Any]) -> str:
    return to_markdown(scorecard)


def render_html(scorecard: dict[str, Any], params: dict[str, Any]) -> str:
    """The self-contained page, with each paper's key figures embedded."""
    report = validate_parameters(ReportParams, params, "report")
    return to_html(scorecard, load_figures(scorecard, report.reporting_dir))
