"""Claims: checkable statements from a paper, judged on the run's own metrics.

A claim names a metric, the paper's method and what it is compared with — a baseline variant or
a fixed threshold — plus the direction ("lower" is better or "higher" is better) and an optional
margin. Its verdict is computed from the metrics a pipeline measured; nothing is typed in.

Verdict for direction ``lower``: ``holds = method <= reference - margin``; for ``higher``:
``holds = method >= reference + margin``. A negative margin expresses "on par within |margin|".
Metric values may be a number or a list of per-seed numbers; claims are judged on the mean and
the standard deviation is reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

MetricValue = float | Sequence[float]
Metrics = Mapping[str, Mapping[str, MetricValue]]


class ClaimSpec(BaseModel):
    """One claim of a paper, as configured in ``parameters_<name>.yml`` under ``claims``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    claim: str
    metric: str
    method: str
    direction: Literal["lower", "higher"]
    baseline: str | None = None
    threshold: float | None = None
    margin: float = 0.0

    @model_validator(mode="after")
    def _one_reference(self) -> ClaimSpec:
        if (self.baseline is None) == (self.threshold is None):
            raise ValueError("give exactly one of 'baseline' (a variant) or 'threshold' (a number)")
        return self


def _summary(values: MetricValue) -> tuple[float, float, int]:
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.size == 0:
        return math.nan, math.nan, 0
    std = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
    return float(np.mean(arr)), std, int(arr.size)


def _value(metrics: Metrics, variant: str, metric: str, claim: str) -> MetricValue:
    if variant not in metrics:
        raise KeyError(
            f"claim {claim!r}: variant {variant!r} has no metrics; known: {sorted(metrics)}"
        )
    if metric not in metrics[variant]:
        raise KeyError(
            f"claim {claim!r}: metric {metric!r} missing for {variant!r}; "
            f"known: {sorted(metrics[variant])}"
        )
    return metrics[variant][metric]


def evaluate_claim(spec: ClaimSpec | Mapping[str, Any], metrics: Metrics) -> dict[str, Any]:
    """Judge one claim against ``metrics[variant][metric]``; NaN on either side never holds."""
    spec = spec if isinstance(spec, ClaimSpec) else ClaimSpec.model_validate(dict(spec))
    m_mean, m_std, m_n = _summary(_value(metrics, spec.method, spec.metric, spec.claim))
    if spec.baseline is not None:
        b_mean, b_std, b_n = _summary(_value(metrics, spec.baseline, spec.metric, spec.claim))
        reference = spec.baseline
    else:
        b_mean, b_std, b_n = float(spec.threshold), 0.0, 0
        reference = f"threshold {spec.threshold:g}"
    if math.isnan(m_mean) or math.isnan(b_mean):
        holds = False
    elif spec.direction == "lower":
        holds = m_mean <= b_mean - spec.margin
    else:
        holds = m_mean >= b_mean + spec.margin
    return {
        "claim": spec.claim,
        "metric": spec.metric,
        "method": spec.method,
        "baseline": reference,
        "method_value": m_mean,
        "baseline_value": b_mean,
        "holds": bool(holds),
        "direction": spec.direction,
        "margin": spec.margin,
        "method_std": m_std,
        "baseline_std": b_std,
        "n_seeds": max(m_n, b_n),
    }


def evaluate_claims(
    specs: Sequence[ClaimSpec | Mapping[str, Any]], metrics: Metrics
) -> list[dict[str, Any]]:
    """Judge every claim; an empty claim list is a configuration error."""
    if not specs:
        raise ValueError("claims: empty; a pipeline must state at least one claim of its paper")
    return [evaluate_claim(spec, metrics) for spec in specs]


def claims_report(
    pipeline: str,
    specs: Sequence[ClaimSpec | Mapping[str, Any]],
    metrics: Metrics,
    run_info: Mapping[str, Any],
    seeds: Sequence[int],
    title: str = "",
    figures: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``claims.json`` document of a pipeline: header (run info, seeds) plus every verdict.

    ``figures``: the pipeline's key figures, as paths relative to its reporting folder
    (``data/08_reporting/<pipeline>/``); the scorecard shows them inline.
    """
    claims = evaluate_claims(specs, metrics)
    return _jsonable({
        "pipeline": pipeline,
        "title": title,
        "run": {**dict(run_info), "seeds": list(seeds)},
        "claims": claims,
        "n_holds": sum(c["holds"] for c in claims),
        "n_claims": len(claims),
        "figures": list(figures),
    })


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf; null reads as "not measured"
    return value


def metrics_report(
    pipeline: str, metrics: Metrics, run_info: Mapping[str, Any], seeds: Sequence[int],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``metrics.json`` document: per variant, each metric's seed mean, std and raw values."""
    summary: dict[str, dict[str, Any]] = {}
    for variant, values in metrics.items():
        summary[variant] = {}
        for metric, value in values.items():
            mean, std, n = _summary(value)
            summary[variant][metric] = mean
            if n > 1:
                summary[variant][f"{metric}_std"] = std
    return _jsonable({
        "pipeline": pipeline,
        "run": {**dict(run_info), "seeds": list(seeds)},
        "metrics": summary,
        "per_seed": {v: {m: np.atleast_1d(x).tolist() for m, x in d.items()}
                     for v, d in metrics.items()},
        **(dict(extra) if extra else {}),
    })
