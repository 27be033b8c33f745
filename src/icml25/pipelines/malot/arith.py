"""Exact arithmetic behind MiniLean's decision procedures (docs/papers/malot.md).

- :class:`Poly`: polynomials with :class:`~fractions.Fraction` coefficients over named atoms
  (variables and opaque subterms), the linear forms ``linarith`` works on once every non-linear
  monomial is an atom.
- :func:`to_poly`: Lean semantics of a typed term as a polynomial. ℕ subtraction, ℕ/ℤ division
  and remainder, ``|t|`` and division by a non-numeral are opaque atoms (so nothing unsound about
  truncation or ``x / 0 = 0`` can be concluded), ℚ/ℝ division by a numeral ``c`` is ``· (1/c)``
  (``x / 0 = 0``), and every ℕ atom is recorded as non-negative.
- :func:`linear_unsat`: z3 over linear real arithmetic with one real per monomial — the decision
  problem of Mathlib's ``linarith`` (which finds Positivstellensatz-style linear certificates).
- :func:`evaluate`: closed terms evaluated exactly with Lean's conventions (truncated ℕ
  subtraction, floor/Euclidean ``/`` and ``%`` on ℕ/ℤ, total ``/`` on ℚ/ℝ).
- :func:`omega_unsat`: z3 linear integer arithmetic with exact ℕ/ℤ semantics (``omega``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from fractions import Fraction

import z3

from icml25.pipelines.malot.lean_syntax import typed_pretty

Monomial = tuple[tuple[str, int], ...]
MAX_TERMS = 4000
MAX_PRODUCT_WORK = 200_000


class Deadline(Exception):
    """The per-proof budget ran out: the deterministic work budget (tactic steps and z3
    resource units), or, with ``wall_clock``, the wall-clock safety limit."""

    def __init__(self, wall_clock: bool = False) -> None:
        super().__init__("wall-clock safety limit" if wall_clock else "work budget")
        self.wall_clock = wall_clock


class Budget:
    """The budget of one verification. Deterministic: at most ``max_steps`` checks (tactic steps
    and product rounds) and ``rlimit`` z3 resource units (z3's machine-independent ``rlimit``
    count) in all, so a verdict never depends on the machine's speed or load. ``seconds`` is a
    wall-clock safety net only (:class:`Deadline` with ``wall_clock``, reported as such)."""

    def __init__(self, seconds: float, max_steps: int = 20_000, rlimit: int = 50_000_000) -> None:
        self.end = time.monotonic() + seconds
        self.max_steps, self.steps = max_steps, 0
        self.rlimit_left = rlimit

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps or self.rlimit_left <= 0:
            raise Deadline
        if self.left() <= 0:
            raise Deadline(wall_clock=True)

    def spend(self, units: int) -> None:
        self.rlimit_left -= units


def _rlimit_count(solver: z3.Solver) -> int:
    stats = solver.statistics()
    names = set(stats.keys())
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in names else 0


def _decide(solver: z3.Solver, timeout_s: float, rlimit: int | None,
            budget: Budget | None) -> bool:
    """True iff unsat. ``rlimit`` (z3 resource units, deterministic) bounds the call; running
    out of it is "not proved". ``timeout_s`` is the wall-clock safety net: hitting it raises
    :class:`Deadline` with ``wall_clock`` (reported, never silently a tactic failure)."""
    solver.set("timeout", max(1, int(timeout_s * 1000)))
    if budget is not None:
        rlimit = min(rlimit or budget.rlimit_left, max(budget.rlimit_left, 1))
    if rlimit:
        solver.set("rlimit", int(rlimit))
    before = _rlimit_count(solver)
    result = solver.check()
    if budget is not None:
        budget.spend(max(_rlimit_count(solver) - before, 1))
    if result == z3.unknown and solver.reason_unknown() == "timeout":
        raise Deadline(wall_clock=True)
    return result == z3.unsat


class Poly:
    """``{monomial: coefficient}``; a monomial is a sorted tuple of ``(atom, power)``."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[Monomial, Fraction] | None = None) -> None:
        self.terms = {m: c for m, c in (terms or {}).items() if c != 0}
        if len(self.terms) > MAX_TERMS:
            raise Deadline

    @staticmethod
    def const(value: Fraction | int) -> Poly:
        return Poly({(): Fraction(value)})

    @staticmethod
    def atom(name: str) -> Poly:
        return Poly({((name, 1),): Fraction(1)})

    def __add__(self, other: Poly) -> Poly:
        out = dict(self.terms)
        for m, c in other.terms.items():
            out[m] = out.get(m, Fraction(0)) + c
        return Poly(out)

    def __neg__(self) -> Poly:
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        if len(self.terms) * len(other.terms) > MAX_PRODUCT_WORK:
            raise Deadline  # the expansion alone would exceed any sensible proof budget
        out: dict[Monomial, Fraction] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = _mono_mul(m1, m2)
                out[m] = out.get(m, Fraction(0)) + c1 * c2
        return Poly(out)

    def scale(self, c: Fraction) -> Poly:
        return Poly({m: c * v for m, v in self.terms.items()})

    def __pow__(self, n: int) -> Poly:
        out = Poly.const(1)
        for _ in range(n):
            out = out * self
        return out

    def is_const(self) -> bool:
        return all(m == () for m in self.terms)

    def const_value(self) -> Fraction:
        return self.terms.get((), Fraction(0))

    def degree(self) -> int:
        return max((sum(p for _, p in m) for m in self.terms), default=0)

    def key(self) -> str:
        """Canonical text (equal polynomials have equal keys)."""
        if not self.terms:
            return "0"
        parts = []
        for m in sorted(self.terms):
            mono = "*".join(a if p == 1 else f"{a}^{p}" for a, p in m) or "1"
            parts.append(f"{self.terms[m]}*{mono}")
        return " + ".join(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Poly({self.key()})"


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    powers = dict(a)
    for atom, p in b:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items()))


