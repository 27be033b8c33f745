"""Project hooks: run metadata, one MLflow experiment per pipeline (tagged for MLflow 3's
model-training view) with runs closed as FINISHED, FAILED or KILLED, parameter validation,
rank-0-only writing under torchrun, the Dask cluster settings, and kedro-mlflow's hook with
parameters logged once per run."""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import subprocess
from pathlib import Path
from typing import Any

import mlflow
from kedro.config import MissingConfigException
from kedro.framework.context import KedroContext
from kedro.framework.hooks import hook_impl
from kedro.io import DataCatalog
from kedro.pipeline import Pipeline
from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

from icml25.core.params import validate_parameters
from icml25.core.tracking import COMMIT_TAG, ENV_TAG, tag_experiment_kind

logger = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "icml25"


def git_commit(project_path: Path) -> str:
    """Short commit of the working tree, with ``+dirty`` when it has changes; ``unknown`` if no git."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=project_path, capture_output=True,
            text=True, timeout=10, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=project_path,
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}+dirty" if dirty else sha


def absolute_sqlite_uri(uri: str | None, project_path: Path) -> str | None:
    """``sqlite:///mlflow.db`` -> ``sqlite:////abs/project/mlflow.db``; other URIs unchanged."""
    prefix = "sqlite:///"
    if not uri or not uri.startswith(prefix) or uri.startswith(prefix + "/"):
        return uri
    return prefix + (project_path / uri[len(prefix):]).resolve().as_posix()


def sqlite_path(uri: str | None) -> Path | None:
    """The file of an absolute ``sqlite:////abs/file.db`` URI; ``None`` for other URIs."""
    prefix = "sqlite:///"
    if not uri or not uri.startswith(prefix + "/"):
        return None
    return Path(uri[len(prefix):])


def experiment_name(pipeline_names: list[str] | None) -> str:
    """``kedro run --pipeline=wavetoken`` logs to experiment ``wavetoken``; the default to ``icml25``."""
    names = [n for n in (pipeline_names or []) if n != "__default__"]
    return "+".join(names) if names else DEFAULT_EXPERIMENT


class RunInfoHook:
    """Puts ``run_info`` (config env, UTC date, git commit) into the catalog for claims headers,
    and the env and commit on the pipeline's MLflow run as tags (``icml25.env``,
    ``icml25.commit``): the model registry reads them to register only base/local/paper runs."""

    def __init__(self) -> None:
        self._env: str | None = None
        self._commit: str | None = None
        self._project_path: Path | None = None

    @hook_impl
    def after_context_created(self, context: KedroContext) -> None:
        self._env = context.env or "local"
        self._project_path = Path(context.project_path)

    @hook_impl
    def after_catalog_created(self, catalog: DataCatalog) -> None:
        self._commit = git_commit(self._project_path or Path.cwd())
        catalog["run_info"] = {
            "env": self._env or "local",
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": self._commit,
        }

    @hook_impl(trylast=True)
    def before_pipeline_run(self) -> None:
        """After kedro-mlflow has opened the pipeline run: tag it with env and commit."""
        if mlflow.active_run() is not None:
            mlflow.set_tags({ENV_TAG: self._env or "local", COMMIT_TAG: self._commit or
                             git_commit(self._project_path or Path.cwd())})


