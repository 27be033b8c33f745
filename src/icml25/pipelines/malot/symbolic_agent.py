"""The model-free reference agents (docs/papers/malot.md, "Baselines"): a tactic-portfolio
prover and a rule-based corrector that draw on one tactic repertoire.

The repertoire (:func:`portfolio`, membership :func:`in_repertoire`) is the set of whole proofs
both agents can write for a statement: closing tactics (``norm_num``, ``linarith``, ``nlinarith`` with square hints over variable pairs,
``ring``, ``ring_nf``, ``omega``, ``positivity`` ...), the substitution ``norm_num [hyps]`` and
the conjunction splits (``constructor <;> linarith`` ...). Both agents see the statement only
through its variable and hypothesis names. The prover samples whole proofs from the repertoire
without replacement, weighted by a fixed prior, like a prover that has not yet seen Lean's
feedback. The corrector reads Lean's error messages (the goal state they print included) and
maps the error class to repertoire entries (a conjunction in the printed goal -> the
``constructor`` splits, linarith failed -> nlinarith with square hints, ring failed -> ring_nf
then linarith, omega on a field -> linarith, no progress -> the substitution); its only edits
outside the repertoire rename an unknown identifier of the failed proof, which a portfolio proof
never contains. So the corrector's gain over more prover samples comes from the feedback, not
from tactics only it knows. Both are seeded and deterministic for a fixed seed.
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


def _square_terms(variables: list[str]) -> list[str]:
    """The square hints of the repertoire: ``sq_nonneg`` of differences and sums of variable
    pairs, and of ``v - 1``."""
    pairs = [(a, b) for i, a in enumerate(variables) for b in variables[i + 1:]]
    terms = []
    for a, b in pairs[:3]:
        terms += [f"sq_nonneg ({a} - {b})", f"sq_nonneg ({a} + {b})"]
    return terms + [f"sq_nonneg ({v} - 1)" for v in variables[:2]]


def _square_hints(variables: list[str], rng: np.random.Generator) -> str:
    terms = _square_terms(variables)
    if not terms:
        return "[]"
    k = int(rng.integers(1, min(4, len(terms)) + 1))
    picked = sorted(rng.choice(len(terms), size=k, replace=False).tolist())
    return "[" + ", ".join(terms[i] for i in picked) + "]"


CONJUNCTION_SPLITS = ("constructor <;> linarith", "constructor <;> nlinarith",
                      "constructor\n· linarith\n· linarith")


def _fixed_repertoire(info: dict[str, Any]) -> list[tuple[str, float]]:
    """The repertoire's proofs other than the sampled square hints, with the prover's prior."""
    hyps = info["hyps"]
    cands = [("norm_num", 3.0), ("linarith", 3.0), ("nlinarith", 2.0), ("simp", 1.0),
             ("positivity", 1.0), ("ring_nf", 1.0), ("omega", 1.0), ("decide", 0.5),
             ("field_simp", 0.5), ("norm_num\nlinarith", 1.0), ("ring", 1.0),
             ("ring_nf\nlinarith", 0.5), (CONJUNCTION_SPLITS[0], 1.0),
             (CONJUNCTION_SPLITS[1], 0.5), (CONJUNCTION_SPLITS[2], 0.5)]
    if hyps:
        cands += [(f"norm_num [{', '.join(hyps)}] at *\nlinarith", 0.5),
                  (f"linarith [{hyps[0]}]", 0.5), (f"norm_num [{', '.join(hyps)}]", 0.5)]
    return cands


def portfolio(statement: str, rng: np.random.Generator) -> list[tuple[str, float]]:
    """Candidate whole proofs with prior weights (the prover's sampling distribution over
    :func:`repertoire`)."""
    info = _info(statement)
    cands = _fixed_repertoire(info)
    for _ in range(3):
        cands.append((f"nlinarith {_square_hints(info['vars'], rng)}", 0.4))
    return cands


def in_repertoire(statement: str, proof: str) -> bool:
    """Whether ``proof`` is one the prover can sample for ``statement``: a fixed repertoire
    entry, or ``nlinarith`` with 1-4 distinct square hints of the statement's variables in the
    order :func:`_square_hints` writes them."""
    info = _info(statement)
    if proof in {c for c, _ in _fixed_repertoire(info)}:
        return True
    match = re.fullmatch(r"nlinarith \[(.*)\]", proof)
    if not match:
        return False
    terms = _square_terms(info["vars"])
    hints = [h.strip() for h in match.group(1).split(", ")] if match.group(1) else []
    if not terms:
        return not hints
    positions = [terms.index(h) if h in terms else -1 for h in hints]
    return 1 <= len(hints) <= min(4, len(terms)) and -1 not in positions and \
        positions == sorted(set(positions))


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
        """Repertoire entries (and renames) for the failed ``proof``, chosen from the error
        messages: their classes and the goal state they print (the statement itself is read
        only for its variable and hypothesis names, as the prover reads it)."""
        info = _info(statement)
        text = "\n".join(e.get("message", "") for e in errors)
        goal = _printed_goal(text)
        hyps = info["hyps"]
        subst = f"norm_num [{', '.join(hyps)}]" if hyps else "norm_num"
        fixes: list[str] = []
        unknown = re.search(r"unknown identifier '([^']+)'", text)
        if unknown and hyps:
            bad = unknown.group(1)
            fixes += [proof.replace(bad, h) for h in hyps if h != bad][:2]
            fixes.append(re.sub(rf",?\s*{re.escape(bad)}\s*,?", "", proof).replace("[]", ""))
        if goal is not None and "∧" in goal:
            fixes += list(CONJUNCTION_SPLITS)
        if "omega could not prove" in text:
            fixes += ["linarith", subst] if _printed_field(text) else [subst, "decide"]
        if "ring failed" in text or "ring_nf failed" in text:
            fixes += ["ring_nf\nlinarith", f"nlinarith {_square_hints(info['vars'], self.rng)}"]
        if "linarith failed" in text:
            if goal is not None and "%" in goal and not _printed_field(text):
                fixes.append("omega")
            if goal is not None and _is_equation(goal):
                fixes.append(subst if hyps else "ring")
            for _ in range(2):
                fixes.append(f"nlinarith {_square_hints(info['vars'], self.rng)}")
        if "simp made no progress" in text or "failed to prove" in text or \
                "normalises to False" in text:
            fixes += ["linarith", subst, "ring"]
        if "positivity" in text or "decide" in text or "rfl" in text:
            fixes += ["nlinarith " + _square_hints(info["vars"], self.rng), "linarith"]
        if "unsolved goals" in text:
            fixes += ["constructor <;> linarith" if goal and "∧" in goal else "linarith", subst]
        if not fixes:
            fixes = ["linarith", "nlinarith " + _square_hints(info["vars"], self.rng), "omega"]
        fixes = [f for f in dict.fromkeys(fixes) if f.strip() and f.strip() != proof.strip()]
        order = self.rng.permutation(len(fixes)) if len(fixes) > 1 else np.arange(len(fixes))
        # the first rule that matches the error class stays first; the rest are shuffled
        return fixes[:1] + [fixes[i] for i in order if i != 0]


def _printed_goal(text: str) -> str | None:
    """The goal an error message prints: the ``⊢`` line, or linarith's negated goal
    ``a✝ : ¬(…)``; None if the message shows no goal."""
    for line in text.split("\n"):
        if line.startswith("⊢ ") and not line.startswith("⊢ False"):
            return line[2:].strip()
    match = re.search(r"^a✝ : ¬(.*)$", text, re.M)
    return match.group(1).strip() if match else None


def _printed_field(text: str) -> bool:
    """The printed context declares a variable over ℝ or ℚ (``x y : ℝ``)."""
    return bool(re.search(r"^[^\n⊢:]+ : [ℝℚ]$", text, re.M))


def _is_equation(goal: str) -> bool:
    inner = goal[1:-1] if goal.startswith("(") and goal.endswith(")") else goal
    return " = " in inner and not re.search(r"[<>≤≥∧∨]", inner)
