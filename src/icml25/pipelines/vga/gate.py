"""The learning gate of the chance-level claims (``docs/papers/vga.md``, "Claims").

"Model X is at chance on isomorphism" says something about the concept only if X has learned to
read the drawings at all: a model that learned nothing is at chance on every task. So each
chance-level claim (relation ``within``, metric ``items_<task>_test_layout``) is judged only when
the same variant's control task (node count, 8 vs 9) reaches ``min_acc`` test accuracy, mean
over seeds, in that task's test layout. Otherwise its verdict becomes ``inconclusive`` and the
reason names the control's accuracy (the interval's own verdict is kept in the reason).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from icml25.core.claims import count_fields

_CHANCE_METRIC = re.compile(r"items_(?P<task>[a-z_]+)_test_layout")


def chance_claim_task(claim: Mapping[str, Any]) -> str | None:
    """The task of a chance-level claim, or None for any other claim."""
    if claim.get("relation") != "within":
        return None
    match = _CHANCE_METRIC.fullmatch(str(claim.get("metric", "")))
    return match.group("task") if match else None


def control_metric(control_task: str, layout: str) -> str:
    return f"acc_{control_task}_{layout}"


def apply_control_gate(
    claims_doc: dict[str, Any],
    metrics: Mapping[str, Mapping[str, Sequence[float]]],
    protocol: Mapping[str, Mapping[str, Any]],
    control_task: str,
    min_acc: float,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``claims_doc`` with every chance-level claim whose control is under ``min_acc`` made
    inconclusive (counts recomputed), and one row per chance-level claim saying why."""
    rows = []
    for claim in claims_doc["claims"]:
        task = chance_claim_task(claim)
        if task is None:
            continue
        layout = protocol[task]["test_layout"]
        name = control_metric(control_task, layout)
        values = [float(v) for v in metrics.get(claim["method"], {}).get(name, [])]
        acc = sum(values) / len(values) if values else math.nan
        judged = bool(values) and acc >= min_acc
        rows.append({"claim": claim["claim"], "method": claim["method"], "control": name,
                     "control_acc": acc, "min_acc": min_acc, "judged": judged,
                     "interval_verdict": claim["verdict"]})
        if judged:
            continue
        shown = "no value" if not values else f"{acc:.3f}"
        claim["reason"] = (
            f"not judged: the control ({control_task}, {layout} layout) of {claim['method']} "
            f"is at {shown}, under {min_acc:g}, so a chance score cannot be told from having "
            f"learned nothing (the interval alone: {claim['verdict']})")
        claim["verdict"] = "inconclusive"
        claim["holds"] = False
    claims_doc.update(count_fields(claims_doc["claims"]))
    return claims_doc, rows


def chance_band(n: int, classes: int, z: float = 1.96) -> float:
    """Half-width of the central ~95 % range of the accuracy of a chance-level answerer on
    ``n`` items with ``classes`` balanced classes: z sqrt(p (1 - p) / n), p = 1 / classes."""
    p = 1.0 / classes
    return z * math.sqrt(p * (1 - p) / n)
