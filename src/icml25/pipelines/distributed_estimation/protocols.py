"""Communication protocols for a discrete distribution ``p`` on ``A`` symbols, with explicit bits.

Setting: ``m`` terminals hold ``n`` i.i.d. symbols each; terminal
``i`` sends a message ``B_i`` of at most ``l`` bits; the decoder sees only the messages and the
shared seed. Every protocol here returns a :class:`Transcript` — a ``uint8`` bit matrix with the
number of bits each terminal actually serialised — and its decoder reads back only those bits.

Protocols (the inner layer of the layered scheme and the baselines):

- ``bf``: block-frame successive refinement for ``n < A`` (companion paper "Refinement Methods for
  Distributed Distribution Estimation under ℓp-Losses", Yuan–Guo–Huang): frames of
  ``l0 = min(l, ⌈log2(A/n + 1)⌉)`` bits carry the index of a terminal's first sample in a block,
  the decoder inverts the empty rate. ``bf_recursive`` estimates the block masses with half the
  terminals through the same subroutine on the coarser alphabet.
- ``at``: adaptive one-bit thresholds for ``n ≥ A`` (sequentially interactive; noisy bisection,
  Robbins–Monro, Polyak averaging; a Kipnis–Duchi-type one-bit mean estimator).
  ``at_noninteractive`` replaces the adaptive threshold by a shared uniform dither (ablation).
- ``full``: the terminal's data losslessly, when ``l ≥ min(A·⌈log2(n + 1)⌉, n·⌈log2 A⌉)`` (all
  counts, or all samples raw when that is shorter): reproduces the centralised histogram.
- ``centralised`` (no constraint), ``forward`` (raw samples), ``hash1bit`` (one bit per sample
  against a shared random set), ``localquant`` (stochastically quantised local frequencies).

Every protocol's estimate is a probability vector: the decoder's raw output (``Result.p_raw``:
AT, its non-interactive ablation, hashing and local quantisation estimate each symbol on its own
and need not sum to 1 or stay >= 0) is projected in Euclidean norm onto the probability simplex
(:func:`project_simplex`). The truth lies in that convex set, so the projection never increases
the squared ℓ2 error, and a density estimate ``f̂ = K·p̂`` is non-negative and integrates to 1.

With a budget of ``l = 0`` bits no terminal says anything: every bit-limited protocol returns the
uninformed estimate, the uniform distribution, with an empty transcript (:func:`uninformed`).
``centralised`` is the unconstrained oracle and ignores ``l``.

Fast simulation draws each terminal's sufficient statistic exactly (multinomial counts; for BF the
block counts and, by exchangeability, the first sample's symbol from the conditional ``p_s``);
:func:`bf_encode_samples` and :func:`full_encode_samples` are the literal encoders on real samples
used by the tests to confirm the fast path.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from icml25.core.lazy_import import lazy_module

stats = lazy_module("scipy.stats")

SLOT_CHUNK = 4096  # terminals per chunk of shared-random sets (bounds memory at paper scale)


class NotApplicable(ValueError):
    """The protocol cannot run at this (A, n, l): e.g. forwarding with ``l < ⌈log2 A⌉``."""


# ------------------------------------------------------------------------------ bit handling
@dataclass(frozen=True)
class Transcript:
    """The messages of all terminals: ``bits[i, :lengths[i]]`` is terminal i's message."""

    bits: np.ndarray  # (m, L) uint8 in {0, 1}
    lengths: np.ndarray  # (m,) bits actually serialised per terminal

    def __post_init__(self) -> None:
        if self.bits.dtype != np.uint8 or self.bits.ndim != 2:
            raise TypeError("transcript bits must be a 2-D uint8 array")
        if self.bits.size and self.bits.max() > 1:
            raise ValueError("transcript bits must be 0 or 1")
        if self.lengths.shape != (self.bits.shape[0],) or np.any(self.lengths > self.bits.shape[1]):
            raise ValueError("transcript lengths do not match its bit matrix")

    @property
    def max_bits(self) -> int:
        return int(self.lengths.max()) if self.lengths.size else 0

    @property
    def mean_bits(self) -> float:
        return float(self.lengths.mean()) if self.lengths.size else 0.0

    def check_budget(self, l_bits: int) -> None:
        if self.max_bits > l_bits:
            raise AssertionError(f"a message has {self.max_bits} bits > budget l={l_bits}")


