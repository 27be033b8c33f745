"""Exact classical simulation of quantum mean estimation by canonical amplitude estimation.

The quantum transition oracle ``O_{s,a}: |0> -> sum_j sqrt(P(j|s,a)) |j>`` followed by a flag qubit
that marks next state ``j`` is an algorithm ``A_j`` whose success amplitude is
``sqrt(p_j) = sin(pi theta_j)``. Canonical amplitude estimation (Brassard, Høyer, Mosca, Tapp 2002,
Thm. 12) with ``M = 2^m`` Grover powers measures ``y in {0, .., M-1}`` with the pmf

    f(y) = 1/2 [F_M(y/M - theta) + F_M(y/M + theta)],  F_M(d) = sin^2(M pi d) / (M^2 sin^2(pi d)),

(``F_M(d) = 1`` where ``sin(pi d) = 0``) and returns ``p~ = sin^2(pi y / M)``. Sampling ``y`` from
``f`` is exactly the output distribution of the ideal circuit (checked against a qiskit-aer
circuit in :mod:`icml25.pipelines.quantum_rl.circuits`). With probability ``>= 8/pi^2`` a single
run satisfies ``|p~ - p| <= 2 pi sqrt(p(1-p))/M + pi^2/M^2``; the median of ``K`` runs fails only
when at least ``(K+1)/2`` runs fail (Montanaro 2015, Lemma 1 — the "QBounded" estimator used by the
quantum average-reward RL paper of Ganguly, Xu and Aggarwal, ICML 2025).

Everything here is plain numpy; nothing needs qiskit.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy.stats import binom

#: Per-run failure probability of the single-run AE bound: 1 - 8/pi^2 ~ 0.189.
SINGLE_RUN_FAILURE = 1.0 - 8.0 / math.pi**2

BudgetMode = Literal["paper", "split"]


def theta_of(p: np.ndarray | float) -> np.ndarray:
    """``theta in [0, 1/2]`` with ``p = sin^2(pi theta)``; refuses probabilities outside [0, 1]."""
    p = np.asarray(p, dtype=float)
    if not np.all(np.isfinite(p)) or np.any(p < -1e-12) or np.any(p > 1 + 1e-12):
        raise ValueError(f"amplitude estimation needs probabilities in [0, 1]; got {p}")
    return np.arcsin(np.sqrt(np.clip(p, 0.0, 1.0))) / math.pi


def fejer_kernel(d: np.ndarray, M: int) -> np.ndarray:
    """``F_M(d) = sin^2(M pi d) / (M^2 sin^2(pi d))``, equal to 1 where ``sin(pi d) = 0``."""
    d = np.asarray(d, dtype=float)
    den = np.sin(math.pi * d)
    num = np.sin(M * math.pi * d)
    out = np.ones_like(d)
    mask = np.abs(den) > 1e-12
    out[mask] = num[mask] ** 2 / (M**2 * den[mask] ** 2)
    return out


def ae_pmf(p: np.ndarray | float, M: int) -> np.ndarray:
    """Outcome pmf ``f(y)``, ``y = 0..M-1``, of canonical AE for success probability ``p``.

    ``p`` may be an array; the result has shape ``p.shape + (M,)``.
    """
    if M < 1 or M & (M - 1):
        raise ValueError(f"M must be a power of two >= 1; got {M}")
    theta = theta_of(p)[..., None]
    grid = np.arange(M) / M
    return 0.5 * (fejer_kernel(grid - theta, M) + fejer_kernel(grid + theta, M))


def ae_estimates(M: int) -> np.ndarray:
    """The estimate ``sin^2(pi y / M)`` attached to each outcome ``y``."""
    return np.sin(math.pi * np.arange(M) / M) ** 2


def ae_error_bound(p: np.ndarray | float, M: int) -> np.ndarray:
    """Single-run bound ``2 pi sqrt(p(1-p))/M + pi^2/M^2`` (holds with probability >= 8/pi^2)."""
    p = np.asarray(p, dtype=float)
    return 2 * math.pi * np.sqrt(p * (1 - p)) / M + math.pi**2 / M**2


def sample_ae_outcomes(p: np.ndarray, M: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` independent AE outcomes ``y`` for every entry of the 1-d array ``p``: (len(p), size).

    Inverse-CDF sampling from the exact pmf, one coordinate at a time (memory ``O(M)``).
    """
    p = np.atleast_1d(np.asarray(p, dtype=float))
    pmf = ae_pmf(p, M)
    u = rng.random((p.size, size))
    out = np.empty((p.size, size), dtype=np.int64)
    for i in range(p.size):
        cdf = np.cumsum(pmf[i])
        out[i] = np.minimum(np.searchsorted(cdf, u[i] * cdf[-1], side="right"), M - 1)
    return out


