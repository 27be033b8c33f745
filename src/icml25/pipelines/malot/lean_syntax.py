"""Syntax of the MiniLean fragment of Lean 4 (docs/papers/malot.md): parser, elaborator,
pretty printer.

Expressions are parsed with ``lark`` (Earley) into untyped tuples, then elaborated the way Lean 4's
``binop%``/``binrel%`` elaborators do it: the leaves of an arithmetic tree (variables, type
ascriptions, ``|.|``) fix the "maximal" type among ℕ ⊂ ℤ ⊂ ℚ ⊂ ℝ, numerals take that type (ℕ when
nothing else fixes it), and smaller leaves get a coercion ``↑``. Anything outside the fragment
raises :class:`OutOfFragment` with the construct that is missing, so a fragment gap is never
confused with a wrong proof.

Untyped tuples: ``("num", "2.5")``, ``("var", "x")``, ``("add"|"sub"|"mul"|"div"|"mod"|"pow", a,
b)``, ``("neg"|"abs"|"up"|"inv", a)``, ``("asc", a, T)``, ``("cmp", op, a, b)``, ``("and"|"or"|"imp"|
"iff", p, q)``, ``("not", p)``, ``("true",)``, ``("false",)``.
Typed terms: ``("num", T, Fraction)``, ``("var", T, name)``, ``("cast", T, inner)``, ``(op, T, a,
b)`` for add/sub/mul/div/mod, ``("pow", T, base, n)``, ``("neg"|"abs", T, a)``; typed props reuse
the untyped prop constructors with typed terms inside. ``a⁻¹`` (ℚ/ℝ only) elaborates to ``1 / a``,
its definition in Lean's ``DivInvMonoid`` (so ``0⁻¹ = 0``).

Binders follow Lean 4: a later binder with the name of an earlier variable or hypothesis is a
fresh variable, and the earlier one stays in the context under an inaccessible name (``x✝``) that
no later text can refer to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from lark import Lark, Transformer
from lark.exceptions import LarkError

TYPES = ("ℕ", "ℤ", "ℚ", "ℝ")
RANK = {t: i for i, t in enumerate(TYPES)}
CMP_OPS = ("=", "≠", "<", "≤", ">", "≥", "∣")
MAX_EXPONENT = 16

_GRAMMAR = r"""
?start: e
?e: imp | imp "↔" imp -> iff
?imp: disj | disj "→" imp -> imp
?disj: conj | conj "∨" disj -> or_
?conj: negp | negp "∧" conj -> and_
?negp: cmp | "¬" negp -> not_
?cmp: sum | sum CMPOP sum -> cmp
?sum: prod | sum "+" prod -> add | sum "-" prod -> sub
?prod: unary | prod "*" unary -> mul | prod "/" unary -> div | prod "%" unary -> mod
?unary: pow | "-" unary -> neg
?pow: cast | cast "^" unary -> pow
?cast: inv | "↑" cast -> up
?inv: atom | inv "⁻¹" -> inv
?atom: NUMBER -> num
     | "True" -> true
     | "False" -> false
     | NAME -> var
     | "(" e ")"
     | "(" e ":" TYPE ")" -> asc
     | "|" e "|" -> abs
