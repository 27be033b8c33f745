"""Generated instances, layouts and rendering: balance, leakage, label checks, layouts inside
the canvas, deterministic images."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from icml25.pipelines.vga.generator import (
    GenerationError,
    generate_graphs,
    generate_task,
    instance_graphs,
)
from icml25.pipelines.vga.graphs import TASK_CLASSES, solve
from icml25.pipelines.vga.images import compute_layouts, render_images
from icml25.pipelines.vga.label_checks import LabelCheckError, label_report
from icml25.pipelines.vga.layouts import LayoutError, layout_positions, min_distance
from icml25.pipelines.vga.render import (
    SEPARATOR_GREY,
    RenderConfig,
    from_png,
    join_pair,
    render_panel,
)

SIZES = {"train": 8, "val": 4, "test": 4}
P = {"iso_easy": (0.25, 0.4), "iso_hard": (0.25, 0.4), "ham_path": (0.2, 0.35),
     "ham_cycle": (0.25, 0.5), "shortest_path": (0.2, 0.35), "chordless": (0.2, 0.35),
     "node_count": (0.2, 0.4)}
PROTOCOL = {t: (("planar", ["planar", "random"]) if t.startswith("iso")
                else ("kk", ["kk", "planar", "random"])) for t in P}
CFG = RenderConfig(size=96)


@pytest.fixture(scope="module")
def graphs():
    return generate_graphs(P, SIZES, [8, 9], seed=7, progress=False)


@pytest.fixture(scope="module")
def layouts(graphs):
    return compute_layouts(graphs, PROTOCOL, CFG, progress=False)


def test_classes_are_exactly_balanced_and_graphs_valid(graphs):
    for (task, split), part in graphs.groupby(["task", "split"]):
        counts = np.bincount(part["label"], minlength=len(TASK_CLASSES[task]))
        assert len(set(counts.tolist())) == 1 and counts.sum() == SIZES[split], (task, split)
    for row in graphs.to_dict("records"):
        graph, partner, _ = instance_graphs(row)
        assert graph.number_of_nodes() in (8, 9)
        assert nx.is_connected(graph) and nx.check_planarity(graph)[0]
        assert solve(row["task"], graph, instance_graphs(row)[2], partner) == row["label"]


def test_shortest_path_labels_are_bfs_distances(graphs):
    for row in graphs[graphs["task"] == "shortest_path"].to_dict("records"):
        graph, _, (s, t) = instance_graphs(row)
        assert s != t and s in graph and t in graph
        assert nx.shortest_path_length(graph, s, t) == row["label"] + 1


def test_iso_pairs_and_hard_negatives(graphs):
    for row in graphs[graphs["task"].isin(["iso_easy", "iso_hard"])].to_dict("records"):
        graph, partner, _ = instance_graphs(row)
        assert nx.is_isomorphic(graph, partner) == bool(row["label"])
        if row["task"] == "iso_hard":
            assert sorted(d for _, d in graph.degree) == sorted(d for _, d in partner.degree)


def test_no_val_or_test_graph_is_isomorphic_to_a_training_graph(graphs):
    for _, frame in graphs.groupby("task"):
        train = [instance_graphs(r)[0] for r in frame[frame["split"] == "train"].to_dict("records")]
        for row in frame[frame["split"] != "train"].to_dict("records"):
            graph = instance_graphs(row)[0]
            assert not any(nx.is_isomorphic(graph, g) for g in train)


def test_label_report_verifies_by_brute_force_and_catches_a_wrong_label(graphs):
    report = label_report(graphs, n_brute_force=5, seed=0, n_nodes=[8, 9])
    assert report["ok"] and all(t["leakage_count"] == 0 for t in report["tasks"].values())
    assert all(t["brute_force_agree"] == t["brute_force_checked"] == 5
               for t in report["tasks"].values())
    bad = graphs.copy()
    idx = bad.index[bad["task"] == "ham_cycle"]
    bad.loc[idx, "label"] = 1 - bad.loc[idx, "label"]
    with pytest.raises(LabelCheckError, match="ham_cycle: brute force disagrees"):
        label_report(bad, n_brute_force=len(idx), seed=0, n_nodes=[8, 9])


def test_same_seed_gives_identical_tables_and_png_bytes(graphs, layouts):
    two = {t: P[t] for t in ("shortest_path", "iso_hard")}
    again = generate_graphs(two, SIZES, [8, 9], seed=7, progress=False)
    sub = graphs[graphs["task"].isin(two)]

    def same(a, b):
        key = ["sample_id", "layout"] if "layout" in a else ["sample_id"]
        return a.sort_values(key).reset_index(drop=True).equals(
            b.sort_values(key).reset_index(drop=True))

    assert same(again, sub)
    assert same(compute_layouts(again, PROTOCOL, CFG, progress=False),
                layouts[layouts["task"].isin(two)])
    lay = layouts[layouts["sample_id"].isin(sub["sample_id"])]
    a = render_images(sub, lay, CFG, progress=False)
    b = render_images(sub, lay, CFG, progress=False)
    assert a["png"].tolist() == b["png"].tolist()
    other = generate_task("ham_path", SIZES, [8, 9], P["ham_path"], seed=8, progress=False)
    assert other["edges_json"].tolist() != graphs[graphs["task"] == "ham_path"][
        "edges_json"].tolist()
    assert graphs["edges_json"].nunique() > 0.9 * len(graphs)  # different ids, different graphs


def test_impossible_class_budget_fails_with_a_clear_error():
    with pytest.raises(GenerationError, match=r"chordless/train: classes .* still short after 8"):
        generate_task("chordless", {"train": 8, "val": 4, "test": 4}, [8, 9], (0.3, 0.35),
                      seed=0, max_attempts_per_sample=1, progress=False)
    with pytest.raises(GenerationError, match="not divisible by its 4 classes"):
        generate_task("shortest_path", {"train": 6, "val": 4, "test": 4}, [8, 9], (0.2, 0.3),
                      seed=0, progress=False)


def test_layouts_stay_inside_the_canvas_and_random_ones_are_spread(layouts):
    radius = CFG.radius_px
    for row in layouts.to_dict("records"):
        pos = np.array(json.loads(row["pos_json"]))
        assert ((pos >= 0) & (pos <= CFG.size)).all()
        if row["layout"] == "random" and not row["task"].startswith("iso"):
            assert min_distance(pos) >= 3 * radius - 1e-6


def test_planar_layout_of_a_non_planar_graph_and_unknown_layouts_raise():
    with pytest.raises(LayoutError, match="non-planar"):
        layout_positions(nx.complete_graph(5), "planar", 128)
    with pytest.raises(LayoutError, match="unknown layout 'spiral'"):
        layout_positions(nx.path_graph(4), "spiral", 128)


def test_marks_change_pixels_only_near_the_marked_nodes():
    cfg = RenderConfig(size=128)
    graph = nx.convert_node_labels_to_integers(nx.petersen_graph())
    pos = layout_positions(graph, "kk", cfg.size)
    plain = render_panel(pos, list(graph.edges), (), cfg)
    marked = render_panel(pos, list(graph.edges), (2, 7), cfg)
    diff = np.argwhere(plain != marked)
    assert len(diff)
    # a square's corners reach sqrt(2) r; Lanczos (a=3) spreads them by up to 3 output pixels
    reach = 2 * cfg.radius_px + 3
    for y, x in diff:
        assert min(max(abs(x - pos[v][0]), abs(y - pos[v][1])) for v in (2, 7)) <= reach
    dark = (plain < 128).mean()
    assert 0.01 <= dark <= 0.40


def test_pair_images_have_the_grey_separator(graphs, layouts):
    sub = graphs[graphs["task"] == "iso_easy"].head(2)
    images = render_images(sub, layouts[layouts["sample_id"].isin(sub["sample_id"])], CFG,
                           progress=False)
    img = from_png(images["png"].iloc[0])
    assert img.shape == (CFG.size, 2 * CFG.size + 2)
    assert (img[:, CFG.size:CFG.size + 2] == SEPARATOR_GREY).all()
    assert join_pair(img[:, :5], img[:, :5]).shape == (CFG.size, 12)


def test_labels_do_not_depend_on_node_names_or_layout(graphs, layouts):
    rng = np.random.default_rng(3)
    for row in graphs[graphs["split"] == "test"].to_dict("records"):
        graph, partner, marked = instance_graphs(row)
        perm = rng.permutation(graph.number_of_nodes())
        mapping = {v: int(perm[v]) for v in graph.nodes}
        relabelled = nx.relabel_nodes(graph, mapping)
        relabelled = nx.convert_node_labels_to_integers(relabelled, ordering="sorted")
        moved = [mapping[m] for m in marked]
        assert solve(row["task"], relabelled, moved, partner) == row["label"]
    # every evaluation layout of a test graph carries the same label (layout is only a drawing)
    n_layouts = layouts[layouts["split"] == "test"].groupby("sample_id")["layout"].nunique()
    assert (n_layouts >= 2).all()


def test_matplotlib_backend_renders_the_same_canvas():
    cfg = RenderConfig(size=64, backend="matplotlib")
    graph = nx.cycle_graph(8)
    img = render_panel(layout_positions(graph, "kk", 64), list(graph.edges), (0, 4), cfg)
    assert img.shape == (64, 64) and 0.01 <= (img < 128).mean() <= 0.4


def test_several_training_layouts_split_every_class_evenly(graphs):
    """The control trained on two layouts: each training / validation graph is drawn once, in
    one of them, every class half in each (the layout says nothing about the label); test
    graphs in every evaluation layout."""
    sub = graphs[graphs["task"] == "node_count"]
    lay = compute_layouts(sub, {"node_count": (["kk", "random"], ["kk", "planar", "random"])},
                          CFG, progress=False)
    labels = sub.set_index("sample_id")["label"]
    for split in ("train", "val"):
        part = lay[lay["split"] == split]
        assert part["sample_id"].is_unique and len(part) == SIZES[split]
        counts = part.assign(label=labels.loc[part["sample_id"]].to_numpy()).groupby(
            ["layout", "label"]).size()
        assert set(counts.index.get_level_values(0)) == {"kk", "random"}
        assert counts.nunique() == 1 and counts.iloc[0] == SIZES[split] // 4
    test = lay[lay["split"] == "test"]
    drawn = test.groupby("sample_id")["layout"].apply(sorted).tolist()
    assert drawn == [["kk", "planar", "random"]] * SIZES["test"]
    one = compute_layouts(sub, {"node_count": ("kk", ["kk", "planar"])}, CFG, progress=False)
    assert set(one.loc[one["split"] != "test", "layout"]) == {"kk"}