def median_of_k_estimate(p: np.ndarray, M: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Median over ``K`` (odd) independent AE runs of ``sin^2(pi y / M)``, per entry of ``p``."""
    if K < 1 or K % 2 == 0:
        raise ValueError(f"K must be a positive odd integer; got {K}")
    y = sample_ae_outcomes(p, M, K, rng)
    return np.median(ae_estimates(M)[y], axis=-1)


def median_failure_probability(K: int, q: float = SINGLE_RUN_FAILURE) -> float:
    """``P[Binomial(K, q) >= (K+1)/2]``: the median of ``K`` runs misses the single-run bound."""
    if K < 1 or K % 2 == 0:
        raise ValueError(f"K must be a positive odd integer; got {K}")
    return float(binom.sf((K + 1) // 2 - 1, K, q))


def auto_k(delta_prime: float, q: float = SINGLE_RUN_FAILURE, k_max: int = 100_001) -> int:
    """Smallest odd ``K`` whose median-failure probability is ``<= delta_prime``."""
    if not 0.0 < delta_prime < 1.0:
        raise ValueError(f"delta' must lie in (0, 1); got {delta_prime}")
    for K in range(1, k_max + 1, 2):
        if median_failure_probability(K, q) <= delta_prime:
            return K
    raise ValueError(f"no odd K <= {k_max} reaches failure probability {delta_prime:g}")


def union_bound_delta(delta: float, n_states: int, n_actions: int, horizon: int) -> float:
    """``delta' = delta / (2 S^2 A T)``: one estimate per (s, a, s') and time step (union bound)."""
    return delta / (2.0 * n_states**2 * n_actions * horizon)


def grover_power(calls: int, K: int, kappa: int = 1) -> int:
    """``M = 2^floor(log2(calls / (K kappa)))`` Grover powers from ``calls`` oracle calls.

    Returns 0 when fewer than ``2 K kappa`` calls are available (``M`` would be < 2): the caller
    then falls back to the classical empirical frequency of the epoch.
    """
    per_run = int(calls) // (K * kappa)
    return 1 << (per_run.bit_length() - 1) if per_run >= 2 else 0


def quantum_row_estimate(p_row: np.ndarray, calls: int, K: int, kappa: int,
                         budget_mode: BudgetMode, rng: np.random.Generator
                         ) -> tuple[np.ndarray | None, int]:
    """Quantum estimate of a transition row ``P(.|s, a)`` from ``calls`` single-use oracle calls.

    One median-of-``K`` AE estimate per next state ``j`` (the indicator ``1{s' = j}``), each with
    the full budget (``paper``) or ``calls // S`` of it (``split``), then clipped to [0, 1] and
    renormalised to the simplex. Returns ``(None, M)`` when the budget is too small for ``M >= 2``
    or every coordinate came out 0; the caller then uses the epoch's empirical frequency.
    """
    p_row = np.asarray(p_row, dtype=float)
    per_coordinate = calls if budget_mode == "paper" else calls // p_row.size
    M = grover_power(per_coordinate, K, kappa)
    if M < 2:
        return None, M
    est = np.clip(median_of_k_estimate(p_row, M, K, rng), 0.0, 1.0)
    total = est.sum()
    if total <= 0.0:
        return None, M
    return est / total, M


def estimator_error_table(p_values: np.ndarray, log2_n: np.ndarray, reps: int, K: int,
                          kappa: int, rng: np.random.Generator,
                          progress: bool = False) -> list[dict]:
    """Mean absolute error of the quantum (median-of-K AE) and classical (empirical mean) estimators
    of a Bernoulli mean ``p`` from ``n = 2^k`` samples/oracle calls, ``reps`` repetitions each."""
    from tqdm.auto import tqdm

    rows = []
    for k in tqdm(log2_n, desc="estimator scaling (log2 n)", disable=not progress):
        n = 1 << int(k)
        M = grover_power(n, K, kappa)
        for p in p_values:
            if M >= 2:
                y = sample_ae_outcomes(np.array([p]), M, reps * K, rng).reshape(reps, K)
                q_est = np.median(ae_estimates(M)[y], axis=1)
                rows.append({"p": float(p), "n": n, "method": "quantum", "M": M,
                             "error": float(np.mean(np.abs(q_est - p)))})
            c_est = rng.binomial(n, p, size=reps) / n
            rows.append({"p": float(p), "n": n, "method": "classical", "M": 0,
                         "error": float(np.mean(np.abs(c_est - p)))})
    return rows


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (NaN with < 2 positive points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])
