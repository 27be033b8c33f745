"""Finds every pipeline room under ``icml25/pipelines`` and registers it.

A room is a package ``icml25.pipelines.<name>`` with a ``pipeline.py`` that defines
``create_pipeline()`` and ``PARAMETERS`` (the pydantic model of ``params:<name>``). Adding a
paper means adding a room; nothing here changes. ``report`` is built last from the list of
paper rooms so that in ``__default__`` it runs after every paper's ``<name>.claims`` exists.

A room may also define ``STUDIES = {"<name>": create_study_pipeline}``: extra pipelines of the
same paper (wavetoken's compute-scaling study, ``wavetoken_scaling``) registered under their own
names. Studies are not papers: they are left out of ``__default__`` and of the scorecard, and a
user runs them by name.

Each pipeline is built when it is first read (:class:`ProjectPipelines`): ``kedro run
--pipeline=<name>`` imports that room alone (the report needs only the papers' names), while
``kedro registry list``, kedro-viz and ``__default__`` import every room's ``pipeline.py``,
``params.py`` and ``nodes.py``. Those modules therefore import their heavy libraries (torch,
scipy, scikit-learn, mlflow, ...) where they are used, inside the node functions or through
:func:`icml25.core.lazy_import.lazy_module`; the registry then builds without loading any of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import warnings
from collections.abc import Iterator, Mapping
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
def room(name: str) -> ModuleType:
    """The ``pipeline.py`` module of room ``name``, imported (and checked) on first use."""
    if name not in room_names():
        raise KeyError(name)
    module = importlib.import_module(f"icml25.pipelines.{name}.pipeline")
    if not hasattr(module, "create_pipeline") or not hasattr(module, "PARAMETERS"):
        raise ImportError(
            f"icml25/pipelines/{name}/pipeline.py must define create_pipeline() and PARAMETERS"
        )
    return module


def _rooms() -> dict[str, ModuleType]:
    return {name: room(name) for name in room_names()}


def paper_pipeline_names() -> list[str]:
    """Names of the registered paper pipelines (every room but ``report``), sorted."""
    return [name for name in room_names() if name != REPORT]


def parameter_models() -> dict[str, type[BaseModel]]:
    """``{pipeline name: pydantic model of params:<name>}`` for every room."""
    return {name: module.PARAMETERS for name, module in _rooms().items()}


def parameter_model(name: str) -> type[BaseModel]:
    """The pydantic model of ``params:<name>``; imports that room only."""
    return room(name).PARAMETERS


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


class ProjectPipelines(Mapping[str, Pipeline]):
    """The project's pipelines by name, each built on first access.

    ``kedro run --pipeline=report`` reads one entry, so it imports the report room and none of
    the papers' (the report needs only their names); ``__default__`` builds every paper and the
    report; listing the names (``kedro registry list``, kedro-viz) imports every room, because a
    room's studies are known only from its ``pipeline.py``.
    """

    def __init__(self) -> None:
        self._built: dict[str, Pipeline] = {}

    def _fixed_names(self) -> list[str]:
        return [*paper_pipeline_names(), REPORT, "__default__"]

    def _build(self, name: str) -> Pipeline:
        papers = paper_pipeline_names()
        if name in papers:
            return room(name).create_pipeline()
        if name == REPORT:
            with warnings.catch_warnings():
                # The scorecard reads every paper's namespaced `<name>.claims`; a node outside
                # those namespaces reading them is the report's purpose, not a naming mistake.
                warnings.filterwarnings("ignore", message="One or more dataset names contain '.'")
                return room(REPORT).create_pipeline(papers=papers)
        if name == "__default__":
            # one Pipeline of all of them (summing them pairwise re-sorts the growing graph)
            return Pipeline([self[paper] for paper in [*papers, REPORT]])
        study = study_pipelines().get(name)
        if study is None:
            raise KeyError(name)
        return study[1]()

    def __getitem__(self, name: str) -> Pipeline:
        if name not in self._built:
            self._built[name] = self._build(name)
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._fixed_names() or name in study_pipelines()

    def __iter__(self) -> Iterator[str]:
        return iter([*self._fixed_names(), *study_pipelines()])

    def __len__(self) -> int:
        return len(self._fixed_names()) + len(study_pipelines())


def register_pipelines() -> ProjectPipelines:
    """Every paper pipeline by name, ``report``, ``__default__`` = all papers, then report, and
    the rooms' studies (not in ``__default__``), each built when first read."""
    return ProjectPipelines()
