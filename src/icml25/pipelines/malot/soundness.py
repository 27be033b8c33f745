"""Soundness checks of MiniLean (docs/papers/malot.md, "Metrics").

- :data:`FALSE_SUITE`: false (or, for ``sorry``, unproved) statements with the proofs that probe
  Lean's conventions (truncated ℕ subtraction, total division, Euclidean ``%``) and the decision
  procedures; every portfolio tactic is tried on each false statement as well. MiniLean must
  accept none of them.
- :data:`MALFORMED_PROOFS`: proofs of true statements that Lean rejects as malformed (an empty
  ``try``, an empty ``first`` alternative, lines nested under a tactic that opens no block or
  dedented out of the proof, tabs); MiniLean must accept none of them.
- :func:`random_inequalities`: random polynomial inequalities in two variables tried with
  linarith/nlinarith/positivity; whenever MiniLean accepts one, dense random sampling searches
  for a counterexample (there must be none).
- :func:`lean_semantics_family`: generated statements about binder shadowing, division by a
  literal 0, ``0⁻¹``, ℕ subtraction and division, ℤ division and casts, whose truth z3 decides on
  Lean's semantics from an encoding written here, independent of MiniLean's parser and
  arithmetic; MiniLean may accept a proof only of a true one.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np

from icml25.pipelines.malot.minilean import HEADER, Settings, lean_file, verify

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
    # a later binder is a fresh variable (Lean 4): h is about the shadowed x, not the goal's
    ("theorem s1 (x : ℝ) (h : x = 0) (x : ℝ) : x = 0 := by",
     ["linarith", "nlinarith [h]", "norm_num [h]", "simp [h]", "rw [h]", "exact h"]),
    ("theorem s2 (x : ℕ) (h : x = 0) (x : ℕ) : x = 0 := by", ["omega", "simp [h]", "exact h"]),
    ("theorem s3 (x : ℕ) (h : x = 0) (x : ℝ) : x = 0 := by", ["linarith", "norm_num [h]"]),
    ("theorem s4 (x : ℝ) (h : x = 0) (x : ℤ) : x = 0 := by", ["omega", "linarith"]),
    ("theorem s5 (x y : ℝ) (h : x = y) (x : ℝ) (h₁ : y = 1) : x = 1 := by",
     ["linarith", "rw [← h] at h₁\nlinarith"]),
    # x / 0 = 0: the statement says x / y = 0, and field_simp must not cross-multiply by 0
    ("theorem z1 (x y : ℝ) (hy : y ≠ 0) : x / y + 1 / 0 = 2 / 0 := by",
     ["field_simp", "field_simp\nring", "norm_num", "simp"]),
    ("theorem z2 (x : ℝ) : x * (0 : ℝ)⁻¹ = 1 := by", ["norm_num", "simp", "field_simp"]),
    ("theorem z3 (x : ℝ) : x * x⁻¹ = 1 := by", ["field_simp", "norm_num", "simp"]),
]

#: Malformed proofs of true statements that Lean rejects (a parse error): (name, statement,
#: proof lines as they stand in the file, indentation included). Each has a well-formed twin in
#: :data:`WELL_FORMED_TWINS` that MiniLean accepts, so a rejection is the layout's doing.
MALFORMED_PROOFS: list[tuple[str, str, str]] = [
    ("empty_try", "theorem m1 (x : ℝ) (h : x = 1) : x < 2 := by", "  try\n  linarith"),
    ("empty_try_at_end", "theorem m2 (x : ℝ) (h : x = 1) : x < 2 := by", "  linarith\n  try"),
    ("first_empty_alternative", "theorem m3 (x : ℝ) (h : x = 1) : x < 2 := by",
     "  first | | linarith"),
    ("nested_under_linarith", "theorem m4 (x : ℝ) (h : x = 1) : x < 2 := by",
     "  linarith\n    norm_num"),
    ("nested_under_bullet_tactic", "theorem m5 (x : ℝ) (h : x = 1) : x < 2 ∧ x < 3 := by",
     "  constructor\n  · linarith\n      linarith\n  · linarith"),
    ("dedented_after_proof", "theorem m6 (x : ℝ) (h : x = 1) : x < 2 := by",
     "  linarith\n norm_num"),
    ("dedented_to_column_0", "theorem m7 (x : ℝ) (h : x = 1) : x < 2 := by",
     "  linarith\nnorm_num"),
    ("tab_indentation", "theorem m8 (x : ℝ) (h : x = 1) : x < 2 := by", "\tlinarith"),
    ("trailing_then", "theorem m9 (x : ℝ) (h : x = 1) : x < 2 := by", "  linarith <;>"),
    ("try_unknown_tactic", "theorem m10 (x : ℝ) (h : x = 1) : x < 2 := by",
     "  try frobnicate\n  linarith"),
]

WELL_FORMED_TWINS: dict[str, str] = {
    "empty_try": "  try norm_num\n  linarith",
    "empty_try_at_end": "  linarith",
    "first_empty_alternative": "  first | norm_num | linarith",
    "nested_under_linarith": "  linarith",
    "nested_under_bullet_tactic": "  constructor\n  · linarith\n  · linarith",
    "dedented_after_proof": "  linarith",
    "dedented_to_column_0": "  linarith",
    "tab_indentation": "  linarith",
    "trailing_then": "  linarith",
    "try_unknown_tactic": "  linarith",
}


def malformed_file(statement: str, lines: str) -> str:
    """The verified file of a malformed proof, its lines kept exactly as written."""
    return f"{HEADER}\n{statement}\n{lines}\n"


def malformed_results(settings: Settings | None = None) -> list[dict[str, Any]]:
    """Every malformed proof with MiniLean's verdict; ``accepted`` must be False."""
    rows = []
    for name, statement, lines in MALFORMED_PROOFS:
        verdict = verify(malformed_file(statement, lines), settings)
        rows.append({"statement": statement, "proof": lines, "name": name,
                     "accepted": bool(verdict["complete"]), "verdict": verdict["verdict"]})
    return rows

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


