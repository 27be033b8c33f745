"""The library baselines, used as aeon ships them (not rewritten): MiniRocket, Rocket and
1-NN DTW (full window). Inputs are the room's prepared (n, T) arrays, reshaped to aeon's
(n, 1, T) collection format, or (n, C, T) multichannel arrays, passed as they are (aeon's
MiniRocket, Rocket and DTW take several channels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

AEON_BASELINES = ("mini_rocket", "rocket", "nn_dtw")


@dataclass
class BaselineOutput:
    predictions: np.ndarray
    train_seconds: float
    infer_seconds: float


def make_estimator(name: str, seed: int, n_jobs: int = 1):
    """An unfitted aeon classifier for ``name``."""
    if name == "mini_rocket":
        from aeon.classification.convolution_based import MiniRocketClassifier

        return MiniRocketClassifier(random_state=seed, n_jobs=n_jobs)
    if name == "rocket":
        from aeon.classification.convolution_based import RocketClassifier

        return RocketClassifier(random_state=seed, n_jobs=n_jobs)
    if name == "nn_dtw":
        from aeon.classification.distance_based import KNeighborsTimeSeriesClassifier

        return KNeighborsTimeSeriesClassifier(n_neighbors=1, distance="dtw", n_jobs=n_jobs)
    raise ValueError(f"softshape.baselines: unknown baseline {name!r}; known: {AEON_BASELINES}")


def fit_predict(name: str, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray,
                seed: int, n_jobs: int = 1) -> BaselineOutput:
    """Fit on (n, T) or (n, C, T) training series, predict the test series; times both."""
    est = make_estimator(name, seed, n_jobs)
    start = time.perf_counter()
    est.fit(_collection(X_train), np.asarray(y_train))
    fitted = time.perf_counter()
    pred = est.predict(_collection(X_test))
    done = time.perf_counter()
    return BaselineOutput(np.asarray(pred).astype(np.int64), fitted - start, done - fitted)


def _collection(X: np.ndarray) -> np.ndarray:
    """aeon's (n, C, T) collection format from (n, T) or (n, C, T) arrays."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 2:
        return X[:, None, :]
    if X.ndim != 3:
        raise ValueError(f"series: expected (n, T) or (n, C, T), got shape {X.shape}")
    return X
