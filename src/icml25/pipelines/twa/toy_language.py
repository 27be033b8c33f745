"""The synthetic "toy En->De" language pair of the twa room (``docs/papers/twa.md``, "Data").

A seeded context-free source grammar and a deterministic rule-based translator ``T(x)``:

* source: S -> CL | CL CONJ CL; CL -> NP VP; NP -> DET ADJ^{0..2} N [+pl] (PP)^{0..1};
  PP -> P NP; VP -> V NP (ADV)^{0..1} | V ADV; a final ".";
* target: lemma dictionary; every target noun has a gender {m, f, n} and every noun phrase a
  number {sg, pl} (source marks plural with the token ``+pl``); the determiner is chosen by
  gender / number / definiteness; adjectives are placed *after* the noun and inflected with a
  separate suffix token (``+er/+e/+es/+en``); the verb gets a number suffix token (``+t/+en``)
  agreeing with its subject; after the subordinating conjunction the verb moves clause-final.

Suffixes are separate tokens, so an agreement error is a single-token error inside a word.
Source and target words share one vocabulary (source lemmas can be copied untranslated).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PLURAL = "+pl"
ADJ_SUFFIX = {("m", "sg"): "+er", ("f", "sg"): "+e", ("n", "sg"): "+es"}
PL_ADJ_SUFFIX = "+en"
VERB_SUFFIX = {"sg": "+t", "pl": "+en"}
DETS = {
    ("def", "m", "sg"): "der", ("def", "f", "sg"): "die", ("def", "n", "sg"): "das",
    ("indef", "m", "sg"): "ein", ("indef", "f", "sg"): "eine", ("indef", "n", "sg"): "ein",
}
PL_DETS = {"def": "die", "indef": "einige"}
SRC_DETS = {"the": "def", "a": "indef"}
SUFFIXES = frozenset({"+er", "+e", "+es", "+en", "+t"})
POS_ORDER = ("N", "ADJ", "V", "ADV", "P", "CONJ")

_SRC_SYL = ("ka", "lo", "mi", "su", "te", "po", "ri", "na", "bu", "ze", "fa", "go")
_TGT_SYL = ("schra", "ber", "wul", "kin", "tor", "mel", "quax", "dro", "fen", "lupp", "hei", "zon")


@dataclass(frozen=True)
class Lexicon:
    """Source lemmas per part of speech, their target lemmas, noun genders and Zipf weights."""

    src: dict[str, list[str]]
    tgt: dict[str, dict[str, str]]
    gender: dict[str, str]
    zipf: float
    subordinating: str = field(default="")

    def to_json(self) -> dict:
        return {"src": self.src, "tgt": self.tgt, "gender": self.gender, "zipf": self.zipf,
                "subordinating": self.subordinating}

    @classmethod
    def from_json(cls, data: dict) -> Lexicon:
        return cls(src={k: list(v) for k, v in data["src"].items()},
                   tgt={k: dict(v) for k, v in data["tgt"].items()},
                   gender=dict(data["gender"]), zipf=float(data["zipf"]),
                   subordinating=str(data["subordinating"]))

    @property
    def pos_of(self) -> dict[str, str]:
        pos = {w: p for p, words in self.src.items() for w in words}
        pos.update({w: "DET" for w in SRC_DETS})
        return pos

    @property
    def source_words(self) -> frozenset[str]:
        return frozenset(self.pos_of) | {PLURAL}

    @property
    def target_function_words(self) -> frozenset[str]:
        words = set(DETS.values()) | set(PL_DETS.values())
        words |= set(self.tgt["P"].values()) | set(self.tgt["CONJ"].values())
        return frozenset(words)

    def vocabulary(self) -> list[str]:
        """All tokens of both languages, specials first (ids are positions in this list)."""
        words = list(SPECIALS) + list(SRC_DETS) + [PLURAL, "."]
        for pos in POS_ORDER:
            words += self.src[pos]
        for pos in POS_ORDER:
            words += [self.tgt[pos][w] for w in self.src[pos]]
        words += sorted(set(DETS.values()) | set(PL_DETS.values()))
        words += sorted(SUFFIXES)
        seen: dict[str, None] = {}
        for w in words:
            seen.setdefault(w, None)
        return list(seen)


def _words(rng: np.random.Generator, syllables: tuple[str, ...], n: int, taken: set[str],
           min_syl: int = 2) -> list[str]:
    # Words of min_syl or min_syl + 1 syllables, unless the lexicon needs more distinct words
    # than that makes (12 syllables: 12² + 12³ = 1872, fewer than the paper-scale lexicon's
    # 2161): then one syllable more, until there are twice as many as needed. Without it the
    # draw never ended (found by the CPU dry run of conf/paper, docs/scale.md); lexicons that fit
    # draw exactly as before.
    n_syl = len(set(syllables))
    max_syl = min_syl + 1
    while sum(n_syl ** k for k in range(min_syl, max_syl + 1)) < 2 * (n + len(taken)):
        max_syl += 1
    out = []
    while len(out) < n:
        k = int(rng.integers(min_syl, max_syl + 1))
        w = "".join(syllables[i] for i in rng.integers(0, len(syllables), size=k))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


def make_lexicon(sizes: dict[str, int], zipf: float, seed: int) -> Lexicon:
    """A seeded lexicon with ``sizes[pos]`` lemmas per part of speech (N, ADJ, V, ADV, P, CONJ)."""
    missing = [p for p in POS_ORDER if p not in sizes]
    if missing:
        raise ValueError(f"lexicon sizes: missing parts of speech {missing}")
    if sizes["CONJ"] < 2:
        raise ValueError("lexicon sizes: CONJ needs >= 2 (one coordinating, one subordinating)")
    rng = np.random.default_rng(seed)
    taken: set[str] = set(SPECIALS) | set(SRC_DETS) | set(DETS.values()) | set(PL_DETS.values())
    src = {p: _words(rng, _SRC_SYL, sizes[p], taken) for p in POS_ORDER}
    tgt = {p: dict(zip(src[p], _words(rng, _TGT_SYL, sizes[p], taken), strict=True))
           for p in POS_ORDER}
    genders = ("m", "f", "n")
    gender = {tgt["N"][w]: genders[int(rng.integers(0, 3))] for w in src["N"]}
    return Lexicon(src=src, tgt=tgt, gender=gender, zipf=zipf, subordinating=src["CONJ"][-1])


# --------------------------------------------------------------------------- source grammar
def _zipf_pick(rng: np.random.Generator, words: list[str], zipf: float) -> str:
    w = 1.0 / np.arange(1, len(words) + 1) ** zipf
    return words[int(rng.choice(len(words), p=w / w.sum()))]


def _np(rng: np.random.Generator, lex: Lexicon, allow_pp: bool) -> list[str]:
    out = [str(rng.choice(list(SRC_DETS)))]
    out += [_zipf_pick(rng, lex.src["ADJ"], lex.zipf) for _ in range(int(rng.integers(0, 3)))]
    out.append(_zipf_pick(rng, lex.src["N"], lex.zipf))
    if rng.random() < 0.4:
        out.append(PLURAL)
    if allow_pp and rng.random() < 0.3:
        out += [_zipf_pick(rng, lex.src["P"], lex.zipf), *_np(rng, lex, allow_pp=False)]
    return out


def _clause(rng: np.random.Generator, lex: Lexicon) -> list[str]:
    out = [*_np(rng, lex, allow_pp=True), _zipf_pick(rng, lex.src["V"], lex.zipf)]
    if rng.random() < 0.75:
        out += _np(rng, lex, allow_pp=True)
        if rng.random() < 0.3:
            out.append(_zipf_pick(rng, lex.src["ADV"], lex.zipf))
    else:
        out.append(_zipf_pick(rng, lex.src["ADV"], lex.zipf))
    return out


def sample_source(rng: np.random.Generator, lex: Lexicon, min_len: int, max_len: int,
                  p_two_clauses: float = 0.4, max_tries: int = 10_000) -> list[str]:
    """One source sentence with ``min_len <= #words <= max_len`` (``+pl`` and "." not counted)."""
    for _ in range(max_tries):
        sent = _clause(rng, lex)
        if rng.random() < p_two_clauses:
            sent += [str(rng.choice(lex.src["CONJ"])), *_clause(rng, lex)]
        n_words = sum(t != PLURAL for t in sent)
        if min_len <= n_words <= max_len:
            return [*sent, "."]
    raise ValueError(f"no sentence with {min_len}..{max_len} words in {max_tries} tries")


