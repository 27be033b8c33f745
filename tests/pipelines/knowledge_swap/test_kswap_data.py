"""Data and parameter checks of knowledge_swap: glyph generator, MNIST split, refusals."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.linear_model import LogisticRegression

from icml25.core.params import ParameterError, validate_parameters
from icml25.pipelines.knowledge_swap import nodes
from icml25.pipelines.knowledge_swap.glyphs import GLYPH_CLASSES, make_glyph_set, render_glyphs
from icml25.pipelines.knowledge_swap.params import KnowledgeSwapParams
from icml25.pipelines.knowledge_swap.swap import SwapDataError, check_swap_sets

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def base_params() -> dict:
    text = (ROOT / "conf/base/parameters_knowledge_swap.yml").read_text()
    return yaml.safe_load(text)["knowledge_swap"]


SETTING_KEYS = ("name", "forget_classes", "learn_classes")


def _with(params: dict, **data) -> dict:
    """``params`` with ``data`` keys changed; class choices change the first setting."""
    out = copy.deepcopy(params)
    out["data"]["settings"][0].update({k: v for k, v in data.items() if k in SETTING_KEYS})
    out["data"].update({k: v for k, v in data.items() if k not in SETTING_KEYS})
    return out


def test_glyphs_are_deterministic_bounded_balanced_and_learnable():
    x, y = make_glyph_set(["ring", "square", "plus"], 120, seed=5)
    x2, _ = make_glyph_set(["ring", "square", "plus"], 120, seed=5)
    np.testing.assert_array_equal(x, x2)
    assert not np.array_equal(x, make_glyph_set(["ring", "square", "plus"], 120, seed=6)[0])
    assert x.dtype == np.float32 and x.shape == (360, 28, 28)
    assert x.min() >= 0 and x.max() <= 1 and np.isfinite(x).all()
    assert np.bincount(y).tolist() == [120, 120, 120]
    xt, yt = make_glyph_set(["ring", "square", "plus"], 60, seed=7)
    clf = LogisticRegression(max_iter=300).fit(x.reshape(len(x), -1), y)
    # raw-pixel logistic regression is far above chance (1/3) though rotation and position vary
    assert clf.score(xt.reshape(len(xt), -1), yt) > 0.6


def test_every_glyph_class_renders_strokes_and_unknown_ones_are_refused():
    rng = np.random.default_rng(0)
    for name in GLYPH_CLASSES:
        img = render_glyphs(name, 4, rng)
        assert (img.max(axis=(1, 2)) > 0.9).all(), name  # a stroke centre is drawn
        assert ((img > 0.5).mean(axis=(1, 2)) < 0.5).all(), name
    with pytest.raises(ValueError, match="unknown glyph class 'hexagon'"):
        render_glyphs("hexagon", 2, rng)


def test_split_sets_are_stratified_disjoint_and_labelled(base_params):
    params = _with(base_params, train_fraction=0.1, test_fraction=0.05)
    params["glyphs"].update(train_per_class=10, test_per_class=5)
    mnist = nodes.load_mnist(params)
    assert np.bincount(mnist["labels"]).tolist() == [500] * 10
    glyphs = nodes.make_glyphs(params)
    assert glyphs["classes"] == ["ring", "square", "plus", "x_cross", "triangle", "diamond"]
    by_setting = nodes.split_sets(mnist, glyphs, params)
    assert list(by_setting) == ["shapes_f38", "lines_f38", "shapes_f01234"]
    sets = by_setting["shapes_f38"]
    assert np.unique(sets["forget_train"][1]).tolist() == [3, 8]
    assert np.unique(sets["retain_test"][1]).tolist() == [0, 1, 2, 4, 5, 6, 7, 9]
    assert np.bincount(sets["retain_train"][1]).tolist()[:3] == [50, 50, 50]
    assert np.unique(sets["learn_train"][1]).tolist() == [10, 11, 12]
    train = {x.tobytes() for x in sets["retain_train"][0]}
    assert not any(x.tobytes() in train for x in sets["retain_test"][0])
    assert sets["retain_train"][0].max() <= 1.0
    # a setting's glyph classes are relabelled N_pre + j in its own order, images unchanged
    lines = by_setting["lines_f38"]
    assert np.unique(lines["learn_train"][1]).tolist() == [10, 11, 12]
    gx, gy = glyphs["train"]
    np.testing.assert_array_equal(lines["learn_train"][0][lines["learn_train"][1] == 11],
                                  gx[gy == 4])  # triangle: 5th cached class, 2nd of the setting
    five = by_setting["shapes_f01234"]
    assert np.unique(five["forget_test"][1]).tolist() == [0, 1, 2, 3, 4]
    assert np.unique(five["retain_test"][1]).tolist() == [5, 6, 7, 8, 9]
    # the same digit split in every setting: a setting's forget test images are the other's
    np.testing.assert_array_equal(five["retain_test"][0][five["retain_test"][1] == 8],
                                  sets["forget_test"][0][sets["forget_test"][1] == 8])
    pre = nodes.split_pretrain_sets(mnist, params)
    assert len(pre["test"][1]) == len(sets["retain_test"][1]) + len(sets["forget_test"][1])


def _sets() -> dict:
    rng = np.random.default_rng(0)

    def part(labels):
        return rng.random((len(labels), 28, 28)).astype(np.float32), np.asarray(labels)

    return {"retain_train": part([0, 1]), "retain_test": part([0, 1]),
            "forget_train": part([2, 2]), "forget_test": part([2]),
            "learn_train": part([3, 3]), "learn_test": part([3])}


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s.pop("learn_test"), "set 'learn_test' is missing"),
    (lambda s: s.update(forget_train=(np.zeros((0, 28, 28)), np.zeros(0, int))), "empty set"),
    (lambda s: s["retain_train"][0].__setitem__((0, 0, 0), np.nan), "NaN"),
    (lambda s: s.update(retain_test=(np.zeros((2, 784)), np.array([0, 1]))), r"\[n, H, W\]"),
    (lambda s: s.update(retain_test=(np.full((2, 28, 28), 2.0), np.array([0, 1]))), r"\[0, 1\]"),
    (lambda s: s.update(retain_test=(np.zeros((1, 28, 28)), np.array([2]))), "outside the forget"),
    (lambda s: s.update(learn_test=(np.zeros((1, 28, 28)), np.array([1]))), "must be new"),
])
def test_bad_swap_data_is_refused_with_a_clear_message(change, message):
    sets = _sets()
    check_swap_sets(sets, n_pre=3, n_learn=1, forget_labels=[2])
    change(sets)
    with pytest.raises(SwapDataError, match=message):
        check_swap_sets(sets, n_pre=3, n_learn=1, forget_labels=[2])


@pytest.mark.parametrize(("data", "message"), [
    ({"forget_classes": [3, "ring"], "learn_classes": ["ring"]},
     r"\['ring'\] are both in forget_classes and learn_classes"),
    ({"learn_classes": ["ring", "hexagon"]}, r"learn_classes: unknown class ids \['hexagon'\]"),
    ({"forget_classes": [3, 12]}, r"forget_classes: unknown class ids \[12\]"),
    ({"forget_classes": []}, r"knowledge_swap\.data\.settings\.0\.forget_classes: got \[\]"),
    ({"learn_classes": []}, r"knowledge_swap\.data\.settings\.0\.learn_classes: got \[\]"),
    ({"learn_classes": [4]}, "already classes of the pretrained model"),
    ({"forget_classes": list(range(10))}, "retain set is empty"),
    ({"name": "lines_f38"}, r"repeated setting names"),
    ({"name": "Bad name"}, r"knowledge_swap\.data\.settings\.0\.name"),
    ({"pretrain_domain": "imagenet100"}, r"pretrain_domain 'imagenet100': expected one of"),
    ({"settings": []}, r"knowledge_swap\.data\.settings: got \[\]"),
])
def test_bad_class_choices_are_refused_with_the_full_key(base_params, data, message):
    validate_parameters(KnowledgeSwapParams, base_params, "knowledge_swap")
    with pytest.raises(ParameterError, match=message) as err:
        validate_parameters(KnowledgeSwapParams, _with(base_params, **data), "knowledge_swap")
    assert "knowledge_swap.data" in str(err.value)


@pytest.mark.parametrize(("path", "value", "key"), [
    (("swap", "lr"), -1.0, "knowledge_swap.swap.lr"),
    (("vit", "patch"), 5, "knowledge_swap.vit"),
    (("swap", "retain_fraction"), 0.0, "knowledge_swap.swap.retain_fraction"),
    (("seeds",), [1, 1], "knowledge_swap.seeds"),
    (("device",), "tpu", "knowledge_swap.device"),
])
def test_bad_numbers_are_refused_with_the_full_key(base_params, path, value, key, assert_refused):
    assert_refused(KnowledgeSwapParams, copy.deepcopy(base_params), "knowledge_swap", path, value,
                   key.replace(".", r"\."))
