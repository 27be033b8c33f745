"""Claims: checkable statements from a paper, judged on the run's own metrics with paired statistics.

A claim names a metric, the paper's method and what it is compared with — a baseline variant or
a fixed threshold — and the *relation* the paper asserts:

``better``
    the method is strictly better than the reference (by more than ``margin``, default 0) in the
    claim's ``direction`` (``lower`` or ``higher`` is better);
``no_worse``
    non-inferiority: the method is at most ``margin`` (> 0, in the metric's units) worse;
``within``
    equivalence: the method differs from the reference by less than ``margin`` (> 0) either way
    (two one-sided tests, TOST; ``direction`` is not used).

Evidence. The engine forms the paired differences ``d = method - reference`` (one per seed, or per
``unit`` when the metric has one: dataset, item, episode, test image) and an interval
``[lo, hi]`` for their mean in which *each end is a one-sided bound at the configured level*
(``confidence``, default 0.90; the pair of bounds is the two-sided ``2·confidence - 1`` interval,
80 % at the default). The verdict is where that interval lies against the claim's boundary ``b``
(``-margin`` for ``better`` with a lower-is-better metric, ``+margin`` with higher-is-better;
``±margin`` for ``no_worse`` on the other side; ``(-margin, margin)`` for ``within``):

* ``holds``: the interval lies entirely on the claim's side of ``b`` — the one-sided test of
  "the claim is false" rejects at the level;
* ``fails``: the interval lies entirely on the other side (or touches ``b`` from it): evidence
  *against* the claim, not merely a lack of evidence for it. A tie with no spread fails a
  ``better`` claim;
* ``inconclusive``: the interval straddles ``b``, or there is no spread to judge (one pair), or a
  value is NaN. ``holds`` (the boolean) is true only for the verdict ``holds``.

Tests (``test``), and why:

``t`` (default)
    Student's paired t interval ``mean ± t_{c, n-1} · s/√n``. Seed counts here are 3–10, where
    the t interval is the only standard choice with usable power and honest coverage for
    roughly normal seed-to-seed variation; with per-unit pairs (datasets, items) it is the usual
    paired comparison of a mean difference. Zero spread (a deterministic method) gives the
    degenerate interval ``[mean, mean]`` and an exact verdict.
``bootstrap``
    paired percentile bootstrap of the mean difference (10 000 resamples of the pairs, fixed
    generator seed, so the verdict is reproducible). For many heavy-tailed or bounded per-item
    differences (0/1 correctness, episode returns) where normality of the mean is doubtful; it
    needs at least 10 pairs — with fewer the percentile interval is too narrow — and gives
    ``inconclusive`` otherwise.
``exact``
    for a metric without sampling noise (a parameter count, a solver's certificate, the same
    deterministic number on every seed): the values must agree across seeds to 1e-9 relative,
    and the verdict compares the single difference with the boundary directly.

Wilcoxon's signed-rank test is not offered: its exact one-sided p-value cannot go below
``1/2^n`` (0.125 at three seeds, so a 90 % claim could never hold) and it tests a location shift
rather than giving an interval for the mean difference that the claims report.

Pairing. Method and reference are paired by seed: both must have run the same seeds (the engine
refuses a comparison of a three-seed mean with one seed, naming the claim and the variants).
With a ``unit``, a metric value is a mapping ``{unit: value or per-seed list}``; units are paired
by name (the sets must be equal) and each unit's seeds are averaged, so the test's ``n`` is the
number of units. That interval (``ci_units``) measures how the difference varies over units
(items, datasets) but not how it varies over training seeds: a method that wins on every prompt
with one seed and loses with the next would look certain. So, where every unit has the same two or
more seeds (seed ``k`` of every unit comes from the same trained model), the engine also forms the
seed-level differences (each seed's mean over units, Student's t over seeds, ``ci_seeds``) and the
claim's interval is the envelope of the two: a unit claim holds only if it holds both across units
and across seeds, and fails only if both intervals fail it. ``paired: false`` compares the two
seed samples with Welch's unequal-variance t interval (the only place where the seed counts may
differ). Against a ``threshold`` the differences are ``method - threshold`` (a one-sample test).

Metric values may be a number (one seed or one deterministic measurement), a list of per-seed
numbers, or for unit claims a mapping of unit to either.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from icml25.core.lazy_import import lazy_module

stats = lazy_module("scipy.stats")  # 1-2 s to import; only the t intervals need it

MetricValue = float | Sequence[float] | Mapping[str, float | Sequence[float]]
Metrics = Mapping[str, Mapping[str, MetricValue]]

VERDICTS = ("holds", "fails", "inconclusive")
DEFAULT_CONFIDENCE = 0.90
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_MIN_PAIRS = 10
_EXACT_RTOL = 1e-9


class ClaimError(ValueError):
    """A claim cannot be judged as configured (unequal seeds, mismatched units, a bad shape)."""


class ClaimSpec(BaseModel):
    """One claim of a paper, as configured in ``parameters_<name>.yml`` under ``claims``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    claim: str
    metric: str
    method: str
    relation: Literal["better", "no_worse", "within"]
    direction: Literal["lower", "higher"] | None = None
    baseline: str | None = None
    threshold: float | None = None
    margin: float = Field(0.0, ge=0.0)
    unit: str | None = None
    paired: bool = True
    test: Literal["t", "bootstrap", "exact"] = "t"

    @model_validator(mode="after")
    def _consistent(self) -> ClaimSpec:
        if (self.baseline is None) == (self.threshold is None):
            raise ValueError("give exactly one of 'baseline' (a variant) or 'threshold' (a number)")
        if self.relation in ("better", "no_worse") and self.direction is None:
            raise ValueError(f"relation {self.relation!r} needs a 'direction' (lower or higher)")
        if self.relation in ("no_worse", "within") and self.margin <= 0:
            raise ValueError(f"relation {self.relation!r} needs a 'margin' > 0 (in the metric's "
                             "units): non-inferiority and equivalence are defined by it")
        if not self.paired and self.threshold is not None:
            raise ValueError("'paired: false' compares two variants; a threshold claim has one")
        if not self.paired and self.unit is not None:
            raise ValueError("'paired: false' cannot pair units; drop 'unit' or pair")
        if not self.paired and self.test != "t":
            raise ValueError("'paired: false' uses Welch's t interval; 'test' must be 't'")
        return self