# ------------------------------------------------------- a generated Lean-semantics family
# Statements that probe Lean 4's conventions where a fallback checker is most easily unsound:
# binder shadowing, division by a literal 0, 0⁻¹, truncated ℕ subtraction, ℕ/ℤ division and
# remainder, casts. Each case is built as a small tree that is rendered twice, independently of
# MiniLean's parser and arithmetic: as Lean text, and as a z3 formula with Lean's semantics
# (x / 0 = 0, 0⁻¹ = 0, a - b = 0 for a < b in ℕ, Euclidean / and % on ℤ, x % 0 = x, casts as
# ring embeddings, a shadowed binder as a fresh variable). z3 decides each case's truth; MiniLean
# may accept only true ones.

_LEAN_TYPES = ("ℕ", "ℤ", "ℝ")
_RANKS = {"ℕ": 0, "ℤ": 1, "ℚ": 2, "ℝ": 3}


class _Binders:
    """Binders in order; a name maps to its latest binder (Lean 4: later binders shadow)."""

    def __init__(self) -> None:
        self.scope: dict[str, tuple[int, str]] = {}
        self.count = 0
        self.all: list[tuple[int, str]] = []

    def bind(self, name: str, typ: str) -> None:
        self.scope[name] = (self.count, typ)
        self.all.append((self.count, typ))
        self.count += 1


def _z3_var(ident: int, typ: str):
    import z3
    return z3.Int(f"v{ident}") if typ in ("ℕ", "ℤ") else z3.Real(f"v{ident}")


def _cast(value, src: str, dst: str):
    import z3
    if src in ("ℕ", "ℤ") and dst in ("ℚ", "ℝ"):
        return z3.ToReal(value)
    return value


class _Term:
    """(Lean text at its type, z3 value, type, whether a variable of that type occurs directly)."""

    def __init__(self, text: str, value, typ: str, typed_leaf: bool, atomic: bool) -> None:
        self.text, self.value, self.typ = text, value, typ
        self.typed_leaf, self.atomic = typed_leaf, atomic

    def paren(self) -> str:
        return self.text if self.atomic else f"({self.text})"


def _numeral(rng: np.random.Generator, typ: str) -> _Term:
    import z3
    k = int(rng.choice([0, 0, 1, 2, 3, 5]))
    value = z3.IntVal(k) if typ in ("ℕ", "ℤ") else z3.RealVal(k)
    return _Term(str(k), value, typ, False, True)


