"""WaveToken's wavelet tokenizer: scale -> DWT -> threshold details -> uniform quantiser.

Implements the tokenizer of Masserano et al. (ICML 2025, arXiv 2412.05244, Sec. 3;
docs/papers/wavetoken.md, "The method"): steps 1 (scaling), 2 (maximally decimated DWT, ``periodization``),
3 (thresholding of detail coefficients: VisuShrink, FDRC = the paper's Algorithm 1, CDF),
4 (uniform quantiser with V - 3 centres, 0 a centre), 5 (sequences, short contexts, missing
values) and the decoding half of step 6 (dequantise, inverse DWT, unscale).

Coefficient order is pywt's, coarse to fine: ``[a_J, d_J, ..., d_1]``. Context and forecast
window are transformed separately with the context's location and scale.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pywt
from scipy.stats import norm

from icml25.pipelines.wavetoken.tokenizer import (
    EOS_ID,
    N_SPECIAL_TOKENS,
    PAD_ID,
    BoolArray,
    FloatArray,
    IntArray,
    TokenizerState,
    append_eos,
    as_float_matrix,
    check_ids,
    check_limits,
    fill_missing,
    interpolate_gaps,
    location_scale,
    observed_lengths,
    standard_location_scale,
)

THRESHOLDS = ("none", "visushrink", "fdrc", "cdf")
DEFAULT_THRESHOLD_Q = {"fdrc": 0.05, "cdf": 0.2}
"""Defaults of ``threshold_q`` per rule (step 3; neither is given by the paper)."""
MAD_TO_SIGMA = 0.6745
"""Median of |N(0, 1)| (Donoho & Johnstone's MAD noise estimate: sigma = median|d_1| / 0.6745)."""


def mad_sigma(finest_details: npt.ArrayLike) -> FloatArray:
    """Noise level sigma-hat = median(|d_1|) / 0.6745 along the last axis.

    ``finest_details`` are the finest-level detail coefficients d_1 [..., m] (step 3). Returns shape ``[...]`` (a 0-d input row gives a numpy scalar).
    """
    d = np.asarray(finest_details, dtype=np.float64)
    if d.ndim == 0 or d.shape[-1] == 0:
        raise ValueError("finest_details must have at least one coefficient on its last axis")
    return (np.median(np.abs(d), axis=-1) / MAD_TO_SIGMA)[()]


def visushrink_threshold(finest_details: npt.ArrayLike, n: int) -> FloatArray:
    """VisuShrink universal threshold lambda = sigma-hat * sqrt(2 ln n) (step 3).

    Args:
        finest_details: finest-level details d_1 [..., m], used for sigma-hat (:func:`mad_sigma`).
        n: number of samples of the window that was decomposed (Donoho & Johnstone's n).

    Returns:
        lambda with shape ``[...]``; apply with :func:`hard_threshold` to every detail level.
    """
    if int(n) < 2:
        raise ValueError(f"n must be >= 2 for the universal threshold, got {n}")
    return (mad_sigma(finest_details) * np.sqrt(2.0 * np.log(int(n))))[()]


def fdrc_threshold(details: npt.ArrayLike, sigma: npt.ArrayLike, q: float = 0.05) -> FloatArray:
    """False-discovery-rate threshold (the paper's Algorithm 1, step 3).

    For each detail coefficient p = 2 (1 - Phi(|d| / sigma)); with p_(1) <= ... <= p_(m) sorted,
    i0 = max{i : p_(i) <= (i / m) q} and lambda = sigma * Phi^-1(1 - p_(i0) / 2). Since p is a
    decreasing function of |d|, that lambda is exactly the i0-th largest |d|; we return that
    value rather than round-tripping through Phi^-1, which is exact in floating point and does
    not overflow (1 - p/2 rounds to 1 for coefficients beyond ~8 sigma, giving lambda = inf).
    Keeping |d| >= lambda therefore keeps exactly the i0 rejected hypotheses. If no i satisfies
    the rule, lambda = +inf: every detail is zeroed. sigma = 0 treats every non-zero detail as
    significant (p = 0) and every zero detail as noise (p = 1).

    Args:
        details: all detail coefficients of one window [..., m] (every level, concatenated).
        sigma: noise level [...] (usually :func:`mad_sigma` of the finest level), >= 0.
        q: target false discovery rate in (0, 1).

    Returns:
        lambda with shape ``[...]``.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")
    d = np.abs(np.asarray(details, dtype=np.float64))
    if d.ndim == 0 or d.shape[-1] == 0:
        raise ValueError("details must have at least one coefficient on its last axis")
    s = np.asarray(sigma, dtype=np.float64)[..., None]
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("sigma must be finite and >= 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(s > 0, d / np.where(s > 0, s, 1.0), np.where(d > 0, np.inf, 0.0))
    p_sorted = np.sort(2.0 * norm.sf(z), axis=-1)
    m = d.shape[-1]
    passes = p_sorted <= (np.arange(1, m + 1) / m) * q
    any_pass = passes.any(axis=-1)
    i0 = m - 1 - np.argmax(passes[..., ::-1], axis=-1)  # last index satisfying the rule
    abs_desc = -np.sort(-d, axis=-1)
    lam = np.take_along_axis(abs_desc, i0[..., None], axis=-1)[..., 0]
    return np.where(any_pass, lam, np.inf)[()]


def cdf_threshold(details: npt.ArrayLike, q: float = 0.2) -> FloatArray:
    """CDF rule (step 3): lambda = q-quantile of |d| over the window's details [..., m].

    Details with |d| below lambda are zeroed by :func:`hard_threshold` (a fraction of about q).
    """
    if not 0.0 <= q < 1.0:
        raise ValueError(f"q must be in [0, 1), got {q}")
    d = np.abs(np.asarray(details, dtype=np.float64))
    if d.ndim == 0 or d.shape[-1] == 0:
        raise ValueError("details must have at least one coefficient on its last axis")
    return np.quantile(d, q, axis=-1)[()]


def hard_threshold(details: npt.ArrayLike, lam: npt.ArrayLike) -> FloatArray:
    """Hard thresholding d * 1{|d| >= lambda} along the last axis (pywt's ``mode="hard"``)."""
    d = np.asarray(details, dtype=np.float64)
    lam_arr = np.asarray(lam, dtype=np.float64)[..., None]
    return np.where(np.abs(d) >= lam_arr, d, 0.0)


class WaveletTokenizer:
    """WaveToken tokenizer (paper Sec. 3), conforming to ``ForecastTokenizer``.

    Vocabulary: PAD = 0, EOS = 1, ids 2 .. V-2 index the V - 3 quantiser centres
    ``linspace(lo, hi, V - 3)``; id V - 1 is never produced (and decodes like V - 2).

    Args:
        vocab_size: V, total ids including PAD and EOS (>= 5; paper 1024).
        wavelet: any discrete pywt wavelet name (default ``bior2.2``; ablate haar, db4, coif2, sym4).
        level: decomposition level J >= 1; window lengths must be multiples of 2^J.
        threshold: ``none`` | ``visushrink`` | ``fdrc`` | ``cdf`` (detail coefficients only).
        threshold_q: FDR level q (``fdrc``, default 0.05) or quantile (``cdf``, default 0.2);
            ``None`` picks the rule's default. Ignored by ``none`` and ``visushrink``.
        threshold_targets: also threshold the label coefficients (default False, unconfirmed).
        limits: quantiser range (lo, hi) in scaled units (default Chronos' (-15, 15)).
        scaling: ``standard`` (z-scaling, default) or ``mean`` (Chronos' mean |x|).
        context_length: if set, contexts wider than this keep only their last
            ``context_length`` columns (Chronos' truncation); None keeps every column.
    """

    pad_id: int = PAD_ID
    eos_id: int = EOS_ID

    def __init__(
        self,
        vocab_size: int = 1024,
        wavelet: str = "bior2.2",
        level: int = 1,
        threshold: str = "none",
        threshold_q: float | None = None,
        threshold_targets: bool = False,
        limits: tuple[float, float] = (-15.0, 15.0),
        scaling: str = "standard",
        context_length: int | None = None,
    ) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int | np.integer):
            raise ValueError(f"vocab_size must be an integer, got {vocab_size!r}")
        if vocab_size < 5:
            raise ValueError(f"vocab_size must be >= 5 (PAD, EOS and >= 2 bins), got {vocab_size}")
        if not isinstance(wavelet, str) or wavelet not in pywt.wavelist(kind="discrete"):
            raise ValueError(
                f"unknown wavelet {wavelet!r}: use a discrete pywt wavelet "
                "(pywt.wavelist(kind='discrete'), e.g. haar, db4, bior2.2, coif2, sym4)"
            )
        if isinstance(level, bool) or not isinstance(level, int | np.integer) or level < 1:
            raise ValueError(f"level must be an integer >= 1, got {level!r}")
        if threshold not in THRESHOLDS:
            raise ValueError(f"threshold must be one of {THRESHOLDS}, got {threshold!r}")
        if threshold_q is None:
            threshold_q = DEFAULT_THRESHOLD_Q.get(threshold, 0.05)
        if threshold in ("fdrc", "cdf") and not 0.0 < float(threshold_q) < 1.0:
            raise ValueError(f"threshold_q must be in (0, 1), got {threshold_q!r}")
        if scaling not in ("standard", "mean"):
            raise ValueError(f"scaling must be 'standard' or 'mean', got {scaling!r}")
        self.vocab_size = int(vocab_size)
        self.wavelet = wavelet
        self.level = int(level)
        self.block = 2**self.level
        if context_length is not None and (
            isinstance(context_length, bool)
            or not isinstance(context_length, int | np.integer)
            or context_length < self.block
        ):
            raise ValueError(
                f"context_length must be None or an integer >= 2^level = {self.block}, "
                f"got {context_length!r}"
            )
        self.threshold = threshold
        self.threshold_q = float(threshold_q)
        self.threshold_targets = bool(threshold_targets)
        self.limits = check_limits(limits)
        self.scaling = scaling
        self.context_length = None if context_length is None else int(context_length)
        self._pywt_wavelet = pywt.Wavelet(wavelet)

        lo, hi = self.limits
        n_centres = self.vocab_size - N_SPECIAL_TOKENS - 1
        centres = np.linspace(lo, hi, n_centres)
        if lo == -hi and n_centres % 2 == 1:
            centres[n_centres // 2] = 0.0  # exact zero so thresholded details decode to 0.0
        if not np.any(centres == 0.0):
            warnings.warn(
                f"0 is not a quantiser centre for vocab_size={vocab_size}, limits={limits}: "
                "zeroed details and constant series will not decode exactly (use an even "
                "vocab_size and symmetric limits)",
                stacklevel=2,
            )
        self.centres: FloatArray = centres
        self.edges: FloatArray = (centres[1:] + centres[:-1]) / 2.0
        self.bin_width = float(centres[1] - centres[0])
        self.name = f"wavelet-{wavelet}-J{self.level}-{threshold}-{scaling}-V{self.vocab_size}"

    # ----------------------------------------------------------------------------- parameters
    def get_params(self) -> dict[str, Any]:
        """Constructor arguments (for logging; ``WaveletTokenizer(**get_params())`` rebuilds it)."""
        return {
            "vocab_size": self.vocab_size,
            "wavelet": self.wavelet,
            "level": self.level,
            "threshold": self.threshold,
            "threshold_q": self.threshold_q,
            "threshold_targets": self.threshold_targets,
            "limits": self.limits,
            "scaling": self.scaling,
            "context_length": self.context_length,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"WaveletTokenizer({args})"

    # ------------------------------------------------------------------------- building blocks
    def level_lengths(self, length: int) -> list[int]:
        """Coefficient block lengths ``[len a_J, len d_J, ..., len d_1]`` of a window."""
        self._check_length(length, "length")
        coarse = length // self.block
        return [coarse] + [length // 2**j for j in range(self.level, 0, -1)]

    def decompose(self, values: npt.ArrayLike) -> FloatArray:
        """Maximally decimated DWT of each row, concatenated coarse to fine: [g, k] -> [g, k].

        ``pywt.wavedec(mode="periodization", level=J)`` along the last axis (step 2).
        """
        x = np.asarray(values, dtype=np.float64)
        self._check_length(x.shape[-1], "window length")
        with warnings.catch_warnings():
            # "Level value of J is too high": boundary effects are harmless with periodization,
            # whose inverse is exact at every length divisible by 2^J.
            warnings.filterwarnings("ignore", message="Level value of", category=UserWarning)
            coeffs = pywt.wavedec(
                x, self._pywt_wavelet, mode="periodization", level=self.level, axis=-1
            )
        return np.concatenate(coeffs, axis=-1)

    def reconstruct(self, coeffs: npt.ArrayLike) -> FloatArray:
        """Inverse of :meth:`decompose`: split by level lengths, ``pywt.waverec``, truncate."""
        c = np.asarray(coeffs, dtype=np.float64)
        length = c.shape[-1]
        splits = np.cumsum(self.level_lengths(length))[:-1]
        parts = np.split(c, splits, axis=-1)
        x = pywt.waverec(parts, self._pywt_wavelet, mode="periodization", axis=-1)
        return x[..., :length]

    def threshold_details(self, coeffs: npt.ArrayLike) -> FloatArray:
        """Apply the configured threshold rule to the detail part of coefficients [g, k].

        The approximation block ``a_J`` is left untouched; sigma-hat comes from the finest
        level d_1 of each row; one lambda per row is applied to every detail level.
        """
        c = np.array(coeffs, dtype=np.float64)
        if self.threshold == "none":
            return c
        length = c.shape[-1]
        details = c[..., length // self.block :]
        finest = c[..., length // 2 :]
        if self.threshold == "visushrink":
            lam = visushrink_threshold(finest, n=length)
        elif self.threshold == "fdrc":
            lam = fdrc_threshold(details, mad_sigma(finest), q=self.threshold_q)
        else:
            lam = cdf_threshold(details, q=self.threshold_q)
        c[..., length // self.block :] = hard_threshold(details, lam)
        return c

    def quantize(self, coeffs: npt.ArrayLike) -> IntArray:
        """Uniform quantiser (step 4): id = 2 + searchsorted(edges, c), ids in 2 .. V-2.

        Computed arithmetically (nearest centre of the uniform grid) and corrected by at most one
        bin against the stored edges, so the result equals ``searchsorted`` exactly, edges
        included, at about a quarter of its cost.
        """
        c = np.asarray(coeffs, dtype=np.float64)
        n = self.centres.size
        guess = np.clip(np.rint((c - self.centres[0]) / self.bin_width), 0, n - 1).astype(np.int64)
        down = (guess > 0) & (c <= self.edges[np.maximum(guess - 1, 0)])
        up = (guess < n - 1) & (c > self.edges[np.minimum(guess, n - 2)])
        return N_SPECIAL_TOKENS + guess - down + up

    def dequantize(self, ids: npt.ArrayLike) -> FloatArray:
        """centres[id - 2], with ids outside 2 .. V-2 (PAD, EOS, V-1) clamped to the end bins."""
        idx = np.clip(np.asarray(ids, dtype=np.int64) - N_SPECIAL_TOKENS, 0, self.centres.size - 1)
        return self.centres[idx]

    # ------------------------------------------------------------------------------ protocol
    def num_target_tokens(self, horizon: int) -> int:
        """Tokens per forecast window: ``horizon`` (maximally decimated DWT), a multiple of 2^J."""
        self._check_length(horizon, "horizon")
        return int(horizon)

    def context_input(self, context: npt.ArrayLike) -> tuple[IntArray, BoolArray, TokenizerState]:
        """Tokenize contexts [n, C] -> ids [n, C+1], mask [n, C+1], state (steps 1-5).

        Per row: location/scale from its observed values; interior (and trailing) NaNs filled by
        linear interpolation, nearest value at the edges; the last k observed positions are
        decomposed, k = the observed length rounded down to a multiple of 2^J (the oldest points
        are dropped); positions before them are PAD with mask False. A row with fewer than 2^J
        observed positions is left-extended with its oldest observed value to one block of 2^J
        (our choice; the paper only covers the divisible case). Rows of equal k are transformed
        together in one vectorised pywt call. With ``scaling="standard"`` a constant context (std
        at most 1e-7 of its magnitude) gets a scale of 1e-10 of its magnitude (1e-30 if zero,
        :func:`~icml25.pipelines.wavetoken.tokenizer.location_scale`), so whatever ids are
        sampled its forecasts decode to the constant, and its scaled values are set to exactly 0
        (all ids the 0 centre, as for an exact constant) rather than its sub-1e-7 ripple
        magnified by 1e10.
        """
        x = as_float_matrix(context, "context")
        if self.context_length is not None and x.shape[1] > self.context_length:
            x = as_float_matrix(x[:, -self.context_length :], "context (last context_length)")
        n, width = x.shape
        if width < self.block:
            raise ValueError(
                f"context has {width} columns; the wavelet tokenizer needs at least 2^level = "
                f"{self.block}"
            )
        missing = np.isnan(x)
        observed = ~missing
        obs = observed_lengths(x, observed)
        keep = np.maximum(obs - obs % self.block, self.block)
        if self.scaling == "standard":
            loc, scale, constant = standard_location_scale(x, observed)
        else:
            loc, scale = location_scale(x, self.scaling, observed)
            constant = np.zeros(n, dtype=bool)
        mask = np.arange(width)[None, :] >= (width - keep)[:, None]
        # Only rows with a NaN inside their tokenized part need filling; filling also sets the
        # left padding to the oldest observed value, which is what the (rare) rows shorter than
        # one block use as their extension.
        scaled = x.copy()
        needs_fill = np.nonzero((missing & mask).any(axis=1))[0]
        if needs_fill.size:
            scaled[needs_fill] = interpolate_gaps(x[needs_fill])
        scaled -= loc[:, None]
        scaled /= scale[:, None]
        scaled[constant] = 0.0
        ids = np.full((n, width), PAD_ID, dtype=np.int64)
        for k in np.unique(keep):
            rows = np.nonzero(keep == k)[0]
            coeffs = self.threshold_details(self.decompose(scaled[rows, width - k :]))
            ids[rows, width - k :] = self.quantize(coeffs)
        input_ids = append_eos(ids)
        attention_mask = np.concatenate([mask, np.ones((n, 1), dtype=bool)], axis=1)
        return input_ids, attention_mask, TokenizerState(loc=loc, scale=scale, n_tokens=keep)

    def label_input(self, target: npt.ArrayLike, state: TokenizerState) -> IntArray:
        """Tokenize forecast windows [n, H] with the context's loc/scale -> ids [n, H+1].

        The window is decomposed on its own (never jointly with the context, step 2);
        NaNs, not expected here, are interpolated; details are thresholded only if
        ``threshold_targets``. Scaled values are clipped to +-1e300 before the DWT (a target far
        from a constant context, whose scale is tiny, would otherwise overflow to inf and give
        NaN coefficients); anything beyond the quantiser's limits takes an end bin anyway.
        """
        y = as_float_matrix(target, "target")
        if y.shape[0] != len(state):
            raise ValueError(f"target has {y.shape[0]} series but the state holds {len(state)}")
        self.num_target_tokens(y.shape[1])
        with np.errstate(over="ignore"):
            scaled = (fill_missing(y) - state.loc[:, None]) / state.scale[:, None]
        np.clip(scaled, -1e300, 1e300, out=scaled)
        coeffs = self.decompose(scaled)
        if self.threshold_targets:
            coeffs = self.threshold_details(coeffs)
        return append_eos(self.quantize(coeffs))

    def output_transform(self, ids: npt.ArrayLike, state: TokenizerState) -> FloatArray:
        """Decode sampled coefficient ids [n, S, H] -> values [n, S, H] (step 6).

        Dequantise, split into [a_J, d_J, ..., d_1], ``pywt.waverec``, truncate to H, unscale
        y = scale * y_tilde + loc.
        """
        arr = check_ids(ids, state)
        n, s, h = arr.shape
        self.num_target_tokens(h)
        values = self.reconstruct(self.dequantize(arr).reshape(n * s, h)).reshape(n, s, h)
        return values * state.scale[:, None, None] + state.loc[:, None, None]

    # --------------------------------------------------------------------------------- checks
    def _check_length(self, length: int, what: str) -> None:
        if isinstance(length, bool) or not isinstance(length, int | np.integer) or length < 1:
            raise ValueError(f"{what} must be a positive integer, got {length!r}")
        if length % self.block:
            raise ValueError(
                f"{what} {length} is not divisible by 2^level = {self.block} "
                f"(wavelet {self.wavelet!r}, level {self.level}): the maximally decimated DWT "
                "needs lengths that are multiples of 2^J"
            )
