"""Meta-game quantities of symmetric two-player PSRO: RRD meta-solver, welfare and regret.

docs/papers/ex2psro.md ("The method"): projected replicator dynamics (PRD; Lanctot et al. 2017)
started at the uniform strategy, step ``dt``, exploration floor ``gamma``, stopped as soon as the
total regret of the profile falls below the threshold ``lam``. The threshold anneals linearly over
PSRO iterations (``regret_lambda``). In the symmetric game both players hold the same strategy, so
one strategy is iterated (player 1 copies player 0).

U[i, j] is the row player's expected return of policy i against policy j.
"""

from __future__ import annotations

import numpy as np


def check_payoff_matrix(payoffs: np.ndarray, name: str = "payoffs") -> np.ndarray:
    """``payoffs`` as a finite, square, non-empty float matrix, else a clear ValueError."""
    arr = np.asarray(payoffs, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty square matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    return arr


def simplex_projection(vector: np.ndarray, gamma: float = 0.0) -> np.ndarray:
    """Euclidean projection onto {x : sum x = 1, x >= gamma} (Wang & Carreira-Perpinan 2013)."""
    v = np.asarray(vector, dtype=float)
    n = v.size
    idx = np.arange(1, n + 1)
    u = np.sort(v)[::-1]
    shift = (1.0 - np.cumsum(u) - (n - idx) * gamma) / idx
    rho = int(np.searchsorted(u + shift <= gamma, True))
    return np.maximum(v + shift[rho - 1], gamma)


def total_regret(payoffs: np.ndarray, sigma: np.ndarray) -> float:
    """Sum over both players of max_k u(k, sigma) - u(sigma, sigma) in the symmetric game."""
    values = payoffs @ sigma
    return float(2.0 * (values.max() - sigma @ values))


def regret(payoffs: np.ndarray, sigma: np.ndarray) -> float:
    """One player's regret max_pi u(pi, sigma) - u(sigma, sigma), clipped at 0."""
    values = np.asarray(payoffs, dtype=float) @ sigma
    return float(max(0.0, values.max() - sigma @ values))


def welfare(payoffs: np.ndarray, sigma: np.ndarray) -> float:
    """Expected welfare W(sigma) = sigma^T (U + U^T) sigma: the sum of both players' returns."""
    u = np.asarray(payoffs, dtype=float)
    return float(sigma @ (u + u.T) @ sigma)


def rrd(payoffs: np.ndarray, lam: float, dt: float = 1e-3, max_steps: int = 50_000,
        gamma: float = 0.0) -> tuple[np.ndarray, int]:
    """Regret-thresholded projected replicator dynamics on a symmetric game.

    Returns ``(sigma, steps)``: the last PRD iterate (not an average) once total regret < ``lam``,
    or after ``max_steps`` steps.
    """
    u = check_payoff_matrix(payoffs)
    n = u.shape[0]
    sigma = np.full(n, 1.0 / n)
    for step in range(max_steps):
        values = u @ sigma
        mean = sigma @ values
        if 2.0 * (values.max() - mean) < lam:
            return sigma, step
        sigma = simplex_projection(sigma + dt * sigma * (values - mean), gamma)
    return sigma, max_steps


def regret_lambda(iteration: int, lam_init: float, lam_final: float, steps: int,
                  floor: float = 1e-3) -> float:
    """RRD threshold at PSRO iteration ``iteration`` (0-based): linear from ``lam_init`` to
    ``lam_final`` over ``steps`` iterations, never below ``floor``."""
    frac = min(iteration / steps, 1.0) if steps > 0 else 1.0
    return float(max(lam_init + (lam_final - lam_init) * frac, floor))


def kl_weight(population_size: int, lambda0: float, k_lambda: int) -> float:
    """KL weight of the regularised response: lambda0 * max(0, 1 - (k - 1) / K_lambda)."""
    return float(lambda0 * max(0.0, 1.0 - (population_size - 1) / k_lambda))


SCALES = ("payoff_range", "absolute")


def game_payoff_range(game) -> float | None:
    """Width of one player's episode-return range when the game states it: the in-repo games'
    ``payoff_range()``; a pyspiel game's ``max_utility() - min_utility()`` (bargaining: 10,
    every player's values of the pool sum to 10); ``None`` when the game has no stated bound
    (Harvest)."""
    if hasattr(game, "payoff_range"):
        return float(game.payoff_range())
    if hasattr(game, "max_utility"):
        return float(game.max_utility() - game.min_utility())
    return None


def threshold_scale(game, payoffs: np.ndarray, mode: str) -> float:
    """The factor that turns the RRD threshold schedule into return units.

    ``absolute``: 1 (the thresholds are in return units, as the authors' code sets them per game).
    ``payoff_range``: the game's payoff range (:func:`game_payoff_range`), or, for a game that
    states none, the range ``max U - min U`` of the current empirical game (0 for a one-policy
    game, whose only strategy has zero regret anyway)."""
    if mode not in SCALES:
        raise ValueError(f"unknown RRD threshold scale {mode!r}; known: {SCALES}")
    if mode == "absolute":
        return 1.0
    width = game_payoff_range(game)
    if width is None:
        u = check_payoff_matrix(payoffs)
        width = float(u.max() - u.min())
    if not np.isfinite(width) or width < 0:
        raise ValueError(f"payoff range must be finite and non-negative, got {width}")
    return width
