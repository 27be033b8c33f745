"""Unit tests of the Chronos uniform-bin tokenizer (chronos-forecasting src/chronos/chronos.py)."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.tokenizer import (
    EOS_ID,
    PAD_ID,
    ForecastTokenizer,
    location_scale,
)


def reference_ids(values: np.ndarray, boundaries: np.ndarray, vocab: int) -> np.ndarray:
    """Chronos' rule written element by element: bisect_right == bucketize(right=True), on the
    float32-rounded values (Chronos' tensors are float32)."""
    edges = [float(b) for b in boundaries]
    ids = [bisect.bisect_right(edges, float(np.float32(v))) + 2 for v in values]
    return np.clip(np.array(ids), 0, vocab - 1)


# ------------------------------------------------------------------------------ id layout
def test_chronos_layout_at_4096():
    tok = MeanScaleUniformBins()
    assert tok.vocab_size == 4096 and tok.centres.size == 4093
    assert tok.boundaries.size == 4094
    assert tok.centres.dtype == tok.boundaries.dtype == np.float32
    assert tok.boundaries[0] == np.float32(-1e20) and tok.boundaries[-1] == np.float32(1e20)
    assert tok.centres[0] == -15.0 and tok.centres[-1] == 15.0
    # float32 centres: gaps equal 30/4092 up to float32 rounding at 15 (ulp 9.5e-7)
    gaps = np.diff(tok.centres.astype(np.float64))
    np.testing.assert_allclose(gaps, 30 / 4092, atol=np.spacing(np.float32(15.0)))
    assert tok.bin_width == gaps.max() and tok.bin_width == pytest.approx(30 / 4092, rel=1e-4)
    midpoints = (tok.centres[1:] + tok.centres[:-1]) / np.float32(2)
    np.testing.assert_array_equal(tok.boundaries[1:-1], midpoints)
    # extreme values: lowest id 3 (id 2 unused), highest 4095
    np.testing.assert_array_equal(tok.quantize([-1e6, -15.0, 15.0, 1e6]), [3, 3, 4095, 4095])
    # the middle centre is torch.linspace's 15 - 2046 * step in float32, 1.4e-8 rather than 0
    assert tok.quantize(0.0) == 2049 and tok.dequantize(2049) == pytest.approx(0.0, abs=1e-7)
    rng = np.random.default_rng(0)
    ids = tok.quantize(rng.standard_cauchy(200_000) * 10)
    assert ids.min() == 3 and ids.max() == 4095
    assert not np.any(ids == 2)


def test_chronos_layout_at_1024():
    tok = MeanScaleUniformBins(vocab_size=1024)
    assert tok.centres.size == 1021
    np.testing.assert_array_equal(tok.quantize([-100.0, 0.0, 100.0]), [3, 513, 1023])


def test_bucketize_right_semantics_values_on_boundaries_go_up():
    tok = MeanScaleUniformBins()
    k = np.array([1, 100, 2047, 4092])
    on_boundary = tok.boundaries[k]
    ids = tok.quantize(on_boundary)
    np.testing.assert_array_equal(ids, k + 3)
    np.testing.assert_array_equal(tok.dequantize(ids), tok.centres[k])  # the upper centre


def test_quantize_matches_an_elementwise_reference():
    tok = MeanScaleUniformBins(vocab_size=512)
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(size=2000) * 8, tok.boundaries[1:-1], tok.centres])
    np.testing.assert_array_equal(tok.quantize(values), reference_ids(values, tok.boundaries, 512))


def test_quantize_matches_torch_bucketize():
    torch = pytest.importorskip("torch")
    tok = MeanScaleUniformBins()
    rng = np.random.default_rng(2)
    values = np.concatenate([rng.normal(size=5000) * 6, tok.boundaries[1:-1:7]])
    values = values.astype(np.float32)
    expected = (
        torch.bucketize(torch.from_numpy(values), torch.from_numpy(tok.boundaries), right=True) + 2
    )
    expected = expected.clamp(0, 4095).numpy()
    np.testing.assert_array_equal(tok.quantize(values), expected)


def test_decoding_clamps_special_ids_to_edge_bins():
    tok = MeanScaleUniformBins()
    np.testing.assert_array_equal(tok.dequantize([PAD_ID, EOS_ID, 2, 3]), [-15.0] * 4)
    assert tok.dequantize(4095) == 15.0
    np.testing.assert_array_equal(tok.dequantize(np.arange(3, 4096)), tok.centres)
    np.testing.assert_array_equal(tok.quantize(tok.centres), np.arange(3, 4096))