# ----------------------------------------------------------------------------- semantics
class PolyContext:
    """Collects atoms made while translating terms: which are ℕ-valued (hence ``≥ 0``)."""

    def __init__(self) -> None:
        self.nat_atoms: set[str] = set()
        self.int_atoms: set[str] = set()

    def variable(self, name: str, typ: str) -> Poly:
        if typ == "ℕ":
            self.nat_atoms.add(name)
        if typ in ("ℕ", "ℤ"):
            self.int_atoms.add(name)
        return Poly.atom(name)

    def opaque(self, term: tuple) -> Poly:
        name = f"⟪{typed_pretty(term)}⟫"
        if term[1] == "ℕ":
            self.nat_atoms.add(name)
        if term[1] in ("ℕ", "ℤ"):
            self.int_atoms.add(name)
        return Poly.atom(name)


def to_poly(term: tuple, pc: PolyContext) -> Poly:
    """Polynomial value of a typed term (see the module docstring for the opaque cases)."""
    kind, typ = term[0], term[1]
    if kind == "num":
        return Poly.const(term[2])
    if kind == "var":
        return pc.variable(term[2], typ)
    if kind == "cast":
        return to_poly(term[2], pc)  # ℕ→ℤ→ℚ→ℝ casts are injective ring homomorphisms
    if kind == "add":
        return to_poly(term[2], pc) + to_poly(term[3], pc)
    if kind == "mul":
        return to_poly(term[2], pc) * to_poly(term[3], pc)
    if kind == "neg":
        return -to_poly(term[2], pc)
    if kind == "pow":
        return to_poly(term[2], pc) ** term[3]
    if kind == "sub":
        if typ == "ℕ":
            return pc.opaque(term)
        return to_poly(term[2], pc) - to_poly(term[3], pc)
    if kind == "div":
        if typ in ("ℕ", "ℤ"):
            return pc.opaque(term)
        divisor = to_poly(term[3], pc)
        if divisor.is_const():
            c = divisor.const_value()
            return Poly.const(0) if c == 0 else to_poly(term[2], pc).scale(1 / c)
        inverse = Poly.atom(f"({divisor.key()})⁻¹")
        return to_poly(term[2], pc) * inverse
    if kind == "mod":
        return pc.opaque(term)
    if kind == "abs":
        inner = to_poly(term[2], pc)
        if inner.is_const():
            return Poly.const(abs(inner.const_value()))
        return pc.opaque(term)
    raise ValueError(f"not a term: {term!r}")


# -------------------------------------------------------------------- linear arithmetic
#: A fact ``p R 0`` with R in {"<", "≤", "="}.
Fact = tuple[Poly, str]


def cmp_facts(op: str, lhs: Poly, rhs: Poly) -> list[Fact]:
    """``lhs op rhs`` as facts ``p R 0``; ``≠`` and ``∣`` give none (linarith ignores them)."""
    return {"<": [(lhs - rhs, "<")], "≤": [(lhs - rhs, "≤")], ">": [(rhs - lhs, "<")],
            "≥": [(rhs - lhs, "≤")], "=": [(lhs - rhs, "=")]}.get(op, [])


