"""Start-of-run checks: ``kedro run`` refuses a mistyped command line or an output folder it
cannot write before the first node runs, with one line that names what is wrong.

Checked, in this order:

- the config environment: ``--env=tset`` with no ``conf/tset`` folder (Kedro would otherwise
  run on ``conf/base`` alone and fail later on something unrelated);
- the top-level namespaces of ``--params``: ``--params="wavetokn.seeds=[0]"`` names neither a
  pipeline nor a top-level key of the environment's parameters, and would be ignored silently
  (keys *inside* a pipeline's tree are checked by its pydantic model, ``icml25.core.params``);
- the MLflow store: the folder of a ``sqlite:///`` (or file) tracking or registry URI must take
  new files, checked before kedro-mlflow opens the store;
- every folder that a file dataset of the pipelines being run writes to (the data tree, the
  reporting folder) must take new files, checked before the first node;
- in a CPU dry-run environment (``cpu_dry_run: true`` in its globals, as ``conf/paper_check``):
  every room being run has its own ``parameters_<room>.yml`` there (else the run would be the
  full paper config on the CPU) and every ``device`` parameter of those rooms is ``cpu`` (a
  ``cuda`` or ``auto`` device is refused, naming the key and the file to change).

The checks are project hooks (``PREFLIGHT_HOOKS``, registered in ``settings.py``), so a
``KedroSession`` started from Python or a notebook gets them too; they raise
:class:`PreflightError`, which ``icml25.cli``'s ``kedro run`` prints as one line, without a
traceback, as it does a parameter validation error.
"""

from __future__ import annotations

import copy
import difflib
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from icml25.core.config_loader import is_cpu_dry_run

__all__ = [
    "PREFLIGHT_HOOKS",
    "ConfigCheckHook",
    "OutputFolderCheckHook",
    "PreflightError",
    "check_cpu_dry_run",
    "check_environment",
    "check_mlflow_folders",
    "check_parameter_namespaces",
    "check_writable",
    "dataset_folders",
    "store_folder",
]


class PreflightError(RuntimeError):
    """A start-of-run check failed; the message is a single line naming the culprit."""


def _shown(path: Path, root: Path | None = None) -> str:
    """``path`` relative to ``root`` (the project) where it lies inside it, else absolute."""
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix() or "."
        except ValueError:
            pass
    return path.as_posix()


