"""Data of the softshape room: shipped UCR sets, the CBF generator, folds and preprocessing.

- UCR univariate sets that ship inside the installed aeon wheel (and PLAID inside sktime's),
  and the multichannel UEA sets aeon ships (BasicMotions, JapaneseVowels), kept as
  (n, C, T); nothing is downloaded: a name that is not shipped is refused before aeon could reach the
  network.
- CBF (Saito 1994) with the true event window ``[a, b]`` of every series kept as ground truth.
- Folds (docs/papers/softshape.md, "Data"): the original UCR train/test split, or the paper's protocol (train+test
  merged, stratified 5-fold CV); the training part of a fold is split 3:1 into train/val
  (``StratifiedKFold(4)``, first split), as in the reference code.
- Preprocessing (step 1 of docs/papers/softshape.md): NaNs (variable-length series are NaN-padded) are filled with the
  *training-fold* column means (1e-6 for an all-NaN column), then each series is z-normalised on
  its own (std 0 -> 1).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: Sets loaded through sktime (aeon does not ship them).
SKTIME_SETS = ("PLAID",)


@dataclass
class LabelledSeries:
    """One classification data set: train and test of the original split merged.

    Attributes:
        X: (n, T) float array for univariate sets, (n, C, T) for multichannel ones (UEA),
            NaN-padded at the end for variable-length series.
        y: (n,) integer labels 0..K-1. classes: the original label strings.
        original_test: (n,) bool, True for the series of the original test split.
        windows: (n, 2) true discriminative window [a, b] (synthetic sets) or None.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    classes: list[str]
    original_test: np.ndarray
    windows: np.ndarray | None = None
    variable_length: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_channels(self) -> int:
        """1 for univariate (n, T) sets, C for multichannel (n, C, T) ones."""
        return 1 if self.X.ndim == 2 else self.X.shape[1]


@dataclass
class Fold:
    """Index arrays of one fold (into ``LabelledSeries.X``)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def shipped_set_names() -> list[str]:
    """Classification sets inside the installed aeon wheel (found without importing aeon, so
    parameter validation stays fast) and sktime's PLAID."""
    spec = importlib.util.find_spec("aeon")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"
    names = sorted(p.name for p in root.iterdir() if (p / f"{p.name}_TRAIN.ts").exists())
    return [*names, *SKTIME_SETS]


def _as_series_list(X, name: str) -> list[np.ndarray]:
    """aeon/sktime output -> list of float series: 1-D (T_i,) for univariate sets, 2-D
    (C, T_i) for multichannel ones; every series must have the same number of channels."""
    if isinstance(X, np.ndarray):
        if X.ndim == 3:
            X = X[:, 0, :] if X.shape[1] == 1 else X
        elif X.ndim != 2:
            raise ValueError(f"{name}: expected (n, C, T) or (n, T) series, got {X.shape}")
        return [np.asarray(row, dtype=float) for row in X]
    out = []
    for row in X:  # variable length: a list of (C, T_i) arrays
        arr = np.asarray(row, dtype=float)
        if arr.ndim == 2 and arr.shape[0] == 1:
            arr = arr[0]
        out.append(arr)
    return out


def nan_pad(series: list[np.ndarray], name: str = "data") -> tuple[np.ndarray, bool]:
    """Stack series into (n, T_max), or (n, C, T_max) for (C, T_i) series, NaN-padding the
    shorter ones at the end (UCR 2018; the UEA archive's variable-length sets likewise)."""
    if not series:
        raise ValueError(f"{name}: no series")
    shapes = [s.shape for s in series]
    bad = [i for i, s in enumerate(series) if s.ndim not in (1, 2)]
    if bad:
        raise ValueError(f"{name}: series {bad[0]} has shape {shapes[bad[0]]}; expected (T,) "
                         "or (C, T)")
    channels = {s.shape[:-1] for s in series}
    if len(channels) > 1:
        raise ValueError(f"{name}: series have different channel counts "
                         f"{sorted(c[0] if c else 1 for c in channels)}")
    lengths = [s.shape[-1] for s in series]
    if min(lengths) == 0:
        raise ValueError(f"{name}: series {lengths.index(0)} is empty")
    lead = next(iter(channels))
    out = np.full((len(series), *lead, max(lengths)), np.nan)
    for i, s in enumerate(series):
        out[i, ..., : s.shape[-1]] = s
    return out, len(set(lengths)) > 1


