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
