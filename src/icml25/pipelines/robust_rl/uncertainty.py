"""Support functions of (s, a)-rectangular uncertainty sets through their dual forms.

For a nominal row ``p`` in the simplex and a value vector ``V``, the support function is
``sigma(V) = min_{q in P(p, rho)} q . V`` (docs/papers/robust_rl.md, "The method"). Every
function here is vectorised over the rows of ``p`` (shape ``(..., S)``) with one shared ``V``
(shape ``(S,)``), which is how the robust Bellman operator uses them.

Sets and their duals (Iyengar 2005; Nilim & El Ghaoui 2005; Shi et al. 2023, Lemma 1-3):

* contamination ``{(1-R) p + R q : q in simplex}``: ``(1-R) p.V + R min V``;
* total variation ``1/2 ||q - p||_1 <= rho``: move ``min(rho, 1 - p(argmin V))`` of mass from the
  highest values to ``argmin V`` (greedy form of ``max_a {p.min(V, a) - rho (a - min V)}``);
* chi-square ``sum (q - p)^2 / p <= rho``: ``max_a {p.[V]_a - sqrt(rho Var_p([V]_a))}``;
* KL ``KL(q || p) <= rho``: ``max_{lam >= 0} {-lam log sum p exp(-V / lam) - lam rho}``, searched
  on a bracket proved to hold the maximiser (:func:`kl_lambda_bracket`), with no fixed cap.

Chi-square and KL balls cannot put mass outside the support of ``p``; TV and contamination can.
That asymmetry is kept (empirical centres are never smoothed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS = ("contamination", "tv", "chi2", "kl")
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class UncertaintyError(ValueError):
    """An uncertainty set that is not well defined (unknown kind, radius out of range)."""


def check_radius(kind: str, radius: float) -> float:
    """``radius`` as a float if it is valid for ``kind``, else a clear :class:`UncertaintyError`.

    Contamination and TV radii are probabilities of moved mass and lie in ``[0, 1]``; chi-square
    and KL radii are divergences and lie in ``[0, inf)``.
    """
    if kind not in KINDS:
        raise UncertaintyError(f"uncertainty type {kind!r} is unknown; expected one of {KINDS}")
    radius = float(radius)
    if not math.isfinite(radius) or radius < 0:
        raise UncertaintyError(f"{kind} radius must be finite and >= 0; got {radius}")
    if kind in ("contamination", "tv") and radius > 1:
        raise UncertaintyError(f"{kind} radius must lie in [0, 1] (moved probability mass); "
                               f"got {radius}")
    return radius


def sigma_contamination(p: np.ndarray, V: np.ndarray, radius: float) -> np.ndarray:
    """``(1 - R) p.V + R min_s V(s)`` (the adversary may send mass R anywhere)."""
    return (1.0 - radius) * (p @ V) + radius * V.min()


def sigma_tv(p: np.ndarray, V: np.ndarray, radius: float) -> np.ndarray:
    """Worst case over the TV ball: shift ``delta = min(rho, 1 - p(argmin V))`` of mass from the
    states with the highest ``V`` to ``argmin V`` (exact; a linear program over the ball)."""
    order = np.argsort(-V, kind="stable")
    v_desc = V[order]
    p_desc = p[..., order]
    low = V.min()
    i_min = int(np.argmin(V))
    delta = np.minimum(radius, 1.0 - p[..., i_min])[..., None]
    cum = np.cumsum(p_desc, axis=-1)
    removed = np.minimum(cum, delta) - np.minimum(cum - p_desc, delta)
    return p @ V - removed @ v_desc + delta[..., 0] * low


def sigma_tv_dual(p: np.ndarray, V: np.ndarray, radius: float) -> np.ndarray:
    """The dual ``max_{a in [min V, max V]} {p.min(V, a) - rho (a - min V)}``; piecewise linear
    and concave in ``a``, so the maximum sits at one of the values of ``V`` (cross-check)."""
    alphas = np.unique(V)
    clipped = np.minimum(V[None, :], alphas[:, None])  # (K, S)
    vals = p @ clipped.T - radius * (alphas - V.min())  # (..., K)
    return vals.max(axis=-1)


def _chi2_objective(p: np.ndarray, V: np.ndarray, alpha: np.ndarray, radius: float) -> np.ndarray:
    """``p.[V]_a - sqrt(rho Var_p([V]_a))`` for one ``a`` per row (alpha shape ``(...,)``)."""
    clipped = np.minimum(V, alpha[..., None])
    mean = np.sum(p * clipped, axis=-1)
    var = np.sum(p * (clipped - mean[..., None]) ** 2, axis=-1)
    return mean - np.sqrt(radius * np.maximum(var, 0.0))


def _golden_max(func, lo: np.ndarray, hi: np.ndarray, iters: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised golden-section maximisation of a unimodal ``func`` on ``[lo, hi]`` per row."""
    a, b = lo.copy(), hi.copy()
    c = b - _GOLDEN * (b - a)
    d = a + _GOLDEN * (b - a)
    fc, fd = func(c), func(d)
    for _ in range(iters):
        left = fc >= fd  # keep [a, d], else [c, b]
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        x_new = np.where(left, b - _GOLDEN * (b - a), a + _GOLDEN * (b - a))
        f_new = func(x_new)
        c, d, fc, fd = (np.where(left, x_new, d), np.where(left, c, x_new),
                        np.where(left, f_new, fd), np.where(left, fc, f_new))
    x = np.where(fc >= fd, c, d)
    return x, np.maximum(fc, fd)


