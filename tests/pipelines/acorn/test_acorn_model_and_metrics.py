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
    (("train", "delay_augment"), 12, r"acorn: .*delay_augment 12 samples exceeds"),
    (("train", "unknown_source_rate"), 1.0, r"acorn\.train\.unknown_source_rate"),
    (("model", "doa_head"), "argmax", r"acorn\.model\.doa_head"),
    (("model", "lag_head", "kernel"), 4, r"acorn\.model\.lag_head\.kernel: .*odd"),
    (("model", "lag_head", "temperature"), 0.0, r"acorn\.model\.lag_head\.temperature"),
    (("model", "lag_head", "window"), 8, r"acorn: .*window 8 samples is narrower"),
])
def test_parameter_model_names_the_full_key(path, value, message, assert_refused):
    import copy
    from pathlib import Path

    import yaml

    from icml25.core.params import validate_parameters
    from icml25.pipelines.acorn.params import AcornParams

    root = Path(__file__).resolve().parents[3]
    base = yaml.safe_load((root / "conf/base/parameters_acorn.yml").read_text())["acorn"]
    validate_parameters(AcornParams, base, "acorn")
    assert_refused(AcornParams, copy.deepcopy(base), "acorn", path, value, message)


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


@pytest.mark.parametrize("use_phase", [True, False])
def test_doa_head_is_antisymmetric_under_the_microphone_swap(use_phase):
    torch.manual_seed(0)
    model = AcornModel(EncoderConfig(d=16, layers=1, heads=2, use_phase=use_phase,
                                     dropout=0.0)).eval()
    x = torch.randn(5, 2, 2000) * torch.tensor([1.0, 0.5])[None, :, None]
    src = torch.zeros(5, dtype=torch.long)
    with torch.no_grad():
        model.heads["doa"][2].weight.mul_(1e3)  # outputs of order 1, not 1e-4
        out, out_swap = model(x, "doa", src), model(x.flip(1), "doa", src)
        raw, raw_swap = model.raw(x, "doa", src), model.raw(x.flip(1), "doa", src)
    # f(swap x) = -f(x) for the TDoA and the left-right logit difference, by construction
    np.testing.assert_allclose(out_swap[:, 0].numpy(), -out[:, 0].numpy(), rtol=1e-5,
                               atol=1e-5)
    diff = out[:, 2] - out[:, 1]
    np.testing.assert_allclose((out_swap[:, 2] - out_swap[:, 1]).numpy(), -diff.numpy(),
                               rtol=1e-5, atol=1e-5)
    assert (out[:, 0].abs() > 1e-2).all() and (diff.abs() > 1e-2).all()  # not trivially 0
    # the unconstrained head is not antisymmetric (the property comes from the construction)
    assert not torch.allclose(raw_swap[:, 0], -raw[:, 0], atol=1e-3)
    # other tasks are untouched
    with torch.no_grad():
        np.testing.assert_array_equal(model(x, "los", src).numpy(),
                                      model.raw(x, "los", src).numpy())
    off = AcornModel(EncoderConfig(d=16, layers=1, heads=2, dropout=0.0,
                                   swap_antisymmetric=False)).eval()
    with torch.no_grad():
        np.testing.assert_array_equal(off(x, "doa", src).numpy(), off.raw(x, "doa", src).numpy())


