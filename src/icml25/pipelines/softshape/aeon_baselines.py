"""The library baselines, used as aeon ships them (not rewritten): MiniRocket, Rocket and
1-NN DTW (full window). Inputs are the room's prepared (n, T) arrays, reshaped to aeon's
(n, 1, T) collection format.
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
    """Fit on (n, T) training series, predict the test series; times both steps."""
    est = make_estimator(name, seed, n_jobs)
    start = time.perf_counter()
    est.fit(np.asarray(X_train, dtype=float)[:, None, :], np.asarray(y_train))
    fitted = time.perf_counter()
    pred = est.predict(np.asarray(X_test, dtype=float)[:, None, :])
    done = time.perf_counter()
    return BaselineOutput(np.asarray(pred).astype(np.int64), fitted - start, done - fitted)
