"""Offline English corpora and the byte-level BPE tokenizer (``docs/papers/frugal.md``, "Data").

* ``stdlib_docs``: docstrings (``ast.get_docstring`` of modules, classes and functions) of the
  running CPython standard library, plus every value of ``pydoc_data.topics.topics`` (the
  language-reference topics). It ships with every Python, so nothing is downloaded; it changes
  across patch releases, hence the recorded Python version and SHA-256.
* ``python_doc_deb``: the reStructuredText sources of Debian's ``python3.11-doc`` package
  (``/usr/share/doc/python3.11/html/_sources/**/*.rst.txt``), for the paper-scale config.
* ``synthetic_markov``: a random first-order Markov language whose entropy rate is known, so
  the best achievable perplexity ``exp(H)`` is known (tests).

Documents are kept apart by a record-separator line so they can be split by document.
"""

from __future__ import annotations

import ast
import hashlib
import platform
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from icml25.core.mdp import stationary_distribution

DOC_SEPARATOR = "\n\x1e\n"
EOS = "<eos>"
SKIP_DIRS = ("site-packages", "idlelib", "lib2to3", "__pycache__")
DEFAULT_DEB_SOURCES = "/usr/share/doc/python3.11/html/_sources"


def _skip(rel: Path) -> bool:
    return any(part in SKIP_DIRS or part.startswith("test") for part in rel.parts[:-1]) or (
        rel.name.startswith("test"))


def _python_files(root: Path, max_files: int | None) -> list[Path]:
    """``.py`` files under ``root`` in sorted path order, skipped folders pruned while walking."""
    found: list[Path] = []

    def walk(folder: Path) -> bool:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
        # sorted full paths: a folder's files and subfolders interleave by name, as rglob+sort
        for entry in entries:
            rel = entry.relative_to(root)
            if entry.is_dir():
                if entry.name in SKIP_DIRS or entry.name.startswith("test"):
                    continue
                if walk(entry):
                    return True
            elif entry.suffix == ".py" and not _skip(rel):
                found.append(entry)
                if max_files is not None and len(found) >= max_files:
                    return True
        return False

    walk(root)
    return sorted(found)