def _leaf(rng: np.random.Generator, typ: str, binders: _Binders) -> _Term:
    same = [(n, i) for n, (i, t) in binders.scope.items() if t == typ]
    smaller = [(n, i, t) for n, (i, t) in binders.scope.items() if _RANKS[t] < _RANKS[typ]]
    roll = rng.random()
    if same and roll < 0.5:
        name, ident = same[int(rng.integers(len(same)))]
        return _Term(name, _z3_var(ident, typ), typ, True, True)
    if smaller and roll < 0.8:  # a cast of a smaller variable, or of a smaller expression
        name, ident, src = smaller[int(rng.integers(len(smaller)))]
        inner = _Term(name, _z3_var(ident, src), src, True, True)
        if rng.random() < 0.5:
            inner = _binop(rng, src, binders, inner, _numeral(rng, src))
            text = f"(({inner.text} : {src}) : {typ})"
        else:
            text = f"({name} : {typ})"
        return _Term(text, _cast(inner.value, src, typ), typ, False, True)
    return _numeral(rng, typ)


def _binop(rng: np.random.Generator, typ: str, binders: _Binders, a: _Term, b: _Term) -> _Term:
    import z3
    field = typ in ("ℚ", "ℝ")
    ops = ["+", "-", "*", "/"] + (["%"] if not field else [])
    op = str(rng.choice(ops))
    zero = z3.IntVal(0) if not field else z3.RealVal(0)
    x, y = a.value, b.value
    if op == "+":
        value = x + y
    elif op == "*":
        value = x * y
    elif op == "-":
        value = z3.If(x >= y, x - y, zero) if typ == "ℕ" else x - y
    elif op == "/":
        value = z3.If(y == 0, zero, x / y)  # ℕ/ℤ: z3's div is Euclidean like Lean's
    else:
        value = z3.If(y == 0, x, x % y)
    return _Term(f"{a.paren() if op != '+' else a.text} {op} {b.paren()}", value, typ,
                 a.typed_leaf or b.typed_leaf, False)


def _term(rng: np.random.Generator, typ: str, binders: _Binders, depth: int) -> _Term:
    import z3
    if depth == 0 or rng.random() < 0.25:
        leaf = _leaf(rng, typ, binders)
        if typ in ("ℚ", "ℝ") and rng.random() < 0.25:  # x⁻¹, (0 : ℝ)⁻¹, (x + 1)⁻¹
            inner = leaf if leaf.typed_leaf or leaf.text.startswith("(") else \
                _Term(f"({leaf.text} : {typ})", leaf.value, typ, False, True)
            zero = z3.RealVal(0)
            return _Term(f"{inner.paren()}⁻¹", z3.If(inner.value == 0, zero, 1 / inner.value),
                         typ, inner.typed_leaf, True)
        return leaf
    a = _term(rng, typ, binders, depth - 1)
    b = _numeral(rng, typ) if rng.random() < 0.4 else _term(rng, typ, binders, depth - 1)
    return _binop(rng, typ, binders, a, b)


def _comparison(rng: np.random.Generator, binders: _Binders, depth: int) -> tuple[str, Any]:
    typ = str(rng.choice((*_LEAN_TYPES, "ℝ")))  # ℝ twice as likely: division and ⁻¹ live there
    lhs, rhs = _term(rng, typ, binders, depth), _term(rng, typ, binders, 1)
    op = str(rng.choice(["=", "=", "≤", "<", "≠"]))
    value = {"=": lhs.value == rhs.value, "≤": lhs.value <= rhs.value,
             "<": lhs.value < rhs.value, "≠": lhs.value != rhs.value}[op]
    left = lhs.text
    if typ != "ℕ" and not (lhs.typed_leaf or rhs.typed_leaf):
        left = f"({lhs.text} : {typ})"  # closed numerals alone would default to ℕ
    return f"{left} {op} {rhs.text}", value


def lean_semantics_case(rng: np.random.Generator, k: int) -> dict[str, Any]:
    """One random statement with its Lean text and its truth decided by z3 (None: undecided)."""
    binders = _Binders()
    parts: list[str] = []
    names = ["x", "y"][: int(rng.integers(1, 3))]
    for name in names:
        typ = str(rng.choice(_LEAN_TYPES))
        binders.bind(name, typ)
        parts.append(f"({name} : {typ})")
    hyps = []
    for j in range(int(rng.integers(0, 3))):
        text, value = _comparison(rng, binders, 1)
        hyps.append((f"h{j}", value))
        parts.append(f"(h{j} : {text})")
        if rng.random() < 0.5:  # shadow a variable after a hypothesis mentions it
            name = str(rng.choice(names))
            typ = str(rng.choice(_LEAN_TYPES))
            binders.bind(name, typ)
            parts.append(f"({name} : {typ})")
    goal_text, goal = _comparison(rng, binders, 2)
    side = [_z3_var(ident, typ) >= 0 for ident, typ in binders.all if typ == "ℕ"]
    statement = f"theorem g{k} {' '.join(parts)} :\n  {goal_text} := by"
    return {"statement": statement, "hyps": [h for h, _ in hyps], "kind": "random",
            "truth": _decide(side, [v for _, v in hyps], goal)}


