"""Builds the reproduction scorecard from the papers' ``claims.json`` and ``metrics.json``.

Pure functions over plain dicts; the Kedro nodes in ``nodes.py`` only wire them.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from icml25.core.claims import VERDICTS, validate_claims_document, verdict_counts

Figures = Mapping[str, Sequence[tuple[str, bytes | None]]]

NOT_RUN = "not run"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def collect(papers: Sequence[Mapping[str, Any]], documents: Sequence[Any]) -> dict[str, Any]:
    """Group claims/metrics documents by paper; papers without a claims file are ``not run``.

    ``documents`` are loaded ``claims.json``/``metrics.json`` contents (``None`` when absent),
    each carrying its ``pipeline`` name. A document naming a pipeline missing from ``papers``
    is an error: the paper list in ``parameters_report.yml`` must know every pipeline.
    """
    known = {p["name"] for p in papers}
    claims: dict[str, Mapping[str, Any]] = {}
    metrics: dict[str, Mapping[str, Any]] = {}
    for doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, Mapping) or "pipeline" not in doc:
            raise ValueError(f"report: a results document has no 'pipeline' key: {str(doc)[:200]}")
        name = doc["pipeline"]
        if name not in known:
            raise ValueError(f"report: pipeline {name!r} is not listed in params:report.papers")
        (claims if "claims" in doc else metrics)[name] = doc
    rows = []
    for paper in papers:
        name = paper["name"]
        doc = claims.get(name)
        if doc is None:
            rows.append({**paper, "status": NOT_RUN, "claims": [], "run": None,
                         **{f"n_{v}": 0 for v in VERDICTS}, "n_claims": 0})
            continue
        judged = list(doc["claims"])
        for c in judged:
            if c.get("verdict") not in VERDICTS:
                raise ValueError(
                    f"report: {name}'s claims.json has a claim without a verdict "
                    f"({c.get('claim')!r}); it predates the three-verdict format: re-run {name}")
        validate_claims_document(doc, f"report: {name}'s claims.json")
        counts = verdict_counts(judged)
        rows.append({
            **paper,
            "status": status_line(counts),
            **{f"n_{v}": counts[v] for v in VERDICTS},
            "n_claims": len(judged),
            "claims": judged,
            "run": doc.get("run"),
            "confidence": doc.get("confidence"),
            "figures": list(doc.get("figures", [])),
            "has_metrics": name in metrics,
        })
    ran = [r for r in rows if r["status"] != NOT_RUN]
    return {
        "papers": rows,
        "n_papers": len(rows),
        "n_run": len(ran),
        "n_claims": sum(r["n_claims"] for r in ran),
        **{f"n_{v}": sum(r[f"n_{v}"] for r in ran) for v in VERDICTS},
    }


def headline_claim(claims: Sequence[Mapping[str, Any]],
                   headline: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The first claim with the headline's metric and method (and baseline, when it names
    one), or None."""
    if not headline:
        return None
    for c in claims:
        if (c.get("metric"), c.get("method")) == (headline["metric"], headline["method"]) and (
                headline.get("baseline") is None or c.get("baseline") == headline["baseline"]):
            return c
    return None


def paper_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """A paper's few numbers for ``dvc metrics show``: whether it ran, its verdict counts, and
    its headline claim's metric with the method's ``value`` and the reference's (``vs``:
    the baseline's value or the paper's threshold).

    Every paper's summary has the same keys, so that DVC prints one narrow table with a row
    per paper (its columns are the union of every file's keys, in alphabetical order); a value
    a paper does not have is null, shown as "-".
    """
    claim = headline_claim(row.get("claims", []), row.get("headline"))
    return {
        "status": "run" if row["status"] != NOT_RUN else NOT_RUN,
        "claims": row["n_claims"],
        **{v: row[f"n_{v}"] for v in VERDICTS},
        "metric": claim["metric"] if claim else None,
        "value": claim.get("method_value") if claim else None,
        "vs": claim.get("baseline_value") if claim else None,
    }


def status_line(counts: Mapping[str, int]) -> str:
    """``"5 hold · 2 fail · 1 inconclusive (of 8)"``."""
    total = sum(counts.values())
    return (f"{counts['holds']} hold · {counts['fails']} fail · "
            f"{counts['inconclusive']} inconclusive (of {total})")


def totals_line(scorecard: Mapping[str, Any]) -> str:
    return (f"{scorecard['n_run']} of {scorecard['n_papers']} papers run; of "
            f"{scorecard['n_claims']} claims {scorecard['n_holds']} hold, {scorecard['n_fails']} "
            f"fail and {scorecard['n_inconclusive']} are inconclusive.")