def _closest(name: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return close[0] if close else None


# ------------------------------------------------------------------ environment and --params
def known_environments(conf_source: Path) -> list[str]:
    """The config environments of a ``conf`` folder: its sub-folders, sorted."""
    return sorted(p.name for p in conf_source.iterdir()
                  if p.is_dir() and not p.name.startswith((".", "_")))


def check_environment(env: str | None, conf_source: Path, project_path: Path | None = None) -> None:
    """Raise :class:`PreflightError` if ``env`` is given and ``conf_source/env`` is no folder.

    ``env=None`` (no ``--env``) is Kedro's default run environment and is not checked; nor is a
    packaged configuration (``conf_source`` a ``.zip`` / ``.tar.gz`` archive)."""
    if env is None or not conf_source.is_dir() or (conf_source / env).is_dir():
        return
    known = known_environments(conf_source)
    close = _closest(env, known)
    hint = f"did you mean {close!r}? " if close else ""
    raise PreflightError(
        f"unknown config environment {env!r}: there is no folder "
        f"{_shown(conf_source / env, project_path)}; {hint}environments: {', '.join(known)}")


def check_parameter_namespaces(runtime_params: Mapping[str, Any], pipelines: Iterable[str],
                               parameter_keys: Iterable[str]) -> None:
    """Raise :class:`PreflightError` for a top-level ``--params`` key that is neither a pipeline
    nor a top-level key of the configured parameters (a misspelt namespace)."""
    valid = set(pipelines) | set(parameter_keys)
    unknown = sorted(key for key in runtime_params if key not in valid)
    if not unknown:
        return
    key = unknown[0]
    close = _closest(key, valid)
    hint = (f"did you mean {close!r}?" if close
            else f"namespaces: {', '.join(sorted(valid))}")
    also = f" (also unknown: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
    raise PreflightError(
        f"unknown parameter namespace {key!r} in --params{also}: it is neither a pipeline nor a "
        f"top-level key of the parameters; {hint}")


def configured_parameter_keys(config_loader: Any) -> set[str] | None:
    """Top-level keys of the environment's parameters *without* the runtime ones (``--params``
    merges into the same tree); ``None`` when they cannot be read here (Kedro then reports the
    configuration's own error in its words)."""
    probe = copy.copy(config_loader)
    probe.runtime_params = {}
    try:
        return set(probe["parameters"])
    except Exception:
        return None


# ------------------------------------------------------------------------- output folders
def writable_problem(folder: Path, project_path: Path | None = None) -> str | None:
    """Why files cannot be created in ``folder`` (``None`` if they can).

    A folder that does not exist yet is fine when its nearest existing ancestor is a folder that
    takes a new file (Kedro's datasets create the rest). The probe creates and removes a
    temporary file, which also catches read-only mounts that ``os.access`` misreports."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return f"{_shown(probe, project_path)} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        return f"{_shown(probe, project_path)} is not writable ({err.strerror or err})"
    return None


def check_writable(folder: Path, what: str, project_path: Path | None = None) -> None:
    """Raise :class:`PreflightError` unless ``what`` can be written under ``folder``."""
    problem = writable_problem(folder, project_path)
    if problem is not None:
        raise PreflightError(f"cannot write {what} to {_shown(folder, project_path)}: {problem}")


def store_folder(uri: str | None, project_path: Path) -> Path | None:
    """The local folder an MLflow tracking/registry URI writes into, or ``None`` (a server)."""
    if not uri:
        return None
    if uri.startswith("sqlite:///"):
        return (project_path / uri[len("sqlite:///"):]).parent  # 4 slashes: an absolute path
    if uri.startswith("file://"):
        return Path(uri[len("file://"):])
    if "://" in uri or uri.startswith(("databricks", "http")):
        return None
    return project_path / uri


def _dataset_folder(dataset: Any) -> Path | None:
    """The local folder a file dataset saves into (``None`` for memory, MLflow or remote ones)."""
    if getattr(dataset, "_protocol", "file") not in ("file", "local", None):
        return None
    path = getattr(dataset, "_filepath", None) or getattr(dataset, "_path", None)
    if not path:
        return None
    path = Path(str(path))
    is_folder_dataset = getattr(dataset, "_filepath", None) is None  # PartitionedDataset: _path
    return path if is_folder_dataset or path.is_dir() else path.parent


def dataset_folders(pipeline: Any, catalog: Any) -> dict[Path, list[str]]:
    """``{folder: [dataset names]}`` for every local file dataset that ``pipeline`` writes."""
    folders: dict[Path, list[str]] = {}
    for name in sorted(pipeline.all_outputs()):
        try:
            dataset = catalog.get(name)
        except Exception:  # a dataset that cannot be built fails in Kedro's words, not here
            continue
        folder = _dataset_folder(dataset) if dataset is not None else None
        if folder is not None:
            folders.setdefault(folder, []).append(name)
    return folders


# ---------------------------------------------------------------------------------- hooks
class ConfigCheckHook:
    """``--env``, the ``--params`` namespaces and the MLflow store's folders, first of all the
    ``after_context_created`` hooks (``tryfirst`` and registered last): before the project's
    hooks create the store's folder and before kedro-mlflow opens the store."""

    @hook_impl(tryfirst=True)
    def after_context_created(self, context: Any) -> None:
        loader = context.config_loader
        project_path = Path(context.project_path)
        conf_source = getattr(loader, "conf_source", None)
        if conf_source is not None:
            check_environment(context.env, Path(conf_source), project_path)
        runtime_params = getattr(loader, "runtime_params", None) or {}
        if runtime_params:
            from icml25.pipeline_registry import room_names

            keys = configured_parameter_keys(loader)
            if keys is not None:
                check_parameter_namespaces(runtime_params, room_names(), keys)
        check_mlflow_folders(loader, project_path)


def check_mlflow_folders(config_loader: Any, project_path: Path) -> None:
    """The local folders of the MLflow tracking store, registry and artifact location in
    ``mlflow.yml`` must take new files (a server URI is not checked)."""
    from kedro.config import MissingConfigException

    try:
        conf = config_loader["mlflow"]
    except (MissingConfigException, KeyError):
        return
    server = conf.get("server") or {}
    artifacts = (((conf.get("tracking") or {}).get("experiment") or {})
                 .get("create_experiment_kwargs") or {}).get("artifact_location")
    stores = (
        ("the MLflow store (mlflow_tracking_uri)", server.get("mlflow_tracking_uri")),
        ("the MLflow registry (mlflow_registry_uri)", server.get("mlflow_registry_uri")),
        ("MLflow artifacts (artifact_location)", artifacts),
    )
    for what, uri in stores:
        folder = store_folder(uri, project_path)
        if folder is not None:
            check_writable(folder, what, project_path)


class OutputFolderCheckHook:
    """The folders the file datasets of the pipelines being run write to, before the first
    node (and before kedro-mlflow starts the run's MLflow run)."""

    def __init__(self) -> None:
        self._project_path: Path | None = None

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        self._project_path = Path(context.project_path)

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, pipeline: Any, catalog: Any) -> None:
        for folder, names in dataset_folders(pipeline, catalog).items():
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            check_writable(folder, shown, self._project_path or Path(os.getcwd()))