def test_physics_augmentation_moves_the_labels_with_the_audio():
    from icml25.pipelines.acorn.channels import fractional_delay
    from icml25.pipelines.acorn.dsp_baselines import gcc_phat
    from icml25.pipelines.acorn.multitask import Augment, physics_augment

    rng = np.random.default_rng(0)
    s = rng.standard_normal(4400)
    taus = np.array([3.0, -2.0, 0.5, 8.9] * 8)
    audio = torch.from_numpy(np.stack([np.stack([s[200:4200], fractional_delay(s, t)[200:4200]])
                                       for t in taus]).astype(np.float32))
    aug = Augment(swap=True, reverse=True, max_delay=2, max_tdoa=9.33)
    x, y, _src = physics_augment("doa", audio, taus, np.zeros(taus.size, int),
                                np.random.default_rng(3), aug, unknown_source=7)
    assert not np.array_equal(y, taus) and np.all(np.abs(y) <= 9.33)
    for clip, label in zip(x.numpy(), y, strict=True):  # the delay the audio carries = label
        assert gcc_phat(clip[0], clip[1], 12.0)[0] == pytest.approx(label, abs=0.2)
    np.testing.assert_array_equal(audio[0].numpy(), np.stack(
        [s[200:4200], fractional_delay(s, 3.0)[200:4200]]).astype(np.float32))  # input kept
    # other tasks: labels kept under the swap; Doppler names dropped at the given rate
    _x, y_los, _src = physics_augment("los", audio, np.ones(32), np.zeros(32, int),
                                      np.random.default_rng(4), aug, 7)
    assert np.all(y_los == 1.0)
    tokens = np.ones(4000, int)
    _x, _y, t = physics_augment("doppler", audio[:1].expand(4000, -1, -1), np.zeros(4000),
                                tokens, np.random.default_rng(5),
                                Augment(unknown_source_rate=0.15), 7)
    assert set(np.unique(t)) == {1, 7} and np.mean(t == 7) == pytest.approx(0.15, abs=0.02)


def test_symmetry_metrics_of_an_exactly_equivariant_predictor():
    import pandas as pd

    from icml25.pipelines.acorn.symmetry import CHANNEL_DELAYS, symmetry_metrics

    tau = np.array([3.0, -4.0, 1.0, 8.5])
    meta = pd.DataFrame({"item": [0, 1, 2, 3, 4, 5, 6, 7], "split": ["test"] * 6 + ["mirror"] * 2,
                         "task": ["doa"] * 4 + ["doppler"] * 4,
                         "label": [*tau, 2.0, -1.0, -2.1, 1.1], "mirror_of": [-1] * 6 + [4, 5]})
    rows = []

    def add(split, task, items, pred):
        rows.extend({"split": split, "task": task, "item": i, "pred": float(v)}
                    for i, v in zip(items, pred, strict=True))

    add("test", "doa", range(4), tau)
    add("sym_swap", "doa", range(4), -tau)
    add("sym_reverse", "doa", range(4), -tau)
    add("sym_delay", "doa", range(4), tau)
    for d in CHANNEL_DELAYS:
        add(f"sym_icd{d:+d}", "doa", range(4), tau + d)
    add("test", "doppler", [4, 5], [2.0, -1.0])
    add("sym_reverse", "doppler", [4, 5], [2.0, -1.0])
    add("sym_unknown", "doppler", [4, 5], [1.0, -1.0])
    add("mirror", "doppler", [6, 7], [-2.1, 1.1])
    got = symmetry_metrics(meta, pd.DataFrame(rows), max_tdoa=9.33)
    assert got == {"doa_swap_error": 0.0, "doa_swap_side_flip": 1.0, "doa_reverse_error": 0.0,
                   "doa_delay_change": 0.0, "doa_channel_delay_error": 0.0,
                   "doppler_reverse_change": 0.0, "doppler_unknown_source_mae_f": 0.5,
                   "doppler_mirror_sign_flip": 1.0, "doppler_mirror_error": 0.0,
                   "doppler_sign_acc_approaching": 1.0, "doppler_sign_acc_receding": 1.0,
                   "doppler_sign_acc_resolved": 1.0, "doppler_mirror_sign_flip_resolved": 1.0}
    # a wrong sign on the small shift (|-1.0| < RESOLVED_SHIFT) counts against the plain sign
    # checks only; on the 2-point pair it counts against the resolved ones too
    small = [r if (r["split"], r["item"]) != ("test", 5) else {**r, "pred": 0.5} for r in rows]
    got = symmetry_metrics(meta, pd.DataFrame(small), max_tdoa=9.33)
    assert got["doppler_sign_acc_receding"] == 0.5 and got["doppler_mirror_sign_flip"] == 0.5
    assert got["doppler_sign_acc_resolved"] == got["doppler_mirror_sign_flip_resolved"] == 1.0
    big = [r if (r["split"], r["item"]) != ("mirror", 6) else {**r, "pred": 0.3} for r in rows]
    got = symmetry_metrics(meta, pd.DataFrame(big), max_tdoa=9.33)
    assert got["doppler_sign_acc_resolved"] == 0.5
    assert got["doppler_mirror_sign_flip_resolved"] == 0.0
    # a predictor that ignores the swap: error 2|tau|, no side flips; the 8.5-sample item is
    # left out of the +2 delay (|8.5 + 2| > 9.33)
    rows = [r if r["split"] != "sym_swap" else {**r, "pred": tau[r["item"]]} for r in rows]
    rows = [r if r["split"] != "sym_icd+2" else {**r, "pred": tau[r["item"]]} for r in rows]
    got = symmetry_metrics(meta, pd.DataFrame(rows), max_tdoa=9.33)
    assert got["doa_swap_error"] == pytest.approx(np.mean(2 * np.abs(tau)))
    assert got["doa_swap_side_flip"] == 0.0
    assert got["doa_channel_delay_error"] == pytest.approx(2.0 * 3 / 7)  # 3 of 7 in range off by 2