def _run_cells(run: Mapping[str, Any] | None) -> tuple[str, str, str]:
    if not run:
        return "—", "—", "—"
    seeds = ", ".join(str(s) for s in run.get("seeds", [])) or "—"
    return _fmt(run.get("date")), _fmt(run.get("env")), seeds


def _verdict(claim: Mapping[str, Any]) -> str:
    return str(claim["verdict"])


def _with_std(value: Any, std: Any) -> str:
    return f"{_fmt(value)} ± {_fmt(std)}" if std else _fmt(value)


def relation_text(claim: Mapping[str, Any]) -> str:
    """What the claim asserts of the method against the reference, e.g. ``lower``,
    ``no worse by 0.05 (higher)``, ``within ±0.05``."""
    margin = claim.get("margin") or 0
    relation = claim["relation"]
    if relation == "within":
        return f"within ±{_fmt(margin)}"
    if relation == "no_worse":
        return f"no worse by {_fmt(margin)} ({claim['direction']} is better)"
    more = f" by > {_fmt(margin)}" if margin else ""
    return f"{claim['direction']}{more}"


def evidence_text(claim: Mapping[str, Any]) -> str:
    """``-0.09 [-0.10, -0.08], n=5 (t)``: the mean paired difference (method − reference), its
    interval (each end a one-sided bound at the claim's level) and the pairs."""
    unit = f" {claim['unit']}s" if claim.get("unit") else ""
    n = f"n={claim['n_pairs']}{unit}" if claim.get("paired", True) else "unpaired"
    text = (f"{_fmt(claim.get('difference'))} [{_fmt(claim.get('ci_low'))}, "
            f"{_fmt(claim.get('ci_high'))}], {n} ({claim.get('test', 't')})")
    return text


def load_figures(scorecard: Mapping[str, Any], reporting_dir: str | Path) -> dict:
    """``{pipeline: [(relative path, PNG bytes or None if the file is missing)]}``."""
    out = {}
    for row in scorecard["papers"]:
        entries = []
        for rel in row.get("figures", []):
            path = Path(reporting_dir) / row["name"] / rel
            entries.append((rel, path.read_bytes() if path.is_file() else None))
        out[row["name"]] = entries
    return out


def claims_table(claims: Sequence[Mapping[str, Any]], method_label: str = "method") -> list[str]:
    """A paper's claims as Markdown table lines (the README and the scorecard share it)."""
    lines = [f"| claim | {method_label} | compared with | asserts | difference [interval] | "
             "verdict |", "|---|---|---|---|---|---|"]
    for c in claims:
        verdict = _verdict(c)
        shown = verdict if verdict == "holds" else f"**{verdict}**"
        reason = f" ({c['reason']})" if c.get("reason") and verdict == "inconclusive" else ""
        lines.append(
            f"| {c['claim']} | `{c['method']}`: {_with_std(c['method_value'], c.get('method_std'))}"
            f" | {c['baseline']}: {_with_std(c['baseline_value'], c.get('baseline_std'))} | "
            f"{relation_text(c)} | {evidence_text(c)} | {shown}{reason} |"
        )
    return lines


