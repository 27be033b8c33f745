"""Synthetic Lean 4 theorems with reference proofs and mutated (wrong) proofs
(docs/papers/malot.md, "Data").

Families: (a) linear systems with a unique rational solution (``linarith``), (b) evaluations
(``norm_num [h₀, h₁]``), (c) polynomial identities (``ring``), (d) two-variable inequalities that
need square hints (``nlinarith [sq_nonneg (a - b), ...]``), (e) ℕ/ℤ modular facts (``omega``),
(f) conjunction goals (``constructor <;> linarith``). Every reference proof is checked by MiniLean
at generation; a theorem whose reference proof fails is a generator bug and raises.
Mutations of reference proofs (drop or replace a hint, wrong tactic, perturbed constant, missing
``constructor``, wrong hypothesis name) give synthetic correction records (LoT-CD): statement,
wrong proof, MiniLean's errors, correct proof.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from icml25.pipelines.malot.minilean import Settings

FAMILIES = ("linear", "evaluation", "identity", "square_hint", "modular", "conjunction")
_VARS = ("x", "y", "z", "w")
_SUB = "₀₁₂₃₄₅₆₇₈₉"


def _h(i: int) -> str:
    return f"h{_SUB[i]}"


def _coef(rng: np.random.Generator, cmax: int, nonzero: bool = True) -> int:
    while True:
        c = int(rng.integers(-cmax, cmax + 1))
        if c or not nonzero:
            return c


def _lin(coefs: list[int], names: list[str]) -> str:
    parts = []
    for c, v in zip(coefs, names, strict=True):
        if c == 0:
            continue
        term = v if abs(c) == 1 else f"{abs(c)} * {v}"
        parts.append(("- " if c < 0 else "+ ") + term)
    text = " ".join(parts)
    return text[2:] if text.startswith("+ ") else "-" + text[2:] if text.startswith("- ") else text


def _frac(q: Fraction) -> str:
    if q.denominator == 1:
        return str(q.numerator)
    return f"{q.numerator} / {q.denominator}"


def _linear(rng, name, cmax, n_vars):
    names = list(_VARS[:n_vars])
    while True:
        a = np.array([[_coef(rng, cmax, False) for _ in names] for _ in names], dtype=float)
        if abs(np.linalg.det(a)) > 0.5:
            break
    sol = [Fraction(int(rng.integers(-cmax, cmax + 1))) for _ in names]
    hyps = []
    for i, row in enumerate(a.astype(int).tolist()):
        rhs = sum(Fraction(c) * s for c, s in zip(row, sol, strict=True))
        hyps.append(f"({_h(i)} : {_lin(row, names) or '0'} = {_frac(rhs)})")
    target = int(rng.integers(n_vars))
    stmt = (f"theorem {name} ({' '.join(names)} : ℝ) {' '.join(hyps)} :\n  "
            f"{names[target]} = {_frac(sol[target])} := by")
    nl = (f"Solve the linear system for {names[target]}: show that {names[target]} = "
          f"{_frac(sol[target])}.")
    return stmt, nl, "linarith"


def _evaluation(rng, name, cmax, n_vars):
    names = list(_VARS[:max(2, min(n_vars, 3))])
    vals = [int(rng.integers(-cmax, cmax + 1)) for _ in names]
    hyps = " ".join(f"({_h(i)} : {v} = {val})" for i, (v, val) in
                    enumerate(zip(names, vals, strict=True)))
    c = [_coef(rng, cmax) for _ in range(3)]
    expr = f"{c[0]} * {names[0]} ^ 2 + {c[1]} * {names[0]} * {names[1]} + {c[2]} * {names[-1]}"
    value = c[0] * vals[0] ** 2 + c[1] * vals[0] * vals[1] + c[2] * vals[-1]
    stmt = f"theorem {name} ({' '.join(names)} : ℝ) {hyps} :\n  {expr} = {value} := by"
    nl = f"Evaluate {expr} at the given values; show it equals {value}."
    lemmas = ", ".join(_h(i) for i in range(len(names)))
    return stmt, nl, f"norm_num [{lemmas}]"


def _identity(rng, name, cmax, n_vars):
    a, b = "a", "b"
    p, q = _coef(rng, cmax), _coef(rng, cmax)
    kind = int(rng.integers(3))
    if kind == 0:
        lhs = f"({p} * {a} + {q} * {b}) ^ 2"
        rhs = f"{p * p} * {a} ^ 2 + {2 * p * q} * {a} * {b} + {q * q} * {b} ^ 2"
    elif kind == 1:
        lhs = f"({a} + {p}) * ({a} - {p})"
        rhs = f"{a} ^ 2 - {p * p}"
    else:
        lhs = f"({a} + {b}) ^ 3 - ({a} - {b}) ^ 3"
        rhs = f"6 * {a} ^ 2 * {b} + 2 * {b} ^ 3"
    stmt = f"theorem {name} ({a} {b} : ℝ) :\n  {lhs} = {rhs} := by"
    return stmt, f"Expand and show that {lhs} = {rhs}.", "ring"


def _square_hint(rng, name, cmax, n_vars):
    k = int(rng.integers(1, min(cmax, 4) + 1))
    kind = int(rng.integers(3))
    if kind == 0:
        stmt = f"theorem {name} (a b : ℝ) :\n  {2 * k} * a * b ≤ {k} * a ^ 2 + {k} * b ^ 2 := by"
        proof = "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]"
    elif kind == 1:
        stmt = (f"theorem {name} (a b : ℝ) (h₀ : a + b = {2 * k}) :\n  "
                f"a * b ≤ {k * k} := by")
        proof = "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]"
    else:
        stmt = (f"theorem {name} (a b : ℝ) (h₀ : a ^ 2 + b ^ 2 = {2 * k * k}) :\n  "
                f"a * b ≤ {k * k} := by")
        proof = "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]"
    return stmt, "Prove the inequality using that squares are non-negative.", proof


def _modular(rng, name, cmax, n_vars):
    m = int(rng.integers(2, 10))
    r = int(rng.integers(0, m))
    s = int(rng.integers(1, m + 3))
    typ = "ℕ" if rng.random() < 0.5 else "ℤ"
    stmt = (f"theorem {name} (n : {typ}) ({_h(0)} : n % {m} = {r}) :\n  "
            f"(n + {s}) % {m} = {(r + s) % m} := by")
    return stmt, f"If n leaves remainder {r} mod {m}, find (n + {s}) mod {m}.", "omega"


def _conjunction(rng, name, cmax, n_vars):
    vx, vy = int(rng.integers(-cmax, cmax + 1)), int(rng.integers(-cmax, cmax + 1))
    s, d = vx + vy, vx - vy
    stmt = (f"theorem {name} (x y : ℝ) ({_h(0)} : x + y = {s}) ({_h(1)} : x - y = {d}) :\n  "
            f"x = {vx} ∧ y = {vy} := by")
    return stmt, f"Solve for both x and y: x = {vx} and y = {vy}.", "constructor <;> linarith"


_MAKERS = {"linear": _linear, "evaluation": _evaluation, "identity": _identity,
           "square_hint": _square_hint, "modular": _modular, "conjunction": _conjunction}


def generate_theorems(n: int, seed: int, prefix: str, cmax: int = 9, max_vars: int = 3,
                      families: tuple[str, ...] = FAMILIES,
                      settings: Settings | None = None) -> list[dict[str, Any]]:
    """``n`` theorems cycling through ``families``; each reference proof is MiniLean-checked."""
    from icml25.pipelines.malot.minilean import lean_file, verify
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        family = families[i % len(families)]
        name = f"{prefix}_{family}_{i}"
        n_vars = int(rng.integers(2, max_vars + 1))
        statement, nl, proof = _MAKERS[family](rng, name, cmax, n_vars)
        verdict = verify(lean_file(statement, proof), settings)
        if not verdict["complete"]:
            raise AssertionError(f"synthetic generator: reference proof of {name} rejected: "
                                 f"{verdict['errors'][:1]}")
        rows.append({"name": name, "family": family, "statement": statement, "nl": nl,
                     "proof": proof})
    return rows


# ---------------------------------------------------------------------------- mutations
def mutate_proof(proof: str, statement: str, rng: np.random.Generator) -> tuple[str, str]:
    """A plausible wrong proof and the mutation's kind."""
    options = []
    if "[" in proof:
        options.append(("drop_hints", re.sub(r"\s*\[.*\]", "", proof)))
    if "constructor <;> " in proof:
        options.append(("missing_constructor", proof.replace("constructor <;> ", "")))
    if re.search(r"\d", proof):
        options.append(("perturbed_constant",
                        re.sub(r"\d+", lambda m: str(int(m.group()) + 1), proof, count=1)))
    if "h₀" in statement:
        options.append(("wrong_hypothesis", proof + " [h₅]" if "[" not in proof
                        else proof.replace("[", "[h₅, ", 1)))
    wrong = {"linarith": "nlinarith", "nlinarith": "linarith", "ring": "linarith",
             "omega": "linarith", "norm_num": "linarith"}
    head = proof.split()[0]
    options.append(("wrong_tactic", wrong.get(head, "linarith") + proof[len(head):]
                    if head in wrong else "linarith"))
    kind, text = options[int(rng.integers(len(options)))]
    return text, kind


def correction_records(theorems: list[dict[str, Any]], per_theorem: int, seed: int,
                       settings: Settings | None = None) -> list[dict[str, Any]]:
    """Synthetic LoT-CD: (statement, wrong proof, errors, correct proof) where MiniLean rejects
    the wrong proof."""
    from icml25.pipelines.malot.minilean import lean_file, verify
    rng = np.random.default_rng(seed)
    rows = []
    for thm in theorems:
        seen = set()
        for _ in range(per_theorem):
            wrong, kind = mutate_proof(thm["proof"], thm["statement"], rng)
            if wrong in seen:
                continue
            seen.add(wrong)
            verdict = verify(lean_file(thm["statement"], wrong), settings)
            if verdict["complete"]:
                continue
            errors = "\n\n".join(f"line {e['line']}\n{e['message']}" for e in verdict["errors"])
            rows.append({"name": thm["name"], "family": thm["family"],
                         "statement": thm["statement"], "nl": thm["nl"], "wrong_proof": wrong,
                         "mutation": kind, "errors": errors, "proof": thm["proof"]})
    return rows
