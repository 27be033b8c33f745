"""The documentation site: `mkdocs build --strict` succeeds, every page of the navigation
exists, every page under docs/ is in it, and every paper of `report.papers` has its page under
*Papers*, titled as in the report and in the report's order.

The build and the page checks need all 19 pages `docs/papers/<name>.md`; they fail, naming the
missing ones, while any is absent.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# the only resource a built page may load from outside the site: MathJax, read by the browser
EXTERNAL_ALLOWED = ("https://cdn.jsdelivr.net/npm/mathjax@3/",)


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def _pages(nav: list, section: str = "") -> list[tuple[str, str, str]]:
    """(section, title, path) of every page in a MkDocs ``nav`` list, depth first."""
    out = []
    for entry in nav:
        if isinstance(entry, str):
            out.append((section, "", entry))
            continue
        (title, value), = entry.items()
        if isinstance(value, list):
            out += _pages(value, title)
        else:
            out.append((section, title, value))
    return out


def _papers() -> list[dict]:
    conf = yaml.safe_load((ROOT / "conf/base/parameters_report.yml").read_text(encoding="utf-8"))
    return list(conf["report"]["papers"])


def test_site_configuration_is_the_documented_one():
    config = _config()
    assert config["site_name"] == "icml25"
    assert config["docs_dir"] == "docs"
    assert config["theme"]["name"] == "material"
    assert config["strict"] is True


def test_every_page_in_the_navigation_exists():
    missing = [path for _, _, path in _pages(_config()["nav"]) if not (DOCS / path).is_file()]
    assert not missing, f"mkdocs.yml names pages that docs/ does not have: {missing}"


def test_every_page_under_docs_is_in_the_navigation():
    in_nav = {path for _, _, path in _pages(_config()["nav"])}
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert not pages - in_nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - in_nav)}"


def test_every_paper_of_the_report_has_its_page_under_papers():
    papers_nav = [(title, path) for section, title, path in _pages(_config()["nav"])
                  if section == "Papers"]
    expected = [(p["title"], f"papers/{p['name']}.md") for p in _papers()]
    assert len(expected) == 19
    assert papers_nav == expected, (
        "the Papers section of mkdocs.yml must list report.papers in order, titled as there")


def test_the_site_builds_with_strict_warnings(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs and mkdocs-material are not installed (the `dev` extra has them)")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    for _, _, path in _pages(_config()["nav"]):
        assert (site / path).with_suffix(".html").is_file(), f"{path} was not built"
    for image in sorted((DOCS / "screenshots").glob("*.png")):
        assert (site / "screenshots" / image.name).is_file()
    external, broken_math = set(), []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        # nothing else is loaded from outside the site: no web fonts, no other scripts or styles
        external |= {url for url in re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?:[^"]+)"',
                                               html)
                     if not url.startswith(EXTERNAL_ALLOWED)}
        # `$$...$$` inside a paragraph is typeset as inline math between two stray dollars;
        # display math needs a blank line before and after it
        if '$<span class="arithmatex">' in html:
            broken_math.append(page.relative_to(site).as_posix())
    assert not external, f"built pages load resources from outside the site: {sorted(external)}"
    assert not broken_math, (
        "pages with display math ($$...$$) not set off by blank lines (it renders as inline math "
        f"between stray dollar signs): {broken_math}")
