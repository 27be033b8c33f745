"""End to end: `kedro run --pipeline=vga --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

from icml25.core.chat import stub_requests, stub_server
from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.vga.params import VgaParams

PROJECT_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.usefixtures("one_thread")

VARIANTS = {"cnn", "vit", "majority", "chance", "oracle", "graph_stat_lr", "pixel_distance_lr"}


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_vga_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    """The whole pipeline, with the MLLM path talking to a local stub endpoint only."""
    with stub_server(lambda body: "Answer: yes") as url:
        run_pipeline("vga", env="test", params={"vga": {"mllm": {
            "enabled": True, "base_url": url, "model": "stub", "n_per_task": 3, "retries": 0}}})
        assert len(stub_requests(url)) == 7 * 3
    out = kedro_project / "data/08_reporting/vga"

    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == VARIANTS | {"mllm"}
    mllm = metrics["metrics"]["mllm"]
    # "yes" answers the four yes/no tasks; for shortest_path, chordless, node_count it is invalid
    assert mllm["invalid_rate"] == pytest.approx(9 / 21)
    assert mllm["acc_shortest_path_kk"] is None  # asked on the test layout only
    responses = pd.read_parquet(kedro_project / "data/07_model_output/vga/mllm_responses.parquet")
    assert len(responses) == 21 and (responses["response"] == "Answer: yes").all()
    names = {k for k in metrics["metrics"]["cnn"] if not k.endswith("_std")}
    for variant in VARIANTS:
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    for task in ("iso_easy", "iso_hard", "ham_path", "ham_cycle", "shortest_path", "chordless",
                 "node_count"):
        for variant in ("cnn", "vit", "oracle", "chance", "graph_stat_lr"):
            assert _finite(metrics["metrics"][variant][f"acc_{task}_test_layout"])
    assert metrics["metrics"]["oracle"]["min_acc_all"] == 1.0
    assert metrics["metrics"]["majority"]["acc_shortest_path_kk"] == 0.25  # balanced classes
    assert _finite(metrics["metrics"]["pixel_distance_lr"]["acc_shortest_path_random"])
    assert metrics["metrics"]["pixel_distance_lr"]["acc_ham_path_kk"] is None  # not its task
    assert len(metrics["per_seed"]["cnn"]["acc_ham_path_kk"]) == 2  # test seeds [0, 1]
    assert metrics["label_report"]["ok"]

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "vga" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 10
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        if claim["unit"] == "item":  # paired over test graphs: mean of per-graph seed means
            table = metrics["per_unit"][claim["method"]][claim["metric"]]
            assert claim["n_pairs"] == len(table) and claim["n_seeds"] == 2
            assert claim["method_value"] == pytest.approx(
                sum(sum(v) / len(v) for v in table.values()) / len(table))
        else:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    iso = metrics["per_unit"]["cnn"]["items_iso_easy_test_layout"]
    assert len(iso) == 8 and all(len(v) == 2 for v in iso.values())  # 8 test graphs, 2 seeds
    assert len(metrics["per_unit"]["cnn"]["items_reasoning_test_layout"]) == 4 * 8
    oracle = next(c for c in claims["claims"] if c["method"] == "oracle")
    assert oracle["verdict"] == "holds" and oracle["test"] == "exact"

    assert {p.name for p in (out / "figures").iterdir()} == {"examples.png", "accuracy.png"}
    scores = pd.read_csv(out / "scores.csv")
    assert set(scores["variant"]) == VARIANTS | {"mllm"} and scores["accuracy"].between(0, 1).all()
    images = pd.read_parquet(kedro_project / "data/01_raw/vga/images.parquet")
    assert set(images["layout"]) == {"kk", "planar", "random"}
    # one folder per seed shard: seed i of [0, 1] is trained, on all 7 tasks, by shard i % n
    n = seed_shards()
    models = kedro_project / "data/06_models/vga/cnn"
    for i in (0, 1):
        assert len(list(models.glob(f"shard_{i % n}/*_seed{i}.safetensors"))) == 7
    assert len(list(models.rglob("*.safetensors"))) == 7 * 2

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["vga"], output_format="list")
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert set(children) >= VARIANTS
    assert children["cnn"].data.tags["icml25.role"] == "method"
    assert children["mllm"].data.tags["icml25.role"] == "method"
    assert children["oracle"].data.tags["icml25.role"] == "baseline"
    assert "acc_ham_path_planar" in children["vit"].data.metrics
    assert mlflow.active_run() is None


def test_bad_parameter_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"vga\.models\.vit\.lr: got -1"):
        run_pipeline("vga", env="test", params={"vga": {"models": {"vit": {"lr": -1}}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


@pytest.mark.parametrize(("override", "message"), [
    ({"data": {"n_nodes": [4]}}, r"vga.data.tasks.iso_hard: .*needs at least 5 nodes"),
    ({"data": {"tasks": {"ham_path": {"train_layout": "spiral"}}}},
     r"vga\.data\.tasks\.ham_path\.train_layout: got 'spiral'"),
    ({"data": {"tasks": {"ham_path": {"test_layout": "random"}}}},
     r"test_layout 'random' is not in eval_layouts"),
    ({"data": {"n_nodes": [8, 13]}}, r"vga\.data\.n_nodes: got \[8, 13\]"),
    ({"data": {"tasks": {"node_count": {"train_layouts": ["random", "planar"]}}}},
     r"train_layout 'kk' is not in train_layouts \['random', 'planar'\]"),
    ({"data": {"tasks": {"ham_path": {"train_layouts": ["kk", "random"]}}}},
     r"must include every training layout; missing \['random'\]"),
    ({"data": {"tasks": {"node_count": {"train_layouts": ["kk", "kk"]}}}},
     r"train_layouts \['kk', 'kk'\] repeat a layout"),
    ({"train": {"bn_recalibrate_batches": -1}},
     r"vga\.train\.bn_recalibrate_batches: got -1"),
    ({"mllm": {"enabled": True}}, r"vga\.mllm: .*needs base_url and model"),
])
def test_infeasible_sizes_and_unknown_layouts_are_refused(override, message):
    """The same validation the project hook runs before any node (checked here without a
    Kedro session, on conf/base's tree with one override)."""

    def merge(base: dict, extra: dict) -> dict:
        out = dict(base)
        for key, value in extra.items():
            out[key] = merge(base.get(key, {}), value) if isinstance(value, dict) else value
        return out

    tree = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_vga.yml").read_text())["vga"]
    validate_parameters(VgaParams, tree, "vga")  # the defaults themselves are valid
    with pytest.raises(ParameterError, match=message):
        validate_parameters(VgaParams, merge(tree, override), "vga")


def test_disabled_mllm_makes_no_call_and_returns_an_empty_table():
    from icml25.pipelines.vga import nodes

    params = {"seeds": [0], "data": {"seed": 0, "n_nodes": [8, 9],
                                     "sizes": {"train": 4, "val": 4, "test": 4},
                                     "tasks": {"ham_path": {"p": [0.2, 0.3],
                                                            "train_layout": "kk",
                                                            "eval_layouts": ["kk"],
                                                            "test_layout": "kk"}}},
              "render": {"size": 64},
              "models": {"cnn": {"kind": "cnn", "lr": 1e-3, "widths": [8], "depths": [1]},
                         "vit": {"kind": "vit", "lr": 1e-3, "patch": 16, "dim": 8, "depth": 1,
                                 "heads": 1, "mlp": 8}},
              "train": {"epochs": 1, "batch_size": 4}, "gap_tasks": ["ham_path"],
              "mllm": {"enabled": False, "base_url": "http://127.0.0.1:9/v1", "model": "x"},
              "claims": [{"claim": "c", "metric": "min_acc_all", "method": "oracle",
                          "relation": "within", "threshold": 1.0, "margin": 1e-6,
                          "test": "exact"}]}
    out = nodes.mllm_eval(None, params)  # any request to port 9 would fail loudly
    assert out.empty and "response" in out.columns
