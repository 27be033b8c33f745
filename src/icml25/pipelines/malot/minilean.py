"""MiniLean: a sound checker for an arithmetic fragment of Lean 4 (docs/papers/malot.md).

No Lean 4 toolchain can be installed on the machines this project targets, so this module checks
tactic proofs of statements in the fragment of :mod:`lean_syntax` with Lean-like semantics and
Lean-like error messages. Soundness is the invariant: every tactic only closes a goal when an
exact procedure (z3 over linear real or integer arithmetic, exact rational evaluation, polynomial
normal forms) proves it. Completeness relative to Lean is not claimed, so its accuracies are
reported as ``acc_minilean``, never compared with the paper's Lean numbers.

Tactics: ``intro``, ``constructor``, ``refine ⟨?_, ?_⟩``, ``exact h``, ``assumption``, ``have h :
P := by ...``, ``obtain ⟨h1, h2⟩ := h``, ``cases' h with h1 h2``, ``rw [h, ← h'] (at h)``,
``norm_num``/``simp`` ``[...]`` ``(at h ⊢)``, ``ring``, ``ring_nf``, ``field_simp``, ``linarith
[...]``, ``nlinarith [...]``, ``positivity``, ``omega``, ``decide``, ``rfl``, ``exfalso``,
``left``/``right``, ``sorry``; combinators ``<;>``, ``·`` bullets, ``all_goals``, ``try``,
``first | a | b``, ``repeat'``. The verifier contract is :func:`verify`.
"""

from __future__ import annotations

import logging
import re
import textwrap
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sympy

from icml25.pipelines.malot.arith import (
    MAX_TERMS,
    Budget,
    Deadline,
    Fact,
    NotClosed,
    NotLinearInt,
    Poly,
    PolyContext,
    cmp_facts,
    decide_prop,
    evaluate,
    linear_unsat,
    negated_cmp_facts,
    omega_unsat,
    product_fact,
    strengthen,
    to_poly,
    z3_int_prop,
)
from icml25.pipelines.malot.lean_syntax import (
    RANK,
    OutOfFragment,
    Statement,
    elaborate_prop,
    inaccessible_name,
    parse_expr,
    parse_statement,
    rename_var,
    typed_pretty,
)

logger = logging.getLogger(__name__)

HEADER = ("import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n"
          "open BigOperators Real Nat Topology Rat\n")

#: Lean tactics that exist but MiniLean does not model: a distinct "unsupported" verdict.
_LEAN_TACTICS = {"apply", "calc", "induction", "interval_cases", "nlinarith!", "polyrith",
                 "norm_cast", "push_cast", "simp_all", "aesop", "tauto", "use", "specialize",
                 "by_contra", "by_cases", "contrapose", "exact_mod_cast", "gcongr", "bound",
                 "linear_combination", "unfold", "split", "rintro", "ext", "congr", "trivial",
                 "field_simp!", "norm_num1", "simp_arith", "change", "show", "set", "let",
                 "refine'", "exists", "existsi", "conv", "zify", "qify", "lift", "push_neg",
                 "cancel_denoms", "symm", "subst", "rcases", "abel", "group", "noncomm_ring"}


#: Error categories that no combinator recovers from: in Lean a malformed proof (a parse error,
#: an unknown tactic) fails as a whole, and a construct MiniLean does not model must not be
#: treated as a tactic that merely failed (in Lean it might have changed the goals).
UNRECOVERABLE = frozenset({"syntax", "unknown tactic", "unsupported"})


class TacticError(Exception):
    """A tactic failed at ``line`` with a Lean-like message."""

    def __init__(self, line: int, message: str, category: str) -> None:
        super().__init__(message)
        self.line, self.message, self.category = line, message, category

    @property
    def recoverable(self) -> bool:
        """Whether ``try``/``first``/``repeat`` may catch it (an elaboration-time failure)."""
        return self.category not in UNRECOVERABLE


@dataclass
class Goal:
    ctx: dict[str, str]
    hyps: list[tuple[str, tuple]]
    target: tuple
    order: list[str] = field(default_factory=list)

    def with_target(self, target: tuple) -> Goal:
        return Goal(dict(self.ctx), list(self.hyps), target, list(self.order))

    def with_hyp(self, name: str, prop: tuple) -> Goal:
        goal = self
        if name in self.ctx:  # a hypothesis named like a variable shadows it (Lean 4)
            fresh = inaccessible_name(name, set(self.ctx) | {n for n, _ in self.hyps})
            ctx = {(fresh if v == name else v): t for v, t in self.ctx.items()}
            goal = Goal(ctx, [(n, rename_var(p, name, fresh)) for n, p in self.hyps],
                        rename_var(self.target, name, fresh),
                        [fresh if v == name else v for v in self.order])
            prop = rename_var(prop, name, fresh)
        hyps = [(n, p) for n, p in goal.hyps if n != name] + [(name, prop)]
        return Goal(dict(goal.ctx), hyps, goal.target, list(goal.order))

    def hyp(self, name: str) -> tuple | None:
        for n, p in reversed(self.hyps):
            if n == name:
                return p
        return None

    def render(self) -> str:
        lines, group, group_type = [], [], None
        for var in self.order:
            if self.ctx[var] != group_type and group:
                lines.append(f"{' '.join(group)} : {group_type}")
                group = []
            group.append(var)
            group_type = self.ctx[var]
        if group:
            lines.append(f"{' '.join(group)} : {group_type}")
        lines += [f"{n} : {typed_pretty(p)}" for n, p in self.hyps]
        lines.append(f"⊢ {typed_pretty(self.target)}")
        return "\n".join(lines)


@dataclass
class Settings:
    z3_timeout_s: float = 20.0       # wall-clock safety net per z3 call (reported if hit)
    proof_timeout_s: float = 20.0    # wall-clock safety net per proof (reported if hit)
    z3_rlimit: int = 5_000_000       # deterministic z3 resource units per call
    proof_rlimit: int = 50_000_000   # deterministic z3 resource units per proof
    max_steps: int = 20_000          # deterministic tactic steps per proof
    max_chars: int = 20_000
    max_products: int = 400


@dataclass
class Node:
    line: int
    text: str
    children: list[Node]
    col: int = 0


class _State:
    def __init__(self, settings: Settings, budget: Budget) -> None:
        self.settings = settings
        self.budget = budget
        self.errors: list[dict[str, Any]] = []
        self.sorries: list[dict[str, Any]] = []

    def timeout(self) -> float:
        self.budget.check()
        return min(self.settings.z3_timeout_s, max(self.budget.left(), 0.01))

    def z3(self) -> dict[str, Any]:
        """The limits of one z3 call: wall-clock safety net, deterministic rlimit, budget."""
        return {"timeout_s": self.timeout(), "rlimit": self.settings.z3_rlimit,
                "budget": self.budget}


# ---------------------------------------------------------------------- tactic block parsing
def _syntax(line: int, message: str) -> TacticError:
    return TacticError(line, message, "syntax")


def _depth(text: str) -> int:
    return sum(text.count(c) for c in "([{⟨") - sum(text.count(c) for c in ")]}⟩")


_HAVE_BY = re.compile(r"^have\b[^\n]*?:=\s*by\b")
_BULLET = re.compile(r"^[·.](?=\s|$)")