def negated_cmp_facts(op: str, lhs: Poly, rhs: Poly) -> list[Fact] | None:
    """The negation of ``lhs op rhs`` as one fact; None for ``=`` (split in two), ``≠``, ``∣``."""
    return {"<": [(rhs - lhs, "≤")], "≤": [(rhs - lhs, "<")], ">": [(lhs - rhs, "≤")],
            "≥": [(lhs - rhs, "<")]}.get(op)


def strengthen(fact: Fact, integral: bool) -> Fact:
    """Over ℤ/ℕ, ``p < 0`` is ``p + 1 ≤ 0`` (Mathlib's ``Linarith.intStrengthening``)."""
    poly, rel = fact
    if integral and rel == "<" and all(c.denominator == 1 for c in poly.terms.values()):
        return (poly + Poly.const(1), "≤")
    return fact


def product_fact(a: Fact, b: Fact) -> Fact:
    """Sign rule of nlinarith: two ``≤ 0``-style facts multiply to a ``≥ 0``-style one."""
    (p, r1), (q, r2) = a, b
    if r1 == "=" or r2 == "=":
        rel = "="
    elif r1 == "<" and r2 == "<":
        rel = "<"
    else:
        rel = "≤"
    return (-(p * q), rel)


def linear_unsat(facts: Iterable[Fact], nonneg_atoms: Iterable[str], timeout_s: float,
                 rlimit: int | None = None, budget: Budget | None = None) -> bool:
    """True iff the facts, with every non-linear monomial an independent real, are infeasible
    (within ``rlimit`` z3 resource units; see :func:`_decide`)."""
    facts = list(facts)
    solver = z3.Solver()
    names: dict[Monomial, z3.ArithRef] = {}

    def var(m: Monomial) -> z3.ArithRef:
        if m not in names:
            names[m] = z3.Real("m" + str(len(names)))
        return names[m]

    for poly, rel in facts:
        expr = z3.RealVal(str(poly.const_value()))
        for m, c in poly.terms.items():
            if m:
                expr = expr + z3.RealVal(str(c)) * var(m)
        solver.add({"<": expr < 0, "≤": expr <= 0, "=": expr == 0}[rel])
    for atom in nonneg_atoms:
        solver.add(var(((atom, 1),)) >= 0)
    return _decide(solver, timeout_s, rlimit, budget)


# ------------------------------------------------------------------------- exact evaluation
class NotClosed(ValueError):
    """The term mentions a variable."""