# --------------------------------------------------------------------------- translator T(x)
class _Parser:
    def __init__(self, tokens: list[str], lex: Lexicon):
        self.toks, self.i, self.lex, self.pos = tokens, 0, lex, lex.pos_of

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, pos: str) -> str:
        tok = self.peek()
        if tok is None or self.pos.get(tok) != pos:
            raise ValueError(f"toy source: expected {pos} at position {self.i}, got {tok!r} in "
                             f"{' '.join(self.toks)!r}")
        self.i += 1
        return tok

    def np(self, allow_pp: bool = True) -> tuple[list[str], str]:
        """Translate an NP; returns (target tokens, number)."""
        det = SRC_DETS[self.take("DET")]
        adjs = []
        while self.pos.get(self.peek()) == "ADJ":
            adjs.append(self.take("ADJ"))
        noun = self.lex.tgt["N"][self.take("N")]
        number = "sg"
        if self.peek() == PLURAL:
            self.i += 1
            number = "pl"
        g = self.lex.gender[noun]
        out = [DETS[(det, g, number)] if number == "sg" else PL_DETS[det], noun]
        suffix = ADJ_SUFFIX[(g, number)] if number == "sg" else PL_ADJ_SUFFIX
        for a in adjs:  # adjectives follow the noun, each with its agreement suffix
            out += [self.lex.tgt["ADJ"][a], suffix]
        if allow_pp and self.pos.get(self.peek()) == "P":
            out.append(self.lex.tgt["P"][self.take("P")])
            out += self.np(allow_pp=False)[0]
        return out, number

    def clause(self, verb_final: bool) -> list[str]:
        subj, number = self.np()
        verb = [self.lex.tgt["V"][self.take("V")], VERB_SUFFIX[number]]
        rest: list[str] = []
        if self.pos.get(self.peek()) == "DET":
            rest += self.np()[0]
            if self.pos.get(self.peek()) == "ADV":
                rest.append(self.lex.tgt["ADV"][self.take("ADV")])
        else:
            rest.append(self.lex.tgt["ADV"][self.take("ADV")])
        return subj + rest + verb if verb_final else subj + verb + rest