def _decide(side: list, hyps: list, goal: Any) -> bool | None:
    """z3: the statement is true iff side conditions ∧ hypotheses ∧ ¬goal is unsatisfiable."""
    import z3
    solver = z3.Solver()
    solver.set("timeout", 2000)
    solver.add(*side, *hyps, z3.Not(goal))
    answer = solver.check()
    return True if answer == z3.unsat else False if answer == z3.sat else None


def template_case(rng: np.random.Generator, k: int) -> dict[str, Any]:
    """One near-miss statement (:func:`_template_cases`) with its z3 truth."""
    cases = _template_cases(rng)
    text, hyps, side, z3_hyps, goal = cases[int(rng.integers(len(cases)))]
    return {"statement": f"theorem t{k} {text} := by", "hyps": hyps, "kind": "template",
            "truth": _decide(side, z3_hyps, goal)}


def _family_proofs(hyps: list[str]) -> list[str]:
    proofs = ["norm_num", "simp", "linarith", "nlinarith", "omega", "decide", "field_simp",
              "ring_nf", "positivity", "rfl", "norm_num\nlinarith"]
    for h in hyps:
        proofs += [f"exact {h}", f"norm_num [{h}]", f"simp [{h}]", f"rw [{h}]",
                   f"field_simp [{h}]"]
    if hyps:
        proofs += [f"norm_num [{', '.join(hyps)}] at *\nlinarith", f"linarith [{hyps[0]}]",
                   f"nlinarith [{', '.join(hyps)}]"]
    return proofs