def _device_keys(tree: Any, parent: str) -> Iterable[tuple[str, Any]]:
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            full = f"{parent}.{key}"
            if key == "device" and not isinstance(value, Mapping):
                yield full, value
            else:
                yield from _device_keys(value, full)


def check_cpu_dry_run(env: str, conf_source: Path, rooms: Mapping[str, Any],
                      project_path: Path | None = None) -> None:
    """Raise :class:`PreflightError` unless each room in ``rooms`` (``{room: its parameters}``)
    has ``conf_source/env/parameters_<room>.yml`` and only ``device: cpu`` parameters."""
    for room in sorted(rooms):
        own = conf_source / env / f"parameters_{room}.yml"
        if not own.is_file():
            raise PreflightError(
                f"{room} has no CPU dry run yet: conf/{env} is a CPU dry run and "
                f"{_shown(own, project_path)} does not exist (without it the run would be the "
                f"full paper config on the CPU); see docs/scale.md")
        for key, value in _device_keys(rooms[room], room):
            if value != "cpu":
                raise PreflightError(
                    f"parameter {key} is {value!r}: conf/{env} is a CPU dry run and runs on the "
                    f"CPU only; set it to cpu in {_shown(own, project_path)}")


class DryRunCheckHook:
    """A CPU dry-run environment (``cpu_dry_run: true`` in its globals) runs the rooms it has
    configured, on the CPU: checked before the first node."""

    def __init__(self) -> None:
        self._env: str | None = None
        self._conf_source: Path | None = None
        self._project_path: Path | None = None

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        self._env = None
        loader = context.config_loader
        if is_cpu_dry_run(loader) and getattr(loader, "conf_source", None) is not None:
            self._env = context.env or loader.default_run_env
            self._conf_source = Path(loader.conf_source)
            self._project_path = Path(context.project_path)

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, pipeline: Any, catalog: Any) -> None:
        if self._env is None or self._conf_source is None:
            return
        from icml25.pipeline_registry import paper_pipeline_names

        papers = set(paper_pipeline_names())
        names = {name.split(":", 1)[1].split(".", 1)[0] for name in pipeline.inputs()
                 if name.startswith("params:")}
        rooms = {}
        for room in sorted(names & papers):
            try:
                rooms[room] = catalog.load(f"params:{room}")
            except Exception:  # the room reads only sub-trees: check those it reads
                rooms[room] = {name: catalog.load(name) for name in pipeline.inputs()
                               if name.startswith(f"params:{room}.")}
        check_cpu_dry_run(self._env, self._conf_source, rooms, self._project_path)


PREFLIGHT_HOOKS = (ConfigCheckHook(), OutputFolderCheckHook(), DryRunCheckHook())
"""Registered after the project's own hooks (``settings.HOOKS``), so that their ``tryfirst``
implementations run before the project's."""
