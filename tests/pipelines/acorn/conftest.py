"""Shared test data of the acorn tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

TASKS = ("los", "multipath", "doppler", "doa", "range")


def _noise_scenes(per_task: int) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """Training-split scene rows, ``per_task`` of every task, over three 8000-sample noise
    sources (seeded: the same rows and sources on every call)."""
    from icml25.pipelines.acorn import scenes
    from icml25.pipelines.acorn.sources import synthetic_source
    rng = np.random.default_rng(5)
    sources = [synthetic_source("noise", 8000, rng) for _ in range(3)]
    index = pd.DataFrame({"split": ["train"] * 3})
    meta = scenes.sample_split({t: per_task for t in TASKS}, "train", scenes.SceneConfig(),
                               index, 1)
    return meta, sources


@pytest.fixture(scope="session")
def noise_scenes() -> Callable[[int], tuple[pd.DataFrame, list[np.ndarray]]]:
    """``noise_scenes(per_task) -> (scene rows, sources)``."""
    return _noise_scenes
