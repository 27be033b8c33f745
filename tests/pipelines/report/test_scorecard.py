import pytest

from icml25.pipelines.report.scorecard import (
    NOT_RUN,
    collect,
    load_figures,
    to_html,
    to_markdown,
)

PAPERS = [{"name": "alpha", "title": "Alpha <paper>", "arxiv": ""},
          {"name": "beta", "title": "Beta", "arxiv": ""}]
CLAIMS = {
    "pipeline": "alpha", "title": "Alpha",
    "run": {"env": "test", "date": "2026-11-30 10:00 UTC", "commit": "abc", "seeds": [0, 1, 2]},
    "figures": ["figures/a.png", "figures/gone.png"],
    "claims": [
        {"claim": "A beats B", "metric": "wql", "method": "A", "baseline": "B",
         "method_value": 0.5, "baseline_value": 0.6, "holds": True, "method_std": 0.01,
         "baseline_std": 0.02},
        {"claim": "A < 0.4", "metric": "wql", "method": "A", "baseline": "threshold 0.4",
         "method_value": 0.5, "baseline_value": 0.4, "holds": False},
    ],
}
METRICS = {"pipeline": "alpha", "run": {}, "metrics": {"A": {"wql": 0.5}}}


def test_collect_marks_missing_papers_not_run():
    card = collect(PAPERS, [CLAIMS, None, METRICS, None])
    alpha, beta = card["papers"]
    assert alpha["status"] == "1/2 claims hold" and alpha["has_metrics"]
    assert beta["status"] == NOT_RUN and beta["claims"] == []
    assert (card["n_run"], card["n_claims"], card["n_holds"]) == (1, 2, 1)


def test_unknown_pipeline_and_bad_documents_are_errors():
    with pytest.raises(ValueError, match="'gamma' is not listed"):
        collect(PAPERS, [{**CLAIMS, "pipeline": "gamma"}])
    with pytest.raises(ValueError, match="no 'pipeline' key"):
        collect(PAPERS, [{"claims": []}])


def test_markdown_and_html_show_both_numbers_and_verdicts():
    card = collect(PAPERS, [CLAIMS])
    md = to_markdown(card)
    assert "| A beats B | wql | A | 0.5 ± 0.01 | B | 0.6 ± 0.02 | holds |" in md
    assert "| A < 0.4 | wql | A | 0.5 | threshold 0.4 | 0.4 | fails |" in md
    assert "`beta` | not run |" in md
    page = to_html(card)
    assert page.startswith("<!doctype html>") and "<script" not in page
    assert "Alpha &lt;paper&gt;" in page  # escaped
    assert page.count("class='holds'") == 1 and page.count("class='fails'") == 1
    assert "<section id='alpha'>" in page and "<section id='beta'>" not in page


def test_html_embeds_figures_and_names_missing_ones(tmp_path):
    png = b"\x89PNG\r\n\x1a\nfake"
    (tmp_path / "alpha" / "figures").mkdir(parents=True)
    (tmp_path / "alpha" / "figures" / "a.png").write_bytes(png)
    card = collect(PAPERS, [CLAIMS])
    figures = load_figures(card, tmp_path)
    assert figures == {"alpha": [("figures/a.png", png), ("figures/gone.png", None)], "beta": []}
    page = to_html(card, figures)
    import base64

    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page
    assert "figure missing: figures/gone.png" in page
    assert "seeds 0, 1, 2" in page
    assert "![figures/a.png](alpha/figures/a.png)" in to_markdown(card)
