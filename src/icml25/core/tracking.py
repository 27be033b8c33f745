"""MLflow variant tracking: one child run per variant, identical metric names across variants.

Inside a ``kedro run`` kedro-mlflow has already opened the parent run (named after the
pipeline, in the pipeline's experiment); each variant (the paper's method, each baseline,
each ablation) becomes a nested run under it, so the MLflow UI's compare view lines them up.
Outside Kedro (a notebook, a unit test) the variant runs are top-level runs of the active
experiment.

The other runs of a variant (a training curve per seed, the registered model) are children of
that variant's run, so the UI lists ``parent -> variant -> training/seed k``. Experiments carry
the kind tag that makes MLflow 3's UI open in its model-training view (:func:`tag_experiment_kind`),
and models are registered only from the runs of the environments in :data:`REGISTRY_ENVS`, with
the environment and commit as version tags and the alias :data:`NEWEST_ALIAS` on the newest
version (:func:`register_logged_model`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from icml25.core.claims import verdict_counts
from icml25.core.lazy_import import lazy_module

# imported on first use: icml25.hooks, read by every `kedro` command, imports the tag names below
mlflow = lazy_module("mlflow")

logger = logging.getLogger(__name__)

Role = Literal["method", "baseline", "ablation"]
_BAD_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")

#: MLflow 3's experiment-kind tag; ``custom_model_development`` is the UI's "Machine learning"
#: kind (runs, metrics, models), where an untagged experiment opens in the GenAI traces view.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: Tags of the Kedro pipeline run (set by ``icml25.hooks.RunInfoHook``) read by the registry.
ENV_TAG = "icml25.env"
COMMIT_TAG = "icml25.commit"
#: Config environments whose runs register models; a conf/test run logs the model in its run
#: but adds no registry version.
REGISTRY_ENVS = ("base", "local", "paper")
#: Alias moved to the newest registered version (MLflow reserves ``latest``).
NEWEST_ALIAS = "newest"
_PARENT_TAG = "mlflow.parentRunId"


def tag_experiment_kind(experiment_id: str, client: mlflow.MlflowClient | None = None) -> bool:
    """Give the experiment the model-training kind tag unless it already has a kind; return
    whether it was set."""
    client = client or mlflow.MlflowClient()
    if EXPERIMENT_KIND_TAG in client.get_experiment(experiment_id).tags:
        return False
    client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return True


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


def _quote(value: str) -> str:
    if "'" in value:
        raise ValueError(f"MLflow run and variant names may not contain a quote: {value!r}")
    return f"'{value}'"


def _variant_main_run(variant: str, pipeline: str, parent: mlflow.ActiveRun) -> str | None:
    """Id of ``variant``'s own run (named after it) directly under ``parent``, if it exists."""
    runs = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=(f"tags.{_PARENT_TAG} = {_quote(parent.info.run_id)} "
                       f"and attributes.run_name = {_quote(variant)} "
                       f"and tags.`icml25.variant` = {_quote(variant)} "
                       f"and tags.`icml25.pipeline` = {_quote(pipeline)}"),
        order_by=["attributes.start_time ASC"], output_format="list",
    )
    return runs[0].info.run_id if runs else None


def _open_variant_main_run(variant: str, role: Role, pipeline: str,
                           parent: mlflow.ActiveRun) -> mlflow.ActiveRun:
    """Start (resume or create) ``variant``'s own run under ``parent``.

    Two workers (Dask, threads) may open the same variant at once: each one that creates a run
    looks again, and the oldest run wins (the loser's empty run is deleted), so the variant
    keeps one run whose children are every worker's training runs.
    """
    existing = _variant_main_run(variant, pipeline, parent)
    if existing is not None:
        return mlflow.start_run(run_id=existing, nested=True)
    created = mlflow.start_run(run_name=variant, nested=True)
    mlflow.set_tags({"icml25.pipeline": pipeline, "icml25.variant": variant, "icml25.role": role})
    oldest = _variant_main_run(variant, pipeline, parent)
    if oldest in (None, created.info.run_id):
        return created
    mlflow.end_run()
    mlflow.MlflowClient().delete_run(created.info.run_id)
    return mlflow.start_run(run_id=oldest, nested=True)


