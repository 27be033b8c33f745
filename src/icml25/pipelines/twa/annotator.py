"""The oracle MQM-style annotator of the toy language pair, annotation records and their checks.

The oracle (``docs/papers/twa.md``, "Data"): token alignment of the hypothesis to the reference T(x)
(optimal string alignment: substitutions, insertions, deletions and adjacent transpositions),
then each edit becomes an MQM error with a span of *hypothesis token* indices ``[start, end)``
(index ``len(hyp)`` is the EOS token):

* lemma substitution -> Accuracy/Mistranslation, major; copied source word ->
  Accuracy/Untranslated, major; > 50 % source words or an empty output -> Non-translation
  (whole segment, EOS included);
* wrong/missing/extra suffix token -> Fluency/Grammar, minor;
* swapped adjacent tokens -> Fluency/Word-order, minor (span over both);
* inserted word -> Accuracy/Addition, major (minor for a function word);
* missing word -> Accuracy/Omission, major, on the hypothesis token emitted at the gap;
* wrong/missing/extra "." -> Fluency/Punctuation, minor.

At most ``max_errors`` per segment, the most severe kept (MQM protocol). Overlapping errors are
merged (category of the more severe). Noise knobs for *training* labels: ``p_widen`` widens a
span to its whole word and/or by one token, ``p_miss`` drops an error.

MQM weights (evaluation): major 5, minor 1, Fluency/Punctuation minor 0.1, Non-translation 25.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from icml25.pipelines.twa.toy_language import SUFFIXES, Lexicon, word_groups

SEVERITIES = ("major", "minor")
NON_TRANSLATION = "Non-translation"
PUNCTUATION = "Fluency/Punctuation"
OMISSION = "Accuracy/Omission"
MQM_WEIGHTS = {"major": 5.0, "minor": 1.0, "punct": 0.1, "nontranslation": 25.0}


@dataclass(frozen=True)
class Error:
    start: int
    end: int
    severity: str
    category: str

    def to_list(self) -> list:
        return [self.start, self.end, self.severity, self.category]


def error_weight(severity: str, category: str, weights: Mapping[str, float]) -> float:
    """The weight of one error under a weight table (MQM for evaluation, the loss's for TWA)."""
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}; expected one of {SEVERITIES}")
    if category == NON_TRANSLATION:
        return float(weights["nontranslation"])
    if severity == "minor" and category == PUNCTUATION:
        return float(weights["punct"])
    return float(weights[severity])


def mqm_score(errors: Iterable[Error | list], weights: Mapping[str, float] = MQM_WEIGHTS) -> float:
    total = 0.0
    for e in errors:
        sev, cat = (e.severity, e.category) if isinstance(e, Error) else (e[2], e[3])
        total += error_weight(sev, cat, weights)
    return total


def align(hyp: list[str], ref: list[str]) -> list[tuple[str, int, int]]:
    """Optimal string alignment (Damerau, adjacent transpositions) of ``hyp`` to ``ref``.

    Returns ops ``(kind, i, j)`` in hypothesis order, kind in {match, sub, ins, del, swap};
    ``i`` indexes hyp, ``j`` ref (for ``del``, ``i`` is the hypothesis position of the gap).
    Ties prefer match/sub, then swap, then deletion, then insertion.
    """
    n, m = len(hyp), len(ref)
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = 0 if hyp[i - 1] == ref[j - 1] else 1
            best = min(d[i - 1, j - 1] + cost, d[i - 1, j] + 1, d[i, j - 1] + 1)
            if (i > 1 and j > 1 and hyp[i - 1] == ref[j - 2] and hyp[i - 2] == ref[j - 1]
                    and hyp[i - 1] != hyp[i - 2]):
                best = min(best, d[i - 2, j - 2] + 1)
            d[i, j] = best
    ops: list[tuple[str, int, int]] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0:
            cost = 0 if hyp[i - 1] == ref[j - 1] else 1
            if d[i, j] == d[i - 1, j - 1] + cost:
                ops.append(("match" if cost == 0 else "sub", i - 1, j - 1))
                i, j = i - 1, j - 1
                continue
            if (i > 1 and j > 1 and hyp[i - 1] == ref[j - 2] and hyp[i - 2] == ref[j - 1]
                    and hyp[i - 1] != hyp[i - 2] and d[i, j] == d[i - 2, j - 2] + 1):
                ops.append(("swap", i - 2, j - 2))
                i, j = i - 2, j - 2
                continue
        if j > 0 and d[i, j] == d[i, j - 1] + 1:
            ops.append(("del", i, j - 1))
            j -= 1
        else:
            ops.append(("ins", i - 1, j))
            i -= 1
    return ops[::-1]


