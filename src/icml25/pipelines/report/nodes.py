"""Report nodes: thin wrappers around :mod:`icml25.pipelines.report.scorecard`."""

from __future__ import annotations

import logging
from typing import Any

from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.pipelines.report.params import ReportParams
from icml25.pipelines.report.scorecard import (
    collect,
    headline_claim,
    load_figures,
    paper_summary,
    to_html,
    to_markdown,
    totals_line,
)

mlflow = lazy_module("mlflow")

logger = logging.getLogger(__name__)


def build_scorecard(params: dict[str, Any], run_info: dict[str, Any], *documents: Any
                    ) -> tuple[dict, str, str, dict[str, dict]]:
    """Every paper's claims and metrics as the scorecard (JSON, Markdown, self-contained HTML)
    and one small summary per paper (the ``dvc metrics show`` table).

    One node builds all four, so a paper whose results cannot be read fails the report before
    any file is written: the previous scorecard stays as it was (each file is also replaced
    atomically, see :class:`icml25.core.datasets.AtomicTextDataset`).
    """
    report = validate_parameters(ReportParams, params, "report")
    scorecard = collect([p.model_dump() for p in report.papers], documents)
    scorecard["report_run"] = run_info
    for row in scorecard["papers"]:
        if row["claims"] and row.get("headline") and not headline_claim(row["claims"],
                                                                        row["headline"]):
            logger.warning("report: %s has no claim matching its headline %s "
                           "(params:report.papers); its summary shows no headline values",
                           row["name"], row["headline"])
    markdown = to_markdown(scorecard)
    page = to_html(scorecard, load_figures(scorecard, report.reporting_dir))
    summaries = {row["name"]: paper_summary(row) for row in scorecard["papers"]}
    if mlflow.active_run() is not None:
        mlflow.log_metrics({
            "papers_run": scorecard["n_run"],
            "claims_total": scorecard["n_claims"],
            "claims_holding": scorecard["n_holds"],
            "claims_failing": scorecard["n_fails"],
            "claims_inconclusive": scorecard["n_inconclusive"],
        })
    logger.info("scorecard: %s", totals_line(scorecard))
    return scorecard, markdown, page, summaries