@contextlib.contextmanager
def _tagged_run(run: mlflow.ActiveRun, variant: str, role: Role, pipeline: str,
                params: Mapping[str, Any] | None) -> Iterator[mlflow.ActiveRun]:
    """The started ``run`` with the variant's tags, ended FINISHED, FAILED on an exception, or
    KILLED on Ctrl-C (``mlflow.start_run`` as a context manager would say FAILED)."""
    status = "FAILED"
    try:
        mlflow.set_tags(
            {"icml25.pipeline": pipeline, "icml25.variant": variant, "icml25.role": role}
        )
        if params:
            mlflow.log_params(flatten_params(params))
        yield run
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        mlflow.end_run(status)


@contextlib.contextmanager
def variant_run(
    variant: str, *, role: Role, pipeline: str, params: Mapping[str, Any] | None = None,
    run_name: str | None = None,
) -> Iterator[mlflow.ActiveRun]:
    """Open an MLflow run of one variant (nested under the active run if there is one).

    The run named after the variant holds its comparable metrics; other runs of the same
    variant (a training curve per seed, a registered model) pass their own ``run_name`` and,
    under an active run, become children of the variant's run: it is resumed when an earlier
    node made it and created otherwise (:func:`log_variants` then resumes it for the metrics),
    so the UI shows ``parent -> variant -> variant/training/seed k``. With no active run every
    call is a top-level run.
    """
    parent = mlflow.active_run()
    own = run_name is None or run_name == variant
    if parent is None:
        with _tagged_run(mlflow.start_run(run_name=run_name or variant), variant, role,
                         pipeline, params) as run:
            yield run
        return
    main = _open_variant_main_run(variant, role, pipeline, parent)
    if own:
        with _tagged_run(main, variant, role, pipeline, params) as run:
            yield run
        return
    with (_tagged_run(main, variant, role, pipeline, None),
          _tagged_run(mlflow.start_run(run_name=run_name, nested=True), variant, role,
                      pipeline, params) as run):
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
        order_by=["attributes.start_time ASC"], output_format="list",
    )
    ids: dict[str, str] = {}
    for r in runs:  # the oldest of a name wins, as in _variant_main_run
        if (r.data.tags.get("icml25.variant") == r.info.run_name
                and r.data.tags.get("icml25.pipeline") == pipeline):
            ids.setdefault(r.info.run_name, r.info.run_id)
    return ids


def _pipeline_run_tags(run_id: str | None, client: mlflow.MlflowClient) -> dict[str, str]:
    """:data:`ENV_TAG` and :data:`COMMIT_TAG` of the nearest run up the parent chain that has
    them (the Kedro pipeline run, above the variant run that logs a model)."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    while run_id and run_id not in seen and len(found) < 2:
        seen.add(run_id)
        tags = client.get_run(run_id).data.tags
        for key in (ENV_TAG, COMMIT_TAG):
            if key in tags:
                found.setdefault(key, tags[key])
        run_id = tags.get(_PARENT_TAG)
    return found


def register_logged_model(model_uri: str, name: str) -> Any | None:
    """Register a model logged in the active run as a new version of ``name``.

    Only a run of a config environment in :data:`REGISTRY_ENVS` registers (its pipeline run
    carries the environment); the version gets the tags ``env`` and ``commit`` and the alias
    :data:`NEWEST_ALIAS` moves to it (``models:/<name>@newest``). Anything else (a conf/test
    run, a run outside Kedro) leaves the registry alone and returns ``None``: the model stays
    logged in its run (``runs:/<run id>/...``).
    """
    client = mlflow.MlflowClient()
    active = mlflow.active_run()
    tags = _pipeline_run_tags(active.info.run_id if active else None, client)
    env = tags.get(ENV_TAG)
    if env not in REGISTRY_ENVS:
        logger.info("%s: model not registered (config env %s; the registry takes %s runs)",
                    name, env or "unknown", "/".join(REGISTRY_ENVS))
        return None
    version = mlflow.register_model(
        model_uri, name, tags={"env": env, "commit": tags.get(COMMIT_TAG, "unknown")})
    client.set_registered_model_alias(name, NEWEST_ALIAS, version.version)
    logger.info("%s: registered version %s (env %s), alias %r", name, version.version, env,
                NEWEST_ALIAS)
    return version