def _classify(kind: str, h: str | None, r: str | None, lex: Lexicon) -> tuple[str, str]:
    tok = h if kind == "ins" else r if kind == "del" else None
    if kind == "sub":
        if "." in (h, r):
            return "minor", PUNCTUATION
        if h in SUFFIXES and r in SUFFIXES:
            return "minor", "Fluency/Grammar"
        if h in lex.source_words:
            return "major", "Accuracy/Untranslated"
        return "major", "Accuracy/Mistranslation"
    if tok == ".":
        return "minor", PUNCTUATION
    if tok in SUFFIXES:
        return "minor", "Fluency/Grammar"
    if kind == "ins":
        if tok in lex.source_words:
            return "major", "Accuracy/Untranslated"
        return ("minor" if tok in lex.target_function_words else "major"), "Accuracy/Addition"
    return "major", OMISSION


def _merge(errors: list[Error]) -> list[Error]:
    """Merge overlapping spans; the merged error keeps the more severe label."""
    out: list[Error] = []
    for e in sorted(errors, key=lambda e: (e.start, e.end)):
        if out and e.start < out[-1].end:
            prev = out[-1]
            keep = e if mqm_score([e]) > mqm_score([prev]) else prev
            out[-1] = Error(prev.start, max(prev.end, e.end), keep.severity, keep.category)
        else:
            out.append(e)
    return out


def annotate(hyp: list[str], ref: list[str], lex: Lexicon, max_errors: int = 5) -> list[Error]:
    """Exact (noise-free) MQM annotation of ``hyp`` against the reference ``ref``."""
    n = len(hyp)
    if n == 0 or sum(t in lex.source_words for t in hyp) > 0.5 * n:  # empty counts as garbage
        return [Error(0, n + 1, "major", NON_TRANSLATION)]
    errors = []
    for kind, i, j in align(hyp, ref):
        if kind == "match":
            continue
        if kind == "swap":
            errors.append(Error(i, i + 2, "minor", "Fluency/Word-order"))
            continue
        sev, cat = _classify(kind, hyp[i] if kind != "del" else None,
                             ref[j] if kind != "ins" else None, lex)
        errors.append(Error(i, i + 1, sev, cat))  # a deletion sits on the token at the gap
    errors = _merge(errors)
    if len(errors) > max_errors:  # most severe kept, then the earliest
        ranked = sorted(range(len(errors)), key=lambda k: (-mqm_score([errors[k]]), k))
        errors = [errors[k] for k in sorted(ranked[:max_errors])]
    return errors


def add_noise(errors: list[Error], hyp: list[str], rng: np.random.Generator, p_widen: float,
              p_miss: float) -> list[Error]:
    """Human-like annotation noise for training labels: missed errors and widened spans."""
    groups = [*word_groups(hyp), -1]  # EOS is its own word
    n = len(hyp) + 1
    out = []
    for e in errors:
        if rng.random() < p_miss:
            continue
        s, t = e.start, e.end
        if e.category != NON_TRANSLATION and rng.random() < p_widen:
            if rng.random() < 0.5:  # whole word(s)
                g0, g1 = groups[s], groups[t - 1]
                while s > 0 and g0 >= 0 and groups[s - 1] == g0:
                    s -= 1
                while t < n - 1 and g1 >= 0 and groups[t] == g1:
                    t += 1
            if rng.random() < 0.5:
                s = max(0, s - 1)
            else:
                t = min(n, t + 1)
        out.append(Error(s, t, e.severity, e.category))
    return _merge(out)