def stdlib_docstrings(root: Path | str | None = None, min_chars: int = 40,
                      max_files: int | None = None, progress: bool = False) -> list[str]:
    """Docstrings longer than ``min_chars`` of every stdlib ``.py`` file, in sorted path order."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    files = _python_files(root, max_files)
    docs: list[str] = []
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for path in tqdm(files, desc="stdlib docstrings", disable=not progress, leave=False):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # a few stdlib files are deliberately invalid or not UTF-8
        for node in ast.walk(tree):
            if isinstance(node, kinds):
                doc = ast.get_docstring(node)
                if doc and len(doc) > min_chars:
                    docs.append(doc)
    return docs


def pydoc_topics() -> list[str]:
    """The language-reference topics bundled with CPython (``pydoc_data.topics``), by key."""
    from pydoc_data.topics import topics

    return [topics[key] for key in sorted(topics)]


def deb_doc_sources(root: Path | str = DEFAULT_DEB_SOURCES) -> list[str]:
    """The ``*.rst.txt`` sources of the Python HTML documentation under ``root``, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(
            f"frugal.data.deb_sources: {root} does not exist; install the Debian package "
            "python3.11-doc (apt-get install python3.11-doc) or point the parameter elsewhere")
    files = sorted(root.rglob("*.rst.txt"))
    if not files:
        raise ValueError(f"frugal.data.deb_sources: no *.rst.txt files under {root}")
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def markov_chain(vocab: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """A random transition matrix with Dirichlet(alpha) rows."""
    return rng.dirichlet(np.full(vocab, alpha), size=vocab)


def entropy_rate(transition: np.ndarray) -> float:
    """``H = -Σ_i π_i Σ_j P_ij log P_ij`` (nats per token) of a stationary Markov chain."""
    pi = stationary_distribution(transition)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(transition > 0, np.log(transition), 0.0)
    return float(-(pi[:, None] * transition * logs).sum())


def sample_markov(transition: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    """A length-``length`` path started from the stationary distribution."""
    vocab = transition.shape[0]
    cdf = np.cumsum(transition, axis=1)
    out = np.empty(length, dtype=np.int64)
    out[0] = rng.choice(vocab, p=stationary_distribution(transition))
    u = rng.random(length)
    for t in range(1, length):
        out[t] = min(int(np.searchsorted(cdf[out[t - 1]], u[t])), vocab - 1)
    return out


MARKOV_ALPHABET = "".join(chr(c) for c in range(0x21, 0x7F))  # printable ASCII, no space


def synthetic_markov_docs(vocab: int, alpha: float, n_docs: int, doc_len: int,
                          seed: int) -> tuple[list[str], float]:
    """Documents of a random Markov language written with one character per token, and ``H``."""
    if vocab > len(MARKOV_ALPHABET):
        raise ValueError(f"frugal.data.markov_vocab: at most {len(MARKOV_ALPHABET)}, got {vocab}")
    rng = np.random.default_rng(seed)
    transition = markov_chain(vocab, alpha, rng)
    docs = ["".join(MARKOV_ALPHABET[i] for i in sample_markov(transition, doc_len, rng))
            for _ in range(n_docs)]
    return docs, entropy_rate(transition)


def join_documents(docs: Sequence[str]) -> str:
    """One text with documents separated by :data:`DOC_SEPARATOR` (removed from the docs)."""
    clean = [d.replace("\x1e", " ").strip() for d in docs]
    return DOC_SEPARATOR.join(d for d in clean if d)


def split_documents(text: str) -> list[str]:
    """Inverse of :func:`join_documents`; an empty corpus is an error."""
    if not isinstance(text, str):
        raise TypeError(f"corpus: expected text, got {type(text).__name__}")
    docs = [d for d in text.split(DOC_SEPARATOR) if d.strip()]
    if not docs:
        raise ValueError("corpus: empty (no documents)")
    return docs


def corpus_meta(text: str, source: str, n_docs: int, **extra) -> dict:
    return {"source": source, "python_version": platform.python_version(),
            "sha256": text_sha256(text), "n_docs": n_docs,
            "n_chars": len(text), **extra}


def normalised(doc: str) -> str:
    """The text a duplicate is judged on: whitespace runs collapsed, ends stripped."""
    return " ".join(doc.split())


def deduplicate(docs: Sequence[str]) -> tuple[list[str], int]:
    """The documents with every repeat of an earlier one (same :func:`normalised` text) removed,
    first occurrences kept in order, and the number removed. The stdlib repeats docstrings
    (inherited methods, ``__init__`` of sibling classes), so without this a validation or test
    document can be a copy of a training one."""
    seen: set[str] = set()
    unique: list[str] = []
    for doc in docs:
        key = normalised(doc)
        if key not in seen:
            seen.add(key)
            unique.append(doc)
    return unique, len(docs) - len(unique)


def train_val_test_split(docs: Sequence[str], val_frac: float, test_frac: float,
                         seed: int) -> tuple[list[str], list[str], list[str]]:
    """Split deduplicated documents into train / validation / test (a seeded permutation).

    Validation (for choosing learning rates) and test (for the reported results) are disjoint
    from each other and from training, by document and by text: a corpus with duplicate
    documents is refused (:func:`deduplicate` it first). Each part keeps corpus order.
    """
    for name, frac in (("val_frac", val_frac), ("test_frac", test_frac)):
        if not 0.0 < frac < 1.0:
            raise ValueError(f"frugal.data.{name}: got {frac}; expected in (0, 1)")
    if val_frac + test_frac >= 1.0:
        raise ValueError(f"frugal.data: val_frac + test_frac = {val_frac + test_frac} leaves "
                         "no training documents; expected a sum below 1")
    n = len(docs)
    if len({normalised(d) for d in docs}) < n:
        raise ValueError("corpus: duplicate documents; deduplicate before splitting so that no "
                         "text is in two splits")
    n_val = max(1, round(val_frac * n))
    n_test = max(1, round(test_frac * n))
    if n - n_val - n_test < 1:
        raise ValueError(f"corpus: {n} documents are too few to split with val_frac {val_frac} "
                         f"and test_frac {test_frac}")
    order = np.random.default_rng(seed).permutation(n).tolist()
    val_idx, test_idx = set(order[:n_val]), set(order[n_val:n_val + n_test])
    train = [d for i, d in enumerate(docs) if i not in val_idx and i not in test_idx]
    val = [d for i, d in enumerate(docs) if i in val_idx]
    test = [d for i, d in enumerate(docs) if i in test_idx]
    return train, val, test


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def train_tokenizer(docs: Sequence[str], vocab_size: int, kind: str = "bpe") -> str:
    """Train a tokenizer on ``docs`` and return its JSON (HF ``tokenizers``).

    ``bpe``: byte-level BPE (GPT-2 style pre-tokenisation, every byte in the initial alphabet, so
    no text is out of vocabulary). ``char``: one token per character seen (the Markov corpus).
    ``<eos>`` is token 0 in both.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if kind == "char":
        chars = sorted(set("".join(docs)))
        vocab = {EOS: 0, **{c: i + 1 for i, c in enumerate(chars)}}
        tok = Tokenizer(models.WordLevel(vocab, unk_token=EOS))
        tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
        return tok.to_str()
    if kind != "bpe":
        raise ValueError(f"frugal.tokenizer.kind: got {kind!r}; expected bpe or char")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(docs), trainer)
    return tok.to_str()


def encode_documents(tokenizer_json: str, docs: Sequence[str]) -> np.ndarray:
    """One contiguous token stream: each document's ids followed by ``<eos>`` (int32)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    eos = tok.token_to_id(EOS)
    if eos is None:
        raise ValueError("tokenizer: no <eos> token")
    pieces = []
    for enc in tok.encode_batch(list(docs)):
        pieces.append(np.asarray(enc.ids, dtype=np.int32))
        pieces.append(np.asarray([eos], dtype=np.int32))
    if not pieces:
        raise ValueError("encode_documents: no documents")
    return np.concatenate(pieces)


def vocab_size_of(tokenizer_json: str) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(tokenizer_json).get_vocab_size()