def build_dataset(name: str, X_train, y_train, X_test, y_test) -> LabelledSeries:
    """Check and merge one set's original train/test split into a :class:`LabelledSeries`."""
    train = _as_series_list(X_train, name)
    test = _as_series_list(X_test, name)
    if not train or not test:
        raise ValueError(f"{name}: empty train ({len(train)}) or test ({len(test)}) split")
    X, variable = nan_pad(train + test, name)
    if np.isinf(X).any():
        raise ValueError(f"{name}: contains inf values")
    all_nan = np.isnan(X).reshape(len(X), -1).all(axis=1)
    if all_nan.any():
        raise ValueError(f"{name}: series {np.flatnonzero(all_nan)[:5].tolist()} are all NaN")
    labels = np.concatenate([np.asarray(y_train).astype(str), np.asarray(y_test).astype(str)])
    if len(labels) != len(X):
        raise ValueError(f"{name}: {len(labels)} labels for {len(X)} series")
    classes, y = np.unique(labels, return_inverse=True)
    train_classes = set(np.asarray(y_train).astype(str))
    if len(train_classes) < 2:
        raise ValueError(f"{name}: the training split has {len(train_classes)} class; a "
                         "classifier needs at least 2")
    unseen = sorted(str(c) for c in set(np.asarray(y_test).astype(str)) - train_classes)
    if unseen:
        raise ValueError(f"{name}: test classes {unseen} never occur in the training split")
    original_test = np.zeros(len(X), dtype=bool)
    original_test[len(train):] = True
    return LabelledSeries(name, X, y.astype(np.int64), [str(c) for c in classes],
                          original_test, variable_length=variable)


def load_ucr(name: str) -> LabelledSeries:
    """Load a shipped UCR set (original train and test splits); never downloads."""
    shipped = shipped_set_names()
    if name not in shipped:
        raise ValueError(f"softshape.datasets: {name!r} is not shipped inside aeon/sktime "
                         f"(nothing is downloaded); shipped: {shipped}")
    if name == "PLAID":
        from sktime.datasets import load_plaid

        parts = [load_plaid(split=s, return_X_y=True) for s in ("train", "test")]
        (xtr, ytr), (xte, yte) = [([np.asarray(c) for c in X.iloc[:, 0]], y) for X, y in parts]
        return build_dataset(name, xtr, ytr, xte, yte)
    from aeon.datasets import load_classification

    xtr, ytr = load_classification(name, split="train")
    xte, yte = load_classification(name, split="test")
    return build_dataset(name, xtr, ytr, xte, yte)


