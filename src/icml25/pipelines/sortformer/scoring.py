"""Metrics: DER with pyannote.metrics, arrival-order F1, speaker-count accuracy, cpWER.

DER = (miss + false alarm + confusion) / reference speech, overlap included, optimal speaker
mapping, from ``pyannote.metrics.diarization.DiarizationErrorRate(collar=2c, skip_overlap=False)``:
pyannote's collar is the total no-score width around each boundary, so the md-eval "collar
0.25 s" is ``collar=0.5``.

cpWER (concatenated minimum-permutation WER): per-speaker transcripts are concatenated, the
hypothesis speakers are matched to the reference speakers by the permutation with the fewest
word errors, errors / reference words (meeteval's ``cp_word_error_rate`` definition).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from icml25.pipelines.sortformer.rttm import Segment


def _annotation(segments: Sequence[Segment]):
    from pyannote.core import Annotation
    from pyannote.core import Segment as PSegment

    ann = Annotation()
    for i, s in enumerate(segments):
        if s.duration > 0:
            ann[PSegment(s.start, s.end), i] = s.speaker
    return ann


def der_components(refs: Sequence[Sequence[Segment]], hyps: Sequence[Sequence[Segment]],
                   durations: Sequence[float], collar_s: float) -> dict[str, float]:
    """Corpus-level DER and its parts (summed over sessions, then divided by total speech)."""
    from pyannote.core import Segment as PSegment
    from pyannote.metrics.diarization import DiarizationErrorRate

    metric = DiarizationErrorRate(collar=2 * collar_s, skip_overlap=False)
    tot = {"missed detection": 0.0, "false alarm": 0.0, "confusion": 0.0, "total": 0.0}
    for ref, hyp, dur in zip(refs, hyps, durations, strict=True):
        d = metric(_annotation(ref), _annotation(hyp), uem=_timeline(PSegment(0, dur)),
                   detailed=True)
        for k in tot:
            tot[k] += d[k]
    total = max(tot["total"], 1e-9)
    return {"der": (tot["missed detection"] + tot["false alarm"] + tot["confusion"]) / total,
            "miss": tot["missed detection"] / total, "false_alarm": tot["false alarm"] / total,
            "confusion": tot["confusion"] / total}


def _timeline(seg):
    from pyannote.core import Timeline

    return Timeline([seg])


def der(ref: Sequence[Segment], hyp: Sequence[Segment], duration: float, collar_s: float) -> float:
    return der_components([ref], [hyp], [duration], collar_s)["der"]


def count_accuracy(refs: Sequence[Sequence[Segment]], hyps: Sequence[Sequence[Segment]]) -> float:
    """Share of sessions whose number of hypothesis speakers equals the reference's."""
    ok = [len({s.speaker for s in r}) == len({s.speaker for s in h})
          for r, h in zip(refs, hyps, strict=True)]
    return float(np.mean(ok)) if ok else float("nan")


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Word-level Levenshtein distance."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def cp_errors(ref: Mapping[str, str], hyp: Mapping[str, str]) -> tuple[int, int]:
    """(errors, reference words) of the best speaker permutation (extra speakers map to '')."""
    r = [t.split() for t in ref.values()]
    h = [t.split() for t in hyp.values()]
    n = max(len(r), len(h))
    r += [[]] * (n - len(r))
    h += [[]] * (n - len(h))
    best = min(sum(edit_distance(r[i], h[p[i]]) for i in range(n))
               for p in itertools.permutations(range(n)))
    return best, sum(len(x) for x in r)


def cpwer(refs: Sequence[Mapping[str, str]], hyps: Sequence[Mapping[str, str]]) -> float:
    """Corpus cpWER: summed errors / summed reference words."""
    errors = words = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        e, w = cp_errors(ref, hyp)
        errors, words = errors + e, words + w
    return errors / max(words, 1)
