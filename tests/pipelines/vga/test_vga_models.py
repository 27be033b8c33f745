"""Vision models and their training loop, prediction scoring and its metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icml25.pipelines.vga.models import build_model
from icml25.pipelines.vga.scoring import metric_names, seed_metrics, variant_metrics
from icml25.pipelines.vga.vision import (
    dihedral_augment,
    predict,
    recalibrate_batchnorm,
    train_classifier,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("kind", ["cnn", "vit"])
def test_models_read_single_and_pair_images(kind):
    kw = ({"widths": [8, 16], "depths": [1, 1]} if kind == "cnn" else
          {"image_size": 64, "patch": 8, "dim": 16, "depth": 1, "heads": 2, "mlp": 32})
    torch.manual_seed(0)
    model = build_model(kind, 4, **kw)
    assert model(torch.zeros(2, 1, 64, 64)).shape == (2, 4)
    assert model(torch.zeros(3, 1, 64, 130)).shape == (3, 4)  # pair: 64 x (2*64 + 2)


def test_dihedral_augmentation_keeps_ink_and_pair_panels():
    rng = np.random.default_rng(0)
    x = torch.rand(6, 1, 8, 8)
    y = dihedral_augment(x, rng, pair=False)
    assert torch.allclose(y.sum(dim=(1, 2, 3)), x.sum(dim=(1, 2, 3)))
    pair = torch.rand(4, 1, 8, 18)
    out = dihedral_augment(pair, np.random.default_rng(1), pair=True)
    for a, b in zip(pair, out, strict=True):  # left panel stays left: only vertical flips
        assert torch.equal(a, b) or torch.equal(torch.flip(a, dims=[-2]), b)


def _blobs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Images with one or two dark squares (a counting task any working CNN solves)."""
    x = np.full((n, 32, 32), 255, dtype=np.uint8)
    y = rng.integers(0, 2, size=n)
    for i in range(n):
        for _ in range(1 + y[i]):
            r, c = rng.integers(2, 26, size=2)
            x[i, r:r + 5, c:c + 5] = 0
    return x, y


def test_training_loop_learns_a_perceptual_count_and_restores_best_validation():
    rng = np.random.default_rng(0)
    x, y = _blobs(360, rng)
    trained = train_classifier("cnn", {"widths": [16, 32], "depths": [1, 1]}, 2,
                               x[:300], y[:300], x[300:], y[300:], seed=0, epochs=3,
                               batch_size=32, lr=3e-3, progress=False,
                               test_sets={"same": (x[300:], y[300:])})
    acc = (predict(trained.model, x[300:]) == y[300:]).mean()
    assert acc > 0.9
    assert len(trained.val_acc_by_epoch) == 3
    assert acc == pytest.approx(max(trained.val_acc_by_epoch))  # best-validation checkpoint
    again = train_classifier("cnn", {"widths": [16, 32], "depths": [1, 1]}, 2,
                             x[:300], y[:300], x[300:], y[300:], seed=0, epochs=3,
                             batch_size=32, lr=3e-3, progress=False)
    assert again.val_acc_by_epoch == trained.val_acc_by_epoch  # deterministic on CPU


def test_training_refuses_empty_or_mismatched_data():
    x = np.zeros((4, 32, 32), dtype=np.uint8)
    with pytest.raises(ValueError, match="empty training or validation set"):
        train_classifier("cnn", {"widths": [8], "depths": [1]}, 2, x[:0], np.zeros(0), x,
                         np.zeros(4), seed=0, epochs=1, batch_size=2, lr=1e-3, progress=False)
    with pytest.raises(ValueError, match="differ in length"):
        train_classifier("cnn", {"widths": [8], "depths": [1]}, 2, x, np.zeros(3), x,
                         np.zeros(4), seed=0, epochs=1, batch_size=2, lr=1e-3, progress=False)


PROTOCOL = {
    "shortest_path": {"train_layout": "kk", "eval_layouts": ["kk", "planar"],
                      "test_layout": "planar"},
    "node_count": {"train_layout": "kk", "eval_layouts": ["kk", "planar"],
                   "test_layout": "planar"},
}