def to_markdown(scorecard: Mapping[str, Any]) -> str:
    """The scorecard as Markdown: a summary table, then each run paper's claims."""
    lines = [
        "# icml25 reproduction scorecard",
        "",
        totals_line(scorecard),
        "",
        "Each verdict comes from the paired difference method − reference over seeds (or over the",
        "claim's units); each end of its interval is a one-sided bound at the run's level.",
        "",
        "| paper | pipeline | holds | fails | inconclusive | run date | env | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in scorecard["papers"]:
        date, env, seeds = _run_cells(row["run"])
        if row["status"] == NOT_RUN:
            counts = f"{NOT_RUN} | | "
        else:
            counts = f"{row['n_holds']} | {row['n_fails']} | {row['n_inconclusive']}"
        lines.append(
            f"| {row['title']} | `{row['name']}` | {counts} | {date} | {env} | {seeds} |"
        )
    for row in scorecard["papers"]:
        if not row["claims"]:
            continue
        level = row.get("confidence")
        lines += ["", f"## {row['name']}", "", f"{row['status']}; level {_fmt(level)}.", ""]
        lines += [f"![{rel}]({row['name']}/{rel})" for rel in row.get("figures", [])[:1]]
        lines += ["", *claims_table(row["claims"])]
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:72rem;
color:#1d232a;padding:0 1rem}
h1{margin-bottom:.2rem}.sub{color:#5b6570;margin-top:0}
table{border-collapse:collapse;width:100%;margin:1rem 0 2rem}
th,td{border-bottom:1px solid #dde2e7;padding:.45rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f5f7;font-weight:600}td.num{font-variant-numeric:tabular-nums;text-align:right}
.holds{color:#0a7a3e;font-weight:600}.fails{color:#b3261e;font-weight:600}
.inconclusive{color:#8a5a00;font-weight:600}.why{color:#5b6570;font-size:.85rem}
.notrun{color:#8a939c}code{background:#f3f5f7;padding:0 .25rem;border-radius:3px}
section{margin-top:2rem}figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #dde2e7}
figcaption{color:#5b6570;font-size:.85rem}.missing{color:#b3261e}
"""


def _figure_html(rel: str, data: bytes | None) -> str:
    if data is None:
        return f"<p class='missing'>figure missing: {html.escape(rel)}</p>"
    encoded = base64.b64encode(data).decode("ascii")
    return (f"<figure><img src='data:image/png;base64,{encoded}' alt='{html.escape(rel)}'>"
            f"<figcaption>{html.escape(rel)}</figcaption></figure>")


def to_html(scorecard: Mapping[str, Any], figures: Figures | None = None) -> str:
    """The scorecard as one self-contained HTML page (inline CSS and figures, no scripts).

    ``figures`` (from :func:`load_figures`) are embedded as base64 PNGs, so the page is
    readable from a file, an e-mail or an MLflow artifact without a server.
    """
    e = html.escape
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<title>icml25 reproduction scorecard</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>icml25 reproduction scorecard</h1>",
        f"<p class='sub'>{e(totals_line(scorecard))} Each verdict comes from the paired "
        "difference method − reference over seeds (or the claim's units); each end of its "
        "interval is a one-sided bound at the run's level.</p>",
        "<table id='summary'><thead><tr><th>paper</th><th>pipeline</th><th>holds</th>"
        "<th>fails</th><th>inconclusive</th><th>run date</th><th>env</th><th>seeds</th></tr>"
        "</thead><tbody>",
    ]
    for row in scorecard["papers"]:
        date, env, seeds = _run_cells(row["run"])
        if row["status"] == NOT_RUN:
            cls, counts = "notrun", f"<td colspan='3'>{NOT_RUN}</td>"
        else:
            cls = ""
            counts = "".join(f"<td class='num'>{row[f'n_{v}']}</td>" for v in VERDICTS)
        out.append(
            f"<tr class='{cls}'><td>{e(row['title'])}</td><td><code>{e(row['name'])}</code></td>"
            f"{counts}<td>{e(date)}</td><td>{e(env)}</td><td>{e(seeds)}</td></tr>"
        )
    out.append("</tbody></table>")
    for row in scorecard["papers"]:
        if not row["claims"]:
            continue
        run = row["run"] or {}
        out.append(
            f"<section id='{e(row['name'])}'><h2>{e(row['name'])}</h2>"
            f"<p class='sub'>{e(row['title'])} — commit {e(_fmt(run.get('commit')))}, "
            f"env {e(_fmt(run.get('env')))}, {e(_fmt(run.get('date')))}, seeds "
            f"{e(_run_cells(run)[2])}; {e(row['status'])}; values are seed means ± standard "
            f"deviation; level {e(_fmt(row.get('confidence')))}</p>"
            + "".join(_figure_html(rel, data) for rel, data in (figures or {}).get(row["name"], []))
            + "<table><thead><tr><th>claim</th><th>metric</th><th>method</th><th>value</th>"
            "<th>compared with</th><th>value</th><th>asserts</th><th>difference [interval]</th>"
            "<th>verdict</th></tr></thead><tbody>"
        )
        for c in row["claims"]:
            verdict = _verdict(c)
            out.append(
                f"<tr><td>{e(c['claim'])}</td><td>{e(c['metric'])}</td><td>{e(c['method'])}</td>"
                f"<td class='num'>{e(_with_std(c['method_value'], c.get('method_std')))}</td>"
                f"<td>{e(str(c['baseline']))}</td>"
                f"<td class='num'>{e(_with_std(c['baseline_value'], c.get('baseline_std')))}</td>"
                f"<td>{e(relation_text(c))}</td><td class='num'>{e(evidence_text(c))}</td>"
                f"<td class='{verdict}'>{verdict}"
                + (f"<div class='why'>{e(c['reason'])}</div>" if c.get("reason") else "")
                + "</td></tr>"
            )
        out.append("</tbody></table></section>")
    out.append("</body></html>\n")
    return "\n".join(out)