def make_cbf(n: int, length: int, rng: np.random.Generator,
             test_fraction: float = 0.5) -> LabelledSeries:
    """Cylinder-Bell-Funnel (Saito 1994), balanced classes, with the event window kept.

    a ~ U{16..32}, b - a ~ U{32..96}, eta, eps_t ~ N(0, 1) (b is clipped to length - 1);
    cylinder (6+eta) 1[a<=t<=b] + eps_t; bell (6+eta) 1[a<=t<=b] (t-a)/(b-a) + eps_t;
    funnel (6+eta) 1[a<=t<=b] (b-t)/(b-a) + eps_t.
    """
    if n < 6:
        raise ValueError(f"softshape.cbf.n: got {n}; need >= 6 (two series per class)")
    if length < 64:
        raise ValueError(f"softshape.cbf.length: got {length}; need >= 64 for the event window")
    y = np.arange(n) % 3
    rng.shuffle(y)
    t = np.arange(length)
    X = np.empty((n, length))
    windows = np.empty((n, 2), dtype=np.int64)
    for i in range(n):
        a = int(rng.integers(16, 33))
        b = min(a + int(rng.integers(32, 97)), length - 1)
        eta = rng.normal()
        inside = (t >= a) & (t <= b)
        if y[i] == 0:
            shape = inside.astype(float)
        elif y[i] == 1:
            shape = inside * (t - a) / (b - a)
        else:
            shape = inside * (b - t) / (b - a)
        X[i] = (6 + eta) * shape + rng.normal(size=length)
        windows[i] = (a, b)
    n_test = round(test_fraction * n)
    original_test = np.zeros(n, dtype=bool)
    original_test[rng.permutation(n)[:n_test]] = True
    return LabelledSeries("CBF", X, y.astype(np.int64), ["cylinder", "bell", "funnel"],
                          original_test, windows=windows)


def make_folds(data: LabelledSeries, split: str, n_folds: int, folds_to_run: list[int],
               seed: int) -> list[Fold]:
    """Folds of one set, identical for every method.

    ``split="original"``: one fold, test = the original test split. ``split="cv"``: train+test
    merged, ``StratifiedKFold(n_folds, shuffle, seed)``; fold f's test is the f-th part. Either
    way the rest is split 3:1 into train/val (``StratifiedKFold(4, shuffle, seed)``, first split).
    """
    from sklearn.model_selection import StratifiedKFold
    y = data.y
    if split == "original":
        outer = [(np.flatnonzero(~data.original_test), np.flatnonzero(data.original_test))]
        chosen = [0]
    elif split == "cv":
        skf = StratifiedKFold(n_folds, shuffle=True, random_state=seed)
        outer = list(skf.split(np.zeros(len(y)), y))
        chosen = folds_to_run
    else:
        raise ValueError(f"softshape.protocol.split: got {split!r}; expected original or cv")
    folds = []
    for f in chosen:
        rest, test = outer[f]
        inner = StratifiedKFold(4, shuffle=True, random_state=seed)
        tr, va = next(inner.split(np.zeros(len(rest)), y[rest]))
        fold = Fold(np.sort(rest[tr]), np.sort(rest[va]), np.sort(test))
        unseen = sorted(set(y[fold.test]) - set(y[fold.train]))
        if unseen:
            raise ValueError(f"{data.name} fold {f}: test classes "
                             f"{[data.classes[c] for c in unseen]} never occur in its training "
                             "part")
        if len(set(y[fold.train])) < 2:
            raise ValueError(f"{data.name} fold {f}: the training part has one class")
        folds.append(fold)
    return folds


def fill_and_normalise(X: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
    """NaN -> training-fold column mean (all-NaN column -> 1e-6), then per-series z-norm.

    ``X`` is (n, T), or (n, C, T) for multichannel sets: there a column is one (channel, t)
    pair and each channel of each series is z-normalised on its own. Only rows in
    ``train_idx`` enter the column means, so test values never leak into them.
    """
    X = np.array(X, dtype=float)
    if X.ndim not in (2, 3) or 0 in X.shape:
        raise ValueError(f"series: expected a non-empty (n, T) or (n, C, T) array, got shape "
                         f"{X.shape}")
    if len(train_idx) == 0:
        raise ValueError("train_idx: empty; column means need training series")
    if np.isnan(X).any():
        train = X[train_idx]
        with np.errstate(all="ignore"):
            counts = (~np.isnan(train)).sum(axis=0)
            means = np.where(counts > 0, np.nansum(train, axis=0) / np.maximum(counts, 1), 1e-6)
        where = np.nonzero(np.isnan(X))
        X[where] = means[where[1:]]
    mean = X.mean(axis=-1, keepdims=True)
    std = X.std(axis=-1, keepdims=True)
    std[std == 0] = 1.0
    return (X - mean) / std
