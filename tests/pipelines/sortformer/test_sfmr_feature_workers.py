"""compute_features in worker processes (sortformer.sim.n_jobs): the same features and labels
as one process, in the same order (docs/scale.md)."""

from __future__ import annotations

import numpy as np
import torch

from icml25.pipelines.sortformer.nodes import _featurise, _featurise_in_processes
from icml25.pipelines.sortformer.simulator import SimConfig, simulate_split

SPEAKERS = list("abcd")


def test_featurising_in_processes_equals_one_process(noise_bank):
    utterances, audio = noise_bank(SPEAKERS, 4, (0.6, 1.2))
    cfg = SimConfig(duration_s=3.0)
    sessions = simulate_split(utterances, SPEAKERS, 16, cfg, seed=3, split="train")
    groups = [g for _, g in sessions.groupby("session", sort=True)]
    spec = (16, 4, 0.08, 24, 0.1)  # n_mels, max_speakers, frame_s, gate bands, floor quantile
    serial = [_featurise(g, audio, *spec) for g in groups]
    parallel = list(_featurise_in_processes(groups, audio, spec, n_jobs=2))  # 16 sessions: 2
    assert len(parallel) == len(serial) == 16
    for (f1, l1, s1), (f2, l2, s2) in zip(serial, parallel, strict=True):
        assert f1.dtype == f2.dtype == np.float32
        assert np.array_equal(f1, f2) and np.array_equal(l1, l2) and np.array_equal(s1, s2)
        assert s1.shape == (l1.shape[0],)  # one gate value per label frame
    assert not all(np.array_equal(serial[0][0], f) for f, _, _ in serial[1:])  # distinct sessions


def test_float16_features_give_float32_batches_of_their_values():
    from icml25.pipelines.sortformer.diarizer_training import collate
    from icml25.pipelines.sortformer.params import SortformerParams
    rng = np.random.default_rng(1)
    feats = [rng.normal(-5, 3, (n, 16)).astype(np.float32) for n in (40, 33)]
    labels = [np.zeros((n // 8, 4), np.float32) for n in (40, 33)]
    half = [f.astype(np.float16) for f in feats]
    x, _, _ = collate(half, labels)
    assert x.dtype == torch.float32
    assert torch.equal(x[0], torch.from_numpy(half[0].astype(np.float32)))
    assert float((x[0] - torch.from_numpy(feats[0])).abs().max()) < 0.01  # fp16 at |v| < 16
    assert SortformerParams.model_fields["features_dtype"].default == "float32"
