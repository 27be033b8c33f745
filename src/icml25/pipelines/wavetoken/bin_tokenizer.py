"""Chronos' uniform-bin tokenizer, the ``chronos_bins`` baseline of the wavetoken pipeline.

A numpy reproduction of ``MeanScaleUniformBins`` in amazon-science/chronos-forecasting,
``src/chronos/chronos.py`` (the paper's Chronos baseline), id layout and float32 arithmetic
included:

- centres = torch.linspace(lo, hi, V - n_special - 1) in float32 (4093 centres for V = 4096,
  n_special = 2); boundaries = [-1e20, midpoints of the centres, +1e20], all float32;
- id = bucketize(x / scale, boundaries, right=True) + n_special, clamped to [0, V - 1], with
  x, scale and x / scale in float32. Every finite scaled value lies in [-1e20, 1e20) and gets a
  bucket index >= 1, so ids run 3 .. V-1 and id 2 is never produced (Chronos' off-by-one, kept
  on purpose);
- decoding reads centres[clamp(id - n_special - 1, 0, n_centres - 1)], so a sampled PAD, EOS or
  id 2 decodes to the lowest centre;
- missing values (NaN) become PAD with attention mask False; contexts longer than
  ``context_length`` keep their last ``context_length`` points; EOS is appended (seq2seq).

``scaling="mean"`` is Chronos (scale = mean |x| over the observed context in float32, 0 -> 1);
``scaling="standard"`` is the ``chronos_bins_std`` ablation (same bins, z-scaling from
:func:`~icml25.pipelines.wavetoken.tokenizer.location_scale` in float64; the scaled values are
rounded to float32 before bucketizing, as every value is).

Equality with chronos-forecasting (tests/pipelines/wavetoken/test_peer_chronos_tokenizer.py
compares against the installed package): with ``scaling="mean"`` the context ids, attention
masks and scales of :meth:`MeanScaleUniformBins.context_input` and the label ids and masks of
:meth:`MeanScaleUniformBins.label_input_transform` are identical to Chronos'
``context_input_transform`` / ``label_input_transform`` (the scale bit for bit, stored as
float64 in the state). Two steps are delegated to torch itself because their float32 rounding is
torch's and numpy does not reproduce it: the centres (``torch.linspace`` fills from both ends with
vectorised steps; numpy's float32 linspace differs in the last bit at 207 of the 4093 centres) and
the scale's sum (``torch.nansum`` sums in cascades; numpy's float32 sum differs by an ulp for
about 40 % of series). :meth:`MeanScaleUniformBins.output_transform` returns
float64 centre * scale, within float32 rounding (relative 6e-8 of the scale) of Chronos' float32
product.

Remaining difference, on labels only: the ``ForecastTokenizer`` interface's
:meth:`MeanScaleUniformBins.label_input` returns ids without a mask, so it linearly interpolates
NaN labels (nearest observation at the edges) and tokenizes the filled values, where Chronos
writes PAD with mask False; on NaN-free labels its ids equal Chronos'. The Chronos rule with its
mask is :meth:`MeanScaleUniformBins.label_input_transform`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch

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
    location_scale,
)

BOUNDARY_SENTINEL = np.float32(1e20)
"""Chronos' outer boundaries (``torch.tensor([-1e20])`` / ``[1e20]``, float32)."""

Float32Array = npt.NDArray[np.float32]


def chronos_centres(lo: float, hi: float, n_centres: int) -> Float32Array:
    """The float32 bin centres ``torch.linspace(lo, hi, n_centres)`` of Chronos, as numpy."""
    return torch.linspace(float(lo), float(hi), int(n_centres), dtype=torch.float32).numpy()


def chronos_mean_scale(values: Float32Array, observed: BoolArray) -> Float32Array:
    """Chronos' mean scale of float32 rows [n, T]: nansum(|x| * mask) / nansum(mask), 0 -> 1.

    Computed by torch on the same float32 tensor so that the sum is rounded as Chronos rounds
    it (``MeanScaleUniformBins._input_transform``); a row with no positive mean gets 1.
    """
    t = torch.from_numpy(values)
    mask = torch.from_numpy(observed)
    scale = torch.nansum(torch.abs(t) * mask, dim=-1) / torch.nansum(mask, dim=-1)
    scale[~(scale > 0)] = 1.0
    return scale.numpy()


def _as_float32(values: FloatArray, name: str) -> Float32Array:
    """``values`` (finite or NaN) rounded to float32; values beyond float32's range raise."""
    with np.errstate(over="ignore"):
        out = values.astype(np.float32)
    if np.isinf(out).any():
        raise ValueError(
            f"{name} has values beyond float32's range (|x| > {np.finfo(np.float32).max:.3g}); "
            "Chronos' uniform bins compute in float32"
        )
    return out