def _preds(rows):
    return pd.DataFrame(rows, columns=["variant", "seed", "task", "layout", "sample_id",
                                       "label", "pred"])


def test_metrics_from_a_hand_made_prediction_table():
    rows = []
    # shortest_path kk: 4/4 right; planar: d=1 wrong twice, d=2 right twice -> 2/4
    for i, (lab, pk, pp) in enumerate([(0, 0, 3), (0, 0, 1), (1, 1, 1), (1, 1, 1)]):
        rows += [("m", 0, "shortest_path", "kk", f"s{i}", lab, pk),
                 ("m", 0, "shortest_path", "planar", f"s{i}", lab, pp)]
    # node_count kk: 2/2, planar: 1/2 with one invalid answer
    rows += [("m", 0, "node_count", "kk", "n0", 0, 0), ("m", 0, "node_count", "kk", "n1", 1, 1),
             ("m", 0, "node_count", "planar", "n0", 0, 0),
             ("m", 0, "node_count", "planar", "n1", 1, -1)]
    m = seed_metrics(_preds(rows), PROTOCOL, ["shortest_path"])
    assert m["acc_shortest_path_kk"] == 1.0 and m["acc_shortest_path_planar"] == 0.5
    assert m["ood_gap_shortest_path"] == 0.5
    assert m["chance_dev_shortest_path"] == pytest.approx(0.25)
    assert m["easier_worse_index"] == pytest.approx(0.0 - 1.0)  # d=1 all wrong, d=2 all right
    assert m["min_acc_node_count"] == 0.5 and m["min_acc_all"] == 0.5
    assert m["invalid_rate"] == pytest.approx(1 / 12)
    assert m["frac_positive_gap"] == 1.0 and m["mean_acc_reasoning_test"] == 0.5
    assert m["n_middle_scores"] == 1.0  # shortest_path 0.5 is between 0.35 and 0.9
    assert set(m) == set(metric_names(PROTOCOL, ["shortest_path"]))


def test_every_variant_reports_the_same_metric_names_even_with_missing_tasks():
    rows = [("a", s, "node_count", lo, "n0", 0, 0) for s in (0, 1) for lo in ("kk", "planar")]
    rows += [("a", s, "shortest_path", lo, "s0", 0, 0) for s in (0, 1) for lo in ("kk", "planar")]
    rows += [("b", 0, "shortest_path", lo, "s0", 0, 1) for lo in ("kk", "planar")]
    metrics = variant_metrics(_preds(rows), PROTOCOL, ["shortest_path"])
    assert set(metrics["a"]) == set(metrics["b"])
    assert metrics["a"]["min_acc_all"] == [1.0, 1.0]
    assert np.isnan(metrics["b"]["acc_node_count_kk"][0])  # b never answered node_count


def test_batchnorm_recalibration_replaces_stale_statistics_with_the_batch_average():
    """Features near 100 whose class is which side of 100 they lie: with the running
    statistics BatchNorm starts from (mean 0, var 1) the evaluation-mode model answers one
    class for everything; re-estimated on the data it separates them."""
    torch.manual_seed(0)
    feats = torch.cat([100 - torch.rand(64, 1) - 0.1, 100 + torch.rand(64, 1) + 0.1])
    labels = torch.cat([torch.zeros(64), torch.ones(64)]).long()
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(1), torch.nn.Linear(1, 2))
    with torch.no_grad():
        model[1].weight.copy_(torch.tensor([[-1.0], [1.0]]))
        model[1].bias.zero_()
    model.eval()
    assert (model(feats).argmax(1) == labels).float().mean() == 0.5  # stale: one class
    batches = [feats[i::4] for i in range(4)]  # four equal batches, each of both classes
    recalibrate_batchnorm(model, batches)
    assert not model.training and model[0].momentum == 0.1  # mode and momentum restored
    assert model[0].running_mean.item() == pytest.approx(feats.mean().item(), abs=1e-4)
    batch_var = torch.stack([b.var(unbiased=True) for b in batches]).mean()
    assert model[0].running_var.item() == pytest.approx(batch_var.item(), rel=1e-4)
    assert (model(feats).argmax(1) == labels).float().mean() == 1.0
