"""Benchmark loss landscapes of the sgd_hitting room (``docs/papers/sgd_hitting.md``, "Data").

Every landscape is smooth and coercive (or clamped to a box) and written so that one function
body serves NumPy arrays and torch tensors alike: ``grad(coords, xp)`` takes a tuple of
coordinate arrays (one per dimension, the many-chains layout of the simulator) and the array
module ``xp`` (``numpy`` or ``torch``) and returns one gradient array per coordinate. Writing the
update per coordinate instead of stacking was measured 2-3x faster for small ``d``.

Landscapes (chosen by this project to test the claims of Azizian, Iutzeler, Malick, Mertikopoulos,
ICML 2025):
- ``tilted_double_well`` (L1) ``f = (x²-1)²/4 - t x``;
- ``three_well`` (L2) ``f = q x² - Σ d_i exp(-(x-c_i)²/(2 w²))``;
- ``camel`` (L3) the three-hump camel ``2x² - 1.05x⁴ + x⁶/6 + xy + y²``;
- ``mexican_hat`` (L4) ``(x²+y²-1)²``: no spurious minima;
- ``cosine_bumps`` (L5) ``x²/8 + a Σ_k cos(ω_k x + φ_k)`` with seeded (ω, φ);
- ``sine_neuron`` (NN) ``mean_i (sin(w x_i) - y_i)²/2``, the one-parameter network whose
  per-sample gradients define the mini-batch noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Coords = tuple[Any, ...]


@dataclass(frozen=True)
class Target:
    """The open set U of the hitting time ``τ = min{n : x_n ∈ U}``.

    ``kind``: ``ball`` (the union of the Euclidean balls of ``radius`` around every point of
    ``centers``, one per global minimiser; ``center`` alone gives one ball), ``right_of`` /
    ``left_of`` (1-D half-lines beyond ``threshold``), ``outside`` (1-D: ``x < threshold_low``
    or ``x > threshold``, the half-lines beyond global minima on both sides of the start) or
    ``annulus`` (``| |x| - radius0 | < radius``, the circle of minimisers of the Mexican hat).
    Non-finite points are never in U (a diverged chain is not a hit).
    """

    kind: str
    center: tuple[float, ...] = ()
    radius: float = 0.0
    threshold: float = 0.0
    radius0: float = 0.0
    centers: tuple[tuple[float, ...], ...] = ()
    threshold_low: float = 0.0

    def __post_init__(self) -> None:
        if self.kind == "ball":
            if not self.centers and not self.center:
                raise ValueError("a ball target needs a center (one per global minimiser)")
            if not self.centers:
                object.__setattr__(self, "centers", (tuple(self.center),))
            if not self.center:
                object.__setattr__(self, "center", tuple(self.centers[0]))

    def contains(self, coords: Coords, xp: Any = np) -> Any:
        """Boolean array: which points (one array per coordinate) lie in U."""
        if self.kind == "right_of":
            return (coords[0] > self.threshold) & xp.isfinite(coords[0])
        if self.kind == "left_of":
            return (coords[0] < self.threshold) & xp.isfinite(coords[0])
        if self.kind == "outside":
            return ((coords[0] > self.threshold) | (coords[0] < self.threshold_low)) \
                & xp.isfinite(coords[0])
        if self.kind == "ball":
            r2 = self.radius**2
            inside = None
            for center in self.centers:
                d2 = sum((c - z) ** 2 for c, z in zip(coords, center, strict=True))
                inside = d2 < r2 if inside is None else inside | (d2 < r2)
            return inside
        if self.kind == "annulus":
            r = xp.sqrt(sum(c**2 for c in coords))
            return xp.abs(r - self.radius0) < self.radius
        raise ValueError(f"unknown target kind {self.kind!r}")


@dataclass(frozen=True)
class Landscape:
    """A loss ``f`` on R^d with its gradient, Hessian, search box and experiment defaults.

    ``box``: per-coordinate (low, high) used to search critical points and, for 1-D, to place
    the walls of the exact solver; the start point must lie inside it. ``clamp``: SGD iterates
    are clamped to ``box`` (the sine neuron, whose shallow wells never end).
    ``per_sample_grad(coords, xp)`` (finite-sum losses only) returns an array of shape
    ``(n_samples, *coords[0].shape)``; ``selected_grad(coords, idx, xp)`` the per-sample gradients
    of the samples ``idx`` (shape ``(n, b)``) at the n points, shape ``(n, b)``.
    """

    name: str
    dim: int
    f: Callable[..., Any]
    grad: Callable[..., Coords]
    hess: Callable[[np.ndarray], np.ndarray]
    box: tuple[tuple[float, float], ...]
    clamp: bool = False
    per_sample_grad: Callable[..., Any] | None = None
    selected_grad: Callable[..., Any] | None = None
    n_samples: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def value(self, point: np.ndarray) -> float:
        value = self.f(tuple(np.atleast_1d(np.asarray(point, float))), np)
        return float(np.asarray(value).reshape(-1)[0])

    def gradient(self, point: np.ndarray) -> np.ndarray:
        g = self.grad(tuple(np.atleast_1d(np.asarray(point, float))), np)
        return np.array([float(np.asarray(v).reshape(-1)[0]) for v in g])

    def hessian(self, point: np.ndarray) -> np.ndarray:
        return np.atleast_2d(self.hess(np.atleast_1d(np.asarray(point, float))))

    def check_inside(self, point: np.ndarray, what: str = "start") -> None:
        """Raise ``ValueError`` if ``point`` has the wrong size, is not finite or leaves the box."""
        point = np.atleast_1d(np.asarray(point, float))
        if point.shape != (self.dim,):
            raise ValueError(f"{self.name}: {what} {point.tolist()} must have {self.dim} "
                             "coordinate(s)")
        if not np.all(np.isfinite(point)):
            raise ValueError(f"{self.name}: {what} {point.tolist()} is not finite")
        for k, (lo, hi) in enumerate(self.box):
            if not lo <= point[k] <= hi:
                raise ValueError(f"{self.name}: {what} {point.tolist()} lies outside the domain "
                                 f"{[list(b) for b in self.box]}")


# ----------------------------------------------------------------------------------- 1-D
def tilted_double_well(tilt: float = 0.1, box: tuple[float, float] = (-3.0, 3.0)) -> Landscape:
    """L1: ``f = (x²-1)²/4 - t x``; for t = 0.1 the global minimum is the right one."""

    def f(c, xp):
        x = c[0]
        return (x * x - 1) ** 2 / 4 - tilt * x

    def grad(c, xp):
        x = c[0]
        return (x * x * x - x - tilt,)

    def hess(p):
        return np.array([[3 * p[0] ** 2 - 1]])

    return Landscape("tilted_double_well", 1, f, grad, hess, (box,), info={"tilt": tilt})


def three_well(centers: list[float], depths: list[float], width: float, quad: float,
               box: tuple[float, float] = (-5.0, 5.0)) -> Landscape:
    """L2: ``f = q x² - Σ_i d_i exp(-(x - c_i)² / (2 w²))`` (three Gaussian wells)."""
    cs, ds = list(map(float, centers)), list(map(float, depths))
    s2 = width * width

    def f(c, xp):
        x = c[0]
        return quad * x * x - sum(d * xp.exp(-(x - m) ** 2 / (2 * s2))
                                  for m, d in zip(cs, ds, strict=True))

    def grad(c, xp):
        x = c[0]
        return (2 * quad * x + sum(d * (x - m) / s2 * xp.exp(-(x - m) ** 2 / (2 * s2))
                                   for m, d in zip(cs, ds, strict=True)),)

    def hess(p):
        x = p[0]
        h = 2 * quad + sum(d / s2 * (1 - (x - m) ** 2 / s2) * np.exp(-(x - m) ** 2 / (2 * s2))
                           for m, d in zip(cs, ds, strict=True))
        return np.array([[h]])

    return Landscape("three_well", 1, f, grad, hess, (box,),
                     info={"centers": cs, "depths": ds, "width": width, "quad": quad})


def cosine_bumps(amplitude: float, n_terms: int, seed: int, omega_range: tuple[float, float],
                 box: tuple[float, float] = (-6.0, 6.0)) -> Landscape:
    """L5: ``f = x²/8 + a Σ_{k=1..K} cos(ω_k x + φ_k)`` with (ω, φ) drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    omegas = rng.uniform(*omega_range, size=n_terms)
    phases = rng.uniform(0.0, 2 * np.pi, size=n_terms)
    om, ph = omegas.tolist(), phases.tolist()

    def f(c, xp):
        x = c[0]
        return x * x / 8 + amplitude * sum(xp.cos(w * x + p)
                                           for w, p in zip(om, ph, strict=True))

    def grad(c, xp):
        x = c[0]
        return (x / 4 - amplitude * sum(w * xp.sin(w * x + p)
                                        for w, p in zip(om, ph, strict=True)),)

    def hess(p):
        x = p[0]
        return np.array([[0.25 - amplitude * sum(w * w * np.cos(w * x + q)
                                                  for w, q in zip(om, ph, strict=True))]])

    return Landscape(f"cosine_bumps_a{amplitude:g}", 1, f, grad, hess, (box,),
                     info={"amplitude": amplitude, "omegas": om, "phases": ph, "seed": seed})


