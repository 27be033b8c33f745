"""MiniLean's budgets are deterministic: z3 resource units (z3's ``rlimit`` count) per call and
per proof and a step count per proof decide a verdict, so it does not depend on the machine's
speed or load; the wall-clock limits are safety nets whose hits are reported as such."""

from __future__ import annotations

import time

import pytest

from icml25.pipelines.malot import arith
from icml25.pipelines.malot.minilean import Settings, lean_file, verify

PROVED = [("theorem t (a b : ℝ) : 2 * a * b ≤ a ^ 2 + b ^ 2 :=", "nlinarith [sq_nonneg (a - b)]"),
          ("theorem t (a b c : ℝ) : a * b + b * c + c * a ≤ a ^ 2 + b ^ 2 + c ^ 2 :=",
           "nlinarith [sq_nonneg (a - b), sq_nonneg (b - c), sq_nonneg (a - c)]")]
LOOPING = ("theorem t (a b c : ℝ) (h₀ : 0 < a ∧ 0 < b ∧ 0 < c) (h₁ : c < a + b) :\n"
           "  a ^ 4 * b + c ^ 3 ≤ a * b * c ^ 3 :=",
           "\n".join(["all_goals try nlinarith [sq_nonneg (a - b), sq_nonneg (b - c), "
                      "sq_nonneg (a - c), mul_pos h₀.1 h₀.2.1]"] * 150))


def _key(result: dict) -> tuple:
    return (result["verdict"], result["complete"], result.get("wall_clock_limit", False),
            tuple(e["message"] for e in result["errors"]))


@pytest.mark.parametrize(("statement", "proof"), PROVED)
def test_a_z3_call_out_of_resource_units_fails_the_same_on_any_clock(statement, proof):
    code = lean_file(statement, proof)
    assert verify(code, Settings())["complete"]
    starved = [verify(code, Settings(z3_rlimit=100, z3_timeout_s=t)) for t in (5.0, 60.0)]
    assert starved[0]["verdict"] == "error" and not starved[0].get("wall_clock_limit")
    assert "linarith failed" in starved[0]["errors"][0]["message"]
    assert _key(starved[0]) == _key(starved[1])


def test_the_step_budget_gives_the_same_timeout_whatever_the_wall_clock_limit():
    code = lean_file(*LOOPING)
    runs = [verify(code, Settings(max_steps=12, proof_timeout_s=t)) for t in (5.0, 600.0)]
    assert runs[0]["verdict"] == "timeout" and runs[0]["wall_clock_limit"] is False
    assert "(deterministic)" in runs[0]["errors"][-1]["message"]
    assert _key(runs[0]) == _key(runs[1])


def test_verdicts_are_the_same_on_a_clock_running_four_times_faster(monkeypatch):
    """A machine four times slower (or four times busier) sees four times the wall time per
    step; the verdicts stay the same as long as no safety net is hit."""
    codes = [lean_file(*c) for c in PROVED] + [lean_file(LOOPING[0], "nlinarith [sq_nonneg (a - b)]")]
    before = [_key(verify(c, Settings())) for c in codes]
    origin, real = time.monotonic(), time.monotonic
    monkeypatch.setattr(arith.time, "monotonic", lambda: origin + 4 * (real() - origin))
    assert [_key(verify(c, Settings())) for c in codes] == before


def test_a_wall_clock_hit_is_reported_as_machine_dependent():
    result = verify(lean_file(*PROVED[0]), Settings(proof_timeout_s=1e-9))
    assert result["verdict"] == "timeout" and result["wall_clock_limit"] is True
    assert "wall-clock safety limit" in result["errors"][-1]["message"]
    assert "(deterministic)" not in result["errors"][-1]["message"]