class MeanScaleUniformBins:
    """Chronos' ``MeanScaleUniformBins`` in numpy, conforming to ``ForecastTokenizer``.

    Args:
        vocab_size: V, total ids including PAD and EOS (Chronos 4096; equal-vocab control 1024).
        limits: (low_limit, high_limit) of the centres in scaled units (Chronos (-15, 15)).
        scaling: ``mean`` (Chronos) or ``standard`` (ablation ``chronos_bins_std``).
        context_length: if set, contexts keep only their last ``context_length`` columns
            (Chronos ``context_input_transform``); None keeps every column.

    Attributes:
        centres: float32 [V - 3], Chronos' ``centers``.
        boundaries: float32 [V - 2], Chronos' ``boundaries``.
        bin_width: the widest gap between neighbouring centres, the nominal
            (hi - lo) / (V - 4) up to the float32 rounding of the centres (6e-5 relative at
            V = 4096), so that half of it bounds the quantisation error in scaled units.
    """

    pad_id: int = PAD_ID
    eos_id: int = EOS_ID

    def __init__(
        self,
        vocab_size: int = 4096,
        limits: tuple[float, float] = (-15.0, 15.0),
        scaling: str = "mean",
        context_length: int | None = None,
    ) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int | np.integer):
            raise ValueError(f"vocab_size must be an integer, got {vocab_size!r}")
        if vocab_size < 5:
            raise ValueError(
                f"vocab_size must be >= 5 (PAD, EOS, unused id 2, >= 2 bins), got {vocab_size}"
            )
        if scaling not in ("mean", "standard"):
            raise ValueError(f"scaling must be 'mean' or 'standard', got {scaling!r}")
        if context_length is not None and (
            isinstance(context_length, bool)
            or not isinstance(context_length, int | np.integer)
            or context_length < 1
        ):
            raise ValueError(
                f"context_length must be None or a positive integer, got {context_length!r}"
            )
        self.vocab_size = int(vocab_size)
        self.limits = check_limits(limits)
        self.scaling = scaling
        self.context_length = None if context_length is None else int(context_length)
        lo, hi = self.limits
        self.centres: Float32Array = chronos_centres(lo, hi, self.vocab_size - N_SPECIAL_TOKENS - 1)
        self.boundaries: Float32Array = np.concatenate(
            [
                [-BOUNDARY_SENTINEL],
                (self.centres[1:] + self.centres[:-1]) / np.float32(2.0),
                [BOUNDARY_SENTINEL],
            ]
        ).astype(np.float32)
        self.bin_width = float(np.diff(self.centres.astype(np.float64)).max())
        # quantize's lookup table and grid: boundaries padded with -inf / +inf
        self._edges = np.concatenate([[-np.inf], self.boundaries, [np.inf]]).astype(np.float32)
        self._inv_width = (self.centres.size - 1) / (float(self.centres[-1]) - float(self.centres[0]))
        self.name = f"chronos_bins-{scaling}-V{self.vocab_size}"

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments (for logging; ``MeanScaleUniformBins(**get_params())``)."""
        return {
            "vocab_size": self.vocab_size,
            "limits": self.limits,
            "scaling": self.scaling,
            "context_length": self.context_length,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"MeanScaleUniformBins({args})"

    # ------------------------------------------------------------------------- building blocks
    def quantize(self, scaled: npt.ArrayLike) -> IntArray:
        """``torch.bucketize(x, boundaries, right=True) + n_special`` clamped to [0, V - 1].

        ``scaled`` is rounded to float32 first (Chronos' tensors are float32) and compared with
        the float32 boundaries; ``right=True`` in torch (boundaries[i-1] <= x < boundaries[i]) is
        numpy's ``searchsorted(..., side="right")``, whose result this equals exactly: the bucket
        is guessed from the uniform grid and then moved until ``edges[k] <= x < edges[k + 1]``
        holds against the stored boundaries (one correction at most in practice), about 4x
        faster than a binary search. NaN sorts last (id V - 1), as in ``searchsorted``; callers
        replace it by PAD (see :meth:`context_input`).
        """
        x = np.asarray(scaled, dtype=np.float32)
        shape = x.shape
        x = x.reshape(-1)
        edges = self._edges
        n_bounds = self.boundaries.size
        lo = float(self.centres[0])
        with np.errstate(invalid="ignore", over="ignore"):
            guess = np.rint((x.astype(np.float64) - lo) * self._inv_width) + 1.0
            k = np.clip(np.nan_to_num(guess, nan=n_bounds), 0, n_bounds).astype(np.int64)
        # edges[k] = boundaries[k - 1] with edges[0] = -inf, edges[n_bounds + 1] = +inf
        while True:
            down = x < edges[k]
            if not down.any():
                break
            k -= down
        while True:
            up = (x >= edges[k + 1]) & (k < n_bounds)  # k < n_bounds: x = +inf stops at the end
            if not up.any():
                break
            k += up
        k[np.isnan(x)] = n_bounds
        return np.minimum(k + N_SPECIAL_TOKENS, self.vocab_size - 1).reshape(shape)

    def dequantize(self, ids: npt.ArrayLike) -> FloatArray:
        """``centres[clamp(id - n_special - 1, 0, n_centres - 1)]`` as float64 (Chronos
        ``output_transform`` before the scale)."""
        idx = np.clip(
            np.asarray(ids, dtype=np.int64) - N_SPECIAL_TOKENS - 1, 0, self.centres.size - 1
        )
        return self.centres[idx].astype(np.float64)

    def _scaled(self, values: FloatArray, state: TokenizerState, name: str) -> npt.NDArray[Any]:
        """Values [n, T] in scaled units with the state's statistics (NaN stays NaN).

        Mean scaling divides in float32 (Chronos); standard scaling subtracts and divides in
        float64 and :meth:`quantize` rounds the result to float32.
        """
        if self.scaling == "mean":
            return _as_float32(values, name) / state.scale.astype(np.float32)[:, None]
        return (values - state.loc[:, None]) / state.scale[:, None]

    # ------------------------------------------------------------------------------ protocol
    def num_target_tokens(self, horizon: int) -> int:
        """One token per time step."""
        if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or horizon < 1:
            raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
        return int(horizon)

    def context_input(self, context: npt.ArrayLike) -> tuple[IntArray, BoolArray, TokenizerState]:
        """Tokenize contexts [n, C] -> ids [n, C+1], mask [n, C+1], state.

        Chronos ``context_input_transform`` / ``_input_transform``: truncate to the last
        ``context_length`` points, scale from the observed values, bucketize, NaN -> PAD with
        mask False, append EOS (mask True). With mean scaling, the state's scale is Chronos'
        float32 scale (as float64).
        """
        x = as_float_matrix(context, "context")
        if self.context_length is not None and x.shape[1] > self.context_length:
            x = as_float_matrix(x[:, -self.context_length :], "context (last context_length)")
        observed = ~np.isnan(x)
        if self.scaling == "mean":
            x32 = _as_float32(x, "context")
            scale32 = chronos_mean_scale(x32, observed)
            if not np.all(np.isfinite(scale32)):
                raise ValueError(
                    "context: the mean |x| of a series overflows float32; Chronos' uniform bins "
                    "compute in float32"
                )
            loc = np.zeros(x.shape[0])
            scale = scale32.astype(np.float64)
            scaled: npt.NDArray[Any] = x32 / scale32[:, None]
        else:
            loc, scale = location_scale(x, self.scaling, observed)
            scaled = (x - loc[:, None]) / scale[:, None]
        ids = np.where(observed, self.quantize(scaled), PAD_ID)
        input_ids = append_eos(ids)
        mask = np.concatenate([observed, np.ones((x.shape[0], 1), dtype=bool)], axis=1)
        state = TokenizerState(loc=loc, scale=scale, n_tokens=observed.sum(axis=1))
        return input_ids, mask, state

    def label_input(self, target: npt.ArrayLike, state: TokenizerState) -> IntArray:
        """Tokenize forecast windows [n, H] with the context's loc/scale -> ids [n, H+1] + EOS.

        NaN labels are interpolated first (see the module docstring); on NaN-free labels the ids
        equal :meth:`label_input_transform`'s, i.e. Chronos'.
        """
        y = as_float_matrix(target, "target")
        if y.shape[0] != len(state):
            raise ValueError(f"target has {y.shape[0]} series but the state holds {len(state)}")
        return append_eos(self.quantize(self._scaled(fill_missing(y), state, "target")))

    def label_input_transform(
        self, target: npt.ArrayLike, state: TokenizerState
    ) -> tuple[IntArray, BoolArray]:
        """Chronos ``label_input_transform``: labels [n, H] -> ids [n, H+1], mask [n, H+1].

        Scaled with the context's state; NaN labels become PAD with mask False (a row may be
        entirely NaN); EOS is appended with mask True.
        """
        y = np.asarray(target, dtype=np.float64)
        if y.ndim != 2 or y.shape[0] == 0 or y.shape[1] == 0:
            raise ValueError(f"target must be a non-empty 2-D array [n_series, H], got {y.shape}")
        if np.isinf(y).any():
            raise ValueError("target contains ±inf; use NaN for missing labels")
        if y.shape[0] != len(state):
            raise ValueError(f"target has {y.shape[0]} series but the state holds {len(state)}")
        observed = ~np.isnan(y)
        ids = np.where(observed, self.quantize(self._scaled(y, state, "target")), PAD_ID)
        mask = np.concatenate([observed, np.ones((y.shape[0], 1), dtype=bool)], axis=1)
        return append_eos(ids), mask

    def output_transform(self, ids: npt.ArrayLike, state: TokenizerState) -> FloatArray:
        """Decode sampled ids [n, S, H] -> centres * scale + loc, float64 [n, S, H]."""
        arr = check_ids(ids, state)
        return self.dequantize(arr) * state.scale[:, None, None] + state.loc[:, None, None]