def parse_blocks(lines: list[tuple[int, str]]) -> list[Node]:
    """Indentation-structured tactic nodes from ``(line number, raw text)`` pairs, with Lean 4's
    layout rules (``sepByIndent``): the tactics of a block stand at one column; a tactic block is
    opened only by ``·`` and by ``have … := by`` (its tactics at the column of the first one,
    on the same line or below); a line indented under any other tactic, a block whose lines do
    not share one column, a line dedented out of the proof and a tab all raise a syntax
    :class:`TacticError`. A line that continues an open bracket or a trailing ``<;>`` is joined
    to the line it continues."""
    items: list[tuple[int, int, str]] = []
    for number, raw in lines:
        text = re.sub(r"--.*$", "", raw).rstrip()
        if "\t" in text:
            raise _syntax(number, "tabs are not allowed; please configure your editor to expand "
                                  "them")
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip())
        if items and indent > items[-1][1] and (_depth(items[-1][2]) > 0 or
                                                items[-1][2].endswith("<;>")):
            prev = items[-1]
            items[-1] = (prev[0], prev[1], f"{prev[2]} {text.strip()}")
            continue
        items.append((number, indent, text.strip()))
    # a bullet or an inline `have … := by tac` opens a block at the column of its first tactic
    split: list[tuple[int, int, str]] = []
    for number, indent, text in items:
        while True:
            bullet = _BULLET.match(text)
            have = _HAVE_BY.match(text) if not bullet else None
            cut = bullet.end() if bullet else have.end() if have else None
            rest = text[cut:] if cut is not None else ""
            if cut is None or not rest.strip():
                split.append((number, indent, text))
                break
            split.append((number, indent, text[:cut]))
            indent += cut + len(rest) - len(rest.lstrip())
            text = rest.strip()
    items = split

    def opens_block(text: str) -> bool:
        return bool(_BULLET.fullmatch(text) or _HAVE_BY.match(text))

    def block(i: int, indent: int) -> tuple[list[Node], int]:
        nodes: list[Node] = []
        child_col: int | None = None
        while i < len(items) and items[i][1] >= indent:
            number, ind, text = items[i]
            if ind > indent:
                if not nodes or not opens_block(nodes[-1].text):
                    above = nodes[-1].text.split()[0] if nodes else "the proof"
                    raise _syntax(number, f"unexpected token at this indentation; expected "
                                          f"command ('{above}' takes no indented tactic block)")
                if nodes[-1].children and ind != child_col:
                    raise _syntax(number, "unexpected token at this indentation; expected "
                                          "command (the lines of a tactic block must start at "
                                          "one column)")
                child_col = ind
                children, i = block(i, ind)
                nodes[-1].children.extend(children)
                continue
            nodes.append(Node(number, text, [], ind))
            child_col = None
            i += 1
        return nodes, i

    if not items:
        return []
    nodes, used = block(0, items[0][1])
    if used < len(items):
        raise _syntax(items[used][0], "unexpected token at this indentation; expected command "
                                      "(the line is dedented out of the proof's tactic block)")
    return nodes


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "([{⟨":
            depth += 1
        elif ch in ")]}⟩":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i += len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


