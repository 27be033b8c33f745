"""Protocols: bit budgets, exactness of FULL, BF and AT accuracy, hashing, fast vs literal."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from icml25.pipelines.distributed_estimation import protocols as P


def _dirichlet(a: int, seed: int) -> np.ndarray:
    p = np.random.default_rng(seed).dirichlet(np.full(a, 5.0))
    return p / p.sum()


def test_pack_unpack_roundtrip():
    rng = np.random.default_rng(0)
    vals = rng.integers(0, 8, size=(5, 3))
    bits = P.pack_uint(vals, 3)
    assert bits.shape == (5, 9) and bits.dtype == np.uint8 and set(np.unique(bits)) <= {0, 1}
    assert np.array_equal(P.unpack_uint(bits, 3, 3), vals)
    with pytest.raises(ValueError):
        P.pack_uint(np.array([[8]]), 3)


@pytest.mark.parametrize("case", range(12))
def test_every_message_fits_the_budget(case):
    rng = np.random.default_rng(case)
    m = int(rng.integers(1, 300))
    n = int(2 ** rng.integers(0, 10))
    a = int(2 ** rng.integers(1, 8))
    l_bits = int(rng.integers(0, 9))  # l = 0 included: an empty message
    p = _dirichlet(a, case)
    for name, protocol in P.PROTOCOLS.items():
        if name == "centralised":
            continue
        try:
            res = protocol(p, m, n, l_bits, np.random.default_rng(case), p_bound=p.max())
        except P.NotApplicable:
            continue
        tr = res.transcript
        assert tr.bits.dtype == np.uint8 and tr.bits.shape[0] == m, name
        assert tr.max_bits <= l_bits, (name, tr.max_bits, l_bits)
        assert np.all(np.isfinite(res.p_hat)), name


def test_budget_violation_is_detected():
    tr = P.Transcript(np.ones((2, 5), dtype=np.uint8), np.array([5, 3]))
    with pytest.raises(AssertionError, match="budget"):
        tr.check_budget(4)


@pytest.mark.parametrize("a,n,encoding", [(4, 7, "counts"), (16, 2, "raw"), (2, 1, "raw")])
def test_full_reproduces_centralised_histogram_on_the_same_samples(a, n, encoding):
    rng = np.random.default_rng(4)
    m = 50
    symbols = rng.integers(0, a, size=(m, n))
    tr = P.full_encode_samples(symbols, a)
    counts_bits = a * math.ceil(math.log2(n + 1))
    raw_bits = n * max(1, math.ceil(math.log2(a)))
    assert tr.max_bits == P.full_bits_needed(a, n) == min(counts_bits, raw_bits)
    assert tr.max_bits == (counts_bits if encoding == "counts" else raw_bits)
    central = np.bincount(symbols.ravel(), minlength=a) / (m * n)
    assert np.array_equal(P.full_decode(tr, a, m, n), central)


def test_bf_sparse_uniform_unbiased_and_at_its_rate():
    a, n, l_bits, m, reps = 64, 2, 3, 20_000, 40
    p = np.full(a, 1 / a)
    est = np.stack([P.bf(p, m, n, l_bits, np.random.default_rng(r)).p_hat for r in range(reps)])
    se = est.std(axis=0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(est.mean(axis=0) - p) < 3 * se + 1e-12)
    risk = np.mean(np.sum((est - p) ** 2, axis=1))
    rate = a / (m * n * 2**l_bits)
    assert rate / 2 <= risk <= 2 * rate


def test_at_one_bin_variance_is_near_the_one_bit_efficiency():
    # R independent sessions at once (one "bin" each), M terminals per session
    q, n, M, R = 1 / 32, 4096, 2000, 200
    rng = np.random.default_rng(5)
    counts = rng.binomial(n, q, size=M * R)
    _bits, est = P.at_run(counts, rng.random(M * R), n, R, M * R, 1, 3 * q)
    ratio = est.var(ddof=1) / (q * (1 - q) / (n * M))
    assert 1.0 <= ratio <= 2.5
    assert abs(est.mean() - q) < 3 * est.std(ddof=1) / np.sqrt(R)


def test_at_decoder_replays_from_the_transcript_alone():
    p = _dirichlet(8, 6)
    res = P.at(p, 500, 64, 3, np.random.default_rng(6), p_bound=p.max())
    again = P.at_decode(res.transcript, 64, 8, 500, 3, 3 * p.max())
    assert np.array_equal(res.p_raw, again)
    assert np.array_equal(res.p_hat, P.project_simplex(again))


def test_at_encoder_sees_only_its_own_data():
    # signature: own count, n, the broadcast threshold and its own private dither; nothing else
    assert list(inspect.signature(P.at_encode_bit).parameters) == [
        "count", "n", "threshold", "dither"]
    rng = np.random.default_rng(7)
    a, m, c, n = 4, 40, 2, 32
    counts = rng.binomial(n, 0.25, size=m * c)
    dither = rng.random(m * c)
    bits, _ = P.at_run(counts, dither, n, a, m, c, 1.0)
    # mutate one slot: every earlier bit (earlier rounds and the same round) is unchanged
    for slot in (9, 30, 61):
        changed = counts.copy()
        changed[slot] = n - changed[slot]
        bits2, _ = P.at_run(changed, dither, n, a, m, c, 1.0)
        assert np.array_equal(bits[:slot], bits2[:slot])
        same_round = np.arange((slot // a) * a, min((slot // a + 1) * a, m * c))
        others = same_round[same_round != slot]
        assert np.array_equal(bits[others], bits2[others])


def test_dithered_median_inversion_is_exact_on_its_grid():
    n = 16
    q = np.array([0.01, 0.05, 0.2, 0.5])
    assert np.allclose(P.invert_median(P.dithered_binomial_median(q, n), n, 1.0), q, atol=1e-3)


def test_hash1bit_decoder_is_unbiased():
    p = _dirichlet(16, 8)
    reps = 60
    # the decoder's raw output is unbiased (the reported estimate is its simplex projection)
    est = np.stack([P.hash1bit(p, 800, 4, 2, np.random.default_rng(r), shared_seed=r).p_raw
                    for r in range(reps)])
    se = est.std(axis=0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(est.mean(axis=0) - p) < 3.5 * se)


def test_bf_fast_simulator_matches_literal_encoder():
    a, n, l_bits, m, reps = 12, 2, 2, 150, 200
    p = _dirichlet(a, 9)
    layout = P.BFLayout.of(a, n, l_bits)
    fast, slow = [], []
    for r in range(reps):
        rng = np.random.default_rng(1000 + r)
        fast.append(P.bf_decode(P.bf_encode_fast(p, m, n, layout, rng), layout, m, n))
        symbols = rng.choice(a, size=(m, n), p=p)
        slow.append(P.bf_decode(P.bf_encode_samples(symbols, layout), layout, m, n))
    fast, slow = np.array(fast), np.array(slow)
    se_mean = np.sqrt(fast.var(axis=0, ddof=1) / reps + slow.var(axis=0, ddof=1) / reps)
    assert np.all(np.abs(fast.mean(axis=0) - slow.mean(axis=0)) < 3 * se_mean + 1e-12)
    v_f, v_s = fast.var(axis=0, ddof=1), slow.var(axis=0, ddof=1)
    se_var = np.sqrt(2 / (reps - 1) * (v_f**2 + v_s**2))
    assert np.all(np.abs(v_f - v_s) < 3 * se_var + 1e-12)


def test_bf_recursive_is_consistent():
    p = _dirichlet(32, 10)
    res = P.bf_recursive(p, 40_000, 2, 3, np.random.default_rng(11))
    assert res.transcript.max_bits <= 3
    assert np.sum((res.p_hat - p) ** 2) < 5 * np.sum((p - 1 / 32) ** 2) + 1e-3
    assert res.p_hat.sum() == pytest.approx(1.0)


def test_forward_needs_enough_bits_and_protocols_refuse_bad_input():
    p = _dirichlet(16, 12)
    with pytest.raises(P.NotApplicable):
        P.forward(p, 10, 4, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="l must be >= 0"):
        P.bf(p, 10, 4, -1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="probability"):
        P.at(np.array([0.5, np.nan]), 10, 4, 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="1-D"):
        P.hash1bit(np.ones((2, 2)) / 4, 10, 4, 1, np.random.default_rng(0))


def test_layered_choice_by_regime():
    assert P.layered_choice(64, 2, 3) == "bf"
    assert P.layered_choice(8, 256, 2) == "at"
    assert P.layered_choice(2, 3, 4) == "full"
    assert P.layered_choice(64, 2, 0) == "uninformed"


def test_at_fast_counts_match_literal_samples():
    a, n, l_bits, m, reps = 4, 16, 2, 120, 200
    p = _dirichlet(a, 13)
    c = min(l_bits, a)
    slot_bin = (np.arange(m)[:, None] * c + np.arange(c)[None, :]) % a
    fast, slow = [], []
    for r in range(reps):
        rng = np.random.default_rng(2000 + r)
        counts = P._slot_counts(p, m, n, c, rng)
        fast.append(P.at_run(counts, rng.random(m * c), n, a, m, c, 3 * p.max())[1])
        symbols = rng.choice(a, size=(m, n), p=p)
        literal = (symbols[:, None, :] == slot_bin[:, :, None]).sum(axis=2).reshape(-1)
        slow.append(P.at_run(literal, rng.random(m * c), n, a, m, c, 3 * p.max())[1])
    fast, slow = np.array(fast), np.array(slow)
    se_mean = np.sqrt(fast.var(axis=0, ddof=1) / reps + slow.var(axis=0, ddof=1) / reps)
    assert np.all(np.abs(fast.mean(axis=0) - slow.mean(axis=0)) < 3 * se_mean)
    v_f, v_s = fast.var(axis=0, ddof=1), slow.var(axis=0, ddof=1)
    assert np.all(np.abs(v_f - v_s) < 3 * np.sqrt(2 / (reps - 1) * (v_f**2 + v_s**2)))
