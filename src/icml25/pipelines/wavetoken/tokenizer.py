"""The tokenizer interface of the wavetoken pipeline, shared by every tokenizer variant.

A tokenizer maps a batch of real-valued windows to token ids for a seq2seq model and maps sampled
ids back to values (paper Sec. 3: scale, transform, quantise). The interface mirrors
Chronos' ``ChronosTokenizer`` (amazon-science/chronos-forecasting, ``src/chronos/chronos.py``:
``context_input_transform``, ``label_input_transform``, ``output_transform``) in numpy:

- ``context_input(context)`` -> ``(input_ids [n, L+1], attention_mask [n, L+1], state)``;
  the ids end in EOS, the mask is False exactly on PAD.
- ``label_input(target, state)`` -> ``label_ids [n, H+1]`` (ending in EOS), scaled with the
  *context's* statistics (the future never enters the context transform).
- ``output_transform(ids [n, S, H], state)`` -> values ``[n, S, H]`` in the original units.

This module also holds the input checks and the missing-value filling both tokenizers share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

PAD_ID = 0
"""Padding id (Chronos convention; also the T5 decoder-start token)."""
EOS_ID = 1
"""End-of-sequence id (Chronos convention)."""
N_SPECIAL_TOKENS = 2
"""Number of special ids below the first value id (PAD, EOS)."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class TokenizerState:
    """Per-series quantities a tokenizer needs to encode labels and decode samples.

    Attributes:
        loc: location subtracted before quantisation, float64 [n] (0 for mean scaling).
        scale: positive divisor applied after subtracting ``loc``, float64 [n].
        n_tokens: number of non-PAD context tokens of each series (before EOS), int64 [n].
    """

    loc: FloatArray
    scale: FloatArray
    n_tokens: IntArray

    def __post_init__(self) -> None:
        loc = np.asarray(self.loc, dtype=np.float64)
        scale = np.asarray(self.scale, dtype=np.float64)
        n_tokens = np.asarray(self.n_tokens, dtype=np.int64)
        if loc.ndim != 1 or scale.shape != loc.shape or n_tokens.shape != loc.shape:
            raise ValueError(
                "TokenizerState: loc, scale and n_tokens must be 1-D arrays of equal length, got "
                f"shapes {loc.shape}, {scale.shape}, {n_tokens.shape}"
            )
        if not (np.all(np.isfinite(loc)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise ValueError("TokenizerState: loc must be finite and scale finite and positive")
        # frozen dataclass: bypass __setattr__ to store the normalised arrays
        object.__setattr__(self, "loc", loc)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "n_tokens", n_tokens)

    def __len__(self) -> int:
        return int(self.loc.shape[0])

    def subset(self, index: npt.ArrayLike | slice) -> TokenizerState:
        """The state of a subset of series (for mini-batches): rows ``index`` of every array."""
        return TokenizerState(
            loc=self.loc[index], scale=self.scale[index], n_tokens=self.n_tokens[index]
        )


@runtime_checkable
class ForecastTokenizer(Protocol):
    """What the model, trainer and forecaster of the wavetoken pipeline code against.

    Attributes:
        vocab_size: total number of ids, special ids included.
        pad_id: always 0 (:data:`PAD_ID`).
        eos_id: always 1 (:data:`EOS_ID`).
        name: short identifier used in logs and MLflow (e.g. ``"wavelet_bior2.2_J1"``).
    """

    vocab_size: int
    pad_id: int
    eos_id: int
    name: str

    def context_input(self, context: npt.ArrayLike) -> tuple[IntArray, BoolArray, TokenizerState]:
        """Tokenize contexts float [n, C] (leading NaNs = no history, interior NaNs = missing).

        Returns ``input_ids`` int64 [n, L+1] ending in EOS, ``attention_mask`` bool [n, L+1]
        (False on PAD) and the state needed by :meth:`label_input` and :meth:`output_transform`.
        """
        ...

    def label_input(self, target: npt.ArrayLike, state: TokenizerState) -> IntArray:
        """Tokenize forecast windows float [n, H] with the context's state -> int64 [n, H+1]."""
        ...

    def output_transform(self, ids: npt.ArrayLike, state: TokenizerState) -> FloatArray:
        """Decode sampled ids int [n, S, H] (no EOS) -> float64 [n, S, H] in original units."""
        ...

    def num_target_tokens(self, horizon: int) -> int:
        """Number of tokens the model must generate for a forecast of ``horizon`` steps."""
        ...


def as_float_matrix(values: npt.ArrayLike, name: str) -> FloatArray:
    """Return ``values`` as float64 [n, T]; reject other ranks, empty arrays and ±inf."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [n_series, length], got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty, got shape {arr.shape}")
    if np.isinf(arr).any():
        rows = np.unique(np.nonzero(np.isinf(arr))[0])
        raise ValueError(
            f"{name} contains ±inf (rows {rows[:5].tolist()}{'...' if rows.size > 5 else ''}); "
            "replace infinite values by NaN (missing) or finite numbers before tokenizing"
        )
    all_nan = np.isnan(arr).all(axis=1)
    if all_nan.any():
        rows = np.nonzero(all_nan)[0]
        raise ValueError(
            f"{name} has rows with no observed value (all NaN): rows "
            f"{rows[:5].tolist()}{'...' if rows.size > 5 else ''}"
        )
    return arr


def fill_missing(values: FloatArray) -> FloatArray:
    """Fill NaNs row-wise by linear interpolation, nearest observed value at the edges.

    Vectorised over rows (missing values inside a context are interpolated
    before the DWT because a NaN would spread through the wavelet filters). Every row must hold
    at least one observed value.
    """
    out = np.array(values, dtype=np.float64)
    rows_with_nan = np.nonzero(np.isnan(out).any(axis=1))[0]
    if rows_with_nan.size:
        out[rows_with_nan] = interpolate_gaps(out[rows_with_nan])
    return out


def interpolate_gaps(x: FloatArray) -> FloatArray:
    """:func:`fill_missing` for rows that each contain a NaN and at least one observation.

    One ``np.interp`` over the flattened rows fills every interior gap (both neighbours of an
    interior gap lie in the same row); leading and trailing gaps are then overwritten with the
    row's first and last observation. About 5x faster than per-row index bookkeeping.
    """
    n, t = x.shape
    missing = np.isnan(x)
    observed = ~missing
    miss_idx = np.flatnonzero(missing)
    obs_idx = np.flatnonzero(observed)
    out = x.copy()
    flat = out.reshape(-1)
    flat[miss_idx] = np.interp(miss_idx, obs_idx, flat[obs_idx])
    first = observed.argmax(axis=1)
    last = t - 1 - observed[:, ::-1].argmax(axis=1)
    rows, cols = np.arange(n), np.arange(t)
    np.copyto(out, x[rows, first][:, None], where=cols < first[:, None])
    np.copyto(out, x[rows, last][:, None], where=cols > last[:, None])
    return out


def observed_lengths(values: FloatArray, observed: BoolArray | None = None) -> IntArray:
    """Length of each row counted from its first observed (non-NaN) value to the end.

    Leading NaNs are left padding ("no history"); anything after the first observation is part
    of the series, missing or not. ``observed`` (``~isnan(values)``) may be passed if known.
    """
    if observed is None:
        observed = ~np.isnan(values)
    first = np.argmax(observed, axis=1)
    return (values.shape[1] - first).astype(np.int64)


#: A context is *constant* when its population std is at most ``CONSTANT_RTOL * max|x|``
#: (float32's resolution, 2^-23 = 1.2e-7: variation below it is indistinguishable from rounding).
CONSTANT_RTOL = 1e-7

#: Scale given to a constant context, relative to its magnitude ``max|x|``.
CONSTANT_SCALE = 1e-10

#: Scale given to an all-zero context (absolute: it has no magnitude to be relative to).
ZERO_SCALE = 1e-30


def standard_location_scale(
    values: FloatArray, observed: BoolArray | None = None
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """``"standard"`` scaling of :func:`location_scale`, with the mask of constant rows.

    Returns ``(loc, scale, constant)``, each ``[n]``; see :func:`location_scale` for the rule.
    """
    if observed is None:
        observed = ~np.isnan(values)
    count = observed.sum(axis=1)
    vmax = np.fmax.reduce(values, axis=1)  # fmax/fmin skip NaN without a temporary
    vmin = np.fmin.reduce(values, axis=1)
    dev = np.where(observed, values, 0.0)
    loc = dev.sum(axis=1) / count
    dev -= loc[:, None]
    dev *= observed
    sigma = np.sqrt(np.einsum("ij,ij->i", dev, dev) / count)
    magnitude = np.fmax(np.abs(vmax), np.abs(vmin))
    exact = vmax == vmin
    constant = exact | ~(sigma > CONSTANT_RTOL * magnitude)
    loc = np.where(exact, vmax, loc)
    constant_scale = np.where(magnitude > 0, CONSTANT_SCALE * magnitude, ZERO_SCALE)
    scale = np.where(constant, constant_scale, sigma)
    scale = np.fmax(scale, np.finfo(np.float64).tiny)
    return loc, scale, constant


def location_scale(
    values: FloatArray, scaling: str, observed: BoolArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Per-row ``(loc, scale)`` from the observed (non-NaN) values of ``values`` [n, T].

    - ``"standard"`` (WaveToken's z-scaling as this project reads it): ``loc`` = mean and
      ``scale`` = population std ``sigma``, except for a *constant* row, one with
      ``sigma <= CONSTANT_RTOL * m`` (1e-7) where ``m = max |x|`` over the observed values: it
      gets ``scale = CONSTANT_SCALE * m`` (1e-10 of its magnitude), or ``ZERO_SCALE`` (1e-30)
      if it is all zeros. A row whose observed values are all equal gets ``loc`` = that value
      exactly, so it is mapped to exactly 0 and decodes to exactly the constant when the model
      emits the 0 token.
    - ``"mean"`` (Chronos ``MeanScaleUniformBins._input_transform``): loc = 0,
      scale = mean |x|; scale 0 (all zeros) -> 1.

    Why (standard scaling). A constant context has no scale of its own. A scale of 1 in
    absolute units would make forecasts depend on the units: a series constant at 0 or 1e-3
    would decode to values up to +-21 whenever the model sampled a non-zero token. With
    ``scale = 1e-10 m``, any sampled ids, which decode to at most ``max|limits|`` times the
    synthesis gain in scaled units (15 * 2.12 = 32 for bior2.2, J = 1), give sample paths within
    about 3e-9 relative of the constant. The detection tolerance ``CONSTANT_RTOL = 1e-7`` (about
    float32's resolution) is far above that: when a rollout feeds such a block back into the
    context, the context is still constant and the next block stays within 3e-9 of its mean,
    instead of being z-scaled by its 1e-9 ripple and amplified up to ~12x per block; a non-zero
    tolerance also catches constants with rounding noise (std ~1e-14). An all-zero context has no
    magnitude, and the ripple of its first block *is* z-scaled in the next one, hence the tiny
    absolute ``ZERO_SCALE``: its paths stay within 3e-29 of 0, and within 1e-6 for ~20
    rollout blocks even if every block is amplified 12x. Rows with ``sigma > CONSTANT_RTOL * m``
    are affine-equivariant: ``a x + b`` (``a > 0``) gets ``loc' = a loc + b`` and
    ``scale' = a scale``, so its scaled values, hence ids, equal those of ``x``, and decoding
    with ``(loc', scale')`` maps the same ids to ``a y + b``. ``scale`` is never below the
    smallest normal float64, so it is always positive.

    ``observed`` (``~isnan(values)``) may be passed when the caller already has it.
    """
    if scaling == "mean":
        if observed is None:
            observed = ~np.isnan(values)
        count = observed.sum(axis=1)
        scale = np.where(observed, np.abs(values), 0.0).sum(axis=1) / count
        scale = np.where(scale > 0, scale, 1.0)
        return np.zeros(values.shape[0]), scale
    if scaling == "standard":
        loc, scale, _ = standard_location_scale(values, observed)
        return loc, scale
    raise ValueError(f"scaling must be 'standard' or 'mean', got {scaling!r}")


def append_eos(ids: IntArray) -> IntArray:
    """Append an EOS column to int ids [n, T] -> [n, T+1]."""
    eos = np.full((ids.shape[0], 1), EOS_ID, dtype=np.int64)
    return np.concatenate([ids.astype(np.int64, copy=False), eos], axis=1)


def check_limits(limits: tuple[float, float]) -> tuple[float, float]:
    """Validate quantiser limits ``(lo, hi)``: two finite numbers with lo < hi."""
    try:
        lo, hi = (float(v) for v in limits)
    except (TypeError, ValueError) as err:
        raise ValueError(f"limits must be a pair (lo, hi) of numbers, got {limits!r}") from err
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi:
        raise ValueError(f"limits must be finite with lo < hi, got {limits!r}")
    return lo, hi


def check_ids(ids: npt.ArrayLike, state: TokenizerState) -> IntArray:
    """Validate sampled ids [n, S, H] against the state's batch size; return int64."""
    arr = np.asarray(ids)
    if arr.ndim != 3:
        raise ValueError(f"ids must be a 3-D array [n_series, n_samples, horizon], got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"ids must hold integers, got dtype {arr.dtype}")
    if arr.shape[0] != len(state):
        raise ValueError(f"ids has {arr.shape[0]} series but the state holds {len(state)}")
    return arr.astype(np.int64, copy=False)