# ----------------------------------------------------------------------------- the checker
class Checker:
    """Runs a tactic proof against a statement and records errors like Lean's elaborator."""

    def __init__(self, statement: Statement, settings: Settings, budget: Budget) -> None:
        self.statement = statement
        self.state = _State(settings, budget)

    # -- driver
    def run(self, nodes: list[Node], decl_line: int, by_line: int) -> None:
        goal = Goal(dict(self.statement.ctx), list(self.statement.hyps), self.statement.goal,
                    list(self.statement.variables))
        try:
            goals = self.run_seq(nodes, [goal])
        except TacticError as err:
            self.error(err)
            return
        if goals:
            self.state.errors.append({
                "line": by_line, "col": 0, "category": "unsolved goals",
                "message": "unsolved goals\n" + "\n\n".join(g.render() for g in goals)})

    def error(self, err: TacticError) -> None:
        self.state.errors.append({"line": err.line, "col": 0, "message": err.message,
                                  "category": err.category})

    def run_seq(self, nodes: list[Node], goals: list[Goal]) -> list[Goal]:
        for node in nodes:
            self.state.budget.check()
            if node.text.startswith("·") or node.text.startswith("."):
                if not goals:
                    raise TacticError(node.line, "no goals to be proved", "no goals")
                rest = node.text[1:].strip()
                body = ([Node(node.line, rest, [])] if rest else []) + node.children
                try:
                    left = self.run_seq(body, [goals[0]])
                    if left:
                        raise TacticError(node.line, "unsolved goals\n" + "\n\n".join(
                            g.render() for g in left), "unsolved goals")
                except TacticError as err:  # a bullet's failure is reported, its goal admitted
                    self.error(err)
                goals = goals[1:]
                continue
            goals = self.run_line(node, goals)
        return goals

    def run_line(self, node: Node, goals: list[Goal]) -> list[Goal]:
        parts = _split_top(node.text, "<;>")
        if any(not part for part in parts):
            raise _syntax(node.line, "unexpected end of input; expected tactic after '<;>'")
        goals = self.run_tactic(parts[0], node, goals)
        for part in parts[1:]:
            raise_if = part
            new: list[Goal] = []
            for goal in goals:
                new += self.run_tactic(raise_if, node, [goal])
            goals = new
        return goals

    # -- one tactic on the main goal
    def run_tactic(self, text: str, node: Node, goals: list[Goal]) -> list[Goal]:
        self.state.budget.check()
        line = node.line
        text = text.strip()
        if not text:
            raise _syntax(line, "unexpected end of input; expected tactic")
        head = text.split()[0]
        if head in ("all_goals", "any_goals", "try", "repeat'", "repeat") and \
                not text[len(head):].strip():
            raise _syntax(line, f"unexpected end of input; expected a tactic after '{head}' "
                                f"(MiniLean reads its tactic on the same line)")
        if head in ("all_goals", "any_goals"):
            inner = text[len(head):].strip()
            out: list[Goal] = []
            for goal in goals:
                out += self.run_tactic(inner, node, [goal])
            return out
        if head == "try":
            try:
                return self.run_tactic(text[3:].strip(), node, goals)
            except TacticError as err:
                if not err.recoverable:
                    raise
                return goals
        if head == "first":
            arg = text[5:].strip()
            if not arg.startswith("|"):
                raise _syntax(line, "unexpected token; expected '|' after 'first'")
            alternatives = _split_top(arg[1:], "|")
            if any(not a for a in alternatives):
                raise _syntax(line, "unexpected token '|'; expected tactic (an empty "
                                    "alternative of 'first')")
            last: TacticError | None = None
            for alt in alternatives:
                try:
                    return self.run_tactic(alt, node, goals)
                except TacticError as err:
                    if not err.recoverable:
                        raise
                    last = err
            assert last is not None
            raise last
        if head in ("repeat'", "repeat"):
            inner = text[len(head):].strip()
            for _ in range(32):
                try:
                    new = self.run_tactic(inner, node, goals)
                except TacticError as err:
                    if not err.recoverable:
                        raise
                    break
                if len(new) == len(goals) and all(a.target == b.target for a, b in
                                                  zip(new, goals, strict=True)):
                    break
                goals = new
            return goals
        if text.startswith("(") and text.endswith(")"):
            return self.run_line(Node(line, text[1:-1], []), goals)
        if not goals:
            raise TacticError(line, "no goals to be proved", "no goals")
        goal, rest = goals[0], goals[1:]
        return self.tactic(head, text, node, goal) + rest

    def tactic(self, head: str, text: str, node: Node, goal: Goal) -> list[Goal]:
        line = node.line
        arg = text[len(head):].strip()
        if head in ("sorry", "admit"):
            self.state.sorries.append({"line": line, "col": 0, "goal": goal.render()})
            return []
        if head == "have":
            return self.have(arg, node, goal)
        handler = {
            "linarith": self.linarith, "nlinarith": self.nlinarith, "positivity": self.positivity,
            "norm_num": self.norm_num, "simp": self.norm_num, "ring": self.ring,
            "ring_nf": self.ring_nf, "omega": self.omega, "decide": self.decide,
            "rfl": self.rfl, "constructor": self.constructor, "intro": self.intro,
            "intros": self.intro, "exact": self.exact, "assumption": self.assumption,
            "field_simp": self.field_simp, "obtain": self.obtain, "cases'": self.cases,
            "rw": self.rw, "rewrite": self.rw, "exfalso": self.exfalso, "left": self.left_right,
            "right": self.left_right, "refine": self.refine,
        }.get(head)
        if handler is None:
            if head in _LEAN_TACTICS:
                raise TacticError(line, f"unsupported in MiniLean: tactic '{head}'", "unsupported")
            raise TacticError(line, f"unknown tactic '{head}'", "unknown tactic")
        return handler(head, arg, line, goal)

    # ------------------------------------------------------------------ structural tactics
    def have(self, arg: str, node: Node, goal: Goal) -> list[Goal]:
        match = re.match(r"^([^\s:]+)?\s*:\s*(.+?)\s*:=\s*(by\b(.*))?$", arg, re.S)
        if not match:
            match_open = re.match(r"^([^\s:]+)?\s*:\s*(.+?)\s*:=\s*by$", arg)
            if not match_open:
                raise TacticError(node.line, "unexpected token; expected ':= by'", "syntax")
        name = match.group(1) or "this"
        prop = self.prop(match.group(2), goal, node.line)
        inline = (match.group(4) or "").strip()
        body = ([Node(node.line, inline, [])] if inline else []) + node.children
        if not match.group(3):
            raise TacticError(node.line, "unsupported in MiniLean: term-mode have", "unsupported")
        try:  # the nested `by` block is elaborated on its own: errors are logged, h admitted
            left = self.run_seq(body, [goal.with_target(prop)])
            if left:
                raise TacticError(node.line, "unsolved goals\n" + "\n\n".join(
                    g.render() for g in left), "unsolved goals")
        except TacticError as err:
            self.error(err)
        return [goal.with_hyp(name, prop)]

    def prop(self, text: str, goal: Goal, line: int) -> tuple:
        try:
            return elaborate_prop(parse_expr(text), goal.ctx)
        except OutOfFragment as err:
            raise TacticError(line, str(err), "unsupported") from None

    def constructor(self, head, arg, line, goal):
        t = goal.target
        if t[0] == "and":
            return [goal.with_target(t[1]), goal.with_target(t[2])]
        if t[0] == "iff":
            return [goal.with_target(("imp", t[1], t[2])), goal.with_target(("imp", t[2], t[1]))]
        raise TacticError(line, f"constructor failed, target is not an inductive datatype\n"
                                f"{goal.render()}", "constructor")

    def refine(self, head, arg, line, goal):
        if re.fullmatch(r"⟨\s*\?_\s*,\s*\?_\s*⟩", arg):
            return self.constructor(head, arg, line, goal)
        raise TacticError(line, "unsupported in MiniLean: refine with terms", "unsupported")

    def intro(self, head, arg, line, goal):
        names = arg.split() or ["a✝"]
        for name in names:
            t = goal.target
            if t[0] == "imp":
                goal = goal.with_hyp(name, t[1]).with_target(t[2])
            elif t[0] == "not":
                goal = goal.with_hyp(name, t[1]).with_target(("false",))
            else:
                raise TacticError(line, f"no additional binders or let-bindings in the goal to "
                                        f"introduce\n{goal.render()}", "intro")
        return [goal]

    def exfalso(self, head, arg, line, goal):
        return [goal.with_target(("false",))]

    def left_right(self, head, arg, line, goal):
        if goal.target[0] != "or":
            raise TacticError(line, f"{head} failed: target is not an Or", "constructor")
        return [goal.with_target(goal.target[1 if head == "left" else 2])]

    def _hyp_term(self, text: str, goal: Goal, line: int) -> tuple:
        text = text.strip()
        match = re.fullmatch(r"([^\s.]+)((?:\.[12])*)", text)
        if not match:
            raise TacticError(line, f"unsupported in MiniLean: term '{text}'", "unsupported")
        prop = goal.hyp(match.group(1))
        if prop is None:
            raise TacticError(line, f"unknown identifier '{match.group(1)}'", "unknown identifier")
        for proj in re.findall(r"\.([12])", match.group(2)):
            if prop[0] not in ("and", "iff"):
                raise TacticError(line, f"invalid projection, structure expected\n  "
                                        f"{text}", "type mismatch")
            prop = prop[int(proj)] if prop[0] == "and" else \
                ("imp", prop[1], prop[2]) if proj == "1" else ("imp", prop[2], prop[1])
        return prop

    def exact(self, head, arg, line, goal):
        if arg.startswith("⟨"):
            raise TacticError(line, "unsupported in MiniLean: anonymous constructor terms",
                              "unsupported")
        prop = self._hyp_term(arg, goal, line)
        if prop != goal.target:
            raise TacticError(line, f"type mismatch\n  {arg}\nhas type\n  {typed_pretty(prop)} "
                                    f": Prop\nbut is expected to have type\n  "
                                    f"{typed_pretty(goal.target)} : Prop", "type mismatch")
        return []

    def assumption(self, head, arg, line, goal):
        if any(p == goal.target for _, p in goal.hyps):
            return []
        raise TacticError(line, "assumption failed", "assumption")

    def obtain(self, head, arg, line, goal):
        match = re.fullmatch(r"⟨\s*([^,⟩]+?)\s*,\s*([^⟩]+?)\s*⟩\s*:=\s*(\S+)", arg)
        if not match:
            raise TacticError(line, "unsupported in MiniLean: obtain pattern", "unsupported")
        return self._destruct(match.group(3), [match.group(1), match.group(2)], line, goal)

    def cases(self, head, arg, line, goal):
        match = re.fullmatch(r"(\S+)\s+with\s+(\S+)\s+(\S+)", arg)
        if not match:
            raise TacticError(line, "unsupported in MiniLean: cases' pattern", "unsupported")
        return self._destruct(match.group(1), [match.group(2), match.group(3)], line, goal)

    def _destruct(self, source: str, names: list[str], line: int, goal: Goal) -> list[Goal]:
        prop = self._hyp_term(source, goal, line)
        names = [n.strip() for n in names]
        inner = names[1]
        if prop[0] == "and":
            if inner.startswith("⟨") or "," in inner:
                raise TacticError(line, "unsupported in MiniLean: nested patterns", "unsupported")
            return [goal.with_hyp(names[0], prop[1]).with_hyp(inner, prop[2])]
        if prop[0] == "or":
            return [goal.with_hyp(names[0], prop[1]), goal.with_hyp(inner, prop[2])]
        raise TacticError(line, f"cases failed: {source} is not a conjunction or disjunction",
                          "type mismatch")

    # ------------------------------------------------------------------------ rewriting
    def _simp_args(self, arg: str) -> tuple[list[str], list[str] | None]:
        lemmas: list[str] = []
        match = re.match(r"^(only\s*)?\[(.*?)\]\s*", arg)
        if match:
            lemmas = [x.strip() for x in _split_top(match.group(2), ",") if x.strip()]
            arg = arg[match.end():]
        locs = None
        at = re.match(r"^at\s+(.+)$", arg.strip())
        if at:
            locs = at.group(1).split()
        return lemmas, locs

    def _rewrite_rules(self, lemmas: list[str], goal: Goal, line: int,
                       allow_reverse: bool = False) -> list[tuple[tuple, tuple]]:
        rules = []
        for lemma in lemmas:
            reverse = lemma.startswith("←")
            name = lemma.lstrip("←").strip()
            if goal.hyp(re.sub(r"(\.[12])+$", "", name)) is None:
                if re.fullmatch(r"[A-Za-z_][\w.']*", name) and not re.match(r"h", name):
                    continue  # a Mathlib simp lemma: MiniLean's normaliser covers arithmetic ones
                raise TacticError(line, f"unknown identifier '{name}'", "unknown identifier")
            prop = self._hyp_term(name, goal, line)
            if prop[0] == "cmp" and prop[1] == "=":
                rules.append((prop[3], prop[2]) if reverse else (prop[2], prop[3]))
            elif prop[0] != "cmp" or not allow_reverse:
                rules.append((prop, ("true",)))
        return rules

    def rw(self, head, arg, line, goal):
        lemmas, locs = self._simp_args(arg)
        rules = self._rewrite_rules(lemmas, goal, line)
        for lhs, rhs in rules:
            goal = self._apply_rewrite(goal, lhs, rhs, locs, line, must_match=True)
        if goal.target[0] == "cmp" and goal.target[1] in ("=", "≤", "≥", "↔") and \
                goal.target[2] == goal.target[3]:
            return []
        if goal.target[0] == "true":
            return []
        return [goal]

    def _apply_rewrite(self, goal: Goal, lhs: tuple, rhs: tuple, locs: list[str] | None,
                       line: int, must_match: bool) -> Goal:
        targets = locs or ["⊢"]
        hit = False
        for loc in targets:
            if loc == "⊢":
                new = _replace(goal.target, lhs, rhs)
                hit |= new != goal.target
                goal = goal.with_target(new)
            else:
                prop = goal.hyp(loc)
                if prop is None:
                    raise TacticError(line, f"unknown identifier '{loc}'", "unknown identifier")
                new = _replace(prop, lhs, rhs)
                hit |= new != prop
                goal = goal.with_hyp(loc, new)
        if must_match and not hit:
            raise TacticError(line, "tactic 'rewrite' failed, did not find instance of the "
                                    f"pattern in the target expression\n  {typed_pretty(lhs)}\n"
                                    f"{goal.render()}", "rewrite")
        return goal

    def norm_num(self, head, arg, line, goal):
        lemmas, locs = self._simp_args(arg)
        rules = self._rewrite_rules(lemmas, goal, line)
        if locs == ["*"]:  # every hypothesis, then the goal
            locs = [n for n, _ in goal.hyps] + ["⊢"]
        targets = locs or ["⊢"]
        progress = False
        for loc in targets:
            if loc == "⊢":
                new = _normalise(_rewrite_all(goal.target, rules), self.state)
                progress |= new != goal.target
                goal = goal.with_target(new)
                if new[0] == "true":
                    return []
            else:
                prop = goal.hyp(loc)
                if prop is None:
                    raise TacticError(line, f"unknown identifier '{loc}'", "unknown identifier")
                own = [x for x in lemmas if x.lstrip("←").strip() != loc]  # not h by itself
                new = _normalise(_rewrite_all(prop, self._rewrite_rules(own, goal, line)),
                                 self.state)
                progress |= new != prop
                if new[0] == "false":
                    return []  # a contradictory hypothesis closes the goal
                goal = goal.with_hyp(loc, new)
        if goal.target[0] == "false" and locs is None:
            raise TacticError(line, f"{head} failed to prove the goal: it normalises to False\n"
                                    f"{goal.render()}", "norm_num")
        if not progress:
            raise TacticError(line, "simp made no progress", "norm_num")
        return [goal]

    # ------------------------------------------------------------------ arithmetic tactics
    def _facts(self, goal: Goal, hints: list[tuple], pc: PolyContext,
               with_goal: bool) -> list[list[Fact]]:
        """Hypotheses (∧ split, ¬ flipped), hints and the negated goal as ``p R 0`` facts.

        Returns one fact list per linarith call (an equality goal needs two)."""
        base: list[Fact] = []
        for prop in [p for _, p in goal.hyps] + hints:
            base += _prop_facts(prop, pc)
        target = goal.target
        if not with_goal or target[0] != "cmp" or target[1] in ("≠", "∣"):
            return [base]  # not a comparison: linarith looks for a contradiction (exfalso)
        lhs, rhs = to_poly(target[2], pc), to_poly(target[3], pc)
        integral = target[2][1] in ("ℕ", "ℤ")
        if target[1] == "=":
            return [[*base, strengthen((lhs - rhs, "<"), integral)],
                    [*base, strengthen((rhs - lhs, "<"), integral)]]
        neg = negated_cmp_facts(target[1], lhs, rhs) or []
        return [base + [strengthen(f, integral) for f in neg]]

    def _hints(self, arg: str, goal: Goal, line: int) -> list[tuple]:
        match = re.match(r"^\s*\[(.*)\]\s*$", arg, re.S)
        if not arg.strip():
            return []
        if not match:
            raise TacticError(line, f"unexpected token '{arg.split()[0]}'; expected '['",
                              "syntax")
        return [self._hint(h, goal, line) for h in _split_top(match.group(1), ",") if h]

    def _hint(self, text: str, goal: Goal, line: int) -> tuple:
        match = re.fullmatch(r"([A-Za-z_.']+)(?:\s+(.*))?", text.strip(), re.S)
        if match and match.group(1) in _LEMMAS:
            lemma, rest = match.group(1), (match.group(2) or "").strip()
            return _LEMMAS[lemma](self, rest, goal, line)
        return self._hyp_term(text, goal, line)

    def linarith(self, head, arg, line, goal, hints=None, extra=None):
        hints = self._hints(arg, goal, line) if hints is None else hints
        pc = PolyContext()
        for facts in self._facts(goal, hints, pc, with_goal=True):
            facts = [strengthen(f, _integral(f, pc)) for f in facts] + list(extra or [])
            if not linear_unsat(facts, pc.nat_atoms, **self.state.z3()):
                raise TacticError(line, "linarith failed to find a contradiction\ncase a\n"
                                  + _negated_state(goal) + "\n⊢ False failed", "linarith")
        return []

    def nlinarith(self, head, arg, line, goal):
        hints = self._hints(arg, goal, line)
        pc = PolyContext()
        for facts in self._facts(goal, hints, pc, with_goal=True):
            squares = _square_facts(facts)
            products = []
            pool = facts + squares
            for i in range(len(pool)):
                for j in range(i, len(pool)):
                    products.append(product_fact(pool[i], pool[j]))
                    if len(products) > self.state.settings.max_products:
                        break
                self.state.budget.check()
            facts = [strengthen(f, _integral(f, pc)) for f in pool + products]
            if not linear_unsat(facts, pc.nat_atoms, **self.state.z3()):
                raise TacticError(line, "linarith failed to find a contradiction\ncase a\n"
                                  + _negated_state(goal) + "\n⊢ False failed", "linarith")
        return []

    def positivity(self, head, arg, line, goal):
        t = goal.target
        ok = False
        if t[0] == "cmp":
            zero_left = t[2][0] == "num" and t[2][2] == 0
            zero_right = t[3][0] == "num" and t[3][2] == 0
            if t[1] in ("<", "≤") and zero_left:
                sign = _sign(t[3], goal)
                ok = sign == "pos" or (t[1] == "≤" and sign == "nonneg")
            elif t[1] in (">", "≥") and zero_right:
                sign = _sign(t[2], goal)
                ok = sign == "pos" or (t[1] == "≥" and sign == "nonneg")
            elif t[1] == "≠" and zero_right:
                ok = _sign(t[2], goal) == "pos"
        if not ok:
            raise TacticError(line, "failed to prove positivity: the goal is not of the form "
                                    f"0 ≤ e, 0 < e or e ≠ 0 with e syntactically positive\n"
                                    f"{goal.render()}", "positivity")
        return []

    def ring(self, head, arg, line, goal):
        t = goal.target
        if t[0] != "cmp" or t[1] != "=":
            raise TacticError(line, "ring failed: not an equality\n" + goal.render(), "ring")
        to_poly(t[2], PolyContext()) - to_poly(t[3], PolyContext())  # size guard (Deadline)
        if _sympy_zero(t[2], t[3]):
            return []
        pc = PolyContext()
        residual = to_poly(t[2], pc) - to_poly(t[3], pc)
        raise TacticError(line, "ring failed, ring_nf subsidiary goal:\n"
                                f"⊢ {_poly_text(residual)} = 0\n{goal.render()}", "ring")

    def ring_nf(self, head, arg, line, goal):
        t = goal.target
        if t[0] == "cmp":
            to_poly(t[2], PolyContext()) - to_poly(t[3], PolyContext())  # size guard (Deadline)
        if t[0] == "cmp" and t[1] == "=" and _sympy_zero(t[2], t[3]):
            return []
        if t[0] == "cmp" and t[1] in ("=", "≠", "<", "≤", ">", "≥"):
            pc = PolyContext()
            diff = to_poly(t[2], pc) - to_poly(t[3], pc)
            if diff.is_const() and decide_prop(("cmp", t[1], ("num", "ℝ", diff.const_value()),
                                                ("num", "ℝ", Fraction(0)))):
                return []
            # Lean leaves the normalised (equivalent) goal; MiniLean keeps it as written
            return [goal]
        raise TacticError(line, "ring_nf failed", "ring")

    def field_simp(self, head, arg, line, goal):
        t = goal.target
        if t[0] != "cmp" or t[1] != "=" or t[2][1] not in ("ℚ", "ℝ"):
            raise TacticError(line, "simp made no progress", "field_simp")
        divisors = _divisors(t)
        if not divisors:
            raise TacticError(line, "simp made no progress", "field_simp")
        missing = [d for d in divisors if not _nonzero_hyp(d, goal)]
        if missing:
            raise TacticError(line, "simp made no progress", "field_simp")
        lhs_n, lhs_d = _rational(t[2])
        rhs_n, rhs_d = _rational(t[3])
        if _sympy_expr(lhs_n) * _sympy_expr(rhs_d) - _sympy_expr(rhs_n) * _sympy_expr(lhs_d) \
                == 0 or sympy.expand(_sympy_expr(lhs_n) * _sympy_expr(rhs_d)
                                     - _sympy_expr(rhs_n) * _sympy_expr(lhs_d)) == 0:
            return []
        cross = ("cmp", "=", ("mul", t[2][1], lhs_n, rhs_d), ("mul", t[2][1], rhs_n, lhs_d))
        return [goal.with_target(cross)]

    def omega(self, head, arg, line, goal):
        hyps = []
        for _, prop in goal.hyps:
            hyps.append(prop)
        try:
            z3_int_prop(goal.target, {}, [])
        except NotLinearInt as err:
            raise TacticError(line, f"omega could not prove the goal:\n{err}\n{goal.render()}",
                              "omega") from None
        if not omega_unsat(hyps, goal.target, **self.state.z3()):
            raise TacticError(line, "omega could not prove the goal:\na possible counterexample "
                                    f"may satisfy the constraints\n{goal.render()}", "omega")
        return []

    def decide(self, head, arg, line, goal):
        if _has_field_type(goal.target):
            raise TacticError(line, "failed to synthesize\n  Decidable "
                                    f"({typed_pretty(goal.target)})", "decide")
        try:
            value = decide_prop(goal.target)
        except NotClosed:
            raise TacticError(line, "failed to synthesize Decidable: the proposition has free "
                                    "variables", "decide") from None
        if not value:
            raise TacticError(line, "decide failed: the proposition\n  "
                                    f"{typed_pretty(goal.target)}\nis false", "decide")
        return []

    def rfl(self, head, arg, line, goal):
        t = goal.target
        if t[0] == "cmp" and t[1] in ("=", "≤", "≥") and t[2] == t[3]:
            return []
        if t[0] == "cmp" and t[1] == "=" and t[2][1] in ("ℕ", "ℤ"):
            try:
                if evaluate(t[2]) == evaluate(t[3]):
                    return []
            except NotClosed:
                pass
        raise TacticError(line, "The rfl tactic failed.\n" + goal.render(), "rfl")


