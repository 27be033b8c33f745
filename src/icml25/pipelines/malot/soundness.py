"""Soundness checks of MiniLean (docs/papers/malot.md, "Metrics").

- :data:`FALSE_SUITE`: false (or, for ``sorry``, unproved) statements with the proofs that probe
  Lean's conventions (truncated ℕ subtraction, total division, Euclidean ``%``) and the decision
  procedures; every portfolio tactic is tried on each false statement as well. MiniLean must
  accept none of them.
- :func:`random_inequalities`: random polynomial inequalities in two variables tried with
  linarith/nlinarith/positivity; whenever MiniLean accepts one, dense random sampling searches
  for a counterexample (there must be none).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np

from icml25.pipelines.malot.minilean import Settings, lean_file, verify

FALSE_SUITE: list[tuple[str, list[str]]] = [
    ("theorem f1 (x : ℕ) : x - 1 + 1 = x := by", ["omega", "ring", "simp", "norm_num"]),
    ("theorem f2 (x : ℕ) : (x - 1) + 1 = x := by", ["ring", "ring_nf", "linarith"]),
    ("theorem f3 (x : ℝ) : x / x = 1 := by", ["field_simp", "norm_num", "ring", "simp"]),
    ("theorem f4 (a b : ℝ) (h : a < b) : b < a := by", ["linarith", "nlinarith", "positivity"]),
    ("theorem f5 (a b : ℝ) (h : a < b) : a < b + 1 := by", ["sorry", "linarith\nsorry"]),
    ("theorem f6 (x : ℤ) : x % 2 = 0 := by", ["omega", "decide", "simp"]),
    ("theorem f7 (a b c : ℝ) (h₀ : 0 < a ∧ 0 < b ∧ 0 < c) (h₁ : c < a + b) (h₂ : b < a + c) "
     "(h₃ : a < b + c) :\n  0 ≤ a^2 * b * (a - b) + b^2 * c * (b - c) + c^2 * a * (c - a) := by",
     ["linarith"]),
    ("theorem f8 (x y : ℝ) (h₀ : x = 1) (h₁ : y = 2) : x < y ∧ y < 2 := by",
     ["constructor\n· linarith", "constructor <;> linarith", "constructor\n· linarith\n· linarith"]),
    ("theorem f9 (x : ℝ) : x / 0 = 1 := by", ["norm_num", "simp", "field_simp", "linarith"]),
    ("theorem f10 (n : ℕ) : n / 2 * 2 = n := by", ["omega", "ring", "linarith"]),
    ("theorem f11 (x : ℤ) : (-7 : ℤ) / 2 = -3 := by", ["decide", "norm_num", "rfl", "omega"]),
    ("theorem f12 (x : ℤ) : (-7 : ℤ) % 2 = -1 := by", ["decide", "norm_num", "omega"]),
    ("theorem f13 (a b : ℝ) : a * b ≤ a ^ 2 := by",
     ["nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]", "positivity", "linarith"]),
    ("theorem f14 (x : ℝ) (h : x ^ 2 = 4) : x = 2 := by",
     ["nlinarith [sq_nonneg (x - 2), sq_nonneg (x + 2)]", "norm_num [h]", "linarith"]),
    ("theorem f15 (n : ℕ) (h : n - 5 = 0) : n = 5 := by", ["omega", "linarith", "simp [h]"]),
    ("theorem f16 (x y : ℝ) (h₀ : x + y = 3) : x = 1 := by", ["linarith", "nlinarith"]),
    ("theorem f17 (x : ℝ) : 0 < x ^ 2 := by", ["positivity", "nlinarith [sq_nonneg x]"]),
    ("theorem f18 : (2 : ℝ) + 2 = 5 := by", ["norm_num", "decide", "rfl", "simp", "linarith"]),
    ("theorem f19 (a : ℝ) (h : a ≠ 0) : a / a = 2 := by", ["field_simp", "norm_num"]),
    ("theorem f20 (x : ℕ) (h : 2 ∣ x) : 4 ∣ x := by", ["omega", "decide"]),
]

PORTFOLIO_ATTACKS = ["norm_num", "linarith", "nlinarith", "simp", "positivity", "ring",
                     "ring_nf", "omega", "decide", "rfl", "field_simp", "norm_num\nlinarith"]


def false_suite_results(settings: Settings | None = None) -> list[dict[str, Any]]:
    """Every (false statement, proof) pair with MiniLean's verdict; ``accepted`` must be False."""
    rows = []
    for statement, proofs in FALSE_SUITE:
        # f5 is true: only its sorry proofs are probed (complete must be False for them)
        attacks = [] if any("sorry" in p for p in proofs) else PORTFOLIO_ATTACKS
        for proof in dict.fromkeys(proofs + attacks):
            verdict = verify(lean_file(statement, proof), settings)
            rows.append({"statement": statement, "proof": proof,
                         "accepted": bool(verdict["complete"]), "verdict": verdict["verdict"]})
    return rows


def _random_poly(rng: np.random.Generator) -> tuple[str, dict[tuple[int, int], int]]:
    monos = [(i, j) for i, j in itertools.product(range(3), range(3)) if i + j <= 2]
    coefs = {m: int(rng.integers(-3, 4)) for m in monos if rng.random() < 0.6}
    parts = []
    for (i, j), c in coefs.items():
        if c == 0:
            continue
        factors = [str(c)] + (["a" if i == 1 else f"a ^ {i}"] if i else []) + \
            (["b" if j == 1 else f"b ^ {j}"] if j else [])
        parts.append(" * ".join(factors))
    return (" + ".join(parts) or "0").replace("+ -", "- "), coefs


def random_inequalities(n: int, seed: int, samples: int = 2000,
                        settings: Settings | None = None) -> list[dict[str, Any]]:
    """``0 ≤ p(a, b)`` for random quadratics p, each tried with three tactics; for every accepted
    one, ``counterexample`` is whether random points (and a grid) make p negative."""
    rng = np.random.default_rng(seed)
    pts = np.concatenate([rng.normal(scale=3.0, size=(samples, 2)),
                          np.array(list(itertools.product(np.linspace(-4, 4, 17), repeat=2)))])
    rows = []
    for k in range(n):
        text, coefs = _random_poly(rng)
        statement = f"theorem r{k} (a b : ℝ) :\n  0 ≤ {text} := by"
        values = sum(float(Fraction(c)) * pts[:, 0] ** i * pts[:, 1] ** j
                     for (i, j), c in coefs.items()) if coefs else np.zeros(len(pts))
        counterexample = bool(np.min(values) < -1e-9)
        for proof in ("linarith", "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]",
                      "positivity"):
            verdict = verify(lean_file(statement, proof), settings)
            rows.append({"statement": statement, "proof": proof,
                         "accepted": bool(verdict["complete"]),
                         "counterexample": counterexample})
    return rows