def pack_uint(values: np.ndarray, width: int) -> np.ndarray:
    """``(m, F)`` integers in ``[0, 2^width)`` -> ``(m, F·width)`` bits, most significant first."""
    values = np.asarray(values, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() >= 2**width):
        raise ValueError(f"values out of range for {width}-bit fields")
    shifts = np.arange(width - 1, -1, -1)
    bits = (values[..., None] >> shifts) & 1
    return bits.reshape(values.shape[0], -1).astype(np.uint8)


def unpack_uint(bits: np.ndarray, width: int, fields: int) -> np.ndarray:
    """Inverse of :func:`pack_uint` on the first ``fields·width`` bits of each row."""
    b = bits[:, : fields * width].astype(np.int64).reshape(bits.shape[0], fields, width)
    return (b << np.arange(width - 1, -1, -1)).sum(axis=2)


def _transcript(bits: np.ndarray) -> Transcript:
    bits = np.ascontiguousarray(bits, dtype=np.uint8)
    return Transcript(bits, np.full(bits.shape[0], bits.shape[1], dtype=np.int64))


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto ``{p : p >= 0, Σ p = 1}``: ``max(v - τ, 0)`` with the
    one τ that makes it sum to 1 (sort-and-threshold, Held–Wolfe–Crowder 1974)."""
    v = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(v)):
        raise ValueError("estimate contains NaN or inf")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


@dataclass
class Result:
    """A protocol run: the estimate of p (a probability vector), the decoder's raw output
    ``p_raw`` it was projected from, and the transcript it was decoded from."""

    p_hat: np.ndarray
    transcript: Transcript | None  # None: the unconstrained centralised oracle
    sub: str = ""
    p_raw: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.p_raw is None:
            self.p_raw = np.asarray(self.p_hat, dtype=float)
            self.p_hat = project_simplex(self.p_raw)


def uninformed(p: np.ndarray, m: int) -> Result:
    """No bits: the decoder knows only the alphabet, so it outputs the uniform distribution;
    every terminal's message is empty."""
    a = np.asarray(p).size
    tr = Transcript(np.zeros((m, 0), dtype=np.uint8), np.zeros(m, dtype=np.int64))
    return Result(np.full(a, 1.0 / a), tr, sub="uninformed")


def bit_limited(protocol: Callable[..., Result]) -> Callable[..., Result]:
    """A bit-limited protocol: at ``l = 0`` it returns :func:`uninformed` (after the same
    input checks), otherwise it runs."""
    @functools.wraps(protocol)
    def run(p, m, n, l_bits, rng, **kwargs) -> Result:
        if l_bits == 0:
            return uninformed(_check(p, m, n, l_bits), m)
        return protocol(p, m, n, l_bits, rng, **kwargs)
    return run