# ------------------------------------------------------------------------ scaling and NaN
def test_mean_scale_from_observed_context_and_padding():
    tok = MeanScaleUniformBins()
    x = np.array(
        [
            [np.nan, np.nan, 2.0, -4.0, 6.0],
            [1.0, np.nan, 3.0, 5.0, np.nan],
            [0.0, 0.0, 0.0, 0.0, 0.0],
        ]
    )
    ids, mask, state = tok.context_input(x)
    np.testing.assert_allclose(state.scale, [4.0, 3.0, 1.0])
    np.testing.assert_array_equal(state.loc, 0.0)
    np.testing.assert_array_equal(state.n_tokens, [3, 3, 5])
    assert ids.shape == mask.shape == (3, 6)
    np.testing.assert_array_equal(mask[:, :-1], ~np.isnan(x))
    assert np.all(ids[:, :-1][np.isnan(x)] == PAD_ID)
    assert np.all(ids[:, -1] == EOS_ID) and mask[:, -1].all()
    np.testing.assert_array_equal(ids[0, 2:5], tok.quantize([0.5, -1.0, 1.5]))
    np.testing.assert_array_equal(ids[2, :-1], tok.quantize(np.zeros(5)))


def test_round_trip_error_is_at_most_half_a_bin():
    tok = MeanScaleUniformBins()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 128)) * rng.uniform(0.1, 100, size=(50, 1)) + 5
    ids, _, state = tok.context_input(x)
    decoded = tok.output_transform(ids[:, None, :-1], state)[:, 0]
    # half the widest bin, plus float32 rounding of x / scale and of the float32 midpoints
    eps = np.finfo(np.float32).eps
    slack = eps * (np.abs(x) / state.scale[:, None] + 15.0)
    bound = (tok.bin_width / 2 + slack) * state.scale[:, None]
    assert np.all(np.abs(decoded - x) <= bound)
    assert np.abs(decoded - x).max() > 0.9 * bound.min()  # the bound is nearly attained


def test_labels_use_the_context_scale():
    tok = MeanScaleUniformBins()
    context = np.array([[1.0, 2.0, 3.0, 2.0]])
    _, _, state = tok.context_input(context)
    assert state.scale[0] == 2.0
    y = np.array([[4.0, 6.0, -2.0]])
    labels = tok.label_input(y, state)
    np.testing.assert_array_equal(labels, [[*tok.quantize([2.0, 3.0, -1.0]), EOS_ID]])
    y_nan = np.array([[4.0, np.nan, 8.0]])
    np.testing.assert_array_equal(tok.label_input(y_nan, state)[0, 1], tok.quantize(3.0))


def test_mean_scaling_is_scale_invariant():
    tok = MeanScaleUniformBins()
    rng = np.random.default_rng(4)
    x = np.abs(rng.normal(size=(20, 64))) + 1
    ids, _, st = tok.context_input(x)
    ids2, _, st2 = tok.context_input(7.5 * x)
    assert (ids == ids2).mean() >= 0.999 and np.abs(ids - ids2).max() <= 1
    # float32 scales: mean |7.5 x| equals 7.5 mean |x| up to float32 rounding of the two sums
    np.testing.assert_allclose(st2.scale, 7.5 * st.scale, rtol=4 * np.finfo(np.float32).eps)
    sampled = rng.integers(3, 4096, size=(20, 4, 8))
    np.testing.assert_allclose(
        tok.output_transform(sampled, st2),
        7.5 * tok.output_transform(sampled, st),
        rtol=4 * np.finfo(np.float32).eps,
    )
    # decoding is exactly the float64 product centre * scale
    expected = tok.centres[sampled - 3].astype(np.float64) * st2.scale[:, None, None]
    np.testing.assert_array_equal(tok.output_transform(sampled, st2), expected)


def test_context_length_truncation_like_chronos():
    tok = MeanScaleUniformBins(context_length=4)
    x = np.array([[100.0, 100.0, 1.0, 2.0, 3.0, 2.0]])
    ids, mask, state = tok.context_input(x)
    assert ids.shape == mask.shape == (1, 5) and mask.all()
    assert state.scale[0] == 2.0  # the truncated part only
    np.testing.assert_array_equal(ids[0, :-1], tok.quantize([0.5, 1.0, 1.5, 1.0]))


def test_standard_scaling_variant():
    tok = MeanScaleUniformBins(scaling="standard")
    assert tok.name == "chronos_bins-standard-V4096"
    x = np.array([[1.0, 3.0, 5.0, 7.0], [2.5, 2.5, 2.5, 2.5]])
    ids, _, state = tok.context_input(x)
    np.testing.assert_allclose(state.loc, [4.0, 2.5])
    # the z-scaling of tokenizer.location_scale (its rule for a constant row included)
    loc, scale = location_scale(x, "standard")
    np.testing.assert_array_equal(state.loc, loc)
    np.testing.assert_array_equal(state.scale, scale)
    assert state.scale[0] == pytest.approx(np.std([1.0, 3, 5, 7]), rel=1e-12)
    np.testing.assert_array_equal(ids[0, :-1], tok.quantize((x[0] - 4.0) / state.scale[0]))
    assert np.all(ids[1, :-1] == 2049)  # the constant maps to 0, the middle centre
    decoded = tok.output_transform(ids[:, None, :-1], state)[:, 0]
    np.testing.assert_array_equal(decoded[1], 2.5 + float(tok.centres[2046]) * state.scale[1])
    np.testing.assert_allclose(decoded[1], 2.5, rtol=1e-6)
    assert np.all(np.abs(decoded - x) <= tok.bin_width / 2 * state.scale[:, None] + 1e-12)