def sine_neuron(n_points: int = 32, box: tuple[float, float] = (0.0, 5.2)) -> Landscape:
    """NN: one 'sine neuron' ``sin(w x)`` fitted to ``y = sin(x)`` on ``x_i = linspace(-π, π)``.

    ``f(w) = mean_i (sin(w x_i) - y_i)² / 2``; the per-sample gradients
    ``g_i(w) = (sin(w x_i) - y_i) cos(w x_i) x_i`` drive the mini-batch noise. Iterates are
    clamped to ``box`` (the shallow wells beyond 3.8 never end).
    """
    xs = np.linspace(-np.pi, np.pi, n_points)
    ys = np.sin(xs)
    cache: dict[Any, tuple[Any, Any]] = {}

    def data(xp, like):
        if xp is np:
            return xs[:, None], ys[:, None]
        key = (str(like.device), like.dtype)
        if key not in cache:
            cache[key] = (xp.as_tensor(xs[:, None], device=like.device, dtype=like.dtype),
                          xp.as_tensor(ys[:, None], device=like.device, dtype=like.dtype))
        return cache[key]

    def f(c, xp):
        w = c[0]
        if xp is np:
            w = np.asarray(w, float)
            r = np.sin(np.multiply.outer(w, xs)) - ys
            return 0.5 * np.mean(r * r, axis=-1)
        x, y = data(xp, w)
        r = xp.sin(w[None] * x) - y
        return 0.5 * (r * r).mean(0)

    def per_sample_grad(c, xp):
        w = c[0]
        x, y = data(xp, w)
        wx = x * w[None] if xp is not np else x * np.asarray(w, float)[None]
        return (xp.sin(wx) - y) * xp.cos(wx) * x

    def grad(c, xp):
        return (per_sample_grad(c, xp).mean(0),)

    def selected_grad(c, idx, xp):
        w = c[0]
        if xp is np:
            x, y = xs[idx], ys[idx]
        else:
            xt, yt = data(xp, w)
            x, y = xt[:, 0][idx], yt[:, 0][idx]
        wx = w[:, None] * x
        return (xp.sin(wx) - y) * xp.cos(wx) * x

    def hess(p):
        w = p[0]
        r = np.sin(w * xs) - ys
        d2 = (np.cos(w * xs) ** 2 - r * np.sin(w * xs)) * xs**2
        return np.array([[np.mean(d2)]])

    return Landscape("sine_neuron", 1, f, grad, hess, (box,), clamp=True,
                     per_sample_grad=per_sample_grad, selected_grad=selected_grad,
                     n_samples=n_points,
                     info={"n_points": n_points})


