"""MiniLean: known accepts, the soundness suite, the error contract, bad input."""

from __future__ import annotations

import itertools
import json
import os
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy

from icml25.pipelines.malot.arith import Poly, PolyContext, evaluate, to_poly
from icml25.pipelines.malot.lean_syntax import (
    OutOfFragment,
    _elab_term,
    parse_expr,
    parse_statement,
    statement_roundtrip,
)
from icml25.pipelines.malot.minilean import HEADER, Settings, lean_file, verify
from icml25.pipelines.malot.soundness import FALSE_SUITE, false_suite_results, random_inequalities

# the shared copy beside the project, or wherever $ICML25_MINIF2F points (a clone elsewhere)
MINIF2F = Path(os.environ.get("ICML25_MINIF2F") or Path(__file__).resolve().parents[4]
               / "shared/data/minif2f/minif2f_lean4.jsonl")
HEADER_LINES = HEADER.count("\n")


def _complete(statement: str, proof: str) -> bool:
    return verify(lean_file(statement, proof))["complete"]


@pytest.mark.parametrize(("statement", "proof"), [
    ("theorem t (a b : ℝ) (h₀ : a^2 + b^2 = 1) : a*b + (a - b) ≤ 1 :=",
     "nlinarith [sq_nonneg (a - b - 1)]"),
    ("theorem mathd_algebra_478 (b h v : ℝ) (h₀ : 0 < b ∧ 0 < h ∧ 0 < v) "
     "(h₁ : v = 1 / 3 * (b * h)) (h₂ : b = 30) (h₃ : h = 13 / 2) : v = 65 :=",
     "norm_num [h₁, h₂, h₃]"),
    ("theorem mathd_algebra_141 (a b : ℝ) (h₁ : (a * b)=180) (h₂ : 2 * (a + b)=54) :\n"
     "  (a^2 + b^2) = 369 :=", "nlinarith"),
    ("theorem t (x y : ℝ) : (x + y)^3 = x^3 + 3*x^2*y + 3*x*y^2 + y^3 :=", "ring"),
    ("theorem t (x : ℝ) (h : x ≠ 0) : x / x = 1 :=", "field_simp"),
    ("theorem t (x y : ℝ) (h : x = 1) (h2 : y = 2) : x < y ∧ y < 3 :=",
     "constructor\n· linarith\n· linarith"),
    ("theorem t (n : ℕ) (h₀ : n % 5 = 3) : (2 * n) % 5 = 1 :=", "omega"),
    ("theorem t : (7 : ℤ) / -2 = -3 ∧ (-7 : ℤ) % 2 = 1 :=", "decide"),
    ("theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 3 + 2 * x :=", "positivity"),
    ("theorem t (x y : ℝ) (h₀ : x + y = 10) (h₁ : x - y = 2) : x = 6 :=",
     "have h₂ : 2 * x = 12 := by linarith\nlinarith"),
    ("theorem t (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) : 0 < a * b :=",
     "obtain ⟨ha, hb⟩ := h₀\nnlinarith [mul_pos ha hb]"),
    ("theorem t (x y : ℝ) (h₀ : x = 2) (h₁ : y = x + 1) : y * x = 6 :=",
     "norm_num [h₀] at *\nlinarith"),
])
def test_known_accepts(statement, proof):
    result = verify(lean_file(statement, proof))
    assert result["complete"], result["errors"]
    assert result["pass"] and not result["sorries"]


@pytest.mark.parametrize(("statement", "proofs"), FALSE_SUITE)
def test_false_statement_suite_is_rejected(statement, proofs):
    for proof in proofs:
        assert not _complete(statement, proof), proof


def test_false_suite_with_every_portfolio_tactic_accepts_nothing():
    rows = false_suite_results()
    assert len(rows) > 200
    assert not [r for r in rows if r["accepted"]]


def test_sorry_is_never_complete_and_warns():
    result = verify(lean_file("theorem t (a b : ℝ) (h : a < b) : a < b + 1 :=", "sorry"))
    assert result["pass"] and not result["complete"]
    assert result["sorries"] and result["warnings"][0]["message"] == "declaration uses 'sorry'"
    assert result["verdict"] == "incomplete"


