"""Parameters of the report pipeline (``conf/*/parameters_report.yml``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from icml25.core.params import ParamsModel


class Headline(ParamsModel):
    """The claim whose two values a paper's summary shows (``dvc metrics show``): the first
    claim in its ``claims.json`` with this metric and method (and baseline, when given)."""

    metric: str
    method: str
    baseline: str | None = None


class PaperEntry(ParamsModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    arxiv: str = ""
    headline: Headline | None = None


class ReportParams(ParamsModel):
    papers: list[PaperEntry] = Field(min_length=1)
    # where each pipeline's reporting folder lives (the run environment's data tree);
    # claims.json names figures relative to it
    reporting_dir: str = "data/08_reporting"

    @field_validator("papers")
    @classmethod
    def _unique(cls, papers: list[PaperEntry]) -> list[PaperEntry]:
        names = [p.name for p in papers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate paper names {dupes}")
        return papers
