"""MLflow variant tracking: one child run per variant, identical metric names across variants.

Inside a ``kedro run`` kedro-mlflow has already opened the parent run (named after the
pipeline, in the pipeline's experiment); each variant (the paper's method, each baseline,
each ablation) becomes a nested run under it, so the MLflow UI's compare view lines them up.
Outside Kedro (a notebook, a unit test) the variant runs are top-level runs of the active
experiment.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import mlflow
import numpy as np

from icml25.core.claims import verdict_counts

logger = logging.getLogger(__name__)

Role = Literal["method", "baseline", "ablation"]
_BAD_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_key(name: str) -> str:
    """Make ``name`` a legal MLflow metric key (letters, digits, ``_-. /``)."""
    return _BAD_NAME.sub("_", name)


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten nested parameters to ``a.b.c`` keys with string values (MLflow's param model)."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, full))
        else:
            flat[full] = str(value)[:6000]
    return flat


def check_same_metric_names(metrics_by_variant: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Return the shared metric names, or raise if the variants do not all report the same ones."""
    if not metrics_by_variant:
        raise ValueError("metrics_by_variant: empty; expected at least one variant")
    names = {variant: set(metrics) for variant, metrics in metrics_by_variant.items()}
    reference = next(iter(names.values()))
    mismatched = {v: sorted(n ^ reference) for v, n in names.items() if n != reference}
    if mismatched:
        raise ValueError(
            "variants must report identical metric names so MLflow compares them; "
            f"differences: {mismatched}"
        )
    return sorted(reference)


@contextlib.contextmanager
def variant_run(
    variant: str, *, role: Role, pipeline: str, params: Mapping[str, Any] | None = None,
    run_name: str | None = None,
) -> Iterator[mlflow.ActiveRun]:
    """Open an MLflow run of one variant (nested under the active run if there is one).

    The run named after the variant holds its comparable metrics; other runs of the same
    variant (a training curve per seed, a registered model) pass their own ``run_name``.
    """
    nested = mlflow.active_run() is not None
    with mlflow.start_run(run_name=run_name or variant, nested=nested) as run:
        mlflow.set_tags(
            {"icml25.pipeline": pipeline, "icml25.variant": variant, "icml25.role": role}
        )
        if params:
            mlflow.log_params(flatten_params(params))
        yield run


def log_metrics(metrics: Mapping[str, float], step: int | None = None, *,
                nan_ok: bool = False) -> int:
    """Log finite metrics to the active run and return how many were skipped as non-finite.

    A skipped metric gets a warning each, unless ``nan_ok``: then NaN is a metric that does not
    apply by design (a variant not run on that environment) and the caller reports the count.
    """
    clean = {}
    skipped = 0
    for name, value in metrics.items():
        value = float(value)
        if math.isfinite(value):
            clean[metric_key(name)] = value
        else:
            skipped += 1
            if not nan_ok:
                logger.warning("metric %s is %s; not logged to MLflow", name, value)
    if clean:
        mlflow.log_metrics(clean, step=step)
    return skipped


def seed_mean(values: Any) -> float:
    """The mean over seeds that a variant's MLflow run shows: the mean of the finite values,
    NaN (and no warning) when no seed has one (a variant that does not run there)."""
    arr = np.atleast_1d(np.asarray(values, dtype=float)).ravel()
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else math.nan


def seed_means(metrics_by_variant: Mapping[str, Mapping[str, Any]]
               ) -> dict[str, dict[str, float]]:
    """``{variant: {metric: seed_mean(per-seed values)}}`` of a metrics.json-style mapping."""
    return {variant: {name: seed_mean(values) for name, values in metrics.items()}
            for variant, metrics in metrics_by_variant.items()}


def log_claim_counts(claims: Mapping[str, Any], **extra: float) -> None:
    """A claims report's verdict counts (and ``extra`` metrics) on the active (pipeline) run.

    Metrics ``claims_holding``, ``claims_failing``, ``claims_inconclusive`` and ``claims_total``
    (the numbers the MLflow runs list sorts papers by), and per claim two tags,
    ``claim.NN.verdict`` (holds / fails / inconclusive) and ``claim.NN.claim`` (its sentence).
    """
    judged = claims["claims"]
    counts = verdict_counts(judged)
    log_metrics({"claims_holding": counts["holds"], "claims_failing": counts["fails"],
                 "claims_inconclusive": counts["inconclusive"], "claims_total": len(judged),
                 **extra})
    tags = {}
    for i, c in enumerate(judged, start=1):
        tags[f"claim.{i:02d}.verdict"] = c["verdict"]
        tags[f"claim.{i:02d}.claim"] = str(c["claim"])[:5000]
    mlflow.set_tags(tags)


def log_variants(
    pipeline: str,
    metrics_by_variant: Mapping[str, Mapping[str, float]],
    roles: Mapping[str, Role],
    params_by_variant: Mapping[str, Mapping[str, Any]] | None = None,
    artifacts_by_variant: Mapping[str, list[Path]] | None = None,
    *,
    nan_ok: bool = False,
) -> dict[str, str]:
    """Log every variant as its own run with the same metric names; return variant -> run id.

    ``nan_ok``: NaN marks a metric that does not apply to a variant (identical names across
    variants are required, so a paper with per-environment or per-setting metrics has many);
    they are skipped with one info line for the whole call instead of a warning each.
    """
    check_same_metric_names(metrics_by_variant)
    missing = sorted(set(metrics_by_variant) - set(roles))
    if missing:
        raise ValueError(f"roles: no role given for variants {missing}")
    run_ids = {}
    skipped = 0
    for variant, metrics in metrics_by_variant.items():
        params = (params_by_variant or {}).get(variant)
        with variant_run(variant, role=roles[variant], pipeline=pipeline, params=params) as run:
            skipped += log_metrics(metrics, nan_ok=nan_ok)
            for path in (artifacts_by_variant or {}).get(variant, []):
                mlflow.log_artifact(str(path))
            run_ids[variant] = run.info.run_id
    if nan_ok and skipped:
        logger.info("%s: %d variant metrics are NaN (not applicable to that variant) and are "
                    "not logged to MLflow", pipeline, skipped)
    return run_ids


def variant_run_ids(pipeline: str) -> dict[str, str]:
    """``{variant: run id}`` of ``pipeline``'s variant runs (named after their variant) under the
    active run. The pipeline matters: in ``kedro run`` without ``--pipeline`` every paper's
    variant runs share one parent."""
    active = mlflow.active_run()
    if active is None:
        return {}
    runs = mlflow.search_runs(
        experiment_ids=[active.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{active.info.run_id}'",
        output_format="list",
    )
    return {r.info.run_name: r.info.run_id for r in runs
            if r.data.tags.get("icml25.variant") == r.info.run_name
            and r.data.tags.get("icml25.pipeline") == pipeline}
