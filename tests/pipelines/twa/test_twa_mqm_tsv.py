"""MQM TSV reader and char -> token span mapping on an inline fixture."""

from __future__ import annotations

import re

import pytest

from icml25.pipelines.twa.mqm_tsv import char_to_token_spans, read_mqm_tsv

ROWS = [
    "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity",
    "sysA\td1\t1\t1\tr1\tThe cat sat.\tDie <v>Hund</v> saß.\tAccuracy/Mistranslation\tMajor",
    "sysA\td1\t1\t1\tr1\tThe cat sat.\tDie Hund <v>saß.</v>\tFluency/Grammar\tMinor",
    "sysA\td1\t1\t2\tr1\tIt rains.\tEs regnet.\tNo-error\tNo-error",
    "sysB\td1\t1\t1\tr2\tThe cat sat.\tblah blah\tNon-translation!\tMajor",
    "sysB\td1\t1\t2\tr2\tIt rains.\tEs<v></v> regnet.\tAccuracy/Omission\tMajor",
    "sysB\td1\t1\t3\tr2\tHi.\tHallo<v> zusammen </v>.\tStyle/Awkward\tNeutral",
]


def _whitespace_offsets(text: str) -> list[tuple[int, int]]:
    """Offsets of a SentencePiece-like tokenizer: each word token includes its leading space."""
    offs, prev = [], 0
    for m in re.finditer(r"\S+", text):
        offs.append((prev if offs else m.start(), m.end()))
        prev = m.end()
    return offs


def test_reader_groups_errors_and_handles_special_rows():
    recs = read_mqm_tsv("\n".join(ROWS))
    assert [(r.system, r.seg_id, r.rater) for r in recs] == [
        ("sysA", "1", "r1"), ("sysA", "2", "r1"), ("sysB", "1", "r2"), ("sysB", "2", "r2"),
        ("sysB", "3", "r2")]
    a1 = recs[0]
    assert a1.target == "Die Hund saß."
    assert a1.spans == [(4, 8, "major", "Accuracy/Mistranslation"),
                        (9, 13, "minor", "Fluency/Grammar")]
    assert [a1.target[s:e] for s, e, *_ in a1.spans] == ["Hund", "saß."]
    assert recs[1].spans == []  # No-error
    assert recs[2].spans == [(0, 9, "major", "Non-translation")]
    assert recs[3].spans == [(2, 2, "major", "Accuracy/Omission")]  # empty <v></v>
    assert recs[4].spans == [] and recs[4].target == "Hallo zusammen ."  # Neutral ignored


def test_char_spans_map_to_tokens_by_non_whitespace_overlap():
    rec = read_mqm_tsv("\n".join(ROWS))[0]
    offsets = _whitespace_offsets(rec.target)  # "Die", " Hund", " saß."
    tok = char_to_token_spans(rec.target, offsets, rec.spans)
    assert tok == [(1, 2, "major", "Accuracy/Mistranslation"), (2, 3, "minor", "Fluency/Grammar")]
    for (s, e, *_), (cs, ce, *_) in zip(tok, rec.spans, strict=True):
        text = "".join(rec.target[a:b] for a, b in offsets[s:e])
        assert text.strip() == rec.target[cs:ce].strip()
    assert char_to_token_spans("Es regnet.", [(0, 2), (2, 10)], [(2, 2, "major", "X")]) == [
        (0, 0, "major", "X")]


def test_bad_rows_are_rejected_with_their_line():
    with pytest.raises(ValueError, match="line 2: 3 columns"):
        read_mqm_tsv(ROWS[0] + "\nsysA\td1\t1")
    bad = ROWS[1].replace("Major", "Critical")
    with pytest.raises(ValueError, match=r"line 2 \(sysA, segment 1, rater r1\): unknown "
                                         "severity 'Critical'"):
        read_mqm_tsv(ROWS[0] + "\n" + bad)
