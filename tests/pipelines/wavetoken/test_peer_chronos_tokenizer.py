"""Our ``MeanScaleUniformBins`` against chronos-forecasting's, id for id.

The reference is the installed ``chronos.chronos.MeanScaleUniformBins`` (chronos-forecasting
2.3.2, the ``peers`` extra), built from a ``ChronosConfig`` without any weights. Every check
counts mismatching elements over thousands of values and asserts zero: context ids, attention
masks, scales (bit for bit), label ids and masks, and decoded values to 1e-6 of the scale.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
chronos = pytest.importorskip("chronos.chronos")

from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins  # noqa: E402

CONTEXT_LENGTH = 512
HORIZON = 24
SEEDS = (0, 1, 2, 3)


def chronos_tokenizer(vocab_size: int, limits=(-15.0, 15.0)):
    config = chronos.ChronosConfig(
        tokenizer_class="MeanScaleUniformBins",
        tokenizer_kwargs={"low_limit": limits[0], "high_limit": limits[1]},
        context_length=CONTEXT_LENGTH,
        prediction_length=HORIZON,
        n_tokens=vocab_size,
        n_special_tokens=2,
        pad_token_id=0,
        eos_token_id=1,
        use_eos_token=True,
        model_type="seq2seq",
        num_samples=20,
        temperature=1.0,
        top_k=50,
        top_p=1.0,
    )
    tok = config.create_tokenizer()
    assert isinstance(tok, chronos.MeanScaleUniformBins)
    return tok


def contexts(seed: int, length: int = CONTEXT_LENGTH + 88) -> np.ndarray:
    """A batch [64, length] longer than the context length: random walks and noise at
    magnitudes 1e-6..1e6 with offsets, missing values, leading NaN padding, constant, all-zero,
    single-observation and sign-alternating rows."""
    rng = np.random.default_rng(seed)
    n = 64
    magnitude = 10.0 ** rng.uniform(-6, 6, size=(n, 1))
    walk = np.cumsum(rng.normal(size=(n, length)), axis=1)
    noise = rng.standard_t(3, size=(n, length))
    x = np.where(rng.random((n, 1)) < 0.5, walk, noise) * magnitude
    x += rng.normal(size=(n, 1)) * magnitude * rng.integers(0, 2, size=(n, 1))
    x[rng.random(x.shape) < 0.08] = np.nan  # scattered missing values
    for i in range(0, 12):  # leading NaN padding (shorter histories), some in the kept part
        x[i, : rng.integers(1, length - 8)] = np.nan
    x[12] = 3.7  # constant
    x[13] = 0.0  # all zero (scale 0 -> 1)
    x[14, :-1], x[14, -1] = np.nan, -2.5e3  # one observation
    x[15] = 1e-6 * (-1.0) ** np.arange(length)
    x[16] = 1e6 * (-1.0) ** np.arange(length)
    x[17, -CONTEXT_LENGTH:] = 0.0  # zero in the kept window, non-zero before it
    x[17, : -CONTEXT_LENGTH] = 5.0
    return x


def labels(seed: int, state_scale: np.ndarray, nan_share: float) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    y = rng.normal(size=(state_scale.size, HORIZON)) * 4 * state_scale[:, None]
    y[rng.random(y.shape) < nan_share] = np.nan
    if nan_share:
        y[5] = np.nan  # a label row without any observation
    return y


def mismatches(ours: np.ndarray, ref) -> int:
    ref = ref.numpy() if hasattr(ref, "numpy") else np.asarray(ref)
    assert ours.shape == ref.shape
    return int((ours != ref).sum())


@pytest.mark.parametrize("vocab_size", [4096, 1024])
def test_centres_and_boundaries_are_chronos_bit_for_bit(vocab_size):
    ref = chronos_tokenizer(vocab_size)
    ours = MeanScaleUniformBins(vocab_size=vocab_size, context_length=CONTEXT_LENGTH)
    assert ours.centres.dtype == np.float32 and ours.boundaries.dtype == np.float32
    assert mismatches(ours.centres, ref.centers) == 0
    assert mismatches(ours.boundaries, ref.boundaries) == 0


@pytest.mark.parametrize("vocab_size", [4096, 1024])
def test_context_and_label_transforms_equal_chronos(vocab_size):
    ref = chronos_tokenizer(vocab_size)
    ours = MeanScaleUniformBins(vocab_size=vocab_size, context_length=CONTEXT_LENGTH)
    counts = {"ids": 0, "mask": 0, "scale": 0, "label_ids": 0, "label_mask": 0, "plain_labels": 0}
    n_values = 0
    for seed in SEEDS:
        x = contexts(seed)
        ids, mask, state = ours.context_input(x)
        ref_ids, ref_mask, ref_scale = ref.context_input_transform(torch.from_numpy(x))
        counts["ids"] += mismatches(ids, ref_ids)
        counts["mask"] += mismatches(mask, ref_mask)
        assert ref_scale.dtype == torch.float32
        counts["scale"] += mismatches(state.scale, ref_scale.double())
        n_values += ids.size

        y = labels(seed, state.scale, nan_share=0.1)
        label_ids, label_mask = ours.label_input_transform(y, state)
        ref_label_ids, ref_label_mask = ref.label_input_transform(torch.from_numpy(y), ref_scale)
        counts["label_ids"] += mismatches(label_ids, ref_label_ids)
        counts["label_mask"] += mismatches(label_mask, ref_label_mask)

        # the interface's label_input equals Chronos on NaN-free labels
        y_full = labels(seed, state.scale, nan_share=0.0)
        ref_full, _ = ref.label_input_transform(torch.from_numpy(y_full), ref_scale)
        counts["plain_labels"] += mismatches(ours.label_input(y_full, state), ref_full)
        n_values += label_ids.size + y_full.size
    assert n_values > 100_000
    assert counts == dict.fromkeys(counts, 0)


def test_special_rows_are_the_ones_chronos_makes():
    """The edge rows of the batch behave as documented (guards against a vacuous comparison)."""
    ours = MeanScaleUniformBins(context_length=CONTEXT_LENGTH)
    x = contexts(0)
    ids, mask, state = ours.context_input(x)
    assert ids.shape == (64, CONTEXT_LENGTH + 1)
    # the float32 sum of 512 copies of 3.7 is rounded, so the scale is 3.7 to float32 precision
    assert state.scale[12] == pytest.approx(3.7, rel=1e-6) and state.scale[13] == 1.0
    assert np.unique(ids[12, :-1]).size == 1 and np.all(ids[13, :-1] == ours.quantize(0.0))
    assert state.scale[17] == 1.0  # only the kept window counts
    assert mask[14].sum() == 2 and state.scale[14] == 2.5e3
    assert ids[14, -2] == ours.quantize(-1.0)
    assert np.all(ids[~mask] == 0) and np.all(ids[:, -1] == 1)
    assert (~mask).sum() > 1000  # many PADs compared


@pytest.mark.parametrize("vocab_size", [4096, 1024])
def test_label_input_differs_from_chronos_only_at_missing_labels(vocab_size):
    """The remaining, documented difference: label_input interpolates NaN labels instead of
    writing PAD, and nothing else differs."""
    ref = chronos_tokenizer(vocab_size)
    ours = MeanScaleUniformBins(vocab_size=vocab_size, context_length=CONTEXT_LENGTH)
    x = contexts(7)
    _, _, state = ours.context_input(x)
    _, _, ref_scale = ref.context_input_transform(torch.from_numpy(x))
    y = labels(7, state.scale, nan_share=0.2)
    y[5] = 1.0  # label_input needs an observation per row
    plain = ours.label_input(y, state)
    ref_ids, ref_mask = ref.label_input_transform(torch.from_numpy(y), ref_scale)
    differ = plain != ref_ids.numpy()
    assert np.array_equal(differ, differ & ~ref_mask.numpy())  # only where Chronos pads
    assert np.all(ref_ids.numpy()[~ref_mask.numpy()] == 0)
    assert np.all(plain[:, :-1] >= 3)  # filled values are real bins, never PAD


@pytest.mark.parametrize("vocab_size", [4096, 1024])
def test_output_transform_equals_chronos_to_1e6_of_the_scale(vocab_size):
    ref = chronos_tokenizer(vocab_size)
    ours = MeanScaleUniformBins(vocab_size=vocab_size, context_length=CONTEXT_LENGTH)
    worst = 0.0
    for seed in SEEDS:
        _, _, state = ours.context_input(contexts(seed))
        _, _, ref_scale = ref.context_input_transform(torch.from_numpy(contexts(seed)))
        rng = np.random.default_rng(seed)
        sampled = rng.integers(0, vocab_size, size=(64, 20, HORIZON))  # PAD/EOS/id 2 included
        sampled[:, 0, :3] = [0, 1, 2]
        decoded = ours.output_transform(sampled, state)
        expected = ref.output_transform(torch.from_numpy(sampled), ref_scale).double().numpy()
        worst = max(worst, float((np.abs(decoded - expected) / state.scale[:, None, None]).max()))
    assert worst <= 1e-6


@pytest.mark.parametrize("limits", [(-15.0, 15.0), (-10.0, 10.0), (-1.0, 3.0)])
@pytest.mark.parametrize("vocab_size", [4096, 2048, 1024, 512, 5])
def test_layout_equal_for_other_vocabularies_and_limits(vocab_size, limits):
    ref = chronos_tokenizer(vocab_size, limits)
    ours = MeanScaleUniformBins(vocab_size=vocab_size, limits=limits)
    assert mismatches(ours.centres, ref.centers) == 0
    assert mismatches(ours.boundaries, ref.boundaries) == 0
    rng = np.random.default_rng(vocab_size)
    x = rng.normal(size=(16, 200)) * 3
    ids, _, state = ours.context_input(x)
    ref_ids, _, ref_scale = ref.context_input_transform(torch.from_numpy(x))
    assert mismatches(ids, ref_ids) == 0 and mismatches(state.scale, ref_scale.double()) == 0