# ----------------------------------------------------------------------------------- 2-D
def camel(box: tuple[tuple[float, float], ...] = ((-3.0, 3.0), (-3.0, 3.0))) -> Landscape:
    """L3: the three-hump camel ``2x² - 1.05x⁴ + x⁶/6 + xy + y²`` (the paper's public figure)."""

    def f(c, xp):
        x, y = c
        x2 = x * x
        return 2 * x2 - 1.05 * x2 * x2 + x2 * x2 * x2 / 6 + x * y + y * y

    def grad(c, xp):
        x, y = c
        x2 = x * x
        return (x * (4 - 4.2 * x2 + x2 * x2) + y, x + 2 * y)

    def hess(p):
        x = p[0]
        return np.array([[4 - 12.6 * x * x + 5 * x**4, 1.0], [1.0, 2.0]])

    return Landscape("camel", 2, f, grad, hess, box)


def mexican_hat(box: tuple[tuple[float, float], ...] = ((-2.0, 2.0), (-2.0, 2.0))) -> Landscape:
    """L4: ``(x² + y² - 1)²``: every minimum (the unit circle) is global, so E = 0."""

    def f(c, xp):
        x, y = c
        return (x * x + y * y - 1) ** 2

    def grad(c, xp):
        x, y = c
        k = 4 * (x * x + y * y - 1)
        return (k * x, k * y)

    def hess(p):
        x, y = p
        r2 = x * x + y * y
        return np.array([[4 * (r2 - 1) + 8 * x * x, 8 * x * y],
                         [8 * x * y, 4 * (r2 - 1) + 8 * y * y]])

    return Landscape("mexican_hat", 2, f, grad, hess, box)


