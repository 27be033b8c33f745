"""The learning gate of the chance-level claims, the chance band and readable drawings."""

from __future__ import annotations

import copy

import networkx as nx
import numpy as np
import pytest
import torch

from icml25.core.claims import claims_report, validate_claims_document
from icml25.pipelines.vga.gate import apply_control_gate, chance_band, chance_claim_task
from icml25.pipelines.vga.layouts import (
    drawing_overlap,
    edge_clearance,
    has_crossing,
    layout_positions,
)
from icml25.pipelines.vga.models import build_model
from icml25.pipelines.vga.render import RenderConfig, render_panel

PROTOCOL = {"iso_hard": {"test_layout": "planar"}, "node_count": {"test_layout": "planar"}}
CHANCE = {"claim": "at chance", "metric": "items_iso_hard_test_layout", "method": "cnn",
          "relation": "within", "threshold": 0.5, "margin": 0.05, "unit": "item",
          "test": "bootstrap"}
OTHER = {"claim": "control", "metric": "min_acc_node_count", "method": "cnn",
         "relation": "better", "direction": "higher", "threshold": 0.9}


def _doc(control: list[float]):
    rng = np.random.default_rng(0)
    items = {str(i): [float(v) for v in rng.integers(0, 2, 3)] for i in range(400)}
    metrics = {"cnn": {"items_iso_hard_test_layout": items, "min_acc_node_count": control,
                       "acc_node_count_planar": control}}
    doc = claims_report("vga", [CHANCE, OTHER], metrics, {"env": "t"}, [0, 1, 2])
    return doc, metrics


def test_chance_claims_are_recognised_by_relation_and_metric():
    assert chance_claim_task(CHANCE) == "iso_hard"
    assert chance_claim_task(OTHER) is None
    assert chance_claim_task({**CHANCE, "relation": "better"}) is None


def test_gate_makes_a_chance_claim_inconclusive_when_the_control_is_under_90_percent():
    doc, metrics = _doc([0.5, 0.52, 0.49])
    before = copy.deepcopy(doc)
    gated, rows = apply_control_gate(doc, metrics, PROTOCOL, "node_count", 0.9)
    claim = gated["claims"][0]
    assert claim["verdict"] == "inconclusive" and not claim["holds"]
    assert "not judged" in claim["reason"] and "0.503" in claim["reason"]
    assert before["claims"][0]["verdict"] in claim["reason"]
    assert gated["claims"][1] == before["claims"][1]  # only chance-level claims are gated
    assert rows == [{"claim": "at chance", "method": "cnn", "control": "acc_node_count_planar",
                     "control_acc": pytest.approx(0.50333, abs=1e-4), "min_acc": 0.9,
                     "judged": False, "interval_verdict": before["claims"][0]["verdict"]}]
    validate_claims_document(gated)  # counts recomputed


def test_gate_keeps_the_verdict_when_the_control_has_learned():
    doc, metrics = _doc([0.95, 0.97, 0.93])
    before = copy.deepcopy(doc)
    gated, rows = apply_control_gate(doc, metrics, PROTOCOL, "node_count", 0.9)
    assert gated["claims"] == before["claims"] and rows[0]["judged"]
    validate_claims_document(gated)


def test_chance_band_needs_1537_items_for_2_5_points():
    assert chance_band(1537, 2) <= 0.025 < chance_band(1536, 2)
    assert chance_band(1600, 2) == pytest.approx(1.96 * 0.5 / 40)
    assert chance_band(1600, 4) < chance_band(1600, 2)


def test_overlapping_nodes_and_nodes_on_foreign_edges_are_detected_and_refused():
    edges = [(0, 1), (2, 3)]
    pos = np.array([[10.0, 10.0], [50.0, 10.0], [30.0, 40.0], [30.0, 60.0]])
    assert drawing_overlap(pos, edges, 2.5, 3.0, 1.4) is None
    close = pos.copy()
    close[3] = [32.0, 41.0]
    assert "two nodes" in drawing_overlap(close, edges, 2.5, 3.0, 1.4)
    on_edge = pos.copy()
    on_edge[2] = [30.0, 11.0]  # node 2 sits on edge (0, 1)
    assert edge_clearance(on_edge, edges) == pytest.approx(1.0)
    assert "edge it is not an end of" in drawing_overlap(on_edge, edges, 2.5, 3.0, 1.4)
    for bad in (close, on_edge):
        with pytest.raises(ValueError, match="refusing to draw"):
            render_panel(bad, edges, (), RenderConfig(size=64))


def test_crossings_are_found():
    square = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    assert has_crossing(square, [(0, 1), (2, 3)])
    assert not has_crossing(square, [(0, 2), (1, 3)])
    assert not has_crossing(square, [(0, 1), (1, 2)])  # a shared end is no crossing


@pytest.mark.parametrize("layout", ["kk", "planar", "random"])
def test_layouts_are_re_drawn_until_readable(layout):
    rng = np.random.default_rng(3)
    for k in range(6):
        graph = nx.convert_node_labels_to_integers(nx.random_labeled_tree(9, seed=k))
        graph.add_edges_from([(0, 5), (2, 7)])
        if not nx.check_planarity(graph)[0]:
            continue
        pos = layout_positions(graph, layout, 128, rng=rng)
        assert drawing_overlap(pos, list(graph.edges), 2.5, 3.0, 1.4) is None
        if layout == "planar":
            assert not has_crossing(pos, graph.edges)


def test_unreadable_layouts_are_refused_with_the_parameters_to_change():
    from icml25.pipelines.vga.layouts import LayoutError
    with pytest.raises(LayoutError, match=r"no readable kk drawing.*min_node_dist_radii"):
        layout_positions(nx.star_graph(8), "kk", 16, node_radius=2.5, max_redraws=3)


@pytest.mark.parametrize("kind", ["cnn", "vit"])
def test_conv_stem_and_batch_norm_read_out_build_and_run(kind):
    kw = ({"widths": [8, 16], "depths": [1, 1], "conv_stem": 4, "head_norm": "batch",
           "pool": "sum"} if kind == "cnn" else
          {"image_size": 64, "patch": 16, "dim": 16, "depth": 1, "heads": 2, "mlp": 32,
           "conv_stem": 4, "head_norm": "batch", "pool": "mean"})
    torch.manual_seed(0)
    model = build_model(kind, 2, **kw)
    assert model(torch.rand(3, 1, 64, 64)).shape == (3, 2)
    assert model(torch.rand(2, 1, 64, 130)).shape == (2, 2)
    with pytest.raises(ValueError, match="head_norm"):
        build_model(kind, 2, **{**kw, "head_norm": "group"})
