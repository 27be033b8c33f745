"""The model-free reference agents (docs/papers/malot.md, "Baselines"): a tactic-portfolio
prover and a rule-based corrector.

The prover samples whole proofs from a portfolio of closing tactics (``norm_num``, ``linarith``,
``nlinarith`` with square hints over variable pairs, ``ring_nf``, ``omega``, ``positivity`` ...)
without replacement, weighted by a fixed prior; it never looks at the statement's structure
beyond its variable and hypothesis names, like a prover that has not yet seen Lean's feedback.
The corrector reads the failed proof and Lean's error messages and maps the error class to an
edit (linarith failed -> nlinarith with square hints or ``constructor <;> linarith`` on a
conjunction, ring failed -> ring_nf then linarith, unknown identifier -> rename, unsolved goals
after ``constructor`` -> close every goal, omega on a field -> linarith, no progress -> the
substitution ``norm_num [hyps]``). Both are seeded and deterministic for a fixed seed.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from icml25.pipelines.malot.lean_syntax import OutOfFragment, parse_statement, strip_comments


def _info(statement: str) -> dict[str, Any]:
    try:
        st = parse_statement(statement)
        return {"vars": st.variables, "hyps": [n for n, _ in st.hyps],
                "types": set(st.ctx.values()), "goal_kind": st.goal[0],
                "goal_op": st.goal[1] if st.goal[0] == "cmp" else None}
    except OutOfFragment:
        text = strip_comments(statement)
        return {"vars": re.findall(r"\((\w+)\s*:\s*ℝ\)", text), "hyps":
                re.findall(r"\((h\S*)\s*:", text), "types": set(), "goal_kind": "?",
                "goal_op": None}


def _square_hints(variables: list[str], rng: np.random.Generator) -> str:
    pairs = [(a, b) for i, a in enumerate(variables) for b in variables[i + 1:]]
    terms = []
    for a, b in pairs[:3]:
        terms += [f"sq_nonneg ({a} - {b})", f"sq_nonneg ({a} + {b})"]
    terms += [f"sq_nonneg ({v} - 1)" for v in variables[:2]]
    if not terms:
        return "[]"
    k = int(rng.integers(1, min(4, len(terms)) + 1))
    picked = sorted(rng.choice(len(terms), size=k, replace=False).tolist())
    return "[" + ", ".join(terms[i] for i in picked) + "]"


def portfolio(statement: str, rng: np.random.Generator) -> list[tuple[str, float]]:
    """Candidate whole proofs with prior weights (the prover's sampling distribution)."""
    info = _info(statement)
    hyps = info["hyps"]
    cands = [("norm_num", 3.0), ("linarith", 3.0), ("nlinarith", 2.0), ("simp", 1.0),
             ("positivity", 1.0), ("ring_nf", 1.0), ("omega", 1.0), ("decide", 0.5),
             ("field_simp", 0.5), ("norm_num\nlinarith", 1.0)]
    if hyps:
        cands.append((f"norm_num [{', '.join(hyps)}] at *\nlinarith", 0.5))
        cands.append((f"linarith [{hyps[0]}]", 0.5))
    for _ in range(3):
        cands.append((f"nlinarith {_square_hints(info['vars'], rng)}", 0.4))
    return cands


class PortfolioProver:
    """Samples ``n`` distinct portfolio proofs for a statement; ``generations`` counts every sampled proof."""

    name = "portfolio"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.generations = 0

    def prove(self, statement: str, nl: str, n: int) -> list[str]:
        cands = portfolio(statement, self.rng)
        texts = list(dict.fromkeys(c for c, _ in cands))
        weights = np.array([dict(cands)[t] for t in texts], dtype=float)
        k = min(n, len(texts))
        picked = self.rng.choice(len(texts), size=k, replace=False, p=weights / weights.sum())
        proofs = [texts[i] for i in picked]
        while len(proofs) < n:  # more samples than candidates: repeats, like a sampler would
            proofs.append(texts[int(self.rng.choice(len(texts), p=weights / weights.sum()))])
        self.generations += n
        return proofs


class RuleCorrector:
    """Maps the verifier's error class to an edit of the failed proof."""

    name = "rules"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.generations = 0

    def correct(self, statement: str, nl: str, proof: str, errors: list[dict[str, Any]],
                n: int) -> list[str]:
        self.generations += n
        options = self.options(statement, proof, errors)
        out = []
        for i in range(n):
            out.append(options[i % len(options)] if options else proof)
        return out

    def options(self, statement: str, proof: str, errors: list[dict[str, Any]]) -> list[str]:
        info = _info(statement)
        text = "\n".join(e.get("message", "") for e in errors)
        hyps = info["hyps"]
        subst = f"norm_num [{', '.join(hyps)}]" if hyps else "norm_num"
        fixes: list[str] = []
        unknown = re.search(r"unknown identifier '([^']+)'", text)
        if unknown and hyps:
            bad = unknown.group(1)
            fixes += [proof.replace(bad, h) for h in hyps if h != bad][:2]
            fixes.append(re.sub(rf",?\s*{re.escape(bad)}\s*,?", "", proof).replace("[]", ""))
        if info["goal_kind"] == "and":
            fixes += ["constructor <;> linarith", "constructor <;> nlinarith",
                      "constructor\n· linarith\n· linarith"]
        if "omega could not prove" in text:
            fixes += ["linarith", subst] if "ℝ" in info["types"] else [subst, "decide"]
        if "ring failed" in text or "ring_nf failed" in text:
            fixes += ["ring_nf\nlinarith", f"nlinarith {_square_hints(info['vars'], self.rng)}"]
        if "linarith failed" in text:
            if info["types"] & {"ℕ", "ℤ"} and "%" in strip_comments(statement):
                fixes.append("omega")
            if info["goal_op"] == "=" and not hyps:
                fixes.append("ring")
            if hyps and info["goal_op"] == "=":
                fixes.append(subst)
            for _ in range(2):
                fixes.append(f"nlinarith {_square_hints(info['vars'], self.rng)}")
        if "simp made no progress" in text or "failed to prove" in text or \
                "normalises to False" in text:
            fixes += ["linarith", subst, "ring"]
        if "positivity" in text or "decide" in text or "rfl" in text:
            fixes += ["nlinarith " + _square_hints(info["vars"], self.rng), "linarith"]
        if "unsolved goals" in text:
            fixes += [proof + "\nall_goals linarith", "constructor <;> linarith"]
        if not fixes:
            fixes = ["linarith", "nlinarith " + _square_hints(info["vars"], self.rng), "omega"]
        fixes = [f for f in dict.fromkeys(fixes) if f.strip() and f.strip() != proof.strip()]
        order = self.rng.permutation(len(fixes)) if len(fixes) > 1 else np.arange(len(fixes))
        # the first rule that matches the error class stays first; the rest are shuffled
        return fixes[:1] + [fixes[i] for i in order if i != 0]
