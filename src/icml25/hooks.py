"""Project hooks: run metadata, one MLflow experiment per pipeline (tagged for MLflow 3's
model-training view) with runs closed as FINISHED, FAILED or KILLED, parameter validation,
rank-0-only writing under torchrun, the Dask cluster settings, and kedro-mlflow's hook with
parameters logged once per run.

Kedro imports this module (through ``settings.py``) wherever it configures the project, so it
imports neither MLflow nor kedro-mlflow (1 s of ``import icml25.settings``): ``mlflow`` is bound
on first use (:func:`icml25.core.lazy_import.lazy_module`), and :class:`MlflowParamsOnceHook`, a
subclass of kedro-mlflow's hook, is defined on first access. :data:`HOOKS` is a
:class:`DeferredHooks`: Kedro reads its items when a session registers its hooks, and only then
is kedro-mlflow's hook built. (A ``kedro`` command imports MLflow all the same: kedro-mlflow's
CLI plugin, which Kedro loads for every command of a project, imports it at its top.)
"""

from __future__ import annotations

import atexit
import datetime as dt
import importlib.util
import logging
import subprocess
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from kedro.config import MissingConfigException
from kedro.framework.context import KedroContext
from kedro.framework.hooks import hook_impl
from kedro.io import DataCatalog
from kedro.pipeline import Pipeline

from icml25.core.lazy_import import lazy_module
from icml25.core.params import validate_parameters
from icml25.core.tracking import COMMIT_TAG, ENV_TAG, tag_experiment_kind

mlflow = lazy_module("mlflow")

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
        from icml25.pipeline_registry import parameter_model, room_names

        inputs = pipeline.inputs()
        for name in room_names():  # imports only the rooms whose parameters the run reads
            key = f"params:{name}"
            if any(i == key or i.startswith(key + ".") for i in inputs):
                validate_parameters(parameter_model(name), catalog.load(key), name)


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


#: Packages that do not depend on kedro-mlflow, so none of their dataset types is one of its
#: metric datasets (or a subclass of one).
_WITHOUT_KEDRO_MLFLOW = ("kedro.io", "kedro_datasets")
#: kedro's own prefixes for a short dataset ``type`` (``pandas.CSVDataset``), tried in this order.
_TYPE_PREFIXES = ("kedro.io.", "kedro_datasets.", "")
#: kedro-mlflow's artifact wrapper, as its package exports it and where it is defined.
_ARTIFACT_DATASET = ("kedro_mlflow.io.artifacts.MlflowArtifactDataset",
                     "kedro_mlflow.io.artifacts.mlflow_artifact_dataset.MlflowArtifactDataset")


def _module_of_type(kind: str) -> str | None:
    """The module kedro loads the dataset ``type`` ``kind`` from, found without importing it;
    ``None`` where none of kedro's candidates is a module."""
    module = kind.rpartition(".")[0]
    for prefix in _TYPE_PREFIXES:
        candidate = (prefix + module).strip(".")
        if not candidate:
            continue
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except (ImportError, ValueError):  # a parent package that does not exist
            continue
    return None


def cannot_be_a_metric_dataset(config: Any) -> bool:
    """Whether a catalog entry's config builds a dataset that is certainly not one of
    kedro-mlflow's metric datasets, told from its ``type`` alone (nothing is imported or built):
    a type of kedro or kedro-datasets, or kedro-mlflow's artifact wrapper around one."""
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        return False
    kind = config["type"]
    module = _module_of_type(kind)
    if module is None:
        return False
    if any(module == p or module.startswith(p + ".") for p in _WITHOUT_KEDRO_MLFLOW):
        return True
    if f"{module}.{kind.rpartition('.')[2]}" in _ARTIFACT_DATASET:
        wrapped = config.get("dataset")  # its instances are subclasses of the wrapped type
        return cannot_be_a_metric_dataset({"type": wrapped} if isinstance(wrapped, str) else wrapped)
    return False


class _MetricDatasetCandidates:
    """The catalog as kedro-mlflow's ``after_catalog_created`` sees it through
    :class:`MlflowParamsOnceHook`: ``items()`` leaves out the entries that
    :func:`cannot_be_a_metric_dataset`, so they stay unbuilt (kedro builds a dataset when a node
    uses it); everything else is the catalog's own."""

    def __init__(self, catalog: Any) -> None:
        self._catalog = catalog

    def items(self) -> list[tuple[str, Any]]:
        configs = self._catalog.config_resolver.config
        return [(name, self._catalog[name]) for name in self._catalog
                if not cannot_be_a_metric_dataset(configs.get(name))]

    def __getitem__(self, name: str) -> Any:
        return self._catalog[name]

    def __setitem__(self, name: str, dataset: Any) -> None:
        self._catalog[name] = dataset

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)