def test_error_lines_point_at_the_failing_tactic_in_the_full_file():
    statement = "theorem t (x y : ℝ) (h₀ : x = 2) (h₁ : y = 3) :\n  x + y = 5 ∧ x * y = 7 :="
    code = lean_file(statement, "constructor\n· linarith\n· nlinarith [h₀, h₁]")
    result = verify(code)
    lines = code.split("\n")
    (error,) = result["errors"]
    assert error["message"].startswith("linarith failed")
    assert "nlinarith" in lines[error["line"] - 1]  # 1-based, header included
    # 4 header lines, a blank line, 2 statement lines, then constructor / · / · (line 10)
    assert error["line"] == HEADER_LINES + 1 + 2 + 3
    unknown = verify(lean_file(statement, "constructor <;> linarith [h₅]"))
    assert unknown["errors"][0]["message"] == "unknown identifier 'h₅'"
    assert "linarith [h₅]" in lean_file(statement, "constructor <;> linarith [h₅]").split(
        "\n")[unknown["errors"][0]["line"] - 1]


def test_unsolved_goals_after_one_branch_of_constructor():
    result = verify(lean_file("theorem t (x : ℝ) (h : x = 1) : x < 2 ∧ x < 3 :=",
                              "constructor\nlinarith"))
    assert not result["complete"]
    assert result["errors"][0]["message"].startswith("unsolved goals")
    assert "⊢ x < 3" in result["errors"][0]["message"]


def test_lean_conventions_are_modelled_exactly():
    ctx = {"x": "ℕ"}
    # truncated ℕ subtraction, floor/Euclidean division and remainder, total field division
    def value(text, ctx=None):
        return evaluate(_elab_term(parse_expr(text), ctx or {}, None))
    assert value("(3 : ℕ) - 5") == 0
    assert value("(-7 : ℤ) / 2") == -4 and value("(-7 : ℤ) % 2") == 1
    assert value("(7 : ℤ) / -2") == -3 and value("(7 : ℤ) % -2") == 1
    assert value("(1 : ℝ) / 0") == 0 and value("(5 : ℕ) / 0") == 0 and value("(5 : ℕ) % 0") == 5
    assert value("(7 : ℝ) / 2") == Fraction(7, 2)
    with pytest.raises(OutOfFragment):
        parse_statement("theorem t (x : ℕ) : -x = 0 := by")  # no Neg ℕ
    with pytest.raises(OutOfFragment, match="non-numeral exponent"):
        parse_statement("theorem t (x n : ℕ) : x ^ n = 0 := by")
    assert parse_statement("theorem t (x : ℕ) : (x : ℝ) + 1 > 0 := by").goal[2][0] == "add"
    del ctx


def test_polynomial_normal_form_agrees_with_sympy():
    rng = np.random.default_rng(0)
    a, b = sympy.symbols("a b")
    for _ in range(30):
        c = rng.integers(-5, 6, size=4).tolist()
        k = int(rng.integers(1, 4))
        text = f"({c[0]} * a + {c[1]} * b) ^ {k} * ({c[2]} - {c[3]} * a * b)"
        poly = to_poly(_elab_term(parse_expr(text), {"a": "ℝ", "b": "ℝ"}, None), PolyContext())
        ref = sympy.Poly(sympy.expand((c[0] * a + c[1] * b) ** k * (c[2] - c[3] * a * b)), a, b)
        mine = {tuple(dict(m).get(v, 0) for v in ("a", "b")): q for m, q in poly.terms.items()}
        assert mine == {m: Fraction(int(q)) for m, q in ref.terms()}
    assert (Poly.atom("x") - Poly.atom("x")).terms == {}


def test_random_polynomial_inequalities_are_sound():
    rows = random_inequalities(120, seed=3, samples=1500)
    accepted = [r for r in rows if r["accepted"]]
    assert accepted, "the property must exercise some accepted proofs"
    assert not [r for r in accepted if r["counterexample"]]


@pytest.mark.parametrize("seed", [0, 1])
def test_nlinarith_certificates_hold_on_samples(seed):
    """Whenever nlinarith accepts ``0 ≤ p`` with square hints, p is non-negative on a grid."""
    rng = np.random.default_rng(seed)
    grid = np.array(list(itertools.product(np.linspace(-3, 3, 25), repeat=2)))
    for _ in range(15):
        k1, k2 = rng.integers(-3, 4, size=2)
        text = f"(a - {k1} * b) ^ 2 + {int(k2)} * a * b"
        ok = _complete(f"theorem t (a b : ℝ) : 0 ≤ {text} :=",
                       f"nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), sq_nonneg (a - {k1} * b)]")
        vals = (grid[:, 0] - k1 * grid[:, 1]) ** 2 + k2 * grid[:, 0] * grid[:, 1]
        if ok:
            assert vals.min() >= -1e-9, text


