"""No tracked file points the reader at a document the repository does not ship.

The rooms were written from per-paper input notes that live outside the repository; a user who
clones it has only the papers, the code and ``docs/``. So no tracked text file may name the
notes' folder (``shared/specs``, ``specs/<name>.md``) or the design note beside them
(``DESIGN.md``; the repository's own is ``docs/architecture.md``), or cite the notes as a
document ("the spec", "spec test 3", "spec §2", "(spec: ...)", "the spec's ..."). Docstrings
cite the paper (section, equation, table) or the room's docs page ``docs/papers/<name>.md``.

The pattern is tuned so that the word's other uses pass: ``spectral``, ``spectrum``,
``specific``, ``specified``, ``inspect``, ``respect``, and ``spec`` as a code identifier (a
claim spec ``spec.method``, a verification spec ``margin_spec(y, k)``, a speaker spec
``SpeakerSpec``, ``importlib.util.find_spec``, an STFT ``spec = torch.stft(...)``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# This file names the patterns it looks for.
SKIP = re.compile(r"^(tests/test_no_outside_references\.py)$")

_WORD = r"specs?\b(?![\w.\[(=])"  # the word, not an identifier, attribute, call or assignment
OUTSIDE = re.compile(
    r"shared/specs|\bspecs/|\bDESIGN\.md\b"                 # the notes' folder, a file in it,
                                                            # the design note beside them
    r"|\bthe\s+specs?\b(?!\s+matri)|\bspecs?'s?(?=\s)"       # "the spec", "the spec's"
    r"|\bspecs?\s*§"                                        # "spec §2"
    r"|\b(?:this|that|our|input|paper's|per-paper|room's)\s+specs?\b"
    r"|\bspecs?\s+(?:tests?|sections?|anchors?|numerics|pitfalls?|regime|defaults?|values?"
    r"|data|steps?|eqs?\b|equations?|says|states|asks|gives|leaves|marks|requires|lists"
    r"|fixes|names|wants|calls|defines|\d|\"|`)"            # "spec test 3", "spec ``x.md``"
    r"|(?:^|(?<=[\s\"'`]))\(specs?\b(?![\w.\[(=,])"       # "(spec tests 1-3)", "(spec)"
    r"|\(specs?,\s*[\"`§]"                                  # '(spec, "Data")'
    r"|(?:#|\"\"\")\s*" + _WORD +                           # "# spec: ...", '"""Spec: ...'
    r"|(?<!\{)\*\*" + _WORD + r"|;\s*" + _WORD +            # "**Spec**", "Sec. 4; spec"
    r"|(?<=[\"'])specs?(?=[\"'])",                          # a setting named after it: "spec"
    re.IGNORECASE)

_TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ini", ".json",
                  ".ipynb", ".sh", ".html", ".css", ".js", ".csv", ".tsv", ".rst", ""}


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    paths = []
    for name in out.stdout.decode().split("\0"):
        if not name or SKIP.match(name):
            continue
        path = ROOT / name
        if path.suffix.lower() in _TEXT_SUFFIXES or path.name in {"Makefile", ".gitignore"}:
            paths.append(path)
    return paths


def find_outside_references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line that cites the outside notes."""
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)]


def test_the_pattern_tells_a_cited_document_from_the_other_uses_of_the_word():
    cited = ["see shared/specs/acorn.md", "(specs/wavetoken.md, \"Data\")", "as the spec says",
             "the spec's pipeline", "spec §1.4", "(spec tests 1-3)", "spec test 8",
             "(spec ``acorn.md`` \"Tests\")", "# spec: ~300 tokens", '"""Spec: occupancy',
             "Sec. 4; spec", "(spec)", '(spec, "Data" A)', "spec step 3", "spec eq. 10", "the room's spec",
             "(DESIGN.md: never pickled modules)", "medium_log: Literal[\"continuous\", \"spec\"]", "Spec value: L1 error"]
    fine = ["spectral norm", "the spectrum", "specific", "specified", "inspect", "respect",
            "spec = margin_spec(y, 10)", "ibp(ops, lower, upper, spec).lower",
            "evaluate_claim({**spec, \"margin\": 0.2}, METRICS)", "for spec in specs:",
            "spec: ClaimSpec | Mapping[str, Any],", "spec = torch.stft(x)",
            "importlib.util.find_spec(package)", "SpeakerSpec(\"\", split)",
            "@pytest.mark.parametrize(\"spec, match\", [", "spec.method", "spec[\"first\"]",
            "specs = [c.model_dump() for c in p.claims]",
            "the last layer with the spec matrix folded in",
            "for (spec, utt, kind, text), x in zip(jobs, audio, strict=True):"]
    assert [s for s in cited if not OUTSIDE.search(s)] == []
    assert [s for s in fine if OUTSIDE.search(s)] == []


def test_no_tracked_file_cites_a_document_outside_the_repository():
    hits = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        rel = path.relative_to(ROOT).as_posix()
        hits += [f"{rel}:{i}: {line[:120]}" for i, line in find_outside_references(text)]
    assert not hits, ("files cite documents the repository does not ship (cite the paper or "
                      "docs/papers/<name>.md instead):\n" + "\n".join(hits))
