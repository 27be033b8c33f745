"""The certification cascade and the data loaders: per-sample ordering, subsets, refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icml25.pipelines.ctbench.bounds import BoundInputError
from icml25.pipelines.ctbench.certification import (
    certify,
    relu_states,
    stratified_subset,
    summarize,
)
from icml25.pipelines.ctbench.certified_training import MethodConfig, TrainSetting, train_certified
from icml25.pipelines.ctbench.data import (
    CtbenchDataError,
    frame_to_images,
    images_to_frame,
    load_images,
    split_frame,
    validate_images,
)
from icml25.pipelines.ctbench.networks import build_network

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def digits():
    images, labels = load_images("digits")
    return torch.tensor(images), torch.tensor(labels)


@pytest.fixture(scope="module")
def ibp_model(digits):
    x, y = digits
    torch.manual_seed(0)
    net = build_network("mlp", (1, 8, 8), 10, width=32)
    setting = TrainSetting(0.05, 0.05, 5, 32, 0, 3, (4,), selection="final", lr=5e-3)
    train_certified(net, MethodConfig("ibp"), setting, x[:400], y[:400], x[400:480],
                    y[400:480], 10, seed=0, progress=False)
    return net.eval()


def test_certified_within_pgd_robust_within_correct_per_sample(digits, ibp_model):
    x, y = digits
    xt, yt = x[1000:1200], y[1000:1200]
    subset = stratified_subset(yt.numpy(), 40, seed=0)
    table = certify(ibp_model, xt, yt, 0.05, 10, pgd_steps=20, pgd_restarts=2,
                    crown_index=subset, crown_chunk=16, batch_size=64, progress=False)
    assert len(table) == 200 and table["in_crown_subset"].sum() == 40
    assert not (table["certified"] & ~table["pgd_robust"]).any()
    assert not (table["pgd_robust"] & ~table["correct"]).any()
    # the union is at least each member; CROWN is no looser than IBP on its subset
    for stage in ("ibp", "crown_ibp", "crown"):
        assert (table["certified"] >= table[stage]).all()
    sub = table[table["in_crown_subset"]]
    assert (sub["crown_margin"] >= sub["ibp_margin"] - 1e-5).all()
    s = summarize(table)
    assert s["cert_acc"] <= s["pgd_acc"] <= s["nat_acc"]
    assert s["cert_acc"] > 20  # the IBP-trained net certifies a good part at its training ε
    assert s["ordering_violations"] == 0
    assert s["cert_crown_subset_acc"] >= s["cert_ibp_subset_acc"]


def test_zero_eps_certifies_exactly_the_correct_samples(digits, ibp_model):
    x, y = digits
    table = certify(ibp_model, x[1200:1300], y[1200:1300], 0.0, 10, pgd_steps=2,
                    pgd_restarts=1, crown_index=np.arange(10), progress=False)
    assert (table["certified"] == table["correct"]).all()
    assert (table["pgd_robust"] == table["correct"]).all()


def test_ordering_violation_is_counted_not_hidden():
    table = pd.DataFrame({"correct": [True, True, False], "pgd_robust": [True, False, False],
                          "certified": [True, True, False], "ibp": [True, True, False],
                          "crown_ibp": [False] * 3, "crown": [False] * 3,
                          "in_crown_subset": [False] * 3})
    assert summarize(table)["ordering_violations"] == 1


def test_relu_states_are_fractions_and_grow_unstable_with_eps(ibp_model, digits):
    x, _ = digits
    small, large = relu_states(ibp_model, x[:100], 0.01), relu_states(ibp_model, x[:100], 0.3)
    for s in (small, large):
        assert sum(s.values()) == pytest.approx(1.0)
    assert large["relu_unstable"] > small["relu_unstable"]


def test_stratified_subset_takes_every_class_not_the_first_n():
    labels = np.repeat(np.arange(10), 100)  # class-sorted, as the split is
    idx = stratified_subset(labels, 100, seed=1)
    assert len(idx) == 100 and len(set(idx)) == 100
    assert np.bincount(labels[idx], minlength=10).tolist() == [10] * 10
    assert stratified_subset(labels, 5000, seed=1).tolist() == list(range(1000))


def test_digits_loader_and_split_are_stratified(digits):
    images, labels = load_images("digits")
    assert images.shape == (1797, 1, 8, 8) and images.dtype == np.float32
    assert images.min() >= 0 and images.max() <= 1
    frame = images_to_frame(images, labels)
    split = split_frame(frame, 0.2, 0.1, seed=0, max_train=300)
    counts = split["split"].value_counts()
    assert counts["train"] == 300 and abs(counts["test"] - 0.2 * 1797) < 10
    test = split[split["split"] == "test"]
    assert test["label"].value_counts().max() - test["label"].value_counts().min() <= 2
    back, back_labels = frame_to_images(split.drop(columns="split"))
    assert back.shape[1:] == (1, 8, 8) and len(back_labels) == len(split)


def test_bad_data_is_refused_with_a_clear_error():
    good = np.random.default_rng(0).random((5, 1, 4, 4)).astype(np.float32)
    labels = np.arange(5)
    bad = good.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(CtbenchDataError, match="1 non-finite pixels"):
        validate_images(bad, labels)
    with pytest.raises(CtbenchDataError, match=r"pixels must lie in \[0, 1\]"):
        validate_images(good * 255, labels)
    with pytest.raises(CtbenchDataError, match=r"expected images \[N, 1, H, W\]"):
        validate_images(good[:, 0], labels)
    with pytest.raises(CtbenchDataError, match="no images"):
        validate_images(good[:0], labels[:0])
    with pytest.raises(CtbenchDataError, match="labels of shape"):
        validate_images(good, labels[:3])
    with pytest.raises(CtbenchDataError, match="empty"):
        frame_to_images(pd.DataFrame())
    with pytest.raises(CtbenchDataError, match="dataset: got 'cifar'"):
        load_images("cifar")


def test_certify_refuses_non_finite_test_images(ibp_model):
    x = torch.rand(4, 1, 8, 8)
    x[1, 0, 0, 0] = float("inf")
    with pytest.raises(BoundInputError, match="test images: 1 non-finite"):
        certify(ibp_model, x, torch.zeros(4, dtype=torch.long), 0.1, 10, pgd_steps=1,
                pgd_restarts=1, crown_index=np.arange(0), progress=False)


def test_mnist_cache_is_read_back_and_checked(tmp_path):
    cache = tmp_path / "mnist5k.npz"
    images = np.random.default_rng(0).random((20, 1, 28, 28)).astype(np.float32)
    np.savez_compressed(cache, images=images, labels=np.arange(20) % 10)
    loaded, labels = load_images("mnist5k", str(cache))
    assert np.array_equal(loaded, images) and labels.tolist() == (np.arange(20) % 10).tolist()
    images[0, 0, 0, 0] = np.nan
    np.savez_compressed(cache, images=images, labels=np.arange(20) % 10)
    with pytest.raises(CtbenchDataError, match="mnist5k: 1 non-finite"):
        load_images("mnist5k", str(cache))
