"""The paper-scale table of docs/scale.md, from the CPU dry runs' ``paper_check.json`` files.

``python -m icml25.core.paper_check_table`` (run by ``make paper-check`` after the dry runs)
copies each room's ``data/paper_check/08_reporting/<room>/paper_check.json`` to
``results/<room>/paper_check.json`` (the committed copy the docs come from, as the default runs'
claims) and writes one table between ``<!-- paper-check-table -->`` and
``<!-- /paper-check-table -->`` in docs/scale.md: every paper, its parameters, FLOPs and
activation memory per training step at the paper's shapes, the dry run's wall time and peak
memory, and the full paper config's estimated time and memory on one H100 with the arithmetic.
``--check`` fails (exit 1) when the docs' table differs from what the results give.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["collect", "render_table", "update_doc"]

OPEN, CLOSE = "<!-- paper-check-table -->", "<!-- /paper-check-table -->"
REPORT = "paper_check.json"


def _si(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                          (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.3g} h" if seconds >= 360 else f"{seconds / 60:.3g} min"


def collect(project: Path, data_root: str = "data/paper_check") -> list[str]:
    """Copy every dry run's report into ``results/<room>/``; the rooms copied."""
    copied = []
    for path in sorted((project / data_root / "08_reporting").glob(f"*/{REPORT}")):
        room = path.parent.name
        target = project / "results" / room / REPORT
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(room)
    return copied


def _row(room: str, report: dict[str, Any] | None, configured: bool = False) -> str:
    if report is None:
        why = ("`conf/paper_check/parameters_{room}.yml` exists; no dry run recorded yet"
               if configured else f"not yet covered: no `conf/paper_check/parameters_{room}.yml`")
        return f"| {room} | {why.format(room=room)} | | | | | | | |"
    step = report.get("per_step") or {}
    dry = report["dry_run"]
    h100 = report.get("h100") or {}
    paper = report.get("paper") or {}
    method = step.get("method", "")
    how = ("computed" if method.startswith("computed")
           else "measured, meta" if "FlopCounterMode on the meta device" in method
           else "measured, CPU" if method else "—")
    formula = ("" if "steps_formula_matches_dry_run" not in paper
               else " ✓" if paper["steps_formula_matches_dry_run"] else " ✗")
    fits = "" if not h100 else ("" if h100["fits_memory"] else " (does not fit)")
    return (f"| {room} | {_si(step.get('parameters'))} | {_si(step.get('flops'), 'FLOP')} "
            f"({how}) | {_si(step.get('activation_bytes'), 'B')} | {dry['wall_seconds']:.0f} s "
            f"| {_si(dry['peak_rss_bytes'], 'B')} | "
            f"{paper.get('steps', '—') if not paper.get('steps') else format(paper['steps'], ',')}"
            f"{formula} | {_hours(h100['seconds']) if h100 else '—'} | "
            f"{_si(h100.get('memory_bytes'), 'B') + fits if h100 else '—'} |")


def render_table(rooms: list[str], reports: dict[str, dict[str, Any]],
                 configured: set[str] | None = None) -> str:
    """The markdown between the markers: the table, then each room's arithmetic and any
    generator that would take over an hour on one core at the paper's counts."""
    lines = [
        "| paper | parameters | FLOPs / training step | activations / step | dry-run wall "
        "| dry-run peak RSS | paper steps (formula ✓ = matches the dry run) | H100 time "
        "| H100 memory |",
        "|---|---|---|---|---|---|---|---|---|",
        *(_row(room, reports.get(room), room in (configured or set())) for room in rooms),
        "",
    ]
    for room in rooms:
        report = reports.get(room)
        if report is None:
            continue
        notes = []
        if report.get("h100"):
            notes.append(report["h100"]["arithmetic"])
        elif report.get("paper", {}).get("note"):
            notes.append(report["paper"]["note"])
        step = report.get("per_step") or {}
        if step.get("method"):
            notes.append(f"FLOPs: {step['method']}")
        for name, gen in (report.get("generators") or {}).items():
            if "arithmetic" in gen:
                flag = " — **over an hour on one core**" if gen["over_one_hour"] else ""
                notes.append(f"generator `{name}`: {gen['arithmetic']}{flag}")
        for problem in report.get("unmeasured") or []:
            notes.append(f"not measured: {problem}")
        lines.append(f"- **{room}**: " + "; ".join(notes))
    return "\n".join(lines).rstrip() + "\n"


def update_doc(doc: Path, table: str) -> str:
    text = doc.read_text(encoding="utf8")
    pattern = re.compile(re.escape(OPEN) + r".*?" + re.escape(CLOSE), re.S)
    if not pattern.search(text):
        raise ValueError(f"{doc} has no {OPEN} … {CLOSE} markers")
    return pattern.sub(lambda _m: f"{OPEN}\n{table}{CLOSE}", text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path.cwd())
    parser.add_argument("--no-collect", action="store_true",
                        help="only regenerate the table from results/<room>/paper_check.json")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/scale.md's table is not what results/ give")
    args = parser.parse_args(argv)
    project = args.project
    if not (args.no_collect or args.check):
        collect(project)
    from icml25.pipeline_registry import paper_pipeline_names

    rooms = paper_pipeline_names()
    reports = {room: json.loads((project / "results" / room / REPORT).read_text())
               for room in rooms if (project / "results" / room / REPORT).is_file()}
    doc = project / "docs" / "scale.md"
    configured = {room for room in rooms
                  if (project / "conf" / "paper_check" / f"parameters_{room}.yml").is_file()}
    new = update_doc(doc, render_table(rooms, reports, configured))
    if args.check:
        if new != doc.read_text(encoding="utf8"):
            print(f"{doc}: the paper-check table is stale; run "
                  "python -m icml25.core.paper_check_table --no-collect", file=sys.stderr)
            return 1
        return 0
    doc.write_text(new, encoding="utf8")
    print(f"paper-check table: {len(reports)} of {len(rooms)} papers covered -> {doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
