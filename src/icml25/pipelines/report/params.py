"""Parameters of the report pipeline (``conf/*/parameters_report.yml``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from icml25.core.params import ParamsModel


class PaperEntry(ParamsModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    arxiv: str = ""


class ReportParams(ParamsModel):
    papers: list[PaperEntry] = Field(min_length=1)
    # where each pipeline's reporting folder lives; claims.json names figures relative to it
    reporting_dir: str = "data/08_reporting"

    @field_validator("papers")
    @classmethod
    def _unique(cls, papers: list[PaperEntry]) -> list[PaperEntry]:
        names = [p.name for p in papers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate paper names {dupes}")
        return papers