class PipelineExperimentHook:
    """Points kedro-mlflow at an experiment named after the pipeline being run.

    kedro-mlflow reads one experiment name from ``mlflow.yml``; running before its own
    ``before_pipeline_run`` (``tryfirst``), this hook switches it to the pipeline's name so each
    paper's runs live in their own experiment, with the Kedro run as the parent run.

    Every experiment it points at (and kedro-mlflow's default one from ``mlflow.yml``, and
    MLflow's own ``Default``) gets MLflow 3's experiment-kind tag for model training, so the UI
    opens on runs and metrics, not on GenAI traces.

    It also closes the Kedro run completely at the end: kedro-mlflow re-opens the parent run
    before every node (for thread safety), and MLflow 3 stacks each re-opening, so its single
    ``end_run`` would leave the run RUNNING and still active for the next session in the process.
    The status says how the pipeline ended: FINISHED, FAILED (an exception, which Kedro passes
    to ``on_pipeline_error``) or KILLED. Kedro calls neither hook for a ``KeyboardInterrupt``
    (Ctrl-C) or ``SystemExit``; a pipeline that is still in progress when the process exits, or
    when the next Kedro session of the same process starts, was interrupted, and its runs are
    closed as KILLED then (instead of MLflow's exit handler marking them FINISHED).
    """

    def __init__(self) -> None:
        self._context: KedroContext | None = None
        self._outer_run: str | None = None
        self._in_progress = False
        self._exit_handler = False

    @hook_impl(tryfirst=True)
    def after_context_created(self, context: KedroContext) -> None:
        """Before kedro-mlflow reads ``mlflow.yml``: anchor a relative sqlite store at the project
        root, so a notebook in ``notebooks/`` or a second project in the same process never
        opens another ``mlflow.db`` (MLflow caches stores by URI string). A pipeline of this
        process still in progress was interrupted: its runs are closed as KILLED before
        kedro-mlflow would adopt the still active run as the new session's."""
        if self._in_progress:
            self._close_runs("KILLED")
        self._context = context
        try:
            conf = context.config_loader["mlflow"]
        except MissingConfigException:
            return
        server = dict(conf.get("server") or {})
        uri = server.get("mlflow_tracking_uri")
        resolved = absolute_sqlite_uri(uri, Path(context.project_path))
        if (db := sqlite_path(resolved)) is not None:  # conf/test: data/test/mlflow.db
            db.parent.mkdir(parents=True, exist_ok=True)
        if resolved != uri:
            server["mlflow_tracking_uri"] = resolved
            context.config_loader["mlflow"] = {**conf, "server": server}

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params: dict[str, Any]) -> None:
        if self._in_progress:  # the previous pipeline of this process was interrupted
            self._close_runs("KILLED")
        active = mlflow.active_run()
        self._outer_run = active.info.run_id if active else None
        self._in_progress = True
        if not self._exit_handler:  # after MLflow's own handler, so it runs before it
            atexit.register(self._close_interrupted)
            self._exit_handler = True
        config = getattr(self._context, "mlflow", None)
        if config is None:  # kedro-mlflow disabled or not installed
            return
        client = config.server._mlflow_client
        default = client.get_experiment_by_name(config.tracking.experiment.name)
        names = run_params.get("pipeline_names") or [run_params.get("pipeline_name")]
        config.tracking.experiment.name = experiment_name([n for n in names if n])
        config._set_experiment()  # kedro-mlflow's own routine: create/restore + activate
        current = client.get_experiment_by_name(config.tracking.experiment.name)
        mlflows_own = client.get_experiment_by_name("Default")  # in every new store
        for experiment in {e.experiment_id for e in (default, current, mlflows_own)
                           if e is not None}:
            tag_experiment_kind(experiment, client)

    def _close_runs(self, status: str) -> None:
        self._in_progress = False
        while (active := mlflow.active_run()) is not None and active.info.run_id != self._outer_run:
            mlflow.end_run(status)

    def _close_interrupted(self) -> None:
        """At process exit: a pipeline still in progress was interrupted (Ctrl-C, SystemExit)."""
        active = mlflow.active_run()
        if self._in_progress and active is not None and active.info.run_id != self._outer_run:
            logger.warning("pipeline interrupted: its MLflow runs are marked KILLED")
        if self._in_progress:
            self._close_runs("KILLED")

    @hook_impl(trylast=True)
    def after_pipeline_run(self) -> None:
        self._close_runs("FINISHED")

    @hook_impl(trylast=True)
    def on_pipeline_error(self) -> None:
        self._close_runs("FAILED")