def translate(source: list[str], lex: Lexicon) -> list[str]:
    """The reference translator T(x): deterministic, raises on a sentence outside the grammar."""
    p = _Parser(list(source), lex)
    out = p.clause(verb_final=False)
    if p.pos.get(p.peek()) == "CONJ":
        conj = p.take("CONJ")
        out.append(lex.tgt["CONJ"][conj])
        out += p.clause(verb_final=conj == lex.subordinating)
    if p.peek() != "." or p.i != len(p.toks) - 1:
        raise ValueError(f"toy source: expected a final '.' at position {p.i} in "
                         f"{' '.join(source)!r}")
    return [*out, "."]


def detokenize(tokens: list[str]) -> str:
    """Glue suffix tokens (``+x``) to the preceding word: the text chrF/BLEU are computed on."""
    words: list[str] = []
    for t in tokens:
        if t.startswith("+") and words:
            words[-1] += t[1:]
        else:
            words.append(t)
    return " ".join(words)


def retokenize(text: str, lex: Lexicon) -> list[str]:
    """Inverse of :func:`detokenize`: split inflected target words back into lemma + suffix.

    Unambiguous for this lexicon: target lemmas are concatenations of syllables none of which
    ends in a suffix's last letter pattern, so ``lemma + suffix`` never spells another lemma.
    """
    known = set(lex.vocabulary())
    out: list[str] = []
    for word in text.split():
        if word in known:
            out.append(word)
            continue
        for suf in sorted(SUFFIXES, key=len, reverse=True):
            stem = word[: -(len(suf) - 1)]
            if word.endswith(suf[1:]) and stem in known:
                out += [stem, suf]
                break
        else:
            raise ValueError(f"retokenize: {word!r} is neither a word nor word+suffix")
    return out


def word_groups(tokens: list[str]) -> list[int]:
    """Index of the word each token belongs to (suffix tokens join their lemma)."""
    groups, g = [], -1
    for i, t in enumerate(tokens):
        if not (t.startswith("+") and i > 0):
            g += 1
        groups.append(g)
    return groups


class Vocab:
    """Token <-> id over the shared source/target vocabulary."""

    def __init__(self, tokens: list[str]):
        if list(tokens[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"vocabulary must start with {SPECIALS}")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.pad, self.bos, self.eos, self.unk = (self.index[s] for s in SPECIALS)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.index.get(t, self.unk) for t in tokens]

    def decode(self, ids: list[int]) -> list[str]:
        """Ids to tokens, stopping at EOS; specials other than UNK are dropped."""
        out = []
        for i in ids:
            if i == self.eos:
                break
            if i in (self.pad, self.bos):
                continue
            out.append(self.tokens[i])
        return out