def test_bad_input_gets_a_verdict_within_its_limit():
    statement = ("theorem t (a b c : ℝ) (h₀ : 0 < a ∧ 0 < b ∧ 0 < c) (h₁ : c < a + b) :\n"
                 "  a ^ 4 * b + c ^ 3 ≤ a * b * c ^ 3 :=")
    looping = "\n".join(["all_goals try nlinarith [sq_nonneg (a - b), sq_nonneg (b - c), "
                         "sq_nonneg (a - c), mul_pos h₀.1 h₀.2.1]"] * 150)
    settings = Settings(proof_timeout_s=1.0, z3_timeout_s=0.5)
    start = time.perf_counter()
    result = verify(lean_file(statement, looping), settings)
    assert time.perf_counter() - start < 4.0
    assert result["verdict"] == "timeout" and not result["complete"]

    blowup = verify(lean_file("theorem t (a b c d e f g h : ℝ) :\n"
                              "  (a + b + c + d) ^ 16 * (e + f + g + h) ^ 16 = 0 :=", "ring"))
    assert blowup["verdict"] == "timeout" and blowup["verify_time"] < 20

    huge = verify(lean_file("theorem t : (1 : ℕ) = 1 :=", "rfl\n" * 20_000))
    assert huge["verdict"] == "too_large" and huge["verify_time"] < 1.0

    tactic = verify(lean_file("theorem t (n : ℕ) : n + 0 = n :=", "induction n"))
    assert tactic["errors"][0]["message"] == "unsupported in MiniLean: tactic 'induction'"
    assert tactic["verdict"] == "out_of_fragment"

    sums = verify(lean_file("theorem t : (∑ k in Finset.range 3, k) = 3 :=", "decide"))
    assert sums["verdict"] == "out_of_fragment"
    assert "big operators" in sums["errors"][0]["message"]

    garbage = verify("this is not Lean at all ⟨⟨⟨")
    assert garbage["verdict"] == "out_of_fragment" and not garbage["complete"]


@pytest.mark.skipif(not MINIF2F.exists(), reason="shared miniF2F copy absent")
def test_parser_round_trip_on_in_fragment_minif2f():
    records = [json.loads(line) for line in MINIF2F.read_text().splitlines() if line.strip()]
    inside = 0
    for record in records:
        try:
            parse_statement(record["formal_statement"])
        except OutOfFragment:
            continue
        inside += 1
        once = statement_roundtrip(record["formal_statement"])
        assert statement_roundtrip(once) == once
        assert parse_statement(once + " := by").goal == \
            parse_statement(record["formal_statement"]).goal
    assert 100 <= inside <= 250  # exact coverage is reported by the pipeline


@pytest.mark.skipif(not MINIF2F.exists(), reason="shared miniF2F copy absent")
def test_perturbed_minif2f_answers_are_never_proved():
    """In-fragment miniF2F goals ``… = N`` with N replaced by N + 1 are false unless the
    hypotheses are contradictory; every portfolio tactic must fail on them."""
    import re

    records = [json.loads(line) for line in MINIF2F.read_text().splitlines() if line.strip()]
    tried = 0
    for record in records:
        text = record["formal_statement"]
        text = text[:text.rfind(":=")].rstrip()
        match = re.search(r"= (\d+)\s*$", text)
        if not match:
            continue
        try:
            parse_statement(text + " := by")
        except OutOfFragment:
            continue
        wrong = text[:match.start(1)] + str(int(match.group(1)) + 1) + " := by"
        vacuous = text[:text.rfind(":")] + ": False := by"
        tried += 1
        for proof in ("linarith", "nlinarith", "norm_num", "omega", "simp", "decide"):
            if _complete(wrong, proof):  # only a contradictory context may prove it
                assert _complete(vacuous, proof), (record["id"], proof)
        if tried == 40:
            break
    assert tried == 40