def build_landscape(kind: str, options: dict[str, Any], factory: str | None = None,
                    where: str = "landscape") -> Landscape:
    """Construct a landscape from its configured ``kind`` and keyword ``options``.

    ``kind: custom``: ``factory`` names a Python callable ``"module:attr"`` that is called with
    ``**options`` and returns a :class:`Landscape` (user-defined losses, no code edits here)."""
    if kind == "custom":
        from icml25.core.named_callable import load_callable
        if not factory:
            raise ValueError(f"{where}.factory: a custom landscape needs a factory "
                             "'module:attr'")
        make = load_callable(factory, f"{where}.factory")
        try:
            land = make(**dict(options))
        except TypeError as err:
            raise ValueError(f"{where}.options: do not fit the factory {factory!r}: {err}") \
                from None
        if not isinstance(land, Landscape):
            raise ValueError(f"{where}.factory: {factory!r} returned {type(land).__name__}, "
                             "not a Landscape")
        if len(land.box) != land.dim or any(not lo < hi for lo, hi in land.box):
            raise ValueError(f"{where}.factory: {factory!r} returned a {land.dim}-D landscape "
                             f"with box {land.box}; expected one (low, high) per coordinate")
        return land
    if factory is not None:
        raise ValueError(f"{where}.factory: only a custom landscape takes a factory")
    makers: dict[str, Callable[..., Landscape]] = {
        "tilted_double_well": tilted_double_well, "three_well": three_well,
        "cosine_bumps": cosine_bumps, "sine_neuron": sine_neuron, "camel": camel,
        "mexican_hat": mexican_hat,
    }
    if kind not in makers:
        raise ValueError(f"unknown landscape kind {kind!r}; expected one of {sorted(makers)}")
    opts = dict(options)
    if "box" in opts:
        box = opts["box"]
        opts["box"] = tuple(tuple(b) for b in box) if isinstance(box[0], list | tuple) else \
            tuple(box)
    if "omega_range" in opts:
        opts["omega_range"] = tuple(opts["omega_range"])
    return makers[kind](**opts)
