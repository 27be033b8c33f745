"""The aeon baselines' count cut (``baselines.max_series``, used by the CPU dry run)."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.softshape.experiment import run_aeon
from icml25.pipelines.softshape.params import BaselineParams


def _prepared(n=60, T=32, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)  # sorted by class, as a stratified fold's indices can be
    X = rng.normal(size=(n, T)) + 3.0 * y[:, None] * np.sin(np.linspace(0, 3, T))
    idx = np.arange(n)
    ds = {"name": "toy", "fold": 1, "X": X, "y": y, "train": idx[::3], "val": idx[1::3],
          "test": idx[2::3]}
    return {"toy": [ds]}


def test_max_series_caps_fit_and_test_series_and_both_baselines_see_one_subset():
    prepared = _prepared()
    full = run_aeon(prepared, "nn_dtw", ["toy"], [0], progress=False)
    assert (full[0]["n_fit"], full[0]["n_test"]) == (40, 20)
    rows = [run_aeon(prepared, name, ["toy"], [0], progress=False, max_series=8)[0]
            for name in ("nn_dtw", "mini_rocket")]
    assert [(r["n_fit"], r["n_test"]) for r in rows] == [(8, 8), (8, 8)]
    # the subset is drawn across the class-sorted fold, not its first (one-class) entries
    from icml25.pipelines.softshape.experiment import _at_most
    fit = np.concatenate([prepared["toy"][0]["train"], prepared["toy"][0]["val"]])
    kept = _at_most(fit, 8, seed=1)
    positions = [int(np.flatnonzero(fit == k)[0]) for k in kept]
    assert len(set(prepared["toy"][0]["y"][kept])) == 2 and np.all(np.diff(positions) > 0)
    assert np.array_equal(_at_most(fit, 8, seed=1), kept)  # the same subset every time
    assert _at_most(fit, 100, seed=1) is fit


def test_max_series_below_two_is_refused_with_its_key():
    with pytest.raises(ValueError, match="max_series"):
        BaselineParams(models=["mini_rocket", "nn_dtw"], max_series=1,
                       fcn={"epochs": 1, "patience": 1})
