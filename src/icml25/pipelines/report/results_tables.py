"""Results tables in the docs, generated from the committed default-run results.

``results/<pipeline>/claims.json`` (and ``metrics.json``) hold each paper's default run, stamped
with commit, date, config environment and seeds. Every results table in README.md and the docs
stands between two marker lines and is regenerated from those files, never typed:

``<!-- claims-table:<pipeline> -->`` … ``<!-- /claims-table:<pipeline> -->``
    that paper's claims with the evidence for each verdict;
``<!-- metrics-table:<pipeline> keys=K1,K2[,…] [variants=V1,V2,…] -->`` … ``<!-- /metrics-table:<pipeline> -->``
    rows: the variants of ``metrics.json["metrics"]`` (all, or the listed ones in that order);
    columns: the given metric keys, as mean ± std over seeds where ``<key>_std`` exists;
``<!-- verdict-counts [link=docs/papers/{name}.md] -->`` … ``<!-- /verdict-counts -->``
    the table of all papers with their verdict counts, each linked to its page.

``python -m icml25.pipelines.report.results_tables`` rewrites the blocks in place (``make
tables``) in README.md and every page under docs/; ``--check`` exits 1 and names the stale
blocks instead (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from icml25.core.claims import verdict_counts
from icml25.pipelines.report.scorecard import claims_table

PROJECT_ROOT = Path(__file__).resolve().parents[4]
_BLOCK = re.compile(
    r"(?P<open><!-- (?P<kind>claims-table|metrics-table|verdict-counts)"
    r"(?::(?P<name>[a-z0-9_]+))?(?P<args>(?: +[a-z]+=[^ ]+)*) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /(?P=kind)(?::(?P=name))? -->)",
    re.DOTALL,
)
_ARG = re.compile(r" +(?P<key>[a-z]+)=(?P<value>[^ ]+)")


def load_results(results_dir: Path, kind: str = "claims") -> dict[str, dict[str, Any]]:
    """``{pipeline: document}`` of every ``results/<pipeline>/<kind>.json`` (claims or metrics)."""
    out = {}
    for path in sorted(results_dir.glob(f"*/{kind}.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("pipeline") != path.parent.name:
            raise ValueError(f"{path}: names pipeline {doc.get('pipeline')!r}, not its folder")
        out[path.parent.name] = doc
    return out


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if value != value:  # NaN
        return "NaN"
    return f"{value:.4g}"


def metrics_block(doc: Mapping[str, Any] | None, name: str, keys: Sequence[str],
                  variants: Sequence[str] | None = None) -> str:
    """Rows = variants, columns = metric keys, each cell mean ± std (std where recorded)."""
    if doc is None:
        return f"*No default-run metrics committed for `{name}` yet (`results/{name}/`).*\n"
    table = doc.get("metrics", {})
    if not keys:
        raise ValueError(f"metrics-table:{name} names no keys (keys=K1,K2,...)")
    missing = [k for k in keys if not any(k in row for row in table.values())]
    if missing:
        raise ValueError(f"metrics-table:{name}: no variant of results/{name}/metrics.json has "
                         f"metric(s) {missing}")
    rows = list(variants) if variants else list(table)
    unknown = [v for v in rows if v not in table]
    if unknown:
        raise ValueError(f"metrics-table:{name}: results/{name}/metrics.json has no variant(s) "
                         f"{unknown}; it has {sorted(table)}")
    run_seeds = list(doc.get("run", {}).get("seeds", []))
    seeds = ", ".join(str(s) for s in run_seeds)
    # a room that runs some variants on fewer seeds records each variant's seeds (seeds_of)
    seeds_of = doc.get("seeds_of") or {}
    own = any(list(seeds_of.get(v, run_seeds)) != run_seeds for v in rows)
    caption = f"Mean ± std over seeds [{seeds}] of the default run"
    if own:
        caption = ("Mean ± std over each variant's seeds (last column) of the default run, "
                   f"seeds [{seeds}] in all")
    lines = [f"{caption} (commit `{doc.get('run', {}).get('commit', '?')}`).", "",
             "| variant | " + " | ".join(f"`{k}`" for k in keys) + (" | seeds |" if own else " |"),
             "|---|" + "---|" * (len(keys) + own)]
    for variant in rows:
        cells = []
        for key in keys:
            row = table[variant]
            if row.get(key) is None:  # not measured for this variant
                cells.append("—")
            elif row.get(f"{key}_std") is not None:
                cells.append(f"{_number(row[key])} ± {_number(row[f'{key}_std'])}")
            else:
                cells.append(_number(row[key]))
        if own:
            cells.append(", ".join(str(x) for x in seeds_of.get(variant, run_seeds)))
        lines.append(f"| `{variant}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def stamp(doc: Mapping[str, Any]) -> str:
    """``commit abc1234, 2026-12-01 21:03 UTC, env local (conf/base), seeds 0–4``."""
    run = doc.get("run", {})
    seeds = ", ".join(str(s) for s in run.get("seeds", []))
    env = run.get("env", "?")
    where = f"env `{env}`" + (" (conf/base)" if env in ("local", "base") else "")
    return (f"Default run: commit `{run.get('commit', '?')}`, {run.get('date', '?')}, {where}, "
            f"seeds [{seeds}], level {doc.get('confidence', '?')} (each end of an interval is a "
            "one-sided bound at that level; difference = method − reference).")


def claims_block(doc: Mapping[str, Any] | None, name: str) -> str:
    if doc is None:
        return (f"*No default-run results committed for `{name}` yet (`results/{name}/` is "
                "empty): run `kedro run --pipeline=" + name + "` and `make tables`.*\n")
    counts = verdict_counts(doc["claims"])
    lines = [stamp(doc), "",
             f"**{counts['holds']} hold, {counts['fails']} fail, {counts['inconclusive']} "
             f"inconclusive** of {len(doc['claims'])} claims.", "",
             *claims_table(doc["claims"])]
    return "\n".join(lines) + "\n"


def counts_block(papers: Sequence[Mapping[str, Any]],
                 results: Mapping[str, Mapping[str, Any]],
                 link: str = "docs/papers/{name}.md") -> str:
    lines = ["| paper | command | holds | fails | inconclusive | default run |",
             "|---|---|---|---|---|---|"]
    for paper in papers:
        name = paper["name"]
        cmd = f"`kedro run --pipeline={name}`"
        doc = results.get(name)
        if doc is None:
            lines.append(f"| {paper['title']} | {cmd} | — | — | — | not run |")
            continue
        counts = verdict_counts(doc["claims"])
        run = doc.get("run", {})
        lines.append(
            f"| {paper['title']} | {cmd} | {counts['holds']} | {counts['fails']} | "
            f"{counts['inconclusive']} | [{run.get('date', '?')}]({link.format(name=name)}) |")
    return "\n".join(lines) + "\n"


def render(text: str, papers: Sequence[Mapping[str, Any]],
           results: Mapping[str, Mapping[str, Any]],
           metrics: Mapping[str, Mapping[str, Any]] | None = None,
           studies: Sequence[str] = ()) -> str:
    """``text`` with every marked block regenerated. ``studies``: the rooms' extra pipelines
    (``results/<study>/`` like a paper's; claims and metrics tables, no verdict-counts row)."""
    known = {p["name"] for p in papers} | set(studies)

    def replace(match: re.Match[str]) -> str:
        kind, name = match["kind"], match["name"]
        args = {m["key"]: m["value"] for m in _ARG.finditer(match["args"] or "")}
        if kind != "verdict-counts" and name not in known:
            raise ValueError(f"{kind} block names an unknown pipeline {name!r}")
        if kind == "claims-table":
            body = claims_block(results.get(name), name)
        elif kind == "metrics-table":
            bad = sorted(set(args) - {"keys", "variants"})
            if bad:
                raise ValueError(f"metrics-table:{name}: unknown argument(s) {bad}; "
                                 "expected keys=... and optionally variants=...")
            variants = args["variants"].split(",") if "variants" in args else None
            body = metrics_block((metrics or {}).get(name), name,
                                 [k for k in args.get("keys", "").split(",") if k], variants)
        else:
            body = counts_block(papers, results, args.get("link", "docs/papers/{name}.md"))
        return match["open"] + body + match["close"]

    return _BLOCK.sub(replace, text)


def papers_list(project: Path) -> list[dict[str, Any]]:
    conf = yaml.safe_load((project / "conf/base/parameters_report.yml").read_text("utf-8"))
    return list(conf["report"]["papers"])


def study_names() -> list[str]:
    """Names of the rooms' study pipelines (``STUDIES`` in a room's ``pipeline.py``)."""
    from icml25.pipeline_registry import study_pipelines

    return sorted(study_pipelines())


def stale_blocks(text: str, rendered: str) -> list[str]:
    """Names of the blocks whose body differs between ``text`` and ``rendered``."""
    old = [(m["kind"], m["name"], m["body"]) for m in _BLOCK.finditer(text)]
    new = [m["body"] for m in _BLOCK.finditer(rendered)]
    return [f"{k}:{n}" if n else k for (k, n, body), fresh in zip(old, new, strict=True)
            if body != fresh]


def default_files(project: Path) -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [project / "README.md", *sorted((project / "docs").rglob("*.md"))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 and name the stale blocks instead of rewriting them")
    parser.add_argument("--project", type=Path, default=PROJECT_ROOT)
    parser.add_argument("files", nargs="*", type=Path,
                        help="Markdown files with marked blocks (default: README.md and docs/)")
    args = parser.parse_args(argv)
    project = args.project
    papers = papers_list(project)
    studies = study_names()
    results = load_results(project / "results")
    metrics = load_results(project / "results", "metrics")
    unknown = sorted(set(results) - {p["name"] for p in papers} - set(studies))
    if unknown:
        print(f"results/ has folders for unknown pipelines: {unknown}", file=sys.stderr)
        return 2
    stale = []
    for path in args.files or default_files(project):
        text = path.read_text(encoding="utf-8")
        try:
            rendered = render(text, papers, results, metrics, studies)
        except ValueError as err:
            print(f"{path}: {err}", file=sys.stderr)
            return 2
        if args.check:
            stale += [f"{path.name}: {b}" for b in stale_blocks(text, rendered)]
        elif rendered != text:
            path.write_text(rendered, encoding="utf-8")
            print(f"{path}: regenerated")
    if stale:
        print("stale results tables (run `make tables`):\n  " + "\n  ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
