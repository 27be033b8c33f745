"""From graphs to the image data set: positions per (instance, layout), then PNG images.

The paper's protocol (``docs/papers/vga.md``, "The method"): train and validation graphs
are drawn only in the task's training layout; every test graph is drawn once in each evaluation
layout, so the layout is the only thing that changes between test sets. For the isomorphism
tasks the image is a pair: the left graph in ``pair_left_layout`` (Kamada-Kawai) and the partner
in the instance's layout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from icml25.pipelines.vga.generator import check_graphs_table, instance_graphs
from icml25.pipelines.vga.graphs import PAIR_TASKS
from icml25.pipelines.vga.layouts import LAYOUTS, layout_positions
from icml25.pipelines.vga.render import RenderConfig, join_pair, render_panel, to_png

LAYOUT_COLUMNS = ("sample_id", "task", "split", "layout", "pos_json", "partner_pos_json")
IMAGE_COLUMNS = ("sample_id", "task", "split", "layout", "label", "png")


def layouts_for(split: str, train_layouts: str | Sequence[str], eval_layouts: Sequence[str],
                index: int = 0) -> list[str]:
    """Layouts an instance of ``split`` is drawn in: a test graph in every evaluation layout; a
    training or validation graph in one training layout, the ``index``-th in turn (with one
    training layout, that one)."""
    if split not in ("train", "val"):
        return list(eval_layouts)
    train = [train_layouts] if isinstance(train_layouts, str) else list(train_layouts)
    if not train:
        raise ValueError("no training layout given")
    return [train[index % len(train)]]


def class_ranks(graphs: pd.DataFrame) -> dict[str, int]:
    """sample_id -> its rank, by index, among the instances of its task, split and label."""
    frame = graphs[["sample_id", "task", "split", "label"]].copy()
    frame["index"] = [sample_index(s) for s in frame["sample_id"]]
    frame = frame.sort_values("index", kind="stable")
    ranks = frame.groupby(["task", "split", "label"], sort=False).cumcount()
    return dict(zip(frame["sample_id"], ranks.astype(int), strict=True))


def sample_index(sample_id: str) -> int:
    """The running number of an instance within its task and split (``task/split/<i>``)."""
    try:
        return int(str(sample_id).rsplit("/", 1)[1])
    except (IndexError, ValueError):
        raise ValueError(f"sample_id {sample_id!r} does not end in /<index>") from None


def _layout_rng(seed_key: str, layout: str, panel: int) -> np.random.Generator:
    key = [*json.loads(seed_key), 1000 + LAYOUTS.index(layout), panel]
    return np.random.default_rng(np.random.SeedSequence(key))


def compute_layouts(
    graphs: pd.DataFrame,
    protocol: Mapping[str, tuple[str, Sequence[str]]],
    cfg: RenderConfig,
    pair_left_layout: str = "kk",
    random_min_dist_radii: float = 3.0,
    progress: bool = True,
) -> pd.DataFrame:
    """Pixel positions of every (instance, layout) the protocol needs.

    ``protocol``: task -> (training layout or layouts, evaluation layouts). With several
    training layouts, the training (validation) graphs of each class take them in turn, by
    index, so that every layout holds the same share of every class and the layout says
    nothing about the label.
    """
    check_graphs_table(graphs)
    rank = class_ranks(graphs)
    rows = []
    kw = {"node_radius": cfg.radius_px, "random_min_dist_radii": random_min_dist_radii,
          "min_node_dist_radii": cfg.min_node_dist_radii,
          "min_edge_clearance_radii": cfg.min_edge_clearance_radii}
    for row in tqdm(graphs.to_dict("records"), desc="vga layouts", disable=not progress,
                    leave=False):
        train_layout, eval_layouts = protocol[row["task"]]
        graph, partner, _ = instance_graphs(row)
        for layout in layouts_for(row["split"], train_layout, eval_layouts,
                                  rank[row["sample_id"]]):
            if row["task"] in PAIR_TASKS:
                left = layout_positions(graph, pair_left_layout, cfg.size,
                                        rng=_layout_rng(row["seed_key"], pair_left_layout, 0),
                                        **kw)
                right = layout_positions(partner, layout, cfg.size,
                                         rng=_layout_rng(row["seed_key"], layout, 1), **kw)
            else:
                left = layout_positions(graph, layout, cfg.size,
                                        rng=_layout_rng(row["seed_key"], layout, 0), **kw)
                right = None
            rows.append({
                "sample_id": row["sample_id"], "task": row["task"], "split": row["split"],
                "layout": layout, "pos_json": json.dumps(np.round(left, 4).tolist()),
                "partner_pos_json": json.dumps(None if right is None
                                               else np.round(right, 4).tolist()),
            })
    return pd.DataFrame(rows, columns=list(LAYOUT_COLUMNS))


def render_instance(row: Mapping, layout_row: Mapping, cfg: RenderConfig) -> np.ndarray:
    """The uint8 image of one instance in one layout."""
    graph, partner, marked = instance_graphs(row)
    left = render_panel(np.array(json.loads(layout_row["pos_json"])),
                        [tuple(e) for e in graph.edges], marked, cfg)
    partner_pos = json.loads(layout_row["partner_pos_json"])
    if partner_pos is None:
        return left
    right = render_panel(np.array(partner_pos), [tuple(e) for e in partner.edges], (), cfg)
    return join_pair(left, right)


def render_images(graphs: pd.DataFrame, layouts: pd.DataFrame, cfg: RenderConfig,
                  progress: bool = True) -> pd.DataFrame:
    """One row per (instance, layout): its PNG bytes and label."""
    check_graphs_table(graphs)
    if layouts is None or len(layouts) == 0:
        raise ValueError("vga layouts table is empty; run compute_layouts first")
    by_id = graphs.set_index("sample_id").to_dict("index")
    rows = []
    for lay in tqdm(layouts.to_dict("records"), desc="vga render", disable=not progress,
                    leave=False):
        row = {**by_id[lay["sample_id"]], "sample_id": lay["sample_id"]}
        image = render_instance(row, lay, cfg)
        rows.append({"sample_id": lay["sample_id"], "task": lay["task"], "split": lay["split"],
                     "layout": lay["layout"], "label": int(row["label"]), "png": to_png(image)})
    return pd.DataFrame(rows, columns=list(IMAGE_COLUMNS))
