"""Reading MQM annotations in the TSV format of Google's WMT MQM re-annotation (the paper's data).

Columns ``system doc doc_id seg_id rater source target category severity [comment]``, one row per
error, the error span marked with ``<v>…</v>`` inside ``target``; ``No-error`` rows mark clean
outputs, category ``Non-translation!`` spans the whole target, ``Neutral`` severity is ignored and
``<v></v>`` may be empty (an error marked only on the source: a zero-length span, which carries no
unlikelihood term and does not move the first-error position).

:func:`read_mqm_tsv` groups rows by (system, seg_id, rater) into one record per annotated output
with character spans in the marker-free target; :func:`char_to_token_spans` maps them to token
spans from a tokenizer's offset mapping (a token belongs to a span iff its non-whitespace
characters overlap it, so SentencePiece's leading "▁"/space never pulls in the previous word).
This is the real-data path: :mod:`icml25.pipelines.twa.hf_seq2seq` turns the records into
training examples for a local HF seq2seq checkpoint (node ``run_real``, tag ``real``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

_SPAN = re.compile(r"<v>(.*?)</v>", re.DOTALL)
COLUMNS = ("system", "doc", "doc_id", "seg_id", "rater", "source", "target", "category",
           "severity")
SEVERITY = {"major": "major", "minor": "minor"}


@dataclass
class MqmRecord:
    system: str
    seg_id: str
    rater: str
    source: str
    target: str  # without <v> markers
    spans: list[tuple[int, int, str, str]] = field(default_factory=list)  # chars, half-open


def _strip_markers(target: str) -> tuple[str, tuple[int, int] | None]:
    match = _SPAN.search(target)
    clean = target.replace("<v>", "").replace("</v>", "")
    if match is None:
        return clean, None
    start = match.start()
    return clean, (start, start + len(match.group(1)))


def read_mqm_tsv(text: str) -> list[MqmRecord]:
    """Parse MQM TSV text into one record per (system, seg_id, rater), in file order."""
    records: dict[tuple[str, str, str], MqmRecord] = {}
    reader = csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    for lineno, row in enumerate(reader, start=1):
        if not row or (lineno == 1 and row[0] == "system"):
            continue
        if len(row) < len(COLUMNS):
            raise ValueError(f"MQM TSV line {lineno}: {len(row)} columns, expected at least "
                             f"{len(COLUMNS)} ({' '.join(COLUMNS)})")
        system, _, _, seg_id, rater, source, target, category, severity = row[:9]
        clean, span = _strip_markers(target)
        key = (system, seg_id, rater)
        rec = records.get(key)
        if rec is None:
            rec = records[key] = MqmRecord(system, seg_id, rater, source, clean)
        elif rec.target != clean:
            raise ValueError(f"MQM TSV line {lineno}: target of {key} differs from an earlier "
                             "row of the same output")
        sev = severity.strip().lower()
        if category.strip() == "No-error" or sev in ("no-error", "neutral"):
            continue
        if category.strip().startswith("Non-translation"):
            rec.spans.append((0, len(clean), "major", "Non-translation"))
            continue
        if sev not in SEVERITY:
            raise ValueError(f"MQM TSV line {lineno} ({system}, segment {seg_id}, rater "
                             f"{rater}): unknown severity {severity!r}")
        start, end = span if span is not None else (0, 0)
        # spans may wrap spaces: trim them so token overlap uses the real characters
        while start < end and clean[start].isspace():
            start += 1
        while end > start and clean[end - 1].isspace():
            end -= 1
        rec.spans.append((start, end, SEVERITY[sev], category.strip()))
    return list(records.values())


def char_to_token_spans(text: str, offsets: list[tuple[int, int]],
                        spans: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """Character spans -> half-open token spans; zero-length character spans stay zero-length.

    A token is in a span iff one of its non-whitespace characters lies inside the span.
    Overlapping token spans are left to the loss (merged there with the max weight).
    """
    out = []
    for start, end, sev, cat in spans:
        if end <= start:
            out.append((0, 0, sev, cat))
            continue
        toks = [k for k, (a, b) in enumerate(offsets)
                if any(start <= c < end and not text[c].isspace() for c in range(a, b))]
        if toks:
            out.append((toks[0], toks[-1] + 1, sev, cat))
        else:
            out.append((0, 0, sev, cat))
    return out