# ------------------------------------------------------------------------------------ values
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


def _seed_array(value: Any, where: str) -> np.ndarray:
    if isinstance(value, Mapping):
        raise ClaimError(f"{where}: per-unit values (keys {sorted(value)[:5]}...) but the claim "
                         "has no 'unit'; name the unit the metric is paired over")
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError) as err:
        raise ClaimError(f"{where}: not a number or a list of per-seed numbers: {value!r}"
                         ) from err
    if arr.ndim != 1:
        raise ClaimError(f"{where}: expected a number or a flat per-seed list, got shape "
                         f"{arr.shape}")
    return arr


def _seed_stats(arr: np.ndarray) -> tuple[float, float]:
    if arr.size == 0:
        return math.nan, math.nan
    return float(np.mean(arr)), float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0


def _unit_table(value: Any, where: str) -> dict[str, np.ndarray]:
    if not isinstance(value, Mapping):
        raise ClaimError(f"{where}: the claim pairs over units but the metric is not a mapping "
                         "{unit: value or per-seed list}")
    if not value:
        raise ClaimError(f"{where}: no units")
    return {str(k): _seed_array(v, f"{where}[{k!r}]") for k, v in value.items()}


# ------------------------------------------------------------------------------------ intervals
def _interval(d: np.ndarray, test: str, confidence: float) -> tuple[float, float, str]:
    """``(lo, hi, reason)``: each end a one-sided ``confidence`` bound of the mean of ``d``."""
    n = d.size
    mean = float(np.mean(d))
    if test == "exact":
        return mean, mean, ""
    if n < 2:
        return math.nan, math.nan, "one pair: no spread to judge the difference against"
    if test == "bootstrap":
        if n < BOOTSTRAP_MIN_PAIRS:
            return (math.nan, math.nan,
                    f"bootstrap needs at least {BOOTSTRAP_MIN_PAIRS} pairs, got {n}")
        rng = np.random.default_rng(0)
        idx = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
        means = d[idx].mean(axis=1)
        lo, hi = np.quantile(means, [1 - confidence, confidence])
        return float(lo), float(hi), ""
    sd = float(np.std(d, ddof=1))
    half = float(stats.t.ppf(confidence, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half, ""


def _welch(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float, float, str]:
    """Unpaired ``mean(a) - mean(b)`` with Welch's one-sided bounds at ``confidence``."""
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return diff, math.nan, math.nan, "unpaired comparison needs at least 2 seeds on each side"
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff, ""
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf(confidence, dof)) * se
    return diff, diff - half, diff + half, ""


def _verdict(relation: str, direction: str | None, margin: float, lo: float, hi: float,
             tol: float = 0.0) -> tuple[str, str]:
    """Where ``[lo, hi]`` (bounds of mean(method - reference)) lies against the claim.

    A bound within ``tol`` of a boundary touches it (floating-point residue such as a bootstrap
    quantile of 4e-19 for an exact 0 must not decide a verdict).
    """
    if math.isnan(lo) or math.isnan(hi):
        return "inconclusive", ""
    if relation == "within":
        if -margin + tol < lo and hi < margin - tol:
            return "holds", ""
        if lo >= margin - tol or hi <= -margin + tol:
            return "fails", ""
        return "inconclusive", f"the interval overlaps the equivalence bound ±{margin:g}"
    # orient so that larger g is better for the method
    g_lo, g_hi = (-hi, -lo) if direction == "lower" else (lo, hi)
    boundary = margin if relation == "better" else -margin
    if g_lo > boundary + tol:
        return "holds", ""
    if g_hi <= boundary + tol:
        return "fails", ""
    what = "no difference" if relation == "better" and margin == 0 else f"the margin {margin:g}"
    return "inconclusive", f"the interval includes {what}"


def _tolerance(*arrays: np.ndarray) -> float:
    """Relative round-off scale of the compared values (1e-9 of their largest magnitude)."""
    finite = [np.abs(a[np.isfinite(a)]).max() for a in arrays if np.isfinite(a).any()]
    return _EXACT_RTOL * max(finite) if finite else 0.0


# ------------------------------------------------------------------------------------ judging
def evaluate_claim(
    spec: ClaimSpec | Mapping[str, Any],
    metrics: Metrics,
    confidence: float = DEFAULT_CONFIDENCE,
    seeds_of: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Any]:
    """Judge one claim against ``metrics[variant][metric]``; NaN on either side never holds.

    ``seeds_of``: the seeds each variant ran (``{variant: [seeds]}``); where both sides of a
    paired claim appear, their seed lists must be equal, not only equally long.
    """
    spec = spec if isinstance(spec, ClaimSpec) else ClaimSpec.model_validate(dict(spec))
    if not 0.5 < confidence < 1:
        raise ClaimError(f"claims confidence must lie in (0.5, 1), got {confidence}")
    where = f"claim {spec.claim!r}"
    m_raw = _value(metrics, spec.method, spec.metric, spec.claim)
    b_raw = (_value(metrics, spec.baseline, spec.metric, spec.claim)
             if spec.baseline is not None else None)
    reference = spec.baseline if spec.baseline is not None else f"threshold {spec.threshold:g}"
    reason = ""
    seed_diffs: np.ndarray | None = None  # unit claims: per-seed mean difference over units

    if spec.unit is not None:
        m_units = _unit_table(m_raw, f"{where}: {spec.method}")
        b_units = (_unit_table(b_raw, f"{where}: {spec.baseline}") if b_raw is not None
                   else {u: np.array([spec.threshold]) for u in m_units})
        if set(m_units) != set(b_units):
            raise ClaimError(
                f"{where}: {spec.method!r} and {reference!r} have different {spec.unit}s: only "
                f"{sorted(set(m_units) ^ set(b_units))[:8]} on one side")
        units = sorted(m_units)
        if b_raw is not None:
            for u in units:
                if m_units[u].size != b_units[u].size:
                    raise ClaimError(
                        f"{where}: {spec.unit} {u!r} has {m_units[u].size} seed(s) for "
                        f"{spec.method!r} and {b_units[u].size} for {spec.baseline!r}; a paired "
                        "claim compares variants run on the same seeds")
        m_arr = np.array([m_units[u].mean() for u in units])
        b_arr = np.array([b_units[u].mean() for u in units])
        n_seeds = max(a.size for a in m_units.values())
        sizes = {m_units[u].size for u in units}
        if len(sizes) == 1 and n_seeds >= 2 and spec.test != "exact":
            # seed k of every unit: the per-seed mean over units of method - reference
            m_seed = np.mean([m_units[u] for u in units], axis=0)
            b_seed = (np.mean([b_units[u] for u in units], axis=0) if b_raw is not None
                      else np.full(n_seeds, float(spec.threshold)))
            seed_diffs = m_seed - b_seed
    else:
        m_arr = _seed_array(m_raw, f"{where}: {spec.method}")
        if b_raw is not None:
            b_arr = _seed_array(b_raw, f"{where}: {spec.baseline}")
            if spec.paired and m_arr.size != b_arr.size:
                raise ClaimError(
                    f"{where}: {spec.method!r} has {m_arr.size} seed(s) and {spec.baseline!r} "
                    f"{b_arr.size}; a paired claim compares variants run on the same seeds "
                    "(run both on the same seeds, or pair over a unit)")
        else:
            b_arr = np.full(m_arr.size, float(spec.threshold))
        n_seeds = int(m_arr.size)
    if (seeds_of is not None and spec.paired and spec.baseline is not None
            and spec.method in seeds_of and spec.baseline in seeds_of
            and list(seeds_of[spec.method]) != list(seeds_of[spec.baseline])):
        raise ClaimError(
            f"{where}: {spec.method!r} ran seeds {list(seeds_of[spec.method])} and "
            f"{spec.baseline!r} {list(seeds_of[spec.baseline])}; a paired claim needs the same")

    m_mean, m_std = _seed_stats(m_arr)
    b_mean, b_std = _seed_stats(b_arr) if b_raw is not None else (float(spec.threshold), 0.0)
    nan_side = [name for name, arr in ((spec.method, m_arr), (reference, b_arr))
                if arr.size == 0 or np.isnan(arr).any()]
    if nan_side:
        difference, lo, hi = math.nan, math.nan, math.nan
        reason = f"NaN or missing values for {', '.join(nan_side)}"
        n_pairs = int(min(m_arr.size, b_arr.size))
    elif not spec.paired:
        difference, lo, hi, reason = _welch(m_arr, b_arr, confidence)
        n_pairs = 0
    else:
        d = m_arr - b_arr
        n_pairs = int(d.size)
        if spec.test == "exact":
            spread = [name for name, arr in ((spec.method, m_arr), (reference, b_arr))
                      if arr.size > 1 and np.ptp(arr) > _EXACT_RTOL * max(1.0, np.abs(arr).max())]
            if spread:
                raise ClaimError(f"{where}: test 'exact' but the values of {spread} vary across "
                                 "seeds; use test 't' for a noisy metric")
        difference = float(np.mean(d))
        lo, hi, reason = _interval(d, spec.test, confidence)
    tol = _tolerance(m_arr, b_arr)
    ci_units = ci_seeds = None
    if spec.unit is not None and not nan_side:
        ci_units = [lo, hi]
        if seed_diffs is not None:
            s_lo, s_hi, _ = _interval(seed_diffs, "t", confidence)
            ci_seeds = [s_lo, s_hi]
            unit_verdict = _verdict(spec.relation, spec.direction, spec.margin, lo, hi, tol)[0]
            lo, hi = min(lo, s_lo), max(hi, s_hi)
            if not reason and unit_verdict != _verdict(spec.relation, spec.direction,
                                                       spec.margin, lo, hi, tol)[0]:
                reason = (f"across {spec.unit}s alone the claim {unit_verdict}, but not across "
                          f"the {n_seeds} seeds")
    verdict, why = _verdict(spec.relation, spec.direction, spec.margin, lo, hi, tol)
    return {
        "claim": spec.claim,
        "metric": spec.metric,
        "method": spec.method,
        "baseline": reference,
        "relation": spec.relation,
        "direction": spec.direction,
        "margin": spec.margin,
        "unit": spec.unit,
        "paired": spec.paired,
        "test": "welch" if not spec.paired else spec.test,
        "method_value": m_mean,
        "baseline_value": b_mean,
        "method_std": m_std,
        "baseline_std": b_std,
        "difference": difference,
        "ci_low": lo,
        "ci_high": hi,
        "ci_level": confidence,
        "ci_units": ci_units,
        "ci_seeds": ci_seeds,
        "n_pairs": n_pairs,
        "n_seeds": n_seeds,
        "verdict": verdict,
        "holds": verdict == "holds",
        "reason": reason or why,
    }


def evaluate_claims(
    specs: Sequence[ClaimSpec | Mapping[str, Any]], metrics: Metrics,
    confidence: float = DEFAULT_CONFIDENCE, seeds_of: Mapping[str, Sequence[int]] | None = None,
) -> list[dict[str, Any]]:
    """Judge every claim; an empty claim list is a configuration error."""
    if not specs:
        raise ValueError("claims: empty; a pipeline must state at least one claim of its paper")
    return [evaluate_claim(spec, metrics, confidence, seeds_of) for spec in specs]


def with_unit_values(
    specs: Sequence[ClaimSpec | Mapping[str, Any]], metrics: Metrics,
    per_unit: Mapping[str, Mapping[str, Any]], pipeline: str,
) -> dict[str, dict[str, Any]]:
    """``metrics`` in which every unit claim's metric, for its method and baseline, is replaced
    by its per-unit values ``per_unit[variant][metric]`` (``{unit: per-seed values}``).

    A unit claim whose variant has no per-unit values of its metric is a named error that lists
    the metrics that do have them.
    """
    out = {variant: dict(values) for variant, values in metrics.items()}
    for spec in specs:
        spec = spec if isinstance(spec, ClaimSpec) else ClaimSpec.model_validate(dict(spec))
        if spec.unit is None:
            continue
        for variant in (spec.method, spec.baseline):
            if variant is None:
                continue
            if spec.metric not in per_unit.get(variant, {}):
                raise ClaimError(
                    f"{pipeline} claim {spec.claim!r}: no per-{spec.unit} values of "
                    f"{spec.metric!r} for {variant!r}; per-{spec.unit} metrics of {variant!r}: "
                    f"{sorted(per_unit.get(variant, {}))}")
            out.setdefault(variant, {})[spec.metric] = per_unit[variant][spec.metric]
    return out


def verdict_counts(claims: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{"holds": n, "fails": n, "inconclusive": n}`` of judged claims."""
    return {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}


def count_fields(claims: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The count keys of a ``claims.json`` document (``counts``, ``n_holds``, ``n_fails``,
    ``n_inconclusive``, ``n_claims``) for ``claims``; a node that changes verdicts after
    :func:`claims_report` refreshes them with ``doc.update(count_fields(doc["claims"]))``."""
    counts = verdict_counts(claims)
    return {"counts": counts, "n_holds": counts["holds"], "n_fails": counts["fails"],
            "n_inconclusive": counts["inconclusive"], "n_claims": len(claims)}


def claims_report(
    pipeline: str,
    specs: Sequence[ClaimSpec | Mapping[str, Any]],
    metrics: Metrics,
    run_info: Mapping[str, Any],
    seeds: Sequence[int],
    title: str = "",
    figures: Sequence[str] = (),
    confidence: float = DEFAULT_CONFIDENCE,
    seeds_of: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Any]:
    """The ``claims.json`` document of a pipeline: header (run info, seeds) plus every verdict.

    Its layout is fixed by ``claims.schema.json`` beside this module (see :func:`claims_schema`).
    ``figures``: the pipeline's key figures, as paths relative to its reporting folder
    (``data/08_reporting/<pipeline>/``); the scorecard shows them inline.
    """
    claims = evaluate_claims(specs, metrics, confidence, seeds_of)
    return _jsonable({
        "pipeline": pipeline,
        "title": title,
        "run": {**dict(run_info), "seeds": list(seeds)},
        "confidence": confidence,
        "claims": claims,
        **count_fields(claims),
        "figures": list(figures),
    })


def claims_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a ``claims.json`` document."""
    text = resources.files("icml25.core").joinpath("claims.schema.json").read_text("utf-8")
    return json.loads(text)


def validate_claims_document(doc: Any, where: str = "claims.json") -> None:
    """Raise :class:`ClaimError` unless ``doc`` follows the schema and its counts match its
    verdicts (the report checks every paper's file with it before building the scorecard)."""
    import jsonschema

    try:
        jsonschema.validate(doc, claims_schema())
    except jsonschema.ValidationError as err:
        path = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ClaimError(f"{where}: not a valid claims document: {err.message} at {path}"
                         ) from None
    counts = verdict_counts(doc["claims"])
    problems = [f"{k} is {doc[k]}, the claims say {n}" for k, n in (
        ("n_holds", counts["holds"]), ("n_fails", counts["fails"]),
        ("n_inconclusive", counts["inconclusive"]), ("n_claims", len(doc["claims"])))
        if doc[k] != n]
    if doc["counts"] != counts:
        problems.append(f"counts is {doc['counts']}, the claims say {counts}")
    problems += [f"claim {c['claim']!r}: holds={c['holds']} with verdict {c['verdict']!r}"
                 for c in doc["claims"] if c["holds"] != (c["verdict"] == "holds")]
    problems += [f"claim {c['claim']!r} holds without a finite interval"
                 for c in doc["claims"] if c["verdict"] == "holds"
                 and (c["ci_low"] is None or c["ci_high"] is None)]
    if problems:
        raise ClaimError(f"{where}: inconsistent claims document: " + "; ".join(problems))


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
    """The ``metrics.json`` document: per variant, each metric's seed mean, std and raw values.

    Per-unit metrics (mappings ``{unit: per-seed values}``) go to ``per_unit`` only: a mean over
    units is not always meaningful, so none is made up here.
    """
    summary: dict[str, dict[str, Any]] = {}
    per_seed: dict[str, dict[str, Any]] = {}
    per_unit: dict[str, dict[str, Any]] = {}
    for variant, values in metrics.items():
        summary[variant], per_seed[variant] = {}, {}
        for metric, value in values.items():
            if isinstance(value, Mapping):
                per_unit.setdefault(variant, {})[metric] = {
                    str(u): np.atleast_1d(np.asarray(v, dtype=float)).tolist()
                    for u, v in value.items()}
                continue
            arr = np.atleast_1d(np.asarray(value, dtype=float))
            mean, std = _seed_stats(arr)
            summary[variant][metric] = mean
            if arr.size > 1:
                summary[variant][f"{metric}_std"] = std
            per_seed[variant][metric] = arr.tolist()
    doc = {
        "pipeline": pipeline,
        "run": {**dict(run_info), "seeds": list(seeds)},
        "metrics": summary,
        "per_seed": per_seed,
    }
    if per_unit:
        doc["per_unit"] = per_unit
    return _jsonable({**doc, **(dict(extra) if extra else {})})