def sigma_chi2(p: np.ndarray, V: np.ndarray, radius: float, iters: int = 30) -> np.ndarray:
    """Chi-square dual ``max_a {p.[V]_a - sqrt(rho Var_p([V]_a))}`` (Shi et al. 2023, Lemma 2).

    The objective is concave in ``a``: evaluate it at every value of ``V``, then refine by a
    golden-section search between the neighbours of the best value (the maximiser lies there).
    """
    p = np.asarray(p, dtype=float)
    if radius == 0.0:
        return p @ V
    grid = np.unique(V)
    clipped = np.minimum(V, grid[:, None])  # (K, S): [V]_a for every grid value a
    mean = p @ clipped.T  # (..., K)
    second = p @ (clipped**2).T
    vals = mean - np.sqrt(radius * np.maximum(second - mean**2, 0.0))
    k = vals.argmax(axis=-1)
    lo = grid[np.maximum(k - 1, 0)]
    hi = grid[np.minimum(k + 1, grid.size - 1)]
    _, refined = _golden_max(lambda a: _chi2_objective(p, V, a, radius), lo, hi, iters)
    return np.maximum(vals.max(axis=-1), refined)


def _kl_log_mgf(p: np.ndarray, shifted: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``log sum_s p(s) exp(-shifted(s) / lam)`` for ``lam`` of shape ``(..., G)`` and rows
    ``p``, ``shifted`` of shape ``(..., S)`` (``shifted >= 0`` on the support of ``p``).

    Two forms, each where it is accurate: log-sum-exp when some exponent is large (small
    ``lam``), and ``log1p(sum p expm1(-x / lam))`` when every exponent is below 1 in size (large
    ``lam``: there the value is ``-p.V / lam + O(lam^-2)``, tiny, and the plain form would lose
    it to rounding)."""
    x = shifted[..., None, :] / lam[..., None]  # (..., G, S)
    with np.errstate(divide="ignore"):
        z = np.log(p)[..., None, :] - x
    zmax = z.max(axis=-1, keepdims=True)
    lse = zmax[..., 0] + np.log(np.sum(np.exp(z - zmax), axis=-1))
    small = np.log1p(np.sum(p[..., None, :] * np.expm1(-x), axis=-1))
    return np.where(x.max(axis=-1) < 1.0, small, lse)


def _kl_objective(p: np.ndarray, shifted: np.ndarray, lam: np.ndarray, radius: float) -> np.ndarray:
    """``-lam log sum_s p(s) exp(-shifted(s) / lam) - lam rho`` for one ``lam`` per row."""
    return -lam * _kl_log_mgf(p, shifted, lam[..., None])[..., 0] - lam * radius


def kl_lambda_bracket(p: np.ndarray, shifted: np.ndarray, radius: float,
                      rel_low: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """A bracket ``[lam_lo, lam_hi]`` per row that holds the maximiser of the KL dual.

    Upper end, proved: by Jensen ``-lam log E_p exp(-V / lam) <= E_p V``, so the objective is at
    most ``p.V - lam rho`` (``V`` shifted to minimum 0 on the support), which is negative, i.e.
    below the ``lam -> 0`` limit 0, for every ``lam > p.V / rho``. No fixed cap is needed: at
    ``rho -> 0`` the maximiser ``~ sqrt(Var_p(V) / (2 rho))`` grows without bound and the bracket
    grows with it. Lower end: ``rel_low`` times the span; below it the objective differs from its
    ``lam -> 0`` limit (a candidate that is always kept) by at most
    ``lam (log(1 / p_min) + rho)``, which is ``<= 1e-9 span (log(1 / p_min) + rho)``."""
    span = np.maximum(shifted.max(axis=-1), 1e-300)
    lam_lo = rel_low * span
    lam_hi = np.maximum(np.sum(p * shifted, axis=-1) / radius, lam_lo * 10.0)
    return lam_lo, lam_hi


def on_support(p: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``p`` and ``x`` (both ``(..., S)``) cut to the columns of ``p``'s support: ``(...,
    k)`` arrays, ``k`` the largest support size of a row, the support's columns first and in
    their order, a shorter row padded with ``p = 0`` columns (which every ball that keeps the
    support ignores). The arrays themselves when the cut saves less than half of the columns."""
    support = p > 0
    k = int(support.sum(axis=-1).max(initial=0))
    if 2 * k > p.shape[-1]:
        return p, x
    idx = np.argsort(~support, axis=-1, kind="stable")[..., :max(k, 1)]
    return (np.take_along_axis(p, idx, axis=-1),
            np.take_along_axis(np.broadcast_to(x, p.shape), idx, axis=-1))


def sigma_kl(p: np.ndarray, V: np.ndarray, radius: float, iters: int = 40,
             grid_points: int = 40, compact: bool = True) -> np.ndarray:
    """KL dual ``max_{lam >= 0} {-lam log E_p exp(-V / lam) - lam rho}`` (Hu & Hong 2013).

    ``V`` is shifted by the minimum over the support of each row (translation equivariance), and
    ``lam`` is searched in log scale on the bracket of :func:`kl_lambda_bracket` (its upper end
    ``p.V / rho`` is proved to hold the maximiser, so no fixed cap): a ``grid_points`` grid, then
    golden section between the grid neighbours of the best point (the objective is concave in
    ``lam``, hence unimodal in ``log lam``). The ``lam -> 0`` limit, the minimum over the support,
    is always a candidate; states with ``p(s) = 0`` carry no mass and are ignored, and with
    ``compact`` the search runs on the support's columns only (:func:`on_support`: a sparse
    Garnet's rows reach 5 of 50 states, so a tenth of the work; equal to the dense search to
    rounding, tested).
    """
    p = np.asarray(p, dtype=float)
    if radius == 0.0:
        return p @ V
    support = p > 0
    low = np.where(support, V, np.inf).min(axis=-1)
    high = np.where(support, V, -np.inf).max(axis=-1)
    shifted = np.where(support, V - low[..., None], 0.0)
    if compact:
        p, shifted = on_support(p, shifted)
    lam_lo, lam_hi = kl_lambda_bracket(p, shifted, radius)
    log_lo, log_hi = np.log(lam_lo), np.log(lam_hi)
    ts = np.linspace(0.0, 1.0, grid_points)
    grid = log_lo[..., None] + ts * (log_hi - log_lo)[..., None]  # (..., G)
    lam = np.exp(grid)
    vals = -lam * _kl_log_mgf(p, shifted, lam) - lam * radius
    k = vals.argmax(axis=-1)
    take = np.take_along_axis
    lo = take(grid, np.maximum(k - 1, 0)[..., None], axis=-1)[..., 0]
    hi = take(grid, np.minimum(k + 1, ts.size - 1)[..., None], axis=-1)[..., 0]
    _, refined = _golden_max(lambda t: _kl_objective(p, shifted, np.exp(t), radius), lo, hi, iters)
    best = np.maximum(np.maximum(vals.max(axis=-1), refined), 0.0)  # 0 = the lam -> 0 limit
    flat = (high - low) <= 1e-12
    return low + np.where(flat, 0.0, best)


@dataclass(frozen=True)
class UncertaintySet:
    """An (s, a)-rectangular ball of radius ``radius`` around every row of a nominal kernel."""

    kind: str
    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_radius(self.kind, self.radius))

    @property
    def label(self) -> str:
        return f"{self.kind}{self.radius:g}"

    def sigma(self, p: np.ndarray, V: np.ndarray) -> np.ndarray:
        """``min_{q in ball(p)} q . V`` for every row of ``p`` (shape ``(..., S)``)."""
        V = np.asarray(V, dtype=float)
        if self.kind == "contamination":
            return sigma_contamination(p, V, self.radius)
        if self.kind == "tv":
            return sigma_tv(p, V, self.radius)
        if self.kind == "chi2":
            return sigma_chi2(p, V, self.radius)
        return sigma_kl(p, V, self.radius)

    def sample_member(self, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A random kernel inside the ball: rows ``(1 - t) p + t u`` with ``u`` Dirichlet(1).

        Contamination: ``t = R`` (exactly a member). TV: ``t = rho U`` so ``1/2||q-p|| <= t``.
        Chi-square and KL keep the support of ``p``: ``u`` is drawn on it and ``t`` is shrunk by
        bisection until the divergence is within the radius.
        """
        p = np.asarray(p, dtype=float)
        if self.kind in ("contamination", "tv"):
            u = rng.dirichlet(np.ones(p.shape[-1]), size=p.shape[:-1])
            t = self.radius if self.kind == "contamination" else self.radius * rng.random(
                p.shape[:-1])[..., None]
            return (1.0 - t) * p + t * u
        support = p > 0
        u = rng.gamma(1.0, size=p.shape) * support
        u = u / u.sum(axis=-1, keepdims=True)
        t = np.full((*p.shape[:-1], 1), rng.random())
        for _ in range(60):
            q = (1.0 - t) * p + t * u
            bad = divergence(self.kind, q, p) > self.radius
            if not bad.any():
                break
            t = np.where(bad[..., None], t / 2.0, t)
        return (1.0 - t) * p + t * u


def divergence(kind: str, q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The distance that defines each ball, row-wise (contamination: the needed mixing weight)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "tv":
            return 0.5 * np.abs(q - p).sum(axis=-1)
        if kind == "chi2":
            return np.where(p > 0, (q - p) ** 2 / np.where(p > 0, p, 1.0),
                            np.where(q > 0, np.inf, 0.0)).sum(axis=-1)
        if kind == "kl":
            terms = np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0) / np.where(p > 0, p, 1.0)),
                             0.0)
            terms = np.where((q > 0) & (p <= 0), np.inf, terms)
            return terms.sum(axis=-1)
        if kind == "contamination":
            # smallest R with q = (1 - R) p + R u, u >= 0: R = max_s (1 - q(s)/p(s)) over p > 0
            ratio = np.where(p > 0, 1.0 - q / np.where(p > 0, p, 1.0), 0.0)
            return np.maximum(ratio.max(axis=-1), 0.0)
    raise UncertaintyError(f"uncertainty type {kind!r} is unknown; expected one of {KINDS}")
