"""Prover and corrector prompts and the Long-CoT control of MA-LoT (docs/papers/malot.md).

The templates are written in this project's own words with the structure and slots of the paper's:
prover = BOS + system prompt (solve WITH long chain-of-thought; reason in ``<Thought>``, Lean code
only in ``<Output>``) + ``### Instruction:`` + few-shot examples separated by a rule of ``=`` +
the target (name, informal statement, Lean statement) + ``### Response:\\n<Thought>\\n`` + a CoT
opener announcing a 3-step plan and ending in "<name> can be proved by". Corrector = BOS +
corrector system prompt + ``### Instruction:`` (name, informal, Lean statement) + the response
pre-filled in the assistant's voice with the failed code, the remark that Lean rejected it, each
error in its own ```` ```bash ```` fence (``line <L>``, blank line, message), the re-planning list
and an opening phrase that starts analysing the errors. Long-CoT control: generation stops at
``</Thought>``; the output header (``</Thought>``, ``<Output>``, a lean4 fence, the Lean header,
``/--N-/`` and S) is injected and the model completes the proof; the proof is the last fenced
lean block of the completion.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from icml25.pipelines.malot.minilean import HEADER

BOS = "<｜begin▁of▁sentence｜>"
RULE = "=" * 40


def system_prompt(with_cot: bool) -> str:
    """The one-line LoT-TL instruction: WITH long CoT at inference, WITHOUT during alignment."""
    word = "**WITH**" if with_cot else "**WITHOUT**"
    return (f"You are a Lean 4 expert. Solve every problem {word} a long chain-of-thought: "
            "reason inside <Thought> ... </Thought>, then put only Lean 4 code inside "
            "<Output> ... </Output>, never using `sorry`.")


CORRECTOR_SYSTEM = (
    "You are a Lean 4 expert who repairs failed proofs. Read the statement and the error "
    "messages Lean reported, work out exactly what went wrong, throw away a proof structure "
    "that cannot work instead of patching it, address every error, and never use `sorry`. "
    "Reason inside <Thought> ... </Thought>; put only Lean 4 code inside <Output> ... </Output>.")

PLAN = ("1. Analyse the statement in natural language.\n"
        "2. Draft the Lean 4 tactics that the proof will use.\n"
        "3. Write the final Lean 4 code.")


def cot_opener(name: str) -> str:
    return (f"I will work in three steps:\n{PLAN}\nI will not use `sorry` anywhere.\n"
            f"{name} can be proved by")


def _target(name: str, nl: str, statement: str) -> str:
    return f"Name: {name}\nInformal statement:\n{nl}\nLean 4 statement:\n{statement}\n"


def fewshot_block(example: dict[str, Any]) -> str:
    return (f"{_target(example['name'], example['nl'], example['statement'])}"
            f"Lean 4 proof:\n```lean4\n{example['statement']}\n{_indent(example['proof'])}\n```\n")


def _indent(proof: str) -> str:
    return "\n".join("  " + line for line in proof.strip().split("\n"))


def build_prover_prompt(name: str, nl: str, statement: str,
                        fewshots: Sequence[dict[str, Any]] = (), with_cot: bool = True) -> str:
    """Slots in order: BOS, system, instruction, few-shots, target, response + CoT opener."""
    shots = f"\n{RULE}\n".join(fewshot_block(e) for e in fewshots)
    if shots:
        shots += f"\n{RULE}\n"
    return (f"{BOS}{system_prompt(with_cot)}\n### Instruction:\n{shots}"
            f"{_target(name, nl, statement)}\n### Response:\n<Thought>\n{cot_opener(name)}")


def format_errors(errors: Sequence[dict[str, Any]]) -> str:
    return "\n".join(f"```bash\nline {e['line']}\n\n{e['message']}\n```" for e in errors)


def build_corrector_prompt(name: str, nl: str, statement: str, failed_code: str,
                           errors: Sequence[dict[str, Any]], with_cot: bool = True) -> str:
    """Slots in order: BOS, corrector system, instruction (target), response pre-filled with the
    failed code, the failure remark, the errors, the re-planning list, the analysis opener."""
    opener = ("Let me analyse these errors one by one:" if with_cot
              else "The user asked for no long chain-of-thought; I write the revised code "
                   "directly.")
    return (f"{BOS}{CORRECTOR_SYSTEM}\n### Instruction:\n{_target(name, nl, statement)}"
            f"\n### Response:\n<Thought>\nI drafted a proof:\n```lean4\n{failed_code}\n```\n"
            f"Testing it in Lean 4 failed with these errors:\n{format_errors(errors)}\n"
            f"Using the previous proof and its errors, I will work in three steps:\n{PLAN}\n"
            f"{opener}")


def output_header(nl: str, statement: str) -> str:
    """What Long-CoT control injects after ``</Thought>``: the model then writes the proof."""
    return f"</Thought>\n<Output>\n```lean4\n{HEADER}/--{nl}-/\n{statement}\n"


_FENCE = re.compile(r"```lean4?\s*\n(.*?)(```|$)", re.S)


def extract_last_lean_block(text: str) -> str | None:
    """The last fenced ``lean``/``lean4`` block (an unterminated final block counts)."""
    blocks = _FENCE.findall(text)
    return blocks[-1][0].rstrip() if blocks else None


_DECLARATION = re.compile(r"^[ \t]*(theorem|lemma|example)\b", re.M)
_BY = re.compile(r":=\s*by\b")


def proof_body(block: str, statement: str | None = None) -> str:
    """The tactic proof of a Lean block: everything after the declaration's own ``:= by`` (the
    end of ``statement`` where the block contains it, else the first ``:= by`` after the
    ``theorem``/``lemma``/``example`` keyword, as the verifier splits a file), so a proof that
    opens with ``have … := by`` is kept whole. A block without a declaration is the proof."""
    if statement is not None and statement.strip():
        at = block.find(statement.strip())
        if at >= 0 and _BY.search(statement):
            end = at + len(statement.strip())
            return block[end:].strip("\n").rstrip()
    declaration = _DECLARATION.search(block)
    if declaration is None:
        return block.strip("\n").rstrip()
    match = _BY.search(block, declaration.end())
    if match is None:
        return block.strip("\n").rstrip()
    return block[match.end():].strip("\n").rstrip()


Generate = Callable[[str, Sequence[str], int], str]


def longcot_complete(generate: Generate, prompt: str, nl: str, statement: str, max_tokens: int,
                     cot_fraction: float) -> tuple[str, str]:
    """Long-CoT control: think until ``</Thought>`` (at most ``cot_fraction·max_tokens``),
    inject the output header, let the model finish the proof; returns (thought, proof body)."""
    thought_budget = max(1, int(max_tokens * cot_fraction))
    thought = generate(prompt, ["</Thought>"], thought_budget)
    thought = thought.split("</Thought>")[0]
    head = output_header(nl, statement)
    rest = generate(prompt + thought + head, ["```"], max(1, max_tokens - thought_budget))
    completion = head + rest.split("```")[0] + "\n```"
    block = extract_last_lean_block(completion) or ""
    return thought, proof_body(block, statement)