def lean_semantics_family(n: int, seed: int, proofs_per_case: int | None = None,
                          settings: Settings | None = None) -> list[dict[str, Any]]:
    """``n`` generated statements (alternately a near miss of :func:`_template_cases` and a random
    one of :func:`lean_semantics_case`), each tried with the proofs of a fixed repertoire (a seeded
    sample of ``proofs_per_case`` of them, or all); one row per (statement, proof): ``truth`` from
    z3 on Lean's semantics (None where z3 gave up), ``accepted`` from MiniLean."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        case = template_case(rng, k) if k % 2 == 0 else lean_semantics_case(rng, k)
        proofs = _family_proofs(case["hyps"])
        if proofs_per_case is not None and proofs_per_case < len(proofs):
            proofs = [proofs[i] for i in sorted(rng.choice(len(proofs), proofs_per_case,
                                                           replace=False))]
        for proof in proofs:
            verdict = verify(lean_file(case["statement"], proof), settings)
            rows.append({"statement": case["statement"], "proof": proof, "kind": case["kind"],
                         "truth": case["truth"], "accepted": bool(verdict["complete"]),
                         "verdict": verdict["verdict"]})
    return rows


def _template_cases(rng: np.random.Generator) -> list[tuple[str, list[str], list, list, Any]]:
    """Near misses: statements that a checker with a wrong convention would find true. Each is
    (Lean binders and goal, hypothesis names, z3 side conditions, z3 hypotheses, z3 goal), the z3
    side written by hand from Lean's definitions (variables: ``old``/``new`` for a shadowed
    binder and its successor)."""
    import z3
    c, k = int(rng.integers(0, 4)), int(rng.integers(1, 4))
    t1, t2 = (str(t) for t in rng.choice(_LEAN_TYPES, size=2))

    def var(name: str, typ: str):
        return z3.Int(f"{name}_{typ}") if typ in ("ℕ", "ℤ") else z3.Real(f"{name}_{typ}")

    def nonneg(*pairs):
        return [v >= 0 for v, t in pairs if t == "ℕ"]

    old, new, y, new1 = var("old", t1), var("new", t2), var("y", t1), var("new", t1)
    r, s = z3.Reals("r s")
    n, m = z3.Ints("n m")
    zr, one = z3.RealVal(0), z3.RealVal(1)

    def rdiv(a, b):
        return z3.If(b == 0, zr, a / b)

    def nsub(a, b):
        return z3.If(a >= b, a - b, 0)

    def idiv(a, b):  # Lean's / on ℕ and ℤ: Euclidean (z3's div), and a / 0 = 0
        return z3.If(b == 0, 0, a / b)

    return [
        (f"(x : {t1}) (h : x = {c}) (x : {t2}) : x = {c}", ["h"],
         nonneg((old, t1), (new, t2)), [old == c], new == c),
        (f"(x : {t1}) (h : x ≤ {c}) (x : {t2}) : x ≤ {c}", ["h"],
         nonneg((old, t1), (new, t2)), [old <= c], new <= c),
        (f"(x y : {t1}) (h : x = y) (x : {t1}) : x = y", ["h"],
         nonneg((old, t1), (y, t1), (new1, t1)), [old == y], new1 == y),
        (f"(x : {t1}) (x : {t1}) (h : x = {c}) : x = {c}", ["h"],
         nonneg((old, t1), (new1, t1)), [new1 == c], new1 == c),
        (f"(x y : ℝ) (hy : y ≠ 0) : x / y + {k} / 0 = {c} / 0", ["hy"], [],
         [s != 0], rdiv(r, s) + rdiv(z3.RealVal(k), zr) == rdiv(z3.RealVal(c), zr)),
        (f"(x : ℝ) : x / 0 = {c}", [], [], [], rdiv(r, zr) == c),
        (f"(x : ℝ) (hx : x ≠ 0) : (x + {k}) / 0 = {c}", ["hx"], [], [r != 0],
         rdiv(r + k, zr) == c),
        (f"(x : ℝ) : x * (0 : ℝ)⁻¹ = {c}", [], [], [], r * rdiv(one, zr) == c),
        ("(x : ℝ) (hx : x ≠ 0) : x * x⁻¹ = 1", ["hx"], [], [r != 0], r * rdiv(one, r) == 1),
        ("(x : ℝ) : x * x⁻¹ = 1", [], [], [], r * rdiv(one, r) == 1),
        (f"(n : ℕ) : n - {k} + {k} = n", [], [n >= 0], [], nsub(n, k) + k == n),
        (f"(n : ℕ) (h : {k} ≤ n) : n - {k} + {k} = n", ["h"], [n >= 0], [k <= n],
         nsub(n, k) + k == n),
        (f"(a b : ℕ) (h : a < b) : a - b = {c}", ["h"], [n >= 0, m >= 0], [n < m],
         nsub(n, m) == c),
        (f"(n : ℕ) : ((n - {k} : ℕ) : ℝ) = (n : ℝ) - {k}", [], [n >= 0], [],
         z3.ToReal(nsub(n, k)) == z3.ToReal(n) - k),
        (f"(n : ℕ) (h : {k} ≤ n) : ((n - {k} : ℕ) : ℝ) = (n : ℝ) - {k}", ["h"], [n >= 0],
         [k <= n], z3.ToReal(nsub(n, k)) == z3.ToReal(n) - k),
        (f"(n : ℕ) : n / {k + 1} * {k + 1} = n", [], [n >= 0], [],
         idiv(n, k + 1) * (k + 1) == n),
        (f"(n : ℕ) (h : n % {k + 1} = 0) : n / {k + 1} * {k + 1} = n", ["h"], [n >= 0],
         [n % (k + 1) == 0], idiv(n, k + 1) * (k + 1) == n),
        (f"(n : ℕ) : ((n / {k + 1} : ℕ) : ℝ) = (n : ℝ) / {k + 1}", [], [n >= 0], [],
         z3.ToReal(idiv(n, k + 1)) == rdiv(z3.ToReal(n), z3.RealVal(k + 1))),
        (f"(n : ℤ) : n / {k + 1} * {k + 1} + n % {k + 1} = n", [], [], [],
         idiv(n, k + 1) * (k + 1) + n % (k + 1) == n),
        (f"(n : ℤ) : n / (-{k + 1}) = -(n / {k + 1})", [], [], [],
         idiv(n, -(k + 1)) == -idiv(n, k + 1)),
        (f"(n : ℕ) (h : n / 0 = {c}) : n = {c}", ["h"], [n >= 0], [idiv(n, 0) == c], n == c),
        (f"(n : ℕ) : n % 0 = {c}", [], [n >= 0], [], n == c),  # Lean: n % 0 = n
    ]