# ------------------------------------------------------------------------------- helpers
def _lemma_sq_nonneg(checker: Checker, rest: str, goal: Goal, line: int) -> tuple:
    term = checker_term(rest, goal, line)
    zero = ("num", term[1], Fraction(0))
    return ("cmp", "≤", zero, ("pow", term[1], term, 2))


def _lemma_mul_self(checker, rest, goal, line):
    term = checker_term(rest, goal, line)
    return ("cmp", "≤", ("num", term[1], Fraction(0)), ("mul", term[1], term, term))


def _lemma_abs_nonneg(checker, rest, goal, line):
    term = checker_term(rest, goal, line)
    if term[1] == "ℕ":
        raise TacticError(line, "unsupported in MiniLean: |.| on ℕ", "unsupported")
    return ("cmp", "≤", ("num", term[1], Fraction(0)), ("abs", term[1], term))


def _lemma_sq_abs(checker, rest, goal, line):
    term = checker_term(rest, goal, line)
    if term[1] == "ℕ":
        raise TacticError(line, "unsupported in MiniLean: |.| on ℕ", "unsupported")
    return ("cmp", "=", ("pow", term[1], ("abs", term[1], term), 2), ("pow", term[1], term, 2))


def _hyp_args(checker: Checker, rest: str, goal: Goal, line: int, count: int) -> list[tuple]:
    args = [a for a in re.split(r"\s+", rest.strip()) if a]
    if len(args) != count:
        raise TacticError(line, f"function expected: lemma needs {count} hypothesis arguments",
                          "type mismatch")
    props = [checker._hyp_term(a.strip("()"), goal, line) for a in args]
    for prop in props:
        if prop[0] != "cmp":
            raise TacticError(line, "type mismatch: hypothesis is not a comparison",
                              "type mismatch")
    return props


