"""Chronos' uniform-bin tokenizer, the ``chronos_bins`` baseline of the wavetoken pipeline.

A numpy reproduction of ``MeanScaleUniformBins`` in amazon-science/chronos-forecasting,
``src/chronos/chronos.py`` (the paper's Chronos baseline), id layout included:

- centres = linspace(lo, hi, V - n_special - 1) (4093 centres for V = 4096, n_special = 2),
- boundaries = [-1e20, midpoints of the centres, +1e20],
- id = bucketize(x / scale, boundaries, right=True) + n_special, clamped to [0, V - 1].
  Every finite scaled value lies in [-1e20, 1e20) and gets a bucket index >= 1, so ids run
  3 .. V-1 and id 2 is never produced (Chronos' off-by-one, kept on purpose);
- decoding reads centres[clamp(id - n_special - 1, 0, n_centres - 1)], so a sampled PAD, EOS or
  id 2 decodes to the lowest centre;
- missing values (NaN) become PAD with attention mask False; contexts longer than
  ``context_length`` keep their last ``context_length`` points; EOS is appended (seq2seq).

``scaling="mean"`` is Chronos (scale = mean |x| over the observed context, 0 -> 1);
``scaling="standard"`` is the ``chronos_bins_std`` ablation (same bins, z-scaling).
Differences from Chronos: float64 arithmetic instead of float32 (a value within float32 rounding
of a boundary may land one bin apart); labels with NaN are interpolated rather than PAD-ed
because the ``ForecastTokenizer`` label interface carries no mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

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

BOUNDARY_SENTINEL = 1e20
"""Chronos' outer boundaries (``torch.tensor([-1e20])`` / ``[1e20]``)."""


class MeanScaleUniformBins:
    """Chronos' ``MeanScaleUniformBins`` in numpy, conforming to ``ForecastTokenizer``.

    Args:
        vocab_size: V, total ids including PAD and EOS (Chronos 4096; equal-vocab control 1024).
        limits: (low_limit, high_limit) of the centres in scaled units (Chronos (-15, 15)).
        scaling: ``mean`` (Chronos) or ``standard`` (ablation ``chronos_bins_std``).
        context_length: if set, contexts keep only their last ``context_length`` columns
            (Chronos ``context_input_transform``); None keeps every column.
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
        self.centres: FloatArray = np.linspace(lo, hi, self.vocab_size - N_SPECIAL_TOKENS - 1)
        self.boundaries: FloatArray = np.concatenate(
            [
                [-BOUNDARY_SENTINEL],
                (self.centres[1:] + self.centres[:-1]) / 2.0,
                [BOUNDARY_SENTINEL],
            ]
        )
        self.bin_width = float(self.centres[1] - self.centres[0])
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

        ``right=True`` in torch (boundaries[i-1] <= x < boundaries[i]) is numpy's
        ``searchsorted(..., side="right")``. NaN inputs are not handled here (see
        :meth:`context_input`).
        """
        x = np.asarray(scaled, dtype=np.float64)
        ids = np.searchsorted(self.boundaries, x, side="right") + N_SPECIAL_TOKENS
        return np.clip(ids, 0, self.vocab_size - 1).astype(np.int64)

    def dequantize(self, ids: npt.ArrayLike) -> FloatArray:
        """``centres[clamp(id - n_special - 1, 0, n_centres - 1)]`` (Chronos ``output_transform``)."""
        idx = np.clip(
            np.asarray(ids, dtype=np.int64) - N_SPECIAL_TOKENS - 1, 0, self.centres.size - 1
        )
        return self.centres[idx]

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
        mask False, append EOS (mask True).
        """
        x = as_float_matrix(context, "context")
        if self.context_length is not None and x.shape[1] > self.context_length:
            x = as_float_matrix(x[:, -self.context_length :], "context (last context_length)")
        observed = ~np.isnan(x)
        loc, scale = location_scale(x, self.scaling)
        scaled = (np.where(observed, x, 0.0) - loc[:, None]) / scale[:, None]
        ids = np.where(observed, self.quantize(scaled), PAD_ID)
        input_ids = append_eos(ids)
        mask = np.concatenate([observed, np.ones((x.shape[0], 1), dtype=bool)], axis=1)
        state = TokenizerState(loc=loc, scale=scale, n_tokens=observed.sum(axis=1))
        return input_ids, mask, state

    def label_input(self, target: npt.ArrayLike, state: TokenizerState) -> IntArray:
        """Tokenize forecast windows [n, H] with the context's loc/scale -> ids [n, H+1] + EOS."""
        y = as_float_matrix(target, "target")
        if y.shape[0] != len(state):
            raise ValueError(f"target has {y.shape[0]} series but the state holds {len(state)}")
        scaled = (fill_missing(y) - state.loc[:, None]) / state.scale[:, None]
        return append_eos(self.quantize(scaled))

    def output_transform(self, ids: npt.ArrayLike, state: TokenizerState) -> FloatArray:
        """Decode sampled ids [n, S, H] -> centres * scale + loc, float64 [n, S, H]."""
        arr = check_ids(ids, state)
        return self.dequantize(arr) * state.scale[:, None, None] + state.loc[:, None, None]
