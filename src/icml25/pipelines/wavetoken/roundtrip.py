"""Tokenizer round-trip check (the two tokenizer claims: the round-trip bound).

Without quantisation the periodized DWT is exactly invertible; with it, every coefficient moves by
at most half a bin, so a reconstructed value moves by at most ``(width/2)·G·σ`` where ``G`` is the
largest absolute row sum of the synthesis matrix (the inverse DWT as a linear map) and ``σ`` the
series' scale. For time-domain bins the synthesis matrix is the identity, ``G = 1``.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pywt

from icml25.pipelines.wavetoken.tokenizer import ForecastTokenizer
from icml25.pipelines.wavetoken.wavelet_tokenizer import WaveletTokenizer


@cache
def synthesis_gain(wavelet: str, level: int, length: int) -> float:
    """``G = max_i Σ_k |S_ik|`` with column ``k`` of ``S`` = the inverse DWT of unit vector ``e_k``."""
    template = pywt.wavedec(np.zeros(length), wavelet, mode="periodization", level=level)
    sizes = [len(c) for c in template]
    columns = []
    for k in range(sum(sizes)):
        unit = np.zeros(sum(sizes))
        unit[k] = 1.0
        coeffs = np.split(unit, np.cumsum(sizes)[:-1])
        columns.append(pywt.waverec(coeffs, wavelet, mode="periodization")[:length])
    synthesis = np.stack(columns, axis=1)
    return float(np.abs(synthesis).sum(axis=1).max())


def tokenizer_roundtrip_report(tokenizer: ForecastTokenizer, contexts: np.ndarray) -> dict:
    """Round-trip errors of ``tokenizer`` on complete windows ``[n, C]`` (no NaN).

    Returns ``transform_roundtrip_max_error`` (scaled units, no quantisation),
    ``quantisation_error_over_bound`` (max over series of max|x - dec(enc(x))| / bound; ≤ 1
    means the bound holds), ``rms_error_over_bin`` and ``clipped_series`` (series with a
    coefficient beyond the quantiser's limits, where the bound does not apply and which are left
    out of the ratio).
    """
    contexts = np.asarray(contexts, dtype=np.float64)
    if contexts.ndim != 2 or contexts.shape[0] == 0 or np.isnan(contexts).any():
        raise ValueError("contexts: expected a non-empty [n, C] array of complete windows")
    ids, _, state = tokenizer.context_input(contexts)
    decoded = tokenizer.output_transform(ids[:, None, :-1], state)[:, 0, :]
    scale = np.asarray(state.scale)[:, None]
    scaled = (contexts - np.asarray(state.loc)[:, None]) / scale
    if isinstance(tokenizer, WaveletTokenizer):
        gain = synthesis_gain(tokenizer.wavelet, tokenizer.level, contexts.shape[1])
        coeffs = tokenizer.decompose(scaled)
        transform_error = float(np.abs(tokenizer.reconstruct(coeffs) - scaled).max())
    else:
        gain, coeffs, transform_error = 1.0, scaled, 0.0
    width = tokenizer.bin_width
    lo, hi = tokenizer.limits
    clipped = ((coeffs < lo - width / 2) | (coeffs > hi + width / 2)).any(axis=1)
    error = np.abs(decoded - contexts)
    bound = (width / 2) * gain * scale[:, 0]
    ratio = error.max(axis=1)[~clipped] / bound[~clipped]
    rms = np.sqrt((error**2).mean(axis=1))[~clipped] / (width * scale[~clipped, 0])
    return {
        "transform_roundtrip_max_error": transform_error,
        "quantisation_error_over_bound": float(ratio.max()) if ratio.size else float("nan"),
        "rms_error_over_bin": float(rms.max()) if rms.size else float("nan"),
        "synthesis_gain": gain,
        "clipped_series": int(clipped.sum()),
        "n_series": len(contexts),
    }
