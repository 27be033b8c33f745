"""Modules imported on first use, so that ``kedro run`` and ``kedro registry list`` start fast.

Kedro imports every room's ``pipeline.py`` (and through it ``nodes.py``) to list the pipelines
or run ``__default__``, and the room it runs otherwise. A room binds a heavy library with
``torch = lazy_module("torch")`` instead of ``import torch``: the name is a module object whose
first attribute access (``torch.zeros``) imports the real module, so bodies and annotations
(``x: torch.Tensor`` under ``from __future__ import annotations``, resolved by
``typing.get_type_hints`` as Kedro does for node functions) read exactly as before, and the
library is loaded only by the node that uses it.

Names imported *from* a heavy module (``from torch import nn`` used as a base class, a dataclass
defined next to an ``nn.Module``) cannot be deferred this way; rooms import those inside the
functions that use them.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "is_loaded", "lazy_module"]


class LazyModule(ModuleType):
    """Stands for module ``name`` and imports it on the first attribute read.

    Attribute reads are forwarded to the real module on every access (no copy of its namespace
    is kept), so attributes that the module re-binds later are seen as they are; attribute writes
    go to the real module too (``lazy.flag = 1`` sets ``module.flag``).
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        object.__setattr__(self, "_lazy_target", None)

    def _lazy_load(self) -> ModuleType:
        target = object.__getattribute__(self, "_lazy_target")
        if target is None:
            target = importlib.import_module(self.__name__)
            object.__setattr__(self, "_lazy_target", target)
        return target

    def __getattr__(self, attr: str) -> Any:
        # only called for attributes the proxy itself lacks, i.e. all of the module's own
        if attr.startswith("__") and attr.endswith("__") and attr not in _FORWARDED_DUNDERS:
            raise AttributeError(attr)
        return getattr(self._lazy_load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._lazy_load(), attr, value)

    def __dir__(self) -> list[str]:
        return dir(self._lazy_load())

    def __repr__(self) -> str:
        state = "loaded" if object.__getattribute__(self, "_lazy_target") else "not loaded yet"
        return f"<lazy module {self.__name__!r} ({state})>"


# module dunders that code reads from a module (``torch.__version__``, ``pkg.__path__``)
_FORWARDED_DUNDERS = frozenset({"__version__", "__file__", "__path__", "__all__"})


def lazy_module(name: str) -> Any:
    """A stand-in for ``import name`` that imports ``name`` on its first attribute access.

    Typed as ``Any`` so that ``torch = lazy_module("torch")`` does not hide torch's own types from
    an editor any more than a plain ``import torch`` under ``if TYPE_CHECKING`` would.
    """
    return LazyModule(name)


def is_loaded(module: Any) -> bool:
    """Whether ``module`` (a :func:`lazy_module` stand-in or a plain module) has been imported."""
    if isinstance(module, LazyModule):
        return object.__getattribute__(module, "_lazy_target") is not None
    return isinstance(module, ModuleType)