# ------------------------------------------------------------------ delay-respecting DoA head
PAD = 64  # silent samples at both ends of the test pairs: shifts up to 64 drop no sample


def _delayed_pair(n: int = 4000, tau: int = 3, items: int = 6, seed: int = 0) -> torch.Tensor:
    """(items, 2, n): noise and its copy delayed by ``tau`` samples plus independent noise at
    -10 dB, silent in the first and last ``PAD`` samples: a pair whose TDoA is ``tau``."""
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(items, n + tau, generator=gen)
    x1, x2 = s[:, tau:], s[:, :n] + 0.3 * torch.randn(items, n, generator=gen)
    x = torch.stack([x1, x2], dim=1)
    x[..., :PAD] = 0
    x[..., n - PAD:] = 0
    return x


def _perturbed(module: torch.nn.Module, scale: float = 0.3) -> torch.nn.Module:
    """Random weights everywhere (the zero-initialised last layer too), so the properties
    below come from the construction, not from an untrained, symmetric start."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return module


def _lag_model() -> AcornModel:
    torch.manual_seed(0)
    cfg = EncoderConfig(d=16, layers=1, heads=2, dropout=0.0, doa_head="lag", lag_bands=3,
                        lag_channels=4, lag_kernel=5, lag_window=16, max_tdoa=9.33)
    return _perturbed(AcornModel(cfg)).eval()


def test_lag_head_is_exactly_delay_invariant_and_equivariant():
    """For any weights: a delay of both channels that drops no sample leaves the lag scores and
    the TDoA unchanged; a delay δ of channel 2 shifts the scores by exactly δ lags and moves the
    TDoA by exactly δ while the softmax mass at the window's edges is nil (checked: < 1e-6).
    Tolerance 1e-4 samples (float32 FFTs of 8000 points; measured errors are ~1e-6)."""
    from icml25.pipelines.acorn.lag_head import LagDoAHead
    from icml25.pipelines.acorn.symmetry import delay

    torch.manual_seed(0)
    head = _perturbed(LagDoAHead(bands=3, channels=4, kernel=5, window=16))
    x = _delayed_pair()
    with torch.no_grad():
        s0, base = head.scores(x), head(x)
        np.testing.assert_allclose(base.numpy(), 3.0, atol=0.5)  # finds the delay it is given
        for shift in (1, 37, -5, 64):
            np.testing.assert_allclose(head.scores(delay(x, shift)).numpy(), s0.numpy(),
                                       atol=1e-3 * float(s0.abs().max()))
            np.testing.assert_allclose(head(delay(x, shift)).numpy(), base.numpy(), atol=1e-4)
        for dl in (1, -1, 2, -2, 5, -7):
            y = delay(x, dl, channel=1)
            s = head.scores(y)
            w = head.window
            lo, hi = max(-w, -w + dl), min(w, w + dl)  # lags whose shifted source is in the window
            np.testing.assert_allclose(s[:, lo + w:hi + w + 1].numpy(),
                                       s0[:, lo - dl + w:hi - dl + w + 1].numpy(),
                                       atol=1e-3 * float(s0.abs().max()))
            for scores in (s0, s):
                p = torch.softmax(scores, dim=-1)
                assert float((p[:, :abs(dl) + 1].sum(-1) + p[:, -abs(dl) - 1:].sum(-1)).max()) < 1e-6
            np.testing.assert_allclose(head(y).numpy(), base.numpy() + dl, atol=1e-4)
        # the gain of either channel and the polarity of both do not matter either
        np.testing.assert_allclose(head(-x * torch.tensor([1.0, 0.25])[None, :, None]).numpy(),
                                   base.numpy(), atol=1e-4)


def test_lag_model_keeps_swap_antisymmetry_and_delay_properties():
    """The phase encoder's whole DoA readout (lag head, swap antisymmetrisation, clamp to ±9.33
    samples): swap and time reversal negate it, a delay of both channels leaves it and a delay δ
    of channel 2 moves it by δ, to 1e-4 samples, for delays that drop no sample and answers
    inside the clamp. The token head (control) has none of the delay properties."""
    from icml25.pipelines.acorn.symmetry import delay

    model = _lag_model()
    x = _delayed_pair()
    src = torch.zeros(x.shape[0], dtype=torch.long)
    with torch.no_grad():
        out = model(x, "doa", src)
        tau = out[:, 0]
        assert (tau.abs() > 1.0).all() and (tau.abs() < 6.0).all()  # inside the clamp
        np.testing.assert_allclose(model(x.flip(1), "doa", src)[:, 0].numpy(), -tau.numpy(),
                                   atol=1e-4)
        np.testing.assert_allclose(model(x.flip(2), "doa", src)[:, 0].numpy(), -tau.numpy(),
                                   atol=1e-4)
        side = out[:, 2] - out[:, 1]
        assert torch.equal(torch.sign(side), torch.sign(tau))  # left/right follows the TDoA
        np.testing.assert_allclose(model(delay(x, 37), "doa", src)[:, 0].numpy(), tau.numpy(),
                                   atol=1e-4)
        for dl in (2, -2):
            np.testing.assert_allclose(model(delay(x, dl, channel=1), "doa", src)[:, 0].numpy(),
                                       tau.numpy() + dl, atol=1e-4)
        far = delay(x, 11, channel=1)  # a 14-sample TDoA, beyond the array: clamped
        np.testing.assert_allclose(model(far, "doa", src)[:, 0].numpy(), 9.33, atol=1e-5)
        assert (model.train()(far, "doa", src)[:, 0] > 12).all()  # training: unclamped
        model.eval()
        token = AcornModel(EncoderConfig(d=16, layers=1, heads=2, dropout=0.0)).eval()
        token.heads["doa"][2].weight.mul_(1e3)
        t0 = token(x, "doa", src)[:, 0]
        assert (token(delay(x, 2, channel=1), "doa", src)[:, 0] - t0 - 2).abs().max() > 0.1


def test_delay_that_drops_samples_moves_the_lag_head_little():
    """The run's symmetry metrics delay a clip that fills its whole length, so the shifted clip
    loses |δ| samples at its end: the content changes and the properties hold approximately.
    On a clean 4000-sample pair without silent ends: a 37-sample delay of both channels moves
    the answer by less than 0.05 samples and a ±2 delay of channel 2 moves it by ±2 within
    0.05 samples."""
    from icml25.pipelines.acorn.symmetry import delay

    model = _lag_model()
    gen = torch.Generator().manual_seed(2)
    s = torch.randn(6, 4003, generator=gen)
    x = torch.stack([s[:, 3:], s[:, :4000] + 0.3 * torch.randn(6, 4000, generator=gen)], dim=1)
    src = torch.zeros(6, dtype=torch.long)
    with torch.no_grad():
        tau = model(x, "doa", src)[:, 0]
        assert (model(delay(x, 37), "doa", src)[:, 0] - tau).abs().max() < 0.05
        for dl in (2, -2):
            got = model(delay(x, dl, channel=1), "doa", src)[:, 0]
            assert (got - tau - dl).abs().max() < 0.05


def test_lag_head_is_refused_without_phase_and_stats_stay_in_samples():
    from icml25.pipelines.acorn.lag_head import LagDoAHead
    from icml25.pipelines.acorn.multitask import target_stats

    with pytest.raises(ValueError, match="magnitude-only"):
        AcornModel(EncoderConfig(d=16, layers=1, heads=2, use_phase=False, doa_head="lag"))
    with pytest.raises(ValueError, match="doa_head"):
        AcornModel(EncoderConfig(d=16, layers=1, heads=2, doa_head="peak"))
    with pytest.raises(ValueError, match="longer than"):
        LagDoAHead(window=16, kernel=9)(torch.zeros(1, 2, 20))
    with pytest.raises(ValueError, match="two-channel"):
        LagDoAHead()(torch.zeros(1, 3, 2000))
    data = {"doa": TaskData(torch.zeros(4, 2, 100), np.array([1.0, -3.0, 2.0, 5.0]),
                            np.zeros(4, int))}
    assert target_stats(data, ("doa",))["doa"] == (0.0, 1.0)
    assert target_stats(data)["doa"][1] == pytest.approx(np.sqrt(np.mean([1, 9, 4, 25])),
                                                         rel=1e-5)
    assert "doa" not in AcornModel(EncoderConfig(d=16, layers=1, heads=2,
                                                 doa_head="lag")).heads


def test_auxiliary_token_readout_trains_the_encoder_but_does_not_answer():
    """With ``doa_token_aux`` the DoA loss adds the token readout's loss (so the encoder gets a
    DoA gradient), while the answer stays the lag head's; without it there is no token head."""
    from icml25.pipelines.acorn.multitask import target_stats, task_loss

    torch.manual_seed(0)
    cfg = dict(d=16, layers=1, heads=2, dropout=0.0, doa_head="lag", lag_bands=2,
               lag_channels=4, lag_kernel=3, lag_window=12, max_tdoa=9.33)
    aux = AcornModel(EncoderConfig(**cfg, doa_token_aux=True))
    plain = AcornModel(EncoderConfig(**cfg))
    plain.load_state_dict({k: v for k, v in aux.state_dict().items()
                           if not k.startswith("heads.doa.")})
    x = _delayed_pair(n=2000, items=4)
    src = torch.zeros(4, dtype=torch.long)
    y = torch.full((4,), 3.0)
    data = {"doa": TaskData(x, y.numpy(), src.numpy())}
    stats = target_stats(data, ("doa",))
    assert stats["doa"] == (0.0, 1.0) and stats["doa_token"][1] == pytest.approx(3.0, rel=1e-5)
    aux.eval()
    plain.eval()
    with torch.no_grad():
        np.testing.assert_array_equal(aux(x, "doa", src).numpy(), plain(x, "doa", src).numpy())
        token = aux(x, "doa", src, readout="token")
        np.testing.assert_allclose(aux(x.flip(1), "doa", src, readout="token")[:, 0].numpy(),
                                   -token[:, 0].numpy(), atol=1e-5)  # antisymmetric too
    aux.train()
    loss = task_loss(aux, "doa", x, y, src, stats)
    loss.backward()
    assert aux.encoder.branches[0].weight.grad is not None  # the encoder learns from DoA
    assert loss.item() > task_loss(plain.train(), "doa", x, y, src, stats).item()
    with pytest.raises(ValueError, match="no token DoA head"):
        plain(x, "doa", src, readout="token")
