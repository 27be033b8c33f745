"""Examples of the user-defined pieces that conf names as ``"module:attr"``: what a user writes
in their own module to add a noise scale or a noise law without editing this room. The default
run uses them (``conf/base/parameters_sgd_hitting.yml``, experiments ``l1_exact_tanh`` and
``l1_exact_uniform``).

- a state-dependent scale ``σ(x)`` has the signature of a landscape's gradient:
  ``scale_fn(coords, xp)`` → one array per coordinate;
- a unit noise law is an object with ``sample(rng, shape)``, ``log_mgf(p)``, ``variance``,
  ``continuous`` and ``cdf(z)`` + ``support`` (or ``atoms``), returned by a factory called with
  the experiment's ``noise.options``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def tanh_scale(coords: tuple[Any, ...], xp: Any) -> tuple[Any, ...]:
    """σ(x) = 1 + 0.25 tanh(x): the noise grows to the right of the origin."""
    return (1.0 + 0.25 * xp.tanh(coords[0]),)


class UniformLaw:
    """ξ uniform on [-√3, √3]: centred, unit variance, bounded, continuous;
    ``log E e^{pξ} = log(sinh(√3 p)/(√3 p))``."""

    continuous = True
    variance = 1.0
    support = (-math.sqrt(3.0), math.sqrt(3.0))

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), size=shape)

    def log_mgf(self, p: float) -> float:
        a = math.sqrt(3.0) * abs(p)
        if a < 1e-8:
            return a * a / 6
        return a + math.log1p(-math.exp(-2 * a)) - math.log(2 * a)

    def cdf(self, z: np.ndarray) -> np.ndarray:
        return np.clip((np.asarray(z, float) + math.sqrt(3.0)) / (2 * math.sqrt(3.0)), 0, 1)


def uniform_law() -> UniformLaw:
    return UniformLaw()
