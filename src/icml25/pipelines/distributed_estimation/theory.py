"""The theoretical rate ``R_th`` and its phase boundaries, computed from (m, n, l, s).

The project's theory curve (see ``docs/papers/distributed_estimation.md``). Discrete A-ary
estimation under squared ℓ2 loss (the authors' companion paper "Refinement Methods for
Distributed Distribution Estimation under ℓp-Losses", Table 1, p = 2), plugged into the K-bin
histogram bias–variance trade-off::

    R_th(m, n, l) = min_{K = 2^j ≤ max(ml, 2)} [ b(K) + c_v·scale·K·max(1/(mn), D_comm(m, n, A, l)) ]

with ``b(K)`` the exact Haar bias of the true function, ``A = K`` (density) or ``2K`` (regression,
``scale = (hi - lo)²``), and ``D_comm`` the communication term of that table. Log factors are
dropped except in the medium regime. The closed-form regime boundaries in n are
``n1 = (ml)^{1/(2s+1)}/2^l``, ``n2 = (ml)^{1/(2s+1)}`` and ``n3 = (ml)^{2s+1}``.

This curve is derived in icml25, not taken from the paper (whose rates are stated through an
effective sample size we could not confirm). At ``l = 0`` nothing is communicated: the risk is
that of the uninformed estimator (regime ``uninformed``), which the caller passes in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

REGIMES = ("sparse", "medium", "dense", "ultra_dense", "centralised", "uninformed")
SMOOTHNESS_RANGE = (0.0, 1.0)  # Haar histograms attain the rate for 0 < s <= 1


def check_smoothness(s: float) -> float:
    lo, hi = SMOOTHNESS_RANGE
    if not (lo < s <= hi) or not math.isfinite(s):
        raise ValueError(f"smoothness s={s} is outside the supported range ({lo}, {hi}] "
                         "(Haar/histogram estimators)")
    return float(s)


def medium_log_factor(a: int, n: int, kind: str = "continuous") -> float:
    """The log factor of the medium rate ``·/(ml)``.

    ``one_plus``: ``log2(1 + A/n)``. It makes R_th jump *up* by
    ``log2(1 + 2^l)/l`` where the sparse branch hands over (``n·2^l = A``; 1.58× at l = 1), so R_th
    would not be monotone in n. ``continuous`` (default): ``max(1, log2(A/n))``, equal to the
    sparse rate at ``n = A/2^l`` and to the dense rate at ``n = A``, and within a factor 1.58 of
    ``one_plus`` (logs are dropped anyway).
    """
    if kind == "one_plus":
        return math.log2(1 + a / n)
    if kind == "continuous":
        return max(1.0, math.log2(a / n))
    raise ValueError(f"medium_log must be 'continuous' or 'one_plus', got {kind!r}")


def d_comm(m: int, n: int, a: int, l_bits: int, medium_log: str = "continuous",
           ) -> tuple[float, str]:
    """Squared-ℓ2 rate of A-ary estimation with m terminals × n samples × l bits, and its branch."""
    lossless = min(a * math.ceil(math.log2(n + 1)), n * max(1, math.ceil(math.log2(a))))
    if l_bits >= lossless:  # a terminal can send all its counts (or all its samples raw)
        return 0.0, "full"
    if n >= a:
        return a / (m * n * l_bits), "dense"
    if n * 2**l_bits >= a:
        return medium_log_factor(a, n, medium_log) / (m * l_bits), "medium"
    return a / (m * n * 2**l_bits), "sparse"


def rate_at_k(bias: float, k: int, m: int, n: int, l_bits: int, regression: bool = False,
              scale: float = 1.0, c_v: float = 1.0, medium_log: str = "continuous",
              ) -> tuple[float, str]:
    """``b(K) + c_v·scale·K·max(1/(mn), D_comm)`` and the branch that sets the variance."""
    a = 2 * k if regression else k
    d, branch = d_comm(m, n, a, l_bits, medium_log)
    central = 1.0 / (m * n)
    if central >= d:
        branch = "centralised"
    return bias + c_v * scale * k * max(central, d), branch


def admissible_k(k_grid: Sequence[int], m: int, l_bits: int) -> list[int]:
    cap = max(m * l_bits, 2)
    ks = [k for k in k_grid if k <= cap]
    if not ks:
        raise ValueError(f"no K in the grid satisfies K <= max(ml, 2) = {cap}")
    return ks


def theory_rate(bias_of: Callable[[int], float], k_grid: Sequence[int], m: int, n: int,
                l_bits: int, regression: bool = False, scale: float = 1.0,
                c_v: float = 1.0, medium_log: str = "continuous",
                uninformed: float | None = None) -> dict:
    """``R_th`` at one point: its value, the minimising K and the regime label at that K.

    The label is the branch of D_comm at K_th; a dense point whose K_th is capped by ``ml``
    (rather than by the bias) is ``ultra_dense``. At ``l = 0`` it is ``uninformed``, the error
    of the estimator without data (the same for every K; K_th is the grid's smallest).
    """
    if m < 1 or n < 1 or l_bits < 0:
        raise ValueError(f"need m, n >= 1 and l >= 0; got m={m}, n={n}, l={l_bits}")
    if l_bits == 0:
        if uninformed is None:
            raise ValueError("R_th at l = 0 needs the uninformed estimator's error")
        return {"r_th": float(uninformed), "k_th": min(k_grid), "regime": "uninformed"}
    ks = admissible_k(k_grid, m, l_bits)
    vals = [rate_at_k(bias_of(k), k, m, n, l_bits, regression, scale, c_v, medium_log)
            for k in ks]
    i = int(np.argmin([v for v, _ in vals]))
    regime = vals[i][1]
    if regime == "full":
        regime = "centralised"
    capped_by_ml = m * l_bits < max(k_grid) and ks[i] == ks[-1]
    if regime == "dense" and capped_by_ml:
        regime = "ultra_dense"
    return {"r_th": vals[i][0], "k_th": ks[i], "regime": regime}


def boundaries(m: int, l_bits: int, s: float) -> dict[str, float]:
    """Closed-form boundaries in n at fixed (m, l) (the regime table of the docs page)."""
    check_smoothness(s)
    if l_bits == 0:
        return {"n1_sparse_medium": math.nan, "n2_medium_dense": math.nan,
                "n3_dense_ultra": math.nan}
    root = (m * l_bits) ** (1.0 / (2 * s + 1))
    return {"n1_sparse_medium": root / 2**l_bits, "n2_medium_dense": root,
            "n3_dense_ultra": (m * l_bits) ** (2 * s + 1)}


def closed_form_regime(m: int, n: float, l_bits: int, s: float) -> str:
    if l_bits == 0:
        return "uninformed"
    b = boundaries(m, l_bits, s)
    if n < b["n1_sparse_medium"]:
        return "sparse"
    if n < b["n2_medium_dense"]:
        return "medium"
    if n < b["n3_dense_ultra"]:
        return "dense"
    return "ultra_dense"


def asymptotic_slope_n(regime: str, s: float) -> float:
    """d log R / d log n of the closed-form rates."""
    return {"sparse": -s / (s + 1), "medium": 0.0, "dense": -s / (s + 1),
            "ultra_dense": 0.0, "centralised": -2 * s / (2 * s + 1), "uninformed": 0.0}[regime]


def asymptotic_slope_m(regime: str, s: float) -> float:
    return {"sparse": -s / (s + 1), "medium": -2 * s / (2 * s + 1), "dense": -s / (s + 1),
            "ultra_dense": -2 * s, "centralised": -2 * s / (2 * s + 1), "uninformed": 0.0}[regime]


def closed_form_rate(m: int, n: float, l_bits: int, s: float) -> float:
    """The closed-form rate of the regime table (logs dropped, constants 1)."""
    regime = closed_form_regime(m, n, l_bits, s)
    if regime == "uninformed":
        return math.nan
    if regime == "sparse":
        return (m * n * 2**l_bits) ** (-s / (s + 1))
    if regime == "medium":
        return (m * l_bits) ** (-2 * s / (2 * s + 1))
    if regime == "dense":
        return (m * n * l_bits) ** (-s / (s + 1))
    return (m * l_bits) ** (-2 * s)


def local_slopes(x: Sequence[float], y: Sequence[float], log_x: bool = True) -> np.ndarray:
    """Central-difference slopes of log y against log x (or against x) at each point."""
    lx = np.log(np.asarray(x, float)) if log_x else np.asarray(x, float)
    ly = np.log(np.asarray(y, float))
    return np.gradient(ly, lx)


def fit_slope(x: Sequence[float], y: Sequence[float], log_x: bool = True) -> float:
    """Least-squares slope of log y on log x (or on x); NaN with fewer than 2 points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (y > 0) & ((x > 0) if log_x else True)
    if np.unique(x[ok]).size < 2:
        return math.nan
    lx = np.log(x[ok]) if log_x else x[ok]
    return float(np.polyfit(lx, np.log(y[ok]), 1)[0])


def rth_boundaries(bias_of: Callable[[int], float], k_grid: Sequence[int], m: int, l_bits: int,
                   n_max: int, regression: bool = False, scale: float = 1.0, c_v: float = 1.0,
                   medium_log: str = "continuous") -> dict[str, float]:
    """Boundaries in n of R_th itself (exact bias, same K grid): where the regime label at K_th
    stops being sparse, and from where on it is dense (or beyond) for every larger n up to
    ``n_max``. At moderate m the minimising K is far below its asymptotic ``(ml)^{1/(2s+1)}``,
    so these sit well below the closed-form n1, n2. None at ``l = 0``."""
    if l_bits == 0:
        return {"rth_n1_sparse_medium": math.nan, "rth_n2_medium_dense": math.nan}
    labels = [theory_rate(bias_of, k_grid, m, n, l_bits, regression, scale, c_v,
                          medium_log)["regime"] for n in range(1, n_max + 1)]
    not_sparse = next((i + 1 for i, r in enumerate(labels) if r != "sparse"), math.nan)
    dense_from = math.nan
    for i in range(n_max - 1, -1, -1):
        if labels[i] in ("sparse", "medium"):
            break
        dense_from = i + 1
    return {"rth_n1_sparse_medium": not_sparse, "rth_n2_medium_dense": dense_from}
