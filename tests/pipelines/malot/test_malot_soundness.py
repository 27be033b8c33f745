"""MiniLean's soundness suite: Lean 4's binder shadowing, division by a literal 0 and ``0⁻¹``,
malformed proofs Lean rejects, and a generated family whose truth z3 decides on Lean's semantics."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.malot.lean_syntax import OutOfFragment, parse_statement
from icml25.pipelines.malot.minilean import HEADER, lean_file, verify
from icml25.pipelines.malot.soundness import (
    FALSE_SUITE,
    MALFORMED_PROOFS,
    WELL_FORMED_TWINS,
    _decide,
    _template_cases,
    lean_semantics_family,
    malformed_file,
    malformed_results,
)

HEADER_LINES = HEADER.count("\n")
SUITE = {statement.split()[1]: (statement, proofs) for statement, proofs in FALSE_SUITE}


def _complete(statement: str, proof: str) -> bool:
    return verify(lean_file(statement, proof))["complete"]


# ------------------------------------------------------------------------ binder shadowing
@pytest.mark.parametrize("name", ["s1", "s2", "s3", "s4", "s5"])
def test_shadowed_binder_statements_are_rejected(name):
    statement, proofs = SUITE[name]
    for proof in proofs:
        assert not _complete(statement, proof), proof


def test_a_later_binder_is_a_fresh_variable():
    st = parse_statement("theorem s1 (x : ℝ) (h : x = 0) (x : ℝ) : x = 0 := by")
    assert st.variables == ["x✝", "x"] and st.ctx == {"x✝": "ℝ", "x": "ℝ"}
    (name, hyp), = st.hyps
    assert name == "h" and hyp[2] == ("var", "ℝ", "x✝")  # h is about the shadowed x
    assert st.goal[2] == ("var", "ℝ", "x")
    typed = parse_statement("theorem s3 (x : ℕ) (h : x = 0) (x : ℝ) : x = 0 := by")
    assert typed.hyps[0][1][2] == ("var", "ℕ", "x✝") and typed.goal[2] == ("var", "ℝ", "x")
    twice = parse_statement("theorem t (x : ℤ) (x : ℤ) (x : ℕ) : x = 0 := by")
    assert twice.variables == ["x✝", "x✝¹", "x"]
    with pytest.raises(OutOfFragment):  # an inaccessible name cannot be written
        parse_statement("theorem t (x : ℝ) (x : ℝ) : x✝ = 0 := by")
    # the goal state Lean prints: the shadowed variable is inaccessible
    result = verify(lean_file("theorem s1 (x : ℝ) (h : x = 0) (x : ℝ) : x = 0 :=", "linarith"))
    assert "h : x✝ = 0" in result["errors"][0]["message"]


def test_shadowing_that_keeps_the_statement_true_is_still_provable():
    assert _complete("theorem t (x : ℝ) (x : ℝ) (h : x = 1) : x = 1 :=", "linarith")
    assert _complete("theorem t (x : ℕ) (h : x = 0) (x : ℕ) (h : x = 2) : x = 2 :=", "omega")
    # the first h is shadowed but stays in the context: linarith may still use it
    assert _complete("theorem t (x y : ℝ) (h : x = 1) (h : y = x) : y = 1 :=", "linarith")


def test_a_hypothesis_named_like_a_variable_shadows_it_in_the_proof():
    statement = "theorem t (x : ℝ) (h : x = 1) : x < 2 ∧ x < 3 :="
    result = verify(lean_file(statement, "have x : (1 : ℝ) < 2 := by norm_num\nleft"))
    assert not result["complete"]
    shadowed = verify(lean_file(statement, "have x : (1 : ℝ) < 2 := by norm_num\nring"))
    assert "⊢ x✝ < 2 ∧ x✝ < 3" in shadowed["errors"][0]["message"]
    assert "h : x✝ = 1" in shadowed["errors"][0]["message"]
    # the statement about the variable is still provable from its (renamed) hypothesis
    assert _complete(statement, "have x : (1 : ℝ) < 2 := by norm_num\nconstructor <;> linarith")


# -------------------------------------------------------------- division by a literal zero
@pytest.mark.parametrize("name", ["z1", "z2", "z3", "f9"])
def test_false_statements_about_zero_divisors_are_rejected(name):
    statement, proofs = SUITE[name]
    for proof in proofs:
        assert not _complete(statement, proof), proof


def test_field_simp_never_cross_multiplies_by_a_zero_numeral():
    # Lean: 1 / 0 = 0 and 2 / 0 = 0, so z1 says x / y = 0 (false) and this one is true
    assert _complete("theorem t (x y : ℝ) (hy : y ≠ 0) : x / y + 1 / 0 = x / y :=", "field_simp")
    assert _complete("theorem t (x y : ℝ) (hy : y ≠ 0) : x / y + 1 / (3 - 3) = x / y :=",
                     "field_simp")
    assert _complete("theorem t (x : ℝ) : x / 0 = 0 :=", "norm_num")
    assert _complete("theorem t (x y : ℝ) (hy : y ≠ 0) : x / y * y = x :=", "field_simp")


def test_inverse_follows_lean():
    assert _complete("theorem t (x : ℝ) : x * (0 : ℝ)⁻¹ = 0 :=", "norm_num")
    assert _complete("theorem t (x : ℝ) (hx : x ≠ 0) : x * x⁻¹ = 1 :=", "field_simp")
    assert _complete("theorem t (q : ℚ) (x : ℝ) (h : q = 2) : (q⁻¹ : ℚ) = 1 / 2 :=",
                     "norm_num [h]")
    with pytest.raises(OutOfFragment, match="⁻¹ on ℕ"):
        parse_statement("theorem t (n : ℕ) : n⁻¹ = 0 := by")
    with pytest.raises(OutOfFragment, match="⁻¹ on ℕ"):
        parse_statement("theorem t : 0⁻¹ = 0 := by")  # numerals default to ℕ: no Inv ℕ


# ------------------------------------------------------------------------ malformed proofs
@pytest.mark.parametrize(("name", "statement", "lines"), MALFORMED_PROOFS,
                         ids=[m[0] for m in MALFORMED_PROOFS])
def test_malformed_proof_is_rejected_and_its_twin_accepted(name, statement, lines):
    code = malformed_file(statement, lines)
    result = verify(code)
    assert not result["complete"] and result["verdict"] == "error"
    error = result["errors"][0]
    assert error["category"] in ("syntax", "unknown tactic"), error
    first_proof_line = HEADER_LINES + 3  # header, blank line, statement, then the proof
    assert first_proof_line <= error["line"] <= first_proof_line + lines.count("\n")
    twin = verify(malformed_file(statement, WELL_FORMED_TWINS[name]))
    assert twin["complete"], twin["errors"]


def test_malformed_suite_accepts_nothing():
    rows = malformed_results()
    assert len(rows) == len(MALFORMED_PROOFS) >= 10
    assert not [r for r in rows if r["accepted"]]


def test_layouts_lean_accepts_still_verify():
    statement = "theorem t (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) : a * b ≤ (a ^ 2 + b ^ 2) / 2 ∧ 0 < a :="
    for proof in [
        "constructor\n· nlinarith [sq_nonneg (a - b),\n    sq_nonneg (a + b)]\n· linarith [h₀.1]",
        "constructor\n· have h : 0 ≤ (a - b) ^ 2 := by\n    positivity\n  nlinarith [h]\n"
        "· linarith [h₀.1]",
        "constructor\n· have h : 0 ≤ (a - b) ^ 2 := by positivity\n  nlinarith [h]\n"
        "· linarith [h₀.1]",
        "constructor <;>\n  nlinarith [sq_nonneg (a - b), h₀.1]",
        "constructor\n·\n  nlinarith [sq_nonneg (a - b)]\n· linarith [h₀.1]",
    ]:
        result = verify(lean_file(statement, proof))
        assert result["complete"], (proof, result["errors"])
    # inline `:= by tac`, then a dedented line: Lean ends the tactic block at `tac`
    code = (f"{HEADER}\ntheorem t (x : ℝ) (h : x = 1) : x < 2 ∧ x < 3 := by constructor\n"
            "  · linarith\n  · linarith\n")
    assert verify(code)["errors"][0]["category"] == "syntax"
    code = f"{HEADER}\ntheorem t (x : ℝ) (h : x = 1) : x < 2 := by linarith\n"
    assert verify(code)["complete"]


def test_tabs_inside_comments_are_allowed():
    code = f"{HEADER}\n/-- a\tdoc comment -/\ntheorem t (x : ℝ) (h : x = 1) : x < 2 := by\n" \
           "  linarith -- a\ttab in a comment\n"
    assert verify(code)["complete"]
    tab_statement = f"{HEADER}\ntheorem t (x : ℝ)\t(h : x = 1) : x < 2 := by\n  linarith\n"
    result = verify(tab_statement)
    assert not result["complete"] and result["errors"][0]["line"] == HEADER_LINES + 2


def test_unrecoverable_errors_escape_try_first_and_repeat():
    statement = "theorem t (x : ℝ) (h : x = 1) : x < 2 :="
    assert _complete(statement, "try norm_num\nlinarith")  # a tactic failure is recoverable
    assert _complete(statement, "first | ring | linarith")
    for proof in ["try frobnicate\nlinarith", "first | frobnicate | linarith",
                  "repeat' frobnicate\nlinarith", "try induction x\nlinarith",
                  "first | linarith", "first linarith"]:
        if proof == "first | linarith":
            assert _complete(statement, proof)
            continue
        assert not _complete(statement, proof), proof


# ------------------------------------------------------------ the generated family (z3)
def _expected_template_truths(c: int, k: int, t1: str, t2: str) -> list[bool]:
    """Truth of each near-miss template worked out by hand from Lean's definitions."""
    return [
        False,            # (x : t1) (h : x = c) (x : t2) : x = c   (the new x is free)
        False,            # ... x ≤ c (the new x is free, and ℕ/ℤ/ℝ are unbounded above)
        False,            # (x y) (h : x = y) (x) : x = y
        True,             # (x) (x) (h : x = c) : x = c              (h is about the new x)
        False,            # x / y + k / 0 = c / 0  ⟺  x / y = 0      (false for any c)
        c == 0,           # x / 0 = c
        c == 0,           # (x + k) / 0 = c
        c == 0,           # x * 0⁻¹ = c
        True,             # x ≠ 0 → x * x⁻¹ = 1
        False,            # x * x⁻¹ = 1 fails at x = 0
        False,            # n - k + k = n fails at n = 0 (k ≥ 1)
        True,             # k ≤ n → n - k + k = n
        c == 0,           # a < b → a - b = c (truncated: a - b = 0)
        False,            # ↑(n - k) = ↑n - k fails at n = 0
        True,             # k ≤ n → ↑(n - k) = ↑n - k
        False,            # n / (k+1) * (k+1) = n fails at n = 1
        True,             # (k+1) ∣ n → n / (k+1) * (k+1) = n
        False,            # ↑(n / (k+1)) = ↑n / (k+1) fails at n = 1
        True,             # Euclidean division: n / d * d + n % d = n
        True,             # Int.ediv_neg: n / -d = -(n / d)
        c != 0,           # n / 0 = c → n = c: vacuous unless c = 0, and then false
        False,            # n % 0 = n, so n % 0 = c fails for n ≠ c
    ]


