"""The three pages users look at, rendered by Debian's headless chromium: the kedro-viz graph,
MLflow's compare view of a paper's variants, and the reproduction scorecard.

Each test checks what renders and saves a screenshot under its temp folder. The MLflow and
scorecard pages come from one wavetoken run (then the report) shared by the module, on conf/test
in the test suite. The README's and the docs' screenshots are these tests on a default-scale
(conf/base) run of wavetoken, regenerated with ``make screenshots``, i.e. from the repository root:

    ICML25_BROWSER_ENV=local ICML25_SCREENSHOTS=docs/screenshots .venv/bin/pytest tests/browser

Needs /usr/bin/chromium (`apt-get install chromium`; .ci/run installs it). Every server is
bound to 127.0.0.1 and chromium resolves no host name, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from icml25.core.claims import validate_claims_document
from icml25.pipeline_registry import register_pipelines

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)

PIPELINE = "wavetoken"
METRIC = "agg_rel_wql_real"
# the config env of the wavetoken run behind the MLflow and scorecard pages
RUN_ENV = os.environ.get("ICML25_BROWSER_ENV", "test")


@pytest.fixture(scope="module")
def wavetoken_run(tmp_path_factory, project_copy):
    """A throw-away project in which wavetoken, then the report, ran once (on ``RUN_ENV``)."""
    import mlflow
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    project = project_copy(tmp_path_factory.mktemp("browser") / "project")
    previous_dir, previous_uri = Path.cwd(), mlflow.get_tracking_uri()
    os.chdir(project)
    try:
        bootstrap_project(project)
        for pipeline in (PIPELINE, "report"):
            with KedroSession.create(project_path=project, env=RUN_ENV) as session:
                session.run(pipeline_names=[pipeline])
    finally:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(previous_uri)
        os.chdir(previous_dir)
    claims = project / "data/08_reporting" / PIPELINE / "claims.json"
    validate_claims_document(json.loads(claims.read_text()), str(claims))
    return project

# First-visit onboarding would cover the pages in a screenshot: kedro-viz's feature tour and
# run-status pulse, MLflow's assistant panel that opens itself (a returning user sees none).
# kedro-viz's minimap is hidden (it covers the graph's corner); MLflow's sidebar is switched
# from GenAI to model training, what these experiments are.
KEDRO_VIZ_STORAGE = {
    "KedroViz": json.dumps({"showFeatureHints": False, "visible": {"miniMap": False}}),
    "KedroViz-workflow-last-run-end-time": "9999-12-31T00:00:00Z",
}
MLFLOW_STORAGE = {
    "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true",
    "mlflow.assistant.panelOpen_v1": "false",
    "mlflow.workflowType_v1": json.dumps("machine_learning"),
}


def _label(name: str) -> str:
    """A node's label as kedro-viz may show it: last dotted part, with or without pretty names
    ("wavetoken.judge_claims" and "Judge Claims" both give "judge claims")."""
    return re.sub(r"[\s_]+", " ", name.rsplit(".", 1)[-1]).strip().lower()


def _mlflow_api(base_url: str, endpoint: str, payload: dict | None = None) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(f"{base_url}/api/2.0/mlflow/{endpoint}", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_kedro_viz_shows_the_wavetoken_graph(kedro_project, browser, serve, save_screenshot):
    kedro = Path(sys.executable).parent / "kedro"
    build = subprocess.run([str(kedro), "viz", "build"], cwd=kedro_project,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    pipeline = register_pipelines()[PIPELINE]
    n_nodes = len(pipeline.nodes)
    site = serve(kedro_project / "build")

    browser.set_viewport(1600, 1000)
    browser.open(
        f"{site}/?pid={PIPELINE}&expandAllPipelines=true",
        until=f"document.querySelectorAll('.pipeline-node--task').length == {n_nodes}",
        local_storage=KEDRO_VIZ_STORAGE,
    )

    tasks = browser.texts(".pipeline-node--task .pipeline-node__text")
    datasets = browser.texts(".pipeline-node--data .pipeline-node__text")
    assert len(tasks) == n_nodes
    assert {_label(n.name) for n in pipeline.nodes} <= {_label(t) for t in tasks}
    assert {"train", "forecast", "judge claims", "evaluate forecasts"} <= {_label(t) for t in tasks}
    assert {_label(d) for d in pipeline.outputs()} <= {_label(d) for d in datasets}
    # each variant's namespace is a collapsible group in the sidebar's tree
    tree = {_label(line) for line in browser.text(".pipeline-nodelist").splitlines()}
    assert {_label(n.namespace) for n in pipeline.nodes if n.namespace} <= tree
    assert {"raw", "model_input", "models", "reporting"} <= set(
        browser.texts(".pipeline-layer-name"))
    assert browser.text(".pipeline-list .dropdown__label").strip() == PIPELINE
    save_screenshot("kedro-viz-wavetoken.png")


def test_mlflow_compare_view_lines_up_the_variants(
        wavetoken_run, browser, start_mlflow, save_screenshot):
    metrics = json.loads((wavetoken_run / f"data/08_reporting/{PIPELINE}/metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert {"wavetoken", "chronos_bins_1024", "seasonal_naive"} <= variants
    server = start_mlflow(wavetoken_run / "mlflow.db")

    experiment = _mlflow_api(
        server, f"experiments/get-by-name?experiment_name={PIPELINE}")["experiment"]
    runs = _mlflow_api(server, "runs/search", {
        "experiment_ids": [experiment["experiment_id"]], "max_results": 1000})["runs"]
    children = {}
    for run in runs:
        tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
        if "mlflow.parentRunId" in tags and run["info"]["run_name"] in variants:
            children[run["info"]["run_name"]] = {
                "id": run["info"]["run_id"], "role": tags.get("icml25.role"),
                "metrics": {m["key"]: m["value"] for m in run["data"].get("metrics", [])}}
    assert set(children) == variants, "one child run per variant"
    metric_names = {frozenset(c["metrics"]) for c in children.values()}
    assert len(metric_names) == 1, "the variants' runs have identical metric names"
    assert METRIC in next(iter(metric_names))

    # the method first, then its baselines and ablations, as a reader compares them
    order = sorted(variants, key=lambda v: (children[v]["role"] != "method", v))
    query = urllib.parse.urlencode({
        "runs": json.dumps([children[v]["id"] for v in order]),
        "experiments": json.dumps([experiment["experiment_id"]])})
    # wide enough that the metrics grid (which renders only visible columns) shows every run
    browser.set_viewport(max(1800, 220 * (len(order) + 1)), 1100)
    browser.open(
        f"{server}/#/compare-runs?{query}",
        until=f"(t => {json.dumps([*order, METRIC])}.every(w => t.includes(w)))"
              "(document.body.innerText)",
        local_storage=MLFLOW_STORAGE,
    )

    lines = {line.strip() for line in browser.text("body").splitlines()}
    assert f"Comparing {len(order)} Runs from 1 Experiment" in lines
    run_names = browser.evaluate("""(() => {
        const row = Array.from(document.querySelectorAll('.CompareRunView tr'))
            .find(tr => tr.cells[0] && tr.cells[0].innerText.trim() === 'Run Name:');
        return row ? Array.from(row.cells).slice(1).map(c => c.innerText.trim()) : null;
    })()""")
    assert run_names == order
    shown = browser.evaluate(_METRIC_ROW_JS % json.dumps(METRIC))
    assert shown is not None and len(shown) == len(order), f"{METRIC} row: {shown}"
    for variant, value in zip(order, shown, strict=True):
        expected = children[variant]["metrics"][METRIC]
        assert math.isclose(float(value), expected, rel_tol=1e-3, abs_tol=1e-3), (
            f"{variant}: {METRIC} shows {value}, the run has {expected}")

    # the README's picture: run names over the metrics they are compared on
    browser.evaluate("""Array.from(document.querySelectorAll('.CompareRunView [role=button]'))
        .filter(e => ['Visualizations', 'Parameters'].includes(e.textContent.trim()))
        .forEach(e => e.click())""")
    browser.settle()
    save_screenshot("mlflow-compare-wavetoken.png")


# The compare view's metrics are two virtualised grids side by side: names, then one value
# column per run; a row's cells share the name cell's `top`.
_METRIC_ROW_JS = """(metric => {
    const cells = g => Array.from(
        g.querySelectorAll('.ReactVirtualized__Grid__innerScrollContainer > *'));
    const grids = Array.from(document.querySelectorAll('.CompareRunView .ReactVirtualized__Grid'));
    for (const [i, grid] of grids.entries()) {
        const name = cells(grid).find(c => c.innerText.trim() === metric);
        if (!name || !grids[i + 1]) continue;
        return cells(grids[i + 1]).filter(c => c.style.top === name.style.top)
            .sort((a, b) => parseFloat(a.style.left) - parseFloat(b.style.left))
            .map(c => c.innerText.trim());
    }
    return null;
})(%s)"""


def test_scorecard_page_has_every_paper_and_each_run_papers_figure(
        wavetoken_run, browser, save_screenshot):
    page = wavetoken_run / "data/08_reporting/scorecard.html"

    browser.open(page.as_uri(), until="document.readyState === 'complete'")

    rows = browser.evaluate("""Array.from(document.querySelectorAll('#summary tbody tr'),
        tr => Array.from(tr.cells, td => td.innerText.trim()))""")
    assert len(rows) == 19
    status = {cells[1]: cells[2:5] for cells in rows}
    assert all(re.fullmatch(r"\d+", n) for n in status[PIPELINE]), status[PIPELINE]
    status = {name: "not run" if s[0] == "not run" else "run" for name, s in status.items()}
    run = {name for name, s in status.items() if s != "not run"}

    sections = browser.evaluate("""Array.from(document.querySelectorAll('section'), s => ({
        id: s.id,
        images: Array.from(s.querySelectorAll('img'), i => ({
            inline: i.src.startsWith('data:image/png;base64,'),
            width: i.naturalWidth}))}))""")
    assert {s["id"] for s in sections} == run
    for section in sections:
        assert section["images"], f"section {section['id']} has no figure"
        for image in section["images"]:
            assert image["inline"], f"section {section['id']}: a figure is not an inline PNG"
            assert image["width"] > 0, f"section {section['id']}: a figure does not decode"
    # self-contained: nothing to fetch from a server or another file
    assert browser.evaluate(
        "document.querySelectorAll('[src]:not([src^=\"data:\"]), link[href], script').length"
    ) == 0
    save_screenshot("scorecard.png", full_page=True)
