"""Unit tests of the WaveToken wavelet tokenizer (paper Sec. 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pywt
from scipy.stats import norm

from icml25.pipelines.wavetoken.tokenizer import (
    EOS_ID,
    PAD_ID,
    ForecastTokenizer,
    TokenizerState,
    fill_missing,
    location_scale,
    observed_lengths,
)
from icml25.pipelines.wavetoken.wavelet_tokenizer import (
    WaveletTokenizer,
    cdf_threshold,
    fdrc_threshold,
    hard_threshold,
    mad_sigma,
    visushrink_threshold,
)

MIDDLE_ID = 512  # id of centre 0 at V = 1024: 2 + (1021 - 1) / 2


def walk_plus_season(rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """Random walk + seasonal windows with random level and scale (the setting the quantiser limits were sized on)."""
    t = np.arange(length)
    walk = np.cumsum(rng.normal(size=(n, length)), axis=1)
    season = 3.0 * np.sin(2 * np.pi * t / rng.integers(6, 30, size=(n, 1)))
    level = rng.uniform(-50, 50, size=(n, 1))
    scale = rng.uniform(0.1, 20, size=(n, 1))
    return level + scale * (walk + season)


def synthesis_matrix(wavelet: str, level: int, n: int) -> np.ndarray:
    """Columns = inverse DWT of unit coefficient vectors (periodization)."""
    tok = WaveletTokenizer(wavelet=wavelet, level=level)
    return tok.reconstruct(np.eye(n)).T


# ------------------------------------------------------------------------------------- DWT
@pytest.mark.filterwarnings("ignore:Level value of")  # pywt's boundary note for the reference
@pytest.mark.parametrize("wavelet", ["bior2.2", "haar", "db4", "coif2", "sym4"])
@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("length", [64, 512])
def test_dwt_round_trip_is_exact_and_maximally_decimated(wavelet, level, length):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, length)) * 10
    tok = WaveletTokenizer(wavelet=wavelet, level=level)
    coeffs = tok.decompose(x)
    assert coeffs.shape == x.shape  # n samples -> n coefficients
    assert sum(tok.level_lengths(length)) == length
    np.testing.assert_allclose(tok.reconstruct(coeffs), x, atol=1e-10, rtol=0)
    # same as pywt's own round trip, row by row, in pywt's coarse-to-fine order
    ref = pywt.wavedec(x[0], wavelet, mode="periodization", level=level)
    np.testing.assert_allclose(coeffs[0], np.concatenate(ref), atol=1e-12)


@pytest.mark.parametrize("wavelet", ["db4", "coif2", "bior2.2"])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_dwt_round_trip_exact_at_the_shortest_window(wavelet, level):
    # one block of 2^J samples, shorter than the filters: periodization is still exact
    rng = np.random.default_rng(1)
    tok = WaveletTokenizer(wavelet=wavelet, level=level)
    x = rng.normal(size=(4, 2**level))
    np.testing.assert_allclose(tok.reconstruct(tok.decompose(x)), x, atol=1e-10)


def test_haar_known_answer():
    a, d = pywt.wavedec(np.ones(4), "haar", mode="periodization", level=1)
    np.testing.assert_allclose(a, [math.sqrt(2), math.sqrt(2)], atol=1e-12)
    np.testing.assert_allclose(d, [0.0, 0.0], atol=1e-12)
    tok = WaveletTokenizer(wavelet="haar", level=1)
    np.testing.assert_allclose(
        tok.decompose(np.ones((1, 4)))[0], [2**0.5, 2**0.5, 0, 0], atol=1e-12
    )


@pytest.mark.parametrize(("wavelet", "gain"), [("bior2.2", 2.121), ("haar", 1.414), ("db4", 1.865)])
def test_synthesis_gain_matches_known_values(wavelet, gain):
    g = np.abs(synthesis_matrix(wavelet, 1, 64)).sum(axis=1).max()
    assert g == pytest.approx(gain, abs=1e-3)


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("wavelet", ["bior2.2", "haar", "db4"])
def test_round_trip_error_within_quantisation_bound(wavelet):
    rng = np.random.default_rng(2)
    x = walk_plus_season(rng, 64, 64)
    tok = WaveletTokenizer(wavelet=wavelet, level=1)
    ids, mask, state = tok.context_input(x)
    assert mask.all()
    # no coefficient clips, so the bound applies
    scaled = (x - state.loc[:, None]) / state.scale[:, None]
    assert np.abs(tok.decompose(scaled)).max() < tok.limits[1]
    decoded = tok.output_transform(ids[:, None, :-1], state)[:, 0]
    g = np.abs(synthesis_matrix(wavelet, 1, 64)).sum(axis=1).max()
    half = tok.bin_width / 2
    err = np.abs(decoded - x)
    assert np.all(err.max(axis=1) <= half * g * state.scale * (1 + 1e-9))
    rms = np.sqrt((err**2).mean(axis=1))
    assert np.all(rms <= half * np.sqrt(2) * state.scale * (1 + 1e-9))
    # and quantisation is the only loss: exact without it
    unscaled = tok.reconstruct(tok.decompose(scaled)) * state.scale[:, None] + state.loc[:, None]
    np.testing.assert_allclose(unscaled, x, atol=1e-9 * np.abs(x).max())


def test_label_round_trip_uses_context_scaling_within_bound():
    rng = np.random.default_rng(3)
    full = walk_plus_season(rng, 32, 128 + 32)
    context, target = full[:, :128], full[:, 128:]
    tok = WaveletTokenizer()
    _, _, state = tok.context_input(context)
    labels = tok.label_input(target, state)
    assert labels.shape == (32, 33) and np.all(labels[:, -1] == EOS_ID)
    expected = tok.quantize(tok.decompose((target - state.loc[:, None]) / state.scale[:, None]))
    np.testing.assert_array_equal(labels[:, :-1], expected)
    decoded = tok.output_transform(labels[:, None, :-1], state)[:, 0]
    bound = tok.bin_width / 2 * 2.1214 * state.scale
    assert np.all(np.abs(decoded - target).max(axis=1) <= bound)


def test_future_never_enters_the_context_transform():
    rng = np.random.default_rng(4)
    context = walk_plus_season(rng, 8, 64)
    tok = WaveletTokenizer()
    ids_a, _, state = tok.context_input(context)
    loc, scale = state.loc.copy(), state.scale.copy()
    tok.label_input(rng.normal(size=(8, 16)) * 1e3, state)
    np.testing.assert_array_equal(state.loc, loc)
    np.testing.assert_array_equal(state.scale, scale)
    ids_b, _, _ = tok.context_input(context)
    np.testing.assert_array_equal(ids_a, ids_b)


# ---------------------------------------------------------------------------------- scaling
def test_scaling_invariance_of_tokens_and_equivariance_of_decoding():
    rng = np.random.default_rng(5)
    x = walk_plus_season(rng, 64, 128)
    a, b = 3.7, -12.5
    tok = WaveletTokenizer()
    ids, _, state = tok.context_input(x)
    ids2, _, state2 = tok.context_input(a * x + b)
    np.testing.assert_array_equal(ids, ids2)
    sampled = rng.integers(2, 1023, size=(64, 5, 32))
    np.testing.assert_allclose(
        tok.output_transform(sampled, state2),
        a * tok.output_transform(sampled, state) + b,
        rtol=1e-9,
        atol=1e-9 * np.abs(b),
    )


@pytest.mark.parametrize("value", [0.1, -3.0, 0.0, 1e6, 7.3e-5])
def test_constant_series_tokens_are_zero_and_decode_exactly(value):
    tok = WaveletTokenizer()
    context = np.full((2, 64), value)
    context[1, :10] = np.nan  # short history, same constant
    ids, mask, state = tok.context_input(context)
    expected_scale = 1e-10 * abs(value) if value != 0 else 1e-30
    np.testing.assert_allclose(state.scale, [expected_scale] * 2, rtol=1e-15)
    np.testing.assert_array_equal(state.loc, [value, value])
    assert np.all(ids[0, :-1] == MIDDLE_ID)
    assert np.all(ids[1, 10:-1] == MIDDLE_ID) and np.all(ids[1, :10] == PAD_ID)
    assert mask[0].all() and not mask[1, :10].any() and mask[1, 10:].all()
    labels = tok.label_input(np.full((2, 16), value), state)
    assert np.all(labels[:, :-1] == MIDDLE_ID)
    decoded = tok.output_transform(labels[:, None, :-1], state)
    assert np.all(decoded == value)  # exactly


def test_mean_scaling_variant():
    rng = np.random.default_rng(6)
    x = np.abs(walk_plus_season(rng, 4, 64))
    tok = WaveletTokenizer(scaling="mean")
    _, _, state = tok.context_input(x)
    np.testing.assert_array_equal(state.loc, 0.0)
    np.testing.assert_allclose(state.scale, np.abs(x).mean(axis=1))
    zeros = tok.context_input(np.zeros((1, 8)))
    assert zeros[2].scale[0] == 1.0 and np.all(zeros[0][0, :-1] == MIDDLE_ID)
    assert np.all(tok.output_transform(zeros[0][:, None, :-1], zeros[2]) == 0.0)
    assert "mean" in tok.name


# -------------------------------------------------------------------------------- quantiser
def test_quantiser_layout_edges_and_middle_id():
    tok = WaveletTokenizer()
    assert tok.vocab_size == 1024 and tok.centres.size == 1021
    ids = tok.quantize(np.array([-1e9, -100.0, -15.0, 0.0, 15.0, 100.0, 1e9]))
    np.testing.assert_array_equal(ids, [2, 2, 2, MIDDLE_ID, 1022, 1022, 1022])
    assert tok.dequantize(MIDDLE_ID) == 0.0  # exactly
    np.testing.assert_array_equal(tok.quantize(tok.centres), np.arange(2, 1023))
    np.testing.assert_array_equal(tok.dequantize(np.arange(2, 1023)), tok.centres)
    # tiny values around 0 still map to the middle id
    assert np.all(tok.quantize([1e-12, -1e-12, tok.bin_width * 0.49]) == MIDDLE_ID)
    rng = np.random.default_rng(7)
    many = tok.quantize(rng.standard_cauchy(100_000) * 5)
    assert many.min() >= 2 and many.max() <= 1022  # never PAD/EOS, id 1023 unused
    # out-of-range ids (PAD, EOS, 1023) clamp to the end bins when decoding
    np.testing.assert_array_equal(tok.dequantize([PAD_ID, EOS_ID, 1023]), [-15.0, -15.0, 15.0])


@pytest.mark.parametrize("vocab", [512, 2048, 4096])
def test_quantiser_zero_is_a_centre_for_other_even_vocabularies(vocab):
    tok = WaveletTokenizer(vocab_size=vocab, limits=(-10.0, 10.0))
    middle = 2 + (vocab - 4) // 2
    assert tok.quantize(0.0) == middle and tok.dequantize(middle) == 0.0
    assert tok.quantize(1e9) == vocab - 2


def test_quantiser_warns_when_zero_is_not_a_centre():
    with pytest.warns(UserWarning, match="0 is not a quantiser centre"):
        WaveletTokenizer(limits=(-5.0, 11.0))


# ----------------------------------------------------------------------------- thresholding
def test_fdrc_zeroes_pure_noise_and_keeps_a_spike():
    rng = np.random.default_rng(8)
    d = rng.normal(size=512)
    lam = fdrc_threshold(d, mad_sigma(d), q=0.05)
    kept = hard_threshold(d, lam)
    assert np.mean(kept == 0) >= 0.95
    spiky = d.copy()
    spiky[100] = 20.0
    lam_spike = fdrc_threshold(spiky, mad_sigma(spiky), q=0.05)
    assert np.isfinite(lam_spike)
    out = hard_threshold(spiky, lam_spike)
    assert out[100] == 20.0
    assert np.mean(out == 0) >= 0.95


def test_fdrc_matches_the_algorithm_written_with_the_inverse_cdf():
    rng = np.random.default_rng(9)
    d = rng.normal(size=256)
    d[:12] = rng.choice([-1, 1], 12) * rng.uniform(3.5, 6.0, 12)  # moderate signals
    sigma = float(mad_sigma(d[128:]))
    q = 0.1
    p = np.sort(2 * (1 - norm.cdf(np.abs(d) / sigma)))
    i = np.arange(1, d.size + 1)
    i0 = np.max(np.nonzero(p <= i / d.size * q)[0])
    expected = sigma * norm.ppf(1 - p[i0] / 2)
    assert fdrc_threshold(d, sigma, q=q) == pytest.approx(expected, rel=1e-8)


def test_fdrc_without_discoveries_zeroes_every_detail():
    d = np.array([0.1, -0.2, 0.3, -0.1])
    lam = fdrc_threshold(d, sigma=1.0, q=0.05)
    assert lam == np.inf
    assert np.all(hard_threshold(d, lam) == 0.0)


def test_fdrc_is_vectorised_over_rows():
    rng = np.random.default_rng(10)
    d = rng.normal(size=(5, 64))
    d[:, 0] = 10.0
    sig = mad_sigma(d)
    lam = fdrc_threshold(d, sig, q=0.05)
    assert lam.shape == (5,)
    for r in range(5):
        assert lam[r] == fdrc_threshold(d[r], sig[r], q=0.05)


def test_visushrink_known_values():
    rng = np.random.default_rng(11)
    d = rng.normal(size=4096)
    assert float(mad_sigma(d)) == pytest.approx(1.0, rel=0.1)
    lam = float(visushrink_threshold(d, n=4096))
    assert lam == pytest.approx(math.sqrt(2 * math.log(4096)), rel=0.1)
    assert math.sqrt(2 * math.log(4096)) == pytest.approx(4.08, abs=0.01)


def test_cdf_threshold_zeroes_about_q_of_the_details():
    rng = np.random.default_rng(12)
    d = rng.normal(size=1000)
    out = hard_threshold(d, cdf_threshold(d, q=0.2))
    assert np.mean(out == 0) == pytest.approx(0.2, abs=0.002)


@pytest.mark.parametrize("rule", ["visushrink", "fdrc", "cdf"])
def test_tokenizer_thresholds_only_context_details(rule):
    rng = np.random.default_rng(13)
    x = rng.normal(size=(16, 128)) + np.linspace(0, 3, 128)
    plain = WaveletTokenizer()
    thr = WaveletTokenizer(threshold=rule)
    ids_p, _, st = plain.context_input(x)
    ids_t, _, _ = thr.context_input(x)
    half = 64  # the approximation block of J = 1 occupies the first 64 of 128 tokens
    np.testing.assert_array_equal(ids_t[:, :half], ids_p[:, :half])  # approximations untouched
    details = ids_t[:, half:-1]
    assert np.mean(details == MIDDLE_ID) > np.mean(ids_p[:, half:-1] == MIDDLE_ID)
    if rule == "fdrc":  # pure-noise details
        assert np.mean(details == MIDDLE_ID) >= 0.95
    # labels: untouched unless threshold_targets
    y = rng.normal(size=(16, 32))
    np.testing.assert_array_equal(thr.label_input(y, st), plain.label_input(y, st))
    thr_t = WaveletTokenizer(threshold=rule, threshold_targets=True)
    lab = thr_t.label_input(y, st)
    assert np.mean(lab[:, 16:-1] == MIDDLE_ID) > np.mean(
        plain.label_input(y, st)[:, 16:-1] == MIDDLE_ID
    )


def test_threshold_q_defaults_per_rule():
    assert WaveletTokenizer(threshold="fdrc").threshold_q == 0.05
    assert WaveletTokenizer(threshold="cdf").threshold_q == 0.2
    assert WaveletTokenizer(threshold="cdf", threshold_q=0.5).threshold_q == 0.5


# ------------------------------------------------------------------- short contexts and NaNs
def test_short_context_uses_last_points_divisible_by_block_and_left_pads():
    rng = np.random.default_rng(14)
    width = 16
    x = rng.normal(size=(3, width)) * 4 + 2
    x[1, :7] = np.nan  # 9 observed -> J=2 keeps 8
    x[2, :5] = np.nan  # 11 observed -> keeps 8
    tok = WaveletTokenizer(level=2)
    ids, mask, state = tok.context_input(x)
    assert ids.shape == mask.shape == (3, width + 1)
    np.testing.assert_array_equal(state.n_tokens, [16, 8, 8])
    for r, k in [(1, 8), (2, 8)]:
        assert np.all(ids[r, : width - k] == PAD_ID) and not mask[r, : width - k].any()
        assert mask[r, width - k :].all() and np.all(ids[r, width - k : -1] >= 2)
        # stats from every observed value, tokens from the last k
        obs = x[r][~np.isnan(x[r])]
        assert state.loc[r] == pytest.approx(obs.mean()) and state.scale[r] == pytest.approx(
            obs.std()
        )
        expected = tok.quantize(tok.decompose(((x[r, -k:] - obs.mean()) / obs.std())[None]))
        np.testing.assert_array_equal(ids[r, width - k : -1], expected[0])


def test_batch_with_mixed_lengths_equals_row_by_row():
    rng = np.random.default_rng(15)
    x = walk_plus_season(rng, 12, 64)
    for r, lead in enumerate([0, 1, 3, 10, 17, 30, 50, 61, 0, 2, 5, 63]):
        x[r, :lead] = np.nan
    x[4, 40] = np.nan
    tok = WaveletTokenizer(level=2, threshold="fdrc")
    ids, mask, state = tok.context_input(x)
    for r in range(12):
        ids_r, mask_r, st_r = tok.context_input(x[r : r + 1])
        np.testing.assert_array_equal(ids[r], ids_r[0])
        np.testing.assert_array_equal(mask[r], mask_r[0])
        assert st_r.loc[0] == state.loc[r] and st_r.scale[0] == state.scale[r]


def test_context_width_not_divisible_keeps_width_and_pads_front():
    x = np.arange(15, dtype=float)[None].repeat(2, axis=0)
    ids, mask, state = WaveletTokenizer().context_input(x)
    assert ids.shape == (2, 16)
    assert np.all(ids[:, 0] == PAD_ID) and not mask[:, 0].any() and mask[:, 1:].all()
    np.testing.assert_array_equal(state.n_tokens, [14, 14])


def test_context_shorter_than_one_block_is_extended_with_its_oldest_value():
    x = np.full((1, 8), np.nan)
    x[0, -1] = 5.0
    tok = WaveletTokenizer(level=2)
    ids, mask, state = tok.context_input(x)
    assert state.n_tokens[0] == 4 and mask[0, 4:].all() and not mask[0, :4].any()
    assert np.all(ids[0, 4:-1] == MIDDLE_ID)  # a constant after extension
    x2 = np.full((1, 8), np.nan)
    x2[0, -2:] = [1.0, 3.0]
    _, _, st2 = tok.context_input(x2)
    assert st2.loc[0] == 2.0 and st2.scale[0] == 1.0  # stats from the observed values only


def test_interior_nans_are_interpolated_before_the_dwt():
    rng = np.random.default_rng(16)
    x = walk_plus_season(rng, 1, 32)[0]
    holed = x.copy()
    holed[[5, 6, 20, 31]] = np.nan
    tok = WaveletTokenizer()
    ids, mask, state = tok.context_input(holed[None])
    assert mask.all()
    obs = ~np.isnan(holed)
    assert state.loc[0] == pytest.approx(holed[obs].mean())
    t = np.arange(32)
    filled = np.interp(t, t[obs], holed[obs])  # linear inside, nearest at the right edge
    expected = tok.quantize(tok.decompose(((filled - state.loc[0]) / state.scale[0])[None]))
    np.testing.assert_array_equal(ids[0, :-1], expected[0])


def test_fill_missing_and_observed_lengths_known_answers():
    x = np.array([[np.nan, 1.0, np.nan, 3.0, np.nan], [4.0, np.nan, np.nan, np.nan, 0.0]])
    np.testing.assert_allclose(fill_missing(x), [[1, 1, 2, 3, 3], [4, 3, 2, 1, 0]])
    np.testing.assert_array_equal(observed_lengths(x), [4, 5])
    assert not np.isnan(fill_missing(x)).any() and np.isnan(x).sum() == 6  # input untouched


def test_location_scale_constant_rows_are_exact():
    x = np.array([[0.1, 0.1, 0.1], [np.nan, 2.0, 4.0]])
    loc, scale = location_scale(x, "standard")
    assert loc[0] == 0.1 and scale[0] == pytest.approx(1e-11, rel=1e-15)
    assert loc[1] == 3.0 and scale[1] == 1.0


def test_target_nans_are_interpolated():
    tok = WaveletTokenizer()
    _, _, state = tok.context_input(np.arange(16, dtype=float)[None])
    y = np.array([[16.0, np.nan, 18.0, 19.0]])
    np.testing.assert_array_equal(
        tok.label_input(y, state), tok.label_input([[16.0, 17.0, 18.0, 19.0]], state)
    )


def test_context_length_truncates_to_the_last_points():
    rng = np.random.default_rng(17)
    x = walk_plus_season(rng, 3, 64)
    tok = WaveletTokenizer(context_length=32)
    ids, mask, state = tok.context_input(x)
    ids_ref, mask_ref, st_ref = WaveletTokenizer().context_input(x[:, -32:])
    assert ids.shape == (3, 33)
    np.testing.assert_array_equal(ids, ids_ref)
    np.testing.assert_array_equal(mask, mask_ref)
    np.testing.assert_array_equal(state.scale, st_ref.scale)


# --------------------------------------------------------------------- interface and errors
def test_protocol_shapes_dtypes_and_special_ids():
    rng = np.random.default_rng(18)
    tok = WaveletTokenizer()
    assert isinstance(tok, ForecastTokenizer)
    assert (tok.pad_id, tok.eos_id, tok.vocab_size) == (0, 1, 1024)
    assert tok.name.startswith("wavelet-bior2.2-J1")
    ids, mask, state = tok.context_input(walk_plus_season(rng, 5, 64))
    assert ids.dtype == np.int64 and mask.dtype == np.bool_ and ids.shape == (5, 65)
    assert np.all(ids[:, -1] == EOS_ID) and mask[:, -1].all()
    assert isinstance(state, TokenizerState) and len(state) == 5
    assert tok.num_target_tokens(64) == 64
    labels = tok.label_input(rng.normal(size=(5, 64)), state)
    assert labels.dtype == np.int64 and labels.shape == (5, 65)
    sampled = rng.integers(0, 1024, size=(5, 20, 64))  # PAD/EOS/1023 included: clamped
    out = tok.output_transform(sampled, state)
    assert out.shape == (5, 20, 64) and out.dtype == np.float64 and np.isfinite(out).all()
    rebuilt = WaveletTokenizer(**tok.get_params())
    assert rebuilt.get_params() == tok.get_params()


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_infinite_values_are_rejected(bad):
    tok = WaveletTokenizer()
    x = np.ones((2, 8))
    x[1, 3] = bad
    with pytest.raises(ValueError, match="inf"):
        tok.context_input(x)
    _, _, state = tok.context_input(np.ones((2, 8)))
    y = np.ones((2, 4))
    y[0, 0] = bad
    with pytest.raises(ValueError, match="target contains ±inf"):
        tok.label_input(y, state)


def test_all_nan_rows_and_bad_shapes_are_rejected():
    tok = WaveletTokenizer()
    x = np.ones((2, 8))
    x[1] = np.nan
    with pytest.raises(ValueError, match="no observed value"):
        tok.context_input(x)
    with pytest.raises(ValueError, match="2-D"):
        tok.context_input(np.ones(8))
    _, _, state = tok.context_input(np.ones((2, 8)))
    with pytest.raises(ValueError, match="3 series but the state holds 2"):
        tok.label_input(np.ones((3, 4)), state)
    with pytest.raises(ValueError, match="3-D"):
        tok.output_transform(np.full((2, 4), 5), state)
    with pytest.raises(ValueError, match="integers"):
        tok.output_transform(np.full((2, 1, 4), 5.0), state)
    with pytest.raises(ValueError, match="at least 2\\^level"):
        WaveletTokenizer(level=3).context_input(np.ones((1, 4)))


def test_horizon_must_be_divisible_by_block():
    tok = WaveletTokenizer(level=3)
    assert tok.num_target_tokens(64) == 64
    with pytest.raises(ValueError, match="not divisible by 2\\^level = 8"):
        tok.num_target_tokens(60)
    _, _, state = tok.context_input(np.ones((1, 16)))
    with pytest.raises(ValueError, match="divisible"):
        tok.label_input(np.ones((1, 12)), state)
    with pytest.raises(ValueError, match="divisible"):
        tok.output_transform(np.full((1, 2, 12), 5), state)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"wavelet": "nope"}, "unknown wavelet"),
        ({"wavelet": "morl"}, "unknown wavelet"),  # continuous wavelet: no DWT
        ({"level": 0}, "level"),
        ({"level": 1.5}, "level"),
        ({"vocab_size": 4}, "vocab_size"),
        ({"limits": (1.0, -1.0)}, "lo < hi"),
        ({"limits": (0.0, 0.0)}, "lo < hi"),
        ({"limits": (-np.inf, 1.0)}, "finite"),
        ({"limits": 3}, "pair"),
        ({"threshold": "soft"}, "threshold"),
        ({"threshold": "fdrc", "threshold_q": 1.5}, "threshold_q"),
        ({"scaling": "robust"}, "scaling"),
        ({"context_length": 1}, "context_length"),
    ],
)
def test_invalid_parameters_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WaveletTokenizer(**kwargs)


def test_state_validation():
    with pytest.raises(ValueError, match="equal length"):
        TokenizerState(loc=np.zeros(2), scale=np.ones(3), n_tokens=np.ones(2))
    with pytest.raises(ValueError, match="positive"):
        TokenizerState(loc=np.zeros(2), scale=np.array([1.0, 0.0]), n_tokens=np.ones(2))


def test_state_subset_decodes_like_the_full_state():
    rng = np.random.default_rng(19)
    tok = WaveletTokenizer()
    _, _, state = tok.context_input(walk_plus_season(rng, 6, 32))
    sampled = rng.integers(2, 1023, size=(6, 3, 16))
    full = tok.output_transform(sampled, state)
    part = state.subset(slice(2, 5))
    assert len(part) == 3
    np.testing.assert_array_equal(tok.output_transform(sampled[2:5], part), full[2:5])
    picked = state.subset(np.array([5, 0]))
    np.testing.assert_array_equal(picked.loc, state.loc[[5, 0]])


def test_arithmetic_quantiser_equals_searchsorted_everywhere():
    """The fast quantiser must agree with searchsorted on edges, centres and their neighbours."""
    for vocab in (16, 1024):
        tok = WaveletTokenizer(vocab_size=vocab)
        probes = np.concatenate([
            tok.edges, tok.centres, np.nextafter(tok.edges, np.inf),
            np.nextafter(tok.edges, -np.inf), [-1e9, 1e9, 0.0, -0.0],
            np.random.default_rng(0).normal(scale=8, size=5000),
        ])
        expected = 2 + np.searchsorted(tok.edges, probes)
        np.testing.assert_array_equal(tok.quantize(probes), expected)
