"""The docs' results tables are generated from the committed results and cannot drift."""

import json
import re
from pathlib import Path

import pytest

from icml25.core.claims import claims_report, validate_claims_document
from icml25.pipelines.report.results_tables import (
    load_results,
    main,
    metrics_block,
    papers_list,
    render,
    stale_blocks,
    study_names,
)

PROJECT = Path(__file__).resolve().parents[3]
PAPERS = [{"name": "alpha", "title": "Alpha"}, {"name": "beta", "title": "Beta"}]


def _doc(name="alpha"):
    return claims_report(
        name,
        [{"claim": "A beats B", "metric": "wql", "method": "A", "baseline": "B",
          "relation": "better", "direction": "lower"},
         {"claim": "A matches B", "metric": "wql", "method": "A", "baseline": "B",
          "relation": "within", "margin": 0.01}],
        {"A": {"wql": [0.5, 0.52, 0.51]}, "B": {"wql": [0.6, 0.61, 0.63]}},
        {"env": "local", "date": "2026-12-01 20:00 UTC", "commit": "abc1234"}, [0, 1, 2])


def test_blocks_are_filled_from_the_results_and_stale_ones_are_named():
    text = ("intro\n<!-- verdict-counts -->\nold\n<!-- /verdict-counts -->\n"
            "<!-- claims-table:alpha -->\n| typed | by hand |\n<!-- /claims-table:alpha -->\n"
            "<!-- claims-table:beta -->\n<!-- /claims-table:beta -->\nend\n")
    out = render(text, PAPERS, {"alpha": _doc()})
    assert out.startswith("intro\n") and out.endswith("end\n")
    assert "| Alpha | `kedro run --pipeline=alpha` | 1 | 1 | 0 |" in out
    assert "| Beta | `kedro run --pipeline=beta` | — | — | — | not run |" in out
    assert "commit `abc1234`, 2026-12-01 20:00 UTC, env `local` (conf/base), seeds [0, 1, 2]" in out
    assert "**1 hold, 1 fail, 0 inconclusive** of 2 claims." in out
    assert "| A beats B | `A`: 0.51 ± 0.01 | B: 0.6133 ± 0.01528 | lower |" in out
    assert "| typed | by hand |" not in out
    assert "No default-run results committed for `beta`" in out
    assert render(out, PAPERS, {"alpha": _doc()}) == out  # idempotent
    assert sorted(stale_blocks(text, out)) == ["claims-table:alpha", "claims-table:beta",
                                               "verdict-counts"]
    assert stale_blocks(out, out) == []
    with pytest.raises(ValueError, match="unknown pipeline 'gamma'"):
        render("<!-- claims-table:gamma -->\n<!-- /claims-table:gamma -->", PAPERS, {})


def _metrics_doc():
    return {"pipeline": "alpha", "run": {"commit": "abc1234", "seeds": [0, 1, 2]},
            "metrics": {"A": {"wql": 0.51, "wql_std": 0.01, "mase": 1.23456},
                        "B": {"wql": 0.6133333, "wql_std": 0.0152753, "mase": None}}}


def test_metrics_table_rows_are_variants_and_cells_mean_plus_std():
    text = ("<!-- metrics-table:alpha keys=wql,mase -->\nold\n<!-- /metrics-table:alpha -->\n"
            "<!-- metrics-table:alpha keys=wql variants=B -->\n<!-- /metrics-table:alpha -->\n")
    out = render(text, PAPERS, {}, {"alpha": _metrics_doc()})
    first, second = out.split("<!-- /metrics-table:alpha -->")[:2]
    assert "Mean ± std over seeds [0, 1, 2] of the default run (commit `abc1234`)." in first
    assert "| variant | `wql` | `mase` |" in first
    assert "| `A` | 0.51 ± 0.01 | 1.235 |" in first
    assert "| `B` | 0.6133 ± 0.01528 | — |" in first  # a metric a variant lacks is a dash
    assert "| `B` | 0.6133 ± 0.01528 |" in second and "`A`" not in second
    assert render(out, PAPERS, {}, {"alpha": _metrics_doc()}) == out
    assert stale_blocks(text, out) == ["metrics-table:alpha", "metrics-table:alpha"]
    for bad, match in [("keys=nope", r"no variant .* has metric\(s\) \['nope'\]"),
                       ("keys=wql variants=C", r"has no variant\(s\) \['C'\]"),
                       ("keys=wql colour=red", r"unknown argument\(s\) \['colour'\]"),
                       ("", "names no keys")]:
        block = f"<!-- metrics-table:alpha {bad} -->\n<!-- /metrics-table:alpha -->\n"
        with pytest.raises(ValueError, match=match):
            render(block.replace("alpha  -->", "alpha -->"), PAPERS, {},
                   {"alpha": _metrics_doc()})
    assert "No default-run metrics committed for `beta`" in render(
        "<!-- metrics-table:beta keys=wql -->\n<!-- /metrics-table:beta -->\n", PAPERS, {}, {})


