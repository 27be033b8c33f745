"""Finds every pipeline room under ``icml25/pipelines`` and registers it.

A room is a package ``icml25.pipelines.<name>`` with a ``pipeline.py`` that defines
``create_pipeline()`` and ``PARAMETERS`` (the pydantic model of ``params:<name>``). Adding a
paper means adding a room; nothing here changes. ``report`` is built last from the list of
paper rooms so that in ``__default__`` it runs after every paper's ``<name>.claims`` exists.

A room may also define ``STUDIES = {"<name>": create_study_pipeline}``: extra pipelines of the
same paper (wavetoken's compute-scaling study, ``wavetoken_scaling``) registered under their own
names. Studies are not papers: they are left out of ``__default__`` and of the scorecard, and a
user runs them by name.

Registering imports every room's ``pipeline.py``, ``params.py`` and ``nodes.py`` (Kedro does
so for ``kedro run --pipeline=report`` and ``kedro registry list`` too), so those modules
import their heavy libraries (torch, scipy, scikit-learn, mlflow, ...) where they are used,
inside the node functions or through :func:`icml25.core.lazy_import.lazy_module`; the registry
then builds without loading any of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import warnings
from functools import cache
from types import ModuleType

from kedro.pipeline import Pipeline
from pydantic import BaseModel

import icml25.pipelines

REPORT = "report"


@cache
def room_names() -> tuple[str, ...]:
    """Names of the room packages (those with a ``pipeline.py``), sorted; imports none of them."""
    names = []
    for info in pkgutil.iter_modules(icml25.pipelines.__path__):
        if info.ispkg and importlib.util.find_spec(f"icml25.pipelines.{info.name}.pipeline"):
            names.append(info.name)
    return tuple(sorted(names))


@cache
def _rooms() -> dict[str, ModuleType]:
    rooms = {}
    for name in room_names():
        module = importlib.import_module(f"icml25.pipelines.{name}.pipeline")
        if not hasattr(module, "create_pipeline") or not hasattr(module, "PARAMETERS"):
            raise ImportError(
                f"icml25/pipelines/{name}/pipeline.py must define create_pipeline() and PARAMETERS"
            )
        rooms[name] = module
    return rooms


def paper_pipeline_names() -> list[str]:
    """Names of the registered paper pipelines (every room but ``report``), sorted."""
    return [name for name in room_names() if name != REPORT]


def parameter_models() -> dict[str, type[BaseModel]]:
    """``{pipeline name: pydantic model of params:<name>}`` for every room."""
    return {name: module.PARAMETERS for name, module in _rooms().items()}


def study_pipelines() -> dict[str, tuple[str, object]]:
    """``{study name: (room, create function)}`` of every room's ``STUDIES``."""
    studies: dict[str, tuple[str, object]] = {}
    for room, module in _rooms().items():
        for name, create in getattr(module, "STUDIES", {}).items():
            if name in room_names() or name in studies or name in (REPORT, "__default__"):
                raise ImportError(f"icml25/pipelines/{room}/pipeline.py: study name {name!r} "
                                  "is already a pipeline name")
            studies[name] = (room, create)
    return studies


def register_pipelines() -> dict[str, Pipeline]:
    """Every paper pipeline by name, ``report``, ``__default__`` = all papers, then report, and
    the rooms' studies (not in ``__default__``)."""
    papers = paper_pipeline_names()
    pipelines: dict[str, Pipeline] = {name: _rooms()[name].create_pipeline() for name in papers}
    studies = {name: create() for name, (_room, create) in study_pipelines().items()}
    with warnings.catch_warnings():
        # The scorecard reads every paper's namespaced `<name>.claims`; a node outside those
        # namespaces reading them is the report's purpose, not a naming mistake.
        warnings.filterwarnings("ignore", message="One or more dataset names contain '.'")
        pipelines[REPORT] = _rooms()[REPORT].create_pipeline(papers=papers)
    # one Pipeline of all of them (summing them pairwise re-sorts the growing graph 20 times)
    pipelines["__default__"] = Pipeline(list(pipelines.values()))
    return {**pipelines, **studies}