def _check(p: np.ndarray, m: int, n: int, l_bits: int) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or p.size < 2:
        raise ValueError(f"p must be a 1-D distribution on >= 2 symbols, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0 or abs(p.sum() - 1) > 1e-9:
        raise ValueError("p must be a finite probability vector summing to 1")
    if m < 1 or n < 1:
        raise ValueError(f"need m >= 1 terminals and n >= 1 samples, got m={m}, n={n}")
    if l_bits < 0:
        raise ValueError(f"bit budget l must be >= 0, got {l_bits}")
    return p


def terminal_counts(p: np.ndarray, groups: np.ndarray, n: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Exact joint counts of each terminal's n samples in its symbol groups (+ the rest).

    ``groups[i]`` lists disjoint symbol sets as a probability matrix row ``(m, G)``; the result
    is ``(m, G)`` counts (the 'rest' column dropped): one multinomial per terminal.
    """
    rest = np.clip(1.0 - groups.sum(axis=1, keepdims=True), 0.0, 1.0)
    probs = np.concatenate([groups, rest], axis=1)
    probs /= probs.sum(axis=1, keepdims=True)
    return rng.multinomial(n, probs)[:, :-1]


# ---------------------------------------------------------------------------- centralised, FULL
def centralised(p, m, n, l_bits, rng, **_) -> Result:
    """The unconstrained oracle: the histogram of all ``m·n`` samples."""
    p = _check(p, m, n, max(l_bits, 0))
    counts = rng.multinomial(m * n, p)
    return Result(counts / (m * n), None)


def count_bits(a: int, n: int) -> int:
    """Bits to send all A counts of n samples, ``A·⌈log2(n+1)⌉``."""
    return a * math.ceil(math.log2(n + 1))


def raw_bits(a: int, n: int) -> int:
    """Bits to send all n samples raw, ``n·⌈log2 A⌉``."""
    return n * max(1, math.ceil(math.log2(a)))


def full_bits_needed(a: int, n: int) -> int:
    """Bits for a lossless message of the terminal's data: the shorter of counts or raw samples."""
    return min(count_bits(a, n), raw_bits(a, n))


def full_encode_counts(counts: np.ndarray, n: int) -> Transcript:
    """Each terminal sends its A counts with ``⌈log2(n+1)⌉`` bits each."""
    return _transcript(pack_uint(counts, math.ceil(math.log2(n + 1))))


def full_encode_samples(symbols: np.ndarray, a: int) -> Transcript:
    """Literal FULL encoder on real samples ``(m, n)``: counts or raw samples, whichever is
    shorter (the decoder knows which from A and n)."""
    n = symbols.shape[1]
    if raw_bits(a, n) < count_bits(a, n):
        return _transcript(pack_uint(symbols, max(1, math.ceil(math.log2(a)))))
    counts = np.stack([np.bincount(row, minlength=a) for row in symbols])
    return full_encode_counts(counts, n)


def full_decode(tr: Transcript, a: int, m: int, n: int) -> np.ndarray:
    if raw_bits(a, n) < count_bits(a, n):
        symbols = unpack_uint(tr.bits, max(1, math.ceil(math.log2(a))), n)
        if symbols.max() >= a:
            raise ValueError("FULL frame decodes to a symbol outside the alphabet")
        return np.bincount(symbols.ravel(), minlength=a) / (m * n)
    counts = unpack_uint(tr.bits, math.ceil(math.log2(n + 1)), a)
    return counts.sum(axis=0) / (m * n)


@bit_limited
def full(p, m, n, l_bits, rng, **_) -> Result:
    """FULL: every terminal sends its data losslessly (the centralised histogram)."""
    p = _check(p, m, n, l_bits)
    if l_bits < full_bits_needed(p.size, n):
        raise NotApplicable(f"full needs l >= {full_bits_needed(p.size, n)}")
    if raw_bits(p.size, n) < count_bits(p.size, n):
        tr = full_encode_samples(rng.choice(p.size, size=(m, n), p=p), p.size)
    else:
        tr = full_encode_counts(rng.multinomial(n, np.broadcast_to(p, (m, p.size))), n)
    return Result(full_decode(tr, p.size, m, n), tr)


# ----------------------------------------------------------------------------------------- BF
@dataclass(frozen=True)
class BFLayout:
    """Frame length l0, block size b = 2^l0 - 1, t blocks, n0 frames per terminal."""

    a: int
    l0: int
    b: int
    t: int
    n0: int

    @classmethod
    def of(cls, a: int, n: int, l_bits: int) -> BFLayout:
        l0 = min(l_bits, math.ceil(math.log2(a / n + 1)))
        b = 2**l0 - 1
        t = math.ceil(a / b)
        return cls(a, l0, b, t, min(l_bits // l0, t))

    def blocks(self, m: int) -> np.ndarray:
        """``(m, n0)``: frame r of terminal i covers block ``(i·n0 + r) mod t``."""
        return (np.arange(m)[:, None] * self.n0 + np.arange(self.n0)[None, :]) % self.t

    def block_mass(self, p: np.ndarray) -> np.ndarray:
        return np.add.reduceat(p, np.arange(0, self.a, self.b))


def bf_encode_samples(symbols: np.ndarray, layout: BFLayout) -> Transcript:
    """Literal BF encoder: per frame, the index (1..b) of the first sample in its block, or 0."""
    m = symbols.shape[0]
    blocks = layout.blocks(m)
    sample_block = symbols // layout.b
    frames = np.zeros((m, layout.n0), dtype=np.int64)
    for r in range(layout.n0):
        hit = sample_block == blocks[:, r : r + 1]
        first = hit.argmax(axis=1)
        any_hit = hit.any(axis=1)
        idx = symbols[np.arange(m), first] - blocks[:, r] * layout.b + 1
        frames[:, r] = np.where(any_hit, idx, 0)
    return _transcript(pack_uint(frames, layout.l0))


def bf_encode_fast(p: np.ndarray, m: int, n: int, layout: BFLayout,
                   rng: np.random.Generator) -> Transcript:
    """The same frames drawn exactly without samples: block counts are multinomial per terminal,
    and the first sample inside a non-empty block has law ``p_s`` (exchangeability)."""
    blocks = layout.blocks(m)
    mass = layout.block_mass(p)
    counts = terminal_counts(p, mass[blocks], n, rng)
    hit = counts > 0
    cum = np.concatenate([[0.0], np.cumsum(p)])
    s = blocks[hit]
    start = s * layout.b
    stop = np.minimum(start + layout.b, layout.a)
    target = cum[start] + rng.random(s.size) * (cum[stop] - cum[start])
    sym = np.clip(np.searchsorted(cum, target, side="right") - 1, start, stop - 1)
    frames = np.zeros(blocks.shape, dtype=np.int64)
    frames[hit] = sym - start + 1
    return _transcript(pack_uint(frames, layout.l0))


def bf_block_statistics(tr: Transcript, layout: BFLayout, m: int,
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per block: frames N_s, non-empty frames N'_s, and per-symbol first-sample counts."""
    frames = unpack_uint(tr.bits, layout.l0, layout.n0)
    blocks = layout.blocks(m)
    n_frames = np.bincount(blocks.ravel(), minlength=layout.t)
    hit = frames > 0
    n_hit = np.bincount(blocks[hit], minlength=layout.t)
    sym = blocks[hit] * layout.b + frames[hit] - 1
    if sym.size and sym.max() >= layout.a:
        raise ValueError("BF frame decodes to a symbol outside the alphabet")
    sym_counts = np.bincount(sym, minlength=layout.a).astype(float)
    return n_frames, n_hit, sym_counts


def _within_block(layout: BFLayout, n_hit: np.ndarray, sym_counts: np.ndarray) -> np.ndarray:
    """``p̂_s(w)``: first-sample frequencies in block s (uniform on a block never seen)."""
    block_of = np.arange(layout.a) // layout.b
    sizes = np.bincount(block_of, minlength=layout.t)
    denom = n_hit[block_of].astype(float)
    return np.where(denom > 0, sym_counts / np.maximum(denom, 1), 1.0 / sizes[block_of])


def bf_block_mass_estimate(n_frames: np.ndarray, n_hit: np.ndarray, n: int) -> np.ndarray:
    """``P̂_s = 1 - (1 - N'_s/N_s)^{1/n}``, the empty-rate inversion (rate clamped at 1 - 1/(2N_s))."""
    nf = np.maximum(n_frames, 1).astype(float)
    rate = np.minimum(n_hit / nf, 1.0 - 1.0 / (2.0 * nf))
    return np.where(n_frames > 0, 1.0 - (1.0 - rate) ** (1.0 / n), 0.0)


def _normalise(p_hat: np.ndarray) -> np.ndarray:
    total = p_hat.sum()
    return p_hat / total if total > 0 else np.full(p_hat.size, 1.0 / p_hat.size)


def bf_decode(tr: Transcript, layout: BFLayout, m: int, n: int) -> np.ndarray:
    """BF decoder: ``p̂(w) = P̂_s · p̂_s(w)``, renormalised."""
    n_frames, n_hit, sym_counts = bf_block_statistics(tr, layout, m)
    mass = bf_block_mass_estimate(n_frames, n_hit, n)
    block_of = np.arange(layout.a) // layout.b
    return _normalise(mass[block_of] * _within_block(layout, n_hit, sym_counts))


@bit_limited
def bf(p, m, n, l_bits, rng, **_) -> Result:
    p = _check(p, m, n, l_bits)
    layout = BFLayout.of(p.size, n, l_bits)
    tr = bf_encode_fast(p, m, n, layout, rng)
    return Result(bf_decode(tr, layout, m, n), tr)


@bit_limited
def bf_recursive(p, m, n, l_bits, rng, **_) -> Result:
    """BF whose block masses come from the first half of the terminals running the same
    subroutine (recursively) on the coarse alphabet of blocks; the second half gives ``p̂_s``."""
    p = _check(p, m, n, l_bits)
    layout = BFLayout.of(p.size, n, l_bits)
    if layout.t == 1 or layout.b == 1 or m < 2:
        # one block (frames are direct samples) or single-symbol blocks (the coarse alphabet
        # would be the alphabet itself): nothing to refine, plain BF
        return bf(p, m, n, l_bits, rng)
    m1 = m // 2
    coarse = bf_recursive(_normalise(layout.block_mass(p)), m1, n, l_bits, rng)
    tr2 = bf_encode_fast(p, m - m1, n, layout, rng)
    _, n_hit, sym_counts = bf_block_statistics(tr2, layout, m - m1)
    block_of = np.arange(layout.a) // layout.b
    p_hat = _normalise(coarse.p_hat[block_of] * _within_block(layout, n_hit, sym_counts))
    width = max(coarse.transcript.bits.shape[1], tr2.bits.shape[1])
    bits = np.zeros((m, width), dtype=np.uint8)
    bits[:m1, : coarse.transcript.bits.shape[1]] = coarse.transcript.bits
    bits[m1:, : tr2.bits.shape[1]] = tr2.bits
    lengths = np.concatenate([coarse.transcript.lengths, tr2.lengths])
    return Result(p_hat, Transcript(bits, lengths))


# ----------------------------------------------------------------------------------------- AT
def at_encode_bit(count: np.ndarray, n: int, threshold: np.ndarray,
                  dither: np.ndarray) -> np.ndarray:
    """AT encoder of one terminal and bin: ``1{(N_ij + U_ij)/n > threshold}``.

    It sees only the terminal's own count, its own private uniform ``U_ij`` (which makes the
    count continuous, so the bit's mean is a continuous, invertible function of the threshold),
    n and the threshold the decoder broadcast; nothing of any other terminal (sequential
    interaction, as the paper's model allows).
    """
    return ((np.asarray(count) + np.asarray(dither)) / n > np.asarray(threshold)).astype(np.uint8)


def dithered_binomial_median(q: np.ndarray, n: int) -> np.ndarray:
    """``g(q)``: the median of ``(Bin(n, q) + U)/n`` with ``U ~ U[0, 1)``, exactly.

    With k the smallest count with ``P(N <= k) >= 1/2``, the median is
    ``(k + (1/2 - P(N <= k - 1))/P(N = k))/n``. RM tracks this median, not the mean q; the
    decoder inverts g (strictly increasing in q), which removes the discreteness bias that a
    count of a few samples per bin would otherwise leave.
    """
    q = np.clip(np.asarray(q, float), 0.0, 1.0)
    k = stats.binom.ppf(0.5, n, q)
    below = np.where(k > 0, stats.binom.cdf(k - 1, n, q), 0.0)
    mass = stats.binom.pmf(k, n, q)
    return (k + (0.5 - below) / np.maximum(mass, 1e-300)) / n


@functools.lru_cache(maxsize=256)
def _median_table(n: int, top: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    grid = np.linspace(0.0, top, points)
    return grid, np.maximum.accumulate(dithered_binomial_median(grid, n))


def invert_median(theta: np.ndarray, n: int, width: float, points: int = 4097) -> np.ndarray:
    """``q̂ = g^{-1}(θ)`` by monotone interpolation of g on ``[0, min(width, 1)]``."""
    grid, g = _median_table(int(n), float(min(width, 1.0)), points)
    return np.interp(theta, g, grid)


class ATState:
    """The decoder's state for all A bins at once, advanced one round at a time.

    Round r asks the r-th terminal assigned to each bin for one bit. Rounds ``r < n_bisect`` run a
    noisy bisection of ``[0, width]``; then Robbins–Monro
    ``θ ← θ + sqrt(2π)·σ̂/t·(bit - 1/2)``, ``σ̂ = sqrt(θ(1-θ)/n)`` (t = 1, 2, ... counts RM steps);
    the estimate is the Polyak average of θ over the second half of the RM steps.
    """

    def __init__(self, a: int, rounds: np.ndarray, n: int, width: float) -> None:
        self.a, self.n, self.width = a, n, width
        self.rounds = rounds  # per bin, how many terminals it gets
        sigma_up = math.sqrt(width / n)
        n_bisect = max(0, math.ceil(math.log2(width / (2 * sigma_up)))) if width > 0 else 0
        self.n_bisect = np.minimum(n_bisect, rounds // 4)
        self.lo = np.zeros(a)
        self.hi = np.full(a, width)
        self.theta = np.full(a, width / 2)
        self.half = (rounds - self.n_bisect) // 2
        self.sum = np.zeros(a)
        self.cnt = np.zeros(a)
        self.r = 0

    def thresholds(self, active: np.ndarray) -> np.ndarray:
        """The broadcast threshold of round r for the active bins."""
        bis = self.r < self.n_bisect[active]
        mid = 0.5 * (self.lo[active] + self.hi[active])
        return np.where(bis, mid, self.theta[active])

    def update(self, active: np.ndarray, bits: np.ndarray) -> None:
        r, th = self.r, self.thresholds(active)
        bis = r < self.n_bisect[active]
        up = bits.astype(bool)
        j = active[bis]
        self.lo[j] = np.where(up[bis], th[bis], self.lo[j])
        self.hi[j] = np.where(up[bis], self.hi[j], th[bis])
        self.theta[j] = 0.5 * (self.lo[j] + self.hi[j])
        k = active[~bis]
        if k.size:
            t = r - self.n_bisect[k] + 1
            th_c = np.clip(self.theta[k], 1e-3 * self.width, 1 - 1e-9)
            sigma = np.sqrt(th_c * (1 - th_c) / self.n)
            step = math.sqrt(2 * math.pi) * sigma / t * (up[~bis].astype(float) - 0.5)
            self.theta[k] = np.clip(self.theta[k] + step, 0.0, self.width)
            late = t > self.half[k]
            self.sum[k[late]] += self.theta[k[late]]
            self.cnt[k[late]] += 1
        self.r += 1

    def estimate(self) -> np.ndarray:
        return np.where(self.cnt > 0, self.sum / np.maximum(self.cnt, 1), self.theta)


def slot_layout(a: int, m: int, c: int) -> tuple[int, np.ndarray]:
    """Round-robin slots ``q = i·c + u`` (terminal i, its u-th bin ``q mod A``); rounds per bin."""
    total = m * c
    rounds = np.array([(total - j + a - 1) // a if j < total else 0 for j in range(a)])
    return total, rounds


def at_run(counts: np.ndarray, dither: np.ndarray, n: int, a: int, m: int, c: int,
           width: float, encoder: Callable = at_encode_bit) -> tuple[np.ndarray, np.ndarray]:
    """Run the sequential AT session; ``counts[q]``/``dither[q]`` are slot q's own count and
    private uniform. Returns the slot bits and the estimate. ``encoder(count, n, threshold,
    dither)`` is called once per round with the terminals of that round only."""
    total, rounds = slot_layout(a, m, c)
    state = ATState(a, rounds, n, width + 1.0 / n)  # the dithered median lies below q + 1/n
    bits = np.zeros(total, dtype=np.uint8)
    for start in range(0, total, a):
        stop = min(start + a, total)
        active = np.arange(stop - start)
        th = state.thresholds(active)
        bits[start:stop] = encoder(counts[start:stop], n, th, dither[start:stop])
        state.update(active, bits[start:stop])
    return bits, invert_median(state.estimate(), n, width)


def at_decode(tr: Transcript, n: int, a: int, m: int, c: int, width: float) -> np.ndarray:
    """Replay the decoder from the transcript alone (it must give the session's estimate)."""
    bits = tr.bits[:, :c].reshape(-1)
    total, rounds = slot_layout(a, m, c)
    state = ATState(a, rounds, n, width + 1.0 / n)  # the dithered median lies below q + 1/n
    for start in range(0, total, a):
        stop = min(start + a, total)
        state.update(np.arange(stop - start), bits[start:stop])
    return invert_median(state.estimate(), n, width)


def _slot_counts(p: np.ndarray, m: int, n: int, c: int, rng: np.random.Generator) -> np.ndarray:
    """Each terminal's exact counts in its c round-robin bins, flattened by slot ``q = i·c + u``."""
    bins = (np.arange(m)[:, None] * c + np.arange(c)[None, :]) % p.size
    return terminal_counts(p, p[bins], n, rng).reshape(-1)


@bit_limited
def at(p, m, n, l_bits, rng, p_bound=None, width_factor=3.0, **_) -> Result:
    p = _check(p, m, n, l_bits)
    c = min(l_bits, p.size)
    width = width_factor * (p_bound if p_bound is not None else float(p.max()))
    counts = _slot_counts(p, m, n, c, rng)
    bits, est = at_run(counts, rng.random(counts.size), n, p.size, m, c, width)
    return Result(est, _transcript(bits.reshape(m, c)))


@bit_limited
def at_noninteractive(p, m, n, l_bits, rng, p_bound=None, width_factor=3.0, shared_seed=0,
                      **_) -> Result:
    """Ablation: the threshold is a shared uniform dither on [0, width], fixed in advance."""
    p = _check(p, m, n, l_bits)
    c = min(l_bits, p.size)
    width = width_factor * (p_bound if p_bound is not None else float(p.max()))
    counts = _slot_counts(p, m, n, c, rng)
    dither = np.random.default_rng(shared_seed).random(m * c) * width
    bits = (counts / n > dither).astype(np.uint8)
    tr = _transcript(bits.reshape(m, c))
    ones = np.bincount(np.arange(m * c) % p.size, weights=tr.bits.reshape(-1), minlength=p.size)
    seen = np.bincount(np.arange(m * c) % p.size, minlength=p.size)
    est = np.where(seen > 0, width * ones / np.maximum(seen, 1), 0.0)
    return Result(est, tr)


# ---------------------------------------------------------------------------------- baselines
@bit_limited
def forward(p, m, n, l_bits, rng, **_) -> Result:
    """Sample forwarding: ``⌊l/⌈log2 A⌉⌋`` raw samples per terminal (at most n)."""
    p = _check(p, m, n, l_bits)
    width = max(1, math.ceil(math.log2(p.size)))
    k = min(n, l_bits // width)
    if k == 0:
        raise NotApplicable(f"forward needs l >= ⌈log2 A⌉ = {width}")
    symbols = rng.choice(p.size, size=(m, k), p=p)
    tr = _transcript(pack_uint(symbols, width))
    decoded = unpack_uint(tr.bits, width, k)
    if decoded.max() >= p.size:
        raise ValueError("forwarded symbol outside the alphabet")
    return Result(np.bincount(decoded.ravel(), minlength=p.size) / (m * k), tr)


def _shared_sets(shared_seed: int, chunk: int, rows: int, a: int) -> np.ndarray:
    """Shared random sets S (each symbol in S independently w.p. 1/2), one per message."""
    rng = np.random.default_rng([shared_seed, chunk])
    return rng.integers(0, 2, size=(rows, a), dtype=np.int8)


@bit_limited
def hash1bit(p, m, n, l_bits, rng, shared_seed=0, **_) -> Result:
    """One bit per sample for the first ``min(n, l)`` samples: ``1{X ∈ S}``; unbiased decoder
    ``p̂_j = mean[(2·1{j ∈ S} - 1)(2·bit - 1)]`` (S includes each symbol independently, w.p. 1/2)."""
    p = _check(p, m, n, l_bits)
    k = min(n, l_bits)
    symbols = rng.choice(p.size, size=m * k, p=p)
    bits = np.empty(m * k, dtype=np.uint8)
    rows = SLOT_CHUNK * k
    for chunk, start in enumerate(range(0, m * k, rows)):
        sets = _shared_sets(shared_seed, chunk, min(rows, m * k - start), p.size)
        x = symbols[start : start + sets.shape[0]]
        bits[start : start + sets.shape[0]] = sets[np.arange(x.size), x]
    tr = _transcript(bits.reshape(m, k))
    return Result(hash1bit_decode(tr, p.size, shared_seed), tr)


def hash1bit_decode(tr: Transcript, a: int, shared_seed: int) -> np.ndarray:
    bits = tr.bits.reshape(-1).astype(float)
    total = np.zeros(a)
    rows = SLOT_CHUNK * tr.bits.shape[1]
    for chunk, start in enumerate(range(0, bits.size, rows)):
        sets = _shared_sets(shared_seed, chunk, min(rows, bits.size - start), a)
        sign = 2.0 * bits[start : start + sets.shape[0]] - 1.0
        total += sign @ (2.0 * sets - 1.0)
    return total / bits.size


@bit_limited
def localquant(p, m, n, l_bits, rng, p_bound=None, width_factor=3.0, quant_bits=2,
               **_) -> Result:
    """Local frequencies of ``⌊l/b⌋`` round-robin bins, each sent with b-bit unbiased stochastic
    quantisation on ``[0, q_max]`` (``q_max`` = the AT search width); the decoder averages."""
    p = _check(p, m, n, l_bits)
    b = min(quant_bits, l_bits)
    c = min(l_bits // b, p.size)
    q_max = width_factor * (p_bound if p_bound is not None else float(p.max()))
    counts = _slot_counts(p, m, n, c, rng)
    levels = 2**b - 1
    scaled = np.clip(counts / n, 0.0, q_max) / q_max * levels
    low = np.floor(scaled)
    q = (low + (rng.random(scaled.size) < scaled - low)).astype(np.int64)
    q = np.minimum(q, levels)
    tr = _transcript(pack_uint(q.reshape(m * c, 1), b).reshape(m, c * b))
    values = unpack_uint(tr.bits, b, c).reshape(-1) * q_max / levels
    slot_bin = np.arange(m * c) % p.size
    seen = np.bincount(slot_bin, minlength=p.size)
    est = np.bincount(slot_bin, weights=values, minlength=p.size) / np.maximum(seen, 1)
    return Result(est, tr)


PROTOCOLS: dict[str, Callable[..., Result]] = {
    "centralised": centralised, "full": full, "bf": bf, "bf_recursive": bf_recursive,
    "at": at, "at_noninteractive": at_noninteractive, "forward": forward,
    "hash1bit": hash1bit, "localquant": localquant,
}


def layered_choice(a: int, n: int, l_bits: int) -> str:
    """The layered protocol's inner layer by regime: nothing to decode at ``l = 0``
    (``uninformed``), FULL if every count fits, BF if n < A, else AT."""
    if l_bits == 0:
        return "uninformed"
    if l_bits >= full_bits_needed(a, n):
        return "full"
    return "bf" if n < a else "at"
