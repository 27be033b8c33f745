"""Examples of the Python callables that conf can name as ``"module:attr"``.

``functions.<name>.callable`` names a target function ``f(x)``; ``models.<name>.sigma`` a
noise scale ``σ(x)``; ``models.<name>.law`` a noise law ``law(f, x)`` that returns a frozen
scipy.stats distribution of Y given f(x) and x (vectorised: f and x are arrays of one shape). A
user's own module works the same way, e.g. ``law: "my_package.noise:student_t"``.

``gaussian_law`` and ``poisson_law`` restate two built-in models as user laws; the tests check
that the generic path (quadrature or an exact sum over the law's survival function) gives the
built-in closed forms.
"""

from __future__ import annotations

import numpy as np

from icml25.core.lazy_import import lazy_module

stats = lazy_module("scipy.stats")

NB_DISPERSION = 2.0


def bump(x: np.ndarray) -> np.ndarray:
    """A smooth target, ``1 + 0.4·exp(-((x - 0.3)/0.1)²)`` (a density up to normalisation)."""
    return 1.0 + 0.4 * np.exp(-(((x - 0.3) / 0.1) ** 2))


def d1(x: np.ndarray) -> np.ndarray:
    """D1, ``1 + 0.5·cos(2πx)``, as a user function (the tests compare it with the built-in)."""
    return 1.0 + 0.5 * np.cos(2 * np.pi * x)


def sigma_sqrt(x: np.ndarray) -> np.ndarray:
    """A state-dependent noise scale ``σ(x) = 0.2 + 0.5·sqrt(x)``."""
    return 0.2 + 0.5 * np.sqrt(x)


def gaussian_law(f: np.ndarray, x: np.ndarray):
    """``Y ~ N(f(x), (0.3 + 0.4x)²)``: the built-in heteroskedastic model as a user law."""
    return stats.norm(loc=f, scale=0.3 + 0.4 * x)


def poisson_law(f: np.ndarray, x: np.ndarray):
    """``Y ~ Poisson(f(x))``: the built-in Poisson model as a user law."""
    return stats.poisson(np.broadcast_to(f, np.broadcast_shapes(np.shape(f), np.shape(x))))


def negative_binomial_counts(f: np.ndarray, x: np.ndarray):
    """Over-dispersed counts: mean f(x), variance ``f + f²/r`` with ``r = 2`` (scipy's
    ``nbinom(r, r/(r + f))``)."""
    r = NB_DISPERSION
    return stats.nbinom(r, r / (r + np.broadcast_to(f, np.broadcast_shapes(np.shape(f),
                                                                           np.shape(x)))))