# --------------------------------------------------------------------- interface and errors
def test_protocol_and_shapes():
    tok = MeanScaleUniformBins()
    assert isinstance(tok, ForecastTokenizer)
    assert (tok.pad_id, tok.eos_id) == (0, 1) and tok.name == "chronos_bins-mean-V4096"
    rng = np.random.default_rng(5)
    ids, mask, state = tok.context_input(rng.normal(size=(3, 10)))
    assert ids.dtype == np.int64 and mask.dtype == np.bool_
    assert tok.num_target_tokens(7) == 7
    out = tok.output_transform(rng.integers(0, 4096, size=(3, 20, 7)), state)
    assert out.shape == (3, 20, 7) and out.dtype == np.float64 and np.isfinite(out).all()
    assert MeanScaleUniformBins(**tok.get_params()).get_params() == tok.get_params()


def test_bad_inputs_raise():
    tok = MeanScaleUniformBins()
    with pytest.raises(ValueError, match="inf"):
        tok.context_input([[1.0, np.inf]])
    with pytest.raises(ValueError, match="no observed value"):
        tok.context_input([[1.0, 2.0], [np.nan, np.nan]])
    _, _, state = tok.context_input([[1.0, 2.0]])
    with pytest.raises(ValueError, match="target contains ±inf"):
        tok.label_input([[-np.inf]], state)
    with pytest.raises(ValueError, match="state holds 1"):
        tok.output_transform(np.zeros((2, 1, 3), dtype=int), state)
    with pytest.raises(ValueError, match="horizon"):
        tok.num_target_tokens(0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab_size": 4}, "vocab_size"),
        ({"vocab_size": 100.0}, "vocab_size"),
        ({"limits": (15.0, -15.0)}, "lo < hi"),
        ({"scaling": "robust"}, "scaling"),
        ({"context_length": 0}, "context_length"),
    ],
)
def test_invalid_parameters_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MeanScaleUniformBins(**kwargs)


def test_label_input_transform_pads_missing_labels_like_chronos():
    tok = MeanScaleUniformBins()
    _, _, state = tok.context_input(np.array([[1.0, 2.0, 3.0, 2.0], [4.0, 4.0, 4.0, 4.0]]))
    y = np.array([[4.0, np.nan, -2.0], [np.nan, np.nan, np.nan]])
    ids, mask = tok.label_input_transform(y, state)
    np.testing.assert_array_equal(mask, [[True, False, True, True], [False, False, False, True]])
    np.testing.assert_array_equal(ids[0], [*tok.quantize([2.0]), PAD_ID, *tok.quantize([-1.0]), 1])
    np.testing.assert_array_equal(ids[1], [PAD_ID, PAD_ID, PAD_ID, EOS_ID])
    # label_input interpolates instead: the middle label becomes (2 + (-1)) / 2 in scaled units
    np.testing.assert_array_equal(tok.label_input(y[:1], state.subset([0]))[0, 1], tok.quantize(0.5))
    with pytest.raises(ValueError, match="2-D"):
        tok.label_input_transform(np.ones(3), state)
    with pytest.raises(ValueError, match="inf"):
        tok.label_input_transform([[np.inf, 1.0, 1.0], [1.0, 1.0, 1.0]], state)
    with pytest.raises(ValueError, match="state holds 2"):
        tok.label_input_transform(np.ones((3, 3)), state)


def test_values_beyond_float32_range_raise():
    tok = MeanScaleUniformBins()
    with pytest.raises(ValueError, match="float32"):
        tok.context_input([[1.0, 1e39]])
    with pytest.raises(ValueError, match="overflows float32"):
        tok.context_input([[3e38, 3e38, 3e38]])


@pytest.mark.parametrize(("vocab_size", "limits"), [(4096, (-15.0, 15.0)), (1024, (-15.0, 15.0)),
                                                    (5, (-1.0, 3.0)), (300, (-0.5, 7.0))])
def test_quantize_equals_searchsorted_on_edges_and_extremes(vocab_size, limits):
    """The guessed-and-corrected bucket equals a binary search on every float32 input class."""
    tok = MeanScaleUniformBins(vocab_size=vocab_size, limits=limits)
    rng = np.random.default_rng(vocab_size)
    b = tok.boundaries
    values = np.concatenate([
        rng.normal(size=50_000) * 6, rng.standard_cauchy(20_000) * 10, b, tok.centres,
        np.nextafter(b, np.float32(np.inf)), np.nextafter(b, np.float32(-np.inf)),
        [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e38, -3e38, 1e20, -1e20, 0.0, -0.0],
    ]).astype(np.float32)
    expected = np.clip(np.searchsorted(b, values, side="right") + 2, 0, vocab_size - 1)
    got = tok.quantize(values)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(tok.quantize(values[:700].reshape(100, 7)),
                                  expected[:700].reshape(100, 7))
    assert tok.quantize(values[0]).shape == () and tok.quantize(values[0]) == expected[0]
