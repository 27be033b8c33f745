"""The synthetic instruction world of the fpo pipeline: vocabulary, grammar, prompts, a noisy
writer and the ground-truth reward r* (``docs/papers/fpo.md``, "Data").

The paper aligns Gemma-2 on UltraFeedback and judges with GPT-4-Turbo; none of that is reachable
offline. Here the judge is a known reward, so win rates are exact. A prompt asks for a response on
one of 8 topics, in a tone (positive or negative) and a length (short or long); r* scores how
well a response does that and penalises repetition, ungrammatical bigrams and a missing
``<eos>``. Plain numpy; nothing here depends on torch or Kedro.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

PAD, BOS, USER, ASST, EOS = "<pad>", "<bos>", "<user>", "<asst>", "<eos>"
CONTROL = (PAD, BOS, USER, ASST, EOS)
N_TOPICS = 8
NOUNS_PER_TOPIC, VERBS_PER_TOPIC = 12, 8
N_POS, N_NEG, N_NEUTRAL = 30, 30, 20
DETERMINERS = ("the", "a", "this", "that", "every", "some", "one", "my")
ADVERBS = ("today", "again", "often", "quickly", "slowly", "here", "there", "now", "soon",
           "together")
PERIOD = "."
#: Target lengths of the length tags, in response tokens.
TARGET_LENGTH = {"short": 12, "long": 28}
#: A response without ``<eos>`` within this many tokens is penalised.
MAX_RESPONSE = 48
#: The attainable bounds of r*: topic 0..1, tone −1..1, length −0.5..0.5, repetition 0..0.5,
#: ungrammatical 0..1, missing ``<eos>`` 0..1: together [−4, 2.5], which is what the 1-10
#: rescaling uses.
REWARD_RANGE = (-4.0, 2.5)


@dataclass(frozen=True)
class World:
    """The vocabulary with every word's grammatical category, topic and sentiment."""

    tokens: tuple[str, ...]
    category: dict[str, str]          # control, tag, det, mod, noun, verb, adv, period
    topic: dict[str, int]             # nouns and verbs -> topic
    sentiment: dict[str, int]         # modifiers -> +1, -1, 0
    index: dict[str, int] = field(repr=False)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def ids(self, words: Sequence[str]) -> list[int]:
        try:
            return [self.index[w] for w in words]
        except KeyError as exc:
            raise ValueError(f"word {exc.args[0]!r} is not in the fpo vocabulary") from None

    def words(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    def of_topic(self, k: int, category: str) -> list[str]:
        return [w for w, t in self.topic.items() if t == k and self.category[w] == category]

    def modifiers(self, sign: int) -> list[str]:
        return [w for w, s in self.sentiment.items() if s == sign]


def make_world() -> World:
    """The fixed vocabulary (~300 tokens): control tokens, tags, 8 topics of nouns and verbs,
    positive, negative and neutral modifiers, determiners, adverbs and the period."""
    tokens: list[str] = list(CONTROL)
    category = {t: "control" for t in CONTROL}
    topic: dict[str, int] = {}
    sentiment: dict[str, int] = {}
    tags = [f"<t:{k}>" for k in range(N_TOPICS)] + ["<tone:+>", "<tone:->", "<len:short>",
                                                      "<len:long>"]
    for t in tags:
        tokens.append(t)
        category[t] = "tag"
    for k in range(N_TOPICS):
        for j in range(NOUNS_PER_TOPIC):
            w = f"n{k}_{j}"
            tokens.append(w)
            category[w], topic[w] = "noun", k
        for j in range(VERBS_PER_TOPIC):
            w = f"v{k}_{j}"
            tokens.append(w)
            category[w], topic[w] = "verb", k
    for prefix, n, sign in (("pos", N_POS, 1), ("neg", N_NEG, -1), ("neu", N_NEUTRAL, 0)):
        for j in range(n):
            w = f"{prefix}{j}"
            tokens.append(w)
            category[w], sentiment[w] = "mod", sign
    for w in DETERMINERS:
        tokens.append(w)
        category[w] = "det"
    for w in ADVERBS:
        tokens.append(w)
        category[w] = "adv"
    tokens.append(PERIOD)
    category[PERIOD] = "period"
    return World(tuple(tokens), category, topic, sentiment, {t: i for i, t in enumerate(tokens)})


#: Legal category bigrams of the writer grammar
#: sentence -> DET [MOD] NOUN VERB [DET [MOD] NOUN] [ADV] "." ; response -> sentence+ <eos>.
LEGAL = frozenset({
    ("start", "det"), ("det", "mod"), ("det", "noun"), ("mod", "noun"), ("noun", "verb"),
    ("verb", "det"), ("verb", "adv"), ("verb", "period"), ("noun", "adv"), ("noun", "period"),
    ("adv", "period"), ("period", "det"), ("period", "eos"),
})


def _cat(world: World, word: str) -> str:
    return "eos" if word == EOS else world.category.get(word, "control")


def legal_bigrams(world: World) -> set[tuple[str, str]]:
    """Every grammatical word bigram (the exported set the reward checks)."""
    by_cat: dict[str, list[str]] = {}
    for w in world.tokens:
        by_cat.setdefault(_cat(world, w), []).append(w)
    return {(a, b) for ca, cb in LEGAL if ca != "start"
            for a in by_cat.get(ca, []) for b in by_cat.get(cb, [])}


@dataclass(frozen=True)
class Prompt:
    topic: int
    tone: int          # +1 or -1
    length: str        # "short" | "long"
    words: tuple[str, ...]

    def tokens(self) -> list[str]:
        tone = "<tone:+>" if self.tone > 0 else "<tone:->"
        return [BOS, USER, f"<t:{self.topic}>", tone, f"<len:{self.length}>", *self.words, ASST]


def sample_prompt(world: World, rng: np.random.Generator, hard: bool = False) -> Prompt:
    """A prompt: topic, tone and length tags and 2-4 words of the topic. ``hard`` prompts ask
    for long responses and use the topic's rarer words (the last third of its nouns)."""
    k = int(rng.integers(N_TOPICS))
    nouns = world.of_topic(k, "noun")
    pool = nouns[2 * len(nouns) // 3:] if hard else nouns
    n = int(rng.integers(2, 5))
    words = tuple(str(w) for w in rng.choice(pool, size=n, replace=True))
    length = "long" if hard else str(rng.choice(["short", "long"]))
    return Prompt(k, int(rng.choice([-1, 1])), length, words)


def write_response(world: World, prompt: Prompt, rng: np.random.Generator,
                   p_follow: float) -> list[str]:
    """The noisy writer of the SFT corpus: grammatical sentences that follow the prompt's topic,
    tone and length each with probability ``p_follow`` (otherwise a random topic, tone or length),
    ending with ``<eos>``."""
    topic = prompt.topic if rng.random() < p_follow else int(rng.integers(N_TOPICS))
    tone = prompt.tone if rng.random() < p_follow else int(rng.choice([-1, 0, 1]))
    target = (TARGET_LENGTH[prompt.length] if rng.random() < p_follow
              else int(rng.integers(6, 41)))
    nouns, verbs = world.of_topic(topic, "noun"), world.of_topic(topic, "verb")
    mods = world.modifiers(tone) if tone else world.modifiers(0)

    def noun_phrase() -> list[str]:
        phrase = [str(rng.choice(DETERMINERS))]
        if rng.random() < 0.5:
            phrase.append(str(rng.choice(mods)))
        return [*phrase, str(rng.choice(nouns))]

    out: list[str] = []
    while len(out) < target - 2:
        sentence = [*noun_phrase(), str(rng.choice(verbs))]
        if rng.random() < 0.5:
            sentence += noun_phrase()
        if rng.random() < 0.3:
            sentence.append(str(rng.choice(ADVERBS)))
        out += [*sentence, PERIOD]
    return [*out, EOS]


@dataclass(frozen=True)
class RewardParts:
    topic: float
    tone: float
    length: float
    repetition: float
    ungrammatical: float
    no_eos: float

    @property
    def total(self) -> float:
        return (self.topic + self.tone + self.length - self.repetition - self.ungrammatical
                - self.no_eos)


def reward_parts(world: World, prompt: Prompt, response: Sequence[str]) -> RewardParts:
    """The terms of r*(x, y), each in its stated range:

    * topic: share of the response's content words (nouns, verbs) from the prompt's topic;
    * tone: ``s·(n_pos − n_neg)/(n_modifiers + 1)``;
    * length: ``0.5·max(1 − |len − L|/L, −1)`` with len the tokens before ``<eos>``;
    * repetition: ``0.5·`` the fraction of the response's bigrams that repeat an earlier one;
    * ungrammatical: ``1.0·`` the fraction of bigrams (from ``<asst>`` to ``<eos>``) the writer
      grammar forbids;
    * no_eos: 1 when ``<eos>`` is not within the first 48 tokens.
    """
    words = list(response)
    has_eos = EOS in words[:MAX_RESPONSE]
    body = words[:words.index(EOS)] if EOS in words else words
    content = [w for w in body if world.category.get(w) in ("noun", "verb")]
    topic = (sum(world.topic[w] == prompt.topic for w in content) / len(content)
             if content else 0.0)
    mods = [world.sentiment[w] for w in body if w in world.sentiment]
    tone = prompt.tone * (sum(1 for m in mods if m > 0) - sum(1 for m in mods if m < 0)) / (
        len(mods) + 1)
    target = TARGET_LENGTH[prompt.length]
    length = 0.5 * max(1.0 - abs(len(body) - target) / target, -1.0)
    pairs = list(itertools.pairwise(body))
    repetition = 0.5 * (1.0 - len(set(pairs)) / len(pairs)) if pairs else 0.0
    seq = ["<start>", *body, *([EOS] if EOS in words else [])]
    cats = ["start" if w == "<start>" else _cat(world, w) for w in seq]
    bigrams = list(itertools.pairwise(cats))
    ungrammatical = (sum(b not in LEGAL for b in bigrams) / len(bigrams)) if bigrams else 1.0
    return RewardParts(topic, tone, length, repetition, ungrammatical, 0.0 if has_eos else 1.0)


def reward(world: World, prompt: Prompt, response: Sequence[str]) -> float:
    """r*(x, y), within :data:`REWARD_RANGE`."""
    return reward_parts(world, prompt, response).total


def rescale_reward(r: float | np.ndarray) -> float | np.ndarray:
    """r* mapped to the MT-Bench-like 1-10 scale: ``1 + 9·(r − r_min)/(r_max − r_min)``."""
    lo, hi = REWARD_RANGE
    return 1.0 + 9.0 * (np.asarray(r, dtype=float) - lo) / (hi - lo)
