"""Shared test data of the sortformer tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pytest


def _noise_bank(speakers: Sequence[str], per_speaker: int, seconds: tuple[float, float],
                seed: int = 0) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Sentence 'utterances' that are noise bursts of ``seconds`` (low, high) at 16 kHz: the
    simulator needs only their lengths, featurising only some signal."""
    rng = np.random.default_rng(seed)
    rows, audio = [], {}
    for s in speakers:
        for i in range(per_speaker):
            n = int(rng.uniform(*seconds) * 16000)
            rows.append({"utterance": f"{s}_{i}", "speaker": s, "kind": "sentence",
                         "n_samples": n})
            audio[f"{s}_{i}"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
    return pd.DataFrame(rows), audio


@pytest.fixture(scope="session")
def noise_bank() -> Callable[..., tuple[pd.DataFrame, dict[str, np.ndarray]]]:
    """``noise_bank(speakers, per_speaker, (low_s, high_s), seed=0) -> (utterances, audio)``."""
    return _noise_bank
