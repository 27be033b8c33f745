"""Toy language, oracle annotator and annotation checks ."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.twa.annotator import (
    ERROR_TYPES,
    Error,
    add_noise,
    annotate,
    corrupt_once,
    mqm_score,
    validate_annotation,
)
from icml25.pipelines.twa.toy_language import (
    Vocab,
    detokenize,
    make_lexicon,
    retokenize,
    sample_source,
    translate,
)
from icml25.pipelines.twa.training import Example, dpo_pairs, filter_examples

SIZES = {"N": 30, "ADJ": 10, "V": 10, "ADV": 5, "P": 4, "CONJ": 3}


@pytest.fixture(scope="module")
def lex():
    return make_lexicon(SIZES, 1.1, seed=0)


def test_translator_is_deterministic_and_follows_the_rules(lex):
    rng = np.random.default_rng(0)
    for _ in range(200):
        src = sample_source(rng, lex, 4, 18)
        tgt = translate(src, lex)
        assert tgt == translate(list(src), make_lexicon(SIZES, 1.1, seed=0))
        assert tgt[-1] == "." and retokenize(detokenize(tgt), lex) == tgt
        vocab = Vocab(lex.vocabulary())
        assert vocab.decode(vocab.encode(tgt)) == tgt
    # hand-checked example: adjective after the noun with agreement, verb suffix, verb-final
    n, a, v = lex.src["N"][0], lex.src["ADJ"][0], lex.src["V"][0]
    sub = lex.subordinating
    tn, ta, tv = lex.tgt["N"][n], lex.tgt["ADJ"][a], lex.tgt["V"][v]
    g = lex.gender[tn]
    det = {"m": "der", "f": "die", "n": "das"}[g]
    suf = {"m": "+er", "f": "+e", "n": "+es"}[g]
    src = ["the", a, n, v, "a", n, "+pl", sub, "the", n, "+pl", v, lex.src["ADV"][0], "."]
    assert translate(src, lex) == [
        det, tn, ta, suf, tv, "+t", "einige", tn, lex.tgt["CONJ"][sub], "die", tn,
        lex.tgt["ADV"][lex.src["ADV"][0]], tv, "+en", "."]
    with pytest.raises(ValueError, match="expected N"):
        translate(["the", a, v, "."], lex)


@pytest.mark.parametrize("kind", ERROR_TYPES)
def test_annotator_recovers_injected_errors_exactly(lex, kind):
    rng = np.random.default_rng(ERROR_TYPES.index(kind))
    for _ in range(100):
        ref = translate(sample_source(rng, lex, 4, 18), lex)
        assert annotate(ref, ref, lex) == [] and mqm_score(annotate(ref, ref, lex)) == 0
        hyp, error = corrupt_once(ref, lex, rng, kind)
        assert annotate(hyp, ref, lex) == [error]


def test_mqm_weights_and_non_translation(lex):
    ref = translate(["the", lex.src["N"][0], lex.src["V"][0], lex.src["ADV"][0], "."], lex)
    assert mqm_score([Error(0, 1, "major", "Accuracy/Mistranslation"),
                      Error(2, 3, "minor", "Fluency/Grammar"),
                      Error(4, 5, "minor", "Fluency/Punctuation")]) == pytest.approx(6.1)
    copied = ["the", lex.src["N"][0], lex.src["V"][0], lex.src["ADV"][0], "."]
    assert annotate(copied, ref, lex) == [Error(0, 6, "major", "Non-translation")]
    assert mqm_score(annotate(copied, ref, lex)) == 25
    assert mqm_score(annotate([], ref, lex)) == 25


def test_at_most_five_errors_most_severe_kept(lex):
    rng = np.random.default_rng(5)
    ref = translate(sample_source(rng, lex, 16, 18), lex)
    hyp = [t if i % 2 else "+t" for i, t in enumerate(ref)]  # many errors
    errors = annotate(hyp, ref, lex, max_errors=5)
    assert len(errors) == 5
    assert errors == sorted(errors, key=lambda e: e.start)


def test_noise_widens_or_drops_but_never_overlaps(lex):
    rng = np.random.default_rng(2)
    for _ in range(200):
        ref = translate(sample_source(rng, lex, 6, 18), lex)
        hyp, _ = corrupt_once(ref, lex, rng)
        exact = annotate(hyp, ref, lex)
        noisy = add_noise(exact, hyp, rng, p_widen=1.0, p_miss=0.0)
        validate_annotation("noisy", len(hyp), [e.to_list() for e in noisy])
        for e in exact:  # every exact span lies inside a (widened) noisy span
            assert any(n.start <= e.start and e.end <= n.end for n in noisy)
    assert add_noise(exact, hyp, rng, p_widen=0.0, p_miss=1.0) == []


@pytest.mark.parametrize("spans, match", [
    ([[3, 9, "major", "Accuracy/Mistranslation"]], "falls outside the output"),
    ([[-1, 1, "minor", "Fluency/Grammar"]], "falls outside the output"),
    ([[2, 1, "major", "X"]], "is reversed"),
    ([[0, 1, "critical", "Accuracy/Mistranslation"]], "unknown severity 'critical'"),
    ([[0, 1, "major"]], "is not"),
])
def test_bad_annotations_are_rejected_naming_the_record(spans, match):
    with pytest.raises(ValueError, match=match) as err:
        validate_annotation("record 17", 5, spans)
    assert "record 17" in str(err.value)


def test_filter_selects_exactly_the_rows_under_threshold_and_dpo_pairs_are_ordered():
    ex = [Example([5, 6], [7], [], m) for m in (0.0, 0.1, 1.0, 5.0, 0.0)]
    assert [e.mqm for e in filter_examples(ex, 0.0)] == [0.0, 0.0]
    assert [e.mqm for e in filter_examples(ex, 1.0)] == [0.0, 0.1, 1.0, 0.0]
    varied = [Example([5, 6], [7 + i], [], m) for i, m in enumerate((0.0, 1.0, 5.0, 5.0))]
    pairs = dpo_pairs(varied, 6, np.random.default_rng(0))
    assert len(pairs) == 5 and all(w.mqm < lo.mqm for w, lo in pairs)
    assert len(dpo_pairs(varied, 2, np.random.default_rng(0))) == 2


def test_corrupted_references_get_valid_annotations(lex):
    from icml25.pipelines.twa.annotator import corrupt

    rng = np.random.default_rng(4)
    for _ in range(300):
        ref = translate(sample_source(rng, lex, 4, 12), lex)
        hyp = corrupt(ref, lex, rng, int(rng.integers(1, 4)))
        errors = annotate(hyp, ref, lex)
        assert (hyp == ref) == (errors == [])  # two edits can cancel (a swap undone)
        validate_annotation("corrupted", len(hyp), [e.to_list() for e in errors])


def test_a_paper_scale_lexicon_is_drawn_with_longer_words_where_needed():
    # 2161 source lemmas: more than the 1872 words of 2-3 syllables (the draw used to never end)
    from icml25.pipelines.twa.toy_language import make_lexicon as make

    sizes = {"N": 1200, "ADJ": 400, "V": 400, "ADV": 150, "P": 8, "CONJ": 3}
    lex = make(sizes, 1.1, 0)
    words = [w for p in lex.src for w in lex.src[p]]
    assert len(words) == len(set(words)) == sum(sizes.values())
    targets = [lex.tgt[p][w] for p in lex.src for w in lex.src[p]]
    assert len(set(targets)) == len(targets) and not set(targets) & set(words)
