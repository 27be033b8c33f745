"""The MA-LoT inference loop and whole-proof sampling at equal generation budget (the
paper's x + k × y against pass@(x + k·y); docs/papers/malot.md).

MA-LoT: the prover writes ``x`` whole proofs; ``sorry``/``admit`` proofs are dropped before the
verifier; if none is complete, each of ``rounds`` correction rounds selects ``y // c`` of the
newest failures (deduplicated by normalised text, distinct first errors first, then random) and
asks the corrector for ``c`` rewrites of each, so a round costs ``y`` generations and the budget
is ``x + rounds·y``. Unlike the official single-theorem script, each round corrects the newest
failures (not the round-0 ones again), and the ``sorry`` filter and the verified list are the same
list. Whole-proof sampling draws ``x + rounds·y`` proofs from the same prover; its "round r"
accuracy is pass@(x + r·y), the same generation count as MA-LoT after round r.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Protocol

import numpy as np

from icml25.pipelines.malot.minilean import lean_file


class Prover(Protocol):
    def prove(self, statement: str, nl: str, n: int) -> list[str]: ...


class Corrector(Protocol):
    def correct(self, statement: str, nl: str, proof: str, errors: list[dict[str, Any]],
                n: int) -> list[str]: ...


def _normalise(proof: str) -> str:
    return re.sub(r"\s+", " ", proof).strip()


def _forbidden(proof: str) -> bool:
    return bool(re.search(r"\b(sorry|admit)\b", proof))


def select(failed: list[tuple[str, dict[str, Any]]], k: int,
           rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """Up to ``k`` failures: distinct proofs, distinct first error messages first, then random."""
    unique: dict[str, tuple[str, dict[str, Any]]] = {}
    for proof, verdict in failed:
        unique.setdefault(_normalise(proof), (proof, verdict))
    items = list(unique.values())
    order = rng.permutation(len(items)) if items else []
    picked, seen_errors, rest = [], set(), []
    for i in order:
        proof, verdict = items[i]
        first = (verdict.get("errors") or [{"message": ""}])[0]["message"].split("\n")[0]
        if first not in seen_errors:
            seen_errors.add(first)
            picked.append(items[i])
        else:
            rest.append(items[i])
    return (picked + rest)[:k]


def _attempt(theorem: dict[str, Any], round_: int, role: str, proof: str,
             verdict: dict[str, Any] | None, index: int) -> dict[str, Any]:
    return {"name": theorem["name"], "round": round_, "role": role, "index": index,
            "proof": proof, "proof_hash": hashlib.sha256(proof.encode()).hexdigest()[:16],
            "complete": bool(verdict and verdict["complete"]),
            "verdict": verdict["verdict"] if verdict else "filtered_sorry",
            "first_error": (verdict["errors"][0]["message"].split("\n")[0]
                            if verdict and verdict["errors"] else ""),
            "error_category": (verdict["errors"][0].get("category", "")
                               if verdict and verdict["errors"] else ""),
            "verify_time": float(verdict.get("verify_time", 0.0)) if verdict else 0.0}


def _check(verifier, theorem, proofs):
    kept = [p for p in proofs if not _forbidden(p)]
    verdicts = verifier.check_all([lean_file(theorem["statement"], p) for p in kept])
    by_proof = dict(zip(kept, verdicts, strict=True))
    return [(p, by_proof.get(p)) for p in proofs]


def ma_lot(theorem: dict[str, Any], prover: Prover, corrector: Corrector, verifier,
           x: int, rounds: int, y: int, c: int, rng: np.random.Generator) -> dict[str, Any]:
    """Run the loop on one theorem; returns the solving round (or None) and every attempt."""
    attempts: list[dict[str, Any]] = []
    results = _check(verifier, theorem, prover.prove(theorem["statement"], theorem["nl"], x))
    attempts += [_attempt(theorem, 0, "prover", p, v, i) for i, (p, v) in enumerate(results)]
    generations = x
    if any(v and v["complete"] for _, v in results):
        return {"solved_round": 0, "attempts": attempts, "generations": generations}
    failed = [(p, v) for p, v in results if v is not None]
    for r in range(1, rounds + 1):
        picks = select(failed, max(1, y // c), rng)
        new: list[tuple[str, dict[str, Any] | None]] = []
        for proof, verdict in picks:
            rewrites = corrector.correct(theorem["statement"], theorem["nl"], proof,
                                         verdict["errors"], c)
            new += _check(verifier, theorem, rewrites)
        generations += len(picks) * c
        attempts += [_attempt(theorem, r, "corrector", p, v, i) for i, (p, v) in enumerate(new)]
        if any(v and v["complete"] for _, v in new):
            return {"solved_round": r, "attempts": attempts, "generations": generations}
        failed = [(p, v) for p, v in new if v is not None] or failed  # the newest failures
    return {"solved_round": None, "attempts": attempts, "generations": generations}


def whole_proof(theorem: dict[str, Any], prover: Prover, verifier, x: int, rounds: int,
                y: int) -> dict[str, Any]:
    """pass@n with n = x + rounds·y samples; ``solved_round`` is the first r with a complete
    proof among the first x + r·y samples."""
    n = x + rounds * y
    results = _check(verifier, theorem, prover.prove(theorem["statement"], theorem["nl"], n))
    attempts = []
    first = None
    for i, (p, v) in enumerate(results):
        r = 0 if i < x else (i - x) // y + 1
        attempts.append(_attempt(theorem, r, "whole_proof", p, v, i))
        if first is None and v and v["complete"]:
            first = r
    return {"solved_round": first, "attempts": attempts, "generations": n}


def cumulative_accuracy(solved_rounds: list[int | None], rounds: int) -> list[float]:
    """Fraction of theorems solved by round r, for r = 0..rounds (Table 2's curve)."""
    n = max(len(solved_rounds), 1)
    return [sum(1 for s in solved_rounds if s is not None and s <= r) / n
            for r in range(rounds + 1)]


# ------------------------------------------------------------------ batched over theorems
def ma_lot_many(theorems: list[dict[str, Any]], agent, verifier, x: int, rounds: int, y: int,
                c: int, rngs: list[np.random.Generator]) -> list[dict[str, Any]]:
    """:func:`ma_lot` on many theorems at once, for an agent that answers batches
    (``prove_many``/``correct_many``, e.g. a trained model sampling on one padded batch). Per
    theorem the steps, selection and budget are those of :func:`ma_lot`."""
    outs = [{"solved_round": None, "attempts": [], "generations": x} for _ in theorems]
    proofs = agent.prove_many([(t["statement"], x) for t in theorems])
    failed: list[list[tuple[str, dict[str, Any]]]] = []
    live = []
    for k, (thm, batch) in enumerate(zip(theorems, proofs, strict=True)):
        results = _check(verifier, thm, batch)
        outs[k]["attempts"] += [_attempt(thm, 0, "prover", p, v, i)
                                for i, (p, v) in enumerate(results)]
        failed.append([(p, v) for p, v in results if v is not None])
        if any(v and v["complete"] for _, v in results):
            outs[k]["solved_round"] = 0
        else:
            live.append(k)
    for r in range(1, rounds + 1):
        if not live:
            break
        requests, owners = [], []
        for k in live:
            picks = select(failed[k], max(1, y // c), rngs[k])
            outs[k]["generations"] += len(picks) * c
            for proof, verdict in picks:
                requests.append((theorems[k]["statement"], proof, verdict["errors"], c))
                owners.append(k)
        rewrites = agent.correct_many(requests) if requests else []
        new: dict[int, list[tuple[str, dict[str, Any] | None]]] = {k: [] for k in live}
        for k, batch in zip(owners, rewrites, strict=True):
            new[k] += _check(verifier, theorems[k], batch)
        still = []
        for k in live:
            outs[k]["attempts"] += [_attempt(theorems[k], r, "corrector", p, v, i)
                                    for i, (p, v) in enumerate(new[k])]
            if any(v and v["complete"] for _, v in new[k]):
                outs[k]["solved_round"] = r
            else:
                failed[k] = [(p, v) for p, v in new[k] if v is not None] or failed[k]
                still.append(k)
        live = still
    return outs


def whole_proof_many(theorems: list[dict[str, Any]], agent, verifier, x: int, rounds: int,
                     y: int) -> list[dict[str, Any]]:
    """:func:`whole_proof` on many theorems at once (``prove_many``)."""

    class _One:
        def __init__(self, proofs: list[str]) -> None:
            self.proofs = proofs

        def prove(self, statement: str, nl: str, n: int) -> list[str]:
            return self.proofs

    n = x + rounds * y
    batches = agent.prove_many([(t["statement"], n) for t in theorems])
    return [whole_proof(t, _One(b), verifier, x, rounds, y)
            for t, b in zip(theorems, batches, strict=True)]