def _zero_side(prop: tuple) -> tuple[str, tuple] | None:
    """``0 < t``/``t > 0`` as ("pos", t), ``0 ≤ t``/``t ≥ 0`` as ("nonneg", t),
    ``t < 0``/``0 > t`` as ("neg", t)."""
    op, a, b = prop[1], prop[2], prop[3]
    zero_a = a[0] == "num" and a[2] == 0
    zero_b = b[0] == "num" and b[2] == 0
    if (op == "<" and zero_a) or (op == ">" and zero_b):
        return ("pos", b if zero_a else a)
    if (op == "≤" and zero_a) or (op == "≥" and zero_b):
        return ("nonneg", b if zero_a else a)
    if (op == "<" and zero_b) or (op == ">" and zero_a):
        return ("neg", a if zero_b else b)
    return None


def _lemma_product(kind_in: str, kind_out: str):
    def lemma(checker, rest, goal, line):
        p, q = _hyp_args(checker, rest, goal, line, 2)
        sp, sq = _zero_side(p), _zero_side(q)
        if not sp or not sq or sp[0] != kind_in or sq[0] != kind_in or sp[1][1] != sq[1][1]:
            raise TacticError(line, "type mismatch: argument does not have the form the lemma "
                                    f"expects (0 {'<' if kind_in == 'pos' else '≤'} _)",
                              "type mismatch")
        typ = sp[1][1]
        op = "<" if kind_out == "pos" else "≤"
        return ("cmp", op, ("num", typ, Fraction(0)), ("mul", typ, sp[1], sq[1]))
    return lemma


