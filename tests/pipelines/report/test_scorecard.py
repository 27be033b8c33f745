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

def _claim(**kw):
    base = {"metric": "wql", "method": "A", "relation": "better", "direction": "lower",
            "margin": 0.0, "unit": None, "paired": True, "test": "t", "method_std": 0.0,
            "baseline_std": 0.0, "ci_level": 0.9, "ci_units": None, "ci_seeds": None,
            "n_pairs": 3, "n_seeds": 3, "reason": ""}
    return {**base, **kw, "holds": kw["verdict"] == "holds"}


CLAIMS = {
    "pipeline": "alpha", "title": "Alpha", "confidence": 0.9,
    "run": {"env": "test", "date": "2026-11-30 10:00 UTC", "commit": "abc", "seeds": [0, 1, 2]},
    "figures": ["figures/a.png", "figures/gone.png"],
    "claims": [
        _claim(claim="A beats B", baseline="B", difference=-0.1, ci_low=-0.12, ci_high=-0.08,
               method_value=0.5, baseline_value=0.6, verdict="holds", method_std=0.01,
               baseline_std=0.02),
        _claim(claim="A < 0.4", baseline="threshold 0.4", difference=0.1, ci_low=0.05,
               ci_high=0.15, method_value=0.5, baseline_value=0.4, verdict="fails"),
        _claim(claim="A matches C", baseline="C", relation="within", direction=None,
               margin=0.05, unit="dataset", difference=0.02, ci_low=-0.03, ci_high=0.07,
               n_pairs=17, ci_units=[-0.01, 0.05], ci_seeds=[-0.03, 0.07],
               method_value=0.5, baseline_value=0.48, verdict="inconclusive",
               reason="the interval overlaps the equivalence bound ±0.05"),
    ],
    "counts": {"holds": 1, "fails": 1, "inconclusive": 1},
    "n_holds": 1, "n_fails": 1, "n_inconclusive": 1, "n_claims": 3,
}
METRICS = {"pipeline": "alpha", "run": {}, "metrics": {"A": {"wql": 0.5}}}


def test_collect_marks_missing_papers_not_run():
    card = collect(PAPERS, [CLAIMS, None, METRICS, None])
    alpha, beta = card["papers"]
    assert alpha["status"] == "1 hold · 1 fail · 1 inconclusive (of 3)" and alpha["has_metrics"]
    assert (alpha["n_holds"], alpha["n_fails"], alpha["n_inconclusive"]) == (1, 1, 1)
    assert beta["status"] == NOT_RUN and beta["claims"] == []
    assert (card["n_run"], card["n_claims"], card["n_holds"], card["n_fails"],
            card["n_inconclusive"]) == (1, 3, 1, 1, 1)


def test_a_claims_file_without_verdicts_is_named_for_a_rerun():
    old = {**CLAIMS, "claims": [{"claim": "A beats B", "holds": True}]}
    with pytest.raises(ValueError, match=r"alpha's claims\.json .* re-run alpha"):
        collect(PAPERS, [old])


def test_an_inconsistent_claims_file_is_refused_before_the_scorecard():
    with pytest.raises(ValueError, match="n_holds is 2, the claims say 1"):
        collect(PAPERS, [{**CLAIMS, "n_holds": 2}])
    with pytest.raises(ValueError, match="not a valid claims document"):
        collect(PAPERS, [{**CLAIMS, "confidence": 1.5}])


def test_unknown_pipeline_and_bad_documents_are_errors():
    with pytest.raises(ValueError, match="'gamma' is not listed"):
        collect(PAPERS, [{**CLAIMS, "pipeline": "gamma"}])
    with pytest.raises(ValueError, match="no 'pipeline' key"):
        collect(PAPERS, [{"claims": []}])


def test_markdown_and_html_show_both_numbers_and_verdicts():
    card = collect(PAPERS, [CLAIMS])
    md = to_markdown(card)
    assert ("| A beats B | `A`: 0.5 ± 0.01 | B: 0.6 ± 0.02 | lower | -0.1 [-0.12, -0.08], n=3 (t)"
            " | holds |") in md
    assert "| A < 0.4 | `A`: 0.5 | threshold 0.4: 0.4 | lower | 0.1 [0.05, 0.15], n=3 (t) | **fails** |" in md
    assert ("| within ±0.05 | 0.02 [-0.03, 0.07], n=17 datasets (t) | **inconclusive** (the "
            "interval overlaps the equivalence bound ±0.05) |") in md
    assert "| Alpha <paper> | `alpha` | 1 | 1 | 1 |" in md
    assert "`beta` | not run |" in md
    assert "of 3 claims 1 hold, 1 fail and 1 are inconclusive" in md
    page = to_html(card)
    assert page.startswith("<!doctype html>") and "<script" not in page
    assert "Alpha &lt;paper&gt;" in page  # escaped
    assert page.count("class='holds'") == 1 and page.count("class='fails'") == 1
    assert page.count("class='inconclusive'") == 1
    assert "-0.1 [-0.12, -0.08], n=3 (t)" in page
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


def test_paper_summaries_share_their_keys_and_show_the_headline_claim():
    from icml25.pipelines.report.scorecard import paper_summary

    papers = [{**PAPERS[0], "headline": {"metric": "wql", "method": "A", "baseline": "C"}},
              {**PAPERS[1], "headline": {"metric": "wql", "method": "A"}}]
    alpha, beta = (paper_summary(row) for row in collect(papers, [CLAIMS])["papers"])
    assert alpha == {"status": "run", "claims": 3, "holds": 1, "fails": 1, "inconclusive": 1,
                     "metric": "wql", "value": 0.5, "vs": 0.48}
    assert beta["status"] == NOT_RUN and beta["metric"] is None and list(beta) == list(alpha)
    without = collect([PAPERS[0], PAPERS[1]], [CLAIMS])["papers"][0]
    assert paper_summary(without)["value"] is None  # no headline configured


def test_every_configured_headline_names_a_claim_of_the_committed_results():
    """The headlines in parameters_report.yml match the committed results/<name>/claims.json
    (a renamed claim must be renamed there too, or the summary loses its numbers)."""
    import json
    from pathlib import Path

    import yaml

    from icml25.pipelines.report.scorecard import headline_claim

    root = Path(__file__).resolve().parents[3]
    papers = yaml.safe_load((root / "conf/base/parameters_report.yml").read_text())["report"][
        "papers"]
    missing = []
    for paper in papers:
        path = root / "results" / paper["name"] / "claims.json"
        assert paper.get("headline"), paper["name"]
        if path.exists() and not headline_claim(json.loads(path.read_text())["claims"],
                                                paper["headline"]):
            missing.append(paper["name"])
    assert not missing, missing