@cache
def _mlflow_params_once_hook_class() -> type:
    """Defines :class:`MlflowParamsOnceHook` (importing kedro-mlflow, and MLflow with it)."""
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    class MlflowParamsOnceHook(MlflowHook):
        """kedro-mlflow's hook, logging each node parameter once per run instead of once per
        node.

        kedro-mlflow logs every flattened ``params:`` input of every node before the node runs,
        one MLflow call per key: 78 keys read by 20 wavetoken nodes made 1 560 calls a run.
        MLflow parameters are immutable within a run, so after the first node the calls only
        repeat what is stored; this subclass skips a key already logged with the same value in
        the same run (a key logged with a *different* value still reaches MLflow, which refuses
        it as before). Registered in place of the plugin's own instance
        (``DISABLE_HOOKS_FOR_PLUGINS`` in settings).

        After the catalog is created kedro-mlflow names each of its metric datasets that has no
        key after its catalog entry, looking at every dataset of the catalog, which builds all
        of them: building the matplotlib ones imports pyplot (0.2-0.4 s of every ``kedro run``,
        whichever pipeline runs). Here it looks at the same datasets except those whose type
        cannot be a metric dataset (:func:`cannot_be_a_metric_dataset`), which stay unbuilt.
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

        @hook_impl
        def after_catalog_created(
            self, catalog: Any, conf_catalog: dict[str, Any], conf_creds: dict[str, Any],
            parameters: dict[str, Any], save_version: str, load_versions: dict[str, str],
        ) -> None:
            super().after_catalog_created(
                _MetricDatasetCandidates(catalog), conf_catalog, conf_creds, parameters,
                save_version, load_versions)

    # pickled, and shown, as icml25.hooks.MlflowParamsOnceHook (the module attribute below)
    MlflowParamsOnceHook.__module__ = __name__
    MlflowParamsOnceHook.__qualname__ = "MlflowParamsOnceHook"
    return MlflowParamsOnceHook


def __getattr__(name: str) -> Any:
    # MlflowParamsOnceHook subclasses kedro-mlflow's hook: defined when first asked for
    if name == "MlflowParamsOnceHook":
        return _mlflow_params_once_hook_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DeferredHooks(Sequence):
    """A tuple of hook instances built the first time an item is read, then kept.

    Kedro reads ``settings.HOOKS`` only when a session registers its hooks (iterating it), so
    what ``build`` imports (kedro-mlflow, MLflow) is imported by the commands that run a
    session, not by ``kedro registry list``. ``a + b`` (either a :class:`DeferredHooks` or a
    tuple of hooks) is a :class:`DeferredHooks` too, built in that order; unpacking one into a
    tuple (``(*HOOKS, ...)``) builds it. ``bool()`` does not (Kedro's settings loader asks it):
    like a plain object, a :class:`DeferredHooks` is always true.
    """

    def __init__(self, build: Callable[[], Iterable[object]]) -> None:
        self._build: Callable[[], Iterable[object]] | None = build
        self._hooks: tuple[object, ...] = ()

    def _built(self) -> tuple[object, ...]:
        if self._build is not None:
            self._hooks, self._build = tuple(self._build()), None
        return self._hooks

    @property
    def built(self) -> bool:
        """Whether the hook instances exist yet."""
        return self._build is None

    def __getitem__(self, index: Any) -> Any:
        return self._built()[index]

    def __len__(self) -> int:
        return len(self._built())

    def __bool__(self) -> bool:
        return True

    def __add__(self, other: Iterable[object]) -> DeferredHooks:
        return DeferredHooks(lambda: (*self, *other))

    def __radd__(self, other: Iterable[object]) -> DeferredHooks:
        return DeferredHooks(lambda: (*other, *self))

    def __repr__(self) -> str:
        if not self.built:
            return "DeferredHooks(<not built yet>)"
        return f"DeferredHooks({self._hooks!r})"


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


HOOKS = DeferredHooks(lambda: (
    RunInfoHook(), PipelineExperimentHook(), ParameterValidationHook(), DistributedRankHook(),
    DaskConfigHook(), _mlflow_params_once_hook_class()(),
))