def test_z3_oracle_agrees_with_hand_worked_lean_semantics():
    for seed in range(12):
        rng = np.random.default_rng(seed)
        state = np.random.default_rng(seed)
        c, k = int(state.integers(0, 4)), int(state.integers(1, 4))
        t1, t2 = (str(t) for t in state.choice(("ℕ", "ℤ", "ℝ"), size=2))
        cases = _template_cases(rng)
        expected = _expected_template_truths(c, k, t1, t2)
        assert len(cases) == len(expected)
        for (text, _, side, hyps, goal), want in zip(cases, expected, strict=True):
            assert _decide(side, hyps, goal) is want, (text, c, k)


def test_generated_family_accepts_only_true_statements():
    rows = lean_semantics_family(200, seed=0, proofs_per_case=4)
    cases = {r["statement"]: r["truth"] for r in rows}
    assert len(cases) == 200 and len(rows) == 200 * 4
    undecided = [s for s, t in cases.items() if t is None]
    assert len(undecided) <= 5
    false_cases = [s for s, t in cases.items() if t is False]
    true_cases = [s for s, t in cases.items() if t is True]
    assert len(false_cases) >= 60 and len(true_cases) >= 50  # both kinds are well represented
    wrong = [(r["statement"], r["proof"]) for r in rows if r["accepted"] and r["truth"] is not True]
    assert not wrong
    accepted_true = {r["statement"] for r in rows if r["accepted"]}
    assert len(accepted_true) >= 20  # the property exercises accepting proofs, not only errors
    shadowing = [s for s in false_cases if "(x : " in s and s.count("(x : ") > 1]
    zero_divisors = [s for s in cases if "/ 0" in s or "(0 : ℝ)⁻¹" in s]
    nat_sub = [s for s in cases if "(n : ℕ)" in s and " - " in s]
    assert len(shadowing) >= 10 and len(zero_divisors) >= 20 and len(nat_sub) >= 5
