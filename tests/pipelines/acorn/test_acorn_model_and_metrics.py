"""Encoder features and shapes, metrics on hand-made cases, QA templates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.pipelines.acorn.encoder import (
    TASK_OUTPUTS,
    AcornModel,
    EncoderConfig,
    count_parameters,
    stft_features,
)
from icml25.pipelines.acorn.evaluation import derived_variants, higher_is_better
from icml25.pipelines.acorn.metrics import accuracy, mae, rep, task_metrics
from icml25.pipelines.acorn.multitask import TaskData, batch_schedule, predict, train_model
from icml25.pipelines.acorn.qa import QUESTIONS, TASKS, answer, parse_answer, question

pytestmark = pytest.mark.usefixtures("one_thread")


def test_stft_features_bins_unit_circle_and_zero_input():
    x = torch.randn(3, 2, 4000)
    f = stft_features(x)
    assert f.shape == (3, 3, 2, 128, 4000 // 160 + 1)  # n_fft 254 -> 128 bins, centred frames
    np.testing.assert_allclose((f[:, 1] ** 2 + f[:, 2] ** 2).numpy(), 1.0, atol=1e-5)
    zero = stft_features(torch.zeros(1, 2, 2000))
    assert torch.isfinite(zero).all()
    undithered = stft_features(torch.zeros(1, 2, 2000), dither=0.0)
    assert torch.isfinite(undithered).all()
    assert torch.all(undithered[:, 2] == 1.0)  # empty bins: angle defined as 0
    assert stft_features(x, use_phase=False).shape[1] == 1


def test_magnitude_only_model_drops_exactly_the_phase_branches():
    phase = AcornModel(EncoderConfig(d=32, layers=1, heads=2, use_phase=True))
    mag = AcornModel(EncoderConfig(d=32, layers=1, heads=2, use_phase=False))
    branch = sum(p.numel() for p in phase.encoder.branches[0].parameters())
    fuse_extra = 2 * 32 * 32 * 3  # the fusion conv's input shrinks from 3d to d channels
    assert count_parameters(phase) - count_parameters(mag) == 2 * branch + fuse_extra
    x, src = torch.randn(2, 2, 2000), torch.zeros(2, dtype=torch.long)
    for task, n_out in TASK_OUTPUTS.items():
        assert phase(x, task, src).shape == mag(x, task, src).shape == (2, n_out)


def test_tokens_mode_interleaves_channels():
    model = AcornModel(EncoderConfig(d=16, layers=1, heads=2, mc_mode="tokens"))
    stack = AcornModel(EncoderConfig(d=16, layers=1, heads=2, mc_mode="stack"))
    x = torch.randn(2, 2, 2000)
    feats = stft_features(x)
    assert model.encoder.front_end(feats).shape[1] == 2 * stack.encoder.front_end(feats).shape[1]
    assert model(x, "doa", torch.zeros(2, dtype=torch.long)).shape == (2, 3)
    with pytest.raises(ValueError, match="mc_mode"):
        AcornModel(EncoderConfig(mc_mode="pairs"))


def test_training_learns_a_trivially_separable_task_and_is_deterministic():
    rng = np.random.default_rng(0)
    n = 48
    labels = rng.integers(0, 2, n).astype(float)
    audio = rng.standard_normal((n, 2, 1000)).astype(np.float32)
    audio[labels == 1, 1] *= 0.05  # class 1: a quiet second channel (level cue)
    data = {"los": TaskData(torch.from_numpy(audio), labels, np.zeros(n, dtype=int))}
    cfg = EncoderConfig(d=16, layers=1, heads=2, dropout=0.0)
    runs = [train_model(cfg, data, data, epochs=6, batch_size=16, lr=3e-3, weight_decay=0.0,
                        seed=1) for _ in range(2)]
    preds = [predict(m, data, rec["stats"])["los"] for m, rec in runs]
    assert np.array_equal(preds[0], preds[1])
    assert accuracy(preds[0], labels) >= 0.9


def test_batch_schedule_is_round_robin_and_complete():
    sched = batch_schedule({"los": 10, "doa": 25}, 8, 2, seed=0)
    assert [t for t, _ in sched[:4]] == ["los", "doa", "los", "doa"]
    for task, n in (("los", 10), ("doa", 25)):
        idx = np.concatenate([i for t, i in sched if t == task])
        assert sorted(idx.tolist()) == sorted(list(range(n)) * 2)


def test_metrics_on_hand_made_cases():
    assert accuracy(np.array([1, 0, 1, 1]), np.array([1, 1, 1, 0])) == 0.5
    assert accuracy(np.array([2, 0, 1, 1]), np.array([2, 0, 1, 2])) == 0.75
    assert mae(np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.0, -1.0, 0.5, 1.0])) == 1.0
    assert rep(np.array([1.1, 2.0, 2.5, 0.5]), np.array([1.0, 2.0, 2.0, 1.0])) == pytest.approx(
        (10 + 0 + 25 + 50) / 4)
    m = task_metrics("doa", np.array([4.665, -4.665]), np.array([4.665, 4.665]), 0.2)
    assert m["doa_mae_t"] == pytest.approx(4.665)
    assert m["doa_lr_acc"] == 0.5
    assert m["doa_mae_deg"] == pytest.approx(30.0, abs=0.5)  # 60° vs 120° on one of two items
    with pytest.raises(ValueError, match="same shape"):
        mae(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        mae(np.array([np.nan, 1.0]), np.zeros(2))
    with pytest.raises(ValueError, match="non-empty"):
        accuracy(np.array([]), np.array([]))
    with pytest.raises(ValueError, match="positive"):
        rep(np.ones(2), np.array([1.0, 0.0]))


def test_ratio_variant_and_metric_directions():
    metrics = {"acorn_phase": {"doa_mae_t": [1.0, 2.0], "los_bca": [0.9, 0.8]},
               "magnitude_only": {"doa_mae_t": [4.0, 4.0], "los_bca": [0.8, 0.8]}}
    (_name, ratios), = derived_variants(metrics).items()
    assert ratios == {"doa_mae_t": [0.25, 0.5]}
    assert higher_is_better("t2_los_bca") and not higher_is_better("range_rep")


@pytest.mark.parametrize("task", TASKS)
def test_answer_parser_round_trips_every_template(task):
    labels = {"los": [0.0, 1.0], "multipath": [0.0, 1.0, 2.0],
              "doppler": [-9.46, 0.0, 3.41, 12.04], "doa": [-9.3, -0.1, 4.3, 9.3],
              "range": [0.31, 1.27, 4.99]}[task]
    for template in range(len(QUESTIONS[task])):
        assert question(task, template, "horn", 440.0)
    for y in labels:
        assert parse_answer(task, answer(task, y)) == pytest.approx(y, abs=1e-9)
    assert np.isnan(parse_answer(task, "I cannot tell."))


def test_augmentation_keeps_the_inter_channel_delay():
    from icml25.pipelines.acorn.channels import fractional_delay
    from icml25.pipelines.acorn.dsp_baselines import gcc_phat
    from icml25.pipelines.acorn.multitask import augment_batch

    rng = np.random.default_rng(0)
    s = rng.standard_normal(4400)
    pair = np.stack([s[200:4200], fractional_delay(s, 3.0)[200:4200]]).astype(np.float32)
    out = augment_batch(torch.from_numpy(pair[None]), np.random.default_rng(1))[0].numpy()
    assert out.shape == pair.shape
    assert abs(np.abs(out).sum() - np.abs(pair).sum()) < 1e-3 * np.abs(pair).sum()
    assert gcc_phat(out[0], out[1], 10.0)[0] == pytest.approx(3.0, abs=0.15)


@pytest.mark.parametrize(("path", "value", "message"), [
    (("data", "n_train", "los"), 1, r"acorn\.data\.n_train: .*each task"),
    (("sources", "engines"), ["festival"], r"acorn\.sources\.engines\.0"),
    (("data", "speed"), [0.0, 343.0], r"acorn\.data\.speed: .*speed of sound"),
    (("data", "weak_t60"), [0.1, 0.7], r"acorn\.data: .*must not overlap"),
    (("train", "epochs"), 0, r"acorn\.train\.epochs: got 0"),
    (("model", "phase"), "pairwise", r"acorn\.model\.phase"),
])
def test_parameter_model_names_the_full_key(path, value, message):
    import copy
    from pathlib import Path

    import yaml

    from icml25.core.params import ParameterError, validate_parameters
    from icml25.pipelines.acorn.params import AcornParams

    root = Path(__file__).resolve().parents[3]
    base = yaml.safe_load((root / "conf/base/parameters_acorn.yml").read_text())["acorn"]
    validate_parameters(AcornParams, base, "acorn")
    bad = copy.deepcopy(base)
    node = bad
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ParameterError, match=message):
        validate_parameters(AcornParams, bad, "acorn")


ANSWER_TABLE = [
    # (task, answer text, label read back; NaN = refused)
    ("doppler", "+3%", 3.0),
    ("doppler", "3.4 %", 3.4),
    ("doppler", "3.4%", 3.4),
    ("doppler", "The frequency shifted by \u22123.41%; the source is receding.", -3.41),
    ("doppler", "shifted by \u20132.5 percent", -2.5),
    ("doppler", "3e-1 %", 0.3),
    ("doppler", "2.5 per cent, approaching", 2.5),
    ("doppler", "3.4%; the source is receding", -3.4),  # unsigned: sign from the motion word
    ("doppler", "+3.4%; the source is receding", float("nan")),  # contradicts itself
    ("doppler", "minus three point four percent", -3.4),
    ("doppler", "It is three percent higher.", 3.0),
    ("doppler", "3,4 %", 3.4),  # decimal comma
    ("doa", "-2.5 samples", -2.5),
    ("doa", "-2.5samples", -2.5),
    ("doa", "The delay is 4.3 samples; the source is on the left.", 4.3),
    ("doa", "2 samples, on the right", -2.0),
    ("doa", "a delay of 1 sample", 1.0),
    ("doa", "\u22127 samples", -7.0),
    ("doa", "twenty-one samples", 21.0),
    ("doa", "negative two samples", -2.0),
    ("doa", "+3 samples, right", float("nan")),
    ("range", "1.27m", 1.27),
    ("range", "1.27 m", 1.27),
    ("range", "127 cm", 1.27),
    ("range", "1,250.5 mm", 1.2505),
    ("range", "three metres", 3.0),
    ("range", "2.5 meters away", 2.5),
    ("range", "3", 3.0),  # one bare number: the task's unit
    ("range", "between 2 and 3", float("nan")),  # two bare numbers: refused
    ("range", "4 metres, not 5 m", 4.0),  # the first number with a unit
    ("los", "Yes.", 1.0),
    ("los", "no, it is blocked", 0.0),
    ("los", "Nobody knows", float("nan")),
    ("multipath", "Strong.", 2.0),
    ("multipath", "weak reverberation", 1.0),
    ("multipath", "nonexistent", float("nan")),
]


@pytest.mark.parametrize(("task", "text", "expected"), ANSWER_TABLE)
def test_answer_parser_reads_the_usual_ways_to_write_numbers(task, text, expected):
    got = parse_answer(task, text)
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)