def validate_annotation(record_id: str, n_tokens: int, spans: Iterable[list]) -> None:
    """Reject malformed spans, reversed or empty spans, spans outside ``[0, n_tokens]`` (EOS
    included) and unknown severities, naming the offending record.

    Overlapping spans are accepted: several raters, or one rater marking two errors over the
    same words, overlap in real MQM files, and the loss merges them into one span with the
    max weight (:func:`icml25.pipelines.twa.losses.merge_spans`), as this annotator's own
    ``_merge`` keeps the more severe label. The MQM *score* still counts every error.
    """
    for span in sorted(spans, key=lambda s: (s[0], s[1])):
        if len(span) != 4:
            raise ValueError(f"annotation {record_id}: span {span!r} is not "
                             "[start, end, severity, category]")
        s, e, sev, _ = span
        if sev not in SEVERITIES:
            raise ValueError(f"annotation {record_id}: unknown severity {sev!r} in span {span!r}; "
                             f"expected one of {SEVERITIES}")
        if e <= s:
            raise ValueError(f"annotation {record_id}: span {span!r} is "
                             f"{'reversed' if e < s else 'empty'} (end {e}, start {s})")
        if not (s >= 0 and e <= n_tokens + 1):
            raise ValueError(f"annotation {record_id}: span {span!r} falls outside the output "
                             f"(tokens 0..{n_tokens}, EOS = {n_tokens})")


ERROR_TYPES = ("mistranslation", "untranslated", "grammar", "word_order", "addition",
               "omission", "punctuation")


def corrupt_once(ref: list[str], lex: Lexicon, rng: np.random.Generator,
                 kind: str | None = None) -> tuple[list[str], Error]:
    """Inject one error of ``kind`` (random if None) into a reference translation.

    Returns the corrupted output and the error the exact annotator must recover. Positions are
    chosen so the edit is unambiguous (an inserted or deleted token differs from its
    neighbours), which is what makes the exactness test meaningful.
    """
    kind = kind or str(rng.choice(ERROR_TYPES))
    src_of = {t: s for pos in lex.tgt for s, t in lex.tgt[pos].items()}
    content = [t for pos in ("N", "ADJ", "V", "ADV") for t in lex.tgt[pos].values()]
    lemmas = [i for i, t in enumerate(ref) if t in src_of and t in content]
    hyp = list(ref)
    if kind in ("mistranslation", "untranslated"):
        i = int(rng.choice(lemmas))
        if kind == "untranslated":
            hyp[i] = src_of[ref[i]]
            return hyp, Error(i, i + 1, "major", "Accuracy/Untranslated")
        pos = next(p for p in ("N", "ADJ", "V", "ADV") if ref[i] in lex.tgt[p].values())
        hyp[i] = str(rng.choice([t for t in lex.tgt[pos].values() if t != ref[i]]))
        return hyp, Error(i, i + 1, "major", "Accuracy/Mistranslation")
    if kind == "grammar":
        sufs = [i for i, t in enumerate(ref) if t in SUFFIXES]
        if not sufs:
            return corrupt_once(ref, lex, rng, "mistranslation")
        i = int(rng.choice(sufs))
        hyp[i] = str(rng.choice(sorted(SUFFIXES - {ref[i]})))
        return hyp, Error(i, i + 1, "minor", "Fluency/Grammar")
    if kind == "word_order":
        cands = [i for i in range(len(ref) - 2) if ref[i] != ref[i + 1]]
        i = int(rng.choice(cands))
        hyp[i], hyp[i + 1] = hyp[i + 1], hyp[i]
        return hyp, Error(i, i + 2, "minor", "Fluency/Word-order")
    if kind == "addition":
        i = int(rng.integers(0, len(ref)))
        near = {ref[i]} | ({ref[i - 1]} if i > 0 else set())
        hyp.insert(i, str(rng.choice([t for t in content if t not in near])))
        return hyp, Error(i, i + 1, "major", "Accuracy/Addition")
    if kind == "omission":
        cands = [i for i in lemmas if (i == 0 or ref[i - 1] != ref[i])
                 and (i + 1 == len(ref) or ref[i + 1] != ref[i])]
        i = int(rng.choice(cands))
        del hyp[i]
        return hyp, Error(i, i + 1, "major", OMISSION)
    if kind == "punctuation":
        return hyp[:-1], Error(len(ref) - 1, len(ref), "minor", PUNCTUATION)
    raise ValueError(f"unknown error type {kind!r}; expected one of {ERROR_TYPES}")


def corrupt(ref: list[str], lex: Lexicon, rng: np.random.Generator, n_errors: int) -> list[str]:
    """A rule-corrupted reference with ``n_errors`` injected errors of random types (the
    "corrupted reference" system, so every error type occurs in the finetuning data)."""
    hyp = list(ref)
    for _ in range(n_errors):
        if len(hyp) < 4:
            break
        try:
            hyp, _ = corrupt_once(hyp, lex, rng)
        except ValueError:  # no position left for that error type (np.random.choice of [])
            continue
    return hyp
