"""`kedro viz build` writes the static pipeline graph with every registered pipeline."""

import json
import subprocess
import sys
from pathlib import Path

from icml25.pipeline_registry import register_pipelines


def test_viz_build_lists_every_pipeline_and_layer(kedro_project):
    kedro = Path(sys.executable).parent / "kedro"
    subprocess.run([str(kedro), "viz", "build"], cwd=kedro_project, check=True,
                   capture_output=True, text=True, timeout=300)
    main = json.loads((kedro_project / "build/api/main").read_text())
    assert {p["id"] for p in main["pipelines"]} == set(register_pipelines())
    for name in register_pipelines():
        assert (kedro_project / "build/api/pipelines" / name).exists()
    names = {n["name"] for n in main["nodes"]}
    assert {"build_scorecard", "wavetoken.claims", "wavetoken.metrics"} <= names
    assert {"raw", "model_input", "models", "model_output", "reporting"} <= set(main["layers"])
    assert (kedro_project / "build/index.html").exists()


def test_data_layers_follow_one_order_in_every_pipeline(kedro_project):
    """kedro-viz sorts the layers topologically and shows none when they form a cycle (a node
    reading `models` and writing `model_input` while another does the opposite). Name the nodes
    that close a cycle, so a new room's catalog cannot silently empty the layer view."""
    import networkx as nx
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(kedro_project)
    with KedroSession.create(project_path=kedro_project) as session:
        catalog = session.load_context().catalog

    def layer(name: str) -> str | None:
        if name.startswith("params:") or name == "parameters" or name not in catalog:
            return None
        metadata = getattr(catalog.get(name), "metadata", None) or {}
        return (metadata.get("kedro-viz") or {}).get("layer")

    graph = nx.DiGraph()
    for node in register_pipelines()["__default__"].nodes:
        for a in {layer(i) for i in node.inputs} - {None}:
            for b in {layer(o) for o in node.outputs} - {None, a}:
                graph.add_edge(a, b, node=node.name)
    cycles = list(nx.simple_cycles(graph))
    closing = [(u, v, graph[u][v]["node"]) for c in cycles[:3] for u, v in zip(
        c, c[1:] + c[:1], strict=True)]
    assert not cycles, f"layer cycles {cycles[:3]}; edges (from, to, node): {closing}"