def _lemma_add_pos(checker, rest, goal, line):
    p, q = _hyp_args(checker, rest, goal, line, 2)
    sp, sq = _zero_side(p), _zero_side(q)
    if not sp or not sq or sp[0] != "pos" or sq[0] != "pos" or sp[1][1] != sq[1][1]:
        raise TacticError(line, "type mismatch: add_pos expects 0 < a and 0 < b",
                          "type mismatch")
    typ = sp[1][1]
    return ("cmp", "<", ("num", typ, Fraction(0)), ("add", typ, sp[1], sq[1]))


def _lemma_mul_pos_neg(checker, rest, goal, line):
    p, q = _hyp_args(checker, rest, goal, line, 2)
    sp, sq = _zero_side(p), _zero_side(q)
    if not sp or not sq or sp[0] != "neg" or sq[0] != "neg" or sp[1][1] != sq[1][1]:
        raise TacticError(line, "type mismatch: mul_pos_of_neg_of_neg expects a < 0 and b < 0",
                          "type mismatch")
    typ = sp[1][1]
    return ("cmp", "<", ("num", typ, Fraction(0)), ("mul", typ, sp[1], sq[1]))


def _lemma_pow_pos(checker, rest, goal, line):
    match = re.fullmatch(r"(\S+)\s+(\d+)", rest.strip())
    if not match:
        raise TacticError(line, "pow_pos expects a hypothesis and a numeral", "type mismatch")
    (p,) = _hyp_args(checker, match.group(1), goal, line, 1)
    sp = _zero_side(p)
    if not sp or sp[0] != "pos":
        raise TacticError(line, "type mismatch: pow_pos expects 0 < a", "type mismatch")
    typ = sp[1][1]
    return ("cmp", "<", ("num", typ, Fraction(0)), ("pow", typ, sp[1], int(match.group(2))))


def _lemma_sub(strict: bool):
    def lemma(checker, rest, goal, line):
        match = re.fullmatch(r"(\S+)", rest.strip())
        if not match:
            raise TacticError(line, "sub_pos.mpr expects one hypothesis", "type mismatch")
        (p,) = _hyp_args(checker, match.group(1), goal, line, 1)
        op = p[1]
        if (strict and op not in ("<", ">")) or (not strict and op not in ("≤", "≥")):
            raise TacticError(line, "type mismatch: wrong comparison for sub_pos/sub_nonneg",
                              "type mismatch")
        small, big = (p[2], p[3]) if op in ("<", "≤") else (p[3], p[2])
        typ = small[1]
        if typ == "ℕ":
            raise TacticError(line, "unsupported in MiniLean: sub_pos on ℕ", "unsupported")
        return ("cmp", "<" if strict else "≤", ("num", typ, Fraction(0)),
                ("sub", typ, big, small))
    return lemma


_LEMMAS = {
    "sq_nonneg": _lemma_sq_nonneg, "pow_two_nonneg": _lemma_sq_nonneg,
    "mul_self_nonneg": _lemma_mul_self, "abs_nonneg": _lemma_abs_nonneg, "sq_abs": _lemma_sq_abs,
    "mul_pos": _lemma_product("pos", "pos"), "mul_nonneg": _lemma_product("nonneg", "nonneg"),
    "add_pos": _lemma_add_pos, "mul_pos_of_neg_of_neg": _lemma_mul_pos_neg,
    "pow_pos": _lemma_pow_pos, "sub_pos.mpr": _lemma_sub(True), "sub_nonneg.mpr": _lemma_sub(False),
}


def checker_term(text: str, goal: Goal, line: int) -> tuple:
    """A hint's term argument, e.g. ``(a - b)``, elaborated at its own maximal type."""
    from icml25.pipelines.malot.lean_syntax import _elab_term

    try:
        return _elab_term(parse_expr(text.strip()), goal.ctx, None)
    except OutOfFragment as err:
        raise TacticError(line, str(err), "unsupported") from None


def _prop_facts(prop: tuple, pc: PolyContext) -> list[Fact]:
    kind = prop[0]
    if kind == "and":
        return _prop_facts(prop[1], pc) + _prop_facts(prop[2], pc)
    if kind == "cmp":
        return cmp_facts(prop[1], to_poly(prop[2], pc), to_poly(prop[3], pc))
    if kind == "not" and prop[1][0] == "cmp":
        inner = prop[1]
        return negated_cmp_facts(inner[1], to_poly(inner[2], pc), to_poly(inner[3], pc)) or []
    if kind == "false":
        return [(Poly.const(1), "≤")]
    return []


def _integral(fact: Fact, pc: PolyContext) -> bool:
    """Every atom of the fact is ℕ/ℤ-valued and its coefficients are integers."""
    poly = fact[0]
    return all(all(a in pc.int_atoms for a, _ in m) for m in poly.terms)


