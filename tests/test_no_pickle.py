"""Nothing a user may receive from a DVC remote is a pickle (issue 34): every catalog entry that
held a pickle is an ``ArrayTreeDataset`` (.npz, read with ``allow_pickle=False``), which round-
trips each kind of data the rooms store, and refuses what it cannot rebuild without code."""

from __future__ import annotations

import dataclasses
import importlib
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from kedro.io import DatasetError

from icml25.core.datasets import ArrayTreeDataset
from icml25.pipelines.softshape.ucr_data import LabelledSeries
from icml25.pipelines.twa.training import MethodConfig

ROOT = Path(__file__).resolve().parents[1]
LABELLED = "icml25.pipelines.softshape.ucr_data.LabelledSeries"
METHOD = "icml25.pipelines.twa.training.MethodConfig"


def _catalog_entries():
    for path in sorted((ROOT / "conf").glob("*/catalog*.yml")):
        for name, entry in (yaml.safe_load(path.read_text()) or {}).items():
            if isinstance(entry, dict):
                yield path, name, entry


def _types(entry):
    """The dataset types of an entry, including a wrapped or partitioned one's."""
    while isinstance(entry, dict):
        yield entry.get("type")
        entry = entry.get("dataset")
    if isinstance(entry, str):
        yield entry


def test_no_catalog_entry_is_a_pickle():
    offenders = [f"{p.relative_to(ROOT)}: {name}" for p, name, entry in _catalog_entries()
                 if any(t and "pickle" in t.lower() for t in _types(entry))]
    assert not offenders, offenders
    extensions = [f"{p.relative_to(ROOT)}: {name}" for p, name, entry in _catalog_entries()
                  if str(entry.get("filepath", "")).endswith((".pkl", ".pickle"))]
    assert not extensions, extensions


def test_no_source_file_unpickles():
    pattern = re.compile(r"^\s*(import (cloud)?pickle|from (cloud)?pickle )|pickle\.loads?\(|"
                         r"read_pickle\(|torch\.load\((?![^)]*weights_only=True)", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "src").rglob("*.py"))
                 if pattern.search(p.read_text())]
    assert not offenders, offenders


def test_array_tree_entries_name_importable_dataclasses():
    entries = [(name, entry) for _, name, entry in _catalog_entries()
               if entry.get("type") == "icml25.core.datasets.ArrayTreeDataset"]
    assert len(entries) >= 20  # the 24 entries that were pickles (3 of them shard factories)
    for name, entry in entries:
        assert str(entry["filepath"]).endswith(".npz"), name
        for dotted in entry.get("dataclasses", []):
            module, _, cls = dotted.rpartition(".")
            assert dataclasses.is_dataclass(getattr(importlib.import_module(module), cls)), name


def _assert_same(a, b, where="data"):
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def _roundtrip(tmp_path, data, **kwargs):
    ds = ArrayTreeDataset(filepath=str(tmp_path / "sub" / "tree.npz"), **kwargs)
    ds.save(data)
    assert ds.exists() and not list((tmp_path / "sub").glob("*.tmp*"))
    back = ds.load()
    _assert_same(data, back)
    return back


def test_bare_array_roundtrip(tmp_path):  # frugal's token streams
    _roundtrip(tmp_path, np.arange(1000, dtype=np.int32))


def test_dict_of_arrays_and_tuples_roundtrip(tmp_path):  # steerable, knowledge_swap sets
    rng = np.random.default_rng(0)
    _roundtrip(tmp_path, {
        "images": rng.integers(0, 255, (5, 28, 28), dtype=np.uint8),
        "train": (rng.random((4, 28, 28), dtype=np.float32), np.arange(4)),
        "classes": ["ring", "square"], "angles": rng.random(4), "mask": np.array([True, False]),
    })


def test_non_string_keys_roundtrip(tmp_path):  # robust_rl (n, seed) keys, twa seed keys
    data = {"garnet": {(10, 0): np.eye(3), (30, 4): np.ones((2, 2))},
            "runs": {0: {"sft": ({"mqm": 5.7, "ok": True}, np.arange(3.0))}, 2: {}},
            "mixed": {None: 1, 1.5: "x", False: [None]}}
    back = _roundtrip(tmp_path, data)
    assert (10, 0) in back["garnet"] and 0 in back["runs"]