class ParameterValidationHook:
    """Validates each pipeline's parameter tree against its pydantic model before any node runs."""

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, pipeline: Pipeline, catalog: DataCatalog) -> None:
        from icml25.pipeline_registry import parameter_models

        inputs = pipeline.inputs()
        for name, model in parameter_models().items():
            key = f"params:{name}"
            if any(i == key or i.startswith(key + ".") for i in inputs):
                validate_parameters(model, catalog.load(key), name)


class DistributedRankHook:
    """Makes ``torchrun --nproc_per_node=N -m kedro run ...`` write everything exactly once.

    Under torchrun every rank runs the whole Kedro session (data preparation is deterministic,
    so every rank builds the same inputs), and the training nodes train data-parallel through
    :mod:`icml25.core.distributed`. Rank 0 persists outputs and logs to MLflow as usual; on the
    other ranks this hook keeps every dataset the pipeline produces in memory and points MLflow
    at a throw-away store, so no file or run is written twice.
    """

    def __init__(self) -> None:
        self._scratch: Path | None = None

    @staticmethod
    def _rank() -> int:
        import os

        if "WORLD_SIZE" not in os.environ:  # not under torchrun: no need to import torch
            return 0
        from icml25.core.distributed import context_from_env

        return context_from_env().rank

    @hook_impl(tryfirst=True)
    def after_context_created(self, context: KedroContext) -> None:
        if self._rank() == 0:
            return
        import tempfile

        self._scratch = Path(tempfile.mkdtemp(prefix=f"icml25-rank{self._rank()}-"))
        try:
            conf = context.config_loader["mlflow"]
        except MissingConfigException:
            return
        server = {**(conf.get("server") or {}),
                  "mlflow_tracking_uri": f"sqlite:///{self._scratch / 'mlflow.db'}"}
        context.config_loader["mlflow"] = {**conf, "server": server}

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, pipeline: Any, catalog: Any) -> None:
        if self._rank() == 0:
            return
        from kedro.io import MemoryDataset

        for name in pipeline.all_outputs():
            catalog[name] = MemoryDataset(copy_mode="assign")

    @hook_impl(trylast=True)
    def after_pipeline_run(self) -> None:
        if self._scratch is not None:
            import shutil

            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


class MlflowParamsOnceHook(MlflowHook):
    """kedro-mlflow's hook, logging each node parameter once per run instead of once per node.

    kedro-mlflow logs every flattened ``params:`` input of every node before the node runs, one
    MLflow call per key: 78 keys read by 20 wavetoken nodes made 1 560 calls a run. MLflow
    parameters are immutable within a run, so after the first node the calls only repeat what is
    stored; this subclass skips a key already logged with the same value in the same run (a key
    logged with a *different* value still reaches MLflow, which refuses it as before).
    Registered in place of the plugin's own instance (``DISABLE_HOOKS_FOR_PLUGINS`` in settings).
    """

    def __init__(self) -> None:
        super().__init__()
        self._logged: dict[str, str] = {}
        self._logged_run: str | None = None

    def _log_param(self, name: str, value: Any) -> None:
        if self.run_id != self._logged_run:
            self._logged, self._logged_run = {}, self.run_id
        text = str(value)
        if self._logged.get(name) == text:
            return None
        super()._log_param(name, value)
        self._logged[name] = text
        return None


class DaskConfigHook:
    """Hands ``conf/<env>/dask.yml`` to :class:`icml25.runners.DaskRunner` (a runner has no
    config loader of its own), so ``--env`` picks the cluster like it picks parameters."""

    @hook_impl
    def after_context_created(self, context: KedroContext) -> None:
        from icml25.runners.dask import configure

        try:
            config = context.config_loader["dask"]
        except (KeyError, MissingConfigException):
            config = {}
        configure(config)


HOOKS = (
    RunInfoHook(), PipelineExperimentHook(), ParameterValidationHook(), DistributedRankHook(),
    DaskConfigHook(), MlflowParamsOnceHook(),
)