def _square_facts(facts: list[Fact]) -> list[Fact]:
    """``m ≥ 0`` for every even-power monomial of the input (nlinarith's square terms)."""
    out, seen = [], set()
    for poly, _ in facts:
        for mono in poly.terms:
            if mono and all(p % 2 == 0 for _, p in mono) and mono not in seen:
                seen.add(mono)
                out.append((Poly({mono: Fraction(-1)}), "≤"))
    return out


def _negated_state(goal: Goal) -> str:
    t = goal.target
    negated = ("not", t)
    return goal.with_hyp("a✝", negated).with_target(("false",)).render().rsplit("\n", 1)[0]


def _sign(term: tuple, goal: Goal) -> str | None:
    """Positivity's syntactic sign: "pos", "nonneg" or None."""
    kind, typ = term[0], term[1]
    if kind == "num":
        return "pos" if term[2] > 0 else "nonneg" if term[2] == 0 else None
    if kind in ("var",) or (kind == "cast" and term[2][0] == "var"):
        for _, prop in goal.hyps:
            for fact in _conjuncts(prop):
                side = _zero_side(fact) if fact[0] == "cmp" else None
                if side and side[1] == term and side[0] in ("pos", "nonneg"):
                    return side[0]
        base = term if kind == "var" else term[2]
        return "nonneg" if base[1] == "ℕ" else None
    if kind == "cast":
        return _sign(term[2], goal) or ("nonneg" if term[2][1] == "ℕ" else None)
    if kind == "abs":
        return "nonneg"
    if kind == "pow":
        inner = _sign(term[2], goal)
        if inner == "pos":
            return "pos"
        if term[3] % 2 == 0 or inner == "nonneg":
            return "nonneg"
        return None
    if kind in ("add", "mul", "div"):
        a, b = _sign(term[2], goal), _sign(term[3], goal)
        if a is None or b is None:
            return None
        if kind == "add":
            return "pos" if "pos" in (a, b) else "nonneg"
        if kind == "div" and typ in ("ℕ", "ℤ"):
            return "nonneg"
        return "pos" if a == b == "pos" else "nonneg"
    if kind == "sub" and typ == "ℕ":
        return "nonneg"
    return None


def _conjuncts(prop: tuple) -> list[tuple]:
    return _conjuncts(prop[1]) + _conjuncts(prop[2]) if prop[0] == "and" else [prop]


def _has_field_type(prop: tuple) -> bool:
    if prop[0] in ("true", "false"):
        return False
    if prop[0] == "not":
        return _has_field_type(prop[1])
    if prop[0] == "cmp":
        return prop[2][1] in ("ℚ", "ℝ")
    return _has_field_type(prop[1]) or _has_field_type(prop[2])


def _sympy_expr(term: tuple) -> sympy.Expr:
    """sympy value of a typed term for ``ring``; Lean-opaque parts become named symbols."""
    kind, typ = term[0], term[1]
    if kind == "num":
        return sympy.Rational(term[2].numerator, term[2].denominator)
    if kind == "var":
        return sympy.Symbol(term[2])
    if kind == "cast":
        return _sympy_expr(term[2])
    if kind == "add":
        return _sympy_expr(term[2]) + _sympy_expr(term[3])
    if kind == "mul":
        return _sympy_expr(term[2]) * _sympy_expr(term[3])
    if kind == "neg":
        return -_sympy_expr(term[2])
    if kind == "pow":
        return _sympy_expr(term[2]) ** term[3]
    if kind == "sub" and typ != "ℕ":
        return _sympy_expr(term[2]) - _sympy_expr(term[3])
    if kind == "div" and typ in ("ℚ", "ℝ"):
        divisor = sympy.expand(_sympy_expr(term[3]))
        if divisor.is_number:
            return 0 if divisor == 0 else _sympy_expr(term[2]) / divisor
        return _sympy_expr(term[2]) * sympy.Symbol(f"inv⟪{sympy.srepr(divisor)}⟫")
    return sympy.Symbol(f"⟪{typed_pretty(term)}⟫")  # ℕ -, ℕ/ℤ / and %, |.|: atoms


def _sympy_zero(lhs: tuple, rhs: tuple) -> bool:
    """``ring``: ``expand(lhs - rhs) == 0`` in the commutative (semi)ring of the type."""
    return sympy.expand(_sympy_expr(lhs) - _sympy_expr(rhs)) == 0


def _poly_text(poly: Poly) -> str:
    return poly.key().replace("⟪", "").replace("⟫", "")


def _divisors(node: tuple) -> list[tuple]:
    out: list[tuple] = []
    if node[0] in ("num", "var", "true", "false"):
        return out
    if node[0] == "div":
        try:
            evaluate(node[3])
        except NotClosed:
            out.append(node[3])
    for child in node[1:]:
        if isinstance(child, tuple):
            out += _divisors(child)
    return out


def _nonzero_hyp(term: tuple, goal: Goal) -> bool:
    for _, prop in goal.hyps:
        for fact in _conjuncts(prop):
            if fact[0] != "cmp":
                continue
            zero = ("num", term[1], Fraction(0))
            if fact[1] == "≠" and ((fact[2] == term and fact[3] == zero) or
                                   (fact[3] == term and fact[2] == zero)):
                return True
            side = _zero_side(fact)
            if side and side[0] in ("pos", "neg") and side[1] == term:
                return True
    return False


def _rational(term: tuple) -> tuple[tuple, tuple]:
    """(numerator, denominator) of a field term whose divisors are all known non-zero."""
    kind, typ = term[0], term[1]
    one = ("num", typ, Fraction(1))
    if kind in ("add", "sub"):
        (an, ad), (bn, bd) = _rational(term[2]), _rational(term[3])
        return ((kind, typ, ("mul", typ, an, bd), ("mul", typ, bn, ad)), ("mul", typ, ad, bd))
    if kind == "mul":
        (an, ad), (bn, bd) = _rational(term[2]), _rational(term[3])
        return (("mul", typ, an, bn), ("mul", typ, ad, bd))
    if kind == "div":
        try:  # a closed divisor: Lean's x / 0 = 0, so a zero divisor is never cross-multiplied
            if evaluate(term[3]) == 0:
                return (("num", typ, Fraction(0)), one)
        except NotClosed:
            pass  # a variable divisor: field_simp only runs when a hypothesis makes it ≠ 0
        (an, ad), (bn, bd) = _rational(term[2]), _rational(term[3])
        return (("mul", typ, an, bd), ("mul", typ, ad, bn))
    if kind == "neg":
        n, d = _rational(term[2])
        return (("neg", typ, n), d)
    if kind == "pow":
        n, d = _rational(term[2])
        return (("pow", typ, n, term[3]), ("pow", typ, d, term[3]))
    return (term, one)


def _replace(node: tuple, old: tuple, new: tuple) -> tuple:
    if node == old:
        return new
    if node[0] in ("num", "var", "true", "false"):
        return node
    return tuple(_replace(c, old, new) if isinstance(c, tuple) else c for c in node)


def _rewrite_all(prop: tuple, rules: list[tuple[tuple, tuple]]) -> tuple:
    for _ in range(8):  # simp rewrites to a fixed point; bounded
        before = prop
        for lhs, rhs in rules:
            prop = _replace(prop, lhs, rhs)
        if prop == before:
            break
    return prop