def test_scalars_keep_their_types(tmp_path):
    data = [1, 2.5, float("nan"), float("inf"), "s", None, True, np.float32(0.1), np.int64(7),
            np.bool_(True), 10**30]
    back = _roundtrip(tmp_path, data)
    assert type(back[7]) is np.float32 and back[7] == np.float32(0.1)


def test_frames_in_a_tree_roundtrip(tmp_path):  # acorn's banks, ex2psro's evaluation
    index = pd.DataFrame({"clip": ["a", "b"], "scale": [0.5, 2.0], "n": [1, 2]},
                         index=pd.Index([3, 7], name="row"))
    _roundtrip(tmp_path, {"index": index, "audio": [np.zeros(4, np.int16), np.ones(6, np.int16)],
                          "scale": 0.25, "curves": pd.DataFrame({"t": np.arange(3)})})


def test_torch_tensors_roundtrip(tmp_path):  # malot's LoT-Solver state dicts
    net = torch.nn.Linear(3, 2)
    data = {"vocab": ["<pad>", "a"], "config": {"d_model": 8},
            "models": {0: net.state_dict(), 1: {"w": torch.ones(2, dtype=torch.bfloat16)}}}
    _roundtrip(tmp_path, data)


def test_listed_dataclasses_roundtrip(tmp_path):  # softshape's sets, twa's method configs
    series = LabelledSeries(name="CBF", X=np.zeros((2, 5)), y=np.array([0, 1]), classes=["a", "b"],
                            original_test=np.array([False, True]), windows=None,
                            extra={"k": 1})
    _roundtrip(tmp_path, {"CBF": series}, dataclasses=[LABELLED])
    _roundtrip(tmp_path, {"chosen": {"twa": {"method": MethodConfig(kind="twa"), "lr": 1e-3}}},
               dataclasses=[METHOD])


def test_unlisted_dataclass_is_refused_on_save_and_load(tmp_path):
    with pytest.raises(DatasetError, match=r"MethodConfig.*dataclasses"):
        ArrayTreeDataset(filepath=str(tmp_path / "a.npz")).save({"m": MethodConfig(kind="twa")})
    ArrayTreeDataset(filepath=str(tmp_path / "a.npz"), dataclasses=[METHOD]).save(
        {"m": MethodConfig(kind="twa")})
    with pytest.raises(DatasetError, match=r"a\.npz.*MethodConfig.*refusing"):
        ArrayTreeDataset(filepath=str(tmp_path / "a.npz")).load()


def test_what_needs_pickle_is_refused(tmp_path):
    ds = ArrayTreeDataset(filepath=str(tmp_path / "b.npz"))
    with pytest.raises(DatasetError, match="object array"):
        ds.save({"x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(DatasetError, match=r"data\['x'\].*set"):
        ds.save({"x": {1, 2}})
    assert not ds.exists()


def test_a_file_holding_a_pickle_is_not_unpickled(tmp_path):
    """An .npz whose entry is a pickled object array (what a tampered remote copy could hold)
    is refused by ``allow_pickle=False`` and the error names the file."""
    path = tmp_path / "evil.npz"
    np.savez(path, __tree__=np.frombuffer(b'{"$array": "a0"}', dtype=np.uint8),
             a0=np.array([object()], dtype=object))
    with pytest.raises(DatasetError, match=r"evil\.npz"):
        ArrayTreeDataset(filepath=str(path)).load()
    path.write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match=r"evil\.npz"):
        ArrayTreeDataset(filepath=str(path)).load()
    np.save(tmp_path / "bare.npy", np.arange(3))
    with pytest.raises(DatasetError, match=r"bare\.npy.*not an \.npz"):
        ArrayTreeDataset(filepath=str(tmp_path / "bare.npy")).load()
    with zipfile.ZipFile(tmp_path / "plain.npz", "w") as archive:
        archive.writestr("x.npy", b"")
    with pytest.raises(DatasetError, match=r"plain\.npz"):
        ArrayTreeDataset(filepath=str(tmp_path / "plain.npz")).load()