def test_a_variant_run_on_fewer_seeds_shows_its_own_seeds():
    doc = {**_metrics_doc(), "seeds_of": {"A": [0, 1, 2], "B": [0, 1]}}
    out = metrics_block(doc, "alpha", ["wql"])
    assert "Mean ± std over each variant's seeds (last column)" in out
    assert "| variant | `wql` | seeds |" in out
    assert "| `A` | 0.51 ± 0.01 | 0, 1, 2 |" in out and "| `B` | 0.6133 ± 0.01528 | 0, 1 |" in out
    same = metrics_block({**_metrics_doc(), "seeds_of": {"A": [0, 1, 2], "B": [0, 1, 2]}},
                         "alpha", ["wql"])
    assert same == metrics_block(_metrics_doc(), "alpha", ["wql"]) and "seeds |" not in same


def test_check_mode_fails_on_a_stale_file_and_write_mode_fixes_it(tmp_path):
    (tmp_path / "conf/base").mkdir(parents=True)
    (tmp_path / "conf/base/parameters_report.yml").write_text(
        "report:\n  papers:\n    - {name: alpha, title: Alpha}\n")
    (tmp_path / "results/alpha").mkdir(parents=True)
    (tmp_path / "results/alpha/claims.json").write_text(json.dumps(_doc()))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- claims-table:alpha -->\nstale\n<!-- /claims-table:alpha -->\n")
    assert main(["--check", "--project", str(tmp_path)]) == 1
    assert main(["--project", str(tmp_path)]) == 0
    assert main(["--check", "--project", str(tmp_path)]) == 0
    (tmp_path / "results/alpha/claims.json").write_text(json.dumps(_doc("beta")))
    with pytest.raises(ValueError, match="names pipeline 'beta', not its folder"):
        main(["--check", "--project", str(tmp_path)])


def test_committed_results_are_valid_and_stamped():
    results = load_results(PROJECT / "results")
    known = {p["name"] for p in papers_list(PROJECT)} | set(study_names())
    assert set(results) <= known
    for name, doc in results.items():
        validate_claims_document(doc, f"results/{name}/claims.json")
        run = doc["run"]
        assert run.get("commit") and run.get("date") and run.get("env") and run["seeds"], name
        metrics = json.loads((PROJECT / "results" / name / "metrics.json").read_text())
        assert metrics["pipeline"] == name and metrics["run"]["seeds"] == run["seeds"]


def test_readme_and_docs_tables_match_the_committed_results():
    assert main(["--check", "--project", str(PROJECT)]) == 0, (
        "README.md's or docs/'s results tables differ from results/: run `make tables`")


def test_each_paper_page_has_its_claims_and_metrics_tables():
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    assert len(re.findall(r"<!-- verdict-counts[ -]", readme)) == 1
    assert "claims-table:" not in readme  # the claims live on the papers' pages
    # a room's studies (wavetoken_scaling) are shown on that room's page, after its own tables
    from icml25.pipeline_registry import study_pipelines

    studies = {name: room for name, (room, _create) in study_pipelines().items()}
    for paper in papers_list(PROJECT):
        name = paper["name"]
        text = (PROJECT / "docs/papers" / f"{name}.md").read_text(encoding="utf-8")
        own = [s for s, room in studies.items() if room == name]
        assert re.findall(r"<!-- claims-table:([a-z0-9_]+) -->", text) == [name, *own], name
        tables = re.findall(r"<!-- metrics-table:([a-z0-9_]+) ", text)
        assert tables and set(tables) == {name, *own}, name


def test_a_study_has_claims_tables_but_no_verdict_counts_row():
    text = ("<!-- verdict-counts -->\n<!-- /verdict-counts -->\n"
            "<!-- claims-table:alpha_scaling -->\n<!-- /claims-table:alpha_scaling -->\n")
    out = render(text, PAPERS, {"alpha_scaling": _doc("alpha_scaling")}, {},
                 studies=["alpha_scaling"])
    assert "**1 hold, 1 fail, 0 inconclusive** of 2 claims." in out
    assert "alpha_scaling`" not in out.split("<!-- /verdict-counts -->")[0]
    with pytest.raises(ValueError, match="unknown pipeline 'alpha_scaling'"):
        render(text, PAPERS, {"alpha_scaling": _doc("alpha_scaling")})