def _normalise(prop: tuple, state: _State) -> tuple:
    """norm_num's arithmetic: decide closed propositions exactly; a comparison whose sides
    differ by a constant (polynomial normal form in ℤ/ℚ/ℝ) is decided from that constant."""
    kind = prop[0]
    if kind in ("and", "or", "imp", "iff"):
        a, b = _normalise(prop[1], state), _normalise(prop[2], state)
        table = {"and": {("true",): b, ("false",): ("false",)},
                 "or": {("true",): ("true",), ("false",): b},
                 "imp": {("true",): b, ("false",): ("true",)}}
        if kind in table and a in table[kind]:
            return table[kind][a]
        if kind == "and" and b in (("true",), ("false",)):
            return a if b == ("true",) else ("false",)
        if kind == "or" and b in (("true",), ("false",)):
            return ("true",) if b == ("true",) else a
        return (kind, a, b)
    if kind == "not":
        inner = _normalise(prop[1], state)
        if inner[0] in ("true", "false"):
            return ("false",) if inner[0] == "true" else ("true",)
        return ("not", inner)
    if kind != "cmp":
        return prop
    try:
        return ("true",) if decide_prop(prop) else ("false",)
    except NotClosed:
        pass
    if prop[1] in ("=", "≠", "<", "≤", ">", "≥") and prop[2][1] != "ℕ":
        pc = PolyContext()
        diff = to_poly(prop[2], pc) - to_poly(prop[3], pc)
        if diff.is_const():
            zero = ("num", "ℝ", Fraction(0))
            value = decide_prop(("cmp", prop[1], ("num", "ℝ", diff.const_value()), zero))
            return ("true",) if value else ("false",)
    return prop


# ------------------------------------------------------------------------ the file contract
def split_file(code: str) -> tuple[str, int, list[tuple[int, str]], int, int]:
    """(statement text, its first line, proof lines, declaration line, `by` line), 1-based."""
    lines = code.split("\n")
    start = None
    for i, text in enumerate(lines):
        if re.match(r"^\s*(theorem|lemma|example)\b", text):
            start = i
            break
    if start is None:
        raise OutOfFragment("no theorem declaration in the file")
    joined, by_line, by_col = "", None, None
    for i in range(start, len(lines)):
        text = re.sub(r"--.*$", "", lines[i])
        match = re.search(r":=\s*by\b", text)
        if match:
            by_line, by_col = i, match.end()
            joined += text[:match.start()]
            break
        joined += text + "\n"
    if by_line is None:
        raise OutOfFragment("proof is not a tactic block (expected ':= by')")
    rest = lines[by_line][by_col:]
    proof = ([(by_line + 1, " " * by_col + rest)] if rest.strip() else []) + \
        [(i + 1, lines[i]) for i in range(by_line + 1, len(lines))]
    return joined, start + 1, proof, start + 1, by_line + 1


def _first_tab_line(code: str) -> int | None:
    """1-based line of the first tab outside comments (Lean's whitespace rejects tabs)."""
    blanked = re.sub(r"/-.*?-/", lambda m: "\n" * m.group(0).count("\n"), code, flags=re.S)
    for number, line in enumerate(blanked.split("\n"), start=1):
        if "\t" in re.sub(r"--.*$", "", line):
            return number
    return None


def verify(code: str, settings: Settings | None = None) -> dict[str, Any]:
    """Check one Lean file; the verifier contract plus ``verdict`` and categories.

    ``verdict``: "complete", "incomplete" (sorry), "error", "out_of_fragment", "timeout",
    "too_large". ``complete`` = pass and no sorries and no warning mentioning sorry or failure.
    """
    settings = settings or Settings()
    started = time.perf_counter()
    result: dict[str, Any] = {"errors": [], "warnings": [], "sorries": [], "pass": False,
                              "complete": False, "system_error": None, "verdict": "error"}

    def done(verdict: str) -> dict[str, Any]:
        result["verdict"] = verdict
        result["verify_time"] = time.perf_counter() - started
        return result

    if len(code) > settings.max_chars:
        result["errors"].append({"line": 1, "col": 0, "category": "too large",
                                 "message": f"proof too large: {len(code)} characters > "
                                            f"{settings.max_chars}"})
        return done("too_large")
    try:
        statement_text, _, proof_lines, decl_line, by_line = split_file(code)
        statement = parse_statement(statement_text)
    except OutOfFragment as err:
        result["errors"].append({"line": 1, "col": 0, "category": "unsupported",
                                 "message": str(err)})
        return done("out_of_fragment")
    budget = Budget(settings.proof_timeout_s, settings.max_steps, settings.proof_rlimit)
    checker = Checker(statement, settings, budget)
    try:
        tab = _first_tab_line(code)
        if tab is not None:
            raise _syntax(tab, "tabs are not allowed; please configure your editor to expand "
                               "them")
        nodes = parse_blocks(proof_lines)
    except TacticError as err:  # a malformed file: Lean rejects it before running any tactic
        result["errors"] = [{"line": err.line, "col": 0, "message": err.message,
                             "category": err.category}]
        return done("error")
    try:
        checker.run(nodes, decl_line, by_line)
    except Deadline as stop:
        if stop.wall_clock:  # the safety net: machine-dependent, so never silent
            message = (f"timeout: the wall-clock safety limit was hit (proof "
                       f"{settings.proof_timeout_s:g} s, z3 call {settings.z3_timeout_s:g} s); "
                       f"this verdict depends on the machine's speed")
            logger.warning("malot: MiniLean %s", message)
        else:
            message = (f"(deterministic) timeout: proof checking exceeded its budget of "
                       f"{settings.max_steps} steps and {settings.proof_rlimit} z3 resource "
                       f"units (or a polynomial of more than {MAX_TERMS} terms)")
        result["wall_clock_limit"] = stop.wall_clock
        result["errors"] = [*checker.state.errors, {"line": by_line, "col": 0,
                                                    "category": "timeout", "message": message}]
        return done("timeout")
    except RecursionError:
        result["errors"].append({"line": by_line, "col": 0, "category": "too large",
                                 "message": "maximum recursion depth has been reached"})
        return done("too_large")
    result["errors"] = checker.state.errors
    result["sorries"] = checker.state.sorries
    if checker.state.sorries:
        result["warnings"].append({"line": decl_line, "col": 0,
                                   "message": "declaration uses 'sorry'"})
    result["pass"] = not result["errors"]
    result["complete"] = result["pass"] and not result["sorries"] and not any(
        "declaration uses 'sorry'" in w["message"] or "failed" in w["message"]
        for w in result["warnings"])
    if result["complete"]:
        return done("complete")
    if result["errors"] and all(e.get("category") == "unsupported" for e in result["errors"]):
        return done("out_of_fragment")
    return done("incomplete" if result["pass"] else "error")


def lean_file(statement: str, proof: str) -> str:
    """The verified file: header + statement (ending in ``:= by``) + proof body."""
    statement = statement.rstrip()
    if not statement.endswith(":= by"):
        cut = statement.rfind(":=")
        statement = (statement[:cut] if cut >= 0 else statement).rstrip() + " := by"
    body = textwrap.indent(textwrap.dedent(proof.strip("\n")), "  ")
    return f"{HEADER}\n{statement}\n{body}\n"


__all__ = ["HEADER", "RANK", "Settings", "TacticError", "lean_file", "verify"]