def _floor_div(a: Fraction, b: Fraction) -> Fraction:
    return Fraction(a.numerator // b.numerator) if b > 0 else -Fraction(a.numerator // -b.numerator)


def evaluate(term: tuple) -> Fraction:
    """Exact value of a closed typed term with Lean's conventions."""
    kind, typ = term[0], term[1]
    if kind == "num":
        return term[2]
    if kind == "var":
        raise NotClosed(term[2])
    if kind == "cast":
        return evaluate(term[2])
    if kind == "neg":
        return -evaluate(term[2])
    if kind == "abs":
        return abs(evaluate(term[2]))
    if kind == "pow":
        return evaluate(term[2]) ** term[3]
    a, b = evaluate(term[2]), evaluate(term[3])
    if kind == "add":
        return a + b
    if kind == "mul":
        return a * b
    if kind == "sub":
        return max(a - b, Fraction(0)) if typ == "ℕ" else a - b
    if kind == "div":
        if b == 0:
            return Fraction(0)
        return a / b if typ in ("ℚ", "ℝ") else _floor_div(a, b)  # Int.ediv (b > 0: floor)
    if kind == "mod":
        if b == 0:
            return a
        return a - b * _floor_div(a, b)  # Euclidean: 0 ≤ r < |b|
    raise ValueError(f"not a term: {term!r}")


def decide_prop(prop: tuple) -> bool:
    """Truth of a closed typed proposition (raises NotClosed if it has variables)."""
    kind = prop[0]
    if kind == "true":
        return True
    if kind == "false":
        return False
    if kind == "not":
        return not decide_prop(prop[1])
    if kind == "and":
        return decide_prop(prop[1]) and decide_prop(prop[2])
    if kind == "or":
        return decide_prop(prop[1]) or decide_prop(prop[2])
    if kind == "imp":
        return (not decide_prop(prop[1])) or decide_prop(prop[2])
    if kind == "iff":
        return decide_prop(prop[1]) == decide_prop(prop[2])
    op, a, b = prop[1], evaluate(prop[2]), evaluate(prop[3])
    if op == "∣":
        return b == 0 if a == 0 else (b / a).denominator == 1
    return {"=": a == b, "≠": a != b, "<": a < b, "≤": a <= b, ">": a > b, "≥": a >= b}[op]


# ---------------------------------------------------------------------------------- omega
class NotLinearInt(ValueError):
    """Outside omega's language (non-integer type, non-linear product, variable divisor)."""


def _z3_int(term: tuple, env: dict[str, z3.ArithRef], side: list) -> z3.ArithRef:
    kind, typ = term[0], term[1]
    if typ not in ("ℕ", "ℤ"):
        raise NotLinearInt(f"omega works over ℕ and ℤ, not {typ}")
    if kind == "num":
        return z3.IntVal(int(term[2]))
    if kind == "var":
        if term[2] not in env:
            env[term[2]] = z3.Int(term[2])
            if typ == "ℕ":
                side.append(env[term[2]] >= 0)
        return env[term[2]]
    if kind == "cast":
        return _z3_int(term[2], env, side)
    if kind == "neg":
        return -_z3_int(term[2], env, side)
    if kind == "abs":
        x = _z3_int(term[2], env, side)
        return z3.If(x >= 0, x, -x)
    if kind == "pow":
        try:
            return z3.IntVal(int(evaluate(term)))
        except NotClosed:
            raise NotLinearInt("omega does not handle powers of variables") from None
    a, b = _z3_int(term[2], env, side), _z3_int(term[3], env, side)
    if kind == "add":
        return a + b
    if kind == "sub":
        return z3.If(a >= b, a - b, 0) if typ == "ℕ" else a - b
    if kind == "mul":
        for side_term, other in ((term[2], b), (term[3], a)):
            try:
                return z3.IntVal(int(evaluate(side_term))) * other
            except NotClosed:
                continue
        raise NotLinearInt("omega does not handle products of variables")
    if kind in ("div", "mod"):
        try:
            d = int(evaluate(term[3]))
        except NotClosed:
            raise NotLinearInt("omega needs a numeral divisor") from None
        if d == 0:
            return z3.IntVal(0) if kind == "div" else a
        return a / z3.IntVal(d) if kind == "div" else a % z3.IntVal(d)  # SMT-LIB: Euclidean
    raise NotLinearInt(kind)


def z3_int_prop(prop: tuple, env: dict[str, z3.ArithRef], side: list) -> z3.BoolRef:
    kind = prop[0]
    if kind == "true":
        return z3.BoolVal(True)
    if kind == "false":
        return z3.BoolVal(False)
    if kind == "not":
        return z3.Not(z3_int_prop(prop[1], env, side))
    if kind in ("and", "or", "imp", "iff"):
        p, q = z3_int_prop(prop[1], env, side), z3_int_prop(prop[2], env, side)
        return {"and": z3.And, "or": z3.Or, "imp": z3.Implies}.get(kind, lambda x, y: x == y)(p, q)
    op, a, b = prop[1], _z3_int(prop[2], env, side), _z3_int(prop[3], env, side)
    if op == "∣":
        try:
            d = int(evaluate(prop[2]))
        except NotClosed:
            raise NotLinearInt("omega needs a numeral divisor in ∣") from None
        return b == 0 if d == 0 else b % z3.IntVal(d) == 0
    return {"=": a == b, "≠": a != b, "<": a < b, "≤": a <= b, ">": a > b, "≥": a >= b}[op]


def omega_unsat(hyps: list[tuple], goal: tuple | None, timeout_s: float,
                rlimit: int | None = None, budget: Budget | None = None) -> bool:
    """True iff hypotheses (those in omega's language) and ¬goal are infeasible over ℤ (within
    ``rlimit`` z3 resource units; see :func:`_decide`)."""
    env: dict[str, z3.ArithRef] = {}
    side: list = []
    solver = z3.Solver()
    for hyp in hyps:
        try:
            solver.add(z3_int_prop(hyp, env, side))
        except NotLinearInt:
            continue  # omega skips facts it does not understand
    if goal is not None:
        solver.add(z3.Not(z3_int_prop(goal, env, side)))
    solver.add(*side)
    return _decide(solver, timeout_s, rlimit, budget)
