"""docs/scale.md's paper-check table from the dry runs' reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from icml25.core.paper_check_table import CLOSE, OPEN, main, render_table, update_doc

ROOT = Path(__file__).resolve().parents[2]

REPORT = {
    "dry_run": {"wall_seconds": 61.4, "peak_rss_bytes": 2.5e9},
    "per_step": {"parameters": 46_000_000, "flops": 2.25e13, "activation_bytes": 9.4e10,
                 "method": "computed: FlopCounterMode on the CPU at the dry run's batch 2"},
    "paper": {"steps": 4_500_000, "steps_formula_matches_dry_run": True},
    "h100": {"seconds": 7200.0, "memory_bytes": 9.5e10, "fits_memory": False,
             "arithmetic": "time = 4,500,000 steps × ..."},
    "generators": {"make": {"arithmetic": "100 items ÷ ...", "over_one_hour": True}},
    "unmeasured": [],
}


def test_the_table_has_every_paper_and_the_arithmetic():
    text = render_table(["a", "b", "c"], {"a": REPORT}, configured={"b"})
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 4  # header and three papers
    assert "| a | 46 M | 22.5 TFLOP (computed) | 94 GB | 61 s | 2.5 GB | 4,500,000 ✓ | 2 h " \
           "| 95 GB (does not fit) |" in text
    assert "no dry run recorded yet" in rows[2] and "not yet covered" in rows[3]
    assert "time = 4,500,000 steps" in text and "**over an hour on one core**" in text


def test_update_doc_replaces_between_the_markers(tmp_path):
    doc = tmp_path / "scale.md"
    doc.write_text(f"intro\n{OPEN}\nold\n{CLOSE}\nrest\n")
    assert update_doc(doc, "new\n") == f"intro\n{OPEN}\nnew\n{CLOSE}\nrest\n"
    doc.write_text("no markers\n")
    with pytest.raises(ValueError, match="has no"):
        update_doc(doc, "x")


def test_the_committed_table_is_current():
    assert main(["--project", str(ROOT), "--check"]) == 0