CMPOP: "=" | "≠" | "<=" | ">=" | "<" | "≤" | ">" | "≥" | "∣"
TYPE: "ℕ" | "ℤ" | "ℚ" | "ℝ"
NUMBER: /[0-9]+(\.[0-9]+)?/
NAME: /(?!(True|False)(?![A-Za-z0-9_'₀-₉]))[A-Za-zα-κμ-ωΑ-Ω_][A-Za-z0-9_'₀-₉α-ωΑ-Ω]*/
%import common.WS
%ignore WS
"""

_ASCII = {"<=": "≤", ">=": "≥"}


class OutOfFragment(ValueError):
    """The text uses Lean beyond MiniLean; ``construct`` names what is missing."""

    def __init__(self, construct: str) -> None:
        super().__init__(f"unsupported in MiniLean: {construct}")
        self.construct = construct


class _ToTuples(Transformer):
    def num(self, items):
        return ("num", str(items[0]))

    def var(self, items):
        return ("var", str(items[0]))

    def true(self, _):
        return ("true",)

    def false(self, _):
        return ("false",)

    def asc(self, items):
        return ("asc", items[0], str(items[1]))

    def cmp(self, items):
        return ("cmp", _ASCII.get(str(items[1]), str(items[1])), items[0], items[2])

    def __default__(self, data, children, meta):
        name = str(data).rstrip("_")
        return (name, *children)


_PARSER = Lark(_GRAMMAR, parser="earley", lexer="dynamic")
_TRANSFORM = _ToTuples()

#: Constructs outside the fragment, recognised before parsing for a readable coverage reason.
_KNOWN_GAPS = [
    (r"∑|∏|Finset", "big operators (∑, ∏, Finset)"),
    (r"∀|∃|fun |λ", "quantifiers or lambdas"),
    (r"Real\.sqrt|√|Real\.log|Real\.exp|Real\.pi|Real\.cos|Real\.sin|Real\.tan|Real\.logb",
     "real functions (sqrt, log, exp, trig)"),
    (r"Nat\.Prime|Nat\.gcd|Nat\.lcm|Nat\.factorial|Nat\.digits|Nat\.divisors|Int\.floor|"
     r"Int\.ceil|Nat\.floor|Int\.natAbs|Int\.toNat|Even|Odd|⌊|⌈|!", "number-theory functions"),
    (r"ℂ|Complex", "complex numbers"),
    (r"Set|∈|∉|⊆|∩|∪", "sets"),
    (r"→ ℝ\)|→ ℕ\)|→ ℤ\)|→ ℚ\)", "function variables"),
]


def known_gap(text: str) -> str | None:
    for pattern, reason in _KNOWN_GAPS:
        if re.search(pattern, text):
            return reason
    return None


@lru_cache(maxsize=20000)
def parse_expr(text: str) -> tuple:
    """Untyped tuple of a MiniLean expression or proposition; OutOfFragment otherwise."""
    if len(text) > 2000:
        raise OutOfFragment("expression longer than 2000 characters")
    try:
        return _TRANSFORM.transform(_PARSER.parse(text))
    except LarkError as err:
        gap = known_gap(text)
        raise OutOfFragment(gap or f"syntax {_short(err)}") from None


def _short(err: Exception) -> str:
    text = str(err).splitlines()[0]
    return text[:120]


# ------------------------------------------------------------------------- pretty printing
_PREC = {"iff": 20, "imp": 25, "or": 30, "and": 35, "not": 40, "cmp": 50, "add": 65, "sub": 65,
         "mul": 70, "div": 70, "mod": 70, "neg": 75, "pow": 75, "up": 1024}
_SYM = {"iff": "↔", "imp": "→", "or": "∨", "and": "∧", "add": "+", "sub": "-", "mul": "*",
        "div": "/", "mod": "%", "pow": "^"}
_RIGHT = {"iff": False, "imp": True, "or": True, "and": True, "pow": True}


def pretty(node: tuple, parent: int = 0) -> str:
    """Lean text of an untyped tuple (parentheses only where precedence needs them)."""
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "var":
        return node[1]
    if kind in ("true", "false"):
        return "True" if kind == "true" else "False"
    if kind == "asc":
        return f"({pretty(node[1])} : {node[2]})"
    if kind == "abs":
        return f"|{pretty(node[1])}|"
    if kind == "inv":
        return pretty(node[1], 1024) + "⁻¹"
    prec = _PREC[kind]
    if kind == "up":
        text = "↑" + pretty(node[1], 1024)
    elif kind == "neg":
        text = "-" + pretty(node[1], 75)
    elif kind == "not":
        text = "¬" + pretty(node[1], 40)
    elif kind == "cmp":
        text = f"{pretty(node[2], 51)} {node[1]} {pretty(node[3], 51)}"
    else:
        right = _RIGHT.get(kind, False)
        left_prec = prec + 1 if right or kind == "iff" else prec
        right_prec = prec if right else prec + 1
        if kind == "pow":
            left_prec = 1024
        text = f"{pretty(node[1], left_prec)} {_SYM[kind]} {pretty(node[2], right_prec)}"
    return f"({text})" if prec < parent else text


# ------------------------------------------------------------------------------ elaboration
def _numeral(text: str, typ: str) -> Fraction:
    value = Fraction(text)
    if typ in ("ℕ", "ℤ") and "." in text:
        raise OutOfFragment(f"decimal literal {text} at type {typ}")
    return value


_ARITH = ("add", "sub", "mul", "div", "mod", "neg", "pow", "num", "var", "asc", "abs", "up", "inv")


def _leaf_types(node: tuple, ctx: dict[str, str]) -> list[str]:
    """Types fixed by the leaves of an arithmetic tree (binop% analysis)."""
    kind = node[0]
    if kind in ("add", "sub", "mul", "div", "mod"):
        return _leaf_types(node[1], ctx) + _leaf_types(node[2], ctx)
    if kind == "neg":
        return _leaf_types(node[1], ctx)
    if kind == "pow":
        return _leaf_types(node[1], ctx)
    if kind == "var":
        if node[1] not in ctx:
            raise OutOfFragment(f"unknown identifier '{node[1]}'")
        return [ctx[node[1]]]
    if kind == "asc":
        return [node[2]]
    if kind == "abs":
        return [_elab_term(node[1], ctx, None)[1]]
    if kind in ("num", "up"):
        return []
    if kind == "inv":  # a leaf of binop%: its own type, or flexible if only numerals inside
        inner = _leaf_types(node[1], ctx)
        return [_max_type(inner, None)] if inner else []
    raise OutOfFragment(f"proposition used as a term ({kind})")


def _max_type(types: list[str], default: str | None) -> str:
    if not types:
        return default or "ℕ"
    return max(types, key=RANK.__getitem__)


def _coerce(term: tuple, typ: str) -> tuple:
    if term[1] == typ:
        return term
    if RANK[term[1]] > RANK[typ]:
        raise OutOfFragment(f"type mismatch: {term[1]} term where {typ} is expected")
    return ("cast", typ, term)


def _elab_term(node: tuple, ctx: dict[str, str], expected: str | None) -> tuple:
    """Typed term of an arithmetic tree, elaborated at max(leaf types, expected)."""
    leaves = _leaf_types(node, ctx)
    if expected is not None:
        leaves = [*leaves, expected]
    return _elab_at(node, ctx, _max_type(leaves, expected))


def _elab_at(node: tuple, ctx: dict[str, str], typ: str) -> tuple:
    kind = node[0]
    if kind == "num":
        return ("num", typ, _numeral(node[1], typ))
    if kind == "var":
        return _coerce(("var", ctx[node[1]], node[1]), typ)
    if kind == "asc":
        inner = _elab_term(node[1], ctx, node[2])
        return _coerce(inner, typ)
    if kind == "abs":
        inner = _elab_term(node[1], ctx, None)
        if inner[1] == "ℕ":
            raise OutOfFragment("|.| of a natural number")
        return _coerce(("abs", inner[1], inner), typ)
    if kind == "up":
        if node[1][0] == "inv":
            raise OutOfFragment("↑ directly before ⁻¹ (write parentheses)")
        inner = _elab_term(node[1], ctx, None)
        return _coerce(inner, typ)
    if kind == "inv":
        own = _leaf_types(node[1], ctx)
        at = _max_type(own, None) if own else typ
        if at not in ("ℚ", "ℝ"):
            raise OutOfFragment(f"⁻¹ on {at}")
        inner = _elab_at(node[1], ctx, at)
        return _coerce(("div", at, ("num", at, Fraction(1)), inner), typ)
    if kind in ("add", "sub", "mul", "div", "mod"):
        if kind == "mod" and typ in ("ℚ", "ℝ"):
            raise OutOfFragment(f"% on {typ}")
        return (kind, typ, _elab_at(node[1], ctx, typ), _elab_at(node[2], ctx, typ))
    if kind == "neg":
        if typ == "ℕ":
            raise OutOfFragment("negation of a natural number (no Neg ℕ)")
        return ("neg", typ, _elab_at(node[1], ctx, typ))
    if kind == "pow":
        exponent = node[2]
        if exponent[0] != "num" or "." in exponent[1]:
            raise OutOfFragment("non-numeral exponent")
        n = int(exponent[1])
        if n > MAX_EXPONENT:
            raise OutOfFragment(f"exponent {n} > {MAX_EXPONENT}")
        return ("pow", typ, _elab_at(node[1], ctx, typ), n)
    raise OutOfFragment(f"proposition used as a term ({kind})")


def elaborate_prop(node: tuple, ctx: dict[str, str]) -> tuple:
    """Typed proposition; comparisons are elaborated like Lean's ``binrel%``."""
    kind = node[0]
    if kind in ("true", "false"):
        return node
    if kind == "not":
        return ("not", elaborate_prop(node[1], ctx))
    if kind in ("and", "or", "imp", "iff"):
        return (kind, elaborate_prop(node[1], ctx), elaborate_prop(node[2], ctx))
    if kind == "cmp":
        op, lhs, rhs = node[1], node[2], node[3]
        typ = _max_type(_leaf_types(lhs, ctx) + _leaf_types(rhs, ctx), None)
        if op == "∣" and typ in ("ℚ", "ℝ"):
            raise OutOfFragment(f"∣ on {typ}")
        return ("cmp", op, _elab_at(lhs, ctx, typ), _elab_at(rhs, ctx, typ))
    if kind == "var":
        raise OutOfFragment(f"propositional variable or predicate '{node[1]}'")
    raise OutOfFragment(f"term used as a proposition ({kind})")


def typed_pretty(node: tuple, parent: int = 0) -> str:
    """Lean text of a typed term or proposition (casts printed as ``↑``)."""
    kind = node[0]
    if kind in ("true", "false", "not", "and", "or", "imp", "iff"):
        if kind in ("true", "false"):
            return pretty(node)
        if kind == "not":
            text, prec = "¬" + typed_pretty(node[1], 40), 40
        else:
            prec = _PREC[kind]
            right = _RIGHT.get(kind, False)
            text = (f"{typed_pretty(node[1], prec + 1)} {_SYM[kind]} "
                    f"{typed_pretty(node[2], prec if right else prec + 1)}")
        return f"({text})" if prec < parent else text
    if kind == "cmp":
        text = f"{typed_pretty(node[2], 51)} {node[1]} {typed_pretty(node[3], 51)}"
        return f"({text})" if parent > 50 else text
    if kind == "num":
        value = node[2]
        text = str(value.numerator) if value.denominator == 1 else \
            f"{value.numerator} / {value.denominator}"
        return f"({text})" if value.denominator != 1 and parent > 70 else text
    if kind == "var":
        return node[2]
    if kind == "cast":
        return "↑" + typed_pretty(node[2], 1024)
    if kind == "abs":
        return f"|{typed_pretty(node[2])}|"
    if kind == "neg":
        text, prec = "-" + typed_pretty(node[2], 75), 75
    elif kind == "pow":
        text, prec = f"{typed_pretty(node[2], 1024)} ^ {node[3]}", 75
    else:
        prec = _PREC[kind]
        text = f"{typed_pretty(node[2], prec)} {_SYM[kind]} {typed_pretty(node[3], prec + 1)}"
    return f"({text})" if prec < parent else text


# -------------------------------------------------------------------------------- statements
@dataclass
class Statement:
    """A parsed ``theorem name binders : goal``; ``ctx`` maps variables to their type."""

    name: str
    ctx: dict[str, str]
    hyps: list[tuple[str, tuple]]
    goal: tuple
    variables: list[str] = field(default_factory=list)


_THEOREM = re.compile(r"^\s*(theorem|lemma|example)\s*([^\s(:{\[]*)", re.S)


def split_binders(text: str) -> tuple[list[str], str]:
    """Top-level ``(...)``/``{...}`` binder bodies and the goal text after the final ``:``."""
    binders, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "({[":
            close = {"(": ")", "{": "}", "[": "]"}[ch]
            depth, j = 0, i
            while j < n:
                if text[j] == ch:
                    depth += 1
                elif text[j] == close:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= n:
                raise OutOfFragment("unbalanced binder parentheses")
            if ch == "[":
                raise OutOfFragment("instance binders")
            binders.append(text[i + 1:j])
            i = j + 1
            continue
        if ch == ":":
            return binders, text[i + 1:].strip()
        raise OutOfFragment(f"binder syntax near {text[i:i + 20]!r}")
    raise OutOfFragment("statement without ':' before the goal")


def parse_statement(text: str) -> Statement:
    """Parse ``theorem name (x y : ℝ) (h₀ : P) : Q`` (with or without ``:= ...``)."""
    body = strip_comments(text)
    if not body.strip():
        raise OutOfFragment("no formal statement (commented out)")
    cut = _top_level_assign(body)
    if cut is not None:
        body = body[:cut]
    match = _THEOREM.match(body)
    if not match:
        raise OutOfFragment("not a theorem declaration")
    name = match.group(2) or "example"
    binders, goal_text = split_binders(body[match.end():])
    ctx: dict[str, str] = {}
    hyps: list[tuple[str, tuple]] = []
    variables: list[str] = []
    for binder in binders:
        if ":" not in binder:
            raise OutOfFragment(f"binder without type ({binder.strip()})")
        names_text, type_text = binder.split(":", 1)
        names, type_text = names_text.split(), type_text.strip()
        if type_text in TYPES:
            for var in names:
                _shadow(var, ctx, hyps, variables)
                ctx[var] = type_text
                variables.append(var)
            continue
        gap = known_gap(type_text)
        if re.fullmatch(r"[^\s]+\s*→\s*[ℕℤℚℝ]", type_text) or gap == "function variables":
            raise OutOfFragment("function variables")
        if len(names) != 1:
            raise OutOfFragment(f"binder type {type_text!r}")
        prop = elaborate_prop(parse_expr(type_text), ctx)  # the type sees the earlier binders
        _shadow(names[0], ctx, hyps, variables)
        hyps.append((names[0], prop))
    goal = elaborate_prop(parse_expr(goal_text), ctx)
    return Statement(name=name, ctx=ctx, hyps=hyps, goal=goal, variables=variables)


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def inaccessible_name(name: str, taken: set[str] | dict[str, str]) -> str:
    """Lean's display name for a shadowed binder: ``x✝``, then ``x✝¹``, ``x✝²``, ..."""
    fresh, k = f"{name}✝", 0
    while fresh in taken:
        k += 1
        fresh = f"{name}✝{str(k).translate(_SUPERSCRIPT)}"
    return fresh


def rename_var(node: tuple, old: str, new: str) -> tuple:
    """A typed term or proposition with the variable ``old`` renamed to ``new``."""
    if node[0] == "var" and len(node) == 3:
        return ("var", node[1], new) if node[2] == old else node
    return tuple(rename_var(c, old, new) if isinstance(c, tuple) else c for c in node)


def _shadow(name: str, ctx: dict[str, str], hyps: list[tuple[str, tuple]],
            variables: list[str]) -> None:
    """Make room for a new binder ``name`` (Lean 4 semantics): an earlier variable of that name
    becomes inaccessible (renamed to ``x✝`` everywhere it occurs so far), an earlier hypothesis of
    that name likewise; the new binder is then a fresh, unconstrained variable or hypothesis."""
    if name in ctx:
        fresh = inaccessible_name(name, set(ctx) | {n for n, _ in hyps})
        ctx[fresh] = ctx.pop(name)
        variables[variables.index(name)] = fresh
        hyps[:] = [(n, rename_var(p, name, fresh)) for n, p in hyps]
    taken = set(ctx) | {n for n, _ in hyps}
    for i, (n, p) in enumerate(hyps):
        if n == name:
            hyps[i] = (inaccessible_name(name, taken), p)
            taken.add(hyps[i][0])


def strip_comments(text: str) -> str:
    """Remove ``-- ...`` line comments and ``/- ... -/`` blocks (doc comments included)."""
    text = re.sub(r"/-.*?-/", "", text, flags=re.S)
    return re.sub(r"--[^\n]*", "", text)


def _top_level_assign(text: str) -> int | None:
    """Index of the last ``:=`` (the proof starts there)."""
    idx = text.rfind(":=")
    return idx if idx >= 0 else None


def statement_roundtrip(text: str) -> str:
    """Re-print a statement from its parse (binders and goal), for the round-trip property."""
    text = strip_comments(text)
    cut = _top_level_assign(text)
    body = text[:cut] if cut is not None else text
    match = _THEOREM.match(body)
    if not match:
        raise OutOfFragment("not a theorem declaration")
    binders, goal_text = split_binders(body[match.end():])
    parts = []
    for binder in binders:
        names_text, type_text = binder.split(":", 1)
        type_text = type_text.strip()
        rendered = type_text if type_text in TYPES else pretty(parse_expr(type_text))
        parts.append(f"({names_text.strip()} : {rendered})")
    return f"theorem {match.group(2)} {' '.join(parts)} : {pretty(parse_expr(goal_text))}"
