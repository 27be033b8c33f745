"""User-defined pieces named in conf as 'module:attr' by the sgd_hitting tests: a rotated
three-hump camel, a state-dependent noise scale and two unit noise laws. Written as a user
would write them, against the room's public classes only."""

from __future__ import annotations

import math

import numpy as np

from icml25.pipelines.sgd_hitting.landscapes import Landscape, camel


def rotated_camel(angle: float, box: float = 2.5) -> Landscape:
    """``f_R(y) = f(R y)`` for the camel f and the rotation R by ``angle``: the SGD chain on
    f with noise Σ maps to the chain on f_R with noise Rᵀ Σ R through y = Rᵀ x."""
    base = camel()
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, -s], [s, c]])

    def to_x(coords):
        y1, y2 = coords
        return (c * y1 - s * y2, s * y1 + c * y2)

    def f(coords, xp):
        return base.f(to_x(coords), xp)

    def grad(coords, xp):
        g1, g2 = base.grad(to_x(coords), xp)
        return (c * g1 + s * g2, -s * g1 + c * g2)  # Rᵀ ∇f(R y)

    def hess(p):
        return rot.T @ base.hessian(rot @ np.asarray(p, float)) @ rot

    return Landscape(f"camel_rotated_{angle:g}", 2, f, grad, hess, ((-box, box), (-box, box)))


def tanh_scale(coords, xp):
    """σ(x) = 1 + 0.25 tanh(x): noisier to the right of the origin."""
    return (1.0 + 0.25 * xp.tanh(coords[0]),)


class UniformLaw:
    """ξ uniform on [-√3, √3] (mean 0, variance 1): bounded, continuous."""

    continuous = True
    variance = 1.0
    support = (-math.sqrt(3.0), math.sqrt(3.0))

    def sample(self, rng, shape):
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), size=shape)

    def log_mgf(self, p):
        a = math.sqrt(3.0) * abs(p)
        if a < 1e-8:
            return a * a / 6
        return a + math.log1p(-math.exp(-2 * a)) - math.log(2 * a)  # log(sinh a / a)

    def cdf(self, z):
        return np.clip((np.asarray(z, float) + math.sqrt(3.0)) / (2 * math.sqrt(3.0)), 0, 1)


class GaussianLaw:
    """A standard normal written as a user law: it must reproduce the built-in one exactly."""

    continuous = True
    variance = 1.0
    support = (-9.0, 9.0)

    def sample(self, rng, shape):
        return rng.standard_normal(shape)

    def log_mgf(self, p):
        return 0.5 * p * p

    def cdf(self, z):
        from scipy.special import ndtr
        return ndtr(z)


class ThreePointLaw:
    """ξ ∈ {-a, 0, a} with weights (w, 1 - 2w, w), a = 1/√(2w): an atomic law of variance 1."""

    continuous = False
    variance = 1.0

    def __init__(self, w: float = 0.25):
        self.w = w
        self.a = 1.0 / math.sqrt(2 * w)
        self.atoms = (np.array([-self.a, 0.0, self.a]), np.array([w, 1 - 2 * w, w]))

    def sample(self, rng, shape):
        return rng.choice(self.atoms[0], size=shape, p=self.atoms[1])

    def log_mgf(self, p):
        return math.log(1 - 2 * self.w + 2 * self.w * math.cosh(self.a * p))


def uniform_law():
    return UniformLaw()


def gaussian_law():
    return GaussianLaw()


def three_point_law(w: float = 0.25):
    return ThreePointLaw(w)


def not_a_landscape():
    return 42


class ShiftedUniformLaw(UniformLaw):
    """Uniform on [-√3 + 0.1, √3 + 0.1]: not centred (the theory's Z has mean 0)."""

    support = (-math.sqrt(3.0) + 0.1, math.sqrt(3.0) + 0.1)

    def cdf(self, z):
        return super().cdf(np.asarray(z, float) - 0.1)


def shifted_uniform_law():
    return ShiftedUniformLaw()


def tilted_well(tilt: float = 0.1, box: tuple[float, float] = (-3.0, 3.0)) -> Landscape:
    """A user's 1-D loss: ``(x² - 1)²/4 - t x`` written from scratch (L1's formula)."""

    def f(coords, xp):
        x = coords[0]
        return (x * x - 1) ** 2 / 4 - tilt * x

    def grad(coords, xp):
        x = coords[0]
        return (x**3 - x - tilt,)

    def hess(p):
        return np.array([[3 * p[0] ** 2 - 1]])

    return Landscape("user_tilted_well", 1, f, grad, hess, (tuple(box),))
